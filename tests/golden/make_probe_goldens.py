#!/usr/bin/python3
"""Golden activations, interventions and logit lens (CONTRACT.md section 6.3) in testdata/probe.h5.

Run with Debian's python3 after make_golden.py (it reads the models and inputs that wrote):

    env -u OPENBLAS_CORETYPE /usr/bin/python3 tests/golden/make_probe_goldens.py testdata

The reference is a float64 forward written from the equations that records every named activation
and makes the interventions where the contract says (TransformerLens' hook points). It is tied to
PyTorch: each model's plain output must equal the output PyTorch's own modules gave for it
(make_golden.py's `cases/*/output`, `bert_expect/output`, `llama_expect/output`), and for the
nn.Transformer stacks the attention weights PyTorch's nn.MultiheadAttention returns.
"""
import math
import sys
from pathlib import Path

import h5py
import networkx as nx
import numpy as np
import torch

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "testdata")
T = lambda a: torch.from_numpy(np.asarray(a, dtype=np.float64))


# --- the models, read from the golden weight files --------------------------------------------------
def nn_attention(g, H):
    W, b = T(g["in_proj_weight"]), T(g["in_proj_bias"])
    E = W.shape[1]
    return dict(Wq=W[:E], bq=b[:E], Wk=W[E:2 * E], bk=b[E:2 * E], Wv=W[2 * E:], bv=b[2 * E:], Wo=T(g["out_proj/weight"]),
                bo=T(g["out_proj/bias"]), H=H, G=H)


def nn_stack(g, cross):
    """nn.TransformerEncoder / Decoder weights as make_golden.py exported them."""
    H, act = int(g.attrs["num_heads"]), g.attrs["activation"]
    act = act.decode() if isinstance(act, bytes) else act
    layers = []
    for i in range(len(g["layers"])):
        L = g[f"layers/{i}"]
        layer = dict(self=nn_attention(L["self_attn"], H), W1=T(L["linear1/weight"]), b1=T(L["linear1/bias"]),
                     W2=T(L["linear2/weight"]), b2=T(L["linear2/bias"]),
                     norms=[(T(L[f"norm{j}/weight"]), T(L[f"norm{j}/bias"])) for j in (1, 2, 3) if f"norm{j}" in L])
        if cross:
            layer["cross"] = nn_attention(L["multihead_attn"], H)
        layers.append(layer)
    final = (T(g["norm/weight"]), T(g["norm/bias"])) if "norm" in g else None
    return dict(layers=layers, final=final, norm_first=bool(g.attrs["norm_first"]), act=act, norm="layer_norm",
                eps=float(g.attrs.get("layer_norm_eps", 1e-5)), rope=False, cross=cross)


