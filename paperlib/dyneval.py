"""Dynamic evaluation: adapting a language model to the test sequence by gradient descent (Krause thesis ch. 4-6).

The test sequence x_{1:T} is cut into segments s_1, ..., s_M of ``segment_len`` tokens (eq. 4.2).
Segment s_i is scored with the current local weights θ_l^{i-1} (θ_l^0 = θ_g, the trained weights)
*before* the model is updated on it; the gradient ∇L(s_i) is backpropagated to the start of s_i only
(truncated BPTT with the hidden state carried across segments, Algorithm 1) and then one update rule
maps θ_l^{i-1} to θ_l^i (Figure 4.1). Every token is therefore predicted by weights that have only seen
the tokens before it, and the per-token losses form a valid log-probability of the sequence (§4.3).

Update rules (``rule``):

* ``sgd``: θ ← θ - η ∇L(s_i) + λ(θ_g - θ) (eq. 4.3; eq. 2.48, Mikolov's "traditional" dynamic
  evaluation, with ``segment_len=1`` and ``decay=0``); with ``momentum`` > 0 the gradient step is SGD
  with classical momentum (eqs. 5.10-5.11), the §5.4.1 baseline.
* ``global_rms``: θ ← θ - η ∇L(s_i) / (√MS_g + ε) + λ(θ_g - θ) ⊙ r, where MS_g are mean squared
  gradients over training batches (eq. 4.4, :func:`mean_squared_gradients`) and r = 1 (eq. 4.5) or,
  with ``rms_decay=True`` (the default), r = RMS_norm = √MS_g / avg(√MS_g) clipped at 1/λ
  (eqs. 4.6-4.7); avg is the mean over parameter tensors of each tensor's mean √MS_g, as in the
  author's released code (``rms_average="tensors"``), or over all adapted elements (``"elements"``).
* ``rmsprop`` and ``adam``: ``torch.optim.RMSprop`` / ``torch.optim.Adam`` on the local weights, the
  §5.4.2-5.4.3 baselines (Krause used PyTorch's implementations, whose ε sits outside the square root
  as in eq. 5.12 rather than inside as in eqs. 2.52/2.57). ``alpha`` is the averaging constant α of the
  squared gradients (β2) and ``momentum`` is μ (β1 for Adam). A decay prior λ may be added to any rule.
* ``nonlocal_rmsprop``: RMSprop whose running mean squared gradient is fed by a second, parallel model
  dynamically evaluated (with the same RMSprop step) on an independent ``statistics_tokens`` stream
  instead of by the evaluation sequence (§5.4.4.2, Table 5.7; :class:`NonLocalRMSpropRule`).

:func:`probe_updates` repeats the forward pass of probed time steps after their segment's update, and
:func:`related_words` compares the resulting change of log-probabilities of the words nearest to the
observed one in embedding space with the vocabulary's median (§5.3, Table 5.2).

Sparse dynamic evaluation (§4.6, ``sparse_units=H``) adapts only an H×H matrix M, initialised to zero,
acting on H of the hidden units of a recurrent layer as h'_t = h_t + M h_t (eq. 4.8); h'_t replaces h_t in
the next time step and in the layer's output (:class:`RecurrentSparseAdaptation`, by default on the last
layer of an LSTM, RLSTM, Mogrifier or mLSTM LM). The layer then runs its per-step autograd form instead of
its fused recurrence (the same function). ``sparse_mode="output"`` is an ablation that departs from
eq. (4.8): M acts on the final features only (the input of the output embedding,
:class:`DecoderInputAdaptation`), so it changes the predictions but not the recurrent dynamics; it works
for any LM with a ``decoder``, Transformers included.

Loss scale: L(s_i) is the *mean* cross-entropy over the tokens of s_i (the public implementation of the
thesis does the same); the scale only reparameterises η, and MS_g is computed with the same reduction
over each training batch, so a larger batch gives smaller MS_g, as §4.5 notes.

Beyond the seeds, many independent streams are dynamically evaluated at once, each with its own fast
weights: ``tokens`` of shape [S, T] are evaluated with ``torch.func.vmap`` over ``torch.func.grad`` of a
``functional_call`` of the model, with per-stream stacked weights, so one forward/backward serves all
streams. paperlib's LSTM and RLSTM layers use custom autograd Functions that functorch cannot transform;
during batched evaluation (only) a plain/capped LSTM layer runs a vmappable LSTM scan (``_LSTMScan``,
an autograd Function with ``setup_context`` whose backward takes the recurrent weight gradient in one
matmul) and other layers their per-step autograd references (``lstm_step``, ``rlstm_step``,
``Mogrifier``); all compute the same function. ``torch.nn.GRU`` has no batching rule, so GRU models are
correct but fall back to a per-stream loop inside vmap. Sparse dynamic evaluation batches natively without
vmap (the base weights are shared, every batch row multiplies its h by its own M). On a CPU, full-parameter batching is limited by the
memory traffic of S weight copies (``benchmarks/dyneval.py``); sparse batching scales.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import math
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap
from torch.utils._pytree import tree_flatten, tree_unflatten

from paperlib.data.batching import batchify, bptt_windows
from paperlib.models.layers import LSTMLayer, RLSTMLayer, stepwise_recurrence
from paperlib.models.lstm import LSTMState
from paperlib.models.mlstm import MLSTMLayer, mlstm_step
from paperlib.models.state import detach_state

RULES = ("sgd", "global_rms", "rmsprop", "adam", "nonlocal_rmsprop")
LN2 = math.log(2.0)

Params = dict[str, Tensor]
AdaptSpec = Sequence[str] | Callable[[str], bool] | None


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass
class DynamicEvalResult:
    """Per-token losses (nats) of one evaluation, ``losses`` [T-1] or [S, T-1], and the final weights/state.

    ``params`` are the local weights θ_l after the last update (for sparse evaluation: M) and ``state``
    the final recurrent state, so evaluation can be inspected or continued.
    """

    losses: Tensor
    params: Params = field(default_factory=dict)
    state: Any = None

    def mean_nll(self) -> float:
        return float(self.losses.double().mean())

    def perplexity(self) -> float:
        return math.exp(self.mean_nll())

    def bits_per_token(self) -> float:
        return self.mean_nll() / LN2

    def curve(self, bin_size: int = 1) -> Tensor:
        """Loss against position: averaged over streams, then over bins of ``bin_size`` positions."""
        losses = self.losses.double().reshape(-1, self.losses.shape[-1]).mean(0)  # [N]
        usable = losses.shape[0] // bin_size * bin_size
        return losses[:usable].view(-1, bin_size).mean(1)


# ---------------------------------------------------------------------------------------------
# Update rules
# ---------------------------------------------------------------------------------------------


RMS_AVERAGES = ("tensors", "elements")


def _check_rms_average(average: str) -> None:
    if average not in RMS_AVERAGES:
        raise ValueError(f"unknown rms_average {average!r}; valid: {', '.join(RMS_AVERAGES)}")


def rms_norm(ms_g: Mapping[str, Tensor], decay: float, average: str = "tensors") -> dict[str, Tensor]:
    """RMS_norm = √MS_g / avg(√MS_g) of Krause eq. (4.6), clipped at 1/λ (the text below eq. 4.6).

    The thesis says √MS_g is "divided by its mean, resulting in a normalized version of √MS_g with a mean of
    1", which leaves open what the mean runs over. ``average``:

    * ``"tensors"`` (default): the mean over parameter tensors of each tensor's mean √MS_g, every tensor
      weighted equally whatever its size. This is what the author's released script does
      (benkrause/dynamic-evaluation, ``dynamiceval.py``, gradient statistics: the per-tensor means of √MS
      averaged over the model's parameter tensors), and where the text is ambiguous the code decides. An
      older version of that script summed the per-tensor means instead of averaging them, which only
      rescales λ by the number of tensors (its ``--oldhyper`` option converts λ between the two).
    * ``"elements"``: the mean over all adapted elements, so large tensors dominate.

    With one tensor (sparse dynamic evaluation: M) both coincide.
    """
    if not 0.0 < decay <= 1.0:
        raise ValueError(f"decay must lie in (0, 1] for an RMS decay prior, got {decay}")
    _check_rms_average(average)
    if not ms_g:
        raise ValueError("ms_g holds no tensor")
    roots = {k: v.sqrt() for k, v in ms_g.items()}
    if average == "tensors":
        mean = sum(float(v.double().mean()) for v in roots.values()) / len(roots)
    else:
        mean = sum(float(v.double().sum()) for v in roots.values()) / sum(v.numel() for v in roots.values())
    return {k: (v / mean).clamp(max=1.0 / decay) for k, v in roots.items()}


class UpdateRule:
    """One dynamic-evaluation update θ_l^{i-1} → θ_l^i applied in place to the local weights.

    The decay prior pulls towards θ_g from the weights *before* the gradient step, as in eq. (4.3):
    θ^i = θ^{i-1} - (gradient step) + r ⊙ (θ_g - θ^{i-1}), computed as θ^{i-1} ⊙ (1 - r) + r ⊙ θ_g -
    (gradient step) with (1 - r) and r ⊙ θ_g precomputed, so an update is three in-place passes over the
    weights. The gradient steps of all rules depend on the gradient and the rule's state only, never on
    θ, so applying the pull first is exact.
    """

    def __init__(self, theta_g: Params, decay_rate: Mapping[str, Tensor | float] | None):
        self.theta_g = theta_g
        self.keep: dict[str, Tensor | float] | None = None
        self.anchor: Params | None = None
        if decay_rate is not None:
            self.keep = {k: 1.0 - r for k, r in decay_rate.items()}
            self.anchor = {k: theta_g[k] * r for k, r in decay_rate.items()}

    def step(self, params: Params, grads: Params) -> None:
        with torch.no_grad():
            if self.keep is not None:
                for k, p in params.items():
                    p.mul_(self.keep[k]).add_(self.anchor[k])
            self._gradient_step(params, grads)

    def _gradient_step(self, params: Params, grads: Params) -> None:
        raise NotImplementedError


class SGDRule(UpdateRule):
    """θ ← θ - η g (+ decay prior): eqs. (2.48) and (4.3)."""

    def __init__(self, theta_g: Params, lr: float, decay_rate):
        super().__init__(theta_g, decay_rate)
        self.lr = lr

    def _gradient_step(self, params: Params, grads: Params) -> None:
        for k, p in params.items():
            p.add_(grads[k], alpha=-self.lr)


class GlobalRMSRule(UpdateRule):
    """θ ← θ - η g / (√MS_g + ε) (+ decay prior, plain or RMS-scaled): eqs. (4.5) and (4.7)."""

    def __init__(self, theta_g: Params, lr: float, ms_g: Params, eps: float, decay_rate):
        super().__init__(theta_g, decay_rate)
        self.step_size = {k: lr / (v.sqrt() + eps) for k, v in ms_g.items()}  # η / (√MS_g + ε), fixed

    def _gradient_step(self, params: Params, grads: Params) -> None:
        for k, p in params.items():
            p.addcmul_(grads[k], self.step_size[k], value=-1.0)


class TorchOptimizerRule(UpdateRule):
    """A ``torch.optim`` optimizer on the local weights (SGD with momentum, RMSprop, Adam; §5.4)."""

    def __init__(self, theta_g: Params, optimizer: torch.optim.Optimizer, decay_rate):
        super().__init__(theta_g, decay_rate)
        self.optimizer = optimizer

    def _gradient_step(self, params: Params, grads: Params) -> None:
        for k, p in params.items():
            p.grad = grads[k]
        self.optimizer.step()
        for p in params.values():
            p.grad = None


class StatisticsStream:
    """The parallel model of non-local RMSprop: its own local weights and hidden state on its own stream.

    ``windows`` yields the (inputs, targets) segments of the statistics stream in step with the
    evaluation segments; :meth:`gradients` returns ∇L of the next one at the parallel weights, whose
    update is left to the rule that consumes the gradients.
    """

    def __init__(self, oracle: GradientOracle, params: Params, windows: Iterator[tuple[Tensor, Tensor]], state: Any):
        self.oracle = oracle
        self.params = params
        self.state = state
        self._windows = iter(windows)

    def gradients(self) -> Params:
        try:
            inputs, targets = next(self._windows)
        except StopIteration:
            raise ValueError("the statistics stream has fewer segments than the evaluation stream") from None
        grads, _, self.state = self.oracle(self.params, inputs, targets, self.state)
        return grads


class NonLocalRMSpropRule(UpdateRule):
    """RMSprop with mean squared gradients from an independent stream, Krause §5.4.4.2 ("non-local RMSprop").

    MS ← α MS + (1 - α) g'² and θ ← θ - η g / (√MS + ε) (eqs. 2.51 and 5.12, ε outside the root as in
    PyTorch), where g is the gradient of the evaluation segment and g' that of the same-position segment
    of the statistics stream under a second model run in parallel. The parallel model takes the RMSprop
    step with its own gradient and the same MS (and the same decay prior), so it is RMSprop dynamic
    evaluation of the statistics stream; the evaluation model only borrows its statistics. With the
    statistics stream equal to the evaluation stream both models coincide and the rule is RMSprop.
    The thesis does not say whether the parallel model adapts; here it does ("two versions of the model").
    """

    def __init__(self, theta_g: Params, lr: float, alpha: float, eps: float, decay_rate, statistics: StatisticsStream):
        super().__init__(theta_g, decay_rate)
        self.lr, self.alpha, self.eps = lr, alpha, eps
        self.statistics = statistics
        self.square_avg = {k: torch.zeros_like(v) for k, v in statistics.params.items()}

    def _gradient_step(self, params: Params, grads: Params) -> None:
        other = self.statistics.gradients()  # at the parallel weights before their update, like grads
        parallel = self.statistics.params
        if self.keep is not None:
            for k, p in parallel.items():
                p.mul_(self.keep[k]).add_(self.anchor[k])
        for k, p in params.items():
            ms = self.square_avg[k].mul_(self.alpha).addcmul_(other[k], other[k], value=1.0 - self.alpha)
            denom = ms.sqrt().add_(self.eps)  # the same operations as torch.optim.RMSprop
            p.addcdiv_(grads[k], denom, value=-self.lr)
            parallel[k].addcdiv_(other[k], denom, value=-self.lr)


def make_update_rule(
    rule: str,
    params: Params,
    theta_g: Params,
    *,
    lr: float,
    decay: float = 0.0,
    eps: float | None = None,
    momentum: float | None = None,
    alpha: float | None = None,
    ms_g: Mapping[str, Tensor] | None = None,
    rms_decay: bool = True,
    rms_average: str = "tensors",
    statistics: StatisticsStream | None = None,
) -> UpdateRule:
    """Build the update rule ``rule`` (one of :data:`RULES`) for the local weights ``params``.

    ``params`` may carry a leading stream dimension (batched evaluation); θ_g and MS_g broadcast.
    ``eps``, ``momentum`` and ``alpha`` default per rule: ε = 1e-5 for global RMS and PyTorch's 1e-8
    otherwise; μ = 0 for SGD and 0.9 (β1) for Adam; α = 0.99 for (non-local) RMSprop and 0.999 (β2) for
    Adam. ``rms_average`` is the avg of RMS_norm (eq. 4.6, :func:`rms_norm`) for ``global_rms`` with
    ``rms_decay``. ``statistics`` is the parallel model of ``nonlocal_rmsprop`` (built by :func:`dynamic_evaluate`
    from ``statistics_tokens``).
    """
    _check_rule_args(rule, lr, decay, eps, momentum, alpha, rms_decay, rms_average)
    keys = list(params)
    if (statistics is None) != (rule != "nonlocal_rmsprop"):
        raise ValueError("rule 'nonlocal_rmsprop' needs statistics (dynamic_evaluate: statistics_tokens), "
                         "and no other rule takes them")
    if rule == "global_rms":
        if ms_g is None:
            raise ValueError("rule 'global_rms' needs ms_g, the mean squared training gradients (eq. 4.4)")
        missing = sorted(set(keys) - set(ms_g))
        if missing:
            raise ValueError(f"ms_g lacks the adapted parameter(s) {missing}")
        ms_g = {k: ms_g[k].to(params[k].device, params[k].dtype) for k in keys}
        decay_rate = None
        if decay > 0:
            if rms_decay:
                decay_rate = {k: decay * r for k, r in rms_norm(ms_g, decay, rms_average).items()}
            else:
                decay_rate = dict.fromkeys(keys, decay)
        return GlobalRMSRule(theta_g, lr, ms_g, 1e-5 if eps is None else eps, decay_rate)
    decay_rate = dict.fromkeys(keys, decay) if decay > 0 else None
    if rule == "nonlocal_rmsprop":
        return NonLocalRMSpropRule(theta_g, lr, 0.99 if alpha is None else alpha, 1e-8 if eps is None else eps,
                                   decay_rate, statistics)
    leaves = list(params.values())
    if rule == "sgd":
        if not momentum:
            return SGDRule(theta_g, lr, decay_rate)
        return TorchOptimizerRule(theta_g, torch.optim.SGD(leaves, lr=lr, momentum=momentum), decay_rate)
    if rule == "rmsprop":
        optimizer = torch.optim.RMSprop(leaves, lr=lr, alpha=0.99 if alpha is None else alpha,
                                        eps=1e-8 if eps is None else eps, momentum=momentum or 0.0)
        return TorchOptimizerRule(theta_g, optimizer, decay_rate)
    optimizer = torch.optim.Adam(leaves, lr=lr, betas=(0.9 if momentum is None else momentum,
                                                       0.999 if alpha is None else alpha),
                                 eps=1e-8 if eps is None else eps)
    return TorchOptimizerRule(theta_g, optimizer, decay_rate)


def _check_rule_args(rule, lr, decay, eps, momentum, alpha, rms_decay, rms_average="tensors") -> None:
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; valid rules: {', '.join(RULES)}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr >= 0):
        raise ValueError(f"lr must be a finite number >= 0, got {lr!r}")
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"decay (λ) must lie in [0, 1], got {decay}")
    if eps is not None and not eps > 0:
        raise ValueError(f"eps must be positive, got {eps}")
    if momentum is not None and not 0.0 <= momentum < 1.0:
        raise ValueError(f"momentum (μ) must lie in [0, 1), got {momentum}")
    if momentum and rule in ("global_rms", "nonlocal_rmsprop"):
        raise ValueError(f"momentum applies to rules 'sgd', 'rmsprop' and 'adam', not {rule!r}")
    if alpha is not None and (rule not in ("rmsprop", "adam", "nonlocal_rmsprop") or not 0.0 < alpha < 1.0):
        raise ValueError(f"alpha (α) applies to rules 'rmsprop', 'nonlocal_rmsprop' and 'adam' and must lie in (0, 1), "
                         f"got {alpha}")
    if not rms_decay and rule != "global_rms":
        raise ValueError("rms_decay=False only applies to rule 'global_rms'")
    _check_rms_average(rms_average)


# ---------------------------------------------------------------------------------------------
# Sparse dynamic evaluation (§4.6)
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Gradients of one segment: direct (one stream, or sparse M per stream) and vmapped (fast weights per stream)
# ---------------------------------------------------------------------------------------------

GradientOracle = Callable[[Params, Tensor, Tensor, Any], tuple[Params, Tensor, Any]]


def _token_losses(logits: Tensor, targets: Tensor) -> Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none").view(targets.shape)


def _direct_oracle(call: Callable[[Params, Tensor, Any], tuple[Tensor, Any]], per_stream: bool) -> GradientOracle:
    """Gradients of Σ_s mean_t L[s, t] (``per_stream``, each row its own weights) or of mean L (shared weights)."""

    def oracle(params: Params, inputs: Tensor, targets: Tensor, state: Any) -> tuple[Params, Tensor, Any]:
        leaves = {k: v.detach().requires_grad_() for k, v in params.items()}
        with torch.enable_grad():
            logits, new_state = call(leaves, inputs, state)
            losses = _token_losses(logits, targets)  # [S, n]
            loss = losses.mean(1).sum() if per_stream else losses.mean()
            grads = torch.autograd.grad(loss, list(leaves.values()))
        return dict(zip(leaves, grads)), losses.detach(), detach_state(new_state)

    return oracle


class _StateCodec:
    """Splits a model state into tensor leaves (batched by vmap) and static leaves (ints, None)."""

    def __init__(self, state: Any):
        self.leaves, self.spec = tree_flatten(state)
        self.tensor_at = [i for i, leaf in enumerate(self.leaves) if isinstance(leaf, Tensor)]

    def pack(self, state: Any) -> list[Tensor]:
        self.leaves, self.spec = tree_flatten(state)  # static leaves (e.g. a position offset) may change
        self.tensor_at = [i for i, leaf in enumerate(self.leaves) if isinstance(leaf, Tensor)]
        return [self.leaves[i] for i in self.tensor_at]

    def unpack(self, tensors: Sequence[Tensor]) -> Any:
        leaves = list(self.leaves)
        for i, t in zip(self.tensor_at, tensors):
            leaves[i] = t
        return tree_unflatten(leaves, self.spec)


class _LSTMScan(torch.autograd.Function):
    """The LSTM time loop of eq. (2.1) (optionally capped) with a one-matmul recurrent weight gradient.

    Written without in-place updates and with ``setup_context``, so functorch can vmap it (the fused
    :class:`~paperlib.models.lstm.LSTMRecurrence` cannot be transformed). Inputs: ``gx`` [T, B, 4n] =
    x W^x + b, ``weight_hh`` [4n, n], ``h0``/``c0`` [B, n]. Outputs h_0..h_T and c_0..c_T ([T+1, B, n])
    and the gate activations [T, B, 4n] (kept for the backward pass).
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(gx: Tensor, weight_hh: Tensor, h0: Tensor, c0: Tensor, capped: bool):  # type: ignore[override]
        n = h0.shape[-1]
        hs, cs, acts = [h0], [c0], []
        for g_t in gx:
            pre = g_t + hs[-1] @ weight_hh.transpose(0, 1)  # [B, 4n]
            i, f = torch.sigmoid(pre[..., :n]), torch.sigmoid(pre[..., n : 2 * n])
            j, o = torch.tanh(pre[..., 2 * n : 3 * n]), torch.sigmoid(pre[..., 3 * n :])
            i_eff = torch.minimum(i, 1.0 - f) if capped else i
            cs.append(f * cs[-1] + i_eff * j)
            hs.append(o * torch.tanh(cs[-1]))
            acts.append(torch.cat([i, f, j, o], dim=-1))
        return torch.stack(hs), torch.stack(cs), torch.stack(acts)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        _, weight_hh, _, _, capped = inputs
        hs, cs, acts = output
        ctx.capped = capped
        ctx.save_for_backward(weight_hh, hs, cs, acts)
        ctx.mark_non_differentiable(acts)

    @staticmethod
    def backward(ctx, d_hs: Tensor, d_cs: Tensor, _d_acts: Tensor):  # type: ignore[override]
        weight_hh, hs, cs, acts = ctx.saved_tensors
        n = hs.shape[-1]
        dh, dc = torch.zeros_like(hs[0]), torch.zeros_like(cs[0])
        d_pre = []
        for t in reversed(range(acts.shape[0])):
            i, f, j, o = acts[t, ..., :n], acts[t, ..., n : 2 * n], acts[t, ..., 2 * n : 3 * n], acts[t, ..., 3 * n :]
            dh = dh + d_hs[t + 1]
            tanh_c = torch.tanh(cs[t + 1])
            dc = dc + d_cs[t + 1] + dh * o * (1.0 - tanh_c * tanh_c)
            d_update = dc * j  # gradient w.r.t. the (possibly capped) input gate
            df = dc * cs[t]
            if ctx.capped:
                routed = i <= 1.0 - f  # the min passes its gradient to i or to 1 - f
                di = torch.where(routed, d_update, torch.zeros_like(d_update))
                df = df - (d_update - di)
                i_eff = torch.minimum(i, 1.0 - f)
            else:
                di, i_eff = d_update, i
            step = torch.cat([di * i * (1 - i), df * f * (1 - f), dc * i_eff * (1 - j * j), dh * tanh_c * o * (1 - o)], -1)
            d_pre.append(step)
            dh = step @ weight_hh  # [B, n]
            dc = dc * f
        d_gx = torch.stack(d_pre[::-1])  # [T, B, 4n]
        d_weight = d_gx.flatten(0, -2).transpose(0, 1) @ hs[:-1].flatten(0, -2)  # one matmul over all steps
        return d_gx, d_weight, dh + d_hs[0], dc + d_cs[0], None


