"""PTB sentences for the sentence VAEs (§5.7.2): truncated training and validation sets, the training-fit subset,
the test set, and shuffled batches."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from paperlib.data import SentenceBatch, pad_sentences, truncate_sentences
from paperlib.experiments.micmco.ptb.design import MicmcoPtbParams


@dataclass
class SentenceData:
    """The sentences a run uses: training (truncated), the training-fit evaluation subset, validation, test."""

    train: list[Tensor]
    train_eval: list[Tensor]
    valid: list[Tensor]
    test: list[Tensor]
    vocab_size: int
    eos_id: int

    def split(self, name: str) -> list[Tensor]:
        return {"train": self.train_eval, "valid": self.valid, "test": self.test}[name]

    def summary(self) -> dict[str, Any]:
        def tokens(sentences: Sequence[Tensor]) -> int:
            return int(sum(len(s) for s in sentences))

        return {"vocab_size": self.vocab_size,
                **{f"{name}_sentences": len(s) for name, s in
                   (("train", self.train), ("train_eval", self.train_eval), ("valid", self.valid),
                    ("test", self.test))},
                **{f"{name}_tokens": tokens(s) for name, s in
                   (("train", self.train), ("train_eval", self.train_eval), ("valid", self.valid),
                    ("test", self.test))}}


def _subset(sentences: list[Tensor], size: int | None, seed: int) -> list[Tensor]:
    """A fixed random subset of ``size`` sentences in corpus order (all of them for None or a larger size)."""
    if size is None or size >= len(sentences):
        return list(sentences)
    keep = torch.randperm(len(sentences), generator=torch.Generator().manual_seed(seed))[:size].sort().values
    return [sentences[i] for i in keep.tolist()]


def prepare_sentences(splits: Mapping[str, list[Tensor]], vocab_size: int, eos_id: int, unk_id: int | None,
                      settings: MicmcoPtbParams) -> SentenceData:
    """Apply the profile to sentence lists (each ending in ``<eos>``): vocabulary cut, truncation (train and valid,
    §5.7.2), subsets. Ids are assumed sorted by training frequency (as :class:`~paperlib.data.Vocabulary` does)."""
    vocab = vocab_size
    if settings.vocab_size is not None and settings.vocab_size < vocab_size:
        vocab = settings.vocab_size
        if unk_id is None or unk_id >= vocab or eos_id >= vocab:
            raise ValueError(f"cannot cut the vocabulary to {vocab}: <unk> ({unk_id}) and <eos> ({eos_id}) must "
                             "be among the kept ids")

    def cut(sentences: list[Tensor]) -> list[Tensor]:
        return [torch.where(s < vocab, s, torch.full_like(s, unk_id)) if vocab < vocab_size else s
                for s in sentences]

    train = truncate_sentences(cut(list(splits["train"])), settings.max_len)
    if settings.train_sentences is not None:
        train = train[: settings.train_sentences]
    valid = truncate_sentences(cut(list(splits["valid"])), settings.max_len)
    return SentenceData(
        train=train,
        train_eval=_subset(train, settings.train_eval_sentences, settings.seed + 1),
        valid=_subset(valid, settings.valid_sentences, settings.seed + 2),
        test=_subset(cut(list(splits["test"])), settings.test_sentences, settings.seed + 3),
        vocab_size=vocab, eos_id=eos_id,
    )


_DATA_CACHE: dict[tuple[str, str], SentenceData] = {}


def load_data(settings: MicmcoPtbParams, data_root: str | os.PathLike) -> SentenceData:
    """The profile's sentences of ``settings.corpus`` under ``data_root`` (cached per process)."""
    from paperlib.data import EOS, UNK, load_corpus

    key = (str(data_root), settings.trial_fingerprint() + settings.test_fingerprint())
    if key not in _DATA_CACHE:
        corpus = load_corpus(settings.corpus, data_root)
        splits = {split: corpus.sentences(split) for split in ("train", "valid", "test")}
        _DATA_CACHE[key] = prepare_sentences(splits, len(corpus.vocab), corpus.vocab.stoi[EOS],
                                             corpus.vocab.stoi.get(UNK), settings)
    return _DATA_CACHE[key]


class BatchStream:
    """Endless shuffled epochs of full batches of ``sentences`` (an epoch's last, smaller batch is dropped unless it is
    the only one), shuffled by a generator seeded with ``seed``. :meth:`state` / :meth:`restore` save and restore its
    position (the generator's state at the epoch's start and the place in that epoch), so that a resumed run
    continues the same sequence without replaying it."""

    def __init__(self, sentences: list[Tensor], batch_size: int, eos_id: int, seed: int) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.sentences, self.batch_size, self.eos_id = sentences, batch_size, eos_id
        self.generator = torch.Generator().manual_seed(seed)
        self._epoch_start = self.generator.get_state()
        self._order: list[int] | None = None  # this epoch's permutation; None before the epoch starts
        self._position = 0

    def __iter__(self) -> "BatchStream":
        return self

    def __next__(self) -> SentenceBatch:
        n, size = len(self.sentences), self.batch_size
        while True:
            if self._order is None:
                self._epoch_start = self.generator.get_state()
                self._order = torch.randperm(n, generator=self.generator).tolist()
                self._position = 0
            if self._position >= n:
                self._order = None
                continue
            chosen = self._order[self._position : self._position + size]
            self._position += size
            if len(chosen) == min(size, n):
                return pad_sentences([self.sentences[i] for i in chosen], self.eos_id)

    def state(self) -> dict[str, Any]:
        return {"epoch_start": self._epoch_start.clone(), "started": self._order is not None,
                "position": self._position}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.generator.set_state(state["epoch_start"])
        self._epoch_start, self._order, self._position = state["epoch_start"].clone(), None, 0
        if state["started"]:
            self._order = torch.randperm(len(self.sentences), generator=self.generator).tolist()
            self._position = int(state["position"])
