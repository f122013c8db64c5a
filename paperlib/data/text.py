"""Tokenisation: a vocabulary with `<eos>`/`<unk>`, and corpus splits as token-id tensors.

Convention (the one of the usual LM loaders, and of `shared/data/MANIFEST.json`): tokens are the
whitespace-split fields of each newline-terminated line followed by one `<eos>`. Text after the
last newline is kept only if it holds a token, which drops the lone space that ends the PTB
character files. In the character files, characters are already separated by spaces and `_`
marks a word boundary, so the same rule applies.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from paperlib.data.corpora import Corpus, DataError, corpus_dir, get_corpus, is_fetched

EOS = "<eos>"
UNK = "<unk>"
SPLITS = ("train", "valid", "test")


def tokenize_lines(text: str) -> Iterator[list[str]]:
    """Yield the tokens of each line, `<eos>` appended to every newline-terminated line."""
    pieces = text.split("\n")
    for piece in pieces[:-1]:
        yield piece.split() + [EOS]
    if pieces[-1].split():
        yield pieces[-1].split() + [EOS]


def tokenize(text: str) -> list[str]:
    return [tok for line in tokenize_lines(text) for tok in line]


class Vocabulary:
    """Bidirectional token <-> id map; ids sorted by decreasing training frequency, ties by token."""

    def __init__(self, tokens: Iterable[str]):
        self.itos: list[str] = list(tokens)
        if len(set(self.itos)) != len(self.itos):
            raise ValueError("vocabulary tokens must be unique")
        self.stoi: dict[str, int] = {tok: i for i, tok in enumerate(self.itos)}

    @classmethod
    def from_counts(cls, counts: Counter, specials: Iterable[str] = (EOS,)) -> Vocabulary:
        specials = [s for s in specials]
        ordered = sorted((t for t in counts if t not in specials), key=lambda t: (-counts[t], t))
        return cls([*specials, *ordered])

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def encode(self, tokens: Iterable[str]) -> torch.Tensor:
        """Map tokens to a LongTensor of ids; unknown tokens map to `<unk>` if it exists."""
        unk = self.stoi.get(UNK)
        ids = []
        for tok in tokens:
            idx = self.stoi.get(tok, unk)
            if idx is None:
                raise KeyError(f"token {tok!r} is not in the vocabulary and there is no {UNK}")
            ids.append(idx)
        return torch.tensor(ids, dtype=torch.long)

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[int(i)] for i in ids]


@dataclass
class TokenizedCorpus:
    """A corpus as one id stream per split, with the vocabulary built on the training split."""

    name: str
    vocab: Vocabulary
    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor
    line_lengths: dict[str, torch.Tensor]  # tokens per line (with its <eos>), to recover sentences

    def sentences(self, split: str) -> list[torch.Tensor]:
        """The id stream of `split` cut back into its lines (each ending in `<eos>`)."""
        return list(torch.split(self.split(split), self.line_lengths[split].tolist()))

    def split(self, name: str) -> torch.Tensor:
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; valid splits: {', '.join(SPLITS)}")
        return getattr(self, name)


def read_split_lines(corpus: Corpus | str, root: str | os.PathLike, split: str) -> list[list[str]]:
    """Tokenised lines of one split of a fetched word- or character-level corpus."""
    corpus = get_corpus(corpus) if isinstance(corpus, str) else corpus
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    if corpus.name in ("enwik8", "text8"):
        raise DataError(f"{corpus.name} is one file split by byte offsets; it is not line-tokenised")
    path = corpus_dir(corpus.name, root) / corpus.file(split).name
    if not path.is_file():
        raise DataError(f"{path} is missing: run `paperlib data fetch {corpus.name}` first")
    return list(tokenize_lines(path.read_text(encoding="utf-8")))


def load_corpus(corpus: Corpus | str, root: str | os.PathLike = "data/raw", verify: bool = True) -> TokenizedCorpus:
    """Load train/valid/test of a fetched corpus as id tensors; the vocabulary comes from train."""
    corpus = get_corpus(corpus) if isinstance(corpus, str) else corpus
    if verify and not is_fetched(corpus, root):
        raise DataError(
            f"{corpus.name} is missing or fails its checksum under {Path(root).resolve()}: "
            f"run `paperlib data fetch {corpus.name}`"
        )
    lines = {split: read_split_lines(corpus, root, split) for split in SPLITS}
    counts = Counter(tok for line in lines["train"] for tok in line)
    vocab = Vocabulary.from_counts(counts)
    ids = {split: vocab.encode(tok for line in lines[split] for tok in line) for split in SPLITS}
    lengths = {split: torch.tensor([len(line) for line in lines[split]], dtype=torch.long) for split in SPLITS}
    return TokenizedCorpus(corpus.name, vocab, ids["train"], ids["valid"], ids["test"], lengths)
