#!/usr/bin/python3
"""Export a PyTorch model to a weight file the toolkit's tools read (CONTRACT.md section 3, and the
layouts of attn-toolkit(7)): every state_dict entry as a float32 dataset named by its key with '.'
replaced by '/', and the hyperparameters the layout needs as attributes of the group.

Optional, for PyTorch users: the tools never need Python. Debian's python3-torch and python3-h5py.

    /usr/bin/python3 scripts/export_torch.py MODEL.pt OUT.h5[:GROUP] [--config CONFIG.json]

MODEL.pt is a whole saved module (torch.save(model)) or a state_dict (then --config is needed for
the attributes). Known modules and what they get:
  nn.MultiheadAttention                      num_heads, add_zero_attn        (mha-run)
  nn.TransformerEncoder(Layer)               num_heads, norm_first, activation, layer_norm_eps (encode)
  nn.TransformerDecoder(Layer)               the same                        (decode)
  nn.Transformer                             the same and d_model, on the root; encoder/ and decoder/
  a module with a `config` (Hugging Face's LlamaForCausalLM, GPT2LMHeadModel, ...): its config's
  int, float, str and bool values, as the one-loop export the layouts expect       (decode)
From Python: `from export_torch import export; export(model, "out.h5", group="/")`.
"""
import argparse
import json
import sys

import h5py
import numpy as np
import torch

ACTIVATIONS = {torch.nn.functional.relu: "relu", torch.nn.functional.gelu: "gelu"}


def layer_attrs(layer):
    """nn.TransformerEncoderLayer / DecoderLayer hyperparameters, as the stacks read them."""
    act = layer.activation
    name = ACTIVATIONS.get(act) or {"ReLU": "relu", "GELU": "gelu"}.get(type(act).__name__)
    if name == "gelu" and getattr(act, "approximate", "none") == "tanh":
        name = "gelu_tanh"
    if name is None:
        raise SystemExit(f"export_torch: activation {act!r} is not one the tools know (relu, gelu)")
    return {"num_heads": layer.self_attn.num_heads, "norm_first": int(layer.norm_first), "activation": name,
            "layer_norm_eps": float(layer.norm1.eps)}


def attributes(model, config=None):
    """The attributes for `model` (a module, or None for a bare state_dict with `config`)."""
    if config is not None:
        return {k: v for k, v in config.items() if isinstance(v, (bool, int, float, str))}
    if isinstance(model, torch.nn.MultiheadAttention):
        return {"num_heads": model.num_heads, "add_zero_attn": int(model.add_zero_attn)}
    if isinstance(model, (torch.nn.TransformerEncoderLayer, torch.nn.TransformerDecoderLayer)):
        return layer_attrs(model)
    if isinstance(model, (torch.nn.TransformerEncoder, torch.nn.TransformerDecoder)):
        return layer_attrs(model.layers[0])
    if isinstance(model, torch.nn.Transformer):
        return {**layer_attrs(model.encoder.layers[0]), "d_model": model.d_model}
    if hasattr(model, "config"):
        cfg = model.config.to_dict() if hasattr(model.config, "to_dict") else dict(vars(model.config))
        return {k: v for k, v in cfg.items() if isinstance(v, (bool, int, float, str))}
    raise SystemExit(f"export_torch: {type(model).__name__}: unknown module; give its config as --config JSON")


def export(model, path, group="/", config=None, mode="w"):
    """Writes `model` (a module or a state_dict) to HDF5 file `path` under `group`."""
    state = model if isinstance(model, dict) else model.state_dict()
    attrs = attributes(None if isinstance(model, dict) else model, config)
    with h5py.File(path, mode) as f:
        g = f.require_group(group)
        for key, value in state.items():  # the one loop
            g[key.replace(".", "/")] = value.detach().float().cpu().numpy()
        for key, value in attrs.items():
            g.attrs[key] = np.bool_(value) if isinstance(value, bool) else value
    return attrs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a saved module (torch.save(model)) or state_dict")
    ap.add_argument("out", help="OUT.h5 or OUT.h5:GROUP")
    ap.add_argument("--config", help="JSON of the hyperparameters (needed for a bare state_dict)")
    a = ap.parse_args()
    model = torch.load(a.model, map_location="cpu", weights_only=False) if "weights_only" in \
        torch.load.__code__.co_varnames else torch.load(a.model, map_location="cpu")
    config = json.load(open(a.config)) if a.config else None
    if isinstance(model, dict) and config is None:
        raise SystemExit("export_torch: a state_dict carries no hyperparameters: give --config CONFIG.json")
    path, _, group = a.out.partition(":")
    attrs = export(model, path, group or "/", config)
    print(f"{a.out}: {len(model if isinstance(model, dict) else model.state_dict())} datasets, attributes {attrs}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
