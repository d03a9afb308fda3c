#!/usr/bin/env python3
"""Seed inputs for the runtime readers' fuzzers (docs/fuzzing.md).

    tests/fuzz/make-seeds.py json|safetensors|tokens OUTDIR

Writes small valid files into OUTDIR (created if missing; files of the same
names are replaced): safetensors files laid out as the reference writer
lays them out (runtime/checkpoint/Safetensors.h), their JSON headers and
hand-written JSON documents plus the repository's small *.json files, and
token files in the three headers runtime/data/TokenFile.h reads, with the
header's unused ints 3-7 set so that mist-token-fuzzer samples batches of
several shapes from them. Standard library only.
"""
import json
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Reference dtype order (safetensors' tensor.rs) and element sizes.
DTYPES = [("BOOL", 1), ("U8", 1), ("I8", 1), ("I16", 2), ("U16", 2), ("F16", 2), ("BF16", 2),
          ("I32", 4), ("U32", 4), ("F32", 4), ("F64", 8), ("I64", 8), ("U64", 8)]
RANK = {name: i for i, (name, _) in enumerate(DTYPES)}
SIZE = dict(DTYPES)


def safetensors(tensors, metadata=None, null_metadata=False):
    """(header bytes, file bytes) for tensors [(name, dtype, shape)]; data is a byte pattern."""
    order = sorted(tensors, key=lambda t: (-RANK[t[1]], t[0]))
    header = {}
    if null_metadata:
        header["__metadata__"] = None
    elif metadata:
        header["__metadata__"] = dict(sorted(metadata.items()))
    data = bytearray()
    for name, dtype, shape in order:
        count = SIZE[dtype]
        for d in shape:
            count *= d
        begin = len(data)
        data += bytes((begin + i) * 37 % 251 for i in range(count))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [begin, len(data)]}
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return text, struct.pack("<Q", len(text)) + text + bytes(data)


SAFETENSORS = {
    "empty": safetensors([]),
    "one-f32": safetensors([("weight", "F32", [2, 3])]),
    "mixed": safetensors(
        [("a.bias", "F64", [2]), ("step", "I64", []), ("emb", "BF16", [3, 1]),
         ("none", "U8", [0]), ("mask", "BOOL", [2]), ("ids", "U16", [1, 2, 1])],
        metadata={"format": "pt", "step": "12", "plan": "dp=2 \"tp\"=1\n"}),
    "null-metadata": safetensors([("x", "I32", [1])], null_metadata=True),
    "unicode-names": safetensors([("w\u00e9ight", "F16", [2]), ("\u6f22\U0001F600", "I8", [3])],
                                 metadata={"k\u00e9y": "v\u00e0lue"}),
    "every-dtype": safetensors([(name.lower(), name, [2]) for name, _ in DTYPES]),
}

JSON_DOCS = {
    "kinds": '{"a":[1,-0.5,1e10,2E-3,0,-0,12.5e+3],"b":true,"c":false,"d":null,"e":{}}',
    "escapes": '["\\u00e9\\ud83d\\ude00","\\n\\t\\r\\b\\f\\"\\\\\\/","\\u0000","caf\u00e9"]',
    "duplicates": '{"k":1,"k":2, "k" : [ ] }',
    "scalar-string": '"just a string"',
    "scalar-number": "-123.456e-7",
    "empty-array": " [ ] ",
    "nested": "[" * 64 + "]" * 64,
}


def token_file(tokens, magic, version, width, sampler):
    """A token file; `sampler` = (int3 bytes, int4, int5, int6, int7) for the fuzzer's sampler."""
    header = [magic, version, len(tokens)] + [0] * 253
    b12, t, s_hi, s_lo, step = sampler
    header[3] = struct.unpack("<i", bytes(b12))[0]
    header[4], header[5], header[6], header[7] = t, s_hi, s_lo, step
    body = struct.pack("<256i", *header)
    return body + struct.pack("<%d%s" % (len(tokens), "H" if width == 2 else "I"), *tokens)


def text_tokens(text):
    return list(text.encode("utf-8"))


TOKENS = {
    # magic 20240520 version 1: llm.c GPT-2, uint16
    "gpt2-text": token_file(text_tokens("the quick brown fox jumps over the lazy dog. " * 2),
                            20240520, 1, 2, ([1, 1, 1, 0], 7, 0, 0, 3)),
    "gpt2-shuffled": token_file(list(range(40)), 20240520, 1, 2, ([0, 1, 2, 1], 4, 0, 42, 5)),
    "gpt2-two": token_file([50256, 65535], 20240520, 1, 2, ([0, 0, 0, 0], 0, 0, 0, 0)),
    # magic 20240801 version 7: llm.c LLaMA-3, uint32
    "llama3": token_file([128000, 9906, 1917, 4294967295, 0, 7], 20240801, 7, 4,
                         ([3, 0, 1, 1], 2, 1, 2, 1000)),
    # magic 20240520 version 2: earlier mistc's uint32 files
    "uint32": token_file([1, 2, 3, 65536, 70000], 20240520, 2, 4, ([1, 2, 3, 0], 1, 0, 0, 7)),
}


def write(folder, name, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def repo_json_files():
    try:
        names = subprocess.run(["git", "-C", ROOT, "ls-files", "*.json"], check=True,
                               capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return []
    return [n for n in names if os.path.getsize(os.path.join(ROOT, n)) <= 16384]


def main(argv):
    if len(argv) != 3 or argv[1] not in ("json", "safetensors", "tokens"):
        raise SystemExit("usage: make-seeds.py json|safetensors|tokens OUTDIR")
    kind, out = argv[1], argv[2]
    os.makedirs(out, exist_ok=True)
    if kind == "safetensors":
        for name, (_, data) in SAFETENSORS.items():
            write(out, name + ".safetensors", data)
    elif kind == "json":
        for name, (header, _) in SAFETENSORS.items():
            write(out, "header-" + name + ".json", header)
        for name, text in JSON_DOCS.items():
            write(out, name + ".json", text)
        for path in repo_json_files():
            with open(os.path.join(ROOT, path), "rb") as f:
                write(out, "repo-" + path.replace("/", "-"), f.read())
    else:
        for name, data in TOKENS.items():
            write(out, name + ".bin", data)
    print(len(os.listdir(out)))


if __name__ == "__main__":
    main(sys.argv)
