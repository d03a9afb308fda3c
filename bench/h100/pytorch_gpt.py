#!/usr/bin/env python3
"""Plain PyTorch GPT training step: the single-GPU reference for mistc's throughput claims.

GPT-3 style model: learned position embedding, pre-LayerNorm blocks, one fused qkv Linear,
torch.nn.functional.scaled_dot_product_attention(is_causal=True) (flash attention on the GPU),
GELU(tanh) MLP of width 4h, final LayerNorm, LM head tied to the token embedding. bf16 autocast
over fp32 parameters, AdamW (fused on CUDA, plain on CPU), optional activation checkpointing
per block (torch.utils.checkpoint), eager or torch.compile. Synthetic random tokens, fixed seed.

Model FLOPs per iteration by the Megatron formula (Narayanan et al. 2021, eq. 3)

    72 * B * s * L * h^2 * (1 + s/(6h) + V/(12 L h))

with B the global batch in sequences (micro-batch x grad-accum), s the sequence length,
L layers, h hidden size and V the vocabulary size *as the model has it*: 50304 for the GPT-3
models (50257 padded to a multiple of 128, as Megatron-LM does and as examples/gpt3-*.mist
have it), 256 for the tiny model. The model and the formula use the same V.

    python3 bench/h100/pytorch_gpt.py --model gpt3-1.3b --micro-batch 4 --mode compile --json out.json

The torch import is deferred to the training path, so the FLOPs helpers can be used (and
checked) without PyTorch: python3 bench/h100/pytorch_gpt.py --model gpt3-1.3b --print-flops
"""

import argparse
import datetime
import json
import math
import platform
import statistics
import sys
import time

# name -> layers L, hidden h, heads, vocabulary V (as used by the model and by the formula), seq s
MODELS = {
    "gpt3-1.3b": dict(layers=24, hidden=2048, heads=16, vocab=50304, seq=2048),
    "gpt3-2.7b": dict(layers=32, hidden=2560, heads=32, vocab=50304, seq=2048),
    "gpt3-6.7b": dict(layers=32, hidden=4096, heads=32, vocab=50304, seq=2048),
    "tiny": dict(layers=2, hidden=64, heads=4, vocab=256, seq=64),
}

SEED = 1234


def model_flops_per_iteration(batch, seq, layers, hidden, vocab):
    """Megatron model FLOPs of one training iteration (forward + backward, no recomputation)."""
    B, s, L, h, V = batch, seq, layers, hidden, vocab
    return 72.0 * B * s * L * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * L * h))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=sorted(MODELS), default="gpt3-1.3b")
    p.add_argument("--micro-batch", type=int, default=4, help="sequences per micro-batch")
    p.add_argument("--grad-accum", type=int, default=1,
                   help="micro-batches per iteration (optimizer step); global batch B = micro-batch x grad-accum")
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--steps", type=int, default=10, help="timed iterations (after warmup)")
    p.add_argument("--warmup", type=int, default=3,
                   help="untimed iterations first (compilation happens here in --mode compile)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--activation-checkpointing", action="store_true",
                   help="recompute every block in the backward (torch.utils.checkpoint, non-reentrant)")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--json", metavar="OUT", help="write the result object to this file")
    p.add_argument("--print-flops", action="store_true",
                   help="print the model FLOPs per iteration for these settings and exit (no PyTorch needed)")
    a = p.parse_args(argv)
    if a.micro_batch < 1 or a.grad_accum < 1 or a.steps < 1 or a.warmup < 0:
        p.error("--micro-batch, --grad-accum and --steps must be >= 1, --warmup >= 0")
    if a.mode == "compile" and a.warmup < 1:
        p.error("--mode compile needs --warmup >= 1 (the first iteration compiles)")
    return a


# --------------------------------------------------------------------------------------------
# Model (defined only when PyTorch is importable)

