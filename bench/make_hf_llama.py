#!/usr/bin/python3
"""Write a random LLaMA-shaped Hugging Face directory in bfloat16, and the same values as float32.

    make_hf_llama.py DIR L E H G F V

DIR/model/ holds config.json, generation_config.json and model.safetensors (BF16, written with
NumPy as tests/golden/make_hf_dirs.py writes the format); DIR/f32.h5 the same weights widened to
float32 under their slashed names, with the config's scalars as attributes, for the comparison.
Weights ~ N(0, 0.02), norms 1, the end token's output row pushed down so generation runs its length.
"""
import json
import sys
from pathlib import Path

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "golden"))
from make_hf_dirs import bf16_bits, write_safetensors  # noqa: E402

d = Path(sys.argv[1])
L, E, H, G, F, V = (int(a) for a in sys.argv[2:8])
dh = E // H
rng = np.random.default_rng(53)


def w(*shape):
    return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)


t = {"model.embed_tokens.weight": w(V, E), "model.norm.weight": np.ones(E, np.float32), "lm_head.weight": w(V, E)}
t["lm_head.weight"][2] -= 1.0  # </s>
for i in range(L):
    p = f"model.layers.{i}."
    t.update({p + "self_attn.q_proj.weight": w(E, E), p + "self_attn.k_proj.weight": w(G * dh, E),
              p + "self_attn.v_proj.weight": w(G * dh, E), p + "self_attn.o_proj.weight": w(E, E),
              p + "mlp.gate_proj.weight": w(F, E), p + "mlp.up_proj.weight": w(F, E),
              p + "mlp.down_proj.weight": w(E, F), p + "input_layernorm.weight": np.ones(E, np.float32),
              p + "post_attention_layernorm.weight": np.ones(E, np.float32)})
cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": E, "intermediate_size": F,
       "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": G, "vocab_size": V,
       "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
       "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"}
m = d / "model"
m.mkdir(parents=True, exist_ok=True)
(m / "config.json").write_text(json.dumps(cfg, indent=2))
(m / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
write_safetensors(m / "model.safetensors", t, lambda n: "BF16", {"format": "pt"})
with h5py.File(d / "f32.h5", "w") as f:
    for k, v in cfg.items():
        if k != "architectures":
            f.attrs[k] = v
    for k, v in t.items():
        f.create_dataset(k.replace(".", "/"), data=(bf16_bits(v).astype(np.uint32) << 16).view(np.float32))
