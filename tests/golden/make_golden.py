#!/usr/bin/python3
"""Generate the golden HDF5 files in testdata/ from reference implementations.

Run with Debian's python3 (scripts/install-deps.sh golden installs python3-torch, -numpy, -h5py):

    env -u OPENBLAS_CORETYPE /usr/bin/python3 tests/golden/make_golden.py testdata

(OPENBLAS_CORETYPE unset: PyTorch's float64 products follow OpenBLAS's kernel in their last bits,
and the committed files were made with the one it picks itself.)

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


def rope_partial(x, heads, style, base, offset, rot=None):
    """RoPE (style half or interleaved) on the first `rot` elements of each head (all when None), as
    though the head were rot wide (partial rotary embeddings); the rest of the head unchanged."""
    fn = rope_half if style == "half" else rope_interleaved
    b, n, e = x.shape
    dh = e // heads
    if rot is None or rot == dh:
        return fn(x, heads, base, offset=offset)
    xh = x.reshape(b, n, heads, dh)
    turned = fn(xh[..., :rot].reshape(b, n, heads * rot), heads, base, offset=offset).reshape(b, n, heads, rot)
    return torch.cat([turned, xh[..., rot:]], -1).reshape(b, n, e)


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


# --- mha-run: torch.nn.MultiheadAttention (batch_first, eval, float64) and a reference from the ---
# definitions for what PyTorch 1.13's module lacks (grouped KV heads, RoPE).
def export_state_dict(f, group, module, **attrs):
    """The torch -> h5py export of CONTRACT.md section 3: one loop, '.' -> '/'."""
    for key, value in module.state_dict().items():
        f[f"{group}/{key.replace('.', '/')}"] = value.float().numpy()
    for k, v in attrs.items():
        f[group].attrs[k] = v


def load_state_dict_from_h5(path, group, module):
    """The three lines of man/mha-run.1 that load a weight file back into PyTorch."""
    f = h5py.File(path, "r")[group]; sd = {}
    f.visititems(lambda k, v: sd.__setitem__(k.replace("/", "."), torch.from_numpy(v[()])) if isinstance(v, h5py.Dataset) else None)
    module.load_state_dict(sd)


def random_mha(seed, E, H, bias=True, kdim=None, vdim=None, **extra):
    """extra: add_bias_kv, add_zero_attn."""
    torch.manual_seed(seed)
    mod = torch.nn.MultiheadAttention(E, H, bias=bias, kdim=kdim, vdim=vdim, batch_first=True, **extra).double().eval()
    with torch.no_grad():
        for p in mod.parameters():  # nonzero biases too, rounded to float32 so the file is exact
            p.copy_((torch.randn_like(p) * 0.4).float().double())
    return mod


def gqa_weights(seed, E, H, G, kdim, vdim):
    """Separate projections with G key/value heads: q (E, E), k (G dh, kdim), v (G dh, vdim)."""
    g = torch.Generator().manual_seed(seed)
    dh = E // H
    r = lambda *s: (torch.randn(*s, generator=g, dtype=torch.float64) * 0.4).float().double()
    return {"q_proj_weight": r(E, E), "k_proj_weight": r(G * dh, kdim), "v_proj_weight": r(G * dh, vdim),
            "in_proj_bias": r(E + 2 * G * dh), "out_proj.weight": r(E, E), "out_proj.bias": r(E)}


def mha_reference(xq, xk, xv, sd, H, G, allowed, bias=None, rope=None, base=10000.0, zero_attn=False, rot=None):
    """Multi-head attention from its definition, float64. allowed (b, H, n, m) bool; bias additive.
    sd's bias_k and bias_v (add_bias_kv), then zeros (zero_attn), are keys and values m.. that
    every query sees; the weights then have their columns too."""
    b, n, E = xq.shape
    m = xk.shape[1]
    dh = E // H
    if "in_proj_weight" in sd:
        W = sd["in_proj_weight"]
        Wq, Wk, Wv = W[:E], W[E:E + G * dh], W[E + G * dh:]
    else:
        Wq, Wk, Wv = sd["q_proj_weight"], sd["k_proj_weight"], sd["v_proj_weight"]
    bi = sd.get("in_proj_bias")
    zero = lambda r: torch.zeros(r, dtype=torch.float64)
    bq, bk, bv = (bi[:E], bi[E:E + G * dh], bi[E + G * dh:]) if bi is not None else (zero(E), zero(G * dh), zero(G * dh))
    q, k, v = xq @ Wq.T + bq, xk @ Wk.T + bk, xv @ Wv.T + bv
    if rope is not None:
        q, k = rope_partial(q, H, rope, base, m - n, rot), rope_partial(k, G, rope, base, 0, rot)
    extra = [(sd["bias_k"], sd["bias_v"])] if "bias_k" in sd else []
    extra += [(zero(G * dh), zero(G * dh))] if zero_attn else []
    for ek, ev in extra:
        k = torch.cat([k, ek.reshape(1, 1, -1).expand(b, 1, -1)], 1)
        v = torch.cat([v, ev.reshape(1, 1, -1).expand(b, 1, -1)], 1)
        allowed = torch.cat([allowed, torch.ones_like(allowed[..., :1])], -1)
        if bias is not None:
            bias = torch.cat([bias, torch.zeros_like(bias[..., :1])], -1)
        m += 1
    qh = q.view(b, n, H, dh).transpose(1, 2)
    kh = k.view(b, m, G, dh).transpose(1, 2).repeat_interleave(H // G, dim=1)
    vh = v.view(b, m, G, dh).transpose(1, 2).repeat_interleave(H // G, dim=1)
    s = (qh @ kh.transpose(-1, -2)) / math.sqrt(dh)
    s = s.masked_fill(~allowed, float("-inf"))
    if bias is not None:
        s = s + bias
    w = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0)
    heads = (w @ vh).transpose(1, 2).reshape(b, n, E)
    bo = sd.get("out_proj.bias")
    return heads @ sd["out_proj.weight"].T + (bo if bo is not None else 0), w


def mha_goldens(f):
    g = torch.Generator().manual_seed(11)
    rnd = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64).float().double()
    E, H, b, n, m = 16, 4, 2, 5, 7
    I = {"x5": rnd(b, n, E), "q5": rnd(b, n, E), "k7": rnd(b, m, E), "v7": rnd(b, m, E), "k7d6": rnd(b, m, 6),
         "v7d10": rnd(b, m, 10), "x200": rnd(2, 200, 32), "x2d": rnd(6, E)}
    for name, t in I.items():
        f[name] = t.numpy().astype(np.float32)
    mods = {"packed": random_mha(1, E, H), "nobias": random_mha(2, E, H, bias=False),
            "kv": random_mha(3, E, H, kdim=6, vdim=10), "big": random_mha(4, 32, 4),
            "bias_kv": random_mha(7, E, H, add_bias_kv=True), "zero_attn": random_mha(8, E, H, add_zero_attn=True),
            "bias_kv_zero": random_mha(9, E, H, kdim=6, vdim=10, add_bias_kv=True, add_zero_attn=True),
            "big_bias_kv_zero": random_mha(10, 32, 4, add_bias_kv=True, add_zero_attn=True)}
    # add_zero_attn is no parameter: an attribute says it (h5py's True, or 1); add_bias_kv may too
    extra_attrs = {"bias_kv": dict(add_bias_kv=1), "zero_attn": dict(add_zero_attn=1),
                   "bias_kv_zero": dict(add_zero_attn=True), "big_bias_kv_zero": dict(add_zero_attn=1)}
    for name, mod in mods.items():
        export_state_dict(f, f"w/{name}", mod, num_heads=mod.num_heads, **extra_attrs.get(name, {}))
    sds = {name: {k: v.detach().clone() for k, v in mod.state_dict().items()} for name, mod in mods.items()}
    gqa = {"gqa": gqa_weights(5, E, H, 2, E, E), "gqa_kv": gqa_weights(6, E, H, 1, 6, 10)}
    gqa["gqa_bias_kv"] = dict(gqa_weights(12, E, H, 2, E, E))
    gk = torch.Generator().manual_seed(12)
    for key in ("bias_k", "bias_v"):  # (1, 1, G dh) for G key/value heads
        gqa["gqa_bias_kv"][key] = (torch.randn(1, 1, 2 * (E // H), generator=gk, dtype=torch.float64) * 0.4).float().double()
    for name, sd in gqa.items():
        for key, value in sd.items():
            f[f"w/{name}/{key.replace('.', '/')}"] = value.numpy().astype(np.float32)
        f[f"w/{name}"].attrs["num_heads"] = H
        f[f"w/{name}"].attrs["num_kv_heads"] = sd["k_proj_weight"].shape[0] // (E // H)
    f["w/gqa_bias_kv"].attrs["add_zero_attn"] = 1
    # Weight groups whose attributes contradict their datasets (bad-input tests).
    packed_sd = mods["packed"].state_dict()
    for name, attrs in {"heads3": dict(num_heads=3), "kv3": dict(num_heads=4, num_kv_heads=3),
                        "kv_disagree": dict(num_heads=4, num_kv_heads=2), "no_heads": {},
                        "no_out": dict(num_heads=4)}.items():
        for key, value in packed_sd.items():
            if name == "no_out" and key == "out_proj.weight":
                continue
            f[f"bad/{name}/{key.replace('.', '/')}"] = value.float().numpy()
        for k, v in attrs.items():
            f[f"bad/{name}"].attrs[k] = v
    # Attributes on an ancestor: a file whose root carries num_heads for the group below it.
    sub = f.create_group("nested/deep/mha")
    for key, value in mods["packed"].state_dict().items():
        sub[key.replace(".", "/")] = value.float().numpy()
    f["nested"].attrs["num_heads"] = H

    kpm5 = torch.tensor([[0, 0, 0, 1, 1], [0, 1, 0, 0, 0]], dtype=torch.bool)
    f["masks/kpm5"] = kpm5.numpy()
    f["masks/len7"] = np.array([0, 4], dtype=np.int64)
    bool2 = torch.rand(n, m, generator=g) < 0.3
    bool2[1] = True  # query 1 sees no key: weights 0, output out_proj.bias
    f["masks/bool2"] = bool2.numpy()
    float3 = rnd(b, n, m)
    float3[torch.rand(b, n, m, generator=g) < 0.2] = float("-inf")
    f["masks/float3"] = float3.numpy().astype(np.float32)
    int4 = torch.rand(b, H, n, m, generator=g) < 0.3
    f["masks/int4"] = int4.numpy().astype(np.int32)
    len200 = torch.tensor([200, 131])
    f["masks/len200"] = len200.numpy()
    f["alibi4"] = alibi(H, n, m).numpy().astype(np.float32)  # what pe-gen --kind alibi writes

    cases = {
        # name: (weights, q, k, v, masks, extra args)
        "self": ("packed", "x5", None, None, {}, ""),
        "self_2d": ("packed", "x2d", None, None, {}, ""),
        "cross": ("packed", "q5", "k7", "v7", {}, ""),
        "cross_k_only": ("packed", "q5", "k7", None, {}, ""),
        "kdim_vdim": ("kv", "q5", "k7d6", "v7d10", {}, ""),
        "no_bias": ("nobias", "q5", "k7", "v7", {}, ""),
        "self_key_padding": ("packed", "x5", None, None, {"kpm": kpm5}, " --key-padding-mask @/masks/kpm5"),
        "cross_lengths": ("packed", "q5", "k7", "v7", {"lengths": [0, 4]}, " --lengths @/masks/len7"),
        "self_causal": ("packed", "x5", None, None, {"causal": True}, " --causal"),
        "cross_causal": ("packed", "q5", "k7", "v7", {"causal": True}, " --causal"),
        "bool_mask_2d": ("packed", "q5", "k7", "v7", {"mask": bool2}, " --attn-mask @/masks/bool2"),
        "float_mask_3d": ("packed", "q5", "k7", "v7", {"mask": float3}, " --attn-mask @/masks/float3"),
        "int_mask_4d": ("packed", "q5", "k7", "v7", {"mask": int4}, " --attn-mask @/masks/int4"),
        "alibi": ("packed", "q5", "k7", "v7", {"mask": alibi(H, n, m)}, " --attn-mask @/alibi4"),
        "nested_attrs": ("packed", "x5", None, None, {"causal": True}, " --causal"),
        "big_causal_lengths": ("big", "x200", None, None, {"causal": True, "lengths": len200},
                               " --causal --lengths @/masks/len200"),
        "big_plain": ("big", "x200", None, None, {}, ""),
        # beyond nn.MultiheadAttention: checked against the float64 reference only
        "gqa_self": ("gqa", "x5", None, None, {}, ""),
        "gqa_cross_causal": ("gqa_kv", "q5", "k7d6", "v7d10", {"causal": True}, " --causal"),
        "rope_half_self_causal": ("packed", "x5", None, None, {"causal": True, "rope": "half"}, " --causal --rope half"),
        "rope_interleaved_cross_gqa": ("gqa", "q5", "k7", "v7", {"rope": "interleaved", "base": 500.0},
                                       " --rope interleaved --rope-base 500"),
        "rope_half_kpm": ("gqa", "x5", None, None, {"kpm": kpm5, "rope": "half"}, " --key-padding-mask @/masks/kpm5 --rope half"),
        # add_bias_kv and add_zero_attn: keys m.. that no mask touches (a query whose every key is
        # masked still sees them); weights (b, H, n, m + 1 or 2)
        "bias_kv_self": ("bias_kv", "x5", None, None, {}, ""),
        "bias_kv_self_causal_kpm": ("bias_kv", "x5", None, None, {"causal": True, "kpm": kpm5},
                                    " --causal --key-padding-mask @/masks/kpm5"),
        "bias_kv_cross_lengths": ("bias_kv", "q5", "k7", "v7", {"lengths": [0, 4]}, " --lengths @/masks/len7"),
        "bias_kv_float_mask_3d": ("bias_kv", "q5", "k7", "v7", {"mask": float3}, " --attn-mask @/masks/float3"),
        "zero_attn_bool_mask_2d": ("zero_attn", "q5", "k7", "v7", {"mask": bool2}, " --attn-mask @/masks/bool2"),
        "zero_attn_self_causal": ("zero_attn", "x5", None, None, {"causal": True}, " --causal"),
        "bias_kv_zero_kdim_vdim_int4": ("bias_kv_zero", "q5", "k7d6", "v7d10", {"mask": int4}, " --attn-mask @/masks/int4"),
        "bias_kv_zero_cross_causal_lengths": ("bias_kv_zero", "q5", "k7d6", "v7d10", {"causal": True, "lengths": [0, 4]},
                                              " --causal --lengths @/masks/len7"),
        "big_bias_kv_zero_causal_lengths": ("big_bias_kv_zero", "x200", None, None, {"causal": True, "lengths": len200},
                                            " --causal --lengths @/masks/len200"),
        "gqa_bias_kv_zero_self_kpm": ("gqa_bias_kv", "x5", None, None, {"kpm": kpm5}, " --key-padding-mask @/masks/kpm5"),
    }
    for name, (wname, qn, kn, vn, mk, extra) in cases.items():
        self_attn = kn is None
        xq = I[qn]
        xk = xq if self_attn else I[kn]
        xv = xk if vn is None else I[vn]
        bb, nn_, mm = xq.shape[0] if xq.dim() == 3 else 1, xq.shape[-2], xk.shape[-2]
        batched = xq.dim() == 3
        if not batched:
            xq, xk, xv = xq[None], xk[None], xv[None]
        if wname in sds:
            sd, heads, kv_heads = sds[wname], mods[wname].num_heads, mods[wname].num_heads
        else:
            sd, heads = gqa[wname], H
            kv_heads = gqa[wname]["k_proj_weight"].shape[0] // (E // H)
        # what is allowed, as CONTRACT.md section 2 says
        allowed = torch.ones(bb, heads, nn_, mm, dtype=torch.bool)
        p = torch.arange(nn_)[:, None] + (mm - nn_)
        j = torch.arange(mm)[None, :]
        if mk.get("causal"):
            allowed &= (j <= p)
        kpm = mk.get("kpm")
        if "lengths" in mk:
            kpm = j >= torch.as_tensor(mk["lengths"])[:, None]
        if kpm is not None:
            allowed &= ~kpm[:, None, None, :]
        bias = None
        mask = mk.get("mask")
        if mask is not None and mask.dtype == torch.bool:
            allowed &= ~(mask if mask.dim() != 3 else mask[:, None])
        elif mask is not None:
            bias = mask if mask.dim() != 3 else mask[:, None]
        zero_attn = mods[wname].add_zero_attn if wname in mods else wname == "gqa_bias_kv"
        out, w = mha_reference(xq, xk, xv, sd, heads, kv_heads, allowed, bias, mk.get("rope"), mk.get("base", 10000.0),
                               zero_attn)
        if wname in mods and "rope" not in mk:
            # PyTorch itself: its masks in its own layout (3-D masks are (b * H, n, m))
            attn_mask = None
            if mask is not None or mk.get("causal"):
                am = torch.zeros(bb, heads, nn_, mm, dtype=torch.float64)
                am = am.masked_fill(~allowed if kpm is None else ~(allowed | kpm[:, None, None, :]), float("-inf"))
                if bias is not None:
                    am = am + bias
                attn_mask = am.reshape(bb * heads, nn_, mm)
            with torch.no_grad():
                t_out, t_w = mods[wname](xq, xk, xv, key_padding_mask=kpm, attn_mask=attn_mask, need_weights=True,
                                         average_attn_weights=False)
            finite = torch.isfinite(t_out).all(-1)  # PyTorch gives NaN for a query that sees no key
            assert torch.allclose(t_out[finite], out[finite], atol=1e-12), name
            assert torch.allclose(torch.nan_to_num(t_w, nan=0.0), w, atol=1e-12), name
            sees_none = (~allowed.any(-1)).any(1) & ("bias_k" not in sd and not zero_attn)
            assert (~finite).sum() == sees_none.sum(), name
            out = torch.where(finite[..., None], t_out, out)
        if self_attn and kpm is not None:  # the contract: padded queries give 0
            out = out.masked_fill(kpm[:, :, None], 0.0)
            w = w.masked_fill(kpm[:, None, :, None], 0.0)
        grp = f.create_group(f"cases/{name}")
        wref = "@/nested/deep/mha" if name == "nested_attrs" else f"@/w/{wname}"
        args = f"-q @/{qn}" + ("" if kn is None else f" -k @/{kn}") + ("" if vn is None else f" -v @/{vn}")
        grp.attrs["args"] = f"{args} --weights {wref}{extra}"
        grp["output"] = (out if batched else out[0]).numpy()
        if nn_ * mm <= 100:  # the big cases check the blocked kernel, without weights
            grp["weights"] = (w if batched else w[0]).numpy()
            grp["avg_weights"] = (w.mean(1) if batched else w.mean(1)[0]).numpy()
    return mods


def check_mha_export(path, mods):
    """The exported files load back into nn.MultiheadAttention with the man page's three lines."""
    for name, mod in mods.items():
        fresh = torch.nn.MultiheadAttention(mod.embed_dim, mod.num_heads, bias=mod.in_proj_bias is not None,
                                            kdim=mod.kdim, vdim=mod.vdim, batch_first=True,
                                            add_bias_kv=mod.bias_k is not None, add_zero_attn=mod.add_zero_attn)
        load_state_dict_from_h5(path, f"w/{name}", fresh)
        for key, value in mod.state_dict().items():
            assert torch.equal(fresh.state_dict()[key].double(), value), (name, key)


