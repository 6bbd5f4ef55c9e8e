#!/usr/bin/python3
"""Train the small LLaMA-layout model of testdata/llama_reverse.h5 (issue 18, item 5).

    env -u OPENBLAS_CORETYPE /usr/bin/python3 tests/golden/train_reverse_llama.py testdata

A decoder-only model with LlamaForCausalLM's weight names (RMSNorm, SwiGLU, rotate-half RoPE, 2
key/value heads for 4 query heads; written here, since Debian has no python3-transformers) learns
to reverse digit strings: the prompt "<s> d1 .. dk <sep>" (3 <= k <= 8) continues "dk .. d1 </s>".
It is exported with scripts/export_torch.py the way a user would (one loop over the state_dict, the
config's scalars as attributes) under /w, with 200 held-out prompts (right-padded, with lengths)
and their expected continuations under /heldout. The test suite runs decode --generate on them and
asserts at least 99% exact match; this script asserts 100% for PyTorch's own greedy decoding.
Vocabulary: 0 pad, 1 <s>, 2 </s>, 3 <sep>, 4 + d for digit d.

The same script trains bench/bench_speculative.sh's pairs of models (a model and its draft model):
options after DIR choose the task (--task copy: "<s> d1 .. dk <sep>" continues "d1 .. dk </s>"),
the digits per prompt, the sizes, the steps and the file name; their held-out prompts are written
as above, and the accuracy asked of PyTorch's greedy decoding is --min-right of 200.
"""
import argparse
import math
import sys
from pathlib import Path

import h5py
import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from export_torch import export  # noqa: E402

PAD, BOS, EOS, SEP, V = 0, 1, 2, 3, 14
CONFIG = dict(model_type="llama", vocab_size=V, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=10000.0,
              hidden_act="silu", tie_word_embeddings=False, max_position_embeddings=32, bos_token_id=BOS,
              eos_token_id=EOS, pad_token_id=PAD)