def _reference_recurrent_forward(layer: nn.Module, x: Tensor, state, state_mask: Tensor | None = None):
    """Functorch-transformable form of an LSTM/RLSTM layer (same function as its fused recurrence).

    A plain or capped LSTM without state mask or Mogrifier runs :class:`_LSTMScan`; otherwise the layer
    runs per step: mask h_prev, mogrify (eq. 2.2), cell (eq. 2.1 or Melis §4.1).
    """
    h, c = state
    mogrified = layer.mogrifier is not None and layer.mogrifier.rounds > 0
    if isinstance(layer, LSTMLayer) and not mogrified and state_mask is None:
        rnn = layer.rnn
        gx = F.linear(x, rnn.weight_ih_l0, rnn.bias_ih_l0 + rnn.bias_hh_l0)  # [T, B, 4n]
        hs, cs, _ = _LSTMScan.apply(gx, rnn.weight_hh_l0, h, c, layer.capped_input_gate)
        return hs[1:], (hs[-1], cs[-1])
    return stepwise_recurrence(layer, x, (h, c), state_mask)


@contextlib.contextmanager
def functorch_compatible(model: nn.Module) -> Iterator[nn.Module]:
    """Temporarily run LSTM/RLSTM layers through functorch-transformable code computing the same function.

    The fused recurrences are ``torch.autograd.Function`` s with hand-written backward passes and in-place
    kernels, which ``torch.func`` transforms cannot see through. Under this context a plain or capped LSTM
    layer runs :class:`_LSTMScan` and any other LSTM/RLSTM layer its per-step autograd reference.
    """
    patched = []
    try:
        for module in model.modules():
            if isinstance(module, (LSTMLayer, RLSTMLayer)) and "forward" not in vars(module):
                module.forward = types.MethodType(_reference_recurrent_forward, module)
                patched.append(module)
        yield model
    finally:
        for module in patched:
            del module.forward


