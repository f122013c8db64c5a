"""NADE, the neural autoregressive distribution estimator (Larochelle & Murray 2011), Krause thesis §2.6.1.

A binary vector x_{1:N} (here a frame of 88 piano keys, lowest pitch first: the fixed ordering eq. 2.58
allows) is modelled note by note, P(x_{1:N}) = P(x_1) Π_n P(x_{n+1} | x_{1:n}) (eq. 2.58), with

    P(x_1) = σ(b_y^1)                                                   (2.59)
    ĥ_n = b_h + Σ_{m<=n} W_{hx_m} x_m = ĥ_{n-1} + W_{hx_n} x_n          (2.60, 2.61)
    h_n = act(ĥ_n)                                                      (2.62)
    P(x_{n+1} | x_{1:n}) = σ(W_{yh_{n+1}}ᵀ h_n + b_y^{n+1})             (2.63)

All N conditionals come from one pass, with no Python loop over notes, in two forms computing the same
function. :func:`nade_logits` is eq. (2.61) as written: a cumulative sum over all notes of x_m W_{hx_m}, which
materialises N hidden vectors per frame. :func:`sparse_nade_logits`, which the models use, relies on the
frame being binary: x_m W_{hx_m} is zero unless note m sounds, so the running sum changes only at sounding
notes and takes K + 1 distinct values in a frame with K sounding notes among notes 1..N-1 (JSB Chorales and
Nottingham frames hold about 4 of 88). It takes the cumulative sum over the sounding notes only, applies
eq. (2.62) to those K + 1 hidden vectors, computes eq. (2.63)'s inner product of every output row with each
of them in one matrix product, and gives note n + 1 the one belonging to the number of sounding notes among
1..n. On 912 frames with JSB's density of sounding notes and H = 400, its forward and backward pass take
about 18 times less time than the dense form's on one CPU thread.
Weights: ``weight_in`` [H, N] holds the columns W_{hx_m},
``weight_out`` [N, H] the rows W_{yh_n}ᵀ (the thesis indexes the output weights by the hidden state; we
index them by the note they predict, n + 1, which is the same set of vectors).

Departures and readings, stated: the thesis names relu as one choice of ``act`` ("could for instance be"),
so relu is the default and sigmoid, the original NADE's, an option. Following eq. (2.59), the first note's
probability depends on its bias alone (the original NADE also feeds it act(b_h)). Dropout on the NADE's
hidden units (§4.8: "applied to NADE units separately at each timestep") is one inverted-dropout mask over
the H units per frame, shared by the N conditionals of that frame, drawn afresh for every frame.

Log-likelihoods are in nats; a frame's log-likelihood is the sum over its N notes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ACTIVATIONS = ("relu", "sigmoid")


def _check_activation(activation: str) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")


def nade_logits(
    x: Tensor,
    weight_in: Tensor,
    weight_out: Tensor,
    bias_hidden: Tensor,
    bias_out: Tensor,
    activation: str = "relu",
    hidden_mask: Tensor | None = None,
) -> Tensor:
    """Logits of P(x_n = 1 | x_{1:n-1}) for every note n, eqs. (2.59)-(2.63), in one pass; ``[..., N]``.

    ``x`` [..., N] (0/1 values), ``weight_in`` [H, N], ``weight_out`` [N, H]; ``bias_hidden`` [..., H] and
    ``bias_out`` [..., N] broadcast against ``x``'s leading dims (per-frame biases of the RNN-NADE, eqs.
    2.64-2.65, or plain vectors); ``hidden_mask`` [..., H] multiplies h_n (NADE-unit dropout).
    """
    _check_activation(activation)
    steps = x.unsqueeze(-1) * weight_in.t()  # [..., N, H]: x_m W_{hx_m}
    pre = bias_hidden.unsqueeze(-2) + steps[..., :-1, :].cumsum(-2)  # [..., N-1, H]: ĥ_1..ĥ_{N-1} (2.60-2.61)
    hidden = torch.relu(pre) if activation == "relu" else torch.sigmoid(pre)  # (2.62)
    if hidden_mask is not None:
        hidden = hidden * hidden_mask.unsqueeze(-2)
    rest = (hidden * weight_out[1:]).sum(-1) + bias_out[..., 1:]  # [..., N-1]: notes 2..N (2.63)
    first = bias_out[..., :1].expand(*rest.shape[:-1], 1)  # note 1 (2.59)
    return torch.cat([first, rest], -1)


def sparse_nade_logits(
    x: Tensor,
    weight_in: Tensor,
    weight_out: Tensor,
    bias_hidden: Tensor,
    bias_out: Tensor,
    activation: str = "relu",
    hidden_mask: Tensor | None = None,
) -> Tensor:
    """The logits of :func:`nade_logits` for binary ``x``, computed from the sounding notes only (module docstring).

    Same arguments and shapes as :func:`nade_logits`; ``x`` must hold only 0 and 1 (not checked here: the
    models check their frames once, at the boundary).
    """
    _check_activation(activation)
    lead, notes, hidden_size = x.shape[:-1], x.shape[-1], weight_in.shape[0]
    frames = x.reshape(-1, notes)  # [F, N]
    count = frames.shape[0]
    bias_hidden = bias_hidden.expand(*lead, hidden_size).reshape(count, hidden_size)  # [F, H]
    bias_out = bias_out.expand(*lead, notes).reshape(count, notes)  # [F, N]
    sounding = frames[:, :-1] > 0.5  # [F, N-1]: notes 1..N-1, the ones whose sum reaches a conditional
    most = int(sounding.sum(1).max()) if count else 0  # K, the most sounding notes in a frame
    position = torch.arange(notes - 1, device=x.device).expand(count, -1)
    # each frame's sounding notes in note order, padded with index N-1, a zero column appended to W_hx
    order = torch.where(sounding, position, notes - 1).sort(1).values[:, :most]  # [F, K]
    columns = torch.cat([weight_in.t()[:-1], weight_in.new_zeros(1, hidden_size)])  # [N, H]
    running = columns[order].cumsum(1)  # [F, K, H]: Σ over the first j sounding notes (2.60-2.61)
    pre = torch.cat([bias_hidden.unsqueeze(1), bias_hidden.unsqueeze(1) + running], 1)  # [F, K+1, H]
    hidden = torch.relu(pre) if activation == "relu" else torch.sigmoid(pre)  # (2.62)
    if hidden_mask is not None:
        hidden = hidden * hidden_mask.expand(*lead, hidden_size).reshape(count, 1, hidden_size)
    table = hidden @ weight_out[1:].t()  # [F, K+1, N-1]: W_{yh_{n+1}}ᵀ h for every distinct h (2.63)
    rank = sounding.cumsum(1)  # [F, N-1]: how many of notes 1..n sound, i.e. which h is h_n
    rest = table.gather(1, rank.unsqueeze(1)).squeeze(1) + bias_out[:, 1:]  # [F, N-1]: notes 2..N
    return torch.cat([bias_out[:, :1], rest], 1).reshape(*lead, notes)  # note 1: (2.59)


def nade_log_prob(x: Tensor, logits: Tensor) -> Tensor:
    """log P(x_{1:N}) = Σ_n log P(x_n | x_{1:n-1}) (eq. 2.58) from the conditionals' logits; ``[...]`` nats."""
    return -F.binary_cross_entropy_with_logits(logits, x, reduction="none").sum(-1)


