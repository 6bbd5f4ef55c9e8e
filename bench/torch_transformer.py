"""PyTorch's side of bench/bench_transformer.sh (float32, eval, no_grad; OPENBLAS_NUM_THREADS set
outside). Usage:

  torch_transformer.py export DIR L E H F V          write DIR/s2s.h5: a random nn.Transformer with L+L
                                                      layers, embeddings and a generator (CONTRACT.md
                                                      section 3) whose end token is never generated
  torch_transformer.py encoder DIR B N THREADS        nn.TransformerEncoder on (B, N, E)
  torch_transformer.py decoder DIR B T S THREADS      nn.TransformerDecoder, target (B, T, E), memory (B, S, E)
  torch_transformer.py generate DIR S STEPS THREADS   greedy decoding of STEPS tokens from memory (1, S, E),
                                                      recomputing the prefix each step (no cache: what
                                                      nn.Transformer offers)

Timing modes print "best median peak_MiB" over 5 calls after a warm-up (generate: 3 calls).
"""
import math
import sys

import h5py
import torch

from openblas_core import timed

mode, d = sys.argv[1], sys.argv[2]
torch.manual_seed(0)


def load(path):
    f = h5py.File(path, "r")
    a = dict(f.attrs)
    E, H, L = int(a["d_model"]), int(a["num_heads"]), sum(1 for k in f["encoder/layers"])
    F = f["encoder/layers/0/linear1/weight"].shape[0]
    tr = torch.nn.Transformer(E, H, L, L, F, dropout=0.0, batch_first=True).eval()
    sd = {}
    f.visititems(lambda k, v: sd.__setitem__(k.replace("/", "."), torch.from_numpy(v[()]))
                 if isinstance(v, h5py.Dataset) else None)
    tr.load_state_dict({k: v for k, v in sd.items() if k.startswith(("encoder.", "decoder."))})
    return tr, sd, a


if mode == "export":
    L, E, H, F, V = (int(x) for x in sys.argv[3:8])
    tr = torch.nn.Transformer(E, H, L, L, F, dropout=0.0, batch_first=True)
    with h5py.File(f"{d}/s2s.h5", "w") as f:
        for k, v in tr.state_dict().items():
            f[k.replace(".", "/")] = v.numpy()
        f["src_embed/weight"] = torch.randn(V, E).numpy()
        f["tgt_embed/weight"] = torch.randn(V, E).numpy()
        f["generator/weight"] = (torch.randn(V, E) / math.sqrt(E)).numpy()
        bias = torch.zeros(V)
        bias[V - 1] = -1e4  # the end token: never generated, so every run makes all its steps
        f["generator/bias"] = bias.numpy()
        f.attrs.update(dict(d_model=E, num_heads=H, pad_id=0, bos_id=1, eos_id=V - 1, norm_first=0, activation="relu"))
    sys.exit(0)

tr, sd, a = load(f"{d}/s2s.h5")
E = int(a["d_model"])
if mode == "encoder":
    b, n, threads = (int(x) for x in sys.argv[3:6])
    torch.set_num_threads(threads)
    x = torch.randn(b, n, E)
    timed(lambda: tr.encoder(x), 5)
elif mode == "decoder":
    b, t, s, threads = (int(x) for x in sys.argv[3:7])
    torch.set_num_threads(threads)
    tgt, mem = torch.randn(b, t, E), torch.randn(b, s, E)
    causal = torch.triu(torch.full((t, t), float("-inf")), 1)
    timed(lambda: tr.decoder(tgt, mem, tgt_mask=causal), 5)
elif mode == "generate":
    s, steps, threads = (int(x) for x in sys.argv[3:6])
    torch.set_num_threads(threads)
    mem = torch.randn(1, s, E)
    emb, gen_w, gen_b = sd["tgt_embed.weight"], sd["generator.weight"], sd["generator.bias"]
    pe = torch.zeros(steps, E)
    pos = torch.arange(steps, dtype=torch.float64)[:, None]
    i = torch.arange(0, E, 2, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos / 10000 ** (i / E)), torch.cos(pos / 10000 ** (i / E))

    def greedy():
        ids = [int(a["bos_id"])]
        for _ in range(steps):
            n = len(ids)
            x = emb[torch.tensor(ids)][None] * math.sqrt(E) + pe[:n]
            h = tr.decoder(x, mem, tgt_mask=torch.triu(torch.full((n, n), float("-inf")), 1))
            ids.append(int((h[0, -1] @ gen_w.T + gen_b).argmax()))
        return ids

    timed(greedy, 3)
