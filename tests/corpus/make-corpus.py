#!/usr/bin/env python3
"""Writes the adversarial corpus (tests/corpus/<format>/) from the cases below.

  make-corpus.py [OUT_DIR]      (default: the folder of this script)

Every input is malformed in one way (or, with a name starting `ok-`, is an
odd but valid input that must be accepted). run-corpus.py feeds each file to
the program that reads its format and checks that the program ends with a
located error (or accepts an `ok-` file): no crash, no sanitizer report, no
hang. The files are committed; this script is how they were made, so a case
can be changed here and the corpus rewritten. Standard library only.
"""
import json
import os
import struct
import sys

MIST_BASE = """import "gpt"
model m = gpt(vocab = 256, hidden = 64, layers = 2, heads = 4)
train {
  global_batch = 16
  seq_len = 64
}
"""

MIST_CASES = {
    # Bytes and characters.
    "empty": "",
    "only-comment": "// nothing but a comment\n",
    "bom-then-garbage": "\ufeff@@@ model\n",
    "nul-in-identifier": "import \"gpt\"\nmodel m\0x = gpt(vocab = 256, hidden = 64, layers = 2, heads = 4)\n",
    "binary-garbage": bytes(range(256)) * 4,
    "invalid-utf8": b"model \xff\xfe = gpt()\n",
    "cr-only-lines": MIST_BASE.replace("\n", "\r").replace("heads = 4", "heads = x"),
    "unterminated-string": 'import "gpt\nmodel m = gpt(vocab = 1)\n',
    "unterminated-block-comment": "/* never closed\nmodel m = gpt()\n",
    "long-line": "model m = gpt(" + ", ".join(f"a{i} = {i}" for i in range(20000)) + ")\n",
    # Nesting and recursion.
    "deep-parens": "import \"gpt\"\nmodel m = gpt(vocab = " + "(" * 100000 + "1" + ")" * 100000 + ", hidden = 64, layers = 2, heads = 4)\n",
    "deep-unclosed-parens": "model m = gpt(vocab = " + "(" * 50000 + "\n",
    "deep-braces": "block b(x) " + "{ " * 20000 + "\n",
    "self-recursive-block": "block r(x) { return r(x) }\nmodel m(v) {\n  input t: i32[b, s]\n  input y: i32[b, s]\n  pre { x = embedding(t, v, 8) }\n  repeat 1 { x = r(x) }\n  post { return cross_entropy(lm_head(x, v), y) }\n}\n",
    "mutual-recursion": "block a(x) { return b(x) }\nblock b(x) { return a(x) }\nmodel m(v) {\n  input t: i32[b, s]\n  input y: i32[b, s]\n  pre { x = embedding(t, v, 8) }\n  repeat 1 { x = a(x) }\n  post { return cross_entropy(lm_head(x, v), y) }\n}\n",
    # Imports.
    "import-missing": 'import "no_such_family"\nmodel m = no_such_family(vocab = 8)\n',
    "import-path-traversal": 'import "../../../../etc/passwd"\n',
    "import-directory": 'import "."\n',
    "import-empty-name": 'import ""\n',
    # Numbers.
    "huge-integer": MIST_BASE.replace("vocab = 256", "vocab = 99999999999999999999999999999"),
    "huge-real-lr": MIST_BASE.replace("seq_len = 64", "seq_len = 64\n  optimizer = adamw(lr = 1e999)"),
    "negative-lr": MIST_BASE.replace("seq_len = 64", "seq_len = 64\n  optimizer = adamw(lr = -0.001)"),
    "nan-lr": MIST_BASE.replace("seq_len = 64", "seq_len = 64\n  optimizer = adamw(lr = nan)"),
    "zero-layers": MIST_BASE.replace("layers = 2", "layers = 0"),
    "negative-layers": MIST_BASE.replace("layers = 2", "layers = -3"),
    "layers-2-pow-63": MIST_BASE.replace("layers = 2", "layers = 9223372036854775807"),
    "zero-heads": MIST_BASE.replace("heads = 4", "heads = 0"),
    "heads-not-dividing": MIST_BASE.replace("heads = 4", "heads = 7"),
    "hidden-times-overflow": MIST_BASE.replace("hidden = 64", "hidden = 4611686018427387904"),
    "zero-global-batch": MIST_BASE.replace("global_batch = 16", "global_batch = 0"),
    "negative-seq": MIST_BASE.replace("seq_len = 64", "seq_len = -64"),
    "seq-len-real": MIST_BASE.replace("seq_len = 64", "seq_len = 6.5"),
    "betas-out-of-range": MIST_BASE.replace("seq_len = 64", "seq_len = 64\n  optimizer = adamw(betas = (1.5, -2))"),
    "betas-one-element": MIST_BASE.replace("seq_len = 64", "seq_len = 64\n  optimizer = adamw(betas = (0.9))"),
    "division-by-zero": MIST_BASE.replace("hidden = 64", "hidden = 64 / (4 - 4)"),
    "dropout-above-one": MIST_BASE.replace("heads = 4)", "heads = 4, dropout = 1.5)"),
    # Words, keywords and arguments.
    "unknown-dtype": MIST_BASE.replace("seq_len = 64", "seq_len = 64\n  dtype = f8"),
    "unknown-optimizer": MIST_BASE.replace("seq_len = 64", "seq_len = 64\n  optimizer = lion(lr = 1e-3)"),
    "duplicate-train-key": MIST_BASE.replace("seq_len = 64", "seq_len = 64\n  seq_len = 128"),
    "duplicate-train-section": MIST_BASE + "train {\n  global_batch = 8\n}\n",
    "duplicate-model": MIST_BASE.replace("train {", "model m = gpt(vocab = 256, hidden = 64, layers = 2, heads = 4)\ntrain {"),
    "keyword-as-name": 'import "gpt"\nmodel model = gpt(vocab = 256, hidden = 64, layers = 2, heads = 4)\n',
    "positional-after-named": 'import "gpt"\nmodel m = gpt(vocab = 256, 64, layers = 2, heads = 4)\n',
    "argument-twice": MIST_BASE.replace("heads = 4)", "heads = 4, heads = 8)"),
    "gelu-approximate-size": "model m(v) {\n  input t: i32[b, s]\n  input y: i32[b, s]\n  pre { x = embedding(t, v, 8) }\n  repeat 1 { x = gelu(x, approximate = 2 * v) }\n  post { return cross_entropy(lm_head(x, v), y) }\n}\n",
    "shard-unknown-word": "model m(v) {\n  input t: i32[b, s]\n  input y: i32[b, s]\n  pre { x = embedding(t, v, 8, shard = diagonal) }\n  repeat 1 { x = gelu(x) }\n  post { return cross_entropy(lm_head(x, v), y) }\n}\n",
    "rope-odd-head-dim": "model m(v) {\n  input t: i32[b, s]\n  input y: i32[b, s]\n  pre { x = embedding(t, v, 9) }\n  repeat 1 { x = rope(x, heads = 1, head_dim = 9) }\n  post { return cross_entropy(lm_head(x, v), y) }\n}\n",
    "rotary-dim-too-wide": "model m(v) {\n  input t: i32[b, s]\n  input y: i32[b, s]\n  pre { x = embedding(t, v, 8) }\n  repeat 1 { x = rope(x, heads = 1, head_dim = 8, rotary_dim = 16) }\n  post { return cross_entropy(lm_head(x, v), y) }\n}\n",
    "kv-heads-above-heads": "model m(v) {\n  input t: i32[b, s]\n  input y: i32[b, s]\n  pre { x = embedding(t, v, 16) }\n  repeat 1 { x = attention(x, x, x, heads = 2, kv_heads = 4, head_dim = 8) }\n  post { return cross_entropy(lm_head(x, v), y) }\n}\n",
    "slice-past-end": "model m(v) {\n  input t: i32[b, s]\n  input y: i32[b, s]\n  pre { x = embedding(t, v, 8) }\n  repeat 1 { x = slice(concat(x, x), 12, 8) }\n  post { return cross_entropy(lm_head(x, v), y) }\n}\n",
    "slice-negative-start": "model m(v) {\n  input t: i32[b, s]\n  input y: i32[b, s]\n  pre { x = embedding(t, v, 8) }\n  repeat 1 { x = slice(x, 0 - 4, 8) }\n  post { return cross_entropy(lm_head(x, v), y) }\n}\n",
    "concat-of-a-split-axis": "model m(v) {\n  input t: i32[b, s]\n  input y: i32[b, s]\n  pre { x = embedding(t, v, 8) }\n  repeat 1 { h = linear(x, 8, shard = column)\n x = linear(concat(h, h), 8, shard = row) }\n  post { return cross_entropy(lm_head(x, v), y) }\n}\ntrain {\n  seq_len = 8\n}\n",
    "slice-sized-by-batch": "model m(v) {\n  input t: i32[b, s]\n  input y: i32[b, s]\n  pre { x = embedding(t, v, 64) }\n  repeat 1 { x = linear(slice(x, 0, 16 * b), 64) }\n  post { return cross_entropy(lm_head(x, v), y) }\n}\n",
    "linear-out-by-batch": "model m(v) {\n  input t: i32[b, s]\n  input y: i32[b, s]\n  pre { x = embedding(t, v, 8) }\n  repeat 1 { x = gelu(x) }\n  post { return cross_entropy(linear(x, v * b), y) }\n}\n",
    "nine-axes": "model m(v) {\n  input t: i32[b, s, a, c, d, e, f, g, h]\n  input y: i32[b, s]\n  pre { x = embedding(t, v, 8) }\n  repeat 1 { x = gelu(x) }\n  post { return cross_entropy(lm_head(x, v), y) }\n}\n",
    "no-return-in-post": "model m(v) {\n  input t: i32[b, s]\n  input y: i32[b, s]\n  pre { x = embedding(t, v, 8) }\n  repeat 1 { x = gelu(x) }\n  post { z = lm_head(x, v) }\n}\n",
    "tied-head-without-embedding": "model m(v) {\n  input t: i32[b, s]\n  input y: i32[b, s]\n  pre { x = t }\n  repeat 1 { x = gelu(x) }\n  post { return cross_entropy(lm_head(x, v, tied = true), y) }\n}\n",
    "integer-tensor-into-gelu": "model m(v) {\n  input t: i32[b, s]\n  input y: i32[b, s]\n  pre { x = gelu(t) }\n  repeat 1 { x = gelu(x) }\n  post { return cross_entropy(lm_head(x, v), y) }\n}\n",
    "many-errors": "\n".join(f"model m{i} = nothing{i}()" for i in range(5000)) + "\n",
    "alias-chain": "import \"gpt\"\n" + "\n".join(f"block b{i}(x) {{ return b{i + 1}(x) }}" for i in range(3000)) + "\nblock b3000(x) { return gelu(x) }\n",
    # Odd but valid: must compile.
    "ok-crlf-lines": MIST_BASE.replace("\n", "\r\n"),
    "ok-unicode-comment": "// Ünïcödé ✓ comment\n" + MIST_BASE,
}

