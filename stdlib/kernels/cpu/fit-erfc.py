#!/usr/bin/env python3
"""Fits the polynomial of cpu::fastErfcNonNegative (VectorMath.h) and checks it in fp32.

erfc(z) = t * exp(-z^2 + h(t)) with t = 1 / (1 + z/2) for z >= 0; h is
smooth on t in (0, 1], so a degree-9 polynomial in t fits it. Weighted least
squares, reweighted by the error (Lawson's iteration), approaches the
equal-ripple (minimax) fit. Needs numpy; prints the coefficients c0..c9 to
nine digits and the fp32 evaluation's relative error against math.erfc.
"""
import math

import numpy as np

z = np.linspace(0.0, 9.5, 20001)
t = 1.0 / (1.0 + z / 2)
h = np.array([math.log(math.erfc(zi) / ti) + zi * zi for zi, ti in zip(z, t)])
weights = np.ones_like(t)
for _ in range(60):
    coeffs = np.polynomial.polynomial.polyfit(t, h, 9, w=np.sqrt(weights))
    err = np.polynomial.polynomial.polyval(t, coeffs) - h
    weights = weights * np.abs(err)
    weights /= weights.sum()
print("max |h error| in double:", np.abs(err).max())
rounded = [float("%.9g" % c) for c in coeffs]
print("c0..c9:", rounded)

c32 = np.array(rounded, dtype=np.float32)
for top in (2.0, 4.0, 6.0):
    zz = np.linspace(0, top, 100001).astype(np.float32)
    tt = (np.float32(1) / (np.float32(1) + zz * np.float32(0.5))).astype(np.float32)
    p = np.full_like(tt, c32[-1])
    for k in range(len(c32) - 2, -1, -1):
        p = (p * tt + c32[k]).astype(np.float32)
    val = tt * np.exp((-zz * zz + p).astype(np.float32)).astype(np.float32)
    ref = np.array([math.erfc(float(v)) for v in zz])
    print(f"z in [0, {top}]: fp32 relative error {np.max(np.abs(val - ref) / ref):.3g}")
