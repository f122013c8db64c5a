"""Synthetic data sets from the seeds, generated from a seed so that every run sees the same data."""

from __future__ import annotations

from dataclasses import dataclass

import torch


def uniform_symbols(num: int, vocab_size: int = 10_000, seed: int = 0) -> torch.Tensor:
    """Data points that are single symbols drawn uniformly from `vocab_size` (Melis thesis §5.7.1).

    The optimal negative log-likelihood of this data is ln(vocab_size) (≈ 9.210 for 10,000).
    """
    if num < 1 or vocab_size < 2:
        raise ValueError(f"need num >= 1 and vocab_size >= 2, got {num}, {vocab_size}")
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(vocab_size, (num,), generator=gen)  # [N]


@dataclass
class ReverseCopyData:
    """Reverse-copy examples: the encoder reads `source`, then the decoder emits it reversed.

    Token ids: 0..vocab_size-1 are symbols, `marker` = vocab_size starts decoding (it is the
    decoder's first input), so models need `vocab_size + 1` input embeddings.
    """

    source: torch.Tensor  # [N, L] tokens read by the encoder
    decoder_inputs: torch.Tensor  # [N, L] marker followed by the reversed source without its last token
    targets: torch.Tensor  # [N, L] the source reversed
    vocab_size: int

    @property
    def marker(self) -> int:
        return self.vocab_size


def reverse_copy(num: int, length: int, vocab_size: int = 1000, seed: int = 0) -> ReverseCopyData:
    """The reverse-copy task of Melis thesis §2.3.3 (Fig. 2.4): i.i.d. uniform tokens, then a marker.

    The thesis uses 500,000 training and 10,000 validation/test examples over 1,000 symbols at
    lengths 50 to 200; sizes here are arguments so that `params.yaml` can scale them down.
    """
    if num < 1 or length < 1 or vocab_size < 2:
        raise ValueError(f"need num, length >= 1 and vocab_size >= 2, got {num}, {length}, {vocab_size}")
    gen = torch.Generator().manual_seed(seed)
    source = torch.randint(vocab_size, (num, length), generator=gen)
    targets = source.flip(1)
    marker = torch.full((num, 1), vocab_size, dtype=torch.long)
    decoder_inputs = torch.cat([marker, targets[:, :-1]], dim=1)
    return ReverseCopyData(source, decoder_inputs, targets, vocab_size)
