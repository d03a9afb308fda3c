#!/usr/bin/env python3
"""Compares two mistrt checkpoints (standard library only).

  compare-checkpoints.py REFERENCE OTHER

Each is a checkpoint folder (model.safetensors: the weights, F32 or BF16;
optimizer.safetensors: masters and Adam moments) or one safetensors file
(an older trainer's latest.safetensors holds everything).

Both must hold the same tensors with the same shapes, and:
- the model's parameters taken together (every tensor without a .master,
  .adam_m or .adam_v suffix, as one vector) agree within 1e-5 (CKPT_MODEL_TOL):
  ||a - b|| <= 1e-5 ||a|| in the Euclidean norm;
- every tensor (parameters, fp32 master weights, Adam moments) agrees within
  1e-3 (CKPT_TENSOR_TOL) of its own norm: a tensor laid out or updated wrongly
  differs by O(1).
Plans sum gradients in different orders, so they agree to rounding: the CPU
ops' GEMMs (OpenBLAS) block their sums by the matrices' shapes, which differ
with the micro-batch and tp slices. A tensor that starts at zero (the biases)
and whose gradients are small shows that rounding most, after Adam's
normalized steps, up to a few 1e-4 of its norm after three steps; the test
models use Adam eps 1e-6 so that rounding noise in near-zero gradients (the
key bias, to which softmax is invariant, has none in exact arithmetic) is not
amplified into steps of +-lr (tests/trainer/Inputs/*.mist).
Prints the figures; exits 1 on a mismatch.
"""
import json
import os
import struct
import sys
from array import array

# bf16 plans round activations where fp32 ones do not, so their suites pass
# wider bounds (equivalence.sh: CKPT_MODEL_TOL, CKPT_TENSOR_TOL).
MODEL_TOLERANCE = float(os.environ.get("CKPT_MODEL_TOL", "1e-5"))
TENSOR_TOLERANCE = float(os.environ.get("CKPT_TENSOR_TOL", "1e-3"))
SUFFIXES = (".master", ".adam_m", ".adam_v")


def load(path):
    if os.path.isdir(path):
        tensors = load_file(os.path.join(path, "model.safetensors"))
        tensors.update(load_file(os.path.join(path, "optimizer.safetensors")))
        return tensors
    return load_file(path)


def load_file(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    body = data[8 + size :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        values = array("f")
        if info["dtype"] == "F32":
            values.frombytes(body[begin:end])
            if sys.byteorder != "little":
                values.byteswap()
        elif info["dtype"] == "BF16":  # a bf16 run's weights: the top half of an F32
            halves = array("H")
            halves.frombytes(body[begin:end])
            if sys.byteorder != "little":
                halves.byteswap()
            values.frombytes(struct.pack(f"<{len(halves)}I", *(h << 16 for h in halves)))
        else:
            sys.exit(f"{path}: tensor {name} is {info['dtype']}, expected F32 or BF16")
        tensors[name] = (info["shape"], values)
    return tensors


def parameter_of(name):
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    reference, other = load(sys.argv[1]), load(sys.argv[2])
    if set(reference) != set(other):
        missing = sorted(set(reference) ^ set(other))
        sys.exit(f"the checkpoints hold different tensors: {missing[:5]}")
    worst, worst_name = 0.0, None
    model_diff2 = model_norm2 = 0.0
    for name, (shape, a) in reference.items():
        other_shape, b = other[name]
        if shape != other_shape:
            sys.exit(f"{name}: shape {shape} vs {other_shape}")
        norm2 = sum(x * x for x in a)
        diff2 = sum((x - y) ** 2 for x, y in zip(a, b))
        if parameter_of(name) == name:
            model_norm2 += norm2
            model_diff2 += diff2
        relative = (diff2 / norm2) ** 0.5 if norm2 > 0 else diff2**0.5
        if relative > worst:
            worst, worst_name = relative, name
    model = (model_diff2 / model_norm2) ** 0.5 if model_norm2 > 0 else model_diff2**0.5
    print(
        f"{len(reference)} tensors: parameters differ by {model:.3g} of their norm, the worst "
        f"tensor by {worst:.3g} ({worst_name})"
    )
    if model > MODEL_TOLERANCE or worst > TENSOR_TOLERANCE:
        sys.exit(f"mismatch: above {MODEL_TOLERANCE} for the parameters or {TENSOR_TOLERANCE} for a tensor")


main()
