"""Dataset summary: the facts of each corpus that the other experiments rely on, for a notebook to plot."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import torch

from paperlib.data.batching import truncate_sentences
from paperlib.data.corpora import get_corpus
from paperlib.data.music import load_piano_rolls, piano_roll_summary
from paperlib.data.text import SPLITS, load_corpus


def corpus_summary(name: str, root: str | os.PathLike, max_rank: int, sentence_max_len: int) -> dict[str, Any]:
    """Token/line/type counts per split, vocabulary size, the training rank-frequency curve, and
    the share of tokens lost by truncating sentences to `sentence_max_len` (Melis thesis §5.7.2).

    A music corpus (level ``piano_roll``) gets songs, frames and notes per frame per split instead
    (:func:`paperlib.data.music.piano_roll_summary`)."""
    corpus = get_corpus(name)
    if corpus.level == "piano_roll":
        return {**piano_roll_summary(load_piano_rolls(corpus, root)), "description": corpus.description,
                "level": corpus.level}
    data = load_corpus(corpus, root)
    splits = {}
    for split in SPLITS:
        ids = data.split(split)
        lengths = data.line_lengths[split]
        kept = sum(len(s) for s in truncate_sentences(data.sentences(split), sentence_max_len))
        splits[split] = {
            "tokens": int(ids.numel()),
            "lines": int(lengths.numel()),
            "types": int(torch.unique(ids).numel()) - 1,  # without <eos>
            "mean_line_tokens": float(lengths.float().mean()),
            "truncated_token_share": 1.0 - kept / ids.numel(),
        }
    counts = Counter(data.train.tolist())
    freqs = sorted(counts.values(), reverse=True)[:max_rank]
    return {
        "name": name,
        "description": corpus.description,
        "level": corpus.level,
        "vocab_size": len(data.vocab),
        "expected_vocab_size": corpus.vocab_size,
        "splits": splits,
        "rank_frequency": freqs,
        "sentence_max_len": sentence_max_len,
    }


def dataset_summary(corpora: list[str], root: str | os.PathLike, max_rank: int, sentence_max_len: int) -> dict:
    return {name: corpus_summary(name, root, max_rank, sentence_max_len) for name in corpora}