# The `activation` argument of nn.TransformerEncoderLayer/DecoderLayer for each file attribute value.
ACTIVATIONS = {"relu": "relu", "gelu": "gelu",
               "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh")}


def perturbed(mod):
    """Parameters off their initial values (LayerNorms too), rounded to float32 so files are exact."""
    with torch.no_grad():
        for p in mod.parameters():
            p.copy_((p + 0.1 * torch.randn_like(p)).float().double())
    return mod


def with_extra_keys(f, group, stack, seed, plan):
    """Replaces attention modules of `stack` by nn.MultiheadAttention(add_bias_kv, add_zero_attn)
    with the same projections and a random bias_k, bias_v; plan: {(layer, "self_attn"): (bias_kv,
    zero_attn)}. Exports their bias_k, bias_v and an add_zero_attn attribute on the module's group
    of `group` (already exported), unless f is None."""
    torch.manual_seed(seed)
    for (i, name), (bias_kv, zero_attn) in plan.items():
        old = getattr(stack.layers[i], name)
        new = torch.nn.MultiheadAttention(old.embed_dim, old.num_heads, dropout=0.0, batch_first=True,
                                          add_bias_kv=bias_kv, add_zero_attn=zero_attn).double().eval()
        new.load_state_dict(old.state_dict(), strict=False)
        with torch.no_grad():
            for p in (new.bias_k, new.bias_v) if bias_kv else ():
                p.copy_((torch.randn_like(p) * 0.4).float().double())
        setattr(stack.layers[i], name, new)
        if f is None:  # exported with the rest by the caller
            continue
        mg = f"{group}/layers/{i}/{name}"
        for key in ("bias_k", "bias_v") if bias_kv else ():
            f[f"{mg}/{key}"] = getattr(new, key).detach().float().numpy()
        if zero_attn:
            f[mg].attrs["add_zero_attn"] = 1
    return stack


