#!/usr/bin/env python3
"""An independent PyTorch reference for the trainer's losses, in fp32 and in bf16.

  pytorch-reference.py --family gpt|llama --checkpoint STEP0/optimizer.safetensors
      --trainer-log LOG --dtype f32|bf16 --tolerance T [model and training flags]

Builds the tiny GPT or Llama in plain PyTorch, loads the trainer's step-0
checkpoint with the official `safetensors` reader (the fp32 master weights),
trains it on the trainer's synthetic sequences with torch.optim.AdamW (no
weight decay on biases, norms and embedding tables, the language's default),
torch.nn.utils.clip_grad_norm_ and the trainer's learning-rate schedule, and
compares every step's loss with the trainer's log: each within T relative.

bf16 is Megatron-LM's mixed precision, which the trainer runs: bf16 weights
rounded from fp32 masters, every op computing in fp32 from bf16 inputs and
rounding its output (and, in the backward, the gradient it passes on) to bf16
once, fp32 weight gradients and optimizer. `torch.autocast(bfloat16)` on its
own keeps the residual stream, the norms and the additions in fp32, so the
reference applies the rounding at each op boundary instead (`BF16`, an
autograd function), on top of PyTorch's own ops. Exit status 1 on a mismatch.
"""
import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

MASK64 = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def synthetic(k, seq, vocab):
    """Sequence k of the trainer's synthetic data (runtime/trainer/StageRunner.cpp)."""
    h = splitmix64((k * 7919 + 17) & MASK64)
    start, stride = h % vocab, 1 + (h >> 20) % 7
    tokens = [(start + t * stride) % vocab for t in range(seq)]
    targets = [(start + (t + 1) * stride) % vocab for t in range(seq)]
    return tokens, targets


def lr_at(step, lr, warmup, total):
    """The trainer's schedule (LrSchedule::at): linear warmup, cosine to 0.1 lr."""
    if warmup > 0 and step <= warmup:
        return lr * step / warmup
    if total <= warmup:
        return lr
    span, into = total - warmup, min(step - warmup, total - warmup)
    return lr * (0.1 + 0.45 * (1 + math.cos(math.pi * into / span)))


class BF16(torch.autograd.Function):
    """Rounds to bf16 going forward and the gradient going back (kept as fp32 values)."""

    @staticmethod
    def forward(ctx, x):
        return x.to(torch.bfloat16).to(torch.float32)

    @staticmethod
    def backward(ctx, g):
        return g.to(torch.bfloat16).to(torch.float32)


