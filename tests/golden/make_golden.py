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


# --- attn-score: softmax(score + mask) v in float64 PyTorch, masks as CONTRACT.md section 2 ------
def attention_reference(q, k, v=None, score="scaled-dot", scale=None, W=None, Wq=None, Wk=None, vv=None,
                        causal=False, kpm=None, lengths=None, mask=None, window=None, stride=None, glob=None,
                        top_k=None):
    b, n, _ = q.shape
    m = k.shape[1]
    if score == "scaled-dot":
        s = q @ k.transpose(1, 2) * (scale if scale is not None else 1 / math.sqrt(k.shape[2]))
    elif score == "dot":
        s = q @ k.transpose(1, 2)
    elif score == "general":
        s = (q @ W) @ k.transpose(1, 2)
    else:  # additive (Bahdanau): v^T tanh(W_q q + W_k k)
        s = torch.tanh((q @ Wq.T)[:, :, None, :] + (k @ Wk.T)[:, None, :, :]) @ vv
    raw = s.clone()
    p = torch.arange(n)[:, None] + (m - n)  # queries aligned to the end of the keys
    j = torch.arange(m)[None, :]
    allowed = torch.ones(b, n, m, dtype=torch.bool)
    if window is not None or stride is not None or glob is not None:
        pat = torch.zeros(n, m, dtype=torch.bool)
        if window is not None:
            pat |= (p - j).abs() <= window
        if stride is not None:
            pat |= (p - j) % stride == 0
        if glob is not None:
            g = torch.zeros(m, dtype=torch.bool)
            g[list(glob)] = True
            pat |= g[None, :].expand(n, m)
            pq = torch.tensor([bool(0 <= int(x) < m and g[int(x)]) for x in p[:, 0]])
            pat |= pq[:, None].expand(n, m)
        allowed &= pat
    if causal:
        allowed &= j <= p
    if lengths is not None:
        allowed &= j[None] < torch.as_tensor(lengths)[:, None, None]
    if kpm is not None:
        allowed &= ~torch.as_tensor(kpm)[:, None, :]
    if mask is not None and mask.dtype == torch.bool:
        allowed &= ~(mask if mask.dim() < 4 else mask[:, 0])
    s = s.masked_fill(~allowed, float("-inf"))
    if mask is not None and mask.dtype != torch.bool:
        s = s + (mask if mask.dim() < 4 else mask[:, 0])
    if top_k is not None:
        kth = torch.topk(s, top_k, dim=-1).values[..., -1:]
        s = s.masked_fill(s < kth, float("-inf"))
    w = torch.softmax(s, dim=-1)
    w = torch.nan_to_num(w, nan=0.0)  # a query that sees no key: weights 0 (contract), not NaN
    return (w @ v if v is not None else None), w, raw