# The cases that write a model template get an instance of it and a sequence
# length, so the error they carry is reached instead of "no model instance".
INSTANCE = "model i = m(v = 16)\ntrain {\n  seq_len = 8\n}\n"
for _name, _text in list(MIST_CASES.items()):
    if isinstance(_text, str) and "model m(v) {" in _text and "model i =" not in _text:
        MIST_CASES[_name] = _text.replace("train {\n  seq_len = 8\n}\n", "") + INSTANCE

MIR_BASE = """module @m {
  sym b : batch
  sym s = 8 : seq
  sym v = 16 : model
  sym d = 4 : model
  input %tokens : act i32[b, s]
  input %targets : act i32[b, s]

  pre () {
    %emb.weight = param : param bf16[v, d]
    %x = embedding %tokens, %emb.weight {dim = d, rows = v} : act bf16[b, s, d]
    yield %x
  }

  layer repeat 2 (%x.1: act bf16[b, s, d]) {
    %g = gelu %x.1 : act bf16[b, s, d]
    yield %g
  }

  post (%x.2: act bf16[b, s, d]) {
    %head.weight = param : param bf16[v, d]
    %logits = lm_head %x.2, %head.weight {vocab = v, shard = "none"} : act bf16[b, s, v]
    %loss, %loss.stats = cross_entropy %logits, %targets : act f32[], act f32[b, s, 2]
    yield %loss
  }
}
"""