# --- encode: nn.TransformerEncoder (eval, float64, dropout 0, enable_nested_tensor=False) -------
def encoder_goldens(f):
    E, H, F, b, n = 16, 4, 32, 2, 7
    g = torch.Generator().manual_seed(13)
    rnd = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64).float().double()
    x = rnd(b, n, E)
    f["x"] = x.numpy().astype(np.float32)
    f["x2d"] = x[0].numpy().astype(np.float32)
    lengths = torch.tensor([7, 4])
    f["lengths"] = lengths.numpy()
    kpm = torch.tensor([[0, 0, 1, 0, 0, 0, 1], [0, 0, 0, 0, 0, 1, 1]], dtype=torch.bool)
    f["kpm"] = kpm.numpy()
    models = {}
    for name, (layers, norm_first, act, final_norm, eps) in {
        "post_relu_1": (1, False, "relu", False, 1e-5),
        "pre_gelu_3_norm": (3, True, "gelu", True, 1e-5),
        "post_gelu_tanh_2_norm": (2, False, "gelu_tanh", True, 1e-6),
        "pre_relu_2": (2, True, "relu", False, 1e-5),
    }.items():
        torch.manual_seed(len(models) + 21)
        layer = torch.nn.TransformerEncoderLayer(E, H, F, dropout=0.0, activation=ACTIVATIONS[act], layer_norm_eps=eps,
                                                 batch_first=True, norm_first=norm_first)
        enc = torch.nn.TransformerEncoder(layer, layers, norm=torch.nn.LayerNorm(E, eps=eps) if final_norm else None,
                                          enable_nested_tensor=False)
        enc = perturbed(enc.double().train(False))
        export_state_dict(f, f"w/{name}", enc, num_heads=H, norm_first=int(norm_first), activation=act,
                          layer_norm_eps=eps)
        models[name] = (enc, norm_first)
    # add_bias_kv and add_zero_attn (nn.TransformerEncoderLayer has no argument for them: its
    # self_attn replaced), different per layer, so each layer's weights have their own width
    torch.manual_seed(25)
    layer = torch.nn.TransformerEncoderLayer(E, H, F, dropout=0.0, batch_first=True, norm_first=True)
    enc = perturbed(torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).double().train(False))
    export_state_dict(f, "w/extra_keys_pre_relu_2", enc, num_heads=H, norm_first=1, activation="relu")
    with_extra_keys(f, "w/extra_keys_pre_relu_2", enc, 26, {(0, "self_attn"): (True, False),
                                                             (1, "self_attn"): (True, True)})
    models["extra_keys_pre_relu_2"] = (enc, True)

    def run(enc, norm_first, xin, kpm=None, causal=False):
        """The stack (grad enabled, so PyTorch's fused fast path stays off) and each layer's weights."""
        m = xin.shape[1]
        mask = torch.triu(torch.ones(m, m, dtype=torch.bool), 1) if causal else None
        weights = []
        with torch.enable_grad():
            h = xin
            for layer in enc.layers:
                a_in = layer.norm1(h) if norm_first else h
                weights.append(layer.self_attn(a_in, a_in, a_in, attn_mask=mask, key_padding_mask=kpm, need_weights=True,
                                               average_attn_weights=False)[1].detach())
                h = layer(h, src_mask=mask, src_key_padding_mask=kpm)
            if enc.norm is not None:
                h = enc.norm(h)
            whole = enc(xin, mask=mask, src_key_padding_mask=kpm)
        assert torch.allclose(whole, h, atol=1e-12)
        out = h.detach()
        if kpm is not None:  # the contract: padded positions are 0 in every output
            out = out.masked_fill(kpm[:, :, None], 0.0)
            weights = [w.masked_fill(kpm[:, None, :, None], 0.0) for w in weights]
        return out, weights

    len_kpm = torch.arange(n)[None, :] >= lengths[:, None]
    cases = {
        "post_relu_1": ("post_relu_1", {}, ""),
        "post_relu_1_lengths": ("post_relu_1", {"kpm": len_kpm}, " --lengths @/lengths"),
        "pre_gelu_3_norm": ("pre_gelu_3_norm", {}, ""),
        "pre_gelu_3_norm_causal_kpm": ("pre_gelu_3_norm", {"kpm": kpm, "causal": True}, " --causal --key-padding-mask @/kpm"),
        "post_gelu_tanh_2_norm_causal": ("post_gelu_tanh_2_norm", {"causal": True}, " --causal"),
        "pre_relu_2_lengths": ("pre_relu_2", {"kpm": len_kpm}, " --lengths @/lengths"),
        "extra_keys_pre_relu_2": ("extra_keys_pre_relu_2", {}, ""),
        "extra_keys_pre_relu_2_causal_kpm": ("extra_keys_pre_relu_2", {"kpm": kpm, "causal": True},
                                             " --causal --key-padding-mask @/kpm"),
        "extra_keys_pre_relu_2_lengths": ("extra_keys_pre_relu_2", {"kpm": len_kpm}, " --lengths @/lengths"),
    }
    for name, (wname, kw, extra) in cases.items():
        enc, norm_first = models[wname]
        out, weights = run(enc, norm_first, x, **kw)
        grp = f.create_group(f"cases/{name}")
        grp.attrs["args"] = f"-i @/x --weights @/w/{wname}{extra}"
        grp["output"] = out.numpy()
        for i, w in enumerate(weights):
            grp[f"weights/layer{i}"] = w.numpy()
    out, _ = run(*models["post_relu_1"], x[:1])
    f["cases_2d/post_relu_1"] = out[0].numpy()
    block_goldens(f, x, len_kpm)
    position_goldens(f, x, len_kpm)
    bert_goldens(f)
    # token inputs: sequence-to-sequence style groups with src_embed and the `pe` attribute
    V, L = 11, 10
    ids = torch.randint(0, V, (b, n), generator=g)
    f["ids"] = ids.numpy()
    f["ids_bad"] = torch.where(torch.arange(b * n).view(b, n) == 9, V, ids).numpy()  # id V at [1, 2]
    table, pos = rnd(V, E), rnd(L, E)
    enc, norm_first = models["post_relu_1"]
    for pe in ("sinusoidal", "learned", "none"):
        grp = f"tok_{pe}"
        f[f"{grp}/src_embed/weight"] = table.numpy().astype(np.float32)
        for key, value in enc.state_dict().items():
            f[f"{grp}/encoder/{key.replace('.', '/')}"] = value.float().numpy()
        f[grp].attrs["num_heads"] = H
        f[grp].attrs["d_model"] = E
        f[grp].attrs["norm_first"], f[grp].attrs["activation"] = int(norm_first), "relu"
        if pe != "sinusoidal":
            f[grp].attrs["pe"] = pe
        if pe == "learned":
            f[f"{grp}/pos_embed/weight"] = pos.numpy().astype(np.float32)
        xt = table[ids] * math.sqrt(E)
        xt = xt + {"sinusoidal": torch.from_numpy(sinusoidal(n, E)), "learned": pos[:n], "none": 0}[pe]
        out, _ = run(enc, norm_first, xt, kpm=len_kpm)
        grp_c = f.create_group(f"cases_tokens/{pe}")
        grp_c.attrs["args"] = f"--tokens @/ids --weights @/{grp} --lengths @/lengths"
        grp_c["output"] = out.numpy()
    # bad weight files: a layer without linear2/weight; a group without layers
    enc, _ = models["pre_relu_2"]
    for key, value in enc.state_dict().items():
        if key != "layers.1.linear2.weight":
            f[f"bad/no_linear2/{key.replace('.', '/')}"] = value.float().numpy()
    f["bad/no_linear2"].attrs["num_heads"] = H
    f["bad/no_linear2"].attrs["norm_first"], f["bad/no_linear2"].attrs["activation"] = 1, "relu"
    f.create_group("bad/no_layers").attrs["num_heads"] = H
    f["bad/no_layers/norm/weight"] = np.ones(E, dtype=np.float32)
    # a sequence-to-sequence style file: the encoder under /encoder, attributes at the root
    enc, _ = models["pre_gelu_3_norm"]
    for key, value in enc.state_dict().items():
        f[f"seq2seq/encoder/{key.replace('.', '/')}"] = value.float().numpy()
    for k, v in dict(num_heads=H, norm_first=1, activation="gelu").items():
        f["seq2seq"].attrs[k] = v


# --- RMSNorm and gated feed-forwards in the stacks: a reference from the equations (float64) -------
# RMSNorm (Zhang and Sennrich 2019): x / sqrt(mean(x^2) + eps) * w. Gated FFN (Shazeer 2020):
# down(g(gate(x)) * up(x)) with g = sigmoid (GLU), GELU (GEGLU), SiLU (SwiGLU); our layout names
# gate linear_gate, up linear1, down linear2. Attention is nn.MultiheadAttention itself.
GATES = {"glu": torch.sigmoid, "geglu": torch.nn.functional.gelu, "swiglu": torch.nn.functional.silu}
PLAIN = {"relu": torch.relu, "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
         "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh")}


def block_norm(x, p, name, kind, eps):
    if kind == "rms_norm":
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * p[f"{name}.weight"]
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), p[f"{name}.weight"], p[f"{name}.bias"], eps)