def llama_stack(g):
    E, H, G = int(g.attrs["hidden_size"]), int(g.attrs["num_attention_heads"]), int(g.attrs["num_key_value_heads"])
    layers = []
    for i in range(int(g.attrs["num_hidden_layers"])):
        L = g[f"model/layers/{i}"]
        a = L["self_attn"]
        z = lambda r: torch.zeros(r, dtype=torch.float64)
        layers.append(dict(self=dict(Wq=T(a["q_proj/weight"]), bq=z(E), Wk=T(a["k_proj/weight"]), bk=z(G * E // H),
                                     Wv=T(a["v_proj/weight"]), bv=z(G * E // H), Wo=T(a["o_proj/weight"]), bo=z(E), H=H,
                                     G=G),
                           Wg=T(L["mlp/gate_proj/weight"]), W1=T(L["mlp/up_proj/weight"]), W2=T(L["mlp/down_proj/weight"]),
                           b1=None, b2=None,
                           norms=[(T(L["input_layernorm/weight"]), None), (T(L["post_attention_layernorm/weight"]), None)]))
    return dict(layers=layers, final=(T(g["model/norm/weight"]), None), norm_first=True, act="swiglu", norm="rms_norm",
                eps=float(g.attrs.get("rms_norm_eps", 1e-6)), rope=True, cross=False,
                embed=T(g["model/embed_tokens/weight"]), lm_head=T(g["lm_head/weight"]))


def bert_stack(g):
    E, H = int(g.attrs["hidden_size"]), int(g.attrs["num_attention_heads"])
    layers = []
    for i in range(int(g.attrs["num_hidden_layers"])):
        L = g[f"encoder/layer/{i}"]
        s = L["attention/self"]
        layers.append(dict(self=dict(Wq=T(s["query/weight"]), bq=T(s["query/bias"]), Wk=T(s["key/weight"]),
                                     bk=T(s["key/bias"]), Wv=T(s["value/weight"]), bv=T(s["value/bias"]),
                                     Wo=T(L["attention/output/dense/weight"]), bo=T(L["attention/output/dense/bias"]),
                                     H=H, G=H),
                           W1=T(L["intermediate/dense/weight"]), b1=T(L["intermediate/dense/bias"]),
                           W2=T(L["output/dense/weight"]), b2=T(L["output/dense/bias"]),
                           norms=[(T(L["attention/output/LayerNorm/weight"]), T(L["attention/output/LayerNorm/bias"])),
                                  (T(L["output/LayerNorm/weight"]), T(L["output/LayerNorm/bias"]))]))
    emb = g["embeddings"]
    return dict(layers=layers, final=None, norm_first=False, act="gelu", norm="layer_norm", eps=1e-12, rope=False,
                cross=False, word=T(emb["word_embeddings/weight"]), pos=T(emb["position_embeddings/weight"]),
                typ=T(emb["token_type_embeddings/weight"]),
                ln=(T(emb["LayerNorm/weight"]), T(emb["LayerNorm/bias"])))


def gpt2_stack(g):
    """GPT2LMHeadModel by its own names: Conv1D weights (in, out), learned positions, pre-norm."""
    E, H = int(g.attrs["n_embd"]), int(g.attrs["n_head"])
    act = g.attrs["activation_function"]
    act = act.decode() if isinstance(act, bytes) else act
    t = lambda k: T(g[f"transformer/{k}"])
    layers = []
    for i in range(int(g.attrs["n_layer"])):
        h = f"h/{i}"
        W, b = t(f"{h}/attn/c_attn/weight").T, t(f"{h}/attn/c_attn/bias")  # Conv1D: (in, out)
        layers.append(dict(self=dict(Wq=W[:E], bq=b[:E], Wk=W[E:2 * E], bk=b[E:2 * E], Wv=W[2 * E:], bv=b[2 * E:],
                                     Wo=t(f"{h}/attn/c_proj/weight").T, bo=t(f"{h}/attn/c_proj/bias"), H=H, G=H),
                           W1=t(f"{h}/mlp/c_fc/weight").T, b1=t(f"{h}/mlp/c_fc/bias"),
                           W2=t(f"{h}/mlp/c_proj/weight").T, b2=t(f"{h}/mlp/c_proj/bias"),
                           norms=[(t(f"{h}/ln_1/weight"), t(f"{h}/ln_1/bias")), (t(f"{h}/ln_2/weight"), t(f"{h}/ln_2/bias"))]))
    return dict(layers=layers, final=(t("ln_f/weight"), t("ln_f/bias")), norm_first=True,
                act={"gelu_new": "gelu_tanh", "gelu": "gelu", "relu": "relu"}[act], norm="layer_norm",
                eps=float(g.attrs["layer_norm_epsilon"]), rope=False, cross=False, wte=t("wte/weight"),
                wpe=t("wpe/weight"), lm_head=T(g["lm_head/weight"]))


# --- the forward pass, recording and intervening ---------------------------------------------------
def norm(x, p, m):
    w, b = p
    if m["norm"] == "rms_norm":
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + m["eps"]) * w
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, m["eps"])


def act(x, name):
    if name == "relu":
        return torch.relu(x)
    if name == "gelu":
        return torch.nn.functional.gelu(x)
    if name == "gelu_tanh":
        return torch.nn.functional.gelu(x, approximate="tanh")
    raise ValueError(name)


