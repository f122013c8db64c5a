"""Mogrifier: mutual gating of the input and the previous output, Melis thesis ch. 2 (eq. 2.2).

:func:`mogrify` is the autograd reference of eq. (2.2); :class:`MogrifierRecurrence`
fuses the Mogrifier with an LSTM or RLSTM cell over a whole sequence with a
hand-written backward pass (see :mod:`paperlib.models.lstm` for the same idea).
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from paperlib.device import float32_recurrence
from paperlib.models.lstm import lstm_cell_backward_, lstm_cell_forward_
from paperlib.models.rlstm import rlstm_cell_backward_, rlstm_cell_forward_, rlstm_weight_grads


def mogrify(
    h: Tensor,
    x: Tensor,
    transforms: Sequence[Callable[[Tensor], Tensor]],
    zigzag: bool = True,
) -> tuple[Tensor, Tensor]:
    """Mogrification, Melis thesis eq. (2.2); returns (h^{2⌊r/2⌋}, x^{2⌊(r+1)/2⌋-1}).

    ``transforms[i - 1]`` is Q^i (maps h [B, n] to [B, m]) for odd i and R^i
    (maps x [B, m] to [B, n]) for even i, so r = len(transforms) and r = 0 is
    the identity. With ``zigzag=False`` every gate is computed from the original
    ``h`` and ``x`` (the no-zigzag ablation of Fig. 2.2).
    """
    h_orig, x_orig = h, x
    for i, transform in enumerate(transforms, start=1):
        if i % 2 == 1:
            x = 2.0 * torch.sigmoid(transform(h if zigzag else h_orig)) * x
        else:
            h = 2.0 * torch.sigmoid(transform(x if zigzag else x_orig)) * h
    return h, x


def _round_map(in_size: int, out_size: int, rank: int) -> nn.Module:
    """Q^i or R^i without bias; low-rank Q^i = Q^i_left Q^i_right when rank > 0."""
    if rank <= 0:
        return nn.Linear(in_size, out_size, bias=False)
    return nn.Sequential(nn.Linear(in_size, rank, bias=False), nn.Linear(rank, out_size, bias=False))


class Mogrifier(nn.Module):
    """The r rounds of eq. (2.2) with a separate Q^i or R^i per round.

    ``rank <= 0`` means full-rank matrices (thesis §2.A); otherwise each matrix
    is factorised as a product of [out, k] and [k, in] factors. Default PyTorch
    initialisation keeps Q^i h small, so 2σ(·) ≈ 1 and the initial transform is
    close to identity as intended by the factor 2.
    """

    def __init__(self, input_size: int, hidden_size: int, rounds: int, rank: int = 0, zigzag: bool = True):
        super().__init__()
        if rounds < 0:
            raise ValueError(f"mogrifier rounds must be >= 0, got {rounds}")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.rounds = rounds
        self.rank = rank
        self.zigzag = zigzag
        # odd rounds gate x from h (Q^i: n -> m), even rounds gate h from x (R^i: m -> n)
        self.transforms = nn.ModuleList(
            _round_map(hidden_size, input_size, rank) if i % 2 == 1 else _round_map(input_size, hidden_size, rank)
            for i in range(1, rounds + 1)
        )

    def forward(self, h: Tensor, x: Tensor) -> tuple[Tensor, Tensor]:
        return mogrify(h, x, list(self.transforms), self.zigzag)

    def round_weights(self) -> list[Tensor]:
        """Weights of all rounds in application order: Q^1 (or its two factors), R^2, ..."""
        return [p for transform in self.transforms for p in transform.parameters()]

    def extra_repr(self) -> str:
        return f"rounds={self.rounds}, rank={self.rank}, zigzag={self.zigzag}"


class MogrifierSpec(NamedTuple):
    """Static configuration of :class:`MogrifierRecurrence`."""

    cell: str  # "lstm" or "rlstm"
    capped: bool  # capped input gate (always on for the RLSTM)
    rounds: int
    low_rank: bool
    zigzag: bool


CELL_WEIGHT_COUNT = {"lstm": 3, "rlstm": 7}


class MogrifierRecurrence(torch.autograd.Function):
    """Time loop of a Mogrifier (R)LSTM, eq. (2.2) composed with eq. (2.1) or §4.1, with manual BPTT.

    Inputs: ``x`` [T, B, m], ``h0``/``c0`` [B, n], ``state_mask`` [B, n] or None,
    ``spec`` (:class:`MogrifierSpec`), then the cell weights — LSTM: (W_ih [4n, m],
    W_hh [4n, n], b [4n]); RLSTM: (W_ih [2n, m], b_ij, W_hh [3n, n], W_fu, b_f,
    W_oc, b_o) — then per round either the full Q^i/R^i [out, in] or the factors
    ([k, in], [out, k]) in the order they are applied. Outputs: h_1..h_T
    [T, B, n] and c_T [B, n].

    The x projection cannot be hoisted (x is mogrified by h_prev), but every
    weight gradient is still a single matmul over all time steps after the loop.
    """

    @staticmethod
    def forward(ctx, x, h0, c0, state_mask, spec, *weights):  # type: ignore[override]
        steps, batch, m = x.shape
        n = h0.shape[1]
        lstm_cell = spec.cell == "lstm"
        cell_w = weights[: CELL_WEIGHT_COUNT[spec.cell]]
        per_round = 2 if spec.low_rank else 1
        round_w = [weights[len(cell_w) + per_round * k : len(cell_w) + per_round * (k + 1)] for k in range(spec.rounds)]
        # contiguous transposes: non-transposed GEMMs are markedly faster for small batches
        round_t = [[w.t().contiguous() for w in ws] for ws in round_w]
        w_ih_t = cell_w[0].t().contiguous()
        w_hh_t = (cell_w[1] if lstm_cell else cell_w[2]).t().contiguous()
        if not lstm_cell:
            w_fu_t, w_oc_t = cell_w[3].t().contiguous(), cell_w[5].t().contiguous()
            hh = x.new_empty(batch, 3 * n)

        h_tilde = x.new_empty(steps, batch, n)  # masked h_prev = h^0
        values = [x.new_empty(steps, batch, m if i % 2 else n) for i in range(1, spec.rounds + 1)]  # x^i or h^i
        gates = [torch.empty_like(v) for v in values]  # σ(Q^i h) or σ(R^i x)
        mids = [x.new_empty(steps, batch, ws[0].shape[0]) for ws in round_w] if spec.low_rank else []
        acts = x.new_empty(steps, batch, 4 * n)
        hs = x.new_empty(steps + 1, batch, n)
        cs = x.new_empty(steps + 1, batch, n)
        tanh_cs = x.new_empty(steps, batch, n)
        hs[0] = h0
        cs[0] = c0
        for t in range(steps):
            if state_mask is None:
                h_tilde[t] = hs[t]
            else:
                torch.mul(hs[t], state_mask, out=h_tilde[t])
            x_cur, h_cur = x[t], h_tilde[t]
            for k in range(spec.rounds):
                odd = k % 2 == 0  # round i = k + 1
                if odd:
                    source, target = (h_cur if spec.zigzag else h_tilde[t]), x_cur
                else:
                    source, target = (x_cur if spec.zigzag else x[t]), h_cur
                gate = gates[k][t]
                if spec.low_rank:
                    torch.mm(source, round_t[k][0], out=mids[k][t])
                    torch.mm(mids[k][t], round_t[k][1], out=gate)
                else:
                    torch.mm(source, round_t[k][0], out=gate)
                gate.sigmoid_()
                new = values[k][t]
                torch.mul(gate, target, out=new).mul_(2.0)
                if odd:
                    x_cur = new
                else:
                    h_cur = new
            if lstm_cell:
                g = acts[t]
                torch.addmm(cell_w[2], x_cur, w_ih_t, out=g).addmm_(h_cur, w_hh_t)
                lstm_cell_forward_(g, cs[t], cs[t + 1], tanh_cs[t], hs[t + 1], spec.capped)
            else:
                torch.mm(h_cur, w_hh_t, out=hh)
                ij = acts[t, :, : 2 * n]
                torch.addmm(hh[:, : 2 * n], x_cur, w_ih_t, out=ij)
                ij.add_(cell_w[1])
                rlstm_cell_forward_(
                    acts[t], hh[:, 2 * n :], w_fu_t, cell_w[4], w_oc_t, cell_w[6],
                    cs[t], cs[t + 1], tanh_cs[t], hs[t + 1], state_mask,
                )
        ctx.spec = spec
        ctx.buffers = (h_tilde, values, gates, mids, acts, cs, tanh_cs)
        ctx.save_for_backward(x, state_mask, *weights)
        return hs[1:], cs[steps]

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out, d_c_last):  # type: ignore[override]
        x, state_mask, *weights = ctx.saved_tensors
        spec: MogrifierSpec = ctx.spec
        h_tilde, values, gates, mids, acts, cs, tanh_cs = ctx.buffers
        steps, batch, m = x.shape
        n = h_tilde.shape[-1]
        lstm_cell = spec.cell == "lstm"
        cell_w = weights[: CELL_WEIGHT_COUNT[spec.cell]]
        per_round = 2 if spec.low_rank else 1
        round_w = [weights[len(cell_w) + per_round * k : len(cell_w) + per_round * (k + 1)] for k in range(spec.rounds)]
        w_ih = cell_w[0]
        w_hh = cell_w[1] if lstm_cell else cell_w[2]
        x_width = 4 * n if lstm_cell else 2 * n  # columns of the activation grads that reach x and h
        h_width = 4 * n if lstm_cell else 3 * n

        d_x = torch.empty_like(x)
        d_acts = torch.empty_like(acts)
        d_pre = [torch.empty_like(g) for g in gates]  # dL/d(Q^i h) or dL/d(R^i x)
        d_mids = [torch.empty_like(mid) for mid in mids]
        dh = d_out.new_zeros(batch, n)
        dc = d_c_last
        for t in reversed(range(steps)):
            if lstm_cell:
                dc = lstm_cell_backward_(acts[t], cs[t], tanh_cs[t], d_out[t] + dh, dc, d_acts[t], spec.capped)
            else:
                dc = rlstm_cell_backward_(
                    acts[t], cs[t], tanh_cs[t], d_out[t] + dh, dc, d_acts[t], cell_w[3], cell_w[5], state_mask
                )
            d_xcur = d_acts[t, :, :x_width] @ w_ih  # [B, m]
            d_hcur = d_acts[t, :, :h_width] @ w_hh  # [B, n]
            d_x_orig = d_h_orig = None  # no-zigzag gates read the original inputs
            for k in reversed(range(spec.rounds)):
                odd = k % 2 == 0
                if odd:
                    target = x[t] if k == 0 else values[k - 2][t]
                    d_new = d_xcur
                else:
                    target = h_tilde[t] if k == 1 else values[k - 2][t]
                    d_new = d_hcur
                gate = gates[k][t]
                d_z = d_pre[k][t]
                torch.mul(d_new, target, out=d_z).mul_(2.0 * (gate - gate * gate))
                d_target = 2.0 * d_new * gate
                if spec.low_rank:
                    torch.mm(d_z, round_w[k][1], out=d_mids[k][t])
                    d_source = d_mids[k][t] @ round_w[k][0]
                else:
                    d_source = d_z @ round_w[k][0]
                if odd:
                    d_xcur = d_target
                    if spec.zigzag:
                        d_hcur = d_hcur + d_source
                    else:
                        d_h_orig = d_source if d_h_orig is None else d_h_orig + d_source
                else:
                    d_hcur = d_target
                    if spec.zigzag:
                        d_xcur = d_xcur + d_source
                    else:
                        d_x_orig = d_source if d_x_orig is None else d_x_orig + d_source
            d_x[t] = d_xcur if d_x_orig is None else d_xcur + d_x_orig
            dh = d_hcur if d_h_orig is None else d_hcur + d_h_orig
            if state_mask is not None:
                dh = dh * state_mask

        def flat(seq: Tensor) -> Tensor:
            return seq.reshape(-1, seq.shape[-1])

        last_odd = spec.rounds - 1 if spec.rounds % 2 else spec.rounds - 2  # index of the last x update
        last_even = spec.rounds - 1 if spec.rounds % 2 == 0 else spec.rounds - 2
        x_final = flat(values[last_odd]) if spec.rounds >= 1 else flat(x)
        h_final = flat(values[last_even]) if spec.rounds >= 2 else flat(h_tilde)
        d_flat = flat(d_acts)
        if lstm_cell:
            cell_grads = [d_flat.t() @ x_final, d_flat.t() @ h_final, d_flat.sum(0)]
        else:
            d_ij = d_flat[:, : 2 * n]
            cell_grads = [
                d_ij.t() @ x_final,
                d_ij.sum(0),
                d_flat[:, : 3 * n].t() @ h_final,
                *rlstm_weight_grads(d_acts, acts, cs, state_mask, (True,) * 4),
            ]
        round_grads = []
        for k in range(spec.rounds):
            odd = k % 2 == 0
            if spec.zigzag:
                source = (h_tilde if k == 0 else values[k - 1]) if odd else values[k - 1]
            else:
                source = h_tilde if odd else x
            if spec.low_rank:
                round_grads += [flat(d_mids[k]).t() @ flat(source), flat(d_pre[k]).t() @ flat(mids[k])]
            else:
                round_grads.append(flat(d_pre[k]).t() @ flat(source))
        return (d_x, dh, dc, None, None, *cell_grads, *round_grads)


def mogrifier_recurrence(
    x: Tensor,
    h0: Tensor,
    c0: Tensor,
    state_mask: Tensor | None,
    spec: MogrifierSpec,
    weights: Sequence[Tensor],
) -> tuple[Tensor, Tensor]:
    """Functional entry point of :class:`MogrifierRecurrence`; returns (h_1..h_T [T, B, n], c_T)."""
    if spec.cell not in CELL_WEIGHT_COUNT:
        raise ValueError(f"cell must be one of {tuple(CELL_WEIGHT_COUNT)}, got {spec.cell!r}")
    return float32_recurrence(MogrifierRecurrence.apply, x, h0, c0, state_mask, spec, *weights)
