"""llama.cpp's side of bench/bench_peers.sh: a LlamaForCausalLM exported to HDF5 by name
(bench/torch_llama.py export, scripts/export_torch.py) written as a GGUF file, the way llama.cpp's
own convert_hf_to_gguf.py writes LlamaForCausalLM (conversion/llama.py): its tensor names, the
q_proj and k_proj rows permuted from Hugging Face's rotate-half pairing to GGML's adjacent pairs,
1-D tensors (the norms) in float32, every 2-D tensor in the chosen type (Q8_0 by the bundle's own
gguf.quants, as --outtype q8_0 does). No tokenizer: the bench feeds token ids (tokenizer model
"none"). Needs NumPy, h5py and the gguf-py of the llama.cpp bundle (its path as GGUF_PY).

    make_gguf.py MODEL.h5 GROUP OUT.gguf f32|f16|q8_0
"""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.environ["GGUF_PY"])
import gguf  # noqa: E402

src, group, out, outtype = sys.argv[1:5]
TYPES = {"f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
         "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
         "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0)}
qtype, ftype = TYPES[outtype]


def permute(w, n_head, n_head_kv):
    """conversion/llama.py's LlamaModel.permute: rotate-half rows to interleaved pairs."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


with h5py.File(src, "r") as f:
    g = f[group]
    cfg = {k: (v.item() if hasattr(v, "item") else v) for k, v in g.attrs.items()}
    cfg = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in cfg.items()}
    H, G, E = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    L, V = cfg["num_hidden_layers"], cfg["vocab_size"]
    w = gguf.GGUFWriter(out, "llama")
    w.add_context_length(int(cfg["max_position_embeddings"]))
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(int(cfg["intermediate_size"]))
    w.add_rope_dimension_count(E // H)
    w.add_head_count(H)
    w.add_head_count_kv(G)
    w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
    w.add_rope_freq_base(float(cfg["rope_theta"]))
    w.add_vocab_size(V)
    w.add_file_type(ftype)
    w.add_tokenizer_model("none")
    w.add_bos_token_id(int(cfg["bos_token_id"]))
    w.add_eos_token_id(int(cfg["eos_token_id"]))

    def put(name, a):
        a = np.ascontiguousarray(a, dtype=np.float32)
        if a.ndim == 1 or qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, a)
        elif qtype == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, a.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(a, qtype), raw_dtype=qtype)

    put("token_embd.weight", g["model/embed_tokens/weight"][()])
    for i in range(L):
        p = f"model/layers/{i}/"
        put(f"blk.{i}.attn_norm.weight", g[p + "input_layernorm/weight"][()])
        put(f"blk.{i}.attn_q.weight", permute(g[p + "self_attn/q_proj/weight"][()], H, H))
        put(f"blk.{i}.attn_k.weight", permute(g[p + "self_attn/k_proj/weight"][()], H, G))
        put(f"blk.{i}.attn_v.weight", g[p + "self_attn/v_proj/weight"][()])
        put(f"blk.{i}.attn_output.weight", g[p + "self_attn/o_proj/weight"][()])
        put(f"blk.{i}.ffn_norm.weight", g[p + "post_attention_layernorm/weight"][()])
        put(f"blk.{i}.ffn_gate.weight", g[p + "mlp/gate_proj/weight"][()])
        put(f"blk.{i}.ffn_up.weight", g[p + "mlp/up_proj/weight"][()])
        put(f"blk.{i}.ffn_down.weight", g[p + "mlp/down_proj/weight"][()])
    put("output_norm.weight", g["model/norm/weight"][()])
    put("output.weight", g["lm_head/weight"][()])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
print(f"{out}: {outtype}", file=sys.stderr)
