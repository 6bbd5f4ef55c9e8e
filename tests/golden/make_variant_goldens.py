#!/usr/bin/python3
"""Golden file of the attention variants of issue 19: testdata/linear_attention.h5.

    env -u OPENBLAS_CORETYPE /usr/bin/python3 tests/golden/make_variant_goldens.py testdata

Each reference is NumPy in float64, written from the paper's equations and independent of lib/:
  - linear attention (Katharopoulos et al. 2020, eq. 6 and 9): phi(x) = elu(x) + 1,
    out_i = phi(q_i)^T sum_j phi(k_j) v_j^T / phi(q_i)^T sum_j phi(k_j), the sums over the keys
    query i may see (all, or j <= p_i when causal);
  - Performer FAVOR+ (Choromanski et al. 2020, lemma 1): phi(x) = exp(w x - |x|^2 / 2) / sqrt(M) on
    x' = x * scale^(1/2) (scale 1/sqrt(d) by default), in the same normalised form; the features w
    are drawn here and given to the tool with --params;
  - Linformer (Wang et al. 2020, eq. 7): softmax(scale q (E K)^T) (F V), E and F (k, m) given with
    --params; padded keys enter the projections as zero rows.
The implied weights (--emit weights) are the (n, m) matrices these forms multiply V by.
Each case's `args` attribute is attn-score's command line, @ standing for this file.
The test suite only reads the file; it never runs Python.
"""
import sys
from pathlib import Path

import h5py
import numpy as np

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "testdata")
rng = np.random.default_rng(20261122)


def f32(x):
    """Round to float32 and back: the inputs the tool reads."""
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def allowed_keys(b, n, m, causal, kpm=None, lengths=None):
    p = np.arange(n)[:, None] + (m - n)  # queries aligned to the end of the keys
    j = np.arange(m)[None, :]
    ok = np.ones((b, n, m), dtype=bool)
    if causal:
        ok &= (j <= p)[None]
    if lengths is not None:
        ok &= j[None] < np.asarray(lengths)[:, None, None]
    if kpm is not None:
        ok &= ~np.asarray(kpm, dtype=bool)[:, None, :]
    return ok


def normalised(a, ok, v):
    """Weights a (b, n, m) kept where ok, each row divided by its sum (0 when nothing is seen)."""
    a = np.where(ok, a, 0.0)
    s = a.sum(-1, keepdims=True)
    w = np.divide(a, s, out=np.zeros_like(a), where=s > 0)
    return (None if v is None else w @ v), w