def _vmap_oracle(model: nn.Module, frozen: Params, codec: _StateCodec) -> GradientOracle:
    """Per-stream gradients with per-stream fast weights: vmap over grad of one stream's mean segment loss."""

    def one_stream(params: Params, inputs: Tensor, targets: Tensor, state_tensors: list[Tensor]):
        state = codec.unpack(state_tensors)  # leaves [1, ...]: one stream is a batch of one
        logits, new_state = functional_call(model, {**frozen, **params}, (inputs.unsqueeze(0), state))
        losses = _token_losses(logits[0], targets)  # [n]
        return losses.mean(), (losses.detach(), codec.pack(detach_state(new_state)))

    batched = vmap(grad(one_stream, has_aux=True))

    def oracle(params: Params, inputs: Tensor, targets: Tensor, state: list[Tensor]):
        with functorch_compatible(model):
            grads, (losses, new_state) = batched(params, inputs, targets, state)
        return grads, losses, new_state

    return oracle


# ---------------------------------------------------------------------------------------------
# Dynamic and static evaluation
# ---------------------------------------------------------------------------------------------


def adapted_parameters(model: nn.Module, adapt: AdaptSpec = None) -> list[str]:
    """Names of the parameters dynamic evaluation adapts: all trainable ones, a list, or a predicate's choice.

    Tied weights appear once (under their first name), as in ``model.named_parameters()``.
    """
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    if adapt is None:
        return names
    if callable(adapt):
        chosen = [n for n in names if adapt(n)]
    else:
        unknown = sorted(set(adapt) - set(names))
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown}; valid names: {', '.join(names)}")
        chosen = [n for n in names if n in set(adapt)]
    if not chosen:
        raise ValueError("adapt selects no parameter")
    return chosen