def attn_score_goldens(f):
    g = torch.Generator().manual_seed(7)
    rnd = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64).float().double()
    inputs = {"q5": rnd(2, 5, 8), "k7": rnd(2, 7, 8), "v7": rnd(2, 7, 6), "x6": rnd(2, 6, 8), "k4": rnd(2, 7, 4),
              "v6": rnd(2, 6, 3)}
    for name, t in inputs.items():
        f[name] = t.numpy().astype(np.float32)
    W = rnd(8, 4)
    Wq, Wk, vv = rnd(5, 8), rnd(5, 4), rnd(5)
    f["params/general/W"] = W.numpy().astype(np.float32)
    f["params/additive/W_q"] = Wq.numpy().astype(np.float32)
    f["params/additive/W_k"] = Wk.numpy().astype(np.float32)
    f["params/additive/v"] = vv.numpy().astype(np.float32)
    kpm = torch.tensor([[0, 0, 1, 0, 1, 0, 0], [1, 0, 0, 0, 0, 0, 1]], dtype=torch.bool)
    f["masks/kpm"] = kpm.numpy()
    f["masks/lengths"] = np.array([0, 4], dtype=np.int64)
    bool2 = torch.rand(5, 7, generator=g) < 0.3
    bool2[2] = True  # query 2 sees no key
    f["masks/bool2"] = bool2.numpy()
    float3 = rnd(2, 5, 7)
    float3[torch.rand(2, 5, 7, generator=g) < 0.2] = float("-inf")
    f["masks/float3"] = float3.numpy().astype(np.float32)
    bool4 = (torch.rand(2, 1, 5, 7, generator=g) < 0.3)
    f["masks/int4"] = bool4.numpy().astype(np.int32)
    causal_self = torch.tensor(np.triu(np.ones((6, 6)), 1) == 1)
    assert torch.equal(causal_self, torch.nn.Transformer.generate_square_subsequent_mask(6) == float("-inf"))

    I = inputs
    cases = {
        "sdp": (dict(q=I["q5"], k=I["k7"], v=I["v7"]), "-q @/q5 -k @/k7 -v @/v7"),
        "sdp_scale": (dict(q=I["q5"], k=I["k7"], v=I["v7"], scale=0.3), "-q @/q5 -k @/k7 -v @/v7 --scale 0.3"),
        "dot": (dict(q=I["q5"], k=I["k7"], v=I["v7"], score="dot"), "-q @/q5 -k @/k7 -v @/v7 --score dot"),
        "general": (dict(q=I["q5"], k=I["k4"], v=I["v7"], score="general", W=W),
                    "-q @/q5 -k @/k4 -v @/v7 --score general --params @/params/general"),
        "additive": (dict(q=I["q5"], k=I["k4"], v=I["v7"], score="additive", Wq=Wq, Wk=Wk, vv=vv),
                     "-q @/q5 -k @/k4 -v @/v7 --score additive --params @/params/additive"),
        "causal_nm": (dict(q=I["q5"], k=I["k7"], v=I["v7"], causal=True), "-q @/q5 -k @/k7 -v @/v7 --causal"),
        "causal_self": (dict(q=I["x6"], k=I["x6"], v=I["v6"], causal=True), "-q @/x6 -k @/x6 -v @/v6 --causal"),
        "key_padding": (dict(q=I["q5"], k=I["k7"], v=I["v7"], kpm=kpm), "-q @/q5 -k @/k7 -v @/v7 --key-padding-mask @/masks/kpm"),
        "lengths": (dict(q=I["q5"], k=I["k7"], v=I["v7"], lengths=[0, 4]), "-q @/q5 -k @/k7 -v @/v7 --lengths @/masks/lengths"),
        "bool_mask_2d": (dict(q=I["q5"], k=I["k7"], v=I["v7"], mask=bool2), "-q @/q5 -k @/k7 -v @/v7 --attn-mask @/masks/bool2"),
        "float_mask_3d": (dict(q=I["q5"], k=I["k7"], v=I["v7"], mask=float3), "-q @/q5 -k @/k7 -v @/v7 --attn-mask @/masks/float3"),
        "int_mask_4d": (dict(q=I["q5"], k=I["k7"], v=I["v7"], mask=bool4), "-q @/q5 -k @/k7 -v @/v7 --attn-mask @/masks/int4"),
        "window": (dict(q=I["q5"], k=I["k7"], v=I["v7"], window=1), "-q @/q5 -k @/k7 -v @/v7 --window 1"),
        "window_causal": (dict(q=I["x6"], k=I["x6"], v=I["v6"], window=2, causal=True), "-q @/x6 -k @/x6 -v @/v6 --window 2 --causal"),
        "stride_causal": (dict(q=I["x6"], k=I["x6"], v=I["v6"], stride=3, causal=True), "-q @/x6 -k @/x6 -v @/v6 --stride 3 --causal"),
        "global_window": (dict(q=I["q5"], k=I["k7"], v=I["v7"], window=1, glob=[0, 3]), "-q @/q5 -k @/k7 -v @/v7 --window 1 --global 0,3"),
        "window_stride": (dict(q=I["q5"], k=I["k7"], v=I["v7"], window=1, stride=4), "-q @/q5 -k @/k7 -v @/v7 --window 1 --stride 4"),
        "top_k": (dict(q=I["q5"], k=I["k7"], v=I["v7"], top_k=2), "-q @/q5 -k @/k7 -v @/v7 --top-k 2"),
        "top_k_causal": (dict(q=I["q5"], k=I["k7"], v=I["v7"], top_k=3, causal=True), "-q @/q5 -k @/k7 -v @/v7 --top-k 3 --causal"),
        "additive_masked": (dict(q=I["q5"], k=I["k4"], v=I["v7"], score="additive", Wq=Wq, Wk=Wk, vv=vv, causal=True, lengths=[0, 4]),
                            "-q @/q5 -k @/k4 -v @/v7 --score additive --params @/params/additive --causal --lengths @/masks/lengths"),
        "general_window": (dict(q=I["q5"], k=I["k4"], v=I["v7"], score="general", W=W, window=2),
                           "-q @/q5 -k @/k4 -v @/v7 --score general --params @/params/general --window 2"),
        "no_values": (dict(q=I["q5"], k=I["k7"], causal=True), "-q @/q5 -k @/k7 --causal"),
    }
    # Every score function x every mask kind and sparse variant, on n=5 queries over m=7 keys.
    scores = {
        "sdp": (dict(score="scaled-dot"), "@/k7", ""),
        "dot": (dict(score="dot"), "@/k7", " --score dot"),
        "general": (dict(score="general", W=W), "@/k4", " --score general --params @/params/general"),
        "additive": (dict(score="additive", Wq=Wq, Wk=Wk, vv=vv), "@/k4", " --score additive --params @/params/additive"),
    }
    variants = {
        "plain": ({}, ""),
        "causal": (dict(causal=True), " --causal"),
        "kpm": (dict(kpm=kpm), " --key-padding-mask @/masks/kpm"),
        "lengths": (dict(lengths=[0, 4]), " --lengths @/masks/lengths"),
        "bool2": (dict(mask=bool2), " --attn-mask @/masks/bool2"),
        "float3": (dict(mask=float3), " --attn-mask @/masks/float3"),
        "int4": (dict(mask=bool4), " --attn-mask @/masks/int4"),
        "window": (dict(window=1), " --window 1"),
        "window_causal": (dict(window=2, causal=True), " --window 2 --causal"),
        "stride_causal": (dict(stride=3, causal=True), " --stride 3 --causal"),
        "global_window": (dict(window=1, glob=[0, 3]), " --window 1 --global 0,3"),
        "top_k": (dict(top_k=2), " --top-k 2"),
        "top_k_causal_kpm": (dict(top_k=3, causal=True, kpm=kpm), " --top-k 3 --causal --key-padding-mask @/masks/kpm"),
    }
    for sname, (skw, kname, sargs) in scores.items():
        kt = I["k7"] if kname == "@/k7" else I["k4"]
        for vname, (vkw, vargs) in variants.items():
            cases[f"x_{sname}_{vname}"] = (dict(q=I["q5"], k=kt, v=I["v7"], **skw, **vkw),
                                           f"-q @/q5 -k {kname} -v @/v7{sargs}{vargs}")
    for name, (kw, args) in cases.items():
        out, w, raw = attention_reference(**kw)
        grp = f.create_group(f"cases/{name}")
        grp.attrs["args"] = args + ("" if out is None else " --emit weights,scores")
        if out is not None:
            grp["output"] = out.numpy()
            grp["scores"] = raw.numpy()
        grp["weights"] = w.numpy()
    # ALiBi through --attn-mask: the bias pe-gen writes for 1 head, added to scaled-dot scores.
    out, w, _ = attention_reference(I["q5"], I["k7"], I["v7"], mask=alibi(1, 5, 7)[0])
    f["alibi/output"] = out.numpy()


def main():
    OUT.mkdir(parents=True, exist_ok=True)

    with h5py.File(OUT / "attn_score.h5", "w") as f:
        attn_score_goldens(f)

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
