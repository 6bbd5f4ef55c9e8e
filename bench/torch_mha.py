"""torch.nn.MultiheadAttention self-attention (batch_first, eval, no_grad, float32): best and median
seconds of 7 calls (after one warm-up call), the process's peak memory in MiB and its OpenBLAS core.
Usage: torch_mha.py B N E H MODE TORCH_THREADS, MODE one of none (need_weights=False: PyTorch's fast
path), heads (per-head weights), average (averaged weights). Set OPENBLAS_NUM_THREADS outside."""
import resource
import sys
import time

import torch

from openblas_core import openblas_core

b, n, e, h = (int(x) for x in sys.argv[1:5])
mode, threads = sys.argv[5], int(sys.argv[6])
torch.set_num_threads(threads)
torch.manual_seed(0)
mha = torch.nn.MultiheadAttention(e, h, batch_first=True).eval()
x = torch.randn(b, n, e)
times = []
with torch.no_grad():
    for _ in range(8):
        t = time.perf_counter()
        out = mha(x, x, x, need_weights=mode != "none", average_attn_weights=mode == "average")
        times.append(time.perf_counter() - t)
times = sorted(times[1:])
print(f"{times[0]:.4f} {times[len(times) // 2]:.4f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} {openblas_core()}")