def _define_model(torch):
    nn = torch.nn
    F = torch.nn.functional
    from torch.utils.checkpoint import checkpoint

    class Block(nn.Module):
        def __init__(self, hidden, heads):
            super().__init__()
            assert hidden % heads == 0
            self.heads = heads
            self.ln1 = nn.LayerNorm(hidden)
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.proj = nn.Linear(hidden, hidden)
            self.ln2 = nn.LayerNorm(hidden)
            self.fc1 = nn.Linear(hidden, 4 * hidden)
            self.fc2 = nn.Linear(4 * hidden, hidden)

        def forward(self, x):
            B, T, C = x.shape
            hd = C // self.heads
            qkv = self.qkv(self.ln1(x)).view(B, T, 3, self.heads, hd)
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each [B, heads, T, hd]
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).reshape(B, T, C)
            x = x + self.proj(y)
            x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
            return x

    class GPT(nn.Module):
        def __init__(self, layers, hidden, heads, vocab, seq, activation_checkpointing=False):
            super().__init__()
            self.activation_checkpointing = activation_checkpointing
            self.wte = nn.Embedding(vocab, hidden)
            self.wpe = nn.Embedding(seq, hidden)
            self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
            self.ln_f = nn.LayerNorm(hidden)
            # GPT-2/Megatron initialisation: N(0, 0.02), output projections scaled by 1/sqrt(2L).
            out_std = 0.02 / math.sqrt(2.0 * layers)
            for name, prm in self.named_parameters():
                if name.endswith(".bias"):
                    nn.init.zeros_(prm)
                elif "ln" in name:
                    nn.init.ones_(prm)
                elif name.endswith("proj.weight") or name.endswith("fc2.weight"):
                    nn.init.normal_(prm, 0.0, out_std)
                else:
                    nn.init.normal_(prm, 0.0, 0.02)

        def forward(self, idx, targets):
            T = idx.shape[1]
            pos = torch.arange(T, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.blocks:
                if self.activation_checkpointing and self.training:
                    x = checkpoint(blk, x, use_reentrant=False)
                else:
                    x = blk(x)
            x = self.ln_f(x)
            logits = F.linear(x, self.wte.weight)  # tied LM head
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))

    return GPT


# --------------------------------------------------------------------------------------------

