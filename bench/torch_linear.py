"""Causal attention at one long sequence in PyTorch (float32, no_grad), as a researcher writes it:
  softmax: softmax(q k^T / sqrt(d) + causal mask) v over chunks of 1024 queries (PyTorch 1.13 has
           no scaled_dot_product_attention, and the whole (n, n) matrix at n = 65536 is 16 GiB);
  linear:  Katharopoulos et al.'s causal form with cumulative sums of phi(k_j) v_j^T (elu + 1),
           chunked over the sequence so its (chunk, d, d) prefix tensors fit in memory.
Best seconds of 3 and the process's peak memory (MiB). Usage: torch_linear.py MODE N D TORCH_THREADS.
Set OPENBLAS_NUM_THREADS outside."""
import resource
import sys
import time

import torch
import torch.nn.functional as F

from openblas_core import openblas_core

mode = sys.argv[1]
n, d, threads = (int(x) for x in sys.argv[2:5])
torch.set_num_threads(threads)
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, n, d, generator=g) * 0.5 for _ in range(3))


def causal_linear(q, k, v, chunk=1024):
    fq, fk = F.elu(q) + 1, F.elu(k) + 1
    S = torch.zeros(q.shape[0], d, v.shape[-1])
    z = torch.zeros(q.shape[0], d)
    out = torch.empty_like(v)
    for c0 in range(0, n, chunk):
        kv = torch.einsum("bjd,bje->bjde", fk[:, c0:c0 + chunk], v[:, c0:c0 + chunk]).cumsum(1) + S[:, None]
        zc = fk[:, c0:c0 + chunk].cumsum(1) + z[:, None]
        num = torch.einsum("bid,bide->bie", fq[:, c0:c0 + chunk], kv)
        out[:, c0:c0 + chunk] = num / (fq[:, c0:c0 + chunk] * zc).sum(-1, keepdim=True)
        S, z = kv[:, -1], zc[:, -1]
    return out


def causal_softmax(q, k, v, chunk=1024):
    out = torch.empty_like(v)
    for c0 in range(0, n, chunk):
        s = q[:, c0:c0 + chunk] @ k[:, :c0 + chunk].transpose(1, 2) / d ** 0.5
        i = torch.arange(c0, min(c0 + chunk, n))[:, None]
        s = s.masked_fill(torch.arange(s.shape[-1])[None, :] > i, float("-inf"))
        out[:, c0:c0 + chunk] = torch.softmax(s, dim=-1) @ v[:, :c0 + chunk]
    return out


best = 1e9
with torch.no_grad():
    for _ in range(3):
        t = time.perf_counter()
        out = causal_softmax(q, k, v) if mode == "softmax" else causal_linear(q, k, v)
        best = min(best, time.perf_counter() - t)
print(f"{best:.4f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} {openblas_core()}")
