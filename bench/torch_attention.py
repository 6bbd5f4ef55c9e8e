"""softmax(Q K^T / sqrt(d)) V in PyTorch (float32, eval, no_grad): best seconds of 3 and the result's
peak memory. Usage: torch_attention.py B N D TORCH_THREADS. Set OPENBLAS_NUM_THREADS outside."""
import resource
import sys
import time

import torch

from openblas_core import openblas_core

b, n, d, threads = (int(x) for x in sys.argv[1:5])
torch.set_num_threads(threads)
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(b, n, d, generator=g) for _ in range(3))
best = 1e9
with torch.no_grad():
    for _ in range(3):
        t = time.perf_counter()
        out = torch.softmax(q @ k.transpose(1, 2) / d ** 0.5, dim=-1) @ v
        best = min(best, time.perf_counter() - t)
print(f"{best:.4f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} {openblas_core()}")