@contextlib.contextmanager
def _eval_mode(model: nn.Module) -> Iterator[None]:
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def _as_streams(tokens: Tensor) -> Tensor:
    if tokens.dim() not in (1, 2) or tokens.shape[-1] < 2:
        raise ValueError(f"tokens must be [T] or [S, T] with T >= 2, got shape {tuple(tokens.shape)}")
    return tokens.unsqueeze(0) if tokens.dim() == 1 else tokens


def dynamic_evaluate(
    model: nn.Module,
    tokens: Tensor,
    *,
    lr: float,
    rule: str = "global_rms",
    decay: float = 0.0,
    eps: float | None = None,
    segment_len: int = 5,
    rms_decay: bool = True,
    rms_average: str = "tensors",
    momentum: float | None = None,
    alpha: float | None = None,
    ms_g: Mapping[str, Tensor] | None = None,
    adapt: AdaptSpec = None,
    sparse_units: int | Sequence[int] | None = None,
    sparse_mode: str = "recurrent",
    state: Any = None,
    batched: bool = True,
    callback: Callable[[int, Params, Params], None] | None = None,
    statistics_tokens: Tensor | None = None,
) -> DynamicEvalResult:
    """Dynamically evaluate ``model`` on ``tokens`` [T] (one stream) or [S, T] (independent streams).

    Returns the per-token losses of predicting tokens[..., 1:], each scored before the update on its
    segment (§4.3). The rule's hyperparameters are described in :func:`make_update_rule`; ``ms_g`` comes
    from :func:`mean_squared_gradients` with the same ``adapt`` / ``sparse_units`` / ``sparse_mode``. ``adapt``
    restricts the adapted parameters (Krause ch. 6 adapts only part of GPT-2). ``sparse_units`` (a count H or
    a list of unit indices) adapts only M of eq. (4.8) instead, inside the last recurrent layer
    (``sparse_mode="recurrent"``) or, as an ablation, on the decoder input (``"output"``); see
    :func:`sparse_adaptation`. ``state`` is the initial recurrent
    state (batch S), None for the model's zero state. With S > 1 every stream has its own fast weights and
    hidden state; ``batched=True`` evaluates them together (vmap), ``batched=False`` one after the other.
    ``callback(i, params, grads)`` is called after the i-th update (for inspection).
    ``statistics_tokens`` (same shape as ``tokens``, rule ``nonlocal_rmsprop`` only) is the independent
    stream that a parallel model, starting from the same weights and initial state, reads segment by
    segment to supply RMSprop's mean squared gradients (§5.4.4.2).
    """
    streams = _as_streams(tokens)
    if not isinstance(segment_len, int) or segment_len < 1:
        raise ValueError(f"segment_len must be a positive integer, got {segment_len!r}")
    _check_rule_args(rule, lr, decay, eps, momentum, alpha, rms_decay, rms_average)
    _check_sparse_mode(sparse_mode)
    other = _statistics_streams(rule, streams, statistics_tokens)
    count = streams.shape[0]
    hyper = dict(rule=rule, lr=lr, decay=decay, eps=eps, momentum=momentum, alpha=alpha, ms_g=ms_g, rms_decay=rms_decay,
                 rms_average=rms_average)

    def parallel(oracle: GradientOracle, params: Params, start: Any) -> StatisticsStream | None:
        if other is None:
            return None
        return StatisticsStream(oracle, {k: v.clone() for k, v in params.items()}, bptt_windows(other, segment_len), start)

    with _eval_mode(model):
        if count > 1 and not batched:
            kwargs = dict(hyper, segment_len=segment_len, sparse_units=sparse_units, sparse_mode=sparse_mode, adapt=adapt)
            return _one_by_one(model, streams, state, kwargs, callback, other)
        if sparse_units is not None:
            if adapt is not None:
                raise ValueError("sparse dynamic evaluation adapts only M; do not combine it with adapt")
            call, zero = sparse_adaptation(model, sparse_units, sparse_mode)
            params = {"adaptation": zero.repeat(count, 1, 1)}  # [S, H, H], every stream its own M
            theta_g = {"adaptation": zero}
            oracle = _direct_oracle(lambda p, x, s: call(p["adaptation"], x, s), per_stream=True)
            result = _run(oracle, params, theta_g, hyper, streams, segment_len, state, callback,
                          parallel(oracle, params, state))
        else:
            names = adapted_parameters(model, adapt)
            named = dict(model.named_parameters())
            theta_g = {n: named[n].detach() for n in names}
            frozen = {n: p.detach() for n, p in named.items() if n not in theta_g}
            if count == 1:
                params = {n: p.clone() for n, p in theta_g.items()}
                call = lambda p, x, s: functional_call(model, {**frozen, **p}, (x, s))  # noqa: E731
                oracle = _direct_oracle(call, per_stream=True)
                result = _run(oracle, params, theta_g, hyper, streams, segment_len, state, callback,
                              parallel(oracle, params, state))
            else:
                params = {n: p.unsqueeze(0).repeat(count, *([1] * p.dim())) for n, p in theta_g.items()}  # [S, ...]
                start = state if state is not None else model.init_state(count)
                codec = _StateCodec(start)
                packed = [t.unsqueeze(1) for t in codec.pack(start)]  # [S, 1, ...]: one batch row per stream
                # the parallel model gets its own codec: static state leaves (e.g. positions) are per model
                statistics = None
                if other is not None:
                    codec_other = _StateCodec(start)
                    statistics = parallel(_vmap_oracle(model, frozen, codec_other), params,
                                          [t.unsqueeze(1) for t in codec_other.pack(start)])
                result = _run(_vmap_oracle(model, frozen, codec), params, theta_g, hyper, streams, segment_len,
                              packed, callback, statistics)
                result.state = codec.unpack([t.squeeze(1) for t in result.state])
    if tokens.dim() == 1:
        result.losses = result.losses[0]
    return result