def mir(old, new):
    assert old in MIR_BASE, old
    return MIR_BASE.replace(old, new, 1)


MIR_CASES = {
    "empty": "",
    "truncated-half": MIR_BASE[: len(MIR_BASE) // 2],
    "truncated-in-type": MIR_BASE[: MIR_BASE.index("bf16[v, d]") + 7],
    "binary-garbage": bytes((i * 37) % 256 for i in range(3000)),
    "unknown-op": mir("%g = gelu %x.1", "%g = swish %x.1"),
    "gelu-two-operands": mir("%g = gelu %x.1", "%g = gelu %x.1, %x.1"),
    "undefined-value": mir("%g = gelu %x.1", "%g = gelu %nowhere"),
    "use-before-def": mir("%g = gelu %x.1 : act bf16[b, s, d]\n", "%g = gelu %h : act bf16[b, s, d]\n    %h = gelu %x.1 : act bf16[b, s, d]\n"),
    "value-defined-twice": mir("%g = gelu %x.1 : act bf16[b, s, d]\n", "%g = gelu %x.1 : act bf16[b, s, d]\n    %g = gelu %x.1 : act bf16[b, s, d]\n"),
    "repeat-negative": mir("layer repeat 2", "layer repeat -5"),
    "repeat-huge": mir("layer repeat 2", "layer repeat 99999999999999999999"),
    "symbol-negative": mir("sym s = 8 : seq", "sym s = -8 : seq"),
    "symbol-zero-dim": mir("sym d = 4 : model", "sym d = 0 : model"),
    "symbol-self-reference": mir("sym d = 4 : model", "sym d = d + 1 : model"),
    "symbol-unknown-kind": mir("sym d = 4 : model", "sym d = 4 : galaxy"),
    "dim-overflow": mir("sym v = 16 : model", "sym v = 9223372036854775807 : model"),
    "product-overflow": mir("%emb.weight = param : param bf16[v, d]", "%emb.weight = param : param bf16[v*v*v*v*v*v, d*d*d*d*d*d]"),
    "bad-dtype": mir("act bf16[b, s, d]\n    yield %g", "act bf17[b, s, d]\n    yield %g"),
    "nine-axes": mir("%g = gelu %x.1 : act bf16[b, s, d]", "%g = gelu %x.1 : act bf16[b, s, d, d, d, d, d, d, d]"),
    "attribute-wrong-kind": mir("{dim = d, rows = v}", "{dim = \"wide\", rows = v}"),
    "size-by-batch": mir("{dim = d, rows = v}", "{dim = d * b, rows = v}"),
    "attribute-bool-as-real": mir("%g = gelu %x.1 :", "%g = gelu %x.1 {approximate = 0.5} :"),
    "attribute-unterminated": mir("{dim = d, rows = v}", "{dim = d, rows = v"),
    "real-out-of-range": mir("{vocab = v, shard = \"none\"}", "{vocab = v, shard = \"none\", eps = 1e99999}"),
    "missing-yield": mir("    yield %g\n", ""),
    "yield-wrong-type": mir("    yield %g\n", "    yield %x.1, %x.1\n"),
    "unbalanced-braces": MIR_BASE + "}\n}\n",
    "nested-module": mir("module @m {", "module @m {\nmodule @n {"),
    "train-negative-lr": mir("  input %tokens", "  train {global_batch = 4, optimizer = \"adamw\", lr = -1.0, beta1 = 0.9, beta2 = 0.95, weight_decay = 0.1, eps = 1e-08, grad_clip = 1.0, warmup_steps = 0, dtype = \"bf16\", master_dtype = \"f32\"}\n  input %tokens"),
    "train-nan-beta": mir("  input %tokens", "  train {global_batch = 4, optimizer = \"adamw\", lr = 1e-3, beta1 = nan, beta2 = 0.95}\n  input %tokens"),
    "state-unknown-flag": mir("  input %tokens", "  state {shaped, wormhole}\n  input %tokens"),
    "string-unterminated": mir("shard = \"none\"", "shard = \"none"),
    "nul-byte": mir("%g = gelu", "%g\0 = gelu"),
    "deep-expression": mir("sym d = 4 : model", "sym d = " + "(" * 50000 + "4" + ")" * 50000 + " : model"),
    # Sequence parallelism's collectives on values they do not take.
    "all-gather-of-whole": mir("%g = gelu %x.1 : act bf16[b, s, d]", "%g = all_gather %x.1 : act bf16[b, s, d]"),
    "reduce-scatter-of-whole": mir("%g = gelu %x.1 : act bf16[b, s, d]", "%g = reduce_scatter %x.1 : act bf16[b*s, d] shard(0)"),
    "sequence-split-flag-real": mir("%g = gelu %x.1 :", "%g = gelu %x.1 {sequence_split = 0.5} :"),
    "many-ops": mir("    yield %g\n", "".join(f"    %g{i} = gelu %x.1 : act bf16[b, s, d]\n" for i in range(20000)) + "    yield %nope\n"),
}

PLAN_BASE = """mist_plan: 1
model: m
cluster: a100-40g
global_batch: 16
grad_accum: 4
stages:
  - layers: [0, 1]
    mesh: {nodes: 1, gpus_per_node: 1}
    micro_batch: 4
    dp: 1
    tp: 1
"""


def plan(old, new):
    assert old in PLAN_BASE, old
    return PLAN_BASE.replace(old, new, 1)


PLAN_CASES = {
    "empty": "",
    "not-a-mapping": "- just\n- a list\n",
    "scalar": "42\n",
    "binary-garbage": bytes((i * 91 + 7) % 256 for i in range(2048)),
    "wrong-version": plan("mist_plan: 1", "mist_plan: 99"),
    "no-stages": plan("stages:\n", "stages: []\n").split("  - layers")[0],
    "stages-not-a-list": plan("stages:\n", "stages: 7\n").split("  - layers")[0],
    "layers-reversed": plan("layers: [0, 1]", "layers: [1, 0]"),
    "layers-missing-one": plan("layers: [0, 1]", "layers: [0, 0]"),
    "layers-huge": plan("layers: [0, 1]", "layers: [0, 2147483647]"),
    "layers-negative": plan("layers: [0, 1]", "layers: [-1, 1]"),
    "tp-zero": plan("tp: 1", "tp: 0"),
    "tp-three": plan("tp: 1", "tp: 3"),
    "dp-negative": plan("dp: 1", "dp: -2"),
    "micro-batch-real": plan("micro_batch: 4", "micro_batch: 2.5"),
    "micro-batch-string": plan("micro_batch: 4", "micro_batch: four"),
    "micro-batch-2-pow-64": plan("micro_batch: 4", "micro_batch: 18446744073709551616"),
    "batch-product-mismatch": plan("grad_accum: 4", "grad_accum: 3"),
    "batch-product-overflow": plan("global_batch: 16", "global_batch: 9223372036854775807").replace("grad_accum: 4", "grad_accum: 9223372036854775807"),
    "mesh-zero-gpus": plan("gpus_per_node: 1", "gpus_per_node: 0"),
    "mesh-wrong-product": plan("dp: 1", "dp: 4"),
    "ckpt-layers-too-many": plan("    tp: 1\n", "    tp: 1\n    ckpt_layers: 5\n"),
    "offload-ratio-above-one": plan("    tp: 1\n", "    tp: 1\n    offload: {optimizer: 1.5}\n"),
    "offload-ratio-nan": plan("    tp: 1\n", "    tp: 1\n    offload: {optimizer: .nan}\n"),
    "zero-stage-four": plan("    tp: 1\n", "    tp: 1\n    zero: 4\n"),
    "virtual-stages-zero": plan("grad_accum: 4", "grad_accum: 4\nvirtual_stages: 0"),
    "virtual-stages-one-stage": plan("grad_accum: 4", "grad_accum: 4\nvirtual_stages: 2"),
    "virtual-stages-string": plan("grad_accum: 4", "grad_accum: 4\nvirtual_stages: many"),
    "sequence-parallel-string": plan("grad_accum: 4", "grad_accum: 4\nsequence_parallel: often"),
    "tp-overlap-without-sp": plan("grad_accum: 4", "grad_accum: 4\ntp_comm_overlap: true"),
    "overlap-grad-reduce-string": plan("grad_accum: 4", "grad_accum: 4\noverlap_grad_reduce: later"),
    "unknown-key": plan("    tp: 1\n", "    tp: 1\n    warp_drive: true\n"),
    "duplicate-key": plan("    tp: 1\n", "    tp: 1\n    tp: 2\n"),
    "tab-indentation": PLAN_BASE.replace("    ", "\t"),
    "unterminated-quote": plan("model: m", "model: \"m"),
    "alias-bomb": "a: &a [x, x, x, x, x, x, x, x]\n" + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(9)) + PLAN_BASE,
    "deep-nesting": "stages: " + "[" * 5000 + "]" * 5000 + "\n",
    # A plan made for another model name: a located warning, and it applies.
    "ok-other-model-name": plan("model: m", "model: someone_else"),
    "two-documents": PLAN_BASE + "---\n" + PLAN_BASE,
    "ok-comments-and-blank-lines": "# a plan\n\n" + PLAN_BASE.replace("tp: 1", "tp: 1  # trailing comment"),
}

