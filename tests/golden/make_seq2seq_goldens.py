#!/usr/bin/python3
"""Write the T5 and BART test models and their goldens (issue 57).

    /usr/bin/python3 tests/golden/make_seq2seq_goldens.py testdata

Debian has no transformers package, so the references are the models' equations written out here
in float64 PyTorch, following transformers' modeling_t5.py and modeling_bart.py line by line (the
bucket rule is transformers' T5Attention._relative_position_bucket, in its float32 arithmetic):

  T5: T5LayerNorm (x / sqrt(mean(x^2) + eps) * w), pre-norm blocks, attention without the
      1/sqrt(dh) factor plus block 0's relative bias (bidirectional buckets in the encoder, causal
      in the decoder) in every layer, ReLU (wi, wo) or gated-gelu (gelu_new(wi_0 x) * wi_1 x, wo),
      final_layer_norm per stack; a tied head scales the decoder output by d_model^-0.5.
  BART: tokens (times sqrt(d_model) with scale_embedding) plus embed_positions[2 + p], then
      layernorm_embedding; post-norm layers (self_attn_layer_norm, encoder_attn_layer_norm,
      final_layer_norm), GELU (erf); logits over the shared table plus final_logits_bias; greedy
      decoding from decoder_start_token_id with forced_bos_token_id first and forced_eos_token_id
      as the max_len-th token.

Models, written as a Hugging Face download holds them (testdata/hf/NAME/config.json and
model.safetensors, with make_hf_dirs.py's writer):
  t5:       T5 v1.0's form: relu, tied, 2 + 2 blocks, 8 buckets, max_distance 10 (so the 16-token
            sources reach the logarithmic buckets and pass max_distance); also as testdata/t5.h5
            (state_dict names with '/', the config's scalars as attributes)
  t5_gated: flan-t5's form: gated-gelu, an untied lm_head, d_kv 6 (heads 12 wide in a 16-wide
            model), 2 + 1 blocks (num_decoder_layers), bucket keys absent (T5Config's 32 and 128)
  bart:     BartForConditionalGeneration: scale_embedding, final_logits_bias, forced ids

testdata/seq2seq.h5 holds, per model (/t5, /t5_gated, /bart): src (2, 16) with src_lengths,
tgt (2, 6) with tgt_lengths (the decoder's inputs, starting with decoder_start_token_id), and the
float64 results: encoder_output (2, 16, E) (padded rows 0), enc_weights1 (2, H, 16, 16) (layer 1's
self-attention weights), logits (2, 6, V), self_weights0 (2, H, 6, 6), cross_weights0 (2, H, 6, 16)
(padded query rows 0), greedy (2, 8) (greedy tokens from the float64 encoder output, padded with
pad_token_id after eos). /relative holds the bucket rule's answers for j - i, i, j in 0..299
(buckets_{NB}_{MD}_{bi|causal} (300, 300), as pe-gen --len 300 writes them) and a table (8, 3) with its bias (1, 3, 5, 7) (bidirectional,
max_distance 10), computed by the same function as the models use.
"""
import json
import math
import sys
from pathlib import Path

import h5py
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_hf_dirs import write_dir, write_h5  # noqa: E402

D = torch.float64


