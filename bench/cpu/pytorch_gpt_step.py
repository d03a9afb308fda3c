#!/usr/bin/env python3
"""PyTorch eager training steps of the trainer's GPT, timed (bench/cpu/vs-pytorch.sh).

  pytorch_gpt_step.py --checkpoint STEP0/optimizer.safetensors --threads N --dtype f32|bf16
      --steps N --json OUT [model and training flags]

The model is tests/trainer/pytorch-reference.py's independent PyTorch GPT on
the trainer's step-0 weights and synthetic sequences, trained with
torch.optim.AdamW, clip_grad_norm_ and gradient accumulation as the trainer
does. fp32 runs it as written; bf16 runs it the way PyTorch users write
mixed precision, under torch.autocast(bfloat16) with fp32 parameters. Each
step (forward and backward of every micro-batch, clipping, the optimizer) is
timed with time.perf_counter; the JSON holds every step's time and loss.
"""
import argparse
import importlib.util
import json
import os
import time

import torch
from safetensors.torch import load_file

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "pytorch_reference", os.path.join(here, "..", "..", "tests", "trainer", "pytorch-reference.py"))
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--dtype", choices=["f32", "bf16"], required=True)
    p.add_argument("--json", required=True)
    p.add_argument("--stop-after", type=int, default=0,
                   help="run only this many of the --steps (the schedule still spans --steps)")
    for name, kind, default in [("vocab", int, 256), ("hidden", int, 256), ("layers", int, 4),
                                ("heads", int, 4), ("seq", int, 256), ("batch", int, 16),
                                ("micro-batch", int, 8), ("steps", int, 8), ("lr", float, 1e-3),
                                ("beta1", float, 0.9), ("beta2", float, 0.95),
                                ("eps", float, 1e-8), ("weight-decay", float, 0.1),
                                ("clip", float, 1.0)]:
        p.add_argument("--" + name, type=kind, default=default)
    a = p.parse_args()
    a.family, a.kv_heads, a.ffn, a.rope_theta, a.warmup = "gpt", a.heads, 0, 10000.0, 0
    mixed = a.dtype == "bf16"
    a.dtype = "f32"  # the model's own per-op rounding is off: autocast does the bf16 work
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)

    tensors = load_file(a.checkpoint)
    masters = {n[: -len(".master")]: t.float() for n, t in tensors.items() if n.endswith(".master")}
    model = ref.Model(a, masters)
    params = list(model.params.values())
    # The trainer's default no_decay = (bias, norm, embedding), by name as in
    # pytorch-reference.py.
    def decays(name):
        norm = any(k in name for k in (".ln1.", ".ln2.", "ln_f."))
        return not (name.endswith(".bias") or norm or name.startswith("pre."))
    optimizer = torch.optim.AdamW(
        [{"params": [t for n, t in model.params.items() if decays(n)],
          "weight_decay": a.weight_decay},
         {"params": [t for n, t in model.params.items() if not decays(n)], "weight_decay": 0.0}],
        lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)
    accumulation = a.batch // a.micro_batch
    batches = []
    for step in range(1, a.steps + 1):
        for mb in range(accumulation):
            rows = [ref.synthetic((step - 1) * a.batch + mb * a.micro_batch + i, a.seq, a.vocab)
                    for i in range(a.micro_batch)]
            batches.append((torch.tensor([r[0] for r in rows]), torch.tensor([r[1] for r in rows])))
    times, losses = [], []
    for step in range(1, (a.stop_after or a.steps) + 1):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for mb in range(accumulation):
            tokens, targets = batches[(step - 1) * accumulation + mb]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
                loss = model.loss(tokens, targets)
            (loss / accumulation).backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(params, a.clip)
        for group in optimizer.param_groups:
            group["lr"] = ref.lr_at(step, a.lr, 0, a.steps)
        optimizer.step()
        times.append(time.perf_counter() - start)
        losses.append(total / accumulation)
    json.dump({"torch": torch.__version__, "threads": a.threads, "dtype": "bf16" if mixed else "f32",
               "step_seconds": times, "losses": losses,
               "tokens_per_step": a.batch * a.seq}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