def check_frames(frames: Tensor, notes: int) -> None:
    """Raise ``ValueError`` unless ``frames`` is a floating [..., notes] tensor of zeros and ones."""
    if not torch.is_floating_point(frames):
        raise ValueError(f"frames must be a floating-point tensor of 0/1 values, got dtype {frames.dtype}")
    if frames.dim() < 1 or frames.shape[-1] != notes:
        raise ValueError(f"frames must have {notes} notes in the last dimension, got shape {tuple(frames.shape)}")
    if not bool(((frames == 0) | (frames == 1)).all()):
        raise ValueError("frames must hold only 0 and 1 (a binary piano roll)")


class NADE(nn.Module):
    """A NADE over single frames, eqs. (2.58)-(2.63): each frame modelled independently of the others.

    This is the "NADE (1 frame only)" baseline of Table 4.6. :meth:`log_prob` gives log P(frame) ``[...]`` for
    frames ``[..., N]``; ``forward(frames [B, T, N], state=None) -> (log P [B, T], None)`` is the interface of a
    model of songs (:mod:`paperlib.models.rnn_nade`), with no state since frames are independent, so the
    baseline trains and evaluates with the same tools as the LSTM-NADE.
    Initialisation (unstated in the seeds): weights U(-1/√H, 1/√H) for ``weight_in`` and U(-1/√N, 1/√N)
    for ``weight_out`` (PyTorch's linear-layer default for their fan-in), biases zero.
    """

    def __init__(self, notes: int, hidden_size: int, activation: str = "relu", dropout: float = 0.0):
        super().__init__()
        _check_activation(activation)
        if notes < 1 or hidden_size < 1:
            raise ValueError(f"notes and hidden_size must be positive, got {notes} and {hidden_size}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.notes, self.hidden_size, self.activation, self.dropout = notes, hidden_size, activation, dropout
        self.weight_in = nn.Parameter(torch.empty(hidden_size, notes))
        self.weight_out = nn.Parameter(torch.empty(notes, hidden_size))
        self.bias_hidden = nn.Parameter(torch.zeros(hidden_size))
        self.bias_out = nn.Parameter(torch.zeros(notes))
        with torch.no_grad():
            self.weight_in.uniform_(-hidden_size ** -0.5, hidden_size ** -0.5)
            self.weight_out.uniform_(-notes ** -0.5, notes ** -0.5)

    def logits(self, frames: Tensor, bias_hidden: Tensor | None = None, bias_out: Tensor | None = None) -> Tensor:
        """Conditional logits [..., N]; per-frame biases (eqs. 2.64-2.65) replace b_h / b_y when given."""
        bias_hidden = self.bias_hidden if bias_hidden is None else bias_hidden
        bias_out = self.bias_out if bias_out is None else bias_out
        mask = None
        if self.training and self.dropout > 0:
            keep = 1.0 - self.dropout
            mask = frames.new_empty(*frames.shape[:-1], self.hidden_size).bernoulli_(keep).div_(keep)
        return sparse_nade_logits(frames, self.weight_in, self.weight_out, bias_hidden, bias_out, self.activation, mask)

    def log_prob(self, frames: Tensor) -> Tensor:
        check_frames(frames, self.notes)
        return nade_log_prob(frames, self.logits(frames))

    def forward(self, frames: Tensor, state: None = None) -> tuple[Tensor, None]:
        return self.log_prob(frames), None

    def extra_repr(self) -> str:
        return (f"notes={self.notes}, hidden_size={self.hidden_size}, activation={self.activation}, "
                f"dropout={self.dropout}")