CLUSTER_BASE = """mist_cluster: 1
name: corpus
nodes: 1
gpus_per_node: 8
device:
  name: corpus-gpu
  memory_gib: 40
  peak_tflops: 312
  mem_bandwidth_gbs: 1555
collectives:
  - {nodes: 1, gpus_per_node: 2, bus_gbs: 139, latency_us: 10}
  - {nodes: 1, gpus_per_node: 4, bus_gbs: 193, latency_us: 10}
  - {nodes: 1, gpus_per_node: 8, bus_gbs: 210, latency_us: 12}
p2p: {intra_gbs: 139, inter_gbs: 1.3, latency_us: 10}
host: {h2d_gbs: 5.36, d2h_gbs: 5.85, latency_us: 10}
"""


def cluster(old, new):
    assert old in CLUSTER_BASE, old
    return CLUSTER_BASE.replace(old, new, 1)


CLUSTER_CASES = {
    "empty": "",
    "binary-garbage": bytes((i * 53 + 11) % 256 for i in range(2048)),
    "wrong-version": cluster("mist_cluster: 1", "mist_cluster: 2"),
    "nodes-zero": cluster("nodes: 1\n", "nodes: 0\n"),
    "nodes-huge": cluster("nodes: 1\n", "nodes: 1000000000000\n"),
    "gpus-negative": cluster("gpus_per_node: 8\n", "gpus_per_node: -8\n"),
    "memory-negative": cluster("memory_gib: 40", "memory_gib: -40"),
    "memory-denormal": cluster("memory_gib: 40", "memory_gib: 5e-324"),
    "peak-infinite": cluster("peak_tflops: 312", "peak_tflops: .inf"),
    "peak-nan": cluster("peak_tflops: 312", "peak_tflops: .nan"),
    "peak-string": cluster("peak_tflops: 312", "peak_tflops: lots"),
    "bandwidth-zero": cluster("bus_gbs: 139", "bus_gbs: 0"),
    "latency-negative": cluster("latency_us: 12}", "latency_us: -12}"),
    "collectives-empty": cluster("collectives:\n", "collectives: []\n").replace("  - {nodes: 1, gpus_per_node: 2, bus_gbs: 139, latency_us: 10}\n  - {nodes: 1, gpus_per_node: 4, bus_gbs: 193, latency_us: 10}\n  - {nodes: 1, gpus_per_node: 8, bus_gbs: 210, latency_us: 12}\n", ""),
    "collective-group-too-large": cluster("gpus_per_node: 8, bus_gbs: 210", "gpus_per_node: 16, bus_gbs: 210"),
    "usable-fraction-above-one": cluster("  memory_gib: 40\n", "  memory_gib: 40\n  usable_fraction: 1.7\n"),
    "efficiency-zero": cluster("  memory_gib: 40\n", "  memory_gib: 40\n  matmul_efficiency: 0\n"),
    "interference-short": CLUSTER_BASE + "interference:\n  - {streams: [compute, g2g], factors: [1.05]}\n",
    "interference-below-one": CLUSTER_BASE + "interference:\n  - {streams: [compute, g2g], factors: [0.5, 1.0]}\n",
    "interference-unknown-stream": CLUSTER_BASE + "interference:\n  - {streams: [compute, warp], factors: [1.05, 1.1]}\n",
    "duplicate-device": CLUSTER_BASE + "device:\n  name: again\n",
    "unterminated-flow": cluster("p2p: {intra_gbs: 139, inter_gbs: 1.3, latency_us: 10}", "p2p: {intra_gbs: 139, inter_gbs: 1.3, latency_us: 10"),
    "deep-nesting": "device: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
    "nul-byte": cluster("name: corpus", "name: cor\0pus"),
}


