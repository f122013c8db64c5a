"""Dropout masks of the recurrent language model, Melis thesis §4.2 (eq. 4.1).

All masks use inverted scaling (kept units are multiplied by 1 / (1 - p)), so
deterministic evaluation simply uses no masks. Masks are explicit tensors rather
than ``nn.Dropout`` calls so that a set of masks can be sampled once (optionally
from a seeded ``torch.Generator``), sliced along the batch and reused: this is
what makes the multi-sample objective and Monte Carlo dropout testable one mask
at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor


@dataclass(frozen=True)
class DropoutRates:
    """Dropout probabilities of eq. (4.1) plus whole-word embedding dropout.

    ``input`` is M^in (on the input embedding), ``cell_output`` is M^cell,l (on
    each layer's output, before it enters the residual sum), ``state`` is the
    variational M^state,l (on h_prev, and on c inside the RLSTM output gate),
    ``output`` is M^out (before the output embedding) and ``embedding`` drops
    whole word types of E^in for a sequence.
    """

    embedding: float = 0.0
    input: float = 0.0
    cell_output: float = 0.0
    state: float = 0.0
    output: float = 0.0

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{field.name} dropout must lie in [0, 1), got {value}")


@dataclass
class DropoutMasks:
    """One draw of every dropout mask for a batch; ``None`` means "no dropout".

    Shapes (batch first): ``embedding`` [B, V], ``input`` [B, T, E],
    ``cell`` [B, T, H] per layer, ``state`` [B, H] per layer (no time axis:
    variational dropout), ``output`` [B, T, H].
    """

    embedding: Tensor | None
    input: Tensor | None
    cell: list[Tensor | None]
    state: list[Tensor | None]
    output: Tensor | None

    def select_batch(self, start: int, stop: int) -> "DropoutMasks":
        """The masks of batch rows ``start:stop`` (every mask has batch first)."""

        def pick(mask: Tensor | None) -> Tensor | None:
            return None if mask is None else mask[start:stop]

        return DropoutMasks(
            embedding=pick(self.embedding),
            input=pick(self.input),
            cell=[pick(m) for m in self.cell],
            state=[pick(m) for m in self.state],
            output=pick(self.output),
        )


def bernoulli_mask(
    like: Tensor,
    shape: tuple[int, ...],
    rate: float,
    generator: torch.Generator | None = None,
) -> Tensor | None:
    """Inverted-dropout mask with entries 0 or 1 / (1 - rate); ``None`` when rate is 0."""
    if rate <= 0.0:
        return None
    keep = 1.0 - rate
    return like.new_empty(shape).bernoulli_(keep, generator=generator).div_(keep)


def sample_masks(
    rates: DropoutRates,
    like: Tensor,
    batch_size: int,
    seq_len: int,
    vocab_size: int,
    embedding_size: int,
    hidden_sizes: list[int],
    generator: torch.Generator | None = None,
    rate_scale: float = 1.0,
) -> DropoutMasks:
    """Draw all masks of eq. (4.1) for one forward pass.

    ``rate_scale`` multiplies every rate; Monte Carlo evaluation uses it to scale
    dropout rates as in Melis et al. (2018). ``like`` fixes dtype and device.
    """
    scaled = {f.name: getattr(rates, f.name) * rate_scale for f in fields(rates)}
    for name, value in scaled.items():
        if not 0.0 <= value < 1.0:
            raise ValueError(f"scaled {name} dropout must lie in [0, 1), got {value}")
    b, t = batch_size, seq_len
    return DropoutMasks(
        embedding=bernoulli_mask(like, (b, vocab_size), scaled["embedding"], generator),
        input=bernoulli_mask(like, (b, t, embedding_size), scaled["input"], generator),
        cell=[bernoulli_mask(like, (b, t, h), scaled["cell_output"], generator) for h in hidden_sizes],
        state=[bernoulli_mask(like, (b, h), scaled["state"], generator) for h in hidden_sizes],
        output=bernoulli_mask(like, (b, t, hidden_sizes[-1]), scaled["output"], generator),
    )


def apply_embedding_dropout(embedded: Tensor, tokens: Tensor, mask: Tensor | None) -> Tensor:
    """Zero whole word types: every occurrence of a dropped word in a sequence is zeroed.

    The seeds only say that entire embedding vectors of random word ids are
    zeroed; drawing the word-type mask per sequence (rather than once per batch)
    is our choice, so that the D samples of the multi-sample objective stay independent.

    ``embedded`` [B, T, E], ``tokens`` [B, T], ``mask`` [B, V] (per-sequence word-type mask).
    """
    if mask is None:
        return embedded
    keep = mask.gather(1, tokens)  # [B, T]
    return embedded * keep.unsqueeze(-1)