def block_ffn(x, p, act):
    up = x @ p["linear1.weight"].T + p["linear1.bias"]
    h = GATES[act](x @ p["linear_gate.weight"].T + p["linear_gate.bias"]) * up if act in GATES else PLAIN[act](up)
    return h @ p["linear2.weight"].T + p["linear2.bias"]


def block_stack(seed, layers, E, H, F, act, norm, cross=False, final_norm=False):
    """Random parameters of a stack in our layout: {i: {name: tensor}} and its nn.MultiheadAttention
    modules, rounded to float32 so the file is exact."""
    torch.manual_seed(seed)
    r = lambda *shape: (torch.randn(*shape, dtype=torch.float64) * 0.3).float().double()
    stack = []
    for _ in range(layers):
        p = {"linear1.weight": r(F, E), "linear1.bias": r(F), "linear2.weight": r(E, F), "linear2.bias": r(E)}
        if act in GATES:
            p["linear_gate.weight"], p["linear_gate.bias"] = r(F, E), r(F)
        for nm in ("norm1", "norm2") + (("norm3",) if cross else ()):
            p[f"{nm}.weight"] = (1 + r(E)).float().double()
            if norm == "layer_norm":
                p[f"{nm}.bias"] = r(E)
        attn = {nm: random_mha(seed * 10 + len(stack) * 2 + k, E, H) for k, nm in enumerate(("self_attn",) + (("multihead_attn",) if cross else ()))}
        stack.append((p, attn))
    final = None
    if final_norm:
        final = {"norm.weight": (1 + r(E)).float().double()}
        if norm == "layer_norm":
            final["norm.bias"] = r(E)
    return stack, final


def export_block_stack(f, group, stack, final, **attrs):
    for i, (p, attn) in enumerate(stack):
        for key, value in p.items():
            f[f"{group}/layers/{i}/{key.replace('.', '/')}"] = value.numpy().astype(np.float32)
        for nm, mod in attn.items():
            for key, value in mod.state_dict().items():
                f[f"{group}/layers/{i}/{nm}/{key.replace('.', '/')}"] = value.float().numpy()
    for key, value in (final or {}).items():
        f[f"{group}/{key.replace('.', '/')}"] = value.numpy().astype(np.float32)
    for k, v in attrs.items():
        f[group].attrs[k] = v


def run_block_stack(x, stack, final, act, norm, norm_first, eps, kpm=None, causal=False, mem=None, mem_kpm=None):
    """The stack (encoder, or decoder with `mem`) from the equations: each layer's output and per-layer
    weights; padded positions 0 as the contract says."""
    n = x.shape[1]
    mask = torch.triu(torch.ones(n, n, dtype=torch.bool), 1) if causal else None
    weights = []
    nrm = lambda h, p, nm: block_norm(h, p, nm, norm, eps)
    with torch.no_grad():
        for p, attn in stack:
            def sa(h):
                return attn["self_attn"](h, h, h, key_padding_mask=kpm, attn_mask=mask, need_weights=True,
                                         average_attn_weights=False)
            def ca(h):
                return attn["multihead_attn"](h, mem, mem, key_padding_mask=mem_kpm, need_weights=True,
                                              average_attn_weights=False)
            ws = []
            subs = [(sa, "norm1")] + ([(ca, "norm2")] if mem is not None else [])
            for fn, nm in subs:
                if norm_first:
                    a, w = fn(nrm(x, p, nm))
                    x = x + a
                else:
                    a, w = fn(x)
                    x = nrm(x + a, p, nm)
                ws.append(torch.nan_to_num(w, nan=0.0))
            last = "norm3" if mem is not None else "norm2"
            x = x + block_ffn(nrm(x, p, last), p, act) if norm_first else nrm(x + block_ffn(x, p, act), p, last)
            weights.append(ws)
        if final is not None:
            x = block_norm(x, final, "norm", norm, eps)
    if kpm is not None:
        x = x.masked_fill(kpm[:, :, None], 0.0)
        weights = [[w.masked_fill(kpm[:, None, :, None], 0.0) for w in ws] for ws in weights]
    return x, weights


def write_case(f, group, args, out, weights):
    """A stack's golden case: its command-line args, the output and each layer's weights (self, and
    cross for a decoder: the layer's list has both)."""
    grp = f.create_group(group)
    grp.attrs["args"] = args
    grp["output"] = out.numpy()
    for i, ws in enumerate(weights):
        if len(ws) == 1:
            grp[f"weights/layer{i}"] = ws[0].numpy()
        else:
            grp[f"weights/layer{i}/self"] = ws[0].numpy()
            grp[f"weights/layer{i}/cross"] = ws[1].numpy()


def block_goldens(f, x, len_kpm, cross=None):
    """Encoder (cross None) or decoder (cross = (mem, mem_kpm, tgt_kpm)) stacks with RMSNorm and the
    feed-forwards beyond ReLU/GELU, under /w/blocks_* and /cases/blocks_*."""
    E, H, F = 16, 4, 24
    for k, (name, (layers, act, norm, norm_first, final_norm, eps)) in enumerate({
        "rms_swiglu_pre_2": (2, "swiglu", "rms_norm", True, True, 1e-6),
        "rms_geglu_post_1": (1, "geglu", "rms_norm", False, False, 1e-5),
        "ln_glu_pre_2": (2, "glu", "layer_norm", True, False, 1e-5),
        "rms_silu_post_1": (1, "silu", "rms_norm", False, True, 1e-5),
    }.items()):
        if cross is not None and name not in ("rms_swiglu_pre_2", "rms_geglu_post_1"):
            continue
        stack, final = block_stack(71 + k + (20 if cross else 0), layers, E, H, F, act, norm, cross is not None, final_norm)
        wname = f"blocks_{name}"
        export_block_stack(f, f"w/{wname}", stack, final, num_heads=H, norm_first=int(norm_first), activation=act,
                           norm_type=norm, layer_norm_eps=eps)
        variants = {"": {}, "_causal_lengths": {"kpm": len_kpm, "causal": True}} if cross is None else \
            {"": {"causal": True}, "_lengths": {"kpm": cross[2], "causal": True, "mem_kpm": cross[1]}}
        for suffix, kw in variants.items():
            if cross is None:
                out, weights = run_block_stack(x, stack, final, act, norm, norm_first, eps, **kw)
                args = f"-i @/x --weights @/w/{wname}" + (" --causal --lengths @/lengths" if kw else "")
            else:
                out, weights = run_block_stack(x, stack, final, act, norm, norm_first, eps, mem=cross[0], **kw)
                args = f"-i @/tgt --memory @/mem --weights @/w/{wname}" + \
                    (" --lengths @/tgt_lengths --memory-lengths @/mem_lengths" if "kpm" in kw else "")
            write_case(f, f"cases/{wname}{suffix}", args, out, weights)


POSITION_STACKS = {  # name: (layers, act, norm, norm_first, final_norm, G, attributes of the positions)
    "pos_rope_gqa": (2, "swiglu", "rms_norm", True, True, 2, {"pe": "rope", "rope_theta": 500.0}),
    "pos_rope_interleaved_partial": (1, "gelu", "layer_norm", False, False, 4,
                                     {"pe": "rope", "rope_style": "interleaved", "rotary_dim": 2}),
    "pos_alibi_window": (2, "relu", "layer_norm", True, False, 4, {"pe": "alibi", "sliding_window": 3}),
    "pos_rope_gqa_window": (2, "swiglu", "rms_norm", True, True, 2,
                            {"pe": "rope", "rope_theta": 500.0, "sliding_window": 3}),
    "pos_parallel_alibi": (2, "gelu", "layer_norm", True, True, 4, {"pe": "alibi", "parallel_residual": 1}),
}


def position_goldens(f, x, len_kpm, cross=None):
    """Stacks with positions inside every layer (RoPE half, interleaved and partial, ALiBi), sliding
    windows and grouped KV heads, from the equations (mha_reference), under /w/pos_* and
    /cases/pos_*. Encoder (cross None) or decoder (cross = (mem, mem_kpm, tgt_kpm))."""
    E, H, F = 16, 4, 24
    names = ("pos_rope_gqa_window", "pos_alibi_window") if cross else \
        ("pos_rope_gqa", "pos_rope_interleaved_partial", "pos_alibi_window", "pos_parallel_alibi")
    for k, name in enumerate(names):
        layers, act, norm, norm_first, final_norm, G, pos = POSITION_STACKS[name]
        seed = 91 + k + (20 if cross else 0)
        stack, final = block_stack(seed, layers, E, H, F, act, norm, cross is not None, final_norm)
        sds = []
        for i, (prm, attn) in enumerate(stack):  # self-attention with G key/value heads: separate projections
            sa = gqa_weights(seed * 10 + i, E, H, G, E, E) if G < H else \
                {key: v.detach() for key, v in attn["self_attn"].state_dict().items()}
            sds.append((sa, {key: v.detach() for key, v in attn["multihead_attn"].state_dict().items()} if cross else None))
        wname = f"w/{name}"
        for i, (prm, _) in enumerate(stack):
            for key, value in prm.items():
                f[f"{wname}/layers/{i}/{key.replace('.', '/')}"] = value.numpy().astype(np.float32)
            for nm, sd in zip(("self_attn", "multihead_attn"), sds[i]):
                for key, value in (sd or {}).items():
                    f[f"{wname}/layers/{i}/{nm}/{key.replace('.', '/')}"] = value.numpy().astype(np.float32)
            if G < H:
                f[f"{wname}/layers/{i}/self_attn"].attrs["num_kv_heads"] = G
        for key, value in (final or {}).items():
            f[f"{wname}/{key.replace('.', '/')}"] = value.numpy().astype(np.float32)
        attrs = dict(num_heads=H, norm_first=int(norm_first), activation=act, norm_type=norm, layer_norm_eps=1e-5)
        attrs.update(pos)
        for key, v in attrs.items():
            f[wname].attrs[key] = v
        variants = {"": {}, "_causal_lengths": {"kpm": len_kpm, "causal": True}} if cross is None else \
            {"": {"causal": True}, "_lengths": {"kpm": cross[2], "causal": True, "mem_kpm": cross[1]}}
        for suffix, kw in variants.items():
            out, weights = run_position_stack(x, stack, sds, final, act, norm, norm_first, 1e-5, H, G, pos,
                                              mem=cross[0] if cross else None, **kw)
            if cross is None:
                args = f"-i @/x --weights @/{wname}" + (" --causal --lengths @/lengths" if kw else "")
            else:
                args = f"-i @/tgt --memory @/mem --weights @/{wname}" + \
                    (" --lengths @/tgt_lengths --memory-lengths @/mem_lengths" if "kpm" in kw else "")
            write_case(f, f"cases/{name}{suffix}", args, out, weights)


