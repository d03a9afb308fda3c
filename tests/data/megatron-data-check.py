#!/usr/bin/env python3
"""mistc's reading of Megatron-LM indexed datasets against Megatron-LM's own.

Writes datasets with Megatron-Core's IndexedDatasetBuilder (uint16 and int32
tokens, documents of 1 to 3 sequences, lengths from 1 token to several
samples), builds the training split with Megatron-Core's
BlendedMegatronDatasetBuilder and GPTDataset for several --data-path /
--split / --seed / sample-count configurations (one epoch, several epochs
with and without a separate final epoch, weighted and size-weighted blends),
and compares every training sample's tokens with `mist-data samples`, the
code the trainer reads them with.

    megatron-data-check.py MIST_DATA WORKDIR [OUT.json]

Exits 0 when every sample of every configuration is equal, 1 otherwise.
"""
import json
import os
import re
import subprocess
import sys

import numpy
import torch
from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
from megatron.core.datasets.utils import get_blend_from_list


class Tokenizer:
    """What GPTDataset asks of a tokenizer when its samples are read."""
    eod = 0
    vocab_size = None  # take each index's token type
    unique_identifiers = {"class": "Tokenizer"}  # for the datasets' descriptions


def write_dataset(prefix, dtype, documents, rng, vocab):
    builder = IndexedDatasetBuilder(prefix + ".bin", dtype=dtype)
    for _ in range(documents):
        lengths = [int(rng.choice([1, 3, 17, 40, 90, 260])) + int(rng.integers(0, 5))
                   for _ in range(int(rng.integers(1, 4)))]
        tokens = torch.from_numpy(rng.integers(0, vocab, sum(lengths)).astype(numpy.int64))
        builder.add_document(tokens, lengths)
    builder.finalize(prefix + ".idx")


def megatron_samples(words, split, seed, seq_len, samples):
    config = GPTDatasetConfig(
        random_seed=seed, sequence_length=seq_len, blend=get_blend_from_list(words),
        split=split, path_to_cache=None, tokenizer=Tokenizer(), reset_position_ids=False,
        reset_attention_mask=False, eod_mask_loss=False, mmap_bin_files=True)
    train, _, _ = BlendedMegatronDatasetBuilder(
        GPTDataset, [samples, 8, 8], lambda: True, config).build()
    out = []
    for j in range(samples):
        item = train[j]
        out.append(item["tokens"].tolist() + [int(item["labels"][-1])])
    return out


def mist_samples(mist_data, words, split, seed, seq_len, samples):
    run = subprocess.run(
        [mist_data, "samples", "--data-path", *words, "--split", split, "--seed", str(seed),
         "--seq-len", str(seq_len), "--samples", str(samples), "--count", str(samples)],
        capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"mist-data failed: {run.stderr}")
    epochs = re.findall(r"(\d+) epochs?\)", run.stderr)  # from its summary line
    return [json.loads(line)["tokens"] for line in run.stdout.splitlines()], "+".join(epochs)


def main():
    mist_data, work = sys.argv[1], sys.argv[2]
    out_json = sys.argv[3] if len(sys.argv) > 3 else None
    os.makedirs(work, exist_ok=True)
    rng = numpy.random.default_rng(11)
    a, b, c = (os.path.join(work, n) for n in ("a", "b", "c"))
    write_dataset(a, numpy.uint16, 300, rng, 50257)
    write_dataset(b, numpy.int32, 120, rng, 128256)
    write_dataset(c, numpy.uint16, 40, rng, 50257)
    # (name, --data-path words, --split, seed, T, samples). Megatron-LM builds
    # the valid and test splits too and loops forever on an empty one that is
    # asked for samples, so every split here holds sequences of every dataset.
    cases = [
        ("one dataset, part of an epoch", [a], "969,30,1", 1234, 64, 200),
        ("one dataset, 6 epochs (the last apart)", [b], "98,2,0", 7, 128, 700),
        ("one dataset, 3 epochs (the last shuffled in)", [c], "100,0,0", 3, 32, 415),
        ("one dataset with a weight", ["1", a], "90,5,5", 1234, 48, 333),
        ("weighted blend of 3", ["0.5", a, "0.3", b, "0.2", c], "90,8,2", 99, 64, 400),
        ("weighted blend, many epochs of the small one", ["30", a, "70", c], "90,8,2", 5, 16,
         3000),
        ("blend weighted by size", [a, c], "80,12,8", 1234, 32, 150),
    ]
    results, failures = [], 0
    for name, words, split, seed, seq_len, samples in cases:
        expected = megatron_samples(words, split, seed, seq_len, samples)
        got, epochs = mist_samples(mist_data, words, split, seed, seq_len, samples)
        n = min(len(expected), len(got))
        equal = sum(1 for j in range(n) if expected[j] == got[j])
        first_bad = next((j for j in range(n) if expected[j] != got[j]), None)
        ok = len(expected) == len(got) and equal == n
        failures += not ok
        results.append({"case": name, "data_path": " ".join(os.path.basename(w) for w in words),
                        "split": split, "seed": seed, "seq_len": seq_len, "epochs": epochs,
                        "samples_megatron": len(expected), "samples_mistc": len(got),
                        "equal": equal, "first_difference": first_bad, "ok": ok})
    print(f"{'case':48} {'T':>4} {'epochs':>7} {'samples':>8} {'equal':>8}  result")
    for r in results:
        print(f"{r['case']:48} {r['seq_len']:>4} {r['epochs']:>7} {r['samples_megatron']:>8} "
              f"{r['equal']:>8}  "
              f"{'ok' if r['ok'] else 'DIFFERENT (first at %s)' % r['first_difference']}")
    import megatron.core
    record = {"megatron_core": getattr(megatron.core, "__version__", "unknown"),
              "numpy": numpy.__version__, "cases": results}
    if out_json:
        with open(out_json, "w") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
    print(f"{len(results) - failures} of {len(results)} configurations read the same samples")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
