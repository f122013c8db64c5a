"""Conditional transition flows of the deep state space model, Schmidt & Hofmann §2.3–2.4.

A transition ``F(h_{t-1}, xi_t)`` is used through its restriction ``f = F(h_{t-1}, .)``, an
invertible map of the noise for a fixed context ``h_{t-1}``. Every flow here therefore offers

* ``forward(context, x) -> (y, log|det J_f(x)|)`` and
* ``inverse(context, y) -> (x, log|det J_{f^{-1}}(y)|)``,

where ``context`` is ``h_{t-1}`` (shape ``[..., d]``) and ``x``/``y`` have shape ``[..., d]``;
leading dimensions broadcast, so ``K`` importance samples ``[K, B, d]`` can share one context
``[B, d]`` (Algorithm 1).

Flows: ``ID`` (identity), ``DIAG`` and ``TRIL`` (eq. 10), stacks such as ``2xTRIL``, conditional
Real NVP coupling layers (built on ``zuko``), and :class:`InverseFlow`, which swaps directions so
that a flow's parametric direction can be the inverse ``F_g^{-1}`` (§2.4, last paragraph).
"""

from __future__ import annotations

import abc
import re
from typing import NamedTuple, Sequence

import torch
import zuko
from torch import Tensor, nn
from zuko.flows.coupling import GeneralCouplingTransform

FLOW_KINDS = ("ID", "DIAG", "TRIL", "REALNVP")