class RMSNorm(nn.Module):
    def __init__(self, e, eps):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(e)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, theta):  # x (b, heads, n, dh): rotate-half pairing, position = index
    dh, n = x.shape[-1], x.shape[-2]
    inv = theta ** (-torch.arange(0, dh, 2, dtype=torch.float32) / dh)
    ang = torch.outer(torch.arange(n, dtype=torch.float32), inv)
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    x1, x2 = x[..., : dh // 2], x[..., dh // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        E, self.H, self.G = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.dh, self.theta = E // self.H, c["rope_theta"]
        self.q_proj = nn.Linear(E, E, bias=False)
        self.k_proj = nn.Linear(E, self.G * self.dh, bias=False)
        self.v_proj = nn.Linear(E, self.G * self.dh, bias=False)
        self.o_proj = nn.Linear(E, E, bias=False)

    def forward(self, x, weights=False):
        b, n, E = x.shape
        q = self.q_proj(x).view(b, n, self.H, self.dh).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.G, self.dh).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.G, self.dh).transpose(1, 2)
        q, k = rope(q, self.theta), rope(k, self.theta)
        k, v = k.repeat_interleave(self.H // self.G, 1), v.repeat_interleave(self.H // self.G, 1)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.dh)
        s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
        w = s.softmax(-1)
        return self.o_proj((w @ v).transpose(1, 2).reshape(b, n, E)), w


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        E, F = c["hidden_size"], c["intermediate_size"]
        self.self_attn = Attention(c)
        self.mlp = nn.Module()
        self.mlp.gate_proj, self.mlp.up_proj = nn.Linear(E, F, bias=False), nn.Linear(E, F, bias=False)
        self.mlp.down_proj = nn.Linear(F, E, bias=False)
        self.input_layernorm = RMSNorm(E, c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(E, c["rms_norm_eps"])

    def forward(self, x):
        a, w = self.self_attn(self.input_layernorm(x))
        x = x + a
        h = self.post_attention_layernorm(x)
        return x + self.mlp.down_proj(nn.functional.silu(self.mlp.gate_proj(h)) * self.mlp.up_proj(h)), w


class LlamaForCausalLM(nn.Module):
    """LlamaForCausalLM's parameter names and forward pass, with a plain dict as its config."""

    def __init__(self, c):
        super().__init__()
        self.config = c
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.model.layers = nn.ModuleList(Layer(c) for _ in range(c["num_hidden_layers"]))
        self.model.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    def forward(self, ids):
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x, _ = layer(x)
        return self.lm_head(self.model.norm(x))


def answer(d, task):
    return d[::-1] if task == "reverse" else list(d)


def batch(gen, n, task="reverse", lo=3, hi=8):
    """n sequences <s> d.. <sep> d(reversed, or copied).. </s> of lo..hi digits, right-padded; the
    loss mask of the continuation."""
    ks = torch.randint(lo, hi + 1, (n,), generator=gen)
    L = 2 * hi + 3
    ids, mask = torch.full((n, L), PAD), torch.zeros(n, L, dtype=torch.bool)
    for i, k in enumerate(ks.tolist()):
        d = (torch.randint(0, 10, (k,), generator=gen) + 4).tolist()
        seq = [BOS] + d + [SEP] + answer(d, task) + [EOS]
        ids[i, : len(seq)] = torch.tensor(seq)
        mask[i, k + 1: len(seq) - 1] = True  # positions whose next token is the continuation
    return ids, mask


def greedy(model, prompt, steps):
    seq = list(prompt)
    for _ in range(steps):
        tok = int(model(torch.tensor([seq]))[0, -1].argmax())
        seq.append(tok)
        if tok == EOS:
            break
    return seq[len(prompt):]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="testdata")
    ap.add_argument("--task", choices=["reverse", "copy"], default="reverse")
    ap.add_argument("--digits", default="3-8", help="digits per prompt, LO-HI")
    ap.add_argument("--hidden", type=int, default=CONFIG["hidden_size"])
    ap.add_argument("--layers", type=int, default=CONFIG["num_hidden_layers"])
    ap.add_argument("--heads", type=int, default=CONFIG["num_attention_heads"])
    ap.add_argument("--kv-heads", type=int, default=CONFIG["num_key_value_heads"])
    ap.add_argument("--ffn", type=int, default=CONFIG["intermediate_size"])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--name", default="llama_reverse.h5")
    ap.add_argument("--min-right", type=int, default=200)
    a = ap.parse_args()
    lo, hi = (int(x) for x in a.digits.split("-"))
    config = dict(CONFIG, hidden_size=a.hidden, num_hidden_layers=a.layers, num_attention_heads=a.heads,
                  num_key_value_heads=a.kv_heads, intermediate_size=a.ffn, max_position_embeddings=2 * hi + 16)
    out = Path(a.out)
    torch.manual_seed(20261122)
    torch.set_num_threads(2)
    gen = torch.Generator().manual_seed(1)
    model = LlamaForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0)
    steps = a.steps
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr, total_steps=steps, pct_start=0.1)
    for step in range(steps):
        ids, mask = batch(gen, 64, a.task, lo, hi)
        logits = model(ids[:, :-1])
        loss = nn.functional.cross_entropy(logits[mask[:, :-1]], ids[:, 1:][mask[:, :-1]])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 500 == 0 or step == steps - 1:
            print(f"step {step}: loss {loss.item():.4f}", file=sys.stderr)
    model.eval()

    held = torch.Generator().manual_seed(2)  # another stream than training's
    prompts, lengths, expect = np.zeros((200, hi + 2), np.int64), np.zeros(200, np.int64), np.zeros((200, hi + 1), np.int64)
    right = 0
    with torch.no_grad():
        for i in range(200):
            k = int(torch.randint(lo, hi + 1, (1,), generator=held))
            d = (torch.randint(0, 10, (k,), generator=held) + 4).tolist()
            p, cont = [BOS] + d + [SEP], answer(d, a.task) + [EOS]
            prompts[i, : len(p)], lengths[i], expect[i, : len(cont)] = p, len(p), cont
            right += greedy(model, p, hi + 1) == cont
    print(f"PyTorch greedy exact match on the held-out prompts: {right}/200", file=sys.stderr)
    assert right >= a.min_right, "train longer: the model must solve its task"

    path = out / a.name
    export(model, path, group="/w", config=config)
    with h5py.File(path, "a") as f:
        f["heldout/prompt"], f["heldout/prompt_lengths"], f["heldout/expect"] = prompts, lengths, expect
        # one full sequence, for attention maps: <s> 3 1 4 1 5 <sep> 5 1 4 1 3 </s>
        seq = [7, 5, 8, 5, 9]
        f["example/ids"] = np.array([[BOS] + seq + [SEP] + answer(seq, a.task) + [EOS]], np.int64)
    print(f"{path}: written", file=sys.stderr)


if __name__ == "__main__":
    main()
