"""The OpenBLAS core this Python process loaded (import torch first: PyTorch loads OpenBLAS both as
libopenblas.so.0 and as libblas.so.3, and each picks a core from OPENBLAS_CORETYPE or the CPU)."""
import ctypes


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
