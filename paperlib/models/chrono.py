"""Chrono initialisation of forget-gate biases (Tallec & Ollivier, 2018), Melis thesis §4.4."""

from __future__ import annotations

import torch
from torch import Tensor


def chrono_forget_bias_(bias: Tensor, t_max: float, generator: torch.Generator | None = None) -> Tensor:
    """Fill ``bias`` in place with b^f ~ ln U(1, T_max - 1), Melis thesis §4.4.

    Only the forget gate is initialised, as in the thesis; the original Chrono
    init additionally sets b^i = -b^f, which the thesis does not mention.
    """
    if t_max <= 2.0:
        raise ValueError(f"chrono_t_max must exceed 2 so that U(1, T_max - 1) is non-empty, got {t_max}")
    with torch.no_grad():
        bias.uniform_(1.0, t_max - 1.0, generator=generator).log_()
    return bias