class Model:
    def __init__(self, a, masters):
        self.a = a
        self.params = {n: torch.nn.Parameter(t.clone()) for n, t in masters.items()}
        self.round = BF16.apply if a.dtype == "bf16" else (lambda x: x)

    def w(self, name):
        # bf16 weights are the masters rounded; their gradients stay fp32.
        return self.round(self.params[name])

    def attention(self, q, k, v, batch, heads, kv_heads):
        a = self.a
        hd = a.hidden // heads
        q = q.view(batch, a.seq, heads, hd).transpose(1, 2)
        k = k.view(batch, a.seq, kv_heads, hd).transpose(1, 2)
        v = v.view(batch, a.seq, kv_heads, hd).transpose(1, 2)
        if kv_heads != heads:
            k = k.repeat_interleave(heads // kv_heads, dim=1)
            v = v.repeat_interleave(heads // kv_heads, dim=1)
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return ctx.transpose(1, 2).reshape(batch, a.seq, heads * hd)

    def rope(self, x, heads):
        """Rotary embedding on consecutive pairs (stdlib/kernels/rope/RopeRef.cpp)."""
        a = self.a
        batch, hd = x.shape[0], a.hidden // a.heads
        x = x.view(batch, a.seq, heads, hd // 2, 2)
        i = torch.arange(0, hd, 2, dtype=torch.float64)
        angle = torch.arange(a.seq, dtype=torch.float64)[:, None] * a.rope_theta ** (-i / hd)
        c = angle.cos().float()[None, :, None, :]
        s = angle.sin().float()[None, :, None, :]
        x0, x1 = x[..., 0], x[..., 1]
        out = torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1)
        return out.view(batch, a.seq, heads * hd)

    def loss(self, tokens, targets):
        a, r, w = self.a, self.round, self.w
        batch = tokens.shape[0]
        if a.family == "gpt":
            x = r(r(F.embedding(tokens, w("pre.embedding.weight")))
                  + w("pre.position_embedding.weight")[None])
            for l in range(a.layers):
                p = f"layers.{l}."
                ln1 = r(F.layer_norm(x, (a.hidden,), w(p + "ln1.weight"), w(p + "ln1.bias"), 1e-5))
                qkv = r(ln1 @ w(p + "attn.qkv.weight") + w(p + "attn.qkv.bias"))
                q, k, v = qkv.split(a.hidden, dim=-1)
                ctx = r(self.attention(q, k, v, batch, a.heads, a.heads))
                x = r(x + r(ctx @ w(p + "attn.out.weight") + w(p + "attn.out.bias")))
                ln2 = r(F.layer_norm(x, (a.hidden,), w(p + "ln2.weight"), w(p + "ln2.bias"), 1e-5))
                fc1 = r(ln2 @ w(p + "mlp.fc1.weight") + w(p + "mlp.fc1.bias"))
                act = r(F.gelu(fc1, approximate="tanh" if a.gelu == "tanh" else "none"))
                x = r(x + r(act @ w(p + "mlp.fc2.weight") + w(p + "mlp.fc2.bias")))
            norm = r(F.layer_norm(x, (a.hidden,), w("post.ln_f.weight"), w("post.ln_f.bias"), 1e-5))
            logits = r(norm @ w("pre.embedding.weight").t())
        else:
            x = r(F.embedding(tokens, w("pre.x.weight")))
            for l in range(a.layers):
                p = f"layers.{l}."
                n1 = r(F.rms_norm(x, (a.hidden,), w(p + "attn_norm.weight"), 1e-5))
                q = r(self.rope(r(n1 @ w(p + "attn.q.weight")), a.heads))
                k = r(self.rope(r(n1 @ w(p + "attn.k.weight")), a.kv_heads))
                v = r(n1 @ w(p + "attn.v.weight"))
                ctx = r(self.attention(q, k, v, batch, a.heads, a.kv_heads))
                x = r(x + r(ctx @ w(p + "attn.o.weight")))
                n2 = r(F.rms_norm(x, (a.hidden,), w(p + "mlp_norm.weight"), 1e-5))
                gate = r(n2 @ w(p + "mlp.gate.weight"))
                up = r(n2 @ w(p + "mlp.up.weight"))
                x = r(x + r(r(r(F.silu(gate)) * up) @ w(p + "mlp.down.weight")))
            norm = r(F.rms_norm(x, (a.hidden,), w("post.norm.weight"), 1e-5))
            logits = r(norm @ w("post.logits.weight").t())
        # The loss and its softmax in fp32, from the (bf16) logits.
        return F.cross_entropy(logits.reshape(-1, a.vocab), targets.reshape(-1))


def trainer_losses(path):
    losses = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 4 and f[0] == "step" and f[2] == "loss":
            losses[int(f[1])] = float(f[3])
    return losses


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--family", choices=["gpt", "llama"], required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--trainer-log", required=True)
    p.add_argument("--dtype", choices=["f32", "bf16"], required=True)
    p.add_argument("--tolerance", type=float, required=True)
    p.add_argument("--json", help="write the two loss curves here")
    p.add_argument("--first-step-tolerance", type=float,
                   help="a tighter bound for step 1, before the runs' rounding differences "
                        "have fed back through an update")
    p.add_argument("--gelu", choices=["tanh", "exact"], default="tanh",
                   help="GPT's GELU form (the model's approximate_gelu = true / false)")
    p.add_argument("--contrast-log",
                   help="the log of a run that differs in what this check must tell apart "
                        "(the other precision, the other GELU form): its step-1 loss must be "
                        "at least 5 times farther from PyTorch's than the trainer's is")
    p.add_argument("--contrast-over", choices=["first", "all"], default="first",
                   help="compare the contrast run at step 1 (a precision: later steps carry "
                        "rounding differences forward) or at its worst step (the GELU forms: "
                        "they part as training grows the activations)")
    for name, kind, default in [("vocab", int, 256), ("hidden", int, 64), ("layers", int, 2),
                                ("heads", int, 4), ("kv-heads", int, 0), ("ffn", int, 0),
                                ("seq", int, 64), ("batch", int, 16), ("micro-batch", int, 4),
                                ("steps", int, 50), ("lr", float, 1e-3), ("beta1", float, 0.9),
                                ("beta2", float, 0.95), ("eps", float, 1e-8),
                                ("weight-decay", float, 0.1), ("clip", float, 1.0),
                                ("warmup", int, 0), ("rope-theta", float, 10000.0)]:
        p.add_argument("--" + name, type=kind, default=default)
    a = p.parse_args()
    a.kv_heads = a.kv_heads or a.heads
    torch.manual_seed(0)
    torch.set_num_threads(1)

    tensors = load_file(a.checkpoint)
    masters = {n[: -len(".master")]: t.float() for n, t in tensors.items() if n.endswith(".master")}
    model = Model(a, masters)
    params = list(model.params.values())
    # The language's default no_decay = (bias, norm, embedding), told apart
    # here by name: biases, the norms' weights and biases, the token and
    # position tables (GPT's LM head is the token table).
    def decays(name):
        norm = any(k in name for k in (".ln1.", ".ln2.", "ln_f.", "_norm.", "post.norm."))
        table = name in ("pre.embedding.weight", "pre.position_embedding.weight", "pre.x.weight")
        return not (name.endswith(".bias") or norm or table)
    decayed = [t for n, t in model.params.items() if decays(n)]
    kept = [t for n, t in model.params.items() if not decays(n)]
    optimizer = torch.optim.AdamW([{"params": decayed, "weight_decay": a.weight_decay},
                                   {"params": kept, "weight_decay": 0.0}],
                                  lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)
    expected = trainer_losses(a.trainer_log)
    accumulation = a.batch // a.micro_batch
    ours, bad = {}, []
    for step in range(1, a.steps + 1):
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for mb in range(accumulation):
            rows = [synthetic((step - 1) * a.batch + mb * a.micro_batch + i, a.seq, a.vocab)
                    for i in range(a.micro_batch)]
            tokens = torch.tensor([r[0] for r in rows])
            targets = torch.tensor([r[1] for r in rows])
            loss = model.loss(tokens, targets)
            (loss / accumulation).backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(params, a.clip)
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, a.lr, a.warmup, a.steps)
        optimizer.step()
        ours[step] = total / accumulation
        theirs = expected.get(step)
        rel = abs(ours[step] - theirs) / theirs if theirs is not None else float("inf")
        if rel > a.tolerance:
            bad.append(f"step {step}: PyTorch {ours[step]:.6f}, trainer {theirs}")
        if step in (1, 2, 5, 10, 20, 30, 40, 50) or step == a.steps:
            print(f"step {step:3d}  PyTorch {ours[step]:.6f}  trainer {theirs:.6f}  rel {rel:.2e}")
    worst = max(abs(ours[s] - expected[s]) / expected[s] for s in ours if s in expected)
    first = abs(ours[1] - expected[1]) / expected[1]
    if a.first_step_tolerance is not None and first > a.first_step_tolerance:
        bad.append(f"step 1: {first:.2e} relative, above {a.first_step_tolerance:g}")
    if a.contrast_log:
        contrast = trainer_losses(a.contrast_log)
        steps = [1] if a.contrast_over == "first" else [s for s in ours if s in contrast]
        mine = first if a.contrast_over == "first" else worst
        other = max(abs(ours[s] - contrast[s]) / ours[s] for s in steps)
        where = "step 1" if a.contrast_over == "first" else "worst step"
        print(f"{where}: {mine:.2e} from this trainer, {other:.2e} from the contrast run's")
        if not other >= 5 * mine:
            bad.append(f"{where}: the contrast run's loss is as close ({other:.2e}) as this "
                       f"run's ({mine:.2e}): the check cannot tell the two apart")
    print(f"{a.family} {a.dtype} (GELU {a.gelu}): {a.steps} steps, worst relative difference {worst:.2e} "
          f"(tolerance {a.tolerance:g})")
    if a.json:
        json.dump({"family": a.family, "dtype": a.dtype, "gelu": a.gelu, "tolerance": a.tolerance, "worst": worst,
                   "pytorch": ours, "trainer": {s: expected[s] for s in ours if s in expected},
                   "torch": torch.__version__}, open(a.json, "w"), indent=1)
    if bad:
        print("mismatch:\n  " + "\n  ".join(bad[:10]))
        sys.exit(1)


if __name__ == "__main__":
    main()
