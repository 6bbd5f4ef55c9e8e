"""The OpenBLAS core this Python process loaded (import torch first: PyTorch loads OpenBLAS both as
libopenblas.so.0 and as libblas.so.3, and each picks a core from OPENBLAS_CORETYPE or the CPU), and
the timing loop the PyTorch benches share."""
import ctypes
import resource
import time


def openblas_core():
    names = []
    for lib in ("libopenblas.so.0", "libblas.so.3"):
        try:
            get = ctypes.CDLL(lib).openblas_get_corename
        except (OSError, AttributeError):
            continue
        get.restype = ctypes.c_char_p
        names.append(get().decode())
    return "/".join(dict.fromkeys(names)) or "unknown"


def timed(fn, runs):
    """Prints "best median peak_MiB core" of `runs` calls of fn after a warm-up (torch.no_grad)."""
    import torch

    times = []
    with torch.no_grad():
        for _ in range(runs + 1):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
    times = sorted(times[1:])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{times[0]:.4f} {times[len(times) // 2]:.4f} {peak:.0f} {openblas_core()}")
