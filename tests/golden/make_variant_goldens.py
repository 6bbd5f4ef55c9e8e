#!/usr/bin/python3
"""Golden files of the attention variants of issue 19: testdata/linear_attention.h5 (attn-score),
testdata/linear_mha.h5 (mha-run and encode with a module's `attention` attribute),
testdata/monotonic_attention.h5 (attn-score --attention monotonic),
testdata/location_attention.h5 (attn-score --score location and location-aware) and
testdata/conv_ffn.h5 (encode and decode with a depthwise convolution in the feed-forward).

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
Each case's `args` attribute is the command line (of attn-score, or of the case's `tool`), @ standing
for this file. In linear_mha.h5 multi-head attention is nn.MultiheadAttention's equations with each
head's attention one of the forms above (query head h on key/value head h // (H / G)), and an
encoder layer nn.TransformerEncoderLayer's post-norm equations around it.
Monotonic attention (Raffel et al. 2017): p_ij = sigmoid(e_ij + r) over the score function's
energies; soft: alpha_ij = p_ij sum_{k<=j} alpha_{i-1,k} prod_{l=k}^{j-1} (1 - p_il) with
alpha_0 = (1, 0, ...), by that triple loop; hard: Algorithm 1 with z_ij = [p_ij >= 0.5], nothing
attended once the end is passed. Padded keys have p = 0.
Location-based attention: Luong et al. 2015 (eq. 8), a_i = softmax(W_a q_i); Chorowski et al.
2015 (eq. 5-9), e_ij = v^T tanh(W_q q_i + W_k k_j + U f_ij + b) with f_i = F * alpha_{i-1} by
PyTorch's conv1d (float64, padding (r - 1) / 2) and alpha_0 = (1, 0, ...), query after query.
Convolutional feed-forward: what enters the activation goes through torch's depthwise conv1d
(groups = F): centred in encoders, causal in decoders (padding k - 1, the last k - 1 outputs
dropped), padded positions zeroed first; the layers around it are nn.TransformerEncoderLayer's and
nn.TransformerDecoderLayer's equations in NumPy.
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
        put = putter(f)

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
            big = w.size > 20000
            write_case(f, name, args + ("" if out is None or big else " --emit weights"), out,
                       w if not big or out is None else None)

    mha_goldens()
    monotonic_goldens()
    location_goldens()
    conv_ffn_goldens()


# --- multi-head attention and an encoder with linear forms (linear_mha.h5) ---------------------

def multi_head(x_q, x_kv, w, kind, causal=False, kpm=None, lengths=None, self_attention=True):
    """nn.MultiheadAttention with `kind` attention per head: (out (b, n, E), weights (b, H, n, m))."""
    H, G = w["num_heads"], w.get("num_kv_heads", w["num_heads"])
    E = x_q.shape[-1]
    dh = E // H
    if "in_proj_weight" in w:
        Wq, Wk, Wv = np.split(w["in_proj_weight"], [E, E + G * dh])
    else:
        Wq, Wk, Wv = w["q_proj_weight"], w["k_proj_weight"], w["v_proj_weight"]
    bq, bk, bv = np.split(w["in_proj_bias"], [E, E + G * dh])
    q, k, v = x_q @ Wq.T + bq, x_kv @ Wk.T + bk, x_kv @ Wv.T + bv
    heads, weights = [], []
    for h in range(H):
        g = h // (H // G)
        qh, kh, vh = q[..., h * dh:(h + 1) * dh], k[..., g * dh:(g + 1) * dh], v[..., g * dh:(g + 1) * dh]
        if kind == "linear":
            o, a = linear_reference(qh, kh, vh, causal, kpm, lengths)
        elif kind == "performer":
            o, a = performer_reference(qh, kh, vh, w["features"], None, causal, kpm, lengths)
        else:
            o, a = linformer_reference(qh, kh, vh, w["E"], w["F"], None, kpm, lengths)
        heads.append(o)
        weights.append(a)
    out = np.concatenate(heads, -1) @ w["out_proj/weight"].T + w["out_proj/bias"]
    weights = np.stack(weights, 1)
    if self_attention:  # padded queries: output and weights 0
        seen = allowed_keys(x_q.shape[0], 1, x_q.shape[1], False, kpm, lengths)[:, 0, :]  # (b, n)
        out = out * seen[..., None]
        weights = weights * seen[:, None, :, None]
    return out, weights


def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def write_case(f, name, args, output=None, weights=None, scores=None, tool=None):
    """Golden case cases/NAME: the tool (when not attn-score) and its args, then the datasets given."""
    g = f.create_group(f"cases/{name}")
    if tool is not None:
        g.attrs["tool"] = tool
    g.attrs["args"] = args
    for key, x in (("output", output), ("weights", weights), ("scores", scores)):
        if x is not None:
            g[key] = x


def putter(f):
    """put(name, x): x written to f as float32, and returned as the float32 values the tools read."""
    def put(name, x):
        f[name] = np.asarray(x, dtype=np.float32)
        return f32(x)
    return put


def mha_goldens():
    with h5py.File(OUT / "linear_mha.h5", "w") as f:
        put = putter(f)

        E, H, dh = 16, 2, 8
        x = put("x", rng.standard_normal((2, 7, E)))
        y = put("y", rng.standard_normal((2, 9, E)))
        f["lengths"] = np.array([7, 4], dtype=np.int64)
        kpm9 = np.zeros((2, 9), dtype=bool)
        kpm9[0, [1, 8]] = True
        kpm9[1, 3] = True
        f["kpm9"] = kpm9

        def module(group, kind, packed=True, kv_heads=H, features=12, k=5, m=7):
            w = {"num_heads": H}
            f[group].attrs["num_heads"] = H
            if kind != "softmax":
                f[group].attrs["attention"] = kind
            if packed:
                w["in_proj_weight"] = put(f"{group}/in_proj_weight", rng.standard_normal((3 * E, E)) * 0.3)
            else:
                w["num_kv_heads"] = kv_heads
                f[group].attrs["num_kv_heads"] = kv_heads
                w["q_proj_weight"] = put(f"{group}/q_proj_weight", rng.standard_normal((E, E)) * 0.3)
                w["k_proj_weight"] = put(f"{group}/k_proj_weight", rng.standard_normal((kv_heads * dh, E)) * 0.3)
                w["v_proj_weight"] = put(f"{group}/v_proj_weight", rng.standard_normal((kv_heads * dh, E)) * 0.3)
            w["in_proj_bias"] = put(f"{group}/in_proj_bias", rng.standard_normal(E + 2 * kv_heads * dh) * 0.1)
            w["out_proj/weight"] = put(f"{group}/out_proj/weight", rng.standard_normal((E, E)) * 0.3)
            w["out_proj/bias"] = put(f"{group}/out_proj/bias", rng.standard_normal(E) * 0.1)
            if kind == "performer":
                w["features"] = put(f"{group}/features", rng.standard_normal((features, dh)))
            if kind == "linformer":
                w["E"] = put(f"{group}/E", rng.standard_normal((k, m)) / np.sqrt(m))
                w["F"] = put(f"{group}/F", rng.standard_normal((k, m)) / np.sqrt(m))
            return w

        for name in ("lin", "perf", "perf_gqa", "lf"):
            f.create_group(f"mha/{name}")
        lin = module("mha/lin", "linear")
        perf = module("mha/perf", "performer")
        gqa = module("mha/perf_gqa", "performer", packed=False, kv_heads=1)
        lf = module("mha/lf", "linformer")
        lens = [7, 4]
        cases = {
            "lin_self": (multi_head(x, x, lin, "linear"), "-q @/x --weights @/mha/lin --need-weights"),
            "lin_self_causal_lengths": (multi_head(x, x, lin, "linear", causal=True, lengths=lens),
                                        "-q @/x --weights @/mha/lin --causal --lengths @/lengths --need-weights"),
            "perf_self_causal": (multi_head(x, x, perf, "performer", causal=True),
                                 "-q @/x --weights @/mha/perf --causal --need-weights"),
            "perf_gqa_cross_kpm": (multi_head(x, y, gqa, "performer", kpm=kpm9, self_attention=False),
                                   "-q @/x -k @/y --weights @/mha/perf_gqa --key-padding-mask @/kpm9 --need-weights"),
            "perf_gqa_cross_causal": (multi_head(x, y, gqa, "performer", causal=True, self_attention=False),
                                      "-q @/x -k @/y --weights @/mha/perf_gqa --causal"),
            "lf_self_lengths": (multi_head(x, x, lf, "linformer", lengths=lens),
                                "-q @/x --weights @/mha/lf --lengths @/lengths --need-weights"),
        }
        for name, ((out, w), args) in cases.items():
            write_case(f, name, args, out, w if "--need-weights" in args else None, tool="mha-run")

        # A 2-layer post-norm ReLU encoder: layer 0 kernelised linear attention, layer 1 Performer.
        enc = f.create_group("enc")
        for a, v in {"num_heads": H, "norm_first": 0, "activation": "relu", "layer_norm_eps": 1e-5}.items():
            enc.attrs[a] = v
        layers = []
        for i, kind in enumerate(("linear", "performer")):
            p = f"enc/layers/{i}"
            f.create_group(f"{p}/self_attn")
            sa = module(f"{p}/self_attn", kind, features=10)
            ff = {n: put(f"{p}/{n}", a) for n, a in {
                "linear1/weight": rng.standard_normal((32, E)) * 0.3, "linear1/bias": rng.standard_normal(32) * 0.1,
                "linear2/weight": rng.standard_normal((E, 32)) * 0.3, "linear2/bias": rng.standard_normal(E) * 0.1,
                "norm1/weight": 1 + 0.1 * rng.standard_normal(E), "norm1/bias": 0.1 * rng.standard_normal(E),
                "norm2/weight": 1 + 0.1 * rng.standard_normal(E), "norm2/bias": 0.1 * rng.standard_normal(E)}.items()}
            layers.append((kind, sa, ff))

        def encoder(x, lengths=None):
            for kind, sa, ff in layers:
                x = layer_norm(x + multi_head(x, x, sa, kind, lengths=lengths)[0], ff["norm1/weight"],
                               ff["norm1/bias"])
                h = np.maximum(x @ ff["linear1/weight"].T + ff["linear1/bias"], 0) @ ff["linear2/weight"].T
                x = layer_norm(x + h + ff["linear2/bias"], ff["norm2/weight"], ff["norm2/bias"])
            if lengths is not None:  # padded positions: 0
                x = x * (np.arange(x.shape[1])[None, :] < np.asarray(lengths)[:, None])[..., None]
            return x

        for name, out, args in (("enc", encoder(x), "-i @/x --weights @/enc"),
                                ("enc_lengths", encoder(x, lens), "-i @/x --weights @/enc --lengths @/lengths")):
            write_case(f, name, args, out, tool="encode")


# --- monotonic attention (monotonic_attention.h5) --------------------------------------------

def energies(q, k, score, params=None):
    if score == "scaled-dot":
        return q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    if score == "dot":
        return q @ k.transpose(0, 2, 1)
    if score == "general":
        return q @ params["W"] @ k.transpose(0, 2, 1)
    qp, kp = q @ params["W_q"].T, k @ params["W_k"].T  # (b, n, h), (b, m, h)
    return np.tanh(qp[:, :, None, :] + kp[:, None, :, :]) @ params["v"]


def monotonic_reference(e, v, r=0.0, hard=False, kpm=None, lengths=None):
    b, n, m = e.shape
    keep = allowed_keys(b, 1, m, False, kpm, lengths)[:, 0, :]  # (b, m)
    p = np.where(keep[:, None, :], 1 / (1 + np.exp(-(e + r))), 0.0)
    alpha = np.zeros((b, n, m))
    for bi in range(b):
        if hard:
            t = 0
            for i in range(n):
                j = t
                while j < m and not (keep[bi, j] and e[bi, i, j] + r >= 0):
                    j += 1
                if j < m:
                    alpha[bi, i, j] = 1.0
                t = j
            continue
        prev = np.zeros(m)
        prev[0] = 1.0
        for i in range(n):
            for j in range(m):
                s = 0.0
                for k in range(j + 1):
                    s += prev[k] * np.prod(1 - p[bi, i, k:j])
                alpha[bi, i, j] = p[bi, i, j] * s
            prev = alpha[bi, i]
    return (None if v is None else alpha @ v), alpha


def monotonic_goldens():
    with h5py.File(OUT / "monotonic_attention.h5", "w") as f:
        put = putter(f)

        q5, k7, v7 = put("q5", rng.standard_normal((2, 5, 8))), put("k7", rng.standard_normal((2, 7, 8))), \
            put("v7", rng.standard_normal((2, 7, 6)))
        q6 = put("q6", rng.standard_normal((2, 5, 6)))
        q40, k90, v90 = put("q40", rng.standard_normal((1, 40, 4))), put("k90", rng.standard_normal((1, 90, 4))), \
            put("v90", rng.standard_normal((1, 90, 3)))
        kpm = np.array([[0, 0, 1, 0, 1, 0, 0], [1, 0, 0, 0, 0, 0, 1]], dtype=bool)
        f["masks/kpm"] = kpm
        f["masks/lengths"] = np.array([0, 4], dtype=np.int64)
        general = {"W": put("params/general/W", rng.standard_normal((6, 8)) * 0.4)}
        additive = {"W_q": put("params/additive/W_q", rng.standard_normal((5, 8)) * 0.5),
                    "W_k": put("params/additive/W_k", rng.standard_normal((5, 8)) * 0.5),
                    "v": put("params/additive/v", rng.standard_normal(5) * 2)}
        e_sdp, e_dot = energies(q5, k7, "scaled-dot"), energies(q5, k7, "dot")
        e_gen, e_add = energies(q6, k7, "general", general), energies(q5, k7, "additive", additive)
        e_long = energies(q40, k90, "scaled-dot")
        I = "-q @/q5 -k @/k7 -v @/v7"
        cases = {
            "soft_sdp": (monotonic_reference(e_sdp, v7), e_sdp, f"--attention monotonic {I} --emit weights,scores"),
            "soft_dot_bias": (monotonic_reference(e_dot, v7, r=-1.5), None,
                              f"--attention monotonic {I} --score dot --energy-bias -1.5 --emit weights"),
            "soft_general_lengths": (monotonic_reference(e_gen, v7, lengths=[0, 4]), None,
                                     "--attention monotonic -q @/q6 -k @/k7 -v @/v7 --score general "
                                     "--params @/params/general --lengths @/masks/lengths --emit weights"),
            "soft_additive_kpm": (monotonic_reference(e_add, v7, r=0.5, kpm=kpm), None,
                                  f"--attention monotonic {I} --score additive --params @/params/additive "
                                  "--energy-bias 0.5 --key-padding-mask @/masks/kpm --emit weights"),
            "soft_no_values": (monotonic_reference(e_sdp, None, r=1.0), None,
                               "--attention monotonic -q @/q5 -k @/k7 --energy-bias 1"),
            "soft_long": (monotonic_reference(e_long, v90, r=-1.0), None,
                          "--attention monotonic -q @/q40 -k @/k90 -v @/v90 --energy-bias -1 --emit weights"),
            "hard_sdp": (monotonic_reference(e_sdp, v7, hard=True), None,
                         f"--attention monotonic --hard {I} --emit weights"),
            "hard_bias_kpm": (monotonic_reference(e_dot, v7, r=0.7, hard=True, kpm=kpm), None,
                              f"--attention monotonic --hard {I} --score dot --energy-bias 0.7 "
                              "--key-padding-mask @/masks/kpm --emit weights"),
            "hard_general_lengths": (monotonic_reference(e_gen, v7, hard=True, lengths=[0, 4]), None,
                                     "--attention monotonic --hard -q @/q6 -k @/k7 -v @/v7 --score general "
                                     "--params @/params/general --lengths @/masks/lengths --emit weights"),
            "hard_long": (monotonic_reference(e_long, v90, r=-0.3, hard=True), None,
                          "--attention monotonic --hard -q @/q40 -k @/k90 -v @/v90 --energy-bias -0.3 "
                          "--emit weights"),
        }
        for name, ((out, w), scores, args) in cases.items():
            write_case(f, name, args, out, w, scores)


# --- location-based attention (location_attention.h5) ----------------------------------------

def masked_softmax(e, ok):
    """softmax over the allowed keys of each row; a row without any: 0."""
    e = np.where(ok, e, -np.inf)
    top = e.max(-1, keepdims=True)
    x = np.where(ok, np.exp(e - np.where(np.isfinite(top), top, 0)), 0.0)
    s = x.sum(-1, keepdims=True)
    return np.divide(x, s, out=np.zeros_like(x), where=s > 0)


def location_aware_reference(q, k, v, p, ok):
    import torch
    b, n, _ = q.shape
    m = k.shape[1]
    K, r = p["F"].shape
    Fw = torch.from_numpy(p["F"])[:, None, :]  # (K, 1, r): conv1d's (out, in, width)
    alpha = np.zeros((b, n, m))
    e_all = np.zeros((b, n, m))
    for bi in range(b):
        prev = np.zeros(m)
        prev[0] = 1.0
        kp = k[bi] @ p["W_k"].T + p["b"]  # (m, h)
        for i in range(n):
            f = torch.nn.functional.conv1d(torch.from_numpy(prev)[None, None, :], Fw, padding=(r - 1) // 2)
            f = f[0].numpy().T  # (m, K)
            e = np.tanh(q[bi, i] @ p["W_q"].T + kp + f @ p["U"].T) @ p["v"]
            e_all[bi, i] = e
            prev = masked_softmax(e, ok[bi, i])
            alpha[bi, i] = prev
    return (None if v is None else alpha @ v), alpha, e_all


def location_goldens():
    with h5py.File(OUT / "location_attention.h5", "w") as f:
        put = putter(f)

        q5, q6, k7, v7 = (put("q5", rng.standard_normal((2, 5, 8))), put("q6", rng.standard_normal((2, 6, 6))),
                          put("k7", rng.standard_normal((2, 7, 8))), put("v7", rng.standard_normal((2, 7, 5))))
        q30, k50, v50 = (put("q30", rng.standard_normal((1, 30, 4))), put("k50", rng.standard_normal((1, 50, 4))),
                         put("v50", rng.standard_normal((1, 50, 3))))
        kpm = np.array([[0, 0, 1, 0, 1, 0, 0], [1, 0, 0, 0, 0, 0, 1]], dtype=bool)
        f["masks/kpm"] = kpm
        f["masks/lengths"] = np.array([0, 4], dtype=np.int64)
        W_a = put("params/loc/W_a", rng.standard_normal((7, 8)) * 0.5)

        def la_params(group, dq, dk, h, K, r):
            return {"W_q": put(f"{group}/W_q", rng.standard_normal((h, dq)) * 0.5),
                    "W_k": put(f"{group}/W_k", rng.standard_normal((h, dk)) * 0.5),
                    "v": put(f"{group}/v", rng.standard_normal(h)),
                    "U": put(f"{group}/U", rng.standard_normal((h, K))),
                    "F": put(f"{group}/F", rng.standard_normal((K, r))),
                    "b": put(f"{group}/b", rng.standard_normal(h) * 0.3)}

        la = la_params("params/la", 8, 8, 6, 3, 5)
        la_wide = la_params("params/la_wide", 6, 8, 4, 2, 9)  # wider than m: padding past both ends
        la_long = la_params("params/la_long", 4, 4, 8, 4, 11)

        def window(n, m, w):
            pos = np.arange(n)[:, None] + (m - n)
            return np.abs(pos - np.arange(m)[None, :]) <= w

        ok = allowed_keys(2, 5, 7, False)
        ok_kpm = allowed_keys(2, 5, 7, False, kpm=kpm)
        ok_cl = allowed_keys(2, 5, 7, True, lengths=[0, 4])
        ok6 = allowed_keys(2, 6, 7, False)
        ok_long = allowed_keys(1, 30, 50, True) & window(30, 50, 6)[None]
        e_loc = q5 @ W_a.T  # (2, 5, 7)
        I = "-q @/q5 -k @/k7 -v @/v7"
        la_args = f"--score location-aware {I} --params @/params/la"
        cases = {
            "loc_plain": ((masked_softmax(e_loc, ok) @ v7, masked_softmax(e_loc, ok), e_loc),
                          f"--score location {I} --params @/params/loc --emit weights,scores"),
            "loc_causal_lengths": ((masked_softmax(e_loc, ok_cl) @ v7, masked_softmax(e_loc, ok_cl), None),
                                   f"--score location {I} --params @/params/loc --causal --lengths @/masks/lengths "
                                   "--emit weights"),
            "loc_monotonic": (monotonic_reference(e_loc, v7, r=-0.5) + (None,),
                              f"--attention monotonic --score location {I} --params @/params/loc --energy-bias -0.5 "
                              "--emit weights"),
            "la_plain": (location_aware_reference(q5, k7, v7, la, ok), f"{la_args} --emit weights,scores"),
            "la_kpm": (location_aware_reference(q5, k7, v7, la, ok_kpm)[:2] + (None,),
                       f"{la_args} --key-padding-mask @/masks/kpm --emit weights"),
            "la_causal_lengths": (location_aware_reference(q5, k7, v7, la, ok_cl)[:2] + (None,),
                                  f"{la_args} --causal --lengths @/masks/lengths --emit weights"),
            "la_wide_no_values": ((None,) + location_aware_reference(q6, k7, None, la_wide, ok6)[1:2] + (None,),
                                  "--score location-aware -q @/q6 -k @/k7 --params @/params/la_wide"),
            "la_long_window": (location_aware_reference(q30, k50, v50, la_long, ok_long)[:2] + (None,),
                               "--score location-aware -q @/q30 -k @/k50 -v @/v50 --params @/params/la_long "
                               "--causal --window 6 --emit weights"),
        }
        for name, ((out, w, e), args) in cases.items():
            write_case(f, name, args, out, w, e)


# --- convolutional feed-forward (conv_ffn.h5) --------------------------------------------------

def depthwise_conv(h, w, b, causal, keep):
    """h (B, n, F) through torch's conv1d(groups=F) with w (F, k), bias b; padded positions 0."""
    import torch
    F, k = w.shape
    x = torch.from_numpy(h * keep[..., None]).transpose(1, 2)  # (B, F, n)
    y = torch.nn.functional.conv1d(x, torch.from_numpy(w)[:, None, :], torch.from_numpy(b),
                                   padding=k - 1 if causal else (k - 1) // 2, groups=F)
    if causal:
        y = y[..., :h.shape[1]]
    return y.transpose(1, 2).numpy()


def conv_ffn_goldens():
    with h5py.File(OUT / "conv_ffn.h5", "w") as f:
        put = putter(f)

        E, H, Fd = 16, 2, 24
        x = put("x", rng.standard_normal((2, 7, E)))
        tgt = put("tgt", rng.standard_normal((2, 6, E)))
        mem = put("mem", rng.standard_normal((2, 5, E)))
        f["lengths"] = np.array([7, 4], dtype=np.int64)
        f["tgt_lengths"] = np.array([6, 3], dtype=np.int64)

        def mha(group):
            f.create_group(group).attrs["num_heads"] = H
            return {"num_heads": H,
                    "in_proj_weight": put(f"{group}/in_proj_weight", rng.standard_normal((3 * E, E)) * 0.3),
                    "in_proj_bias": put(f"{group}/in_proj_bias", rng.standard_normal(3 * E) * 0.1),
                    "out_proj/weight": put(f"{group}/out_proj/weight", rng.standard_normal((E, E)) * 0.3),
                    "out_proj/bias": put(f"{group}/out_proj/bias", rng.standard_normal(E) * 0.1)}

        def softmax_mha(xq, xkv, w, causal=False, lengths=None, self_attention=True):
            Wq, Wk, Wv = np.split(w["in_proj_weight"], 3)
            bq, bk, bv = np.split(w["in_proj_bias"], 3)
            q, k, v = xq @ Wq.T + bq, xkv @ Wk.T + bk, xkv @ Wv.T + bv
            ok = allowed_keys(xq.shape[0], xq.shape[1], xkv.shape[1], causal, None, lengths)
            dh = E // H
            heads = [masked_softmax(q[..., h * dh:(h + 1) * dh] @ k[..., h * dh:(h + 1) * dh].transpose(0, 2, 1)
                                    / np.sqrt(dh), ok) @ v[..., h * dh:(h + 1) * dh] for h in range(H)]
            out = np.concatenate(heads, -1) @ w["out_proj/weight"].T + w["out_proj/bias"]
            if self_attention and lengths is not None:
                out = out * allowed_keys(xq.shape[0], 1, xq.shape[1], False, None, lengths)[:, 0, :, None]
            return out

        def ffn_params(p, k, gated_):
            d = {n: put(f"{p}/{n}", a) for n, a in {
                "linear1/weight": rng.standard_normal((Fd, E)) * 0.3, "linear1/bias": rng.standard_normal(Fd) * 0.1,
                "linear2/weight": rng.standard_normal((E, Fd)) * 0.3, "linear2/bias": rng.standard_normal(E) * 0.1,
                "ffn_conv/weight": rng.standard_normal((Fd, 1, k)) * 0.6,
                "ffn_conv/bias": rng.standard_normal(Fd) * 0.1}.items()}
            if gated_:
                d["linear_gate/weight"] = put(f"{p}/linear_gate/weight", rng.standard_normal((Fd, E)) * 0.3)
            for i in (1, 2, 3):
                d[f"norm{i}/weight"] = put(f"{p}/norm{i}/weight", 1 + 0.1 * rng.standard_normal(E))
                d[f"norm{i}/bias"] = put(f"{p}/norm{i}/bias", 0.1 * rng.standard_normal(E))
            return d

        def ffn(h_in, p, act, causal, keep):
            w = p["ffn_conv/weight"][:, 0, :]
            up = h_in @ p["linear1/weight"].T + p["linear1/bias"]
            if act == "swiglu":
                g = depthwise_conv(h_in @ p["linear_gate/weight"].T, w, p["ffn_conv/bias"], causal, keep)
                h = g / (1 + np.exp(-g)) * up
            else:
                h = np.maximum(depthwise_conv(up, w, p["ffn_conv/bias"], causal, keep), 0)
            return h @ p["linear2/weight"].T + p["linear2/bias"]

        def keep_of(b, n, lengths):
            return allowed_keys(b, 1, n, False, None, lengths)[:, 0, :].astype(np.float64)

        # encoders: 2 post-norm ReLU layers, k = 3; 1 pre-norm SwiGLU layer with a final norm, k = 5
        encoders = {"enc_relu_k3": (2, 3, "relu", 0), "enc_swiglu_k5_pre": (1, 5, "swiglu", 1)}
        for name, (L, k, act, pre) in encoders.items():
            g = f.create_group(f"w/{name}")
            for a, v in {"num_heads": H, "norm_first": pre, "activation": act, "layer_norm_eps": 1e-5,
                         "ffn_conv_kernel": k}.items():
                g.attrs[a] = v
            layers = [(mha(f"w/{name}/layers/{i}/self_attn"), ffn_params(f"w/{name}/layers/{i}", k, act == "swiglu"))
                      for i in range(L)]
            for i in range(L):  # an encoder layer has no norm3
                del f[f"w/{name}/layers/{i}/norm3"]
            final = None
            if pre:
                final = (put(f"w/{name}/norm/weight", 1 + 0.1 * rng.standard_normal(E)),
                         put(f"w/{name}/norm/bias", 0.1 * rng.standard_normal(E)))

            def encoder(x, lengths=None):
                keep = keep_of(x.shape[0], x.shape[1], lengths)
                for sa, p in layers:
                    n1 = lambda y: layer_norm(y, p["norm1/weight"], p["norm1/bias"])
                    n2 = lambda y: layer_norm(y, p["norm2/weight"], p["norm2/bias"])
                    if pre:
                        x = x + softmax_mha(n1(x), n1(x), sa, lengths=lengths)
                        x = x + ffn(n2(x), p, act, False, keep)
                    else:
                        x = n1(x + softmax_mha(x, x, sa, lengths=lengths))
                        x = n2(x + ffn(x, p, act, False, keep))
                if final is not None:
                    x = layer_norm(x, *final)
                return x * keep[..., None]

            for case, lengths, extra in ((name, None, ""), (f"{name}_lengths", [7, 4], " --lengths @/lengths")):
                write_case(f, case, f"-i @/x --weights @/w/{name}{extra}", encoder(x, lengths), tool="encode")

        # a decoder: 1 post-norm ReLU layer with cross-attention, causal k = 3
        g = f.create_group("w/dec_relu_k3")
        for a, v in {"num_heads": H, "norm_first": 0, "activation": "relu", "layer_norm_eps": 1e-5,
                     "ffn_conv_kernel": 3}.items():
            g.attrs[a] = v
        sa, ca = mha("w/dec_relu_k3/layers/0/self_attn"), mha("w/dec_relu_k3/layers/0/multihead_attn")
        p = ffn_params("w/dec_relu_k3/layers/0", 3, False)

        def decoder(y, lengths=None):
            keep = keep_of(y.shape[0], y.shape[1], lengths)
            y = layer_norm(y + softmax_mha(y, y, sa, causal=True, lengths=lengths), p["norm1/weight"], p["norm1/bias"])
            y = layer_norm(y + softmax_mha(y, mem, ca, self_attention=False), p["norm2/weight"], p["norm2/bias"])
            y = layer_norm(y + ffn(y, p, "relu", True, keep), p["norm3/weight"], p["norm3/bias"])
            return y * keep[..., None]

        for case, lengths, extra in (("dec_relu_k3", None, ""),
                                     ("dec_relu_k3_lengths", [6, 3], " --lengths @/tgt_lengths")):
            write_case(f, case, f"-i @/tgt --memory @/mem --weights @/w/dec_relu_k3{extra}", decoder(tgt, lengths),
                       tool="decode")


if __name__ == "__main__":
    main()