def run_position_stack(x, stack, sds, final, act, norm, norm_first, eps, H, G, pos, kpm=None, causal=False, mem=None,
                       mem_kpm=None):
    """run_block_stack with self-attention from its definition: RoPE on q and k (query i and key j at
    positions i and j), ALiBi -slope_h |i - j| on the scores, the sliding window |i - j| < W, and
    the parallel residual x + SelfAttn(LN1(x)) + FFN(LN2(x))."""
    b, n, E = x.shape
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    allowed = torch.ones(n, n, dtype=torch.bool)
    if causal:
        allowed &= j <= i
    if "sliding_window" in pos:
        allowed &= (i - j).abs() < pos["sliding_window"]
    allowed = allowed[None, None].expand(b, H, n, n).clone()
    if kpm is not None:
        allowed &= ~kpm[:, None, None, :]
    bias = alibi(H, n, n) if pos.get("pe") == "alibi" else None
    rope = dict(rope=pos.get("rope_style", "half"), base=pos.get("rope_theta", 10000.0), rot=pos.get("rotary_dim")) \
        if pos.get("pe") == "rope" else {}
    cross_allowed = None
    if mem is not None:
        cross_allowed = torch.ones(b, H, n, mem.shape[1], dtype=torch.bool)
        if mem_kpm is not None:
            cross_allowed &= ~mem_kpm[:, None, None, :]
    weights = []
    nrm = lambda h, p, nm: block_norm(h, p, nm, norm, eps)
    with torch.no_grad():
        for (p, _), (sa_sd, ca_sd) in zip(stack, sds):
            sa = lambda h: mha_reference(h, h, h, sa_sd, H, G, allowed, bias, **rope)
            ca = lambda h: mha_reference(h, mem, mem, ca_sd, H, H, cross_allowed)
            if pos.get("parallel_residual"):  # x + SelfAttn(LN1(x)) + FFN(LN2(x))
                a, w = sa(nrm(x, p, "norm1"))
                x = x + a + block_ffn(nrm(x, p, "norm2"), p, act)
                weights.append([w])
                continue
            ws = []
            for fn, nm in [(sa, "norm1")] + ([(ca, "norm2")] if mem is not None else []):
                if norm_first:
                    a, w = fn(nrm(x, p, nm))
                    x = x + a
                else:
                    a, w = fn(x)
                    x = nrm(x + a, p, nm)
                ws.append(w)
            last = "norm3" if mem is not None else "norm2"
            x = x + block_ffn(nrm(x, p, last), p, act) if norm_first else nrm(x + block_ffn(x, p, act), p, last)
            weights.append(ws)
        if final is not None:
            x = block_norm(x, final, "norm", norm, eps)
    if kpm is not None:
        x = x.masked_fill(kpm[:, :, None], 0.0)
        weights = [[w.masked_fill(kpm[:, None, :, None], 0.0) for w in ws] for ws in weights]
    return x, weights


# --- the toolkit's seeded random stream (lib/src/core/random.cpp): xoshiro256** seeded by splitmix64 ----
M64 = (1 << 64) - 1