def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """transformers' T5Attention._relative_position_bucket."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
    )
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


def position_bias(table, n, m, bidirectional, nb, md):
    """(1, H, n, m): table[bucket(j - p)] with queries at p = i + (m - n)."""
    ctx = torch.arange(m - n, m)[:, None]
    mem = torch.arange(m)[None, :]
    buckets = relative_position_bucket(mem - ctx, bidirectional, nb, md)
    return table[buckets].permute(2, 0, 1).unsqueeze(0)


def rms(x, w, eps):
    return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def layer_norm(x, w, b, eps=1e-5):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def attention(xq, xkv, wq, wk, wv, wo, H, dh, scale, bias=None, bq=None, bk=None, bv=None, bo=None,
              key_valid=None, causal=False):
    """Returns (out (B, n, E), weights (B, H, n, m))."""
    B, n, _ = xq.shape
    m = xkv.shape[1]

    def proj(x, w, b, rows):
        y = x @ w.T + (b if b is not None else 0)
        return y.view(B, rows, H, dh).transpose(1, 2)

    q, k, v = proj(xq, wq, bq, n), proj(xkv, wk, bk, m), proj(xkv, wv, bv, m)
    s = (q @ k.transpose(-1, -2)) * scale
    if bias is not None:
        s = s + bias
    blocked = torch.zeros(B, 1, n, m, dtype=torch.bool)
    if key_valid is not None:
        blocked |= ~key_valid[:, None, None, :]
    if causal:
        blocked |= torch.triu(torch.ones(n, m, dtype=torch.bool), 1)[None, None]
    s = s.masked_fill(blocked, float("-inf"))
    w = torch.softmax(s, -1)
    out = (w @ v).transpose(1, 2).reshape(B, n, H * dh) @ wo.T + (bo if bo is not None else 0)
    return out, w


def valid(lengths, n):
    return torch.arange(n)[None, :] < torch.as_tensor(lengths)[:, None]


# --- T5 -------------------------------------------------------------------------------------------

def t5_weights(cfg, gen):
    E, H, dkv, F, V = cfg["d_model"], cfg["num_heads"], cfg["d_kv"], cfg["d_ff"], cfg["vocab_size"]
    nb = cfg.get("relative_attention_num_buckets", 32)
    gated = cfg["feed_forward_proj"].startswith("gated-")
    w = {}

    def r(*shape, std=0.5):
        return torch.randn(*shape, generator=gen, dtype=D) * std

    w["shared.weight"] = r(V, E)
    for side, layers in (("encoder", cfg["num_layers"]), ("decoder", cfg.get("num_decoder_layers", cfg["num_layers"]))):
        for i in range(layers):
            p = f"{side}.block.{i}.layer."
            atts = ["0.SelfAttention"] + (["1.EncDecAttention"] if side == "decoder" else [])
            for a in atts:
                for n in "qkv":
                    w[f"{p}{a}.{n}.weight"] = r(H * dkv, E, std=E ** -0.5)
                w[f"{p}{a}.o.weight"] = r(E, H * dkv, std=(H * dkv) ** -0.5)
            if i == 0:
                w[f"{p}0.SelfAttention.relative_attention_bias.weight"] = r(nb, H)
            f = 2 if side == "decoder" else 1
            for k in range(f + 1):
                w[f"{p}{k}.layer_norm.weight"] = 1 + r(E, std=0.2)
            d = f"{p}{f}.DenseReluDense."
            if gated:
                w[d + "wi_0.weight"] = r(F, E, std=E ** -0.5)
                w[d + "wi_1.weight"] = r(F, E, std=E ** -0.5)
            else:
                w[d + "wi.weight"] = r(F, E, std=E ** -0.5)
            w[d + "wo.weight"] = r(E, F, std=F ** -0.5)
        w[f"{side}.final_layer_norm.weight"] = 1 + r(E, std=0.2)
    if not cfg.get("tie_word_embeddings", True):
        w["lm_head.weight"] = r(V, E, std=E ** -0.5)
    return w


def t5_ffn(w, d, x, gated):
    if gated:
        return (gelu_new(x @ w[d + "wi_0.weight"].T) * (x @ w[d + "wi_1.weight"].T)) @ w[d + "wo.weight"].T
    return torch.relu(x @ w[d + "wi.weight"].T) @ w[d + "wo.weight"].T


def t5_encoder(w, cfg, src, lengths):
    H, dkv, eps = cfg["num_heads"], cfg["d_kv"], cfg.get("layer_norm_epsilon", 1e-6)
    nb, md = cfg.get("relative_attention_num_buckets", 32), cfg.get("relative_attention_max_distance", 128)
    gated = cfg["feed_forward_proj"].startswith("gated-")
    n = src.shape[1]
    keys = valid(lengths, n)
    x = w["shared.weight"][src]
    bias = position_bias(w["encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"], n, n, True, nb, md)
    weights = []
    for i in range(cfg["num_layers"]):
        p = f"encoder.block.{i}.layer."
        a = p + "0.SelfAttention."
        h = rms(x, w[p + "0.layer_norm.weight"], eps)
        out, aw = attention(h, h, w[a + "q.weight"], w[a + "k.weight"], w[a + "v.weight"], w[a + "o.weight"], H, dkv,
                            1.0, bias, key_valid=keys)
        weights.append(aw * keys[:, None, :, None])
        x = x + out
        x = x + t5_ffn(w, p + "1.DenseReluDense.", rms(x, w[p + "1.layer_norm.weight"], eps), gated)
    x = rms(x, w["encoder.final_layer_norm.weight"], eps)
    return x * keys[:, :, None], weights


def t5_decoder(w, cfg, tgt, tgt_lengths, memory, mem_lengths):
    H, dkv, eps, E = cfg["num_heads"], cfg["d_kv"], cfg.get("layer_norm_epsilon", 1e-6), cfg["d_model"]
    nb, md = cfg.get("relative_attention_num_buckets", 32), cfg.get("relative_attention_max_distance", 128)
    gated = cfg["feed_forward_proj"].startswith("gated-")
    t = tgt.shape[1]
    rows = valid(tgt_lengths, t)
    mem_keys = valid(mem_lengths, memory.shape[1])
    y = w["shared.weight"][tgt]
    bias = position_bias(w["decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"], t, t, False, nb,
                         md)
    self_w, cross_w = [], []
    for i in range(cfg.get("num_decoder_layers", cfg["num_layers"])):
        p = f"decoder.block.{i}.layer."
        a, c = p + "0.SelfAttention.", p + "1.EncDecAttention."
        h = rms(y, w[p + "0.layer_norm.weight"], eps)
        out, sw = attention(h, h, w[a + "q.weight"], w[a + "k.weight"], w[a + "v.weight"], w[a + "o.weight"], H, dkv,
                            1.0, bias, key_valid=rows, causal=True)
        y = y + out
        h = rms(y, w[p + "1.layer_norm.weight"], eps)
        out, cw = attention(h, memory, w[c + "q.weight"], w[c + "k.weight"], w[c + "v.weight"], w[c + "o.weight"], H,
                            dkv, 1.0, key_valid=mem_keys)
        y = y + out
        y = y + t5_ffn(w, p + "2.DenseReluDense.", rms(y, w[p + "2.layer_norm.weight"], eps), gated)
        self_w.append(sw * rows[:, None, :, None])
        cross_w.append(cw * rows[:, None, :, None])
    y = rms(y, w["decoder.final_layer_norm.weight"], eps)
    if cfg.get("tie_word_embeddings", True):
        logits = (y * E ** -0.5) @ w["shared.weight"].T
    else:
        logits = y @ w["lm_head.weight"].T
    return logits * rows[:, :, None], self_w, cross_w


# --- BART -----------------------------------------------------------------------------------------

def bart_weights(cfg, gen):
    E, F, V, P = cfg["d_model"], cfg["encoder_ffn_dim"], cfg["vocab_size"], cfg["max_position_embeddings"]
    w = {}

    def r(*shape, std=0.5):
        return torch.randn(*shape, generator=gen, dtype=D) * std

    w["model.shared.weight"] = r(V, E)
    for side, layers in (("encoder", cfg["encoder_layers"]), ("decoder", cfg["decoder_layers"])):
        s = f"model.{side}."
        w[s + "embed_positions.weight"] = r(P + 2, E)
        for i in range(layers):
            p = f"{s}layers.{i}."
            atts = ["self_attn"] + (["encoder_attn"] if side == "decoder" else [])
            for a in atts:
                for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    w[f"{p}{a}.{n}.weight"] = r(E, E, std=E ** -0.5)
                    w[f"{p}{a}.{n}.bias"] = r(E, std=0.1)
                w[f"{p}{a}_layer_norm.weight"] = 1 + r(E, std=0.2)
                w[f"{p}{a}_layer_norm.bias"] = r(E, std=0.1)
            w[p + "fc1.weight"] = r(F, E, std=E ** -0.5)
            w[p + "fc1.bias"] = r(F, std=0.1)
            w[p + "fc2.weight"] = r(E, F, std=F ** -0.5)
            w[p + "fc2.bias"] = r(E, std=0.1)
            w[p + "final_layer_norm.weight"] = 1 + r(E, std=0.2)
            w[p + "final_layer_norm.bias"] = r(E, std=0.1)
        w[s + "layernorm_embedding.weight"] = 1 + r(E, std=0.2)
        w[s + "layernorm_embedding.bias"] = r(E, std=0.1)
    w["final_logits_bias"] = r(1, V, std=0.5)
    return w


def bart_embed(w, cfg, side, ids):
    E = cfg["d_model"]
    scale = math.sqrt(E) if cfg.get("scale_embedding", False) else 1.0
    n = ids.shape[1]
    x = w["model.shared.weight"][ids] * scale + w[f"model.{side}.embed_positions.weight"][2 + torch.arange(n)]
    return layer_norm(x, w[f"model.{side}.layernorm_embedding.weight"], w[f"model.{side}.layernorm_embedding.bias"])


def bart_attn(w, p, xq, xkv, H, **kw):
    E = xq.shape[-1]
    dh = E // H
    return attention(xq, xkv, w[p + "q_proj.weight"], w[p + "k_proj.weight"], w[p + "v_proj.weight"],
                     w[p + "out_proj.weight"], H, dh, dh ** -0.5, bq=w[p + "q_proj.bias"], bk=w[p + "k_proj.bias"],
                     bv=w[p + "v_proj.bias"], bo=w[p + "out_proj.bias"], **kw)


def bart_ffn(w, p, x):
    h = torch.nn.functional.gelu(x @ w[p + "fc1.weight"].T + w[p + "fc1.bias"])
    return h @ w[p + "fc2.weight"].T + w[p + "fc2.bias"]


def ln(w, name, x):
    return layer_norm(x, w[name + ".weight"], w[name + ".bias"])


def bart_encoder(w, cfg, src, lengths):
    H = cfg["encoder_attention_heads"]
    keys = valid(lengths, src.shape[1])
    x = bart_embed(w, cfg, "encoder", src)
    weights = []
    for i in range(cfg["encoder_layers"]):
        p = f"model.encoder.layers.{i}."
        out, aw = bart_attn(w, p + "self_attn.", x, x, H, key_valid=keys)
        weights.append(aw * keys[:, None, :, None])
        x = ln(w, p + "self_attn_layer_norm", x + out)
        x = ln(w, p + "final_layer_norm", x + bart_ffn(w, p, x))
    return x * keys[:, :, None], weights


def bart_decoder(w, cfg, tgt, tgt_lengths, memory, mem_lengths):
    H = cfg["decoder_attention_heads"]
    rows = valid(tgt_lengths, tgt.shape[1])
    mem_keys = valid(mem_lengths, memory.shape[1])
    y = bart_embed(w, cfg, "decoder", tgt)
    self_w, cross_w = [], []
    for i in range(cfg["decoder_layers"]):
        p = f"model.decoder.layers.{i}."
        out, sw = bart_attn(w, p + "self_attn.", y, y, H, key_valid=rows, causal=True)
        y = ln(w, p + "self_attn_layer_norm", y + out)
        out, cw = bart_attn(w, p + "encoder_attn.", y, memory, H, key_valid=mem_keys)
        y = ln(w, p + "encoder_attn_layer_norm", y + out)
        y = ln(w, p + "final_layer_norm", y + bart_ffn(w, p, y))
        self_w.append(sw * rows[:, None, :, None])
        cross_w.append(cw * rows[:, None, :, None])
    logits = y @ w["model.shared.weight"].T + w["final_logits_bias"]
    return logits * rows[:, :, None], self_w, cross_w


# --- generation -----------------------------------------------------------------------------------

def greedy(decoder, memory, mem_lengths, start, eos, pad, max_len, forced_bos=None, forced_eos=None):
    out = []
    for b in range(memory.shape[0]):
        seq = [start]
        for step in range(max_len):
            ids = torch.tensor([seq])
            logits = decoder(ids, [len(seq)], memory[b:b + 1], [mem_lengths[b]])[0][0, -1]
            if forced_bos is not None and step == 0:
                tok = forced_bos
            elif forced_eos is not None and step == max_len - 1:
                tok = forced_eos
            else:
                tok = int(torch.argmax(logits))
            seq.append(tok)
            if tok == eos:
                break
        gen_ = seq[1:]
        out.append(gen_ + [pad] * (max_len - len(gen_)))
    return np.array(out, dtype=np.int64)


def to32(w):
    return {k: v.to(torch.float32).numpy() for k, v in w.items()}


def write_model(f, root, name, cfg, w, encoder, decoder, gen):
    """Inputs, float64 results and the greedy tokens of one model into group /name of f."""
    V = cfg["vocab_size"]
    # the float32 weights both sides compute with
    w = {k: torch.from_numpy(v).to(D) for k, v in to32(w).items()}
    start, eos, pad = cfg["decoder_start_token_id"], cfg["eos_token_id"], cfg["pad_token_id"]
    src = torch.randint(3, V, (2, 16), generator=gen)
    src_lengths = [16, 11]
    src[1, 11:] = pad
    tgt = torch.randint(3, V, (2, 6), generator=gen)
    tgt[:, 0] = start
    tgt_lengths = [6, 4]
    tgt[1, 4:] = pad
    enc, enc_w = encoder(w, cfg, src, src_lengths)
    logits, self_w, cross_w = decoder(w, cfg, tgt, tgt_lengths, enc, src_lengths)
    g = f.create_group(name)
    g["src"], g["src_lengths"] = src.numpy(), np.array(src_lengths, dtype=np.int64)
    g["tgt"], g["tgt_lengths"] = tgt.numpy(), np.array(tgt_lengths, dtype=np.int64)
    g["encoder_output"] = enc.numpy()
    g["enc_weights1"] = enc_w[1].numpy()
    g["logits"] = logits.numpy()
    g["self_weights0"] = self_w[0].numpy()
    g["cross_weights0"] = cross_w[0].numpy()
    dec = lambda ids, lens, mem, mlens: decoder(w, cfg, ids, lens, mem, mlens)  # noqa: E731
    g["greedy"] = greedy(dec, enc, src_lengths, start, eos, pad, 8, cfg.get("forced_bos_token_id"),
                         cfg.get("forced_eos_token_id"))


def main(testdata):
    testdata = Path(testdata)
    hf = testdata / "hf"
    gen = torch.Generator().manual_seed(57)
    t5 = {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5", "d_model": 16, "d_kv": 4, "d_ff": 32,
          "num_heads": 4, "num_layers": 2, "num_decoder_layers": 2, "vocab_size": 40,
          "relative_attention_num_buckets": 8, "relative_attention_max_distance": 10, "layer_norm_epsilon": 1e-6,
          "feed_forward_proj": "relu", "tie_word_embeddings": True, "decoder_start_token_id": 0,
          "eos_token_id": 1, "pad_token_id": 0, "torch_dtype": "float32"}
    t5_gated = {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5", "d_model": 16, "d_kv": 6,
                "d_ff": 24, "num_heads": 2, "num_layers": 2, "num_decoder_layers": 1, "vocab_size": 40,
                "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False, "decoder_start_token_id": 0,
                "eos_token_id": 1, "pad_token_id": 0, "torch_dtype": "float32"}
    bart = {"architectures": ["BartForConditionalGeneration"], "model_type": "bart", "d_model": 16,
            "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
            "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "vocab_size": 48, "max_position_embeddings": 20,
            "activation_function": "gelu", "scale_embedding": True, "bos_token_id": 0, "pad_token_id": 1,
            "eos_token_id": 2, "decoder_start_token_id": 2, "forced_bos_token_id": 0, "forced_eos_token_id": 2,
            "torch_dtype": "float32"}
    with h5py.File(testdata / "seq2seq.h5", "w") as f:
        for name, cfg, make, enc, dec in (("t5", t5, t5_weights, t5_encoder, t5_decoder),
                                          ("t5_gated", t5_gated, t5_weights, t5_encoder, t5_decoder),
                                          ("bart", bart, bart_weights, bart_encoder, bart_decoder)):
            w = make(cfg, gen)
            write_model(f, hf, name, cfg, w, enc, dec, gen)
            write_dir(hf, name, dict(sorted(to32(w).items())), cfg)
            if name == "t5":
                write_h5(testdata / "t5.h5", to32(w), cfg)
        r = f.create_group("relative")
        rel = torch.arange(300)[None, :] - torch.arange(300)[:, None]  # j - i
        for nb, md in ((32, 128), (8, 10), (16, 64), (6, 20)):
            for bi in (True, False):
                r.create_dataset(f"buckets_{nb}_{md}_{'bi' if bi else 'causal'}",
                                 data=relative_position_bucket(rel, bi, nb, md).numpy(), compression="gzip")
        table = torch.randn(8, 3, generator=gen, dtype=D).to(torch.float32)
        r["table"] = table.numpy()
        r["bias"] = position_bias(table, 5, 7, True, 8, 10).numpy()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "testdata")
