"""Sparse dynamic evaluation (Krause §4.6): an H×H matrix M adapted in place of the weights, h'_t = h_t + M h_t
(eq. 4.8), on a recurrent layer's hidden units, or (an ablation) on the output features."""

from __future__ import annotations

import copy
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

from paperlib.models.layers import LSTMLayer, RLSTMLayer, stepwise_recurrence
from paperlib.models.lstm import LSTMState
from paperlib.models.mlstm import MLSTMLayer, mlstm_step


SPARSE_MODES = ("recurrent", "output")


def _check_sparse_mode(mode: str) -> None:
    if mode not in SPARSE_MODES:
        raise ValueError(f"unknown sparse_mode {mode!r}; valid: {', '.join(SPARSE_MODES)}")


def _unit_index(units: int | Sequence[int], width: int, what: str, like: Tensor) -> Tensor:
    """The adapted units as a LongTensor on ``like``'s device, checked against ``width``."""
    index = list(range(units)) if isinstance(units, int) else list(units)
    if not index or len(set(index)) != len(index) or min(index) < 0 or max(index) >= width:
        raise ValueError(f"units must name 1..{width} distinct {what} below {width}, got {units!r}")
    return torch.tensor(index, dtype=torch.long, device=like.device)


def _plus_m_h(h: Tensor, index: Tensor, m: Tensor) -> Tensor:
    """h + M h on the units ``index`` of ``h`` [..., n] (eq. 4.8); M [H, H], or [B, H, H] / [1, H, H] per batch row."""
    sub = h.index_select(-1, index)  # [..., H]
    if m.dim() == 2:
        return h.index_add(-1, index, sub @ m.transpose(0, 1))
    if sub.dim() == 2:  # one time step, [B, H]: row b uses M[b]
        return h.index_add(-1, index, (sub.unsqueeze(1) @ m.transpose(-1, -2)).squeeze(1))
    return h.index_add(-1, index, sub @ m.transpose(-1, -2))  # [B, T, H] @ [B, H, H]


class RecurrentSparseAdaptation(nn.Module):
    """A recurrent layer whose hidden state is transformed as h'_t = h_t + M h_t on ``units`` units (Krause eq. 4.8).

    Wraps an LSTM, RLSTM (either optionally mogrified) or mLSTM layer. As §4.6 specifies, h'_t "replaces h_t"
    in both directions it travels: it is the h_{t-1} of the cell's next step and the layer's output at t.
    M (``adaptation``, [H_s, H_s]) starts at zero, so the layer computes the wrapped layer's function; the
    time loop runs the cell one step at a time (:func:`~paperlib.models.layers.stepwise_recurrence` for the
    LSTM family, :func:`~paperlib.models.mlstm.mlstm_step` for the mLSTM) because M acts between steps.
    ``adaptation`` may be replaced (``torch.func.functional_call``) by a [B, H_s, H_s] tensor: one M per batch
    row, which is how :func:`dynamic_evaluate` batches independent streams.
    """

    def __init__(self, layer: nn.Module, units: int | Sequence[int]):
        super().__init__()
        if not isinstance(layer, (LSTMLayer, RLSTMLayer, MLSTMLayer)):
            raise ValueError("recurrent sparse adaptation is implemented for LSTM, RLSTM and mLSTM layers, got "
                             f"{type(layer).__name__}; sparse_mode='output' adapts the decoder input of any LM")
        like = next(layer.parameters())
        self.layer = layer
        self.hidden_size = layer.hidden_size
        self.register_buffer("index", _unit_index(units, layer.hidden_size, "hidden units", like), persistent=False)
        self.adaptation = nn.Parameter(like.new_zeros(self.index.numel(), self.index.numel()))

    def init_state(self, batch_size: int) -> LSTMState:
        return self.layer.init_state(batch_size)

    def forward(self, x: Tensor, state: LSTMState, state_mask: Tensor | None = None) -> tuple[Tensor, LSTMState]:
        layer, (h, c) = self.layer, state
        if isinstance(layer, MLSTMLayer):
            mx_all = F.linear(x, layer.weight_mx)  # [T, B, n]
            gx_all = F.linear(x, layer.weight_x, layer.bias)  # [T, B, 4n]

            def step(t: int, h: Tensor, c: Tensor) -> LSTMState:
                h_prev = h if state_mask is None else h * state_mask
                return mlstm_step(mx_all[t], gx_all[t], h_prev, c, layer.weight_mh, layer.weight_m,
                                  layer.capped_input_gate)
        else:
            def step(t: int, h: Tensor, c: Tensor) -> LSTMState:  # masks h_prev and mogrifies itself
                return stepwise_recurrence(layer, x[t : t + 1], (h, c), state_mask)[1]

        outputs = []
        for t in range(x.shape[0]):
            h, c = step(t, h, c)
            h = _plus_m_h(h, self.index, self.adaptation)  # h'_t feeds the next step and the output
            outputs.append(h)
        return torch.stack(outputs), (h, c)