class XoshiroRng:
    def __init__(self, seed):
        x, self.s = seed & M64, []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
            self.s.append(z ^ (z >> 31))

    def next(self):
        s = self.s
        rotl = lambda x, k: ((x << k) | (x >> (64 - k))) & M64
        result = (rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def uniform(self):
        return (self.next() >> 11) * 2.0 ** -53


def sample_token(logits, temperature, top_k, top_p, rng):
    """The sampler decode documents: softmax(logits / T), the top_k most likely (ties: lower id),
    cut to the smallest prefix reaching top_p, renormalised, the first whose cumulative probability
    exceeds one uniform draw. Plain float loops, in the order the C++ sums."""
    z = [float(v) / temperature for v in logits]
    mx = max(z)
    e = [math.exp(v - mx) for v in z]
    total = 0.0
    for v in e:
        total += v
    order = sorted(range(len(e)), key=lambda v: -e[v])  # stable: ties keep the lower id first
    keep = min(top_k, len(order)) if top_k > 0 else len(order)
    cum = 0.0
    for i in range(keep):
        cum += e[order[i]] / total
        if cum >= top_p:
            keep = i + 1
            break
    kept = 0.0
    for i in range(keep):
        kept += e[order[i]]
    u, acc = rng.uniform(), 0.0
    for i in range(keep):
        acc += e[order[i]] / kept
        if acc > u:
            return order[i]
    return order[keep - 1]


def decoder_only_goldens(f):
    """A decoder-only model (no cross-attention: an encoder's layers under a causal mask) in our
    layout, LLaMA-like (RMSNorm, SwiGLU, RoPE, 2 KV heads of 4, a sliding window), with token
    embeddings (x = table[id] sqrt(E), no positions added: pe = rope) and a generator. Teacher-forced
    logits and weights from the equations, and generation from prompts of unequal length by a Python
    loop that recomputes the prefix: greedy, and sampled with decode's sampler and random stream."""
    E, H, G, F, V = 16, 4, 2, 24, 11
    bos, eos, pad = 1, 10, 0
    pos = {"pe": "rope", "rope_theta": 500.0, "sliding_window": 5}
    stack, final = block_stack(131, 2, E, H, F, "swiglu", "rms_norm", False, True)
    sds = [(gqa_weights(1310 + i, E, H, G, E, E), None) for i in range(len(stack))]
    g = torch.Generator().manual_seed(132)
    r = lambda *shape: (torch.randn(*shape, generator=g, dtype=torch.float64) * 0.5).float().double()
    table, wg, bg = r(V, E), r(V, E), r(V)
    w = "w/decoder_only"
    for i, (prm, _) in enumerate(stack):
        for key, value in prm.items():
            f[f"{w}/layers/{i}/{key.replace('.', '/')}"] = value.numpy().astype(np.float32)
        for key, value in sds[i][0].items():
            f[f"{w}/layers/{i}/self_attn/{key.replace('.', '/')}"] = value.numpy().astype(np.float32)
        f[f"{w}/layers/{i}/self_attn"].attrs["num_kv_heads"] = G
    f[f"{w}/norm/weight"] = final["norm.weight"].numpy().astype(np.float32)
    f[f"{w}/tgt_embed/weight"] = table.numpy().astype(np.float32)
    f[f"{w}/generator/weight"] = wg.numpy().astype(np.float32)
    f[f"{w}/generator/bias"] = bg.numpy().astype(np.float32)
    for key, v in dict(num_heads=H, norm_first=1, activation="swiglu", norm_type="rms_norm", layer_norm_eps=1e-5,
                       bos_id=bos, eos_id=eos, pad_id=pad, **pos).items():
        f[w].attrs[key] = v

    def forward(ids, kpm=None):
        x = table[ids] * math.sqrt(E)
        out, weights = run_position_stack(x, stack, sds, final, "swiglu", "rms_norm", True, 1e-5, H, G, pos, kpm=kpm,
                                          causal=True)
        return out, out @ wg.T + bg, weights

    lm_cases(f, "do", forward, bos, eos, pad)


def lm_cases(f, name, forward, bos, eos, pad):
    """A causal language model's goldens under /{name}/, /{name}_expect/ and /{name}_generate/:
    forward(ids (b, n), kpm) -> (output, logits, per-layer [self weights]). Teacher-forced with
    lengths (padded positions 0), and generation from prompts of lengths 4, 2 and 0 (from bos) by a
    loop that recomputes the prefix: greedy, and sampled (T 0.7, top-k 6, top-p 0.9, seed 5)."""
    ids = torch.tensor([[1, 4, 5, 6, 7, 2], [1, 8, 3, 0, 0, 0], [1, 9, 9, 2, 6, 0]])
    lengths = torch.tensor([6, 3, 5])
    f[f"{name}/ids"], f[f"{name}/ids_lengths"] = ids.numpy(), lengths.numpy()
    kpm = torch.arange(6)[None, :] >= lengths[:, None]
    out, logits, weights = forward(ids, kpm)
    out = out.masked_fill(kpm[:, :, None], 0.0)
    logits = logits.masked_fill(kpm[:, :, None], 0.0)
    f[f"{name}_expect/output"], f[f"{name}_expect/logits"] = out.numpy(), logits.numpy()
    for i, ws in enumerate(weights):
        f[f"{name}_expect/weights/layer{i}"] = ws[0].numpy()

    prompts = torch.tensor([[1, 4, 5, 6], [1, 7, 0, 0], [0, 0, 0, 0]])
    prompt_lengths = [4, 2, 0]  # the last starts from bos
    f[f"{name}/prompt"], f[f"{name}/prompt_lengths"] = prompts.numpy(), np.array(prompt_lengths, dtype=np.int64)
    N = 8
    for kind, sampler in {"greedy": None, "sample": (0.7, 6, 0.9, 5)}.items():
        rows, scores = [], []
        for b in range(len(prompt_lengths)):
            seq = prompts[b, :prompt_lengths[b]].tolist() or [bos]
            rng = XoshiroRng(sampler[3] + b) if sampler else None
            gen, score = [], 0.0
            for _ in range(N):
                _, lg, _ = forward(torch.tensor([seq + gen]))
                last = lg[0, -1]
                tok = int(torch.argmax(last)) if sampler is None else sample_token(last.tolist(), *sampler[:3], rng)
                score += float(torch.log_softmax(last, -1)[tok])
                gen.append(tok)
                if tok == eos:
                    break
            rows.append(gen)
            scores.append(score)
        L = max(len(x) for x in rows)
        f[f"{name}_generate/{kind}/tokens"] = np.array([x + [pad] * (L - len(x)) for x in rows], dtype=np.int64)
        f[f"{name}_generate/{kind}/scores"] = np.array(scores)
        print(f"{name} {kind}: {rows}")


def llama_goldens(f):
    """LlamaForCausalLM's layout by its own names, exported in one loop with the config's scalars as
    attributes: "llama" (untied lm_head, no biases, the default rope_theta and eps), "qwen2" (q/k/v
    biases, tied embeddings, rope_theta 1e6, a sliding window). The reference: the equations of
    LLaMA's forward (unscaled embeddings, RMSNorm, rotate-half RoPE, repeated KV heads, SwiGLU)."""
    E, H, G, F, V = 16, 4, 2, 24, 11
    bos, eos = 1, 10
    for k, (name, cfg) in enumerate({
        "llama": dict(biases=False, tied=False, theta=None, eps=None, window=None),
        "qwen2": dict(biases=True, tied=True, theta=1e6, eps=1e-5, window=3),
    }.items()):
        stack, final = block_stack(141 + k, 2, E, H, F, "swiglu", "rms_norm", False, True)
        g = torch.Generator().manual_seed(142 + k)
        r = lambda *shape: (torch.randn(*shape, generator=g, dtype=torch.float64) * 0.5).float().double()
        table = r(V, E)
        lm_head = table if cfg["tied"] else r(V, E)
        sds = []
        for i in range(len(stack)):
            sd = gqa_weights(1410 + 10 * k + i, E, H, G, E, E)
            if not cfg["biases"]:
                del sd["in_proj_bias"]
            del sd["out_proj.bias"]
            sds.append((sd, None))
        w = f"w/{name}"
        dh = E // H
        for i, ((p, _), (sd, _)) in enumerate(zip(stack, sds)):
            L = f"{w}/model/layers/{i}"
            put = lambda key, t: f.__setitem__(f"{L}/{key}", t.numpy().astype(np.float32))
            put("self_attn/q_proj/weight", sd["q_proj_weight"])
            put("self_attn/k_proj/weight", sd["k_proj_weight"])
            put("self_attn/v_proj/weight", sd["v_proj_weight"])
            put("self_attn/o_proj/weight", sd["out_proj.weight"])
            if cfg["biases"]:
                b = sd["in_proj_bias"]
                put("self_attn/q_proj/bias", b[:E])
                put("self_attn/k_proj/bias", b[E:E + G * dh])
                put("self_attn/v_proj/bias", b[E + G * dh:])
            put("mlp/gate_proj/weight", p["linear_gate.weight"])
            put("mlp/up_proj/weight", p["linear1.weight"])
            put("mlp/down_proj/weight", p["linear2.weight"])
            put("input_layernorm/weight", p["norm1.weight"])
            put("post_attention_layernorm/weight", p["norm2.weight"])
            # the exported module has no linear biases: drop them from the reference
            for key in ("linear1.bias", "linear2.bias", "linear_gate.bias"):
                p[key] = torch.zeros_like(p[key])
        f[f"{w}/model/norm/weight"] = final["norm.weight"].numpy().astype(np.float32)
        f[f"{w}/model/embed_tokens/weight"] = table.numpy().astype(np.float32)
        if not cfg["tied"]:
            f[f"{w}/lm_head/weight"] = lm_head.numpy().astype(np.float32)
        attrs = dict(hidden_size=E, num_attention_heads=H, num_key_value_heads=G, intermediate_size=F, vocab_size=V,
                     hidden_act="silu", tie_word_embeddings=cfg["tied"], max_position_embeddings=64,
                     bos_token_id=bos, eos_token_id=eos, num_hidden_layers=len(stack), model_type=name)
        if cfg["theta"]:
            attrs["rope_theta"] = cfg["theta"]
        if cfg["eps"]:
            attrs["rms_norm_eps"] = cfg["eps"]
        if cfg["window"]:
            attrs["sliding_window"] = cfg["window"]
        for key, v in attrs.items():
            f[w].attrs[key] = v
        pos = {"pe": "rope", "rope_theta": cfg["theta"] or 10000.0}
        if cfg["window"]:
            pos["sliding_window"] = cfg["window"]
        eps = cfg["eps"] or 1e-6

        def forward(ids, kpm=None, stack=stack, sds=sds, final=final, table=table, lm_head=lm_head, pos=pos, eps=eps):
            out, weights = run_position_stack(table[ids], stack, sds, final, "swiglu", "rms_norm", True, eps, H, G, pos,
                                              kpm=kpm, causal=True)
            return out, out @ lm_head.T, weights

        lm_cases(f, name, forward, bos, eos, 0)


def bert_goldens(f):
    """BertModel's layout by its own names (the pooler and the position_ids buffer present, unread),
    with the config's scalars as attributes. The reference: BERT's equations, x = LN(word[id] +
    position[i] + type[t]), post-norm layers with erf GELU; padded positions (attention_mask 0) 0."""
    E, H, F, V, P, T = 16, 4, 24, 11, 16, 2
    stack, _ = block_stack(161, 2, E, H, F, "gelu", "layer_norm", False, False)
    sds = [(gqa_weights(1610 + i, E, H, H, E, E), None) for i in range(len(stack))]
    g = torch.Generator().manual_seed(162)
    r = lambda *shape: (torch.randn(*shape, generator=g, dtype=torch.float64) * 0.5).float().double()
    word, pos, typ = r(V, E), r(P, E), r(T, E)
    ln_w, ln_b = (1 + r(E)).float().double(), r(E)
    w = "w/bert"
    put = lambda key, t: f.__setitem__(f"{w}/{key}", t.numpy().astype(np.float32))
    put("embeddings/word_embeddings/weight", word)
    put("embeddings/position_embeddings/weight", pos)
    put("embeddings/token_type_embeddings/weight", typ)
    put("embeddings/LayerNorm/weight", ln_w), put("embeddings/LayerNorm/bias", ln_b)
    f[f"{w}/embeddings/position_ids"] = np.arange(P, dtype=np.int64)[None]  # a buffer
    put("pooler/dense/weight", r(E, E)), put("pooler/dense/bias", r(E))
    dh = E // H
    for i, ((p, _), (sd, _)) in enumerate(zip(stack, sds)):
        L = f"encoder/layer/{i}"
        b = sd["in_proj_bias"]
        for k, nm in enumerate(("query", "key", "value")):
            put(f"{L}/attention/self/{nm}/weight", sd[("q", "k", "v")[k] + "_proj_weight"])
            put(f"{L}/attention/self/{nm}/bias", b[k * E:(k + 1) * E])
        put(f"{L}/attention/output/dense/weight", sd["out_proj.weight"]), put(f"{L}/attention/output/dense/bias", sd["out_proj.bias"])
        put(f"{L}/attention/output/LayerNorm/weight", p["norm1.weight"]), put(f"{L}/attention/output/LayerNorm/bias", p["norm1.bias"])
        put(f"{L}/intermediate/dense/weight", p["linear1.weight"]), put(f"{L}/intermediate/dense/bias", p["linear1.bias"])
        put(f"{L}/output/dense/weight", p["linear2.weight"]), put(f"{L}/output/dense/bias", p["linear2.bias"])
        put(f"{L}/output/LayerNorm/weight", p["norm2.weight"]), put(f"{L}/output/LayerNorm/bias", p["norm2.bias"])
    for key, v in dict(model_type="bert", hidden_size=E, num_attention_heads=H, intermediate_size=F, vocab_size=V,
                       max_position_embeddings=P, type_vocab_size=T, layer_norm_eps=1e-12, hidden_act="gelu",
                       num_hidden_layers=len(stack), pad_token_id=0).items():
        f[w].attrs[key] = v
    assert dh * H == E

    def forward(ids, types, keep=None):
        x = word[ids] + pos[torch.arange(ids.shape[1])] + typ[types]
        x = torch.nn.functional.layer_norm(x, (E,), ln_w, ln_b, 1e-12)
        kpm = None if keep is None else keep == 0
        return run_position_stack(x, stack, sds, None, "gelu", "layer_norm", False, 1e-12, H, H, {}, kpm=kpm)

    ids = torch.tensor([[1, 5, 6, 2, 7, 3], [1, 9, 4, 3, 0, 0]])
    types = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 0, 0]])
    keep = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    f["bert/ids"], f["bert/types"], f["bert/attention_mask"] = ids.numpy(), types.numpy(), keep.numpy()
    out, weights = forward(ids, types, keep)
    f["bert_expect/output"] = out.numpy()
    for i, ws in enumerate(weights):
        f[f"bert_expect/weights/layer{i}"] = ws[0].numpy()
    out0, _ = forward(ids, torch.zeros_like(ids))  # no types (all 0) and no mask
    f["bert_expect/output_types0"] = out0.numpy()


def gpt2_goldens(f):
    """GPT2LMHeadModel's layout by its own names (Conv1D weights (in, out), learned positions wpe,
    tied lm_head, the causal-mask buffer attn/bias of older exports), with the config's scalars as
    attributes. The reference: GPT-2's equations (x = wte[id] + wpe[pos], pre-norm LayerNorm blocks,
    tanh GELU, ln_f, logits = x wte^T)."""
    E, H, F, V, P = 16, 4, 24, 11, 32
    bos, eos = 1, 10
    stack, final = block_stack(151, 2, E, H, F, "gelu_tanh", "layer_norm", False, True)
    sds = [({k: v.detach() for k, v in random_mha(1510 + i, E, H).state_dict().items()}, None) for i in range(len(stack))]
    g = torch.Generator().manual_seed(152)
    r = lambda *shape: (torch.randn(*shape, generator=g, dtype=torch.float64) * 0.5).float().double()
    wte, wpe = r(V, E), r(P, E)
    w = "w/gpt2"
    for i, ((p, _), (sd, _)) in enumerate(zip(stack, sds)):
        h = f"{w}/transformer/h/{i}"
        put = lambda key, t: f.__setitem__(f"{h}/{key}", t.numpy().astype(np.float32))
        put("ln_1/weight", p["norm1.weight"]), put("ln_1/bias", p["norm1.bias"])
        put("attn/c_attn/weight", sd["in_proj_weight"].T), put("attn/c_attn/bias", sd["in_proj_bias"])
        put("attn/c_proj/weight", sd["out_proj.weight"].T), put("attn/c_proj/bias", sd["out_proj.bias"])
        put("ln_2/weight", p["norm2.weight"]), put("ln_2/bias", p["norm2.bias"])
        put("mlp/c_fc/weight", p["linear1.weight"].T), put("mlp/c_fc/bias", p["linear1.bias"])
        put("mlp/c_proj/weight", p["linear2.weight"].T), put("mlp/c_proj/bias", p["linear2.bias"])
        put("attn/bias", torch.tril(torch.ones(P, P, dtype=torch.float64)).view(1, 1, P, P))  # a buffer
    f[f"{w}/transformer/ln_f/weight"] = final["norm.weight"].numpy().astype(np.float32)
    f[f"{w}/transformer/ln_f/bias"] = final["norm.bias"].numpy().astype(np.float32)
    f[f"{w}/transformer/wte/weight"] = wte.numpy().astype(np.float32)
    f[f"{w}/transformer/wpe/weight"] = wpe.numpy().astype(np.float32)
    f[f"{w}/lm_head/weight"] = wte.numpy().astype(np.float32)  # tied: the export holds it too
    for key, v in dict(n_embd=E, n_head=H, n_layer=len(stack), n_inner=F, n_positions=P, vocab_size=V,
                       layer_norm_epsilon=1e-5, activation_function="gelu_new", bos_token_id=bos, eos_token_id=eos,
                       model_type="gpt2").items():
        f[w].attrs[key] = v

    def forward(ids, kpm=None):
        x = wte[ids] + wpe[torch.arange(ids.shape[1])]
        out, weights = run_position_stack(x, stack, sds, final, "gelu_tanh", "layer_norm", True, 1e-5, H, H, {},
                                          kpm=kpm, causal=True)
        return out, out @ wte.T, weights

    lm_cases(f, "gpt2", forward, bos, eos, 0)