def safetensors(header, data=b"", length=None):
    """A file: 8-byte little-endian header length, the header, the data."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


GOOD_TENSOR = {"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}

SAFETENSORS_CASES = {
    "empty": b"",
    "seven-bytes": b"\x01\x02\x03\x04\x05\x06\x07",
    "header-length-past-end": safetensors(GOOD_TENSOR, b"\0" * 16, length=10_000),
    "header-length-2-pow-63": safetensors(GOOD_TENSOR, b"\0" * 16, length=1 << 63),
    "header-length-all-ones": safetensors(GOOD_TENSOR, b"\0" * 16, length=(1 << 64) - 1),
    "header-not-json": safetensors(b"{this is not json", b"\0" * 16),
    "header-json-array": safetensors([1, 2, 3]),
    "header-nul-inside": safetensors(b'{"w": {"dtype": "F32",\0 "shape": [1], "data_offsets": [0, 4]}}', b"\0" * 4),
    "dtype-unknown": safetensors({"w": {"dtype": "F13", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 4),
    "shape-negative": safetensors({"w": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}}, b"\0" * 16),
    "shape-not-list": safetensors({"w": {"dtype": "F32", "shape": "2x2", "data_offsets": [0, 16]}}, b"\0" * 16),
    "shape-product-overflow": safetensors({"w": {"dtype": "F32", "shape": [1 << 40, 1 << 40], "data_offsets": [0, 16]}}, b"\0" * 16),
    "offsets-reversed": safetensors({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [16, 0]}}, b"\0" * 16),
    "offsets-past-end": safetensors({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 1 << 62]}}, b"\0" * 16),
    "offsets-size-mismatch": safetensors({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}}, b"\0" * 16),
    "offsets-overlap": safetensors({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12),
    "offsets-gap": safetensors({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}, b"\0" * 12),
    "offsets-one-number": safetensors({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4]}}, b"\0" * 4),
    "duplicate-tensor": safetensors(b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}', b"\0" * 4),
    "metadata-not-strings": safetensors({"__metadata__": {"step": 3}, **GOOD_TENSOR}, b"\0" * 16),
    "deep-json": safetensors(b"[" * 100000 + b"]" * 100000),
    "trailing-bytes": safetensors(GOOD_TENSOR, b"\0" * 24),
    "escape-bad-utf16": safetensors(b'{"\\ud800x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}', b"\0" * 4),
    "number-huge": safetensors(b'{"w": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}}', b"\0" * 4),
}


def token_file(magic, version, count, tokens=b"", header_ints=256):
    header = [magic, version, count] + [0] * (header_ints - 3)
    return struct.pack(f"<{header_ints}i", *header) + tokens


TOKEN_CASES = {
    "empty": b"",
    "short-header": token_file(20240520, 1, 4)[:100],
    "magic-wrong": token_file(12345, 1, 4, b"\1\0" * 4),
    "version-unknown": token_file(20240520, 9, 4, b"\1\0" * 4),
    "count-zero": token_file(20240520, 1, 0),
    "count-one": token_file(20240520, 1, 1, b"\1\0"),
    "count-negative": token_file(20240520, 1, -5, b"\1\0" * 4),
    "count-max-int": token_file(20240520, 1, 2147483647, b"\1\0" * 4),
    "fewer-tokens-than-count": token_file(20240520, 1, 10, b"\1\0" * 4),
    "more-tokens-than-count": token_file(20240520, 1, 2, b"\1\0" * 4),
    "odd-byte-count": token_file(20240520, 1, 2, b"\1\0\1"),
    "token-past-vocabulary": token_file(20240520, 1, 4, struct.pack("<4H", 1, 2, 300, 4)),
    "uint32-token-past-vocabulary": token_file(20240801, 7, 3, struct.pack("<3I", 1, 4294967295, 2)),
    "ok-two-tokens": token_file(20240520, 1, 2, struct.pack("<2H", 5, 6)),
}

def megatron(lengths, tokens=None, code=8, documents=None, magic=b"MMIDIDX\0\0", version=1,
             sequences=None, pointers=None, extra=b"", bin_bytes=None):
    """A Megatron-LM dataset (.idx, .bin); every field can be made wrong."""
    width = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 8, 7: 4, 8: 2}.get(code, 2)
    kind = {1: "B", 2: "b", 3: "h", 4: "i", 5: "q", 8: "H"}.get(code, "H")
    if tokens is None:
        tokens = [t % 200 for t in range(sum(lengths))]
    if pointers is None:
        pointers, at = [], 0
        for n in lengths:
            pointers.append(at)
            at += n * width
    if documents is None:
        documents = list(range(len(lengths) + 1))
    count = len(lengths) if sequences is None else sequences
    idx = magic + struct.pack("<QBQQ", version, code, count, len(documents))
    idx += struct.pack(f"<{len(lengths)}i", *lengths) + struct.pack(f"<{len(pointers)}q", *pointers)
    idx += struct.pack(f"<{len(documents)}q", *documents) + extra
    data = struct.pack(f"<{len(tokens)}{kind}", *tokens) if bin_bytes is None else bin_bytes
    return (idx, data)


MEGATRON_CASES = {
    "ok-three-documents": megatron([40, 25, 30]),
    "magic-wrong": megatron([40], magic=b"MMIDIDY\0\0"),
    "version-two": megatron([40], version=2),
    "dtype-float32": megatron([40], code=7, tokens=[0] * 40, bin_bytes=b"\0" * 160),
    "dtype-zero": megatron([40], code=0),
    "dtype-nine": megatron([40], code=9),
    "no-sequences": megatron([], documents=[0]),
    "sequence-count-huge": megatron([40], sequences=2**62),
    "index-truncated": (megatron([40, 25])[0][:-5], megatron([40, 25])[1]),
    "index-header-only": (megatron([40])[0][:30], b""),
    "multimodal-modes": megatron([40, 25], extra=b"\0\0"),
    "length-negative": megatron([40, -3], tokens=list(range(40))),
    "pointer-outside-bin": megatron([40, 25], pointers=[0, 1000]),
    "bin-truncated": megatron([40, 25], bin_bytes=b"\0" * 100),
    "documents-falling": megatron([10, 10, 10], documents=[0, 2, 1, 3]),
    "documents-short-of-count": megatron([10, 10, 10], documents=[0, 1, 2]),
    "documents-first-not-zero": megatron([10, 10], documents=[1, 2]),
    "token-past-vocabulary": megatron([40], code=4, tokens=[300] * 40),
    "token-negative": megatron([40], code=2, tokens=[-3] * 40),
    "tokens-too-few": megatron([3, 2]),
    "bin-missing": (megatron([40])[0], None),
}

def gpt2_tensors(layers=2, hidden=64, vocab=256, positions=64):
    """The tensors of a GPT-2 folder for the corpus model (name -> shape)."""
    t = {"transformer.wte.weight": [vocab, hidden], "transformer.wpe.weight": [positions, hidden],
         "transformer.ln_f.weight": [hidden], "transformer.ln_f.bias": [hidden]}
    for l in range(layers):
        p = f"transformer.h.{l}."
        t.update({p + "ln_1.weight": [hidden], p + "ln_1.bias": [hidden],
                  p + "attn.c_attn.weight": [hidden, 3 * hidden], p + "attn.c_attn.bias": [3 * hidden],
                  p + "attn.c_proj.weight": [hidden, hidden], p + "attn.c_proj.bias": [hidden],
                  p + "ln_2.weight": [hidden], p + "ln_2.bias": [hidden],
                  p + "mlp.c_fc.weight": [hidden, 4 * hidden], p + "mlp.c_fc.bias": [4 * hidden],
                  p + "mlp.c_proj.weight": [4 * hidden, hidden], p + "mlp.c_proj.bias": [hidden]})
    return t


def weights(shapes, dtype="F32"):
    """A safetensors file of zeros of these shapes."""
    size = {"F32": 4, "BF16": 2, "F16": 2, "I32": 4}[dtype]
    header, at = {}, 0
    for name, shape in sorted(shapes.items()):
        n = size
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + n]}
        at += n
    return safetensors(header, b"\0" * at)


GPT2_CONFIG = {"model_type": "gpt2", "vocab_size": 256, "n_embd": 64, "n_layer": 2, "n_head": 4,
               "n_positions": 64}


def hf(config=GPT2_CONFIG, tensors=None, **files):
    """A Hugging Face folder: config.json, model.safetensors and any other file."""
    folder = {}
    if config is not None:
        folder["config.json"] = config if isinstance(config, bytes) else json.dumps(config).encode()
    if tensors is not None:
        folder["model.safetensors"] = tensors
    folder.update({name.replace("__", "."): data for name, data in files.items()})
    return folder


def without(shapes, name):
    return {k: v for k, v in shapes.items() if k != name}


GOOD = gpt2_tensors()
HF_CASES = {
    "ok-gpt2": hf(tensors=weights(GOOD)),
    "ok-gpt2-f16": hf(tensors=weights(GOOD, "F16")),
    "config-missing": hf(config=None, tensors=weights(GOOD)),
    "config-not-json": hf(config=b"{model_type: gpt2", tensors=weights(GOOD)),
    "config-array": hf(config=[1, 2], tensors=weights(GOOD)),
    "config-deep": hf(config=b"[" * 100000 + b"]" * 100000, tensors=weights(GOOD)),
    "config-nul": hf(config=b'{"model_type": "gpt2\0"}', tensors=weights(GOOD)),
    "config-sizes-as-strings": hf(config={**GPT2_CONFIG, "n_embd": "64"}, tensors=weights(GOOD)),
    "config-number-1e400": hf(config=b'{"model_type": "gpt2", "vocab_size": 1e400, "n_embd": 64, "n_layer": 2, "n_head": 4}', tensors=weights(GOOD)),
    "config-model-type-missing": hf(config={k: v for k, v in GPT2_CONFIG.items() if k != "model_type"}, tensors=weights(GOOD)),
    "config-other-family": hf(config={**GPT2_CONFIG, "model_type": "llama"}, tensors=weights(GOOD)),
    "weights-missing": hf(tensors=None),
    "weights-not-safetensors": hf(tensors=b"PK\3\4 a zip, as pytorch_model.bin is"),
    "tensor-missing": hf(tensors=weights(without(GOOD, "transformer.h.1.mlp.c_fc.bias"))),
    "tensor-extra": hf(tensors=weights({**GOOD, "transformer.h.0.attn.q_norm.weight": [64]})),
    "tensor-layer-extra": hf(tensors=weights({**GOOD, **{k.replace("h.1.", "h.2."): v for k, v in GOOD.items() if ".h.1." in k}})),
    "tensor-wrong-shape": hf(tensors=weights({**GOOD, "transformer.h.0.attn.c_attn.weight": [192, 64]})),
    "tensor-int32": hf(tensors=weights(GOOD, "I32")),
    "index-escapes-folder": hf(tensors=None, model__safetensors__index__json=json.dumps({"weight_map": {"transformer.wte.weight": "../../x.safetensors"}}).encode()),
    "index-shard-missing": hf(tensors=None, model__safetensors__index__json=json.dumps({"weight_map": {k: "model-00001-of-00002.safetensors" for k in GOOD}}).encode()),
    "index-not-object": hf(tensors=None, model__safetensors__index__json=b'{"weight_map": [1, 2]}'),
}

FORMATS = {
    "mist": (".mist", MIST_CASES),
    "mir": (".mir", MIR_CASES),
    "plan": (".yaml", PLAN_CASES),
    "cluster": (".yaml", CLUSTER_CASES),
    "safetensors": (".safetensors", SAFETENSORS_CASES),
    "tokens": (".bin", TOKEN_CASES),
    "megatron": ((".idx", ".bin"), MEGATRON_CASES),
    "hf": ("/", HF_CASES),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    total = 0
    for folder, (suffix, cases) in FORMATS.items():
        os.makedirs(os.path.join(out, folder), exist_ok=True)
        for name, content in cases.items():
            if suffix == "/":  # a folder of files (a Hugging Face model)
                os.makedirs(os.path.join(out, folder, name), exist_ok=True)
                for file, data in content.items():
                    with open(os.path.join(out, folder, name, file), "wb") as f:
                        f.write(data)
                total += 1
                continue
            # A Megatron-LM dataset is two files; None leaves one out.
            pairs = zip(suffix, content) if isinstance(suffix, tuple) else [(suffix, content)]
            for ext, part in pairs:
                if part is None:
                    continue
                data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
                with open(os.path.join(out, folder, name + ext), "wb") as f:
                    f.write(data)
            total += 1
    print(f"make-corpus: {total} inputs in {out}")


if __name__ == "__main__":
    main()