def with_recurrent_adaptation(model: nn.Module, units: int | Sequence[int], layer: int = -1) -> tuple[nn.Module, str]:
    """A copy of the recurrent LM ``model`` with eq. (4.8) in its layer ``layer``; returns (copy, name of M).

    The last layer by default: §4.6 allows one layer or all of a stacked RNN, and the thesis' mLSTM had one.
    Dynamic evaluation of the copy with ``adapt=[name]`` is sparse dynamic evaluation with one M for all
    streams of a batch; ``dynamic_evaluate(model, ..., sparse_units=H)`` gives every stream its own M.
    """
    layers = getattr(model, "layers", None)
    if not isinstance(layers, nn.ModuleList) or not layers:
        raise ValueError("recurrent sparse adaptation needs a recurrent LM with `layers` (paperlib.models.RecurrentLM); "
                         "sparse_mode='output' adapts the decoder input of any LM")
    if not -len(layers) <= layer < len(layers):
        raise ValueError(f"layer must index one of the {len(layers)} layers, got {layer}")
    index = layer % len(layers)
    adapted = copy.deepcopy(model)
    adapted.layers[index] = RecurrentSparseAdaptation(adapted.layers[index], units)
    return adapted, f"layers.{index}.adaptation"


class DecoderInputAdaptation(nn.Module):
    """Ablation of eq. (4.8): h' = h + M h on ``units`` of the LM's final features, the output embedding's input.

    Departure from Krause §4.6: h' does not replace the recurrent state, so M changes the predictions but not
    the recurrent dynamics (the character-level experiment reports it beside :class:`RecurrentSparseAdaptation`
    as ``sparse_output``). Works for every LM with a Linear ``decoder``, Transformers included.
    ``forward(tokens [B, T], state, adaptation [B or 1, H, H])``: every batch row may have its own M.
    Without ``adaptation`` (or with M = 0) the wrapped model is unchanged.
    """

    def __init__(self, model: nn.Module, units: int | Sequence[int]):
        super().__init__()
        decoder = getattr(model, "decoder", None)
        if not isinstance(decoder, nn.Module) or not hasattr(decoder, "in_features"):
            raise ValueError("sparse_mode='output' needs an LM whose `decoder` is a Linear layer")
        self.model = model
        self.register_buffer("index", _unit_index(units, decoder.in_features, "feature indices", decoder.weight),
                             persistent=False)

    @property
    def units(self) -> int:
        return self.index.numel()

    def zeros(self, streams: int = 1) -> Tensor:
        """The initial adaptation matrix M = 0 for ``streams`` streams, [S, H, H]."""
        return self.model.decoder.weight.new_zeros(streams, self.units, self.units)

    def forward(self, tokens: Tensor, state: Any = None, adaptation: Tensor | None = None) -> tuple[Tensor, Any]:
        if adaptation is None:
            return self.model(tokens, state)

        def adapt(module: nn.Module, args: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
            return (_plus_m_h(args[0], self.index, adaptation),)  # features [B, T, D]

        handle = self.model.decoder.register_forward_pre_hook(adapt)
        try:
            return self.model(tokens, state)
        finally:
            handle.remove()


SparseCall = Callable[[Tensor, Tensor, Any], tuple[Tensor, Any]]


def sparse_adaptation(model: nn.Module, units: int | Sequence[int], mode: str = "recurrent") -> tuple[SparseCall, Tensor]:
    """Sparse dynamic evaluation's LM as ``(call(M, tokens, state) -> (logits, state), M = 0 [1, H, H])``.

    ``mode`` ``"recurrent"``: eq. (4.8) in the last recurrent layer (:func:`with_recurrent_adaptation`, a copy
    of ``model``); ``"output"``: the ablation on the decoder input (:class:`DecoderInputAdaptation`). M may be
    [S, H, H], one per batch row.
    """
    _check_sparse_mode(mode)
    if mode == "recurrent":
        adapted, name = with_recurrent_adaptation(model, units)
        zero = adapted.get_parameter(name).detach().unsqueeze(0)
        return (lambda m, tokens, state: functional_call(adapted, {name: m}, (tokens, state))), zero
    wrapper = DecoderInputAdaptation(model, units)
    return (lambda m, tokens, state: wrapper(tokens, state, m)), wrapper.zeros(1)