def _statistics_streams(rule: str, streams: Tensor, statistics_tokens: Tensor | None) -> Tensor | None:
    """The statistics streams of non-local RMSprop as [S, T], checked against the evaluation streams."""
    if (statistics_tokens is None) != (rule != "nonlocal_rmsprop"):
        raise ValueError("statistics_tokens are required by rule 'nonlocal_rmsprop' and only used by it")
    if statistics_tokens is None:
        return None
    other = _as_streams(statistics_tokens).to(streams.device)
    if other.shape != streams.shape:
        raise ValueError(f"statistics_tokens must have the shape of tokens {tuple(streams.shape)}, "
                         f"got {tuple(other.shape)}")
    return other


def _run(oracle: GradientOracle, params: Params, theta_g: Params, hyper: dict, streams: Tensor, segment_len: int,
         state: Any, callback, statistics: StatisticsStream | None = None) -> DynamicEvalResult:
    """Algorithm 1 with an update rule: score a segment, take its gradient, update, carry the state on."""
    hyper = dict(hyper)
    rule = make_update_rule(hyper.pop("rule"), params, theta_g, statistics=statistics, **hyper)
    losses = []
    for index, (inputs, targets) in enumerate(bptt_windows(streams, segment_len)):
        grads, segment_losses, state = oracle(params, inputs, targets, state)
        losses.append(segment_losses)
        rule.step(params, grads)
        if callback is not None:
            callback(index, params, grads)
    return DynamicEvalResult(torch.cat(losses, 1), params, state)


