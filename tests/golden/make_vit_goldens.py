#!/usr/bin/python3
"""Write the ViT test models and their goldens (issue 57).

    /usr/bin/python3 tests/golden/make_vit_goldens.py testdata

The reference is transformers' modeling_vit.py written out in float64 PyTorch (Debian has no
transformers): the patch embedding by nn.functional.conv2d (kernel and stride patch_size), the
class token first, position embeddings added (for another image size: the patch grid's positions
through nn.functional.interpolate(mode="bicubic", align_corners=False), as interpolate_pos_encoding
does), pre-norm layers (layernorm_before, attention with biases and 1/sqrt(dh), layernorm_after,
GELU (erf) feed-forward), the final layernorm, the pooler tanh(dense(x[:, 0])) (ViTModel) and the
classifier dense(x[:, 0]) (ViTForImageClassification).

Models (testdata/hf/NAME: config.json and model.safetensors, float32 values):
  vit:      ViTModel, image 32, patches of 8 (a 4 x 4 grid), 3 channels, hidden 16, 4 heads,
            intermediate 32, 2 layers, with its pooler
  vit_cls:  ViTForImageClassification (vit. without a pooler, classifier over 5 labels)
testdata/vit.h5: /pixels (2, 3, 32, 32), /pixels_big (1, 3, 48, 40) (a 6 x 5 grid: positions
interpolated), and per model /NAME/output (2, 17, 16), /NAME/weights1 (2, 4, 17, 17) (layer 1's
attention), /NAME/pooled or /NAME/logits, /NAME/output_big (1, 31, 16).

Images (testdata/images/, written with Pillow): rgb.png 40 x 36, palette.png 30 x 30 (mode P),
gray.png 20 x 24 (L), rgba.png 33 x 31, gray1.png 18 x 18 (1-bit), gray16.png (16-bit, which the
toolkit refuses); vit_cls/preprocessor_config.json (ViTImageProcessor: 32 x 32, bilinear, its own
mean and std) and images/processor_{bicubic,lanczos,box,hamming}.json. /images/bilinear (5, 3, 32,
32) holds the pixel_values of the five 8-bit images in that order, and /images/rgb_{filter}
(1, 3, 32, 32) rgb.png's under the other filters, each as transformers' ViTImageProcessor makes
them: Image.open(f).convert("RGB"), Pillow's resize, float64 times rescale_factor to float32,
(x - mean) / std in float32, channels first.
"""
import math
import sys
from pathlib import Path

import json

import h5py
import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_hf_dirs import write_dir  # noqa: E402

D = torch.float64


