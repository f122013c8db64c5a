"""Batching for language models: streams for truncated BPTT, and padded sentence batches.

Stream batching (the usual recipe of the AWD-LSTM / Mogrifier code bases): the id stream is cut
into `B` contiguous rows, batch-first `[B, N]`, and read in windows of `bptt` steps; the hidden
state carries from one window to the next in each row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch


def batchify(ids: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Cut a 1-d id stream into `batch_size` contiguous rows, dropping the remainder.  # [B, N]"""
    if ids.dim() != 1:
        raise ValueError(f"expected a 1-d id stream, got shape {tuple(ids.shape)}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    n = ids.numel() // batch_size
    if n < 2:
        raise ValueError(f"stream of {ids.numel()} tokens is too short for batch size {batch_size}")
    return ids[: n * batch_size].view(batch_size, n).contiguous()


def num_windows(stream: torch.Tensor, bptt: int) -> int:
    """How many BPTT windows `bptt_windows` yields for a `[B, N]` stream."""
    return (stream.size(1) - 1 + bptt - 1) // bptt


def bptt_windows(stream: torch.Tensor, bptt: int, start: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield (inputs, targets), both `[B, T]` with T <= bptt, from window index `start` on.

    Targets are the inputs shifted by one step. `start` lets an interrupted epoch resume at the
    window where it stopped.
    """
    if bptt < 1:
        raise ValueError(f"bptt must be >= 1, got {bptt}")
    length = stream.size(1) - 1
    for begin in range(start * bptt, length, bptt):
        end = min(begin + bptt, length)
        yield stream[:, begin:end], stream[:, begin + 1 : end + 1]


@dataclass
class SentenceBatch:
    """Padded sentences: `inputs` starts with `<eos>` as the beginning marker, `targets` ends with it."""

    inputs: torch.Tensor  # [B, T]
    targets: torch.Tensor  # [B, T]
    mask: torch.Tensor  # [B, T] bool, True on real tokens
    lengths: torch.Tensor  # [B]


def truncate_sentences(sentences: Sequence[torch.Tensor], max_len: int) -> list[torch.Tensor]:
    """Cut every sentence to at most `max_len` tokens (Melis thesis §5.7.2 uses 35 on PTB).

    The thesis truncates sentences to 35 tokens, losing about 3% of the tokens; it does not say
    whether the end-of-sentence token counts, and here it does (it is the last target).
    """
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    return [s[:max_len] for s in sentences]


def pad_sentences(sentences: Sequence[torch.Tensor], eos_id: int, pad_id: int = 0) -> SentenceBatch:
    """Batch sentences (each ending in `<eos>`) for teacher forcing, `<eos>` doubling as BOS."""
    if not sentences:
        raise ValueError("no sentences to batch")
    lengths = torch.tensor([len(s) for s in sentences], dtype=torch.long)
    width = int(lengths.max())
    targets = torch.full((len(sentences), width), pad_id, dtype=torch.long)
    inputs = torch.full_like(targets, pad_id)
    for row, sent in enumerate(sentences):
        targets[row, : len(sent)] = sent
        inputs[row, 0] = eos_id
        inputs[row, 1 : len(sent)] = sent[:-1]
    mask = torch.arange(width)[None, :] < lengths[:, None]
    return SentenceBatch(inputs, targets, mask, lengths)


def sentence_batches(
    sentences: Sequence[torch.Tensor],
    batch_size: int,
    eos_id: int,
    shuffle: bool = False,
    generator: torch.Generator | None = None,
) -> Iterator[SentenceBatch]:
    """Yield padded batches of `batch_size` sentences (the last may be smaller)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = torch.randperm(len(sentences), generator=generator) if shuffle else torch.arange(len(sentences))
    for begin in range(0, len(sentences), batch_size):
        idx = order[begin : begin + batch_size].tolist()
        yield pad_sentences([sentences[i] for i in idx], eos_id)
