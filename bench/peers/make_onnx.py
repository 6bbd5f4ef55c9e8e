"""ONNX Runtime's side of bench/bench_peers.sh: one set of random weights written both ways, our
HDF5 weight file (CONTRACT.md section 3, the state_dict by name) and an ONNX file exported by
torch.onnx.export (opset 14), with the input as HDF5 (ours) and raw float32 (ONNX Runtime's), and
PyTorch's output for the check that both sides compute the same thing. Float32, eval.

    make_onnx.py encoder DIR L E H F ACT B N   nn.TransformerEncoder (post-norm, batch_first), L layers
                                               each with its own weights (nn.TransformerEncoder copies
                                               one layer L times: re-drawn here), ACT relu or gelu
    make_onnx.py mha DIR E H B N               nn.MultiheadAttention self-attention, need_weights=False

Writes DIR/NAME.h5 (weights), DIR/NAME.onnx, DIR/NAME_x.h5 (/x), DIR/NAME_x.bin, DIR/NAME_ref.h5
(/y, PyTorch's output), NAME the mode.
"""
import sys

import h5py
import numpy as np
import torch
from torch import nn

mode, d = sys.argv[1], sys.argv[2]
torch.manual_seed(0)


class Mha(nn.Module):
    def __init__(self, e, h):
        super().__init__()
        self.mha = nn.MultiheadAttention(e, h, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]


if mode == "encoder":
    L, E, H, F = (int(v) for v in sys.argv[3:7])
    act = sys.argv[7]
    B, N = int(sys.argv[8]), int(sys.argv[9])
    layers = [nn.TransformerEncoderLayer(E, H, F, dropout=0.0, activation=act, batch_first=True) for _ in range(L)]
    model = nn.TransformerEncoder(layers[0], L, enable_nested_tensor=False)
    model.layers = nn.ModuleList(layers)  # each its own weights
    attrs = dict(num_heads=H, norm_first=0, activation=act)
    state = model.state_dict()
else:
    E, H, B, N = (int(v) for v in sys.argv[3:7])
    model = Mha(E, H)
    attrs = dict(num_heads=H)
    state = {k[len("mha."):]: v for k, v in model.state_dict().items()}
model.eval()
x = torch.randn(B, N, E)
with torch.no_grad():
    y = model(x)
with h5py.File(f"{d}/{mode}.h5", "w") as f:
    for k, v in state.items():
        f[k.replace(".", "/")] = v.numpy()
    f.attrs.update(attrs)
h5py.File(f"{d}/{mode}_x.h5", "w")["x"] = x.numpy()
x.numpy().astype(np.float32).tofile(f"{d}/{mode}_x.bin")
h5py.File(f"{d}/{mode}_ref.h5", "w")["y"] = y.numpy()
# traced with gradients on: under no_grad PyTorch takes its fused fast paths, which do not export
torch.onnx.export(model, (x,), f"{d}/{mode}.onnx", input_names=["x"], output_names=["y"], opset_version=14)
print(f"{d}/{mode}.onnx: {mode}, input {tuple(x.shape)}", file=sys.stderr)