def vit_weights(cfg, gen, prefix, pooler):
    E, F, C, P = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_channels"], cfg["patch_size"]
    grid = cfg["image_size"] // P

    def r(*shape, std=0.5):
        return torch.randn(*shape, generator=gen, dtype=D) * std

    w = {prefix + "embeddings.cls_token": r(1, 1, E),
         prefix + "embeddings.position_embeddings": r(1, 1 + grid * grid, E),
         prefix + "embeddings.patch_embeddings.projection.weight": r(E, C, P, P, std=(C * P * P) ** -0.5),
         prefix + "embeddings.patch_embeddings.projection.bias": r(E, std=0.1)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"{prefix}encoder.layer.{i}."
        for n in ("attention.attention.query", "attention.attention.key", "attention.attention.value",
                  "attention.output.dense"):
            w[p + n + ".weight"] = r(E, E, std=E ** -0.5)
            w[p + n + ".bias"] = r(E, std=0.1)
        w[p + "intermediate.dense.weight"] = r(F, E, std=E ** -0.5)
        w[p + "intermediate.dense.bias"] = r(F, std=0.1)
        w[p + "output.dense.weight"] = r(E, F, std=F ** -0.5)
        w[p + "output.dense.bias"] = r(E, std=0.1)
        for n in ("layernorm_before", "layernorm_after"):
            w[p + n + ".weight"] = 1 + r(E, std=0.2)
            w[p + n + ".bias"] = r(E, std=0.1)
    w[prefix + "layernorm.weight"] = 1 + r(E, std=0.2)
    w[prefix + "layernorm.bias"] = r(E, std=0.1)
    if pooler:
        w[prefix + "pooler.dense.weight"] = r(E, E, std=E ** -0.5)
        w[prefix + "pooler.dense.bias"] = r(E, std=0.1)
    return w


def vit_forward(w, cfg, pixels, prefix):
    E, H, P = cfg["hidden_size"], cfg["num_attention_heads"], cfg["patch_size"]
    eps = cfg.get("layer_norm_eps", 1e-12)
    b, _, height, width = pixels.shape
    x = torch.nn.functional.conv2d(pixels, w[prefix + "embeddings.patch_embeddings.projection.weight"],
                                   w[prefix + "embeddings.patch_embeddings.projection.bias"], stride=P)
    x = x.flatten(2).transpose(1, 2)
    x = torch.cat([w[prefix + "embeddings.cls_token"].expand(b, 1, E), x], dim=1)
    pos = w[prefix + "embeddings.position_embeddings"]
    side = int(math.sqrt(pos.shape[1] - 1))
    gh, gw = height // P, width // P
    if (gh, gw) != (side, side):
        grid = pos[:, 1:].reshape(1, side, side, E).permute(0, 3, 1, 2)
        grid = torch.nn.functional.interpolate(grid, size=(gh, gw), mode="bicubic", align_corners=False)
        pos = torch.cat([pos[:, :1], grid.permute(0, 2, 3, 1).reshape(1, gh * gw, E)], dim=1)
    x = x + pos
    n, dh = x.shape[1], E // H
    weights = []
    for i in range(cfg["num_hidden_layers"]):
        p = f"{prefix}encoder.layer.{i}."
        h = torch.nn.functional.layer_norm(x, (E,), w[p + "layernorm_before.weight"], w[p + "layernorm_before.bias"],
                                           eps)

        def proj(name):
            y = h @ w[p + f"attention.attention.{name}.weight"].T + w[p + f"attention.attention.{name}.bias"]
            return y.view(b, n, H, dh).transpose(1, 2)

        q, k, v = proj("query"), proj("key"), proj("value")
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh), -1)
        weights.append(a)
        z = (a @ v).transpose(1, 2).reshape(b, n, E)
        x = x + z @ w[p + "attention.output.dense.weight"].T + w[p + "attention.output.dense.bias"]
        h = torch.nn.functional.layer_norm(x, (E,), w[p + "layernorm_after.weight"], w[p + "layernorm_after.bias"],
                                           eps)
        h = torch.nn.functional.gelu(h @ w[p + "intermediate.dense.weight"].T + w[p + "intermediate.dense.bias"])
        x = x + h @ w[p + "output.dense.weight"].T + w[p + "output.dense.bias"]
    x = torch.nn.functional.layer_norm(x, (E,), w[prefix + "layernorm.weight"], w[prefix + "layernorm.bias"], eps)
    return x, weights


FILTERS = {"bilinear": 2, "bicubic": 3, "lanczos": 1, "box": 4, "hamming": 5}


def pixel_values(path, proc):
    """ViTImageProcessor's steps on one image file."""
    img = Image.open(path).convert("RGB")
    arr = np.array(img.resize((proc["size"]["width"], proc["size"]["height"]), resample=proc["resample"]))
    x = (arr.astype(np.float64) * proc["rescale_factor"]).astype(np.float32)
    x = (x - np.array(proc["image_mean"], dtype=np.float32)) / np.array(proc["image_std"], dtype=np.float32)
    return x.transpose(2, 0, 1)


