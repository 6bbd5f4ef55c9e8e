#!/usr/bin/python3
"""Train the demo's sequence-to-sequence Transformer and export it (CONTRACT.md section 3).

The task: reverse a sequence of 3 to 10 decimal digits ("3 1 4 1 5" -> "5 1 4 1 3"). A model has to
learn it through attention (position i of the output reads position n-1-i of the input), so the
cross-attention maps of a trained model show the anti-diagonal.

Run with Debian's python3-torch (scripts/install-deps.sh golden):

    /usr/bin/python3 tests/golden/train_demo_model.py testdata

Writes testdata/reverse_model.h5 (nn.Transformer d_model 64, 2+2 layers, 4 heads, FFN 128, with
src_embed, tgt_embed, generator and the root attributes of section 3) and testdata/reverse_test.h5
(held-out sequences the training never saw, and their answers). It fails unless its own greedy
decoding gets at least 99.5% of the held-out set exactly right.
"""
import math
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import torch

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "testdata")
PAD, BOS, EOS, DIGIT0 = 0, 1, 2, 3
V = DIGIT0 + 10
MIN_LEN, MAX_LEN = 3, 10
E, HEADS, LAYERS, FFN = 64, 4, 2, 128
STEPS, BATCH, HELD_OUT = 6000, 128, 1000

torch.manual_seed(20261121)
torch.set_num_threads(1)  # tiny tensors: one thread is as fast


def sinusoidal(n, d):
    """PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(same): pe-gen's default table."""
    p = torch.arange(n, dtype=torch.float64)[:, None]
    i = torch.arange(0, d, 2, dtype=torch.float64)[None, :]
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(p / 10000 ** (i / d))
    pe[:, 1::2] = torch.cos(p / 10000 ** (i / d))
    return pe.float()


class Seq2Seq(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.src_embed = torch.nn.Embedding(V, E)
        self.tgt_embed = torch.nn.Embedding(V, E)
        self.transformer = torch.nn.Transformer(E, HEADS, LAYERS, LAYERS, FFN, dropout=0.0, batch_first=True)
        self.generator = torch.nn.Linear(E, V)
        self.register_buffer("pe", sinusoidal(MAX_LEN + 2, E), persistent=False)

    def embed(self, table, ids):  # CONTRACT.md section 3: x = table[id] * sqrt(E) + PE
        return table(ids) * math.sqrt(E) + self.pe[: ids.shape[1]]

    def encode(self, src):
        return self.transformer.encoder(self.embed(self.src_embed, src), src_key_padding_mask=src == PAD)

    def decode(self, tgt_in, memory, src):
        t = tgt_in.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        h = self.transformer.decoder(self.embed(self.tgt_embed, tgt_in), memory, tgt_mask=causal,
                                     tgt_key_padding_mask=tgt_in == PAD, memory_key_padding_mask=src == PAD)
        return self.generator(h)


def batch(n, gen):
    """n random digit sequences: src (n, MAX_LEN) padded, tgt_in = BOS + reversed, tgt_out = reversed + EOS."""
    lengths = torch.randint(MIN_LEN, MAX_LEN + 1, (n,), generator=gen)
    digits = torch.randint(0, 10, (n, MAX_LEN), generator=gen) + DIGIT0
    pos = torch.arange(MAX_LEN)[None, :]
    src = digits.masked_fill(pos >= lengths[:, None], PAD)
    rev_idx = (lengths[:, None] - 1 - pos).clamp(min=0)
    rev = torch.gather(digits, 1, rev_idx).masked_fill(pos >= lengths[:, None], PAD)
    tgt_out = torch.cat([rev, torch.full((n, 1), PAD)], 1)
    tgt_out[torch.arange(n), lengths] = EOS
    tgt_in = torch.cat([torch.full((n, 1), BOS), rev], 1)
    return src, tgt_in, tgt_out


@torch.no_grad()
def greedy(model, src):
    memory = model.encode(src)
    out = torch.full((src.shape[0], 1), BOS)
    for _ in range(MAX_LEN + 1):
        nxt = model.decode(out, memory, src)[:, -1].argmax(-1)
        out = torch.cat([out, nxt[:, None]], 1)
    return out[:, 1:]


def exact_match(pred, tgt_out):
    """Rows whose tokens up to and including the first EOS equal the answer."""
    ok = 0
    for p, t in zip(pred.tolist(), tgt_out.tolist()):
        p = p[: p.index(EOS) + 1] if EOS in p else p
        t = t[: t.index(EOS) + 1]
        ok += p == t
    return ok / len(pred)


def main():
    model = Seq2Seq()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 300) * max(0.05, 1 - s / STEPS))
    train_gen, test_gen = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    test_src, _, test_out = batch(HELD_OUT, test_gen)
    held_out = {tuple(r) for r in test_src.tolist()}
    start = time.time()
    for step in range(STEPS):
        src, tgt_in, tgt_out = batch(BATCH, train_gen)
        keep = torch.tensor([tuple(r) not in held_out for r in src.tolist()])  # never train on a test sequence
        src, tgt_in, tgt_out = src[keep], tgt_in[keep], tgt_out[keep]
        model.train()
        logits = model.decode(tgt_in, model.encode(src), src)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), tgt_out.reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 1000 == 0 or step == STEPS - 1:
            model.eval()
            acc = exact_match(greedy(model, test_src[:200]), test_out[:200])
            print(f"step {step}: loss {loss.item():.4f}, held-out exact match {acc:.3f} ({time.time() - start:.0f} s)")
    model.eval()
    acc = exact_match(greedy(model, test_src), test_out)
    print(f"held-out exact match (PyTorch greedy): {acc:.4f}")
    assert acc >= 0.995, "the demo model must solve the task"

    with h5py.File(OUT / "reverse_model.h5", "w") as f:
        for key, value in model.transformer.state_dict().items():
            f[key.replace(".", "/")] = value.float().numpy()
        for name in ("src_embed", "tgt_embed", "generator"):
            for key, value in getattr(model, name).state_dict().items():
                f[f"{name}/{key}"] = value.float().numpy()
        f.attrs.update(dict(d_model=E, num_heads=HEADS, norm_first=0, activation="relu", layer_norm_eps=1e-5,
                            pe="sinusoidal", pad_id=PAD, bos_id=BOS, eos_id=EOS,
                            task="reverse 3-10 decimal digits; digit d is token d + 3"))
    with h5py.File(OUT / "reverse_test.h5", "w") as f:
        f["src"] = test_src.numpy().astype(np.uint8)  # (1000, 10), 0 = padding
        f["src_lengths"] = (test_src != PAD).sum(1).numpy().astype(np.uint8)
        f["expected"] = test_out.numpy().astype(np.uint8)  # reversed + EOS, then 0
        f.attrs["task"] = "held-out sequences of reverse_model.h5"


if __name__ == "__main__":
    main()
