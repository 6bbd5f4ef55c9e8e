#!/usr/bin/python3
"""Generate the golden HDF5 files in testdata/ from reference implementations.

Run with Debian's python3 (scripts/install-deps.sh golden installs python3-torch, -numpy, -h5py):

    /usr/bin/python3 tests/golden/make_golden.py testdata

The test suite only reads the files this writes; it never runs Python. Every reference here is
computed in float64 from the published formula or the authors' code, independently of lib/.
"""
import math
import sys
from pathlib import Path

import h5py
import numpy as np
import torch

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "testdata")
rng = np.random.default_rng(20261121)


# --- sinusoidal: the textbook formula (Vaswani et al. 2017, section 3.5) in float64 ---------------
def sinusoidal(n, d, base=10000.0, offset=0, layout="interleaved"):
    pos = np.arange(offset, offset + n, dtype=np.float64)[:, None]
    i = np.arange(0, (d + 1) // 2, dtype=np.float64)[None, :]
    angle = pos / np.power(base, 2 * i / d)
    s, c = np.sin(angle), np.cos(angle)[:, : d // 2]
    if layout == "concat":
        return np.concatenate([s, c], axis=1)
    pe = np.zeros((n, d))
    pe[:, 0::2] = s
    pe[:, 1::2] = c
    return pe


# --- RoPE: GPT-NeoX rotate_half and the LLaMA complex-number form, float64 ------------------------
def rope_freqs(dh, base):
    return 1.0 / (base ** (torch.arange(0, dh, 2, dtype=torch.float64) / dh))


def rope_half(x, heads, base=10000.0, offset=0):
    b, n, e = x.shape
    dh = e // heads
    xh = x.view(b, n, heads, dh)
    t = torch.arange(offset, offset + n, dtype=torch.float64)
    freqs = torch.outer(t, rope_freqs(dh, base))
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]

    def rotate_half(v):
        v1, v2 = v[..., : dh // 2], v[..., dh // 2:]
        return torch.cat([-v2, v1], dim=-1)

    return (xh * cos + rotate_half(xh) * sin).reshape(b, n, e)


def rope_interleaved(x, heads, base=10000.0, offset=0):
    b, n, e = x.shape
    dh = e // heads
    t = torch.arange(offset, offset + n, dtype=torch.float64)
    freqs_cis = torch.polar(torch.ones(n, dh // 2, dtype=torch.float64), torch.outer(t, rope_freqs(dh, base)))
    xc = torch.view_as_complex(x.reshape(b, n, heads, dh // 2, 2).contiguous())
    return torch.view_as_real(xc * freqs_cis[None, :, None, :]).reshape(b, n, e)


# --- ALiBi: the authors' get_slopes (ofirpress/attention_with_linear_biases) ----------------------
def get_slopes(n):
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest_power_of_2) + get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]


def alibi(heads, n, m):
    slopes = torch.tensor(get_slopes(heads), dtype=torch.float64)
    p = torch.arange(n, dtype=torch.float64)[:, None] + (m - n)
    j = torch.arange(m, dtype=torch.float64)[None, :]
    return (-slopes[:, None, None] * (p - j).abs()[None]).unsqueeze(0)  # (1, H, n, m)


def main():
    OUT.mkdir(parents=True, exist_ok=True)

    with h5py.File(OUT / "pe_sinusoidal.h5", "w") as f:
        for name, kw in {
            "n50_d64": dict(n=50, d=64),
            "n7_d9_odd": dict(n=7, d=9),
            "n6_d8_base500_offset5": dict(n=6, d=8, base=500.0, offset=5),
            "n5_d7_concat": dict(n=5, d=7, layout="concat"),
            "n3_d4_offset100000": dict(n=3, d=4, offset=100000),
        }.items():
            ds = f.create_dataset(name, data=sinusoidal(**kw))
            for k, v in kw.items():
                ds.attrs[k] = v
        x = rng.standard_normal((2, 5, 6))
        f["add_x"] = x.astype(np.float32)
        f["add_expected_offset3"] = x.astype(np.float32).astype(np.float64) + sinusoidal(5, 6, offset=3)

    with h5py.File(OUT / "rope.h5", "w") as f:
        x = torch.from_numpy(rng.standard_normal((2, 5, 16)).astype(np.float32).astype(np.float64))
        f["x"] = x.numpy().astype(np.float32)
        f["half_h2"] = rope_half(x, 2).numpy()
        f["interleaved_h2"] = rope_interleaved(x, 2).numpy()
        f["half_h1_offset3_base500"] = rope_half(x, 1, base=500.0, offset=3).numpy()
        f["interleaved_h4_offset7"] = rope_interleaved(x, 4, offset=7).numpy()
        ang = torch.outer(torch.arange(2, 2 + 6, dtype=torch.float64), rope_freqs(8, 10000.0))
        f["cos_n6_dh8_offset2"] = ang.cos().numpy()
        f["sin_n6_dh8_offset2"] = ang.sin().numpy()

    with h5py.File(OUT / "alibi.h5", "w") as f:
        for h in (1, 2, 3, 5, 6, 8, 12, 16, 24):
            f[f"slopes_h{h}"] = np.array(get_slopes(h))
        f["bias_h5_n3_m6"] = alibi(5, 3, 6).numpy()
        f["bias_h8_n4_m4"] = alibi(8, 4, 4).numpy()

    # A file written by h5py the way users write theirs: every dtype the toolkit reads, groups
    # resolved through `default`, and datasets the readers must refuse.
    with h5py.File(OUT / "h5py_inputs.h5", "w") as f:
        base = np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 8 - 1
        f["f16"] = base.astype(np.float16)
        f["f32"] = base.astype(np.float32)
        f["f64"] = base
        f["i32"] = np.array([[3, -1, 7], [0, 2, 9]], dtype=np.int32)
        f["u8"] = np.array([[1, 0, 255]], dtype=np.uint8)
        f["i64"] = np.array([5, 6], dtype=np.int64)
        f["bool"] = np.array([[True, False, True], [False, False, True]])
        f["nan"] = np.array([[0.0, 1.0], [np.nan, 2.0]], dtype=np.float32)
        f["inf"] = np.array([[0.0, 1.0], [3.0, -np.inf]], dtype=np.float32)
        f["string"] = np.array([b"a", b"b"])
        f["compound"] = np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")])
        f["scalar"] = np.float32(3.0)
        f.create_dataset("empty", shape=(0, 4), dtype=np.float32)
        f["rank5"] = np.zeros((1, 1, 1, 1, 2), dtype=np.float32)
        g = f.create_group("model")
        g.attrs["default"] = "layer"
        g.create_group("layer").attrs["default"] = "w"
        g["layer/w"] = base.astype(np.float32)[0]
        g["layer/other"] = np.ones(3, dtype=np.float32)
        f.create_group("dangling").attrs["default"] = "missing"
        f.attrs["default"] = "model"

    with h5py.File(OUT / "h5py_ambiguous.h5", "w") as f:
        f["a"] = np.zeros((2, 2), dtype=np.float32)
        f["b"] = np.ones((2, 2), dtype=np.float32)

    with h5py.File(OUT / "h5py_single.h5", "w") as f:
        f.create_group("deep/inside")["only"] = np.arange(6, dtype=np.float32).reshape(2, 3)


if __name__ == "__main__":
    main()
