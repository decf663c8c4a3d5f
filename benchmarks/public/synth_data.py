"""Synthetic inputs for the public training scripts (the device machine has no network).

    python3 synth_data.py tokens DIR      # DIR/train.bin, DIR/val.bin: uint16 GPT-2 token ids (nanoGPT)
    python3 synth_data.py images DIR      # DIR/train/<class>/*.jpg, DIR/val/<class>/*.jpg (ImageFolder)
    python3 synth_data.py text DIR        # DIR/train.txt and a byte-level BPE tokenizer in DIR/tokenizer
                                          # (HF run_clm.py: --train_file, --tokenizer_name)

Random data: the step's cost does not depend on what the tokens or pixels are.
"""

import os
import sys
from multiprocessing import Pool

import numpy as np


def tokens(d: str) -> None:
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, n in (("train.bin", 8_000_000), ("val.bin", 400_000)):
        rng.integers(0, 50257, size=n, dtype=np.uint16).tofile(os.path.join(d, name))


def _jpeg(args):
    path, seed = args
    from PIL import Image

    rng = np.random.default_rng(seed)
    # smooth random image (a noise field upsampled), so JPEG decode costs what a photo's does
    small = rng.integers(0, 255, size=(20, 20, 3), dtype=np.uint8)
    Image.fromarray(small).resize((256, 256), Image.BILINEAR).save(path, quality=90)


def images(d: str, classes: int = 4, per_class: int = 1300, val: int = 16) -> None:
    jobs = []
    for split, n in (("train", per_class), ("val", val)):
        for c in range(classes):
            cd = os.path.join(d, split, f"c{c}")
            os.makedirs(cd, exist_ok=True)
            jobs += [(os.path.join(cd, f"{i}.jpg"), hash((split, c, i)) & 0xFFFF) for i in range(n)]
    with Pool(16) as p:
        p.map(_jpeg, jobs, chunksize=64)


def text(d: str, lines: int = 20_000, words_per_line: int = 100) -> None:
    """Lines of random pseudo-words and a tokenizer trained on them (the hub is out of reach).

    The tokenizer (byte-level BPE, 8192 entries, as GPT-2's but smaller) only has to turn text
    into ids: the model keeps GPT-2's own 50257-entry embedding, so the step is GPT-2's.
    """
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(0)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, size=rng.integers(2, 9))) for _ in range(20_000)]
    path = os.path.join(d, "train.txt")
    with open(path, "w") as fh:
        for _ in range(lines):
            fh.write(" ".join(vocab[i] for i in rng.integers(0, len(vocab), size=words_per_line)) + "\n")
    bpe = ByteLevelBPETokenizer()
    bpe.train([path], vocab_size=8192, special_tokens=["<|endoftext|>"])
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>",
                                  bos_token="<|endoftext|>", unk_token="<|endoftext|>",
                                  model_max_length=1024)
    tok.save_pretrained(os.path.join(d, "tokenizer"))


if __name__ == "__main__":
    {"tokens": tokens, "images": images, "text": text}[sys.argv[1]](sys.argv[2])
