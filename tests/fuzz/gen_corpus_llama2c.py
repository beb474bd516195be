#!/usr/bin/env python3
"""gen_corpus_llama2c.py - writes the seed corpus of fuzz_llama2c: small
valid llama2.c checkpoints with their tokenizers (tied and untied, with and
without grouped-query attention) in the target's input format (u32 checkpoint
length, checkpoint, tokenizer).  Usage: gen_corpus_llama2c.py OUT_DIR"""
import os
import struct
import sys


def seed(dim, hidden, layers, heads, kv_heads, vocab, seq, tied):
    hs = dim // heads
    kv = hs * kv_heads
    floats = (vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * kv * dim
                                      + 3 * hidden * dim) + dim + seq * hs)
    if not tied:
        floats += vocab * dim
    hdr = struct.pack("<7i", dim, hidden, layers, heads, kv_heads,
                      vocab if tied else -vocab, seq)
    ckpt = hdr + b"".join(struct.pack("<f", ((i * 7919) % 100) / 100.0 - 0.5)
                          for i in range(floats))
    pieces = [b"<unk>", b"\n<s>\n", b"\n</s>\n", b"<0x41>", b" a"]
    pieces += [b"b" * (1 + i % 3) for i in range(vocab - len(pieces))]
    tok = struct.pack("<i", 8) + b"".join(
        struct.pack("<fi", -float(i), len(p)) + p for i, p in enumerate(pieces))
    return struct.pack("<I", len(ckpt)) + ckpt + tok


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, args in {
        "tied": (8, 16, 1, 2, 1, 6, 16, True),
        "untied": (8, 16, 2, 2, 2, 7, 8, False),
    }.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(seed(*args))


if __name__ == "__main__":
    main()