def _one_by_one(model: nn.Module, streams: Tensor, state: Any, kwargs: dict, callback,
                statistics_tokens: Tensor | None = None) -> DynamicEvalResult:
    """Evaluate S streams sequentially, each from θ_g with its own state; results stacked as if batched."""
    results = []
    for s in range(streams.shape[0]):
        row_state = None if state is None else _select_row(state, s)
        other = None if statistics_tokens is None else statistics_tokens[s]
        results.append(dynamic_evaluate(model, streams[s], state=row_state, callback=callback,
                                        statistics_tokens=other, **kwargs))
    params = {k: torch.cat([r.params[k] if k == "adaptation" else r.params[k].unsqueeze(0) for r in results])
              for k in results[0].params}
    return DynamicEvalResult(torch.stack([r.losses for r in results]), params, [r.state for r in results])


def _select_row(state: Any, row: int) -> Any:
    leaves, spec = tree_flatten(state)
    return tree_unflatten([leaf[row : row + 1] if isinstance(leaf, Tensor) else leaf for leaf in leaves], spec)


@torch.no_grad()
def static_evaluate(model: nn.Module, tokens: Tensor, *, segment_len: int = 70, state: Any = None) -> DynamicEvalResult:
    """Per-token losses of the fixed model (deterministic dropout), state carried across segments."""
    streams = _as_streams(tokens)
    losses = []
    with _eval_mode(model):
        for inputs, targets in bptt_windows(streams, segment_len):
            logits, state = model(inputs, state)
            losses.append(_token_losses(logits, targets))
    out = torch.cat(losses, 1)
    return DynamicEvalResult(out[0] if tokens.dim() == 1 else out, {}, state)


# ---------------------------------------------------------------------------------------------
# What one update does to the other words' probabilities (Krause §5.3, Table 5.2)
# ---------------------------------------------------------------------------------------------


@dataclass
class UpdateProbe:
    """Log-probabilities over the vocabulary at probed time steps, before and after their segment's update.

    ``positions`` index the probed target tokens in the sequence; ``before``/``after`` [P, V] are
    log p(x_position = v | x_<position) under the local weights before and after the dynamic-evaluation
    update on the segment containing the position, from the same recurrent state at the segment start.
    """

    positions: list[int]
    before: Tensor
    after: Tensor

    @property
    def delta(self) -> Tensor:
        """Δ log p = log p_after - log p_before, [P, V]."""
        return self.after - self.before