# --- decode: nn.TransformerDecoder and nn.Transformer (eval, float64, dropout 0), generation -------
def decoder_weights(layer_mod, norm_first, h, mem, tgt_mask, tgt_kpm, mem_kpm):
    """One decoder layer's self and cross attention weights (b, H, t, t), (b, H, t, s)."""
    with torch.enable_grad():
        a_in = layer_mod.norm1(h) if norm_first else h
        sw = layer_mod.self_attn(a_in, a_in, a_in, attn_mask=tgt_mask, key_padding_mask=tgt_kpm, need_weights=True,
                                 average_attn_weights=False)[1].detach()
        h1 = (h + layer_mod._sa_block(a_in, tgt_mask, tgt_kpm)) if norm_first else layer_mod.norm1(
            h + layer_mod._sa_block(h, tgt_mask, tgt_kpm))
        c_in = layer_mod.norm2(h1) if norm_first else h1
        cw = layer_mod.multihead_attn(c_in, mem, mem, key_padding_mask=mem_kpm, need_weights=True,
                                      average_attn_weights=False)[1].detach()
    return sw, cw


def run_decoder(dec, norm_first, tgt, mem, causal=True, tgt_kpm=None, mem_kpm=None):
    """nn.TransformerDecoder layer by layer (grad enabled, so no fused path), each layer's weights,
    checked against the whole module; padded target positions set to 0 as the contract says."""
    t = tgt.shape[1]
    mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1) if causal else None
    weights = []
    with torch.enable_grad():
        h = tgt
        for layer in dec.layers:
            weights.append(decoder_weights(layer, norm_first, h, mem, mask, tgt_kpm, mem_kpm))
            h = layer(h, mem, tgt_mask=mask, tgt_key_padding_mask=tgt_kpm, memory_key_padding_mask=mem_kpm)
        if dec.norm is not None:
            h = dec.norm(h)
        whole = dec(tgt, mem, tgt_mask=mask, tgt_key_padding_mask=tgt_kpm, memory_key_padding_mask=mem_kpm)
    assert torch.allclose(whole, h, atol=1e-12)
    out = h.detach()
    if tgt_kpm is not None:
        out = out.masked_fill(tgt_kpm[:, :, None], 0.0)
        weights = [(sw.masked_fill(tgt_kpm[:, None, :, None], 0.0), cw.masked_fill(tgt_kpm[:, None, :, None], 0.0))
                   for sw, cw in weights]
    return out, weights


def decoder_goldens(f):
    E, H, F, b, t, s = 16, 4, 32, 2, 5, 7
    g = torch.Generator().manual_seed(17)
    rnd = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64).float().double()
    tgt, mem = rnd(b, t, E), rnd(b, s, E)
    f["tgt"], f["mem"] = tgt.numpy().astype(np.float32), mem.numpy().astype(np.float32)
    f["tgt2d"], f["mem2d"] = tgt[0].numpy().astype(np.float32), mem[0].numpy().astype(np.float32)
    tgt_len, mem_len = torch.tensor([5, 3]), torch.tensor([4, 7])
    f["tgt_lengths"], f["mem_lengths"] = tgt_len.numpy(), mem_len.numpy()
    tgt_kpm = torch.tensor([[0, 0, 0, 0, 1], [0, 1, 0, 0, 0]], dtype=torch.bool)
    mem_kpm = torch.tensor([[0, 0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1, 1]], dtype=torch.bool)
    f["tgt_kpm"], f["mem_kpm"] = tgt_kpm.numpy(), mem_kpm.numpy()
    models = {}
    for name, (layers, norm_first, act, final_norm, eps) in {
        "post_relu_1": (1, False, "relu", False, 1e-5),
        "pre_gelu_3_norm": (3, True, "gelu", True, 1e-5),
        "post_gelu_tanh_2_norm": (2, False, "gelu_tanh", True, 1e-6),
    }.items():
        torch.manual_seed(len(models) + 31)
        layer = torch.nn.TransformerDecoderLayer(E, H, F, dropout=0.0, activation=ACTIVATIONS[act], layer_norm_eps=eps,
                                                 batch_first=True, norm_first=norm_first)
        dec = torch.nn.TransformerDecoder(layer, layers, norm=torch.nn.LayerNorm(E, eps=eps) if final_norm else None)
        dec = perturbed(dec.double().train(False))
        export_state_dict(f, f"w/{name}", dec, num_heads=H, norm_first=int(norm_first), activation=act,
                          layer_norm_eps=eps)
        models[name] = (dec, norm_first)
    torch.manual_seed(35)  # add_bias_kv and add_zero_attn in self and cross attention, per layer
    layer = torch.nn.TransformerDecoderLayer(E, H, F, dropout=0.0, batch_first=True, norm_first=False)
    dec = perturbed(torch.nn.TransformerDecoder(layer, 2).double().train(False))
    export_state_dict(f, "w/extra_keys_post_relu_2", dec, num_heads=H, norm_first=0, activation="relu")
    with_extra_keys(f, "w/extra_keys_post_relu_2", dec, 36,
                    {(0, "self_attn"): (True, True), (0, "multihead_attn"): (True, False),
                     (1, "self_attn"): (False, True), (1, "multihead_attn"): (True, True)})
    models["extra_keys_post_relu_2"] = (dec, False)
    lkpm = lambda lengths, n: torch.arange(n)[None, :] >= lengths[:, None]
    cases = {
        "post_relu_1": ("post_relu_1", {}, ""),
        "post_relu_1_no_causal": ("post_relu_1", {"causal": False}, " --no-causal"),
        "pre_gelu_3_norm_lengths": ("pre_gelu_3_norm", {"tgt_kpm": lkpm(tgt_len, t), "mem_kpm": lkpm(mem_len, s)},
                                    " --lengths @/tgt_lengths --memory-lengths @/mem_lengths"),
        "post_gelu_tanh_2_norm_kpm": ("post_gelu_tanh_2_norm", {"tgt_kpm": tgt_kpm, "mem_kpm": mem_kpm},
                                      " --key-padding-mask @/tgt_kpm --memory-key-padding-mask @/mem_kpm"),
        "extra_keys_post_relu_2": ("extra_keys_post_relu_2", {}, ""),
        "extra_keys_post_relu_2_kpm": ("extra_keys_post_relu_2", {"tgt_kpm": tgt_kpm, "mem_kpm": mem_kpm},
                                       " --key-padding-mask @/tgt_kpm --memory-key-padding-mask @/mem_kpm"),
        "extra_keys_post_relu_2_lengths": ("extra_keys_post_relu_2", {"tgt_kpm": lkpm(tgt_len, t), "mem_kpm": lkpm(mem_len, s)},
                                           " --lengths @/tgt_lengths --memory-lengths @/mem_lengths"),
    }
    for name, (wname, kw, extra) in cases.items():
        dec, norm_first = models[wname]
        out, weights = run_decoder(dec, norm_first, tgt, mem, **kw)
        grp = f.create_group(f"cases/{name}")
        grp.attrs["args"] = f"-i @/tgt --memory @/mem --weights @/w/{wname}{extra}"
        grp["output"] = out.numpy()
        for i, (sw, cw) in enumerate(weights):
            grp[f"weights/layer{i}/self"] = sw.numpy()
            grp[f"weights/layer{i}/cross"] = cw.numpy()
    out, _ = run_decoder(*models["post_relu_1"], tgt[:1], mem[:1])
    f["cases_2d/post_relu_1"] = out[0].numpy()
    block_goldens(f, tgt, None, cross=(mem, lkpm(mem_len, s), lkpm(tgt_len, t)))
    position_goldens(f, tgt, None, cross=(mem, lkpm(mem_len, s), lkpm(tgt_len, t)))
    decoder_only_goldens(f)
    llama_goldens(f)
    gpt2_goldens(f)
    f.copy(f["w/pre_gelu_3_norm"], "bad/no_cross")  # layer 1 without its cross-attention
    del f["bad/no_cross/layers/1/multihead_attn"]
    seq2seq_goldens(f)
    seq2seq_goldens(f, "s2s_xk", extra_keys=True)


def embed(table, ids, E, pe):
    x = table[ids] * math.sqrt(E)
    return x + torch.from_numpy(sinusoidal(ids.shape[1], E)) if pe == "sinusoidal" else x