class ConditionalFlow(nn.Module, abc.ABC):
    """Invertible map of the noise given the previous state: the restriction f of F (§2.3)."""

    @abc.abstractmethod
    def forward(self, context: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        """Return ``y = f(x)`` [..., d] and ``log|det J_f(x)|`` [...]."""

    @abc.abstractmethod
    def inverse(self, context: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        """Return ``x = f^{-1}(y)`` [..., d] and ``log|det J_{f^{-1}}(y)|`` [...]."""


def clip_away_from_zero(x: Tensor, delta: float) -> Tensor:
    """Move entries of ``x`` out of ``(-delta, delta)`` keeping their sign (eq. 10 diagonal).

    Entries with ``|x| < delta`` become ``±delta`` (zero maps to ``+delta``), so the diagonal of
    ``G`` stays invertible with ``|log|G_ii|| <= |log delta|`` from below.
    """
    sign = 2.0 * (x >= 0).to(x.dtype) - 1.0
    return torch.where(x.abs() >= delta, x, delta * sign)


def _mlp(in_features: int, out_features: int, hidden: Sequence[int], unit_bias: int = 0) -> nn.Module:
    """zuko MLP with tanh units; the first ``unit_bias`` outputs start at 1 (unit diagonal)."""
    net = zuko.nn.MLP(in_features, out_features, hidden_features=tuple(hidden), activation=nn.Tanh)
    last = net[-1]
    with torch.no_grad():
        last.bias.zero_()
        last.bias[:unit_bias] = 1.0
    return net


class IdentityFlow(ConditionalFlow):
    """ID: ``F(h, xi) = xi``; ignores the context, log-determinant zero (Table 3).

    The paper does not spell ID out; we read it as the identity restriction ``f = id``, which
    Table 3 calls unsuited to the contextual setting (it forgets ``h_{t-1}``), not the additive
    random walk ``h_{t-1} + xi`` of §2.3.
    """

    def forward(self, context: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        return x, x.new_zeros(x.shape[:-1])

    def inverse(self, context: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        return y, y.new_zeros(y.shape[:-1])


class DiagonalFlow(ConditionalFlow):
    """DIAG: eq. (10) with ``G(h)`` restricted to a diagonal, ``F = g(h) + diag(G(h)) xi``."""

    def __init__(self, dim: int, hidden: Sequence[int] = (32, 32), delta: float = 0.1) -> None:
        super().__init__()
        _check_delta(delta)
        self.delta = delta
        self.shift = _mlp(dim, dim, hidden)
        self.scale = _mlp(dim, dim, hidden, unit_bias=dim)

    def _params(self, context: Tensor) -> tuple[Tensor, Tensor]:
        return self.shift(context), clip_away_from_zero(self.scale(context), self.delta)

    def forward(self, context: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        g, diag = self._params(context)
        y = g + diag * x
        return y, torch.broadcast_to(diag.abs().log().sum(-1), y.shape[:-1])

    def inverse(self, context: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        g, diag = self._params(context)
        x = (y - g) / diag
        return x, torch.broadcast_to(-diag.abs().log().sum(-1), x.shape[:-1])


class TriangularFlow(ConditionalFlow):
    """TRIL: ``F(h, xi) = g(h) + G(h) xi`` with lower-triangular ``G`` (eq. 10).

    The diagonal of ``G`` is clipped away from ``[-delta, delta]``; the log-determinant is the
    sum of log-magnitudes of the diagonal (O(d)) and the inverse is a triangular solve (O(d^2)).
    """

    def __init__(self, dim: int, hidden: Sequence[int] = (32, 32), delta: float = 0.1) -> None:
        super().__init__()
        _check_delta(delta)
        self.dim = dim
        self.delta = delta
        rows, cols = torch.tril_indices(dim, dim)
        # Diagonal entries first, so the unit-bias initialisation starts G at the identity.
        order = torch.argsort((rows != cols).to(torch.int64), stable=True)
        # Where each of G's d*d places reads its value: entry e of the network's output, or the zero appended after
        # them (index d(d+1)/2) above the diagonal. A gather rather than an indexed write, so vmap can batch it.
        placement = torch.full((dim * dim,), rows.numel(), dtype=torch.long)
        placement[rows[order] * dim + cols[order]] = torch.arange(rows.numel())
        self.register_buffer("placement", placement, persistent=False)
        self.shift = _mlp(dim, dim, hidden)
        self.factor = _mlp(dim, rows.numel(), hidden, unit_bias=dim)

    def _params(self, context: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        entries = self.factor(context)  # [..., d(d+1)/2]
        padded = torch.cat([entries, entries.new_zeros(*entries.shape[:-1], 1)], -1)
        lower = padded.index_select(-1, self.placement).unflatten(-1, (self.dim, self.dim))
        diag = clip_away_from_zero(lower.diagonal(dim1=-2, dim2=-1), self.delta)  # [..., d]
        lower = lower.tril(-1) + torch.diag_embed(diag)  # [..., d, d]
        return self.shift(context), lower, diag.abs().log().sum(-1)

    def forward(self, context: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        g, lower, logdet = self._params(context)
        y = g + (lower @ x.unsqueeze(-1)).squeeze(-1)
        return y, torch.broadcast_to(logdet, y.shape[:-1])

    def inverse(self, context: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        g, lower, logdet = self._params(context)
        x = torch.linalg.solve_triangular(lower, (y - g).unsqueeze(-1), upper=False).squeeze(-1)
        return x, torch.broadcast_to(-logdet, x.shape[:-1])


class CouplingFlow(ConditionalFlow):
    """One conditional Real NVP affine coupling layer (§2.4, [DSB16]) on zuko.

    Coordinates with ``mask == True`` pass unchanged; the others get an affine map whose shift
    and scale come from a zuko hyper-network of (those coordinates, ``h_{t-1}``). zuko's
    ``GeneralCouplingTransform`` takes the context directly, so no coupling code is rewritten.
    zuko's affine map softly bounds the log-scale (minimum slope 1e-3), a stabiliser the paper
    does not mention.
    """

    def __init__(self, dim: int, mask: Tensor, hidden: Sequence[int] = (8, 8)) -> None:
        super().__init__()
        mask = torch.as_tensor(mask, dtype=torch.bool)
        if mask.shape != (dim,) or not (0 < int(mask.sum()) < dim):
            raise ValueError(f"coupling mask must have {dim} entries with 1..{dim - 1} of them True")
        self.coupling = GeneralCouplingTransform(dim, dim, mask=mask, hidden_features=tuple(hidden))

    def forward(self, context: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.coupling(context).call_and_ladj(x)

    def inverse(self, context: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        return self.coupling(context).inv.call_and_ladj(y)


class StackedFlow(ConditionalFlow):
    """Composition ``f_k ∘ ... ∘ f_1``, every layer conditioned on the same ``h_{t-1}`` (§2.4).

    Log-determinants add. Note that a stack of TRIL layers is still affine in ``xi`` (so
    ``2xTRIL`` gives a Gaussian transition like TRIL, with a differently parametrised factor).
    """

    def __init__(self, layers: Sequence[ConditionalFlow]) -> None:
        super().__init__()
        if len(layers) == 0:
            raise ValueError("a stacked flow needs at least one layer")
        self.layers = nn.ModuleList(layers)

    def forward(self, context: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        total = x.new_zeros(())
        for layer in self.layers:
            x, ladj = layer(context, x)
            total = total + ladj
        return x, torch.broadcast_to(total, x.shape[:-1])

    def inverse(self, context: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        total = y.new_zeros(())
        for layer in reversed(self.layers):
            y, ladj = layer.inverse(context, y)
            total = total + ladj
        return y, torch.broadcast_to(total, y.shape[:-1])


class InverseFlow(ConditionalFlow):
    """Swap directions: the wrapped flow's parametric map becomes ``f^{-1}`` (§2.4).

    Used for ``F_g`` when its inverse is parametrised directly, which makes ``s = F_g^{-1} ∘ F_q``
    in the training objective (eq. 9) a forward pass of the wrapped flow.
    """

    def __init__(self, flow: ConditionalFlow) -> None:
        super().__init__()
        self.flow = flow

    def forward(self, context: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.flow.inverse(context, x)

    def inverse(self, context: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        return self.flow(context, y)


class CombinedFlow(NamedTuple):
    """Result of ``s = f_g^{-1} ∘ f_q`` (eq. 8): state ``h_t``, noise ``zeta_t``, ``log|det J_s|``."""

    state: Tensor
    noise: Tensor
    log_abs_det: Tensor


def combined_flow(generative: ConditionalFlow, inference: ConditionalFlow, context: Tensor,
                  xi: Tensor) -> CombinedFlow:
    """``zeta = s(xi) = f_g^{-1}(f_q(xi))`` and ``log|det J_s| = log|det J_fq| - log|det J_fg|`` (eqs. 8–9)."""
    state, ladj_q = inference(context, xi)
    zeta, ladj_g_inv = generative.inverse(context, state)
    return CombinedFlow(state, zeta, ladj_q + ladj_g_inv)


def _check_delta(delta: float) -> None:
    if not 0.0 < delta < 0.5:
        raise ValueError(f"delta must lie in (0, 0.5) (§2.4), got {delta}")


def realnvp_masks(dim: int, splits: Sequence[int]) -> list[Tensor]:
    """Coupling masks for REAL-NVP-[m_1, ..., m_k] (§5.2): layer i keeps ``m_i`` coordinates fixed.

    The paper lists only the masking dimensions; we alternate the side (first ``m_i``
    coordinates for even i, last ``m_i`` for odd i) so that every coordinate gets transformed.
    """
    masks = []
    for i, m in enumerate(splits):
        if not 0 < m < dim:
            raise ValueError(f"Real NVP masking dimensions must lie in 1..{dim - 1}, got {m}")
        idx = torch.arange(dim)
        masks.append(idx < m if i % 2 == 0 else idx >= dim - m)
    return masks


_SPEC = re.compile(r"^(?:(\d+)X)?(ID|DIAG|TRIL|REALNVP)(?:-\[?([\d,]+)\]?)?$")


def build_flow(spec: str, dim: int, hidden: Sequence[int] = (32, 32), delta: float = 0.1,
               coupling_hidden: Sequence[int] = (8, 8)) -> ConditionalFlow:
    """Flow from a name as in the paper's tables: ``ID``, ``DIAG``, ``TRIL``, ``2xTRIL``,
    ``REAL-NVP-[2,3,4,5,6,7]`` (default masks ``2..d-1``), or ``+``-joined stacks (``TRIL+DIAG``)."""
    parts = spec.upper().replace("×", "X").replace(" ", "").replace("REAL-NVP", "REALNVP").split("+")
    layers: list[ConditionalFlow] = []
    for part in parts:
        match = _SPEC.match(part)
        if match is None:
            raise ValueError(
                f"unknown flow {spec!r}; use one of {FLOW_KINDS}, optionally 'Nx' repeated "
                "(e.g. '2xTRIL'), 'REAL-NVP-[2,3]' masks, or '+' to stack"
            )
        repeat, kind, splits = int(match.group(1) or 1), match.group(2), match.group(3)
        if splits is not None and kind != "REALNVP":
            raise ValueError(f"only REAL-NVP takes masking dimensions, got {part!r}")
        for _ in range(repeat):
            if kind == "ID":
                layers.append(IdentityFlow())
            elif kind == "DIAG":
                layers.append(DiagonalFlow(dim, hidden, delta))
            elif kind == "TRIL":
                layers.append(TriangularFlow(dim, hidden, delta))
            else:
                if dim < 2:
                    raise ValueError("Real NVP coupling needs a state size of at least 2")
                ms = [int(m) for m in splits.split(",")] if splits else (list(range(2, dim)) or [1])
                layers.extend(CouplingFlow(dim, mask, coupling_hidden) for mask in realnvp_masks(dim, ms))
    return layers[0] if len(layers) == 1 else StackedFlow(layers)