def probe_updates(
    model: nn.Module,
    tokens: Tensor,
    positions: Sequence[int],
    *,
    lr: float,
    rule: str = "global_rms",
    decay: float = 0.0,
    eps: float | None = None,
    segment_len: int = 5,
    rms_decay: bool = True,
    rms_average: str = "tensors",
    momentum: float | None = None,
    alpha: float | None = None,
    ms_g: Mapping[str, Tensor] | None = None,
    adapt: AdaptSpec = None,
) -> UpdateProbe:
    """Dynamic evaluation of one stream ``tokens`` [T] with a second forward pass after probed updates (§5.3).

    Runs exactly the evaluation of :func:`dynamic_evaluate` (same arguments) up to the segment of the last
    probed position; for every probed position t the output distribution at its time step is computed with
    the weights before (as scored) and after the update on its segment, from the state at the segment start,
    which "simulates the model seeing the exact same context twice" (Table 5.2).
    """
    if tokens.dim() != 1:
        raise ValueError(f"tokens must be one stream [T], got shape {tuple(tokens.shape)}")
    if not positions or any(not 1 <= p < tokens.numel() for p in positions):
        raise ValueError(f"positions must be a non-empty list of target indices in [1, {tokens.numel() - 1}], got {positions}")
    if not isinstance(segment_len, int) or segment_len < 1:
        raise ValueError(f"segment_len must be a positive integer, got {segment_len!r}")
    _check_rule_args(rule, lr, decay, eps, momentum, alpha, rms_decay, rms_average)
    order = sorted(set(positions))
    wanted: dict[int, list[int]] = {}  # segment index -> time steps inside the segment
    for p in order:
        wanted.setdefault((p - 1) // segment_len, []).append((p - 1) % segment_len)
    stop = min(tokens.numel(), (max(wanted) + 1) * segment_len + 1)  # nothing after the last probed segment
    hyper = dict(rule=rule, lr=lr, decay=decay, eps=eps, momentum=momentum, alpha=alpha, ms_g=ms_g, rms_decay=rms_decay,
                 rms_average=rms_average)
    before: list[Tensor] = []
    after: list[Tensor] = []
    pending: dict[int, tuple[Tensor, Any]] = {}
    calls = itertools.count()

    with _eval_mode(model):
        names = adapted_parameters(model, adapt)
        named = dict(model.named_parameters())
        theta_g = {n: named[n].detach() for n in names}
        frozen = {n: p.detach() for n, p in named.items() if n not in theta_g}
        params = {n: p.clone() for n, p in theta_g.items()}

        def log_probs(weights: Params, inputs: Tensor, state: Any, steps: list[int]) -> Tensor:
            with torch.no_grad():
                logits, _ = functional_call(model, {**frozen, **weights}, (inputs, state))
            return torch.log_softmax(logits[0, steps].double(), dim=-1)  # [len(steps), V]

        scored = _direct_oracle(lambda p, x, s: functional_call(model, {**frozen, **p}, (x, s)), per_stream=True)

        def oracle(weights: Params, inputs: Tensor, targets: Tensor, state: Any):
            index = next(calls)
            if index in wanted:
                pending[index] = (inputs, state)
                before.append(log_probs(weights, inputs, state, wanted[index]))
            return scored(weights, inputs, targets, state)

        def probe(index: int, weights: Params, _grads: Params) -> None:
            if index in pending:
                inputs, state = pending.pop(index)
                after.append(log_probs(weights, inputs, state, wanted[index]))

        _run(oracle, params, theta_g, hyper, tokens[:stop].unsqueeze(0), segment_len, None, probe)
    return UpdateProbe(order, torch.cat(before), torch.cat(after))


def related_words(embedding: Tensor, target: int, delta: Tensor, top: int = 10) -> dict[str, Any]:
    """Table 5.2 for one update: Δ log p of the target and of its ``top`` nearest words by embedding cosine.

    ``embedding`` [V, D] are the (output) word embeddings, ``delta`` [V] the change of log-probabilities.
    Rows are the target (cosine 1) and then the ``top`` other words in decreasing cosine; ``median`` holds
    the medians of cosine and Δ log p over the whole vocabulary (the table's bottom line), and
    ``spearman`` the rank correlation of cosine and Δ log p over the vocabulary (eq. 5.8 predicts > 0).
    """
    vocab = embedding.shape[0]
    if delta.shape != (vocab,) or not 0 <= target < vocab or not 1 <= top < vocab:
        raise ValueError(f"need delta [{vocab}], 0 <= target < {vocab} and 1 <= top < {vocab}; "
                         f"got delta {tuple(delta.shape)}, target {target}, top {top}")
    emb = embedding.detach().double()
    cosine = F.cosine_similarity(emb, emb[target].unsqueeze(0), dim=-1)  # [V]
    others = cosine.clone()
    others[target] = -math.inf
    nearest = others.argsort(descending=True, stable=True)[:top]
    delta = delta.detach().double()
    rows = [{"id": int(i), "cosine": float(cosine[i]), "delta": float(delta[i])} for i in [target, *nearest.tolist()]]
    median_delta = float(delta.quantile(0.5))
    top_deltas = delta[nearest]
    return {"rows": rows, "median": {"cosine": float(cosine.quantile(0.5)), "delta": median_delta},
            "top_mean_delta": float(top_deltas.mean()), "top_above_median": int((top_deltas > median_delta).sum()),
            "spearman": _spearman(cosine, delta)}


def _spearman(x: Tensor, y: Tensor) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(x.cpu().numpy(), y.cpu().numpy()).statistic)