def rope_half(x, base=10000.0):
    """x (b, heads, n, dh) at positions 0..n-1, GPT-NeoX's rotate_half (LLaMA's layout)."""
    n, dh = x.shape[2], x.shape[3]
    inv = 1.0 / base ** (torch.arange(0, dh, 2, dtype=torch.float64) / dh)
    ang = torch.outer(torch.arange(n, dtype=torch.float64), inv)
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
    rot = torch.cat([-x[..., dh // 2:], x[..., :dh // 2]], -1)
    return x * cos + rot * sin


class Probe:
    """Interventions (as the contract's flags) and the record of every activation."""

    def __init__(self, ablate=(), cross_ablate=(), mean=None, patch=None, positions=None, heads=None, steer=None):
        self.ablate, self.cross_ablate, self.mean = set(ablate), set(cross_ablate), mean or {}
        self.patch, self.positions, self.heads = patch or {}, positions, heads
        self.steer = steer or {}
        self.rec = {}

    def at(self, layer, name, x):
        """x (b, heads, rows, width) or (b, rows, width): changed, recorded, returned."""
        x = x.clone()
        if name in ("z", "cross_z"):
            for (l, h) in (self.ablate if name == "z" else self.cross_ablate):
                if l == layer:
                    x[:, h] = self.mean[(l, name)][h] if (l, name) in self.mean else 0.0
        if (layer, name) in self.patch:
            src = self.patch[(layer, name)]
            covered = min(src.shape[-2], x.shape[-2])  # positions the source lacks are left as computed
            full = x.clone()
            full[..., :covered, :] = src[..., :covered, :x.shape[-1]]
            src = full
            sel = torch.zeros_like(x, dtype=torch.bool)
            rows = [i for i in (range(x.shape[-2]) if self.positions is None else self.positions) if i < covered]
            if x.dim() == 4:
                hs = range(x.shape[1]) if self.heads is None else self.heads
                for h in hs:
                    for i in rows:
                        sel[:, h, i] = True
            else:
                for i in rows:
                    sel[:, i] = True
            x = torch.where(sel, src, x)
        if (layer, name) in self.steer:
            d, a = self.steer[(layer, name)]
            x = x + a * d
        self.rec[(layer, name)] = x
        return x


def attention(xq, xkv, A, allowed, rope, probe, layer, cross):
    """allowed (b, 1, n, m) bool. The contract's q, k, v, scores, pattern, z."""
    p = "cross_" if cross else ""
    b, n, _ = xq.shape
    m = xkv.shape[1]
    H, G = A["H"], A["G"]
    dh = A["Wq"].shape[0] // H
    q = (xq @ A["Wq"].T + A["bq"]).view(b, n, H, dh).transpose(1, 2)
    k = (xkv @ A["Wk"].T + A["bk"]).view(b, m, G, dh).transpose(1, 2)
    v = (xkv @ A["Wv"].T + A["bv"]).view(b, m, G, dh).transpose(1, 2)
    if rope:
        q, k = rope_half(q), rope_half(k)
    q, k, v = probe.at(layer, p + "q", q), probe.at(layer, p + "k", k), probe.at(layer, p + "v", v)
    rep = lambda t: t.repeat_interleave(H // G, dim=1)
    s = probe.at(layer, p + "scores", q @ rep(k).transpose(-1, -2) / math.sqrt(dh))
    w = torch.nan_to_num(torch.softmax(s.masked_fill(~allowed, float("-inf")), -1), nan=0.0)
    w = probe.at(layer, p + "pattern", w)
    z = probe.at(layer, p + "z", w @ rep(v))
    return z.transpose(1, 2).reshape(b, n, H * dh) @ A["Wo"].T + A["bo"]


def ffn(x, L, m, probe, layer):
    if m["act"] == "swiglu":
        h = torch.nn.functional.silu(x @ L["Wg"].T) * (x @ L["W1"].T)
    else:
        h = act(x @ L["W1"].T + L["b1"], m["act"])
    h = probe.at(layer, "mlp_hidden", h)
    return h @ L["W2"].T + (L["b2"] if L["b2"] is not None else 0)


def forward(m, x, pad, probe, causal=False, mem=None, mem_pad=None):
    """x (b, n, E); pad (b, n) bool (True: padding). Returns the stack's output (padded rows 0)."""
    b, n, _ = x.shape
    allowed = ~pad[:, None, None, :]
    if causal:
        allowed = allowed & torch.ones(n, n, dtype=torch.bool).tril()
    cross_allowed = None if mem is None else ~mem_pad[:, None, None, :].expand(b, 1, n, mem.shape[1])
    for i, L in enumerate(m["layers"]):
        x = probe.at(i, "resid_pre", x)
        n1, n2 = L["norms"][0], L["norms"][1]
        sub = lambda f, nrm, x: (x + f(norm(x, nrm, m))) if m["norm_first"] else norm(x + f(x), nrm, m)
        attn = lambda h: probe.at(i, "attn_out", attention(h, h, L["self"], allowed, m["rope"], probe, i, False))
        x = probe.at(i, "resid_mid", sub(attn, n1, x))
        if m["cross"]:
            cr = lambda h: probe.at(i, "cross_attn_out", attention(h, mem, L["cross"], cross_allowed, False, probe, i, True))
            x = probe.at(i, "cross_resid_mid", sub(cr, n2, x))
        n_ffn = L["norms"][2] if m["cross"] else n2
        x = probe.at(i, "resid_post", sub(lambda h: probe.at(i, "mlp_out", ffn(h, L, m, probe, i)), n_ffn, x))
    if m["final"] is not None:
        x = norm(x, m["final"], m)
    x = probe.at(None, "final", x)
    return x.masked_fill(pad[..., None], 0.0)


def zero_padded(name, t, pad, mem_pad):
    """The contract: rows at padded positions are 0 (query rows; key rows for k and v)."""
    t = t.clone()
    base = name.replace("cross_", "")
    rows = (mem_pad if name.startswith("cross_") else pad) if base in ("k", "v") else pad
    if base == "scores":  # and the columns of padded keys: q . k of the keys as written (0)
        keys = mem_pad if name.startswith("cross_") else pad
        t = t.masked_fill(keys[:, None, None, :], 0.0)
    if t.dim() == 4:
        return t.masked_fill(rows[:, None, :, None], 0.0)
    return t.masked_fill(rows[:, :, None], 0.0)


def write_record(f, group, probe, pad, mem_pad=None):
    for (layer, name), t in probe.rec.items():
        path = f"{group}/activations/final" if layer is None else f"{group}/activations/layer{layer}/{name}"
        f[path] = zero_padded(name, t, pad, mem_pad).numpy()


def valid_mean(z, pad):
    """The mean of z (b, H, n, dh) over items and valid positions: (H, dh)."""
    keep = ~pad
    return z.permute(0, 2, 1, 3)[keep].mean(0)


def lens(m, resid_list, pad, K):
    """log_softmax(lm_head(norm(resid))): the K best (lower id first among ties) per position."""
    ids, lps = [], []
    for r in resid_list:
        lp = torch.log_softmax(norm(r, m["final"], m) @ m["lm_head"].T, -1)
        V = lp.shape[-1]
        key = lp.float().double()  # ours orders float32 logits
        order = np.lexsort((np.broadcast_to(np.arange(V), key.shape), -key.numpy()), axis=-1)[..., :K]
        order = torch.from_numpy(order.copy())
        ids.append(order.masked_fill(pad[..., None], 0))
        lps.append(torch.gather(lp, -1, order).masked_fill(pad[..., None], 0.0))
    return torch.stack(ids, 1), torch.stack(lps, 1)


def fused_residual(w, fusion, r):
    """w (H, n, n) -> (1 - r) fuse(w) + r I, rows renormalised (Abnar and Zuidema 2020, section 3)."""
    a = {"mean": w.mean(0), "max": w.max(0), "min": w.min(0)}[fusion]
    a = (1 - r) * a + r * np.eye(w.shape[-1])
    s = a.sum(-1, keepdims=True)
    return np.where(s > 0, a / np.where(s > 0, s, 1), a)


def rollout_reference(layers, fusion, r):
    """layers: each (b, H, n, n). Ã_L ... Ã_1 per item; rows all 0 in layer 0 (padding) 0."""
    out = []
    for b in range(layers[0].shape[0]):
        acc = np.eye(layers[0].shape[-1])
        for w in layers:
            acc = fused_residual(w[b], fusion, r) @ acc
        acc[np.all(layers[0][b] == 0, axis=(0, 2))] = 0
        out.append(acc)
    return np.stack(out)


def flow_reference(layers, fusion, r):
    """networkx's maximum flow from input node (0, j) to output node (L, i) of the layer graph."""
    B, n, L = layers[0].shape[0], layers[0].shape[-1], len(layers)
    out = np.zeros((B, n, n))
    for b in range(B):
        g = nx.DiGraph()
        for l, w in enumerate(layers, 1):
            a = fused_residual(w[b], fusion, r)
            for i in range(n):
                for j in range(n):
                    if a[i, j] > 0:
                        g.add_edge((l - 1, j), (l, i), capacity=a[i, j])
        pad = np.all(layers[0][b] == 0, axis=(0, 2))
        for i in range(n):
            for j in range(n):
                if not pad[i]:
                    out[b, i, j] = nx.maximum_flow_value(g, (0, j), (L, i))
    return out


def main():
    enc_f, dec_f = h5py.File(OUT / "encoder.h5", "r"), h5py.File(OUT / "decoder.h5", "r")
    f = h5py.File(OUT / "probe.h5", "w")
    g = torch.Generator().manual_seed(55)
    rnd = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).float().double()

    # 1. nn.TransformerEncoder post-norm and pre-norm with padding: every activation
    x = T(enc_f["x"])
    lengths = torch.from_numpy(enc_f["lengths"][()])
    pad = torch.arange(x.shape[1])[None] >= lengths[:, None]
    for name, case in (("post_relu_1", "post_relu_1_lengths"), ("pre_relu_2", "pre_relu_2_lengths")):
        m = nn_stack(enc_f[f"w/{name}"], False)
        p = Probe()
        out = forward(m, x, pad, p)
        expect = T(enc_f[f"cases/{case}/output"])
        assert torch.allclose(out, expect, atol=1e-5), (name, (out - expect).abs().max())
        for i in range(len(m["layers"])):  # PyTorch's nn.MultiheadAttention weights
            pt = T(enc_f[f"cases/{case}/weights/layer{i}"])
            assert torch.allclose(zero_padded("pattern", p.rec[(i, "pattern")], pad, None), pt, atol=1e-5), name
        write_record(f, f"enc_{name}", p, pad)

    # 2. interventions on pre_relu_2: ablation (zero, mean), patches (resid_mid at positions, z of a
    # head, pattern, k), steering; a second input as the "clean" run to patch from
    m = nn_stack(enc_f["w/pre_relu_2"], False)
    clean_x = (x + 0.5 * rnd(*x.shape)).float().double()
    f["enc_clean_x"] = clean_x.numpy().astype(np.float32)
    clean = Probe()
    forward(m, clean_x, pad, clean)
    write_record(f, "enc_clean", clean, pad)
    z0 = zero_padded("z", clean.rec[(0, "z")], pad, None)
    steer_dir = rnd(x.shape[-1]).float().double()
    f["enc_steer_dir"] = steer_dir.numpy().astype(np.float32)
    cases = {
        "ablate": dict(ablate=[(0, 1), (1, 3)]),
        "ablate_mean": dict(ablate=[(0, 2)], mean={(0, "z"): valid_mean(z0, pad)}),
        "patch_resid_mid": dict(patch={(1, "resid_mid"): zero_padded("resid_mid", clean.rec[(1, "resid_mid")], pad, None)},
                                positions=[1, 2]),
        "patch_z_head": dict(patch={(0, "z"): z0}, heads=[2]),
        "patch_pattern": dict(patch={(1, "pattern"): zero_padded("pattern", clean.rec[(1, "pattern")], pad, None)},
                              heads=[0], positions=[0, 3]),
        "patch_k": dict(patch={(0, "k"): zero_padded("k", clean.rec[(0, "k")], pad, None)}, positions=[2]),
        "steer": dict(steer={(0, "resid_post"): (steer_dir, 2.5)}),
    }
    for name, kw in cases.items():
        p = Probe(**kw)
        f[f"enc_iv/{name}/output"] = forward(m, x, pad, p).numpy()
        f[f"enc_iv/{name}/resid_post1"] = zero_padded("resid_post", p.rec[(1, "resid_post")], pad, None).numpy()
        f[f"enc_iv/{name}/z0"] = zero_padded("z", p.rec[(0, "z")], pad, None).numpy()

    # 3. nn.TransformerDecoder with cross-attention, target and memory padded
    tgt, mem = T(dec_f["tgt"]), T(dec_f["mem"])
    tpad = torch.arange(tgt.shape[1])[None] >= torch.from_numpy(dec_f["tgt_lengths"][()])[:, None]
    mpad = torch.arange(mem.shape[1])[None] >= torch.from_numpy(dec_f["mem_lengths"][()])[:, None]
    m = nn_stack(dec_f["w/pre_gelu_3_norm"], True)
    p = Probe()
    out = forward(m, tgt, tpad, p, causal=True, mem=mem, mem_pad=mpad)
    expect = T(dec_f["cases/pre_gelu_3_norm_lengths/output"])
    assert torch.allclose(out, expect, atol=1e-5), (out - expect).abs().max()
    write_record(f, "dec", p, tpad, mpad)
    p = Probe(cross_ablate=[(1, 0), (2, 3)], ablate=[(0, 1)])
    f["dec_iv/ablate/output"] = forward(m, tgt, tpad, p, causal=True, mem=mem, mem_pad=mpad).numpy()

    # 4. LLaMA layout (RoPE, grouped KV heads, SwiGLU): activations, a patch of v, the lens
    m = llama_stack(dec_f["w/llama"])
    ids = torch.from_numpy(dec_f["llama/ids"][()])
    lpad = torch.arange(ids.shape[1])[None] >= torch.from_numpy(dec_f["llama/ids_lengths"][()])[:, None]
    emb = m["embed"][ids]
    p = Probe()
    out = forward(m, emb, lpad, p, causal=True)
    expect = T(dec_f["llama_expect/output"])
    assert torch.allclose(out, expect, atol=1e-5), (out - expect).abs().max()
    write_record(f, "llama", p, lpad)
    K = 3
    resid = [p.rec[(0, "resid_pre")]] + [p.rec[(i, "resid_post")] for i in range(len(m["layers"]))]
    lid, llp = lens(m, resid, lpad, K)
    f["llama/lens/ids"], f["llama/lens/logprobs"] = lid.numpy(), llp.numpy()
    logits_last = (out @ m["lm_head"].T)
    assert torch.allclose(torch.log_softmax(logits_last, -1).gather(-1, lid[:, -1]).masked_fill(lpad[..., None], 0), llp[:, -1])
    v_src = rnd(2, 6, 4).float().double()  # (G, n, dh) without the batch axis: broadcast
    f["llama_v_src"] = v_src.numpy().astype(np.float32)
    p = Probe(patch={(1, "v"): v_src}, heads=[1], positions=[0, 1, 2, 3, 4])
    f["llama_iv/patch_v/output"] = forward(m, emb, lpad, p, causal=True).numpy()

    # interventions in generation: greedy decoding from the prompts, the whole sequence recomputed
    # at every step with the intervention made at the positions it names (what a cache holding the
    # changed keys and values gives)
    prompt = dec_f["llama/prompt"][()]
    plen = dec_f["llama/prompt_lengths"][()]
    bos, eos, max_len = 1, 10, 6
    llama_dir = rnd(16).float().double()
    f["llama_dir"] = llama_dir.numpy().astype(np.float32)
    k_src = rnd(2, 3, 4).float().double()  # (G, positions 0..2, dh): no batch axis
    f["llama_k_src"] = k_src.numpy().astype(np.float32)
    for name, kw in {"steer": dict(steer={(0, "resid_post"): (llama_dir, 3.0)}),
                     "ablate": dict(ablate=[(0, 2), (1, 0), (1, 1)]),
                     "patch_k": dict(patch={(1, "k"): k_src}, positions=[1, 2])}.items():
        rows = []
        for b in range(prompt.shape[0]):
            seq = list(prompt[b, :plen[b]]) or [bos]
            out = []
            for _ in range(max_len):
                ids1 = torch.tensor([seq])
                h = forward(m, m["embed"][ids1], torch.zeros_like(ids1, dtype=torch.bool), Probe(**kw), causal=True)
                logits = (h[0, -1] @ m["lm_head"].T).float()
                tok = int(torch.argmax(logits))  # the first (lowest) id among equal maxima
                out.append(tok)
                seq.append(tok)
                if tok == eos:
                    break
            rows.append(out + [0] * (max_len - len(out)))
        f[f"llama_gen/{name}/tokens"] = np.array(rows, dtype=np.int64)

    # GPT-2 (Conv1D weights, learned positions, GELU tanh): every activation and the lens
    m = gpt2_stack(dec_f["w/gpt2"])
    ids = torch.from_numpy(dec_f["gpt2/ids"][()])
    gpad = torch.arange(ids.shape[1])[None] >= torch.from_numpy(dec_f["gpt2/ids_lengths"][()])[:, None]
    p = Probe()
    out = forward(m, m["wte"][ids] + m["wpe"][torch.arange(ids.shape[1])], gpad, p, causal=True)
    expect = T(dec_f["gpt2_expect/output"])
    assert torch.allclose(out, expect, atol=1e-5), (out - expect).abs().max()
    write_record(f, "gpt2", p, gpad)
    resid = [p.rec[(0, "resid_pre")]] + [p.rec[(i, "resid_post")] for i in range(len(m["layers"]))]
    gid, glp = lens(m, resid, gpad, 2)
    f["gpt2/lens/ids"], f["gpt2/lens/logprobs"] = gid.numpy(), glp.numpy()

    # 5. BERT (post-norm, GELU, its embeddings), with its attention_mask
    m = bert_stack(enc_f["w/bert"])
    ids, types, keep = (torch.from_numpy(enc_f[f"bert/{k}"][()]) for k in ("ids", "types", "attention_mask"))
    bpad = keep == 0
    e = m["word"][ids] + m["pos"][torch.arange(ids.shape[1])] + m["typ"][types]
    e = torch.nn.functional.layer_norm(e, (e.shape[-1],), *m["ln"], 1e-12)
    p = Probe()
    out = forward(m, e, bpad, p)
    expect = T(enc_f["bert_expect/output"])
    assert torch.allclose(out, expect, atol=1e-5), (out - expect).abs().max()
    write_record(f, "bert", p, bpad)

    # 6. rollout (each head fusion, residual weightings) and flow over the weights of two runs
    for run in ("enc_pre_relu_2", "llama"):
        layers = [f[f"{run}/activations/layer{i}/pattern"][()] for i in range(2)]
        for fusion, r in (("mean", 0.5), ("max", 0.3), ("min", 0.0)):
            f[f"rollout/{run}/{fusion}_{r}"] = rollout_reference(layers, fusion, r)
        f[f"flow/{run}/mean_0.5"] = flow_reference(layers, "mean", 0.5)
    f.close()


if __name__ == "__main__":
    main()
