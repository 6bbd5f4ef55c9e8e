"""PyTorch's side of bench/bench_llama.sh (float32, eval, no_grad; OPENBLAS_NUM_THREADS set outside):
the LlamaForCausalLM of tests/golden/train_reverse_llama.py (LLaMA's names and forward pass). Usage:

  torch_llama.py export DIR L E H G F V     write DIR/llama.h5 (group /w): a random model, exported
                                             with scripts/export_torch.py, whose end token never wins
  torch_llama.py prefill DIR B N THREADS     the forward pass over (B, N) token ids (the prompt of a
                                             generation: its logits and, in our decode, its cache)
  torch_llama.py generate DIR STEPS THREADS  greedy decoding of STEPS tokens from <s>, batch 1, with
                                             a key/value cache as LLaMA's own code keeps one

Timing modes print "best median peak_MiB core" over 5 calls after a warm-up (generate: 3 calls).
"""
import math
import sys
from pathlib import Path

import h5py
import torch

from openblas_core import timed

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/golden"))
sys.path.insert(0, str(ROOT / "scripts"))
from export_torch import export  # noqa: E402
from train_reverse_llama import LlamaForCausalLM, rope  # noqa: E402

mode, d = sys.argv[1], sys.argv[2]
torch.manual_seed(0)


def load(path):
    with h5py.File(path, "r") as f:
        cfg = {k: (v.item() if hasattr(v, "item") else v) for k, v in f["w"].attrs.items()}
        cfg = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in cfg.items()}
        model = LlamaForCausalLM(cfg).eval()
        sd = {}
        f["w"].visititems(lambda k, v: sd.__setitem__(k.replace("/", "."), torch.from_numpy(v[()]))
                          if isinstance(v, h5py.Dataset) else None)
    model.load_state_dict(sd)
    return model


def generate_cached(model, steps):
    """Greedy decoding from <s> with per-layer key/value caches (LLaMA's reference loop)."""
    c = model.config
    H, G, E = c["num_attention_heads"], c["num_key_value_heads"], c["hidden_size"]
    dh = E // H
    caches = [([], []) for _ in model.model.layers]
    tok, out = c["bos_token_id"], []
    for t in range(steps):
        x = model.model.embed_tokens(torch.tensor([[tok]]))
        for layer, (ks, vs) in zip(model.model.layers, caches):
            a = layer.self_attn
            h = layer.input_layernorm(x)
            q = a.q_proj(h).view(1, 1, H, dh).transpose(1, 2)
            k = a.k_proj(h).view(1, 1, G, dh).transpose(1, 2)
            v = a.v_proj(h).view(1, 1, G, dh).transpose(1, 2)
            # rope at position t: rotate a length-(t+1) sequence and keep its last row
            q = rope(torch.cat([torch.zeros(1, H, t, dh), q], 2), a.theta)[:, :, -1:]
            k = rope(torch.cat([torch.zeros(1, G, t, dh), k], 2), a.theta)[:, :, -1:]
            ks.append(k), vs.append(v)
            K = torch.cat(ks, 2).repeat_interleave(H // G, 1)
            Vv = torch.cat(vs, 2).repeat_interleave(H // G, 1)
            w = (q @ K.transpose(-1, -2) / math.sqrt(dh)).softmax(-1)
            x = x + a.o_proj((w @ Vv).transpose(1, 2).reshape(1, 1, E))
            h = layer.post_attention_layernorm(x)
            x = x + layer.mlp.down_proj(torch.nn.functional.silu(layer.mlp.gate_proj(h)) * layer.mlp.up_proj(h))
        tok = int(model.lm_head(model.model.norm(x))[0, -1].argmax())
        out.append(tok)
    return out


if mode == "export":
    L, E, H, G, F, V = (int(x) for x in sys.argv[3:9])
    cfg = dict(model_type="llama", vocab_size=V, hidden_size=E, intermediate_size=F, num_hidden_layers=L,
               num_attention_heads=H, num_key_value_heads=G, rms_norm_eps=1e-6, rope_theta=10000.0,
               hidden_act="silu", tie_word_embeddings=False, max_position_embeddings=4096, bos_token_id=1,
               eos_token_id=2)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
        for n in (model.model.norm, *[m for layer in model.model.layers
                                      for m in (layer.input_layernorm, layer.post_attention_layernorm)]):
            n.weight.fill_(1.0)
        model.lm_head.weight[2] = 0.0  # logit 0, the median: the end token never wins, every run makes all steps
    export(model, f"{d}/llama.h5", group="/w", config=cfg)
elif mode == "prefill":
    B, N, threads = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    model = load(f"{d}/llama.h5")
    ids = torch.randint(3, model.config["vocab_size"], (B, N))
    timed(lambda: model(ids), 5)
elif mode == "generate":
    steps, threads = int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    model = load(f"{d}/llama.h5")
    timed(lambda: generate_cached(model, steps), 3)
