#!/usr/bin/python3
"""Write the small Hugging Face model directories of testdata/hf/ (issue 53).

    /usr/bin/python3 tests/golden/make_hf_dirs.py testdata

The models are the LLaMA, Qwen2, GPT-2 and BERT test models of testdata/decoder.h5 (/w/llama,
/w/qwen2, /w/gpt2) and testdata/encoder.h5 (/w/bert), whose outputs those files hold as computed
by PyTorch (make_variant_goldens.py). Each is written the way a Hugging Face download holds it:
config.json (the group's attributes, with architectures and torch_dtype as transformers writes
them) and model.safetensors, the tensors by their state_dict names ('/' as '.'). Debian has no
Python safetensors package, so the format is written here with NumPy, from its specification: an
8-byte little-endian header length, a JSON header padded with spaces to a multiple of 8, the data
buffer with each tensor's bytes back to back (C order, little-endian).

Variants: llama_bf16, llama_f16, gpt2_bf16 and bert_bf16 hold the weights rounded to bfloat16
and float16 (to nearest, ties to even), beside llama_bf16.h5, llama_f16.h5, gpt2_bf16.h5 and
bert_bf16.h5, the same rounded values in float32 HDF5 files: the suite checks that both give the same output bits. llama_sharded splits the float32
tensors over two shards with model.safetensors.index.json. bert_mlm puts BertModel under bert.
with a cls. head, as BertForMaskedLM does.

llama_rope_{linear,dynamic,llama3,yarn} carry a rope_scaling of each type (max_position_embeddings
4, so that the 6 tokens of decoder.h5's /llama/ids pass it), and hf/rope_expect.h5 the logits of
those ids under each (and llama_head_dim's, heads 6 wide in a 16-wide model), computed here by a LLaMA forward in float64 PyTorch whose inverse frequencies
follow transformers' modeling_rope_utils (the _compute_*_parameters functions; dynamic with the
batch's sequence length, yarn's cos and sin times its attention factor).
"""
import math
import json
import struct
import sys
from pathlib import Path

import h5py
import numpy as np
import torch

DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}


def bf16_bits(a):
    """float32 -> bfloat16 bits, round to nearest, ties to even (finite values)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def tensor_bytes(a, dtype):
    if dtype == "BF16":
        return bf16_bits(a).astype("<u2").tobytes()
    return np.ascontiguousarray(a, dtype=DTYPES[dtype]).tobytes()


def write_safetensors(path, tensors, dtype_of, metadata=None):
    """tensors: name -> float array; dtype_of(name) -> "F32" | "F16" | "BF16"."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, a in tensors.items():
        dt = dtype_of(name)
        b = tensor_bytes(a, dt)
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def group_tensors(f, group):
    out = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            out[name.replace("/", ".")] = np.asarray(obj[()], dtype=np.float32)
    f[group].visititems(visit)
    return dict(sorted(out.items()))


def group_config(f, group, architecture, dtype):
    cfg = {"architectures": [architecture]}
    for k, v in f[group].attrs.items():
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, (np.bool_, bool)):
            v = bool(v)
        elif isinstance(v, np.integer):
            v = int(v)
        elif isinstance(v, np.floating):
            v = float(v)
        cfg[k] = v
    cfg["torch_dtype"] = dtype
    return cfg