def elu1(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_reference(q, k, v, causal=False, kpm=None, lengths=None):
    ok = allowed_keys(q.shape[0], q.shape[1], k.shape[1], causal, kpm, lengths)
    return normalised(elu1(q) @ elu1(k).transpose(0, 2, 1), ok, v)


def favor_phi(x, w, scale):
    xs = x * np.sqrt(scale)
    return np.exp(xs @ w.T - 0.5 * (xs * xs).sum(-1, keepdims=True)) / np.sqrt(w.shape[0])


def performer_reference(q, k, v, w, scale=None, causal=False, kpm=None, lengths=None):
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    ok = allowed_keys(q.shape[0], q.shape[1], k.shape[1], causal, kpm, lengths)
    return normalised(favor_phi(q, w, scale) @ favor_phi(k, w, scale).transpose(0, 2, 1), ok, v)


def linformer_reference(q, k, v, E, F, scale=None, kpm=None, lengths=None):
    b, n, d = q.shape
    m = k.shape[1]
    scale = 1 / np.sqrt(d) if scale is None else scale
    keep = allowed_keys(b, 1, m, False, kpm, lengths)[:, 0, :, None]  # (b, m, 1)
    kp = E @ np.where(keep, k, 0.0)  # (b, k, d)
    s = scale * q @ kp.transpose(0, 2, 1)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = None if v is None else p @ (F @ np.where(keep, v, 0.0))
    w = (p @ F) * keep[:, None, :, 0]  # implied weights (b, n, m): padded keys 0
    return out, w


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    with h5py.File(OUT / "linear_attention.h5", "w") as f:
        def put(name, x):
            f[name] = np.asarray(x, dtype=np.float32)
            return f32(x)

        I = {
            "q5": put("q5", rng.standard_normal((2, 5, 8))),
            "k7": put("k7", rng.standard_normal((2, 7, 8))),
            "v7": put("v7", rng.standard_normal((2, 7, 6))),
            "x6": put("x6", rng.standard_normal((2, 6, 8))),
            "v6": put("v6", rng.standard_normal((2, 6, 3))),
            # past the 64-row blocks of the causal sums: 150 queries over 200 keys, and self 200
            "q150": put("q150", rng.standard_normal((2, 150, 5)) * 0.7),
            "k200": put("k200", rng.standard_normal((2, 200, 5)) * 0.7),
            "v200": put("v200", rng.standard_normal((2, 200, 4))),
        }
        kpm = np.array([[0, 0, 1, 0, 1, 0, 0], [1, 0, 0, 0, 0, 0, 1]], dtype=bool)
        f["masks/kpm"] = kpm
        f["masks/lengths"] = np.array([0, 4], dtype=np.int64)
        f["masks/lengths200"] = np.array([200, 131], dtype=np.int64)
        W16 = put("params/favor16/features", rng.standard_normal((16, 8)))
        W37 = put("params/favor37/features", rng.standard_normal((37, 5)))
        E3 = put("params/lf3/E", rng.standard_normal((3, 7)) / np.sqrt(7))
        F3 = put("params/lf3/F", rng.standard_normal((3, 7)) / np.sqrt(7))
        E32 = put("params/lf32/E", rng.standard_normal((32, 200)) / np.sqrt(200))
        F32 = put("params/lf32/F", rng.standard_normal((32, 200)) / np.sqrt(200))

        q5, k7, v7, x6, v6 = I["q5"], I["k7"], I["v7"], I["x6"], I["v6"]
        q150, k200, v200 = I["q150"], I["k200"], I["v200"]
        lp = "--params @/params"
        cases = {
            # kernelised linear attention
            "lin_plain": (linear_reference(q5, k7, v7), "--attention linear -q @/q5 -k @/k7 -v @/v7"),
            "lin_causal_nm": (linear_reference(q5, k7, v7, causal=True),
                              "--attention linear -q @/q5 -k @/k7 -v @/v7 --causal"),
            "lin_causal_self": (linear_reference(x6, x6, v6, causal=True),
                                "--attention linear -q @/x6 -k @/x6 -v @/v6 --causal"),
            "lin_kpm": (linear_reference(q5, k7, v7, kpm=kpm),
                        "--attention linear -q @/q5 -k @/k7 -v @/v7 --key-padding-mask @/masks/kpm"),
            "lin_causal_lengths": (linear_reference(q5, k7, v7, causal=True, lengths=[0, 4]),
                                   "--attention linear -q @/q5 -k @/k7 -v @/v7 --causal --lengths @/masks/lengths"),
            "lin_no_values": (linear_reference(q5, k7, None, causal=True),
                              "--attention linear -q @/q5 -k @/k7 --causal"),
            "lin_long_causal": (linear_reference(q150, k200, v200, causal=True),
                                "--attention linear -q @/q150 -k @/k200 -v @/v200 --causal"),
            "lin_long_self_lengths": (linear_reference(k200, k200, v200, causal=True, lengths=[200, 131]),
                                      "--attention linear -q @/k200 -k @/k200 -v @/v200 --causal "
                                      "--lengths @/masks/lengths200"),
            "lin_long": (linear_reference(q150, k200, v200), "--attention linear -q @/q150 -k @/k200 -v @/v200"),
            # Performer
            "perf_plain": (performer_reference(q5, k7, v7, W16),
                           f"--attention performer -q @/q5 -k @/k7 -v @/v7 {lp}/favor16"),
            "perf_scale": (performer_reference(q5, k7, v7, W16, scale=0.3),
                           f"--attention performer -q @/q5 -k @/k7 -v @/v7 {lp}/favor16 --scale 0.3"),
            "perf_causal_nm": (performer_reference(q5, k7, v7, W16, causal=True),
                               f"--attention performer -q @/q5 -k @/k7 -v @/v7 {lp}/favor16 --causal"),
            "perf_causal_self_kpm": (performer_reference(q5, k7, v7, W16, causal=True, kpm=kpm),
                                     f"--attention performer -q @/q5 -k @/k7 -v @/v7 {lp}/favor16 --causal "
                                     "--key-padding-mask @/masks/kpm"),
            "perf_lengths": (performer_reference(q5, k7, v7, W16, lengths=[0, 4]),
                             f"--attention performer -q @/q5 -k @/k7 -v @/v7 {lp}/favor16 --lengths @/masks/lengths"),
            "perf_no_values": (performer_reference(x6, x6, None, W16),
                               f"--attention performer -q @/x6 -k @/x6 {lp}/favor16"),
            "perf_long_causal": (performer_reference(q150, k200, v200, W37, causal=True),
                                 f"--attention performer -q @/q150 -k @/k200 -v @/v200 {lp}/favor37 --causal"),
            "perf_long_self_lengths": (performer_reference(k200, k200, v200, W37, causal=True, lengths=[200, 131]),
                                       f"--attention performer -q @/k200 -k @/k200 -v @/v200 {lp}/favor37 --causal "
                                       "--lengths @/masks/lengths200"),
            # Linformer
            "lf_plain": (linformer_reference(q5, k7, v7, E3, F3),
                         f"--attention linformer -q @/q5 -k @/k7 -v @/v7 {lp}/lf3"),
            "lf_scale_kpm": (linformer_reference(q5, k7, v7, E3, F3, scale=0.3, kpm=kpm),
                             f"--attention linformer -q @/q5 -k @/k7 -v @/v7 {lp}/lf3 --scale 0.3 "
                             "--key-padding-mask @/masks/kpm"),
            "lf_lengths": (linformer_reference(q5, k7, v7, E3, F3, lengths=[0, 4]),
                           f"--attention linformer -q @/q5 -k @/k7 -v @/v7 {lp}/lf3 --lengths @/masks/lengths"),
            "lf_no_values": (linformer_reference(q5, k7, None, E3, F3),
                             f"--attention linformer -q @/q5 -k @/k7 {lp}/lf3"),
            "lf_long_lengths": (linformer_reference(q150, k200, v200, E32, F32, lengths=[200, 131]),
                                f"--attention linformer -q @/q150 -k @/k200 -v @/v200 {lp}/lf32 "
                                "--lengths @/masks/lengths200"),
        }
        for name, ((out, w), args) in cases.items():
            g = f.create_group(f"cases/{name}")
            big = w.size > 20000
            g.attrs["args"] = args + ("" if out is None or big else " --emit weights")
            if out is not None:
                g["output"] = out
            if not big or out is None:
                g["weights"] = w


if __name__ == "__main__":
    main()
