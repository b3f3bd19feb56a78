#!/usr/bin/env python3
"""rvport's tiny ModernBERT sequence classifier, for checking candle-binding's classifier on riscv64 against
x86-64 without a download: `tiny-modernbert.py DIR` writes DIR/config.json, DIR/tokenizer.json (a WordLevel
vocabulary), DIR/model.safetensors (random float32 weights from a fixed seed) and DIR/texts.txt (the texts
to classify, one per line). The same seed gives the same bytes on every machine and Python 3 version
(random.Random is a Mersenne Twister; struct packs IEEE 754 little-endian). The Python standard library only.
"""

import json
import math
import random
import struct
import sys
from pathlib import Path

SEED = 20261206
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
WORDS = [
    "solve",
    "integral",
    "equation",
    "math",
    "write",
    "python",
    "function",
    "code",
    "poem",
    "rhyme",
    "verse",
    "please",
    "the",
    "a",
    "about",
    "quickly",
]
LABELS = ["math", "code", "poetry"]
HIDDEN, INTERMEDIATE, LAYERS, HEADS = 16, 32, 2, 2
TEXTS = [
    "solve the integral",
    "write a python function",
    "a poem about the sea",
    "please solve this equation quickly",
    "code",
    "rhyme rhyme verse about math",
    "write the function about a poem please",
    "unknown words only here",
    "math code poem",
    "please please please write a verse about the python code and solve the math equation quickly",
]


def tensors(rng: random.Random, vocab: int) -> dict[str, tuple[list[int], list[float]]]:
    """Every weight candle's ModernBERT and candle-binding's head and classifier load, by name."""
    out: dict[str, tuple[list[int], list[float]]] = {}

    def matrix(name: str, rows: int, cols: int) -> None:
        scale = 1.0 / math.sqrt(cols)
        out[name] = ([rows, cols], [rng.gauss(0.0, scale) for _ in range(rows * cols)])

    def norm(name: str, size: int) -> None:
        out[name] = ([size], [1.0 + rng.gauss(0.0, 0.1) for _ in range(size)])

    out["model.embeddings.tok_embeddings.weight"] = (
        [vocab, HIDDEN],
        [rng.gauss(0.0, 1.0) for _ in range(vocab * HIDDEN)],
    )
    norm("model.embeddings.norm.weight", HIDDEN)
    for i in range(LAYERS):
        p = f"model.layers.{i}"
        if i:  # ModernBERT's first layer has no attention norm (the embeddings' norm comes just before)
            norm(f"{p}.attn_norm.weight", HIDDEN)
        matrix(f"{p}.attn.Wqkv.weight", 3 * HIDDEN, HIDDEN)
        matrix(f"{p}.attn.Wo.weight", HIDDEN, HIDDEN)
        norm(f"{p}.mlp_norm.weight", HIDDEN)
        matrix(f"{p}.mlp.Wi.weight", 2 * INTERMEDIATE, HIDDEN)
        matrix(f"{p}.mlp.Wo.weight", HIDDEN, INTERMEDIATE)
    norm("model.final_norm.weight", HIDDEN)
    matrix("head.dense.weight", HIDDEN, HIDDEN)
    norm("head.norm.weight", HIDDEN)
    matrix("classifier.weight", len(LABELS), HIDDEN)
    out["classifier.bias"] = ([len(LABELS)], [rng.gauss(0.0, 0.1) for _ in LABELS])
    return out


def safetensors(named: dict[str, tuple[list[int], list[float]]]) -> bytes:
    """The safetensors format: an 8-byte little-endian header size, a JSON header (dtype, shape and byte
    offsets per tensor, padded with spaces to a multiple of 8), then the tensors' bytes in header order."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name in sorted(named):
        shape, values = named[name]
        blob = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def tokenizer(vocab: dict[str, int]) -> dict:
    """A WordLevel tokenizer: lower case, split on whitespace and punctuation, [CLS] ... [SEP] around."""
    special = [
        {
            "id": vocab[t],
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for t in SPECIAL
    ]
    cls, sep = (
        {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
        {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
    )
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": special,
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [cls, {"Sequence": {"id": "A", "type_id": 0}}, sep],
            "pair": [
                cls,
                {"Sequence": {"id": "A", "type_id": 0}},
                sep,
                {"Sequence": {"id": "B", "type_id": 1}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 1}},
            ],
            "special_tokens": {t: {"id": t, "ids": [vocab[t]], "tokens": [t]} for t in ("[CLS]", "[SEP]")},
        },
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }


def config(vocab: int) -> dict:
    """A ModernBERT sequence classifier's config.json, with the fields candle's Config reads."""
    return {
        "architectures": ["ModernBertForSequenceClassification"],
        "model_type": "modernbert",
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "max_position_embeddings": 128,
        "layer_norm_eps": 1e-5,
        "pad_token_id": 0,
        "cls_token_id": 2,
        "sep_token_id": 3,
        "global_attn_every_n_layers": 2,
        "global_rope_theta": 10000.0,
        "local_attention": 8,
        "local_rope_theta": 10000.0,
        "classifier_pooling": "mean",
        "id2label": {str(i): label for i, label in enumerate(LABELS)},
        "label2id": {label: str(i) for i, label in enumerate(LABELS)},
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: tiny-modernbert.py DIR", file=sys.stderr)
        return 2
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    vocab = {t: i for i, t in enumerate(SPECIAL + WORDS)}
    rng = random.Random(SEED)

    def dump(doc: dict) -> bytes:
        return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()

    (out / "config.json").write_bytes(dump(config(len(vocab))))
    (out / "tokenizer.json").write_bytes(dump(tokenizer(vocab)))
    (out / "model.safetensors").write_bytes(safetensors(tensors(rng, len(vocab))))
    (out / "texts.txt").write_bytes("".join(t + "\n" for t in TEXTS).encode())
    print(
        f"tiny ModernBERT in {out}: vocabulary {len(vocab)}, hidden {HIDDEN}, {LAYERS} layers, "
        f"{HEADS} heads, {len(LABELS)} labels, seed {SEED}, {len(TEXTS)} texts"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