def run(a):
    try:
        import torch
    except ImportError:
        sys.exit("pytorch_gpt.py: PyTorch is not installed (python3 -c 'import torch' fails); "
                 "--print-flops works without it")

    cfg = MODELS[a.model]
    L, h, heads, V, s = cfg["layers"], cfg["hidden"], cfg["heads"], cfg["vocab"], cfg["seq"]
    on_cuda = a.device == "cuda"
    if on_cuda and not torch.cuda.is_available():
        sys.exit("pytorch_gpt.py: --device cuda but torch.cuda.is_available() is False (use --device cpu)")
    device = torch.device(a.device)

    torch.manual_seed(SEED)
    torch.set_float32_matmul_precision("high")

    GPT = _define_model(torch)
    with device:  # build the parameters on the device directly
        model = GPT(L, h, heads, V, s, a.activation_checkpointing)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    opt_kw = dict(lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    opt = torch.optim.AdamW(groups, fused=True, **opt_kw) if on_cuda else torch.optim.AdamW(groups, **opt_kw)

    step_model = torch.compile(model) if a.mode == "compile" else model

    # Synthetic data: one fixed batch of random tokens per micro-step (seeded), reused each iteration.
    gen = torch.Generator(device="cpu").manual_seed(SEED)
    tokens = torch.randint(0, V, (a.grad_accum, a.micro_batch, s + 1), generator=gen).to(device)
    inputs = tokens[:, :, :-1].contiguous()
    targets = tokens[:, :, 1:].contiguous()

    def iteration():
        total = torch.zeros((), device=device)
        for m in range(a.grad_accum):
            with torch.autocast(device_type=a.device, dtype=torch.bfloat16):
                loss = step_model(inputs[m], targets[m])
            (loss / a.grad_accum).backward()
            total += loss.detach()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return total / a.grad_accum

    global_batch = a.micro_batch * a.grad_accum
    print(f"model {a.model}: L={L} h={h} heads={heads} V={V} s={s}, {n_params / 1e9:.3f} B parameters; "
          f"micro-batch {a.micro_batch} x grad-accum {a.grad_accum} = {global_batch} sequences; "
          f"mode {a.mode}; activation checkpointing {'on' if a.activation_checkpointing else 'off'}; "
          f"device {a.device}; torch {torch.__version__}", flush=True)

    device_name = torch.cuda.get_device_name() if on_cuda else (platform.processor() or platform.machine() or "cpu")
    flops = model_flops_per_iteration(global_batch, s, L, h, V)
    result = {
        "model": a.model,
        "mode": a.mode,
        "micro_batch": a.micro_batch,
        "grad_accum": a.grad_accum,
        "iteration_s_median": None,
        "iteration_s_all": [],
        "tflops": None,
        "tokens_per_s": None,
        "peak_memory_gib": None,
        "device_name": device_name,
        "torch_version": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        # context
        "device": a.device,
        "activation_checkpointing": a.activation_checkpointing,
        "global_batch": global_batch,
        "seq_len": s,
        "layers": L,
        "hidden": h,
        "heads": heads,
        "vocab": V,
        "parameters": n_params,
        "model_flops_per_iteration": flops,
        "mfu_vs_989_tflops": None,
        "cuda_version": torch.version.cuda,
        "loss_last": None,
        "steps": a.steps,
        "warmup": a.warmup,
        "error": None,
    }

    try:
        t0 = time.perf_counter()
        warm_losses = [iteration() for _ in range(a.warmup)]
        if on_cuda:
            torch.cuda.synchronize()
        warm_values = [l.item() for l in warm_losses]
        for i, l in enumerate(warm_values):
            print(f"warmup {i}: loss {l:.4f}")
        print(f"warmup ({a.warmup} iterations{', compiling' if a.mode == 'compile' else ''}): "
              f"{time.perf_counter() - t0:.1f} s", flush=True)

        if on_cuda:
            torch.cuda.reset_peak_memory_stats()
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
        losses, times = [], []
        for i in range(a.steps):
            if on_cuda:
                starts[i].record()
                losses.append(iteration())
                ends[i].record()
            else:
                t = time.perf_counter()
                losses.append(iteration())
                times.append(time.perf_counter() - t)
        if on_cuda:
            torch.cuda.synchronize()
            times = [st.elapsed_time(en) / 1e3 for st, en in zip(starts, ends)]
        loss_values = [l.item() for l in losses]
    except torch.cuda.OutOfMemoryError as e:
        # Recorded as a row (the reference has configurations that do not fit), not a crash.
        peak = torch.cuda.max_memory_allocated() / 2**30 if on_cuda else None
        result["error"] = "out of memory"
        result["peak_memory_gib"] = peak
        first_line = (str(e).splitlines() or [""])[0]
        print(f"pytorch_gpt.py: {a.model} {a.mode}: CUDA out of memory "
              f"(peak allocated {peak:.1f} GiB): {first_line}", file=sys.stderr)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(result, f, indent=2)
                f.write("\n")
        sys.exit(2)

    for i, (l, t) in enumerate(zip(loss_values, times)):
        print(f"step {i}: loss {l:.4f}  {t * 1e3:.1f} ms")
    if not all(math.isfinite(l) for l in warm_values + loss_values):
        sys.exit(f"pytorch_gpt.py: non-finite loss: warmup {warm_values}, timed {loss_values}")

    med = statistics.median(times)
    tflops = flops / med / 1e12
    tokens_per_s = global_batch * s / med
    peak_gib = torch.cuda.max_memory_allocated() / 2**30 if on_cuda else None
    result.update({
        "iteration_s_median": med,
        "iteration_s_all": times,
        "tflops": tflops,
        "tokens_per_s": tokens_per_s,
        "peak_memory_gib": peak_gib,
        "mfu_vs_989_tflops": tflops / 989.0 if on_cuda else None,
        "loss_last": loss_values[-1],
    })
    mem = f"{peak_gib:.1f} GiB peak" if peak_gib is not None else "peak memory n/a"
    print(f"{a.model} {a.mode}{' +ckpt' if a.activation_checkpointing else ''}: median {med * 1e3:.1f} ms/iter, "
          f"{tokens_per_s:,.0f} tokens/s, {tflops:.1f} TFLOP/s (model FLOPs {flops:.4e}/iter), {mem}, "
          f"loss {loss_values[-1]:.4f}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return result


def main(argv=None):
    a = parse_args(argv)
    if a.print_flops:
        cfg = MODELS[a.model]
        B = a.micro_batch * a.grad_accum
        f = model_flops_per_iteration(B, cfg["seq"], cfg["layers"], cfg["hidden"], cfg["vocab"])
        print(f"{a.model}: B={B} s={cfg['seq']} L={cfg['layers']} h={cfg['hidden']} V={cfg['vocab']}: "
              f"{f:.6e} model FLOPs per iteration")
        return 0
    run(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