def write_dir(root, name, tensors, config, dtype="F32", gen=None):
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    if gen is not None:
        (d / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    write_safetensors(d / "model.safetensors", tensors, lambda n: dtype, {"format": "pt"})


def rounded(tensors, dtype):
    if dtype == "BF16":
        return {k: (bf16_bits(v).astype(np.uint32) << 16).view(np.float32) for k, v in tensors.items()}
    return {k: v.astype(np.float16).astype(np.float32) for k, v in tensors.items()}


def write_h5(path, tensors, config):
    with h5py.File(path, "w") as f:
        for k, v in config.items():
            if k != "architectures":
                f.attrs[k] = v
        for name, a in tensors.items():
            f.create_dataset(name.replace(".", "/"), data=a.astype(np.float32))


def write_rounded(root, name, tensors, config, dtype):
    """name_{dtype}/ with the values rounded to dtype ("BF16", "F16"), and name_{dtype}.h5 with the
    same values in float32."""
    r = rounded(tensors, dtype)
    cfg = dict(config, torch_dtype={"BF16": "bfloat16", "F16": "float16"}[dtype])
    write_dir(root, f"{name}_{dtype.lower()}", r, cfg, dtype=dtype)
    write_h5(root / f"{name}_{dtype.lower()}.h5", r, cfg)


def main(testdata):
    testdata = Path(testdata)
    root = testdata / "hf"
    with h5py.File(testdata / "decoder.h5", "r") as dec, h5py.File(testdata / "encoder.h5", "r") as enc:
        llama = group_tensors(dec, "w/llama")
        llama_cfg = group_config(dec, "w/llama", "LlamaForCausalLM", "float32")
        write_rope_dirs(root, llama, llama_cfg, dec["llama/ids"][()], dec["llama/ids_lengths"][()])
        write_dir(root, "llama", llama, llama_cfg, gen={"bos_token_id": llama_cfg["bos_token_id"],
                                                        "eos_token_id": llama_cfg["eos_token_id"]})
        write_rounded(root, "llama", llama, llama_cfg, "BF16")
        write_rounded(root, "llama", llama, llama_cfg, "F16")
        # two shards and the index
        d = root / "llama_sharded"
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text(json.dumps(llama_cfg, indent=2) + "\n")
        names = list(llama)
        half = len(names) // 2
        shards = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
        weight_map = {}
        for shard, members in shards.items():
            write_safetensors(d / shard, {n: llama[n] for n in members}, lambda n: "F32")
            weight_map.update({n: shard for n in members})
        total = sum(llama[n].size * 4 for n in names)
        (d / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, indent=2))

        write_dir(root, "qwen2", group_tensors(dec, "w/qwen2"),
                  group_config(dec, "w/qwen2", "Qwen2ForCausalLM", "float32"))
        gpt2 = group_tensors(dec, "w/gpt2")
        gpt2_cfg = group_config(dec, "w/gpt2", "GPT2LMHeadModel", "float32")
        write_dir(root, "gpt2", gpt2, gpt2_cfg)
        write_rounded(root, "gpt2", gpt2, gpt2_cfg, "BF16")
        bert = group_tensors(enc, "w/bert")
        bert_cfg = group_config(enc, "w/bert", "BertModel", "float32")
        write_dir(root, "bert", bert, bert_cfg)
        write_rounded(root, "bert", bert, bert_cfg, "BF16")
        E, V = bert["embeddings.word_embeddings.weight"].shape[1], bert["embeddings.word_embeddings.weight"].shape[0]
        rng = np.random.default_rng(53)
        mlm = {"bert." + k: v for k, v in bert.items()}
        mlm.update({"cls.predictions.bias": rng.standard_normal(V).astype(np.float32),
                    "cls.predictions.transform.dense.weight": rng.standard_normal((E, E)).astype(np.float32),
                    "cls.predictions.transform.dense.bias": rng.standard_normal(E).astype(np.float32)})
        write_dir(root, "bert_mlm", dict(sorted(mlm.items())), dict(bert_cfg, architectures=["BertForMaskedLM"]))


ROPE = {
    "linear": {"rope_type": "linear", "factor": 2.0},
    "dynamic": {"rope_type": "dynamic", "factor": 3.0},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 8.0,
               "original_max_position_embeddings": 32},
    "yarn": {"type": "yarn", "factor": 4.0, "beta_fast": 8.0, "beta_slow": 0.5},
}


def inv_freq(cfg, dim, seq_len):
    """modeling_rope_utils' inverse frequencies and attention factor for rope_scaling."""
    base, rs = cfg.get("rope_theta", 10000.0), cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    max_pos = cfg["max_position_embeddings"]
    ar = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    if kind == "dynamic":
        seq_len = seq_len if seq_len > max_pos else max_pos
        base = base * ((rs["factor"] * seq_len / max_pos) - (rs["factor"] - 1)) ** (dim / (dim - 2))
    inv = 1.0 / (base ** ar)
    if kind == "linear":
        inv = inv / rs["factor"]
    if kind == "llama3":
        factor, lo, hi, old = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        llama = torch.where(wavelen > old / lo, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * llama / factor + smooth * llama
        medium = ~(wavelen < old / hi) * ~(wavelen > old / lo)
        inv = torch.where(medium, smoothed, llama)
    if kind == "yarn":
        factor = rs["factor"]
        att = rs.get("attention_factor") or 0.1 * math.log(factor) + 1.0
        fast, slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

        def corr(rot):
            return (dim * math.log(max_pos / (rot * 2 * math.pi))) / (2 * math.log(base))
        low, high = max(math.floor(corr(fast)), 0), min(math.ceil(corr(slow)), dim - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low), 0, 1)
        extra = 1 - ramp
        inv = (1.0 / (factor * base ** ar)) * (1 - extra) + (1.0 / base ** ar) * extra
        return inv, att
    return inv, 1.0


