#!/usr/bin/env python3
"""Hugging Face weights into the trainer, checked by transformers itself.

  hf-import-check.py make --config-from DIR --out HF_DIR [--seed N] [--shard-size SIZE]
      A transformers model of the config in DIR (what mistc --emit=hf wrote
      for the .mist model), its weights drawn at random by torch (norm
      weights around 1, biases N(0, 0.1), every other tensor N(0, 0.15), so that attention
      and the head's predictions are far from uniform and a misplaced row shows),
      saved by transformers' own save_pretrained (safetensors; sharded when
      --shard-size is given).
  hf-import-check.py loss --dir HF_DIR --metrics METRICS.jsonl [--batch 16 --seq 64]
      [--tolerance 1e-6]
      The model's loss on the trainer's first synthetic batch
      (pytorch-reference.py's `synthetic`) against the step-1 loss the
      trainer wrote to its metrics (a run started with --init-from from
      mistc --emit=checkpoint --from-hf HF_DIR). Exit status 1 on a mismatch.
"""
import argparse
import importlib.util
import json
import os
import sys

import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModelForCausalLM

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("reference", os.path.join(here, "pytorch-reference.py"))
reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reference)


def make(a):
    config = AutoConfig.from_pretrained(a.config_from)
    torch.manual_seed(a.seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ("norm" in name or "ln" in name) and name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn_like(p))
            else:  # large enough that attention and the head are far from uniform
                p.copy_(0.15 * torch.randn_like(p))
    kwargs = {"max_shard_size": a.shard_size} if a.shard_size else {}
    model.save_pretrained(a.out, safe_serialization=True, **kwargs)
    files = sorted(f for f in os.listdir(a.out) if f.endswith(".safetensors"))
    print(f"{type(model).__name__} saved to {a.out} ({len(files)} safetensors file"
          f"{'s' if len(files) > 1 else ''})")


def loss(a):
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(a.dir, dtype=torch.float32)
    model.eval()
    vocab = model.config.vocab_size
    rows = [reference.synthetic(i, a.seq, vocab) for i in range(a.batch)]
    tokens = torch.tensor([r[0] for r in rows])
    targets = torch.tensor([r[1] for r in rows])
    with torch.no_grad():
        logits = model(input_ids=tokens).logits.float()
    ours = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1)).item()
    trainer = None
    for line in open(a.metrics):
        record = json.loads(line)
        if record["step"] == 1:
            trainer = record["loss"]
    if trainer is None:
        sys.exit(f"no step 1 in {a.metrics}")
    rel = abs(ours - trainer) / abs(trainer)
    print(f"{type(model).__name__} {a.dir}: transformers' loss {ours:.9f}, the trainer's step 1 "
          f"{trainer:.9f}, relative {rel:.1e} (tolerance {a.tolerance:g})")
    if not rel <= a.tolerance:
        sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--config-from", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--shard-size")
    l = sub.add_parser("loss")
    l.add_argument("--dir", required=True)
    l.add_argument("--metrics", required=True)
    l.add_argument("--batch", type=int, default=16)
    l.add_argument("--seq", type=int, default=64)
    l.add_argument("--tolerance", type=float, default=1e-6)
    a = p.parse_args()
    make(a) if a.command == "make" else loss(a)


if __name__ == "__main__":
    main()
