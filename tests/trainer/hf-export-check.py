#!/usr/bin/env python3
"""Loads a model folder written by `mistc --emit=hf` with Hugging Face
transformers (AutoModelForCausalLM, nothing of mistc's) and checks its loss on
the batch of one training step against the loss the trainer logged there.

  hf-export-check.py --dir DIR --trainer-log LOG --step N [--batch 16 --seq 64]
      [--tolerance 1e-5] [--expect-class GPT2LMHeadModel]

The trainer's step-N loss is computed with the weights after step N-1 on the
step's synthetic sequences (pytorch-reference.py's `synthetic`): export the
checkpoint written after step N-1. Exit status 1 on a mismatch.
"""
import argparse
import importlib.util
import os
import sys

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("reference", os.path.join(here, "pytorch-reference.py"))
reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reference)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", required=True)
    p.add_argument("--trainer-log", required=True)
    p.add_argument("--step", type=int, required=True)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--expect-class")
    p.add_argument("--expect-activation",
                   help="the config's activation (GPT-2's activation_function, Llama's hidden_act)")
    a = p.parse_args()
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(a.dir, dtype=torch.float32)
    model.eval()
    name = type(model).__name__
    if a.expect_class and name != a.expect_class:
        sys.exit(f"transformers built {name}, expected {a.expect_class}")
    cfg = model.config
    activation = getattr(cfg, "activation_function", None) or getattr(cfg, "hidden_act", None)
    if a.expect_activation and activation != a.expect_activation:
        sys.exit(f"the config's activation is {activation}, expected {a.expect_activation}")
    vocab = model.config.vocab_size
    rows = [reference.synthetic((a.step - 1) * a.batch + i, a.seq, vocab) for i in range(a.batch)]
    tokens = torch.tensor([r[0] for r in rows])
    targets = torch.tensor([r[1] for r in rows])
    with torch.no_grad():
        logits = model(input_ids=tokens).logits.float()
    loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1)).item()
    trainer = reference.trainer_losses(a.trainer_log)[a.step]
    rel = abs(loss - trainer) / trainer
    print(f"{name} from {a.dir}: step {a.step} loss {loss:.7f}, trainer {trainer:.6f}, "
          f"relative {rel:.1e} (tolerance {a.tolerance:g})")
    if not rel <= a.tolerance:
        sys.exit(1)


if __name__ == "__main__":
    main()