def write_images(testdata, f, gen):
    d = testdata / "images"
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(57)

    def smooth(h, w, c):  # a gradient with noise, so resampling has something to do
        y, x = np.mgrid[0:h, 0:w]
        base = (x[..., None] * 5 + y[..., None] * 3 + np.arange(c) * 60) % 256
        return np.clip(base + rng.integers(-40, 40, (h, w, c)), 0, 255).astype(np.uint8)

    Image.fromarray(smooth(36, 40, 3), "RGB").save(d / "rgb.png")
    Image.fromarray(smooth(30, 30, 3), "RGB").quantize(16).save(d / "palette.png")
    Image.fromarray(smooth(24, 20, 1)[..., 0], "L").save(d / "gray.png")
    Image.fromarray(smooth(31, 33, 4), "RGBA").save(d / "rgba.png")
    Image.fromarray(smooth(18, 18, 1)[..., 0] > 128).save(d / "gray1.png")
    Image.fromarray((smooth(16, 16, 1)[..., 0].astype(np.uint16) * 257), "I;16").save(d / "gray16.png")
    proc = {"image_processor_type": "ViTImageProcessor", "do_resize": True, "size": {"height": 32, "width": 32},
            "resample": 2, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
            "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]}
    (testdata / "hf" / "vit_cls" / "preprocessor_config.json").write_text(json.dumps(proc, indent=2) + "\n")
    g = f.create_group("images")
    names = ["rgb", "palette", "gray", "rgba", "gray1"]
    g["bilinear"] = np.stack([pixel_values(d / f"{n}.png", proc) for n in names])
    for name, number in FILTERS.items():
        if name == "bilinear":
            continue
        p = dict(proc, resample=number)
        (d / f"processor_{name}.json").write_text(json.dumps(p, indent=2) + "\n")
        g[f"rgb_{name}"] = pixel_values(d / "rgb.png", p)[None]


def main(testdata):
    testdata = Path(testdata)
    gen = torch.Generator().manual_seed(58)
    cfg = {"architectures": ["ViTModel"], "model_type": "vit", "hidden_size": 16, "num_hidden_layers": 2,
           "num_attention_heads": 4, "intermediate_size": 32, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
           "image_size": 32, "patch_size": 8, "num_channels": 3, "qkv_bias": True, "torch_dtype": "float32"}
    cls_cfg = dict(cfg, architectures=["ViTForImageClassification"],
                   id2label={str(i): f"label_{i}" for i in range(5)},
                   label2id={f"label_{i}": i for i in range(5)})
    pixels = torch.randn(2, 3, 32, 32, generator=gen, dtype=D).to(torch.float32).to(D)
    big = torch.randn(1, 3, 48, 40, generator=gen, dtype=D).to(torch.float32).to(D)
    with h5py.File(testdata / "vit.h5", "w") as f:
        f["pixels"], f["pixels_big"] = pixels.to(torch.float32).numpy(), big.to(torch.float32).numpy()
        for name, c, prefix, pooler in (("vit", cfg, "", True), ("vit_cls", cls_cfg, "vit.", False)):
            w = vit_weights(c, gen, prefix, pooler)
            if name == "vit_cls":
                w["classifier.weight"] = torch.randn(5, 16, generator=gen, dtype=D) * 0.25
                w["classifier.bias"] = torch.randn(5, generator=gen, dtype=D) * 0.1
            w = {k: v.to(torch.float32).to(D) for k, v in w.items()}  # the float32 values both sides use
            write_dir(testdata / "hf", name, {k: v.to(torch.float32).numpy() for k, v in sorted(w.items())}, c)
            out, weights = vit_forward(w, c, pixels, prefix)
            g = f.create_group(name)
            g["output"], g["weights1"] = out.numpy(), weights[1].numpy()
            if pooler:
                g["pooled"] = torch.tanh(out[:, 0] @ w["pooler.dense.weight"].T + w["pooler.dense.bias"]).numpy()
            else:
                g["logits"] = (out[:, 0] @ w["classifier.weight"].T + w["classifier.bias"]).numpy()
            g["output_big"] = vit_forward(w, c, big, prefix)[0].numpy()
        write_images(testdata, f, gen)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "testdata")