def seq2seq_goldens(f, grp="s2s", extra_keys=False):
    """nn.Transformer with token embeddings and a generator: teacher-forced logits and generation.
    extra_keys: every attention module with add_bias_kv and add_zero_attn (the attribute once, at
    the root), so generation's key/value cache meets them too."""
    E, H, F, V, b, n, t = 16, 4, 32, 11, 3, 6, 5
    PAD, BOS, EOS = 0, 1, 2
    GEN_SCALE, EOS_BIAS = 3.0, 4.5
    torch.manual_seed(41)
    tr = torch.nn.Transformer(E, H, 2, 2, F, dropout=0.0, activation="gelu", batch_first=True, norm_first=False)
    tr = perturbed(tr.double().train(False))
    if extra_keys:
        both = (True, True)
        for stack, names in ((tr.encoder, ("self_attn",)), (tr.decoder, ("self_attn", "multihead_attn"))):
            with_extra_keys(None, None, stack, 45 + len(names), {(i, nm): both for i in range(2) for nm in names})
    g = torch.Generator().manual_seed(43)
    rnd = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64).float().double()
    src_table, tgt_table, gen_w = rnd(V, E), rnd(V, E), rnd(V, E) * GEN_SCALE
    # A random decoder's outputs share a large constant part; a generator that sees only that
    # emits one token forever. Centre it on the outputs' mean (over random inputs) instead.
    with torch.enable_grad():
        probe = tr(rnd(8, n, E), rnd(8, t, E)).detach().reshape(-1, E).mean(0)
    gen_b = -(gen_w @ probe) + rnd(V) * 0.3
    gen_b[EOS] += EOS_BIAS  # so that some generated rows end early and some run to --max-len
    gen_b[PAD] -= 10.0  # as in a trained model, padding and the start token are never generated
    gen_b[BOS] -= 10.0
    gen_w, gen_b = gen_w.float().double(), gen_b.float().double()
    for key, value in tr.state_dict().items():
        f[f"{grp}/{key.replace('.', '/')}"] = value.float().numpy()
    f[f"{grp}/src_embed/weight"] = src_table.numpy().astype(np.float32)
    f[f"{grp}/tgt_embed/weight"] = tgt_table.numpy().astype(np.float32)
    f[f"{grp}/generator/weight"] = gen_w.numpy().astype(np.float32)
    f[f"{grp}/generator/bias"] = gen_b.numpy().astype(np.float32)
    for k, v in dict(d_model=E, num_heads=H, norm_first=0, activation="gelu", layer_norm_eps=1e-5, pad_id=PAD,
                     bos_id=BOS, eos_id=EOS, **(dict(add_zero_attn=1) if extra_keys else {})).items():
        f[grp].attrs[k] = v
    src = torch.randint(3, V, (b, n), generator=g)
    src_len = torch.tensor([6, 4, 5])
    src = src.masked_fill(torch.arange(n)[None, :] >= src_len[:, None], PAD)
    tgt = torch.randint(3, V, (b, t), generator=g)
    tgt[:, 0] = BOS
    tgt_len = torch.tensor([5, 5, 2])
    tgt = tgt.masked_fill(torch.arange(t)[None, :] >= tgt_len[:, None], PAD)
    f[f"{grp}_src"], f[f"{grp}_src_lengths"], f[f"{grp}_tgt"], f[f"{grp}_tgt_lengths"] = src.numpy(), src_len.numpy(), tgt.numpy(), tgt_len.numpy()
    src_kpm = torch.arange(n)[None, :] >= src_len[:, None]
    tgt_kpm = torch.arange(t)[None, :] >= tgt_len[:, None]
    with torch.enable_grad():
        mem = tr.encoder(embed(src_table, src, E, "sinusoidal"), src_key_padding_mask=src_kpm)
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        out = tr.decoder(embed(tgt_table, tgt, E, "sinusoidal"), mem, tgt_mask=causal, tgt_key_padding_mask=tgt_kpm,
                         memory_key_padding_mask=src_kpm)
        whole = tr(embed(src_table, src, E, "sinusoidal"), embed(tgt_table, tgt, E, "sinusoidal"), tgt_mask=causal,
                   src_key_padding_mask=src_kpm, tgt_key_padding_mask=tgt_kpm, memory_key_padding_mask=src_kpm)
    assert torch.allclose(whole, out, atol=1e-12)
    out = out.detach()
    logits = out @ gen_w.T + gen_b
    mem = mem.detach().masked_fill(src_kpm[:, :, None], 0.0)  # as encode writes it
    f[f"{grp}_expect/memory"] = mem.numpy()
    f[f"{grp}_expect/output"] = out.masked_fill(tgt_kpm[:, :, None], 0.0).numpy()
    f[f"{grp}_expect/logits"] = logits.masked_fill(tgt_kpm[:, :, None], 0.0).numpy()
    f[f"{grp}_memory"] = mem.numpy().astype(np.float32)

    # Generation from the float32 memory, recomputing the whole prefix at every step (no cache).
    mem32 = mem.float().double()
    MAXLEN = 8

    def step_logp(prefixes, rows):
        """log p(next token) for each prefix (list of id lists starting with BOS) of memory rows `rows`."""
        x = embed(tgt_table, torch.tensor(prefixes), E, "sinusoidal")
        L = x.shape[1]
        with torch.enable_grad():
            h = tr.decoder(x, mem32[rows], tgt_mask=torch.triu(torch.ones(L, L, dtype=torch.bool), 1),
                           memory_key_padding_mask=src_kpm[rows])
        return torch.log_softmax(h.detach()[:, -1] @ gen_w.T + gen_b, dim=-1)

    def beam_search(row, K):
        """The algorithm of lib/generate.hpp: finished hypotheses stay, K best proposals survive."""
        beams = [([], 0.0, False)]  # (tokens, score, done)
        min_gap = float("inf")
        for step in range(MAXLEN):
            live = [bm for bm in beams if not bm[2]]
            logp = step_logp([[BOS] + bm[0] for bm in live], [row] * len(live)) if live else None
            props, li = [], 0
            for k, (toks, sc, done) in enumerate(beams):
                if done:
                    props.append((sc, k, -1))
                else:
                    props += [(sc + logp[li, v].item(), k, v) for v in range(V)]
                    li += 1
            props.sort(key=lambda p: (-p[0], p[1], p[2]))
            if len(props) > K:
                min_gap = min(min_gap, props[K - 1][0] - props[K][0])
            beams = [(beams[k][0] + ([v] if v >= 0 else []), sc, beams[k][2] or v == EOS) for sc, k, v in props[:K]]
            if all(bm[2] for bm in beams):
                break
        best = max(range(len(beams)), key=lambda k: (beams[k][1], -k))
        return beams[best][0], beams[best][1], min_gap

    for K in (1, 3):
        rows, scores, gaps = [], [], []
        for r in range(b):
            toks, sc, gap = beam_search(r, K)
            rows.append(toks), scores.append(sc), gaps.append(gap)
        assert min(gaps) > 1e-4, f"beam {K}: a near tie ({min(gaps)}) would make the golden fragile"
        L = max(len(r) for r in rows)
        tokens = np.full((b, L), PAD, dtype=np.int64)
        for r, toks in enumerate(rows):
            tokens[r, :len(toks)] = toks
        lens = [len(r) for r in rows]
        assert any(EOS in r for r in rows) and (K > 1 or min(lens) < MAXLEN), f"beam {K}: rows {rows}"
        f[f"{grp}_generate/beam{K}/tokens"] = tokens
        f[f"{grp}_generate/beam{K}/scores"] = np.array(scores)
        f[f"{grp}_generate/beam{K}"].attrs["max_len"] = MAXLEN
    print(f"{grp} generation goldens:", f[f"{grp}_generate/beam1/tokens"][()].tolist(),
          f[f"{grp}_generate/beam3/tokens"][()].tolist())
    if extra_keys:
        return
    # bad model files: no target embeddings; no special token ids
    f.copy(f[grp], "bad/no_tgt_embed")
    del f["bad/no_tgt_embed/tgt_embed"]
    f.copy(f[grp], "bad/no_ids")
    for k in ("pad_id", "bos_id", "eos_id"):
        del f["bad/no_ids"].attrs[k]


def absurd_shapes(path):
    """Datasets whose shapes are absurd but whose files are tiny (chunked, nothing written): the
    tools must refuse them before allocating (bad-input tests)."""
    with h5py.File(path, "w") as f:
        # 2^46 floats, 256 TiB: more than any machine's memory
        f.create_dataset("huge", shape=(1 << 20, 1 << 20, 64), dtype=np.float32, chunks=(1, 1, 64))
        # 2^66 elements: the count overflows 64 bits
        f.create_dataset("overflow", shape=(1 << 22, 1 << 22, 1 << 22), dtype=np.float32, chunks=(1, 1, 1))
        f.create_dataset("huge_ids", shape=(1 << 20, 1 << 30), dtype=np.int64, chunks=(1, 1024))
        # one item of 2^38 floats, 1 TiB: for the tools that read a batch an item or a chunk at a time
        f.create_dataset("huge_item", shape=(2, 1 << 32, 64), dtype=np.float32, chunks=(1, 1024, 64))


def string_attributes(path):
    """String attributes as h5py writes them (variable-length ones live in the global heap),
    behind a 512-byte user block so heap addresses are relative to a moved base (h5guard tests)."""
    with h5py.File(path, "w", userblock_size=512) as f:
        g = f.create_group("g")
        g.attrs["activation"] = "gelu"
        g.attrs["empty"] = ""
        g.attrs["fixed"] = np.bytes_("relu")
        g.attrs["long"] = "x" * 100


def external_storage(path):
    """Two groups; /b/y's values lie in an external file "y.bin" (found through HDF5_EXTFILE_PREFIX),
    which the h5guard tests make a FIFO nobody writes: reading it never ends, as a damaged file can
    make HDF5 loop. The preflight must read the part of the file a run names, and no other part
    before the run touches it."""
    with h5py.File(path, "w") as f:
        f.create_dataset("a/x", data=np.arange(6, dtype=np.float32).reshape(2, 3))
        f["a"].attrs["num_heads"] = 2
        f.create_dataset("b/y", shape=(2, 3), dtype=np.float32, external=[("y.bin", 0, 24)])


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    absurd_shapes(OUT / "h5py_absurd.h5")
    string_attributes(OUT / "h5py_strings.h5")
    external_storage(OUT / "h5py_external.h5")

    with h5py.File(OUT / "attn_score.h5", "w") as f:
        attn_score_goldens(f)

    with h5py.File(OUT / "mha.h5", "w") as f:
        mods = mha_goldens(f)
    check_mha_export(OUT / "mha.h5", mods)

    with h5py.File(OUT / "encoder.h5", "w") as f:
        encoder_goldens(f)

    with h5py.File(OUT / "decoder.h5", "w") as f:
        decoder_goldens(f)

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
