#!/usr/bin/python3
"""Golden file of the 16-bit float types (issue 20, item 1): testdata/half.h5.

    env -u OPENBLAS_CORETYPE /usr/bin/python3 tests/golden/make_half_goldens.py testdata

  - values (N,) float64: ties, subnormals, the largest finite numbers and beyond, infinities, NaN,
    signed zeros, and random numbers over the whole range;
  - f16_bits (N,) uint16: NumPy's float64 -> float16 conversion (round to nearest, ties to even),
    and f16_values (N,) float32 the same numbers widened back;
  - bf16_bits, bf16_values: bfloat16 by a bit-exact reference written here from the definition
    (round the float64 value once to 8 significant bits, ties to even; 8 exponent bits, subnormals
    kept, overflow to infinity, NaN stays NaN);
  - bf16_h5py (N,): the bf16 numbers in a dataset of the toolkit's bfloat16 HDF5 type (a float32
    type with bfloat16's fields and 2 bytes), made with h5py's low-level API; reading it back with
    h5py gives the numbers (asserted here), so h5py reads the files the tools write;
  - f16_h5py (N,): numpy float16 as h5py writes it.
The test suite only reads the file.
"""
import math
import sys
from pathlib import Path

import h5py
import numpy as np

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "testdata")


def bf16_bits(x):
    """float64 -> bfloat16 bits, round to nearest even, from the definition."""
    if math.isnan(x):
        return (0x8000 if math.copysign(1, x) < 0 else 0) | 0x7FC0
    sign = 0x8000 if math.copysign(1, x) < 0 else 0
    a = abs(x)
    if math.isinf(a):
        return sign | 0x7F80
    if a == 0:
        return sign
    bias, emin, emax, mb = 127, -126, 127, 7
    e = math.frexp(a)[1] - 1
    if e < emin:  # subnormal: units of 2^(emin - mb)
        m = round(math.ldexp(a, -emin + mb))  # Python's round: ties to even, exact here
        return sign | m
    m = round(math.ldexp(a, -e + mb))
    if m == 1 << (mb + 1):
        m //= 2
        e += 1
    if e > emax:
        return sign | 0x7F80
    return sign | (e + bias) << mb | (m - (1 << mb))


def bf16_value(bits):
    s = -1.0 if bits & 0x8000 else 1.0
    e, m = (bits >> 7) & 0xFF, bits & 0x7F
    if e == 0xFF:
        return s * math.inf if m == 0 else math.nan
    if e == 0:
        return s * math.ldexp(m, -126 - 7)
    return s * math.ldexp(m | 0x80, e - 127 - 7)


def main():
    rng = np.random.default_rng(20261123)
    tricky = [
        0.0, -0.0, 1.0, -1.0, 0.1, 1 / 3, 2 / 3, math.pi, -math.e,
        # float16: ties at 1 + 2^-11 (to 1) and 1 + 3 2^-11 (to 1 + 2^-9); max 65504; 65519.99 rounds
        # down, 65520 ties to 65536 = overflow; the smallest subnormal 2^-24, half of it (a tie to 0),
        # just above half (to 2^-24); the largest subnormal; the smallest normal 2^-14
        1 + 2 ** -11, 1 + 3 * 2 ** -11, 65504.0, 65519.99, 65520.0, 70000.0, -1e6,
        2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001, 1023 * 2.0 ** -24, 2.0 ** -14, 6e-8, 1e-8,
        # bfloat16: ties at 1 + 2^-8 and 1 + 3 2^-8; its largest finite number, a tie above it (to
        # infinity), the smallest normal 2^-126, subnormals down to 2^-133, half of that (to 0)
        1 + 2 ** -8, 1 + 3 * 2 ** -8, 3.3895313892515355e38, 3.3961775292304957e38, 3e38, 3.5e38, 1e39,
        2.0 ** -126, 2.0 ** -127, 2.0 ** -133, 2.0 ** -134, 2.0 ** -134 * 1.5, 1e-40, 5e-324,
        # a float64 value between two float32 values: rounding once (not via float32) matters
        1 + 2 ** -8 + 2 ** -40, 1 + 2 ** -11 + 2 ** -40,
        math.inf, -math.inf, math.nan,
    ]
    random = list(np.concatenate([rng.standard_normal(40), rng.standard_normal(20) * 1e4,
                                  np.exp(rng.uniform(-100, 100, 20)) * rng.choice([-1, 1], 20)]))
    values = np.array(tricky + random, dtype=np.float64)
    with np.errstate(over="ignore"):
        f16 = values.astype(np.float16)
    bf_bits = np.array([bf16_bits(float(v)) for v in values], dtype=np.uint16)
    bf_vals = np.array([bf16_value(int(b)) for b in bf_bits], dtype=np.float64)
    OUT.mkdir(parents=True, exist_ok=True)
    with h5py.File(OUT / "half.h5", "w") as f:
        f["values"] = values
        f["f16_bits"] = f16.view(np.uint16)
        f["f16_values"] = f16.astype(np.float32)
        f["bf16_bits"] = bf_bits
        f["bf16_values"] = bf_vals.astype(np.float32)
        f["f16_h5py"] = f16
        # the toolkit's bfloat16 type: a float32 type with bfloat16's fields, 2 bytes
        t = h5py.h5t.IEEE_F32LE.copy()
        t.set_fields(15, 7, 8, 0, 7)
        t.set_precision(16)
        t.set_size(2)
        t.set_ebias(127)
        space = h5py.h5s.create_simple(values.shape)
        ds = h5py.h5d.create(f.id, b"bf16_h5py", t, space)
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, bf_bits, mtype=t)
    with h5py.File(OUT / "half.h5", "r") as f:  # h5py reads it as numbers
        back = f["bf16_h5py"][...]
        assert back.dtype.kind == "f", back.dtype
        same = (back == bf_vals.astype(np.float32)) | (np.isnan(back) & np.isnan(bf_vals))
        assert same.all(), values[~same]


if __name__ == "__main__":
    main()