def mean_squared_gradients(
    model: nn.Module,
    train_tokens: Tensor,
    *,
    batch_size: int,
    bptt: int,
    max_batches: int | None = None,
    adapt: AdaptSpec = None,
    sparse_units: int | Sequence[int] | None = None,
    sparse_mode: str = "recurrent",
) -> Params:
    """MS_g = (1/N_b) Σ_k (∇L_k)², eq. (4.4), over N_b training batches of ``batch_size`` × ``bptt`` tokens.

    The gradient of each batch is that of its mean cross-entropy, in eval mode (no dropout), with the
    hidden state carried across batches as in training; ``max_batches`` limits N_b (§5.4.4.1 finds 1%
    of PTB enough). With ``sparse_units`` the statistics are those of M (key ``"adaptation"``) at M = 0, for
    sparse dynamic evaluation with the same ``sparse_units`` and ``sparse_mode``.
    """
    if train_tokens.dim() != 1:
        raise ValueError(f"train_tokens must be a 1-d id stream, got shape {tuple(train_tokens.shape)}")
    if max_batches is not None and max_batches < 1:
        raise ValueError(f"max_batches must be >= 1 or None, got {max_batches}")
    _check_sparse_mode(sparse_mode)
    stream = batchify(train_tokens, batch_size)  # [B, N]
    with _eval_mode(model):
        if sparse_units is not None:
            call, zero = sparse_adaptation(model, sparse_units, sparse_mode)
            params = {"adaptation": zero}  # one M for the whole batch, [1, H, H]
            oracle = _direct_oracle(lambda p, x, s: call(p["adaptation"], x, s), per_stream=False)
        else:
            names = adapted_parameters(model, adapt)
            named = dict(model.named_parameters())
            params = {n: named[n].detach() for n in names}
            frozen = {n: p.detach() for n, p in named.items() if n not in params}
            oracle = _direct_oracle(lambda p, x, s: functional_call(model, {**frozen, **p}, (x, s)), per_stream=False)
        total = {k: torch.zeros_like(v) for k, v in params.items()}
        state, batches = None, 0
        for inputs, targets in bptt_windows(stream, bptt):
            if max_batches is not None and batches >= max_batches:
                break
            grads, _, state = oracle(params, inputs, targets, state)
            for k, g in grads.items():
                total[k].addcmul_(g, g)
            batches += 1
    return {k: v / batches for k, v in total.items()}


# ---------------------------------------------------------------------------------------------
# Hyperparameter tuning on validation data (Krause §4.5, Melis Table 2.6)
# ---------------------------------------------------------------------------------------------

TUNABLE = ("lr", "decay", "eps", "segment_len", "momentum", "alpha")


@dataclass
class TuningResult:
    """Best setting, its mean validation NLL (nats/token) and every trial."""

    best: dict[str, Any]
    nll: float
    trials: list[dict[str, Any]] = field(default_factory=list)


def finite_nll(result: DynamicEvalResult) -> float:
    """The mean NLL of ``result``, +inf when it is not finite (a diverged run loses every comparison)."""
    nll = result.mean_nll()
    return nll if math.isfinite(nll) else math.inf


def tune_dynamic_evaluation(
    model: nn.Module,
    tokens: Tensor,
    *,
    grid: Mapping[str, Sequence[Any]] | None = None,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    search: str = "grid",
    n_trials: int = 20,
    seed: int = 0,
    **fixed: Any,
) -> TuningResult:
    """Tune dynamic evaluation by mean NLL on validation ``tokens``; ``fixed`` goes to :func:`dynamic_evaluate`.

    ``search``:

    * ``grid``: every combination of ``grid`` (e.g. ``{"lr": [...], "decay": [...]}``);
    * ``coordinate``: one pass over the keys of ``grid`` in order, trying each value of one key with the
      others at their best so far (starting from each list's first value); the thesis found the learning
      rate by far the most important, so it should come first;
    * ``optuna``: ``n_trials`` TPE trials over ``ranges`` ``{name: (low, high)}``, log-uniform for floats as
      in Melis Table 2.6 and uniform for ``segment_len``.
    """
    searches = ("grid", "coordinate", "optuna")
    if search not in searches:
        raise ValueError(f"unknown search {search!r}; valid searches: {', '.join(searches)}")
    space = ranges if search == "optuna" else grid
    if not space:
        raise ValueError(f"search {search!r} needs {'ranges' if search == 'optuna' else 'grid'}")
    unknown = sorted(set(space) - set(TUNABLE))
    if unknown:
        raise ValueError(f"cannot tune {unknown}; tunable: {', '.join(TUNABLE)}")
    trials: list[dict[str, Any]] = []

    def evaluate(point: dict[str, Any]) -> float:
        nll = finite_nll(dynamic_evaluate(model, tokens, **{**fixed, **point}))
        trials.append({**point, "nll": nll})
        return nll

    if search == "grid":
        keys = list(space)
        for values in itertools.product(*(space[k] for k in keys)):
            evaluate(dict(zip(keys, values)))
    elif search == "coordinate":
        current = {k: v[0] for k, v in space.items()}
        best_nll = math.inf
        for key, values in space.items():
            for value in values:
                point = {**current, key: value}
                if any(point == {k: t[k] for k in point} for t in trials):
                    continue
                nll = evaluate(point)
                if nll < best_nll:
                    best_nll, current = nll, point
    else:
        import optuna

        def objective(trial: optuna.Trial) -> float:
            point = {}
            for key, (low, high) in space.items():
                if key == "segment_len":
                    point[key] = trial.suggest_int(key, int(low), int(high))
                else:
                    point[key] = trial.suggest_float(key, low, high, log=low > 0)
            return evaluate(point)

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
        study.optimize(objective, n_trials=n_trials)
    best = min(trials, key=lambda t: t["nll"])
    return TuningResult({k: v for k, v in best.items() if k != "nll"}, best["nll"], trials)


def learning_rate_sweep(
    evaluate: Callable[[float], float], start: float, factor: float = 1.2, max_evals: int = 30
) -> tuple[float, float, list[dict[str, float]]]:
    """Krause §5.4.1-5.4.2: raise η from ``start`` by ``factor`` until the validation loss stops improving.

    If the first raise is already worse than ``start`` (a start above the optimum), the sweep goes down
    by the same factor instead. Returns (best η, its loss, all trials in evaluation order).
    """
    if not start > 0 or not factor > 1 or max_evals < 2:
        raise ValueError(f"need start > 0, factor > 1 and max_evals >= 2, got {start}, {factor}, {max_evals}")
    trials: list[dict[str, float]] = []

    def run(lr: float) -> float:
        loss = evaluate(lr)
        loss = loss if math.isfinite(loss) else math.inf
        trials.append({"lr": lr, "nll": loss})
        return loss

    best_lr, best_loss = start, run(start)
    for direction in (factor, 1.0 / factor):
        lr, moved = best_lr * direction, False
        while len(trials) < max_evals:
            loss = run(lr)
            if loss >= best_loss:
                break
            best_lr, best_loss, moved = lr, loss, True
            lr *= direction
        if moved or len(trials) >= max_evals:
            break
    return best_lr, best_loss, trials