def llama_logits(w, cfg, ids, lengths):
    """LlamaForCausalLM's forward in float64 (right-padded rows: each row's valid tokens)."""
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in w.items()}
    E, H, G = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    dh, eps = cfg.get("head_dim", E // H), cfg.get("rms_norm_eps", 1e-6)
    out = np.zeros((ids.shape[0], ids.shape[1], t["model.embed_tokens.weight"].shape[0]))

    def rms(x, wt):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * wt

    def rot_half(x):
        return torch.cat([-x[..., dh // 2:], x[..., : dh // 2]], -1)
    for b in range(ids.shape[0]):
        n = int(lengths[b])
        if n == 0:
            continue
        x = t["model.embed_tokens.weight"][torch.tensor(ids[b, :n])]
        # dynamic: the batch's sequence length, as transformers' batched call takes it (position_ids
        # 0..width-1 for every right-padded row)
        inv, att = inv_freq(cfg, dh, ids.shape[1])
        ang = torch.outer(torch.arange(n, dtype=torch.float64), inv)
        emb = torch.cat([ang, ang], -1)
        cos, sin = emb.cos() * att, emb.sin() * att
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            h = rms(x, t[p + "input_layernorm.weight"])
            q = (h @ t[p + "self_attn.q_proj.weight"].T).view(n, H, dh).transpose(0, 1)
            k = (h @ t[p + "self_attn.k_proj.weight"].T).view(n, G, dh).transpose(0, 1)
            v = (h @ t[p + "self_attn.v_proj.weight"].T).view(n, G, dh).transpose(0, 1)
            q, k = q * cos + rot_half(q) * sin, k * cos + rot_half(k) * sin
            k, v = k.repeat_interleave(H // G, 0), v.repeat_interleave(H // G, 0)
            s = q @ k.transpose(1, 2) / math.sqrt(dh)
            s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
            a = (s.softmax(-1) @ v).transpose(0, 1).reshape(n, H * dh)
            x = x + a @ t[p + "self_attn.o_proj.weight"].T
            h = rms(x, t[p + "post_attention_layernorm.weight"])
            g = torch.nn.functional.silu(h @ t[p + "mlp.gate_proj.weight"].T) * (h @ t[p + "mlp.up_proj.weight"].T)
            x = x + g @ t[p + "mlp.down_proj.weight"].T
        out[b, :n] = (rms(x, t["model.norm.weight"]) @ t["lm_head.weight"].T).numpy()
    return out


def write_rope_dirs(root, llama, llama_cfg, ids, lengths):
    with h5py.File(root / "rope_expect.h5", "w") as f:
        plain = dict(llama_cfg, max_position_embeddings=llama_cfg["max_position_embeddings"])
        f["default"] = llama_logits(llama, plain, ids, lengths)
        for kind, rs in ROPE.items():
            cfg = dict(llama_cfg, max_position_embeddings=4, rope_scaling=rs)
            write_dir(root, f"llama_rope_{kind}", llama, cfg)
            f[kind] = llama_logits(llama, cfg, ids, lengths)
        # heads 6 wide for hidden 16 and 4 heads (head_dim, as Mistral NeMo's): new q, k, v, o weights
        rng = np.random.default_rng(6)
        wide = dict(llama)
        E, H, G, dh = 16, 4, 2, 6
        for i in range(llama_cfg["num_hidden_layers"]):
            p = f"model.layers.{i}.self_attn."
            for name, shape in (("q_proj", (H * dh, E)), ("k_proj", (G * dh, E)), ("v_proj", (G * dh, E)),
                                ("o_proj", (E, H * dh))):
                wide[p + name + ".weight"] = (rng.standard_normal(shape) * 0.3).astype(np.float32)
        cfg = dict(llama_cfg, head_dim=dh)
        write_dir(root, "llama_head_dim", wide, cfg)
        f["head_dim"] = llama_logits(wide, cfg, ids, lengths)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "testdata")
