#!/usr/bin/env python3
"""Parameter counts of published models by Hugging Face transformers' own
model classes (built on the meta device: no weights, no download), the
independent figures tests/lit/examples/parameter-counts.test holds mistc's
summaries to. Prints a table and writes JSON:

  hf-parameter-counts.py OUT.json     (needs torch and transformers)
"""
import json, sys

import torch
import transformers
from transformers import (FalconConfig, FalconForCausalLM, GPTNeoXConfig, GPTNeoXForCausalLM,
                          LlamaConfig, LlamaForCausalLM)

# (example file, model class, config): the published configurations.
MODELS = [
    ("llama2-7b", LlamaForCausalLM, LlamaConfig(
        vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
        num_attention_heads=32, tie_word_embeddings=False)),
    ("llama3-8b", LlamaForCausalLM, LlamaConfig(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, rope_theta=500000.0,
        tie_word_embeddings=False)),
    ("falcon-7b", FalconForCausalLM, FalconConfig(
        vocab_size=65024, hidden_size=4544, num_hidden_layers=32, num_attention_heads=71,
        multi_query=True, parallel_attn=True, bias=False, alibi=False)),
    ("falcon-40b", FalconForCausalLM, FalconConfig(
        vocab_size=65024, hidden_size=8192, num_hidden_layers=60, num_attention_heads=128,
        num_kv_heads=8, new_decoder_architecture=True, parallel_attn=True, bias=False,
        alibi=False)),
    ("gpt-neox-20b", GPTNeoXForCausalLM, GPTNeoXConfig(
        vocab_size=50432, hidden_size=6144, intermediate_size=24576, num_hidden_layers=44,
        num_attention_heads=64, rotary_pct=0.25, use_parallel_residual=True,
        tie_word_embeddings=False)),
]


def count(cls, config):
    with torch.device("meta"):
        model = cls(config)
    return sum(p.numel() for p in model.parameters())


rows = [{"model": name, "hf_class": cls.__name__, "parameters": count(cls, cfg)} for name, cls, cfg in MODELS]
for r in rows:
    print(f"{r['model']:52} {r['hf_class']:20} {r['parameters']:>16,}")
json.dump({"transformers": transformers.__version__, "torch": torch.__version__, "models": rows},
          open(sys.argv[1], "w"), indent=1)
