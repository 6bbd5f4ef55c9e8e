#!/usr/bin/python3
"""Random T5 (v1.0: relu, tied), BART and ViT directories of one size for bench/bench_seq2seq.sh.

    /usr/bin/python3 bench/make_seq2seq_models.py OUT L E H F V

Writes OUT/t5 and OUT/bart (config.json + model.safetensors, float32), L + L layers of width E, H
heads (T5's d_kv = E / H), feed-forward F, vocabulary V, and OUT/vit (ViTModel, L layers, images of
256 in patches of 16), with the weight makers of tests/golden/make_seq2seq_goldens.py and
make_vit_goldens.py.
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "golden"))
from make_hf_dirs import write_dir  # noqa: E402
from make_seq2seq_goldens import bart_weights, t5_weights, to32  # noqa: E402
from make_vit_goldens import vit_weights  # noqa: E402


def main(out, L, E, H, F, V):
    out = Path(out)
    gen = torch.Generator().manual_seed(1)
    t5 = {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5", "d_model": E, "d_kv": E // H,
          "d_ff": F, "num_heads": H, "num_layers": L, "num_decoder_layers": L, "vocab_size": V,
          "feed_forward_proj": "relu", "tie_word_embeddings": True, "decoder_start_token_id": 0,
          "eos_token_id": 1, "pad_token_id": 0}
    bart = {"architectures": ["BartForConditionalGeneration"], "model_type": "bart", "d_model": E,
            "encoder_layers": L, "decoder_layers": L, "encoder_attention_heads": H, "decoder_attention_heads": H,
            "encoder_ffn_dim": F, "decoder_ffn_dim": F, "vocab_size": V, "max_position_embeddings": 1024,
            "activation_function": "gelu", "bos_token_id": 0, "pad_token_id": 1, "eos_token_id": 2,
            "decoder_start_token_id": 2}
    for name, cfg, make in (("t5", t5, t5_weights), ("bart", bart, bart_weights)):
        write_dir(out, name, dict(sorted(to32(make(cfg, gen)).items())), cfg)
    vit = {"architectures": ["ViTModel"], "model_type": "vit", "hidden_size": E, "num_hidden_layers": L,
           "num_attention_heads": H, "intermediate_size": F, "hidden_act": "gelu", "image_size": 256, "patch_size": 16,
           "num_channels": 3}
    write_dir(out, "vit", dict(sorted(to32(vit_weights(vit, gen, "", True)).items())), vit)


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:7]))
