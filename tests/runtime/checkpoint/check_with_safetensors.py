#!/usr/bin/env python3
"""Cross-check runtime/checkpoint against the reference `safetensors` package.

    check_with_safetensors.py TOOL WORKDIR

TOOL is mist-safetensors-tool. Three checks:
  1. the file TOOL writes (write-example) opens with safetensors (which
     validates the header in Rust) and holds the expected values;
  2. a file the package writes (numpy, every dtype numpy has, a scalar, an
     empty tensor, metadata) reads with our reader (dump) to the same values;
  3. our reader + writer (copy) reproduce the package's file byte for byte.
Exits 77 (skipped) when numpy or safetensors cannot be imported.
"""
import json
import os
import struct
import subprocess
import sys

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file
except ImportError as missing:
    print(f"skipped: {missing} (pip install safetensors numpy)")
    sys.exit(77)

# Keep in step with writeExample in SafetensorsTool.cpp. BF16 has no numpy
# dtype: its raw little-endian bits are checked instead.
EXAMPLE = {
    "w.matrix": np.array([[0.5, -1.25, 2.0], [3.75, -0.0, 1e-3]], dtype=np.float32),
    "w.scalar": np.array(42.0, dtype=np.float32),
    "h.f16": np.array([1.0, -2.0, 0.5], dtype=np.float16),
    "i.ids": np.array([-1, 0, 7, 2147483647], dtype=np.int32),
    "u.tokens": np.array([[0, 1], [65535, 256]], dtype=np.uint16),
    "z.empty": np.zeros((0, 3), dtype=np.float32),
}
EXAMPLE_BF16 = ("h.bf16", [2], struct.pack("<2H", 0x3F80, 0xC040))
EXAMPLE_METADATA = {"format": "mist-example", "note": "quote \" tab \t \u00e9 \u2713",
                    "step": "12"}

DTYPE_NAMES = {
    np.dtype(np.bool_): "BOOL", np.dtype(np.uint8): "U8", np.dtype(np.int8): "I8",
    np.dtype(np.int16): "I16", np.dtype(np.uint16): "U16", np.dtype(np.float16): "F16",
    np.dtype(np.int32): "I32", np.dtype(np.uint32): "U32", np.dtype(np.float32): "F32",
    np.dtype(np.float64): "F64", np.dtype(np.int64): "I64", np.dtype(np.uint64): "U64",
}

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print(f"FAIL: {what}")


def run(*args):
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"FAIL: {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        sys.exit(1)
    return done.stdout


def main():
    tool, workdir = sys.argv[1], sys.argv[2]
    os.makedirs(workdir, exist_ok=True)

    # 1. Ours, read by the reference.
    ours = os.path.join(workdir, "ours.safetensors")
    run(tool, "write-example", ours)
    with safe_open(ours, framework="np") as f:
        check(f.metadata() == EXAMPLE_METADATA, f"metadata read back as {f.metadata()}")
        check(sorted(f.keys()) == sorted(list(EXAMPLE) + [EXAMPLE_BF16[0]]),
              f"tensor names {sorted(f.keys())}")
        for name, expected in EXAMPLE.items():
            got = f.get_tensor(name)
            check(got.dtype == expected.dtype and got.shape == expected.shape
                  and got.tobytes() == expected.tobytes(),
                  f"{name}: safetensors read {got.dtype} {got.shape} {got!r}")
    with open(ours, "rb") as raw:
        (n,) = struct.unpack("<Q", raw.read(8))
        header = json.loads(raw.read(n))
        data = raw.read()
    name, shape, bits = EXAMPLE_BF16
    begin, end = header[name]["data_offsets"]
    check(header[name]["dtype"] == "BF16" and header[name]["shape"] == shape
          and data[begin:end] == bits, f"{name}: {header[name]}, bytes {data[begin:end]!r}")
    print(f"ours -> safetensors {sys.modules['safetensors'].__version__}: "
          f"{len(header) - 1} tensors and metadata read back")

    # 2. The reference's, read by ours.
    theirs = {
        "emb": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
        "f64": np.array([np.pi, -np.e], dtype=np.float64),
        "half": np.array([[1.5, -0.25]], dtype=np.float16),
        "i64": np.array([-(2**62), 5], dtype=np.int64),
        "i16": np.array([-300, 300], dtype=np.int16),
        "u8": np.array([0, 255, 7], dtype=np.uint8),
        "u32": np.array([4000000000], dtype=np.uint32),
        "flags": np.array([True, False, True]),
        "scalar": np.array(3.5, dtype=np.float32),
        "none": np.zeros((2, 0), dtype=np.int32),
        "z.last": np.array([1, 2, 3], dtype=np.uint16),
    }
    metadata = {"written_by": "safetensors.numpy"}
    reference = os.path.join(workdir, "reference.safetensors")
    save_file(theirs, reference, metadata=metadata)
    lines = run(tool, "dump", reference).splitlines()
    expected = [f"metadata\t{json.dumps(k)}\t{json.dumps(v)}" for k, v in sorted(metadata.items())]
    for name in sorted(theirs):
        a = theirs[name]
        expected.append("\t".join(["tensor", json.dumps(name), DTYPE_NAMES[a.dtype],
                                   json.dumps(list(a.shape), separators=(",", ":")),
                                   a.tobytes().hex()]))
    check(lines == expected, "our dump of the reference's file differs:\n  "
          + "\n  ".join(f"{g!r} vs {e!r}" for g, e in zip(lines, expected) if g != e))
    print(f"safetensors -> ours: {len(theirs)} tensors of "
          f"{len({a.dtype for a in theirs.values()})} dtypes and metadata read back")

    # 3. Our writer reproduces the reference's bytes.
    copied = os.path.join(workdir, "copied.safetensors")
    run(tool, "copy", reference, copied)
    with open(reference, "rb") as a, open(copied, "rb") as b:
        same = a.read() == b.read()
    check(same, "our copy of the reference's file is not byte-identical")
    if same:
        print(f"ours re-writes the reference's file byte for byte ({os.path.getsize(copied)} bytes)")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
