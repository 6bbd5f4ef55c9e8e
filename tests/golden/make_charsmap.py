#!/usr/bin/python3
"""Write sentencepiece's precompiled nmt_nfkc normalization table (the `precompiled_charsmap` of
T5's, ALBERT's and mBART's tokenizer.json, whose `Precompiled` normalizer it is), for
make_tokenizers.mjs's T5 fixture. Run by hand, never by the tests:

    apt-get install python3-sentencepiece python3-protobuf
    /usr/bin/python3 tests/golden/make_charsmap.py /tmp/nmt_nfkc.charsmap

The table is sentencepiece's built-in rule (normalization_rule_name="nmt_nfkc", the rule T5's
spiece.model was trained with), compiled into every model it trains: a throwaway model over a small
text gives it.
"""
import sys
import tempfile
from pathlib import Path

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb


def main(out):
    with tempfile.TemporaryDirectory() as d:
        corpus = Path(d) / "corpus.txt"
        corpus.write_text("\n".join(["Hello world. The quick brown fox jumps over the lazy dog."] * 200) + "\n")
        spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(Path(d) / "m"), vocab_size=36, hard_vocab_limit=False,
                                       model_type="unigram", normalization_rule_name="nmt_nfkc",
                                       character_coverage=1.0, minloglevel=2)
        m = pb.ModelProto()
        m.ParseFromString((Path(d) / "m.model").read_bytes())
    assert m.normalizer_spec.name == "nmt_nfkc"
    Path(out).write_bytes(m.normalizer_spec.precompiled_charsmap)
    print(out, len(m.normalizer_spec.precompiled_charsmap), "bytes")


if __name__ == "__main__":
    main(sys.argv[1])
