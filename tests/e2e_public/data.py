"""What the public scripts read, made here (no hub, no network): a text file, a word-level
tokenizer trained on it, and a one-layer GPT-2 config.

Run as ``python -m tests.e2e_public.data DIR``; writes ``DIR/train.txt``, ``DIR/tokenizer/`` and
``DIR/config/`` (what ``--train_file``, ``--tokenizer_name`` and ``--config_name`` take).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

WORDS = tuple(
    [
        "the",
        "cat",
        "dog",
        "sat",
        "ran",
        "on",
        "a",
        "mat",
        "log",
        "sun",
        "moon",
        "red",
        "blue",
        "fast",
        "slow",
        "big",
        "small",
        "one",
        "two",
        "three",
        "four",
        "five",
        "tree",
        "river",
        "stone",
        "cloud",
    ]
)


def text(lines: int = 400, seed: int = 0) -> str:
    rng = random.Random(seed)
    return "\n".join(" ".join(rng.choices(WORDS, k=rng.randint(6, 14))) for _ in range(lines))


def write(root: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, PreTrainedTokenizerFast

    root.mkdir(parents=True, exist_ok=True)
    (root / "train.txt").write_text(text() + "\n")
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train([str(root / "train.txt")], trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", model_max_length=64)
    fast.save_pretrained(str(root / "tokenizer"))
    config = GPT2Config(n_layer=1, n_embd=32, n_head=2, n_positions=64, vocab_size=len(fast))
    config.save_pretrained(str(root / "config"))


if __name__ == "__main__":
    write(Path(sys.argv[1]))
