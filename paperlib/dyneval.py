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

from paperlib.config import register_experiment
from paperlib.data.batching import batchify, bptt_windows, num_windows
from paperlib.device import load_checkpoint, setup_stage
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


def _safe_nll(result: DynamicEvalResult) -> float:
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
        nll = _safe_nll(dynamic_evaluate(model, tokens, **{**fixed, **point}))
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


# ---------------------------------------------------------------------------------------------
# Experiment: Krause Tables 4.1/4.2, 5.1-5.7 and Figure 5.1 at small scale
# ---------------------------------------------------------------------------------------------

# Perplexities (valid, test) of the AWD-LSTM rows of Krause Table 4.1 (PTB, 24M) and Table 4.2
# (WikiText-2, 33M); the neural cache row is AWD-LSTM + neural cache (Merity et al., 2018b) from the
# same tables. Sparse dynamic evaluation has no word-level result in the thesis (Table 4.4: enwik8 test
# bits/char 1.24 static, 1.13 sparse with 250k adaptation parameters, 1.08 full).
PAPER_TABLES: dict[str, dict[str, tuple[float, float] | None]] = {
    "ptb": {
        "static": (59.8, 57.7),
        "traditional_sgd": (54.9, 53.5),
        "sgd": (54.7, 53.3),
        "sgd_decay": (54.0, 52.4),
        "global_rms_decay": (52.7, 52.0),
        "global_rms_rms_decay": (51.6, 51.1),
        "sparse": None,
        "neural_cache": (53.9, 52.8),
    },
    "wikitext2": {
        "static": (68.9, 66.1),
        "traditional_sgd": (51.6, 49.0),
        "sgd": (51.5, 48.8),
        "sgd_decay": (49.8, 47.4),
        "global_rms_decay": (46.9, 44.7),
        "global_rms_rms_decay": (46.4, 44.3),
        "sparse": None,
        "neural_cache": (53.8, 52.0),
    },
}
PAPER_ENWIK8_SPARSE = {"static": 1.24, "sparse": 1.13, "dynamic": 1.08}
# PTB validation perplexities of Krause §5.4 (static 59.7).
PAPER_STATIC_VALID_PTB = 59.7
PAPER_MOMENTUM = {0.0: 54.7, 0.5: 54.8, 0.75: 55.0, 0.875: 55.3, 0.9375: 55.7, 0.96875: 56.2, 0.984375: 56.7}  # Table 5.3
PAPER_ADAPTIVE = {  # Table 5.4
    "rmsprop_alpha_0.9": 59.1, "rmsprop_alpha_0.99": 58.6, "rmsprop_alpha_0.999": 58.1,
    "adam_mu_0.9": 58.1, "adam_mu_0.0": 58.0, "sgd": 54.7,
}
PAPER_EPSILON = {1e-6: 57.5, 1e-5: 56.3, 1e-4: 55.2, 1e-3: 54.6, 1e-2: 54.4, 1e-1: 54.6, 1.0: 54.7, 10.0: 54.7}  # Table 5.5
PAPER_EPSILON_BASELINES = {"sgd": 54.7, "global_rms": 52.7}
PAPER_SEEN_UNSEEN = {"static": (3.24, 6.92), "dynamic": (2.78, 6.99), "neural_cache": (2.91, 7.06)}  # Table 5.1, nats
# Table 5.2 (WikiText-2 test, tied embeddings): an update on the segment containing "production" in the
# context below; word -> (embedding cosine with "production", Δ log p). The column is headed "cos distance"
# but holds cosine similarities (1.00 for the target); the median row is over the whole vocabulary.
PAPER_RELATED_WORDS = {
    "production": (1.00, 2.42), "development": (0.55, 1.14), "construction": (0.53, 1.29), "filming": (0.52, 0.80),
    "recording": (0.50, 1.27), "photography": (0.46, 0.15), "release": (0.45, 1.25), "performance": (0.45, 1.01),
    "design": (0.44, 0.90), "work": (0.44, 1.23), "productions": (0.44, 0.50),
}
PAPER_RELATED_WORDS_MEDIAN = (-0.02, -0.66)  # (cosine, Δ log p)
PAPER_RELATED_WORDS_CONTEXT = ("He appeared on a 2006 episode of the television series , Doctors, followed by a role "
                               "in the 2007 theatre production")
# Tables 5.6 and 5.7 (PTB validation perplexity; both captions in the thesis repeat Table 5.4's by mistake).
# Global RMS has no decay prior here (as in Table 5.5); RMSprop is the ε = 0.01 row of Table 5.5.
PAPER_STATISTICS_AMOUNT = {"static": 59.7, "rmsprop": 54.4, 0.01: 52.5, 0.1: 52.5, 1.0: 52.7}  # keys: data fraction
PAPER_STATISTICS_LOCALITY = {"static": 59.7, "rmsprop": 54.4, "global_rms": 52.7, "nonlocal_rmsprop": 52.6}

# The rows of Tables 4.1/4.2 in order: (key, label, fixed settings, grid name).
TABLE_ROWS: tuple[tuple[str, str, dict[str, Any], str | None], ...] = (
    ("static", "static evaluation", {}, None),
    ("traditional_sgd", "traditional dynamic eval (sgd, bptt=1)", {"rule": "sgd", "segment_len": 1}, "sgd"),
    ("sgd", "dynamic eval (sgd, bptt=n)", {"rule": "sgd"}, "sgd"),
    ("sgd_decay", "dynamic eval (sgd, bptt=n, decay)", {"rule": "sgd"}, "sgd_decay"),
    ("global_rms_decay", "dynamic eval (global RMS, bptt=n, decay)", {"rule": "global_rms", "rms_decay": False}, "global_rms"),
    ("global_rms_rms_decay", "dynamic eval (global RMS, bptt=n, RMS decay)", {"rule": "global_rms"}, "global_rms"),
    ("sparse", "sparse dynamic eval (global RMS, RMS decay)", {"rule": "global_rms"}, "sparse"),
    ("neural_cache", "neural cache", {}, None),
)
GRID_NAMES = ("sgd", "sgd_decay", "global_rms", "sparse")


def _require_keys(where: str, block: Mapping[str, Any], required: Sequence[str], optional: Sequence[str] = ()) -> None:
    missing = [k for k in required if k not in block]
    unknown = sorted(set(block) - set(required) - set(optional))
    if missing or unknown:
        raise ValueError(f"{where}: needs keys {list(required)} (optional {list(optional)}); "
                         f"missing {missing}, unknown {unknown}")


@register_experiment("dyneval")
@dataclass(frozen=True)
class DynEvalParams:
    """Dynamic evaluation vs static evaluation and the neural cache (Krause ch. 4-5) at small scale.

    ``model``/``train``: the LSTM trained per corpus with ``paperlib.train.Trainer`` (``checkpoints``
    maps a corpus to an existing Trainer checkpoint of the same architecture to skip training).
    ``valid_tokens``/``test_tokens``: prefixes of the splits used for tuning/reporting (None: all).
    ``grids``: per row family (``sgd``, ``sgd_decay``, ``global_rms``, ``sparse``) the values of
    lr/decay/eps searched by ``search`` ("grid" or "coordinate"). ``cache``: lists of cache_length,
    theta, lam. ``sparse_units``: H of the ``sparse`` row, eq. (4.8) on the first H units of the last LSTM
    layer. ``optimizers``: the §5.4 study (Tables 5.3-5.5) on ``corpus``. ``timescale``: Fig. 5.1
    and Table 5.1 on ``sequences`` test sequences of ``length`` tokens.

    Optional blocks (every key optional, defaults in :data:`RELATED_WORDS_DEFAULTS` and
    :data:`STATISTICS_STUDY_DEFAULTS`; None means "derive from the settings above"):
    ``related_words`` (Table 5.2, §5.3) and ``statistics_study`` (Tables 5.6-5.7, §5.4.4, on the
    ``optimizers`` corpus).
    """

    corpora: list[str]
    model: dict
    train: dict
    valid_tokens: int | None
    test_tokens: int | None
    segment_len: int
    gradient_stats: dict
    grids: dict
    cache: dict
    sparse_units: int
    optimizers: dict
    timescale: dict
    search: str = "coordinate"
    checkpoints: dict = field(default_factory=dict)
    seed: int = 0
    threads: int = 2
    related_words: dict = field(default_factory=dict)
    statistics_study: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        from paperlib.data.corpora import CORPORA
        from paperlib.models import CELL_OPTIONS, VALID_CELLS
        from paperlib.train import TrainConfig

        bad = [c for c in self.corpora if c not in PAPER_TABLES]
        if not self.corpora or bad:
            raise ValueError(f"corpora must be among {', '.join(PAPER_TABLES)} (word level); got {self.corpora}")
        _require_keys("model", self.model, ("cell", "hidden_size", "num_layers"), ("options",))
        if self.model["cell"] not in VALID_CELLS:
            raise ValueError(f"model.cell must be one of {', '.join(VALID_CELLS)}, got {self.model['cell']!r}")
        unknown = sorted(set(self.model.get("options", {})) - set(CELL_OPTIONS[self.model["cell"]]))
        if unknown:
            raise ValueError(f"model.options: unknown {unknown}; valid: {', '.join(sorted(CELL_OPTIONS[self.model['cell']]))}")
        try:
            TrainConfig(**self.train)
        except TypeError as err:
            raise ValueError(f"train: {err}") from None
        for name in ("valid_tokens", "test_tokens"):
            value = getattr(self, name)
            if value is not None and value < 2:
                raise ValueError(f"{name} must be >= 2 or null, got {value}")
        if self.segment_len < 1 or self.sparse_units < 1 or self.threads < 1:
            raise ValueError("segment_len, sparse_units and threads must be >= 1")
        _require_keys("gradient_stats", self.gradient_stats, ("batch_size", "bptt", "max_batches"))
        _require_keys("grids", self.grids, GRID_NAMES)
        for family, grid in self.grids.items():
            unknown = sorted(set(grid) - {"lr", "decay", "eps"})
            if unknown or "lr" not in grid or not all(isinstance(v, list) and v for v in grid.values()):
                raise ValueError(f"grids.{family}: needs non-empty lists for 'lr' (and optionally 'decay', 'eps'); got {grid}")
        if self.search not in ("grid", "coordinate"):
            raise ValueError(f"search must be 'grid' or 'coordinate', got {self.search!r}")
        _require_keys("cache", self.cache, ("cache_length", "theta", "lam"))
        _require_keys("optimizers", self.optimizers,
                      ("corpus", "valid_tokens", "momentum", "rmsprop_alpha", "adam_momentum", "rmsprop_eps",
                       "lr_start", "lr_factor", "max_evals"))
        if self.optimizers["corpus"] not in self.corpora:
            raise ValueError(f"optimizers.corpus must be one of corpora {self.corpora}")
        _require_keys("optimizers.lr_start", self.optimizers["lr_start"], ("sgd", "rmsprop", "adam", "global_rms"))
        _require_keys("timescale", self.timescale, ("corpus", "sequences", "length", "bin", "stream_batch"))
        if self.timescale["corpus"] not in self.corpora:
            raise ValueError(f"timescale.corpus must be one of corpora {self.corpora}")
        bad = sorted(set(self.checkpoints) - set(self.corpora))
        if bad or any(c not in CORPORA for c in self.checkpoints):
            raise ValueError(f"checkpoints may only name corpora of this experiment {self.corpora}; got {bad}")
        _require_keys("related_words", self.related_words, (), tuple(RELATED_WORDS_DEFAULTS))
        rw = related_words_settings(self)
        if rw["corpus"] not in self.corpora:
            raise ValueError(f"related_words.corpus must be one of corpora {self.corpora}, got {rw['corpus']!r}")
        rows = [key for key, _, fixed, _ in TABLE_ROWS if "rule" in fixed and key != "sparse"]
        if rw["row"] not in rows:
            raise ValueError(f"related_words.row must name a full dynamic-evaluation row of Tables 4.1/4.2 ({', '.join(rows)}); "
                             f"got {rw['row']!r}")
        if min(rw["top"], rw["min_count"], rw["min_length"], rw["min_context"]) < 1 or rw["extra_targets"] < 0:
            raise ValueError("related_words: top, min_count, min_length and min_context must be >= 1, extra_targets >= 0")
        _require_keys("statistics_study", self.statistics_study, (), tuple(STATISTICS_STUDY_DEFAULTS))
        st = statistics_study_settings(self)
        if not st["fractions"] or any(not 0.0 < f <= 1.0 for f in st["fractions"]) or 1.0 not in st["fractions"]:
            raise ValueError(f"statistics_study.fractions must lie in (0, 1] and include 1.0, got {st['fractions']}")
        if st["source"] not in ("train", "test"):
            raise ValueError(f"statistics_study.source must be 'train' or 'test' (not the evaluated split), "
                             f"got {st['source']!r}")
        if (st["batches"] is not None and st["batches"] < 1) or st["offset"] < 0 or st["max_evals"] < 2:
            raise ValueError("statistics_study: batches must be >= 1 or null, offset >= 0 and max_evals >= 2")
        _require_keys("statistics_study.lr_start", self.statistics_study.get("lr_start") or {}, (),
                      ("rmsprop", "global_rms", "nonlocal_rmsprop"))
        if not all(v > 0 for v in st["lr_start"].values()):
            raise ValueError(f"statistics_study.lr_start values must be positive, got {st['lr_start']}")
        eps = st["rmsprop_eps"]
        if not st["lr_factor"] > 1 or not isinstance(eps, list) or not eps or not all(e > 0 for e in eps):
            raise ValueError(f"statistics_study: lr_factor must be > 1 and rmsprop_eps a non-empty list of positive ε; "
                             f"got {st['lr_factor']}, {eps}")


# Defaults of the optional blocks; None: taken from the other settings (see the two functions below).
RELATED_WORDS_DEFAULTS: dict[str, Any] = {
    "corpus": None,  # the timescale corpus (WikiText-2, as in the thesis)
    "word": "production",  # the thesis' target: its first occurrence in the test prefix, if any
    "row": "global_rms_rms_decay",  # the Tables 4.1/4.2 row whose tuned settings make the update
    "top": 10,
    "min_count": 50,  # the fallback target rule (also picks the extra targets): training count,
    "min_length": 6,  # letters only and at least this long,
    "min_context": 20,  # and at least this many test tokens before it
    "extra_targets": 30,
}
STATISTICS_STUDY_DEFAULTS: dict[str, Any] = {
    "fractions": [0.01, 0.1, 1.0],
    "batches": None,  # 100% of the training batches: gradient_stats.max_batches (all batches if that is null)
    "rmsprop_eps": [0.01],  # RMSprop's ε for the baselines and non-local RMSprop (the thesis: 0.01)
    "source": "train",  # non-local RMSprop's statistics stream: a piece of this split ...
    "offset": 0,  # ... starting at this token
    "valid_tokens": None,  # None: the optimizers' value
    "lr_factor": None,
    "max_evals": None,
    "lr_start": None,  # {rmsprop, global_rms, nonlocal_rmsprop}: None or missing keys from optimizers.lr_start
}


def related_words_settings(settings) -> dict[str, Any]:
    """The ``related_words`` block with defaults filled in."""
    out = {**RELATED_WORDS_DEFAULTS, **settings.related_words}
    if out["corpus"] is None:
        out["corpus"] = settings.timescale["corpus"]
    return out


def statistics_study_settings(settings) -> dict[str, Any]:
    """The ``statistics_study`` block with defaults filled in (from ``optimizers`` and ``gradient_stats``)."""
    out = {**STATISTICS_STUDY_DEFAULTS, **settings.statistics_study}
    if out["batches"] is None:
        out["batches"] = settings.gradient_stats["max_batches"]
    for key in ("valid_tokens", "lr_factor", "max_evals"):
        if out[key] is None:
            out[key] = settings.optimizers[key]
    # non-local RMSprop's statistics never contain the current gradient, so its steps are unbounded like
    # global RMS's rather than at most η/√(1-α) like RMSprop's: its sweep starts where global RMS's does
    starts = settings.optimizers["lr_start"]
    defaults = {"rmsprop": starts["rmsprop"], "global_rms": starts["global_rms"], "nonlocal_rmsprop": starts["global_rms"]}
    out["lr_start"] = {**defaults, **(out["lr_start"] or {})}
    return out




def _load_or_train(settings, corpus_name: str, corpus, root, device, progress: bool) -> tuple[nn.Module, dict[str, Any]]:
    """The LM for one corpus: an existing checkpoint from params, else trained here (resumably) under runs/dyneval."""
    from paperlib.models import build_lm
    from paperlib.train import Trainer, TrainConfig

    torch.manual_seed(settings.seed)
    spec = settings.model
    model = build_lm(spec["cell"], len(corpus.vocab), spec["hidden_size"], spec["num_layers"], **spec.get("options", {}))
    info: dict[str, Any] = {"parameters": sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())}
    if corpus_name in settings.checkpoints:
        path = root / settings.checkpoints[corpus_name]
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint {path} (params: experiments.dyneval.checkpoints.{corpus_name}) does not exist")
        model.load_state_dict(load_checkpoint(path, device)["model"])
        info["checkpoint"] = str(settings.checkpoints[corpus_name])
        return model.to(device).eval(), info
    from paperlib.train import forget_stale_run

    run_dir = root / "runs" / "dyneval" / corpus_name
    # a folder trained with other settings is retrained rather than reused
    forget_stale_run(run_dir, {"model": _jsonable(spec), "train": _jsonable(settings.train),
                                "vocab_size": len(corpus.vocab), "seed": settings.seed})
    trainer = Trainer(model, corpus.train, corpus.valid, TrainConfig(**{**settings.train, "seed": settings.seed}),
                      run_dir, device=device, progress=progress)
    result = trainer.fit(resume=True)
    trainer.load(trainer.best_path, restore_position=False)
    info.update({"train_steps": result.steps, "train_tokens": result.tokens, "train_valid_nll": result.best_valid_nll,
                 "train_seconds": round(trainer.train_seconds, 1)})
    return trainer.model.eval(), info


def _row_settings(key: str, fixed: dict[str, Any], settings) -> dict[str, Any]:
    out = {"segment_len": settings.segment_len, **fixed}
    if key == "sparse":
        out["sparse_units"] = settings.sparse_units
    return out


def _corpus_table(settings, model: nn.Module, valid: Tensor, test: Tensor, ms: dict[str, Params], log) -> dict[str, Any]:
    """Tables 4.1/4.2: every row tuned on the validation prefix, then evaluated on the test prefix."""
    rows = []
    for key, label, fixed, grid_name in TABLE_ROWS:
        if key == "static":
            best: dict[str, Any] = {}
            valid_nll = static_evaluate(model, valid).mean_nll()
            test_nll = static_evaluate(model, test).mean_nll()
            trials: list[dict[str, Any]] = []
        elif key == "neural_cache":
            from paperlib.cache import neural_cache_losses, tune_neural_cache

            tuned = tune_neural_cache(model, valid, cache_lengths=settings.cache["cache_length"],
                                      thetas=settings.cache["theta"], lams=settings.cache["lam"])
            best = {"cache_length": tuned.cache_length, "theta": tuned.theta, "lam": tuned.lam}
            valid_nll, trials = tuned.nll, tuned.trials
            test_nll = float(neural_cache_losses(model, test, **best).mean())
        else:
            base = _row_settings(key, fixed, settings)
            needs_ms = base["rule"] == "global_rms"
            if needs_ms:
                base["ms_g"] = ms["sparse" if key == "sparse" else "full"]
            tuned = tune_dynamic_evaluation(model, valid, grid=settings.grids[grid_name], search=settings.search, **base)
            best, valid_nll, trials = tuned.best, tuned.nll, tuned.trials
            test_nll = dynamic_evaluate(model, test, **{**base, **best}).mean_nll()
            base.pop("ms_g", None)
            best = {**base, **best}
        rows.append({"key": key, "label": label, "settings": best, "valid_nll": valid_nll, "test_nll": test_nll,
                     "valid_ppl": _ppl(valid_nll), "test_ppl": _ppl(test_nll), "trials": trials})
        log(f"  {label:48s} valid ppl {_ppl(valid_nll):8.2f}  test ppl {_ppl(test_nll):8.2f}")
    return {"rows": rows}


def _lr_sweep(model: nn.Module, valid: Tensor, segment_len: int, label: str, start: float, factor: float,
              max_evals: int, log, **kwargs: Any) -> dict[str, Any]:
    """One row of the §5.4 studies: dynamic evaluation on ``valid`` with the learning rate swept (§5.4.1)."""

    def evaluate(lr: float) -> float:
        return _safe_nll(dynamic_evaluate(model, valid, lr=lr, segment_len=segment_len, **kwargs))

    lr, nll, trials = learning_rate_sweep(evaluate, start, factor, max_evals)
    log(f"  {label:40s} lr {lr:9.3g}  valid ppl {_ppl(nll):8.2f}  ({len(trials)} evaluations)")
    settings_out = {k: v for k, v in kwargs.items() if k not in ("ms_g", "statistics_tokens")}
    return {"label": label, "settings": settings_out, "lr": lr, "valid_nll": nll, "valid_ppl": _ppl(nll),
            "sweep": trials}


def _rmsprop_start(start: float, eps: float) -> float:
    """For ε well above √MS, RMSprop is SGD with learning rate η/ε (§5.4.3): start the sweep proportionally higher."""
    return start * max(1.0, eps / 1e-3)


def _optimizer_study(settings, model: nn.Module, valid: Tensor, ms_full: Params, log) -> dict[str, Any]:
    """Krause §5.4 at small scale: each optimizer setting with its own learning-rate sweep (Tables 5.3-5.5)."""
    opt = settings.optimizers

    def sweep(label: str, start: float, **kwargs: Any) -> dict[str, Any]:
        return _lr_sweep(model, valid, settings.segment_len, label, start, opt["lr_factor"], opt["max_evals"], log,
                         **kwargs)

    starts = opt["lr_start"]
    static = static_evaluate(model, valid).mean_nll()
    momentum = [sweep(f"SGD, momentum {mu}", starts["sgd"], rule="sgd", momentum=mu) for mu in opt["momentum"]]
    sgd = next((r for r, mu in zip(momentum, opt["momentum"]) if mu == 0.0), None) or sweep("SGD", starts["sgd"], rule="sgd")
    adaptive = [sweep(f"RMSprop, alpha {a}", starts["rmsprop"], rule="rmsprop", alpha=a) for a in opt["rmsprop_alpha"]]
    adaptive += [sweep(f"Adam, alpha 0.999, mu {mu}", starts["adam"], rule="adam", alpha=0.999, momentum=mu)
                 for mu in opt["adam_momentum"]]
    epsilon = [sweep(f"RMSprop, eps {eps:g}", _rmsprop_start(starts["rmsprop"], eps), rule="rmsprop", eps=eps)
               for eps in opt["rmsprop_eps"]]
    global_rms = sweep("global RMS (no decay)", starts["global_rms"], rule="global_rms", ms_g=ms_full)
    return {"corpus": opt["corpus"], "valid_tokens": valid.numel() - 1, "static_valid_nll": static,
            "static_valid_ppl": _ppl(static), "momentum": momentum, "adaptive": adaptive, "sgd": sgd,
            "epsilon": epsilon, "global_rms": global_rms}


def _timescale(settings, model: nn.Module, test: Tensor, table: dict[str, Any], ms: dict[str, Params], log) -> dict[str, Any]:
    """Figure 5.1 and Table 5.1: loss against position on independent test sequences, and seen/unseen words."""
    from paperlib.cache import neural_cache_losses

    ts = settings.timescale
    count, length = ts["sequences"], ts["length"]
    if count * length > test.numel():
        raise ValueError(f"timescale needs {count} x {length} test tokens, the split has {test.numel()}")
    sequences = test[: count * length].view(count, length)  # [K, L], consecutive non-overlapping pieces
    rows = {r["key"]: r for r in table["rows"]}
    dyn_settings = {k: v for k, v in rows["global_rms_rms_decay"]["settings"].items()}
    cache_settings = rows["neural_cache"]["settings"]
    static = static_evaluate(model, sequences).losses
    parts = []
    for begin in range(0, count, ts["stream_batch"]):
        chunk = sequences[begin : begin + ts["stream_batch"]]
        parts.append(dynamic_evaluate(model, chunk, ms_g=ms["full"], batched=True, **dyn_settings).losses)
    dynamic = torch.cat(parts)
    cache = neural_cache_losses(model, sequences, **cache_settings).float()
    curves = {name: DynamicEvalResult(losses).curve(ts["bin"]).tolist()
              for name, losses in (("static", static), ("dynamic", dynamic), ("neural_cache", cache))}
    # Table 5.1: second half of each sequence, words seen before in the sequence vs first occurrences
    targets = sequences[:, 1:]
    seen = torch.zeros_like(targets, dtype=torch.bool)
    for k in range(count):
        first: dict[int, int] = {}
        for t, w in enumerate(targets[k].tolist()):
            seen[k, t] = w in first or w == int(sequences[k, 0])
            first.setdefault(w, t)
    half = torch.zeros_like(seen)
    half[:, (length - 1) // 2 :] = True
    split = {}
    for name, losses in (("static", static), ("dynamic", dynamic), ("neural_cache", cache)):
        losses = losses.double()
        split[name] = {"seen": float(losses[half & seen].mean()), "unseen": float(losses[half & ~seen].mean())}
    unseen = half & ~seen
    split["dynamic_better_than_static_on_unseen"] = float((dynamic.double()[unseen] < static.double()[unseen]).double().mean())
    split["cache_better_than_static_on_unseen"] = float((cache.double()[unseen] < static.double()[unseen]).double().mean())
    log(f"  time scales on {count} sequences of {length}: final-bin loss static {curves['static'][-1]:.3f}, "
        f"dynamic {curves['dynamic'][-1]:.3f}, cache {curves['neural_cache'][-1]:.3f}")
    return {"corpus": ts["corpus"], "sequences": count, "length": length, "bin": ts["bin"], "curves": curves,
            "seen_unseen": split, "seen_share": float(seen[half].double().mean())}


def choose_targets(test: Tensor, vocab, train_counts: Tensor, *, word: str | None, min_count: int, min_length: int,
                   min_context: int, extra: int) -> tuple[int, list[int]]:
    """The Table 5.2 target position in ``test`` and up to ``extra`` further probe positions.

    The target is the first occurrence of ``word`` (the thesis' "production") after at least one token of
    context; otherwise (word absent from the vocabulary or the test prefix) the first position with at least
    ``min_context`` tokens before it whose word is alphabetic, ``min_length`` letters or longer and seen
    ``min_count`` times in training, a crude stand-in for "a frequent content word". The extra positions are
    the next positions after the target satisfying the same rule.
    """

    def qualifies(i: int) -> bool:
        token = vocab.itos[i]
        return token.isalpha() and len(token) >= min_length and int(train_counts[i]) >= min_count

    ids = test.tolist()
    target = None
    if word is not None and word in vocab:
        target = next((t for t in range(1, len(ids)) if ids[t] == vocab.stoi[word]), None)
    if target is None:
        target = next((t for t in range(min_context, len(ids)) if qualifies(ids[t])), None)
    if target is None:
        raise ValueError(f"no test position qualifies as a Table 5.2 target (word {word!r}, min_count {min_count}, "
                         f"min_length {min_length}, min_context {min_context}) in {len(ids)} tokens")
    others = [t for t in range(target + 1, len(ids)) if qualifies(ids[t]) and ids[t] != ids[target]][:extra]
    return target, others


def _related_words(settings, model: nn.Module, corpus, test: Tensor, table: dict[str, Any], ms: dict[str, Params],
                   log) -> dict[str, Any]:
    """Table 5.2: the change of every word's log-probability after the update on a target's segment (§5.3)."""
    rw = related_words_settings(settings)
    counts = torch.bincount(corpus.train.cpu(), minlength=len(corpus.vocab))
    target, extra = choose_targets(test.cpu(), corpus.vocab, counts, word=rw["word"], min_count=rw["min_count"],
                                   min_length=rw["min_length"], min_context=rw["min_context"],
                                   extra=rw["extra_targets"])
    row = next(r for r in table["rows"] if r["key"] == rw["row"])
    update = dict(row["settings"])
    if update["rule"] == "global_rms":
        update["ms_g"] = ms["full"]
    probe = probe_updates(model, test, [target, *extra], **update)
    embedding = model.decoder.weight
    tied = embedding is getattr(getattr(model, "embedding", None), "weight", None)
    summaries = []
    for index, position in enumerate(probe.positions):
        word_id = int(test[position])
        summary = related_words(embedding, word_id, probe.delta[index], rw["top"])
        summary.update(position=position, word=corpus.vocab.itos[word_id])
        summaries.append(summary)
    main = summaries[probe.positions.index(target)]
    for r in main["rows"]:
        r["word"] = corpus.vocab.itos[r["id"]]
        r["log_prob_before"] = float(probe.before[probe.positions.index(target), r["id"]])
    context = corpus.vocab.decode(test[max(0, target - 20) : target + 1].tolist())
    others = [s for s in summaries if s is not main]
    log(f"  target {main['word']!r} at test position {target}: Δ log p {main['rows'][0]['delta']:+.3f}, top-{rw['top']} "
        f"mean {main['top_mean_delta']:+.3f}, vocabulary median {main['median']['delta']:+.3f}")
    return {
        "corpus": rw["corpus"], "position": target, "word": main["word"], "context": " ".join(context),
        "thesis_word": rw["word"] == main["word"], "embedding": "tied input/output" if tied else "output (untied)",
        "update": {k: v for k, v in update.items() if k != "ms_g"}, "top": rw["top"],
        "rows": main["rows"], "median": main["median"], "top_mean_delta": main["top_mean_delta"],
        "top_above_median": main["top_above_median"], "spearman": main["spearman"],
        "extra_targets": {
            "count": len(others),
            "top_mean_above_median": sum(s["top_mean_delta"] > s["median"]["delta"] for s in others),
            "mean_target_delta": _mean([s["rows"][0]["delta"] for s in others]),
            "mean_top_delta": _mean([s["top_mean_delta"] for s in others]),
            "mean_median_delta": _mean([s["median"]["delta"] for s in others]),
            "mean_spearman": _mean([s["spearman"] for s in others]),
            "words": [s["word"] for s in others],
        },
    }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _statistics_amount(settings, model: nn.Module, corpus, device, log) -> dict[str, Any]:
    """Table 5.6: global RMS (no decay prior) with MS_g from 1%, 10% and 100% of the training batches (§5.4.4.1).

    100% is the profile's number of gradient-statistics batches (``statistics_study.batches``; all
    training batches when null, as in the thesis); a fraction f uses the first max(1, round(f N)) of them.
    Every row has its own learning-rate sweep; static and RMSprop (each ε of ``rmsprop_eps``; the thesis
    used 0.01, its best ε in Table 5.5) are the baselines.
    """
    st, gs = statistics_study_settings(settings), settings.gradient_stats
    valid = _prefix(corpus.valid, st["valid_tokens"]).to(device)
    train = corpus.train.to(device)
    available = num_windows(batchify(train, gs["batch_size"]), gs["bptt"])
    full = available if st["batches"] is None else min(st["batches"], available)

    def sweep(label: str, start: float, **kwargs: Any) -> dict[str, Any]:
        return _lr_sweep(model, valid, settings.segment_len, label, start, st["lr_factor"], st["max_evals"], log, **kwargs)

    static = static_evaluate(model, valid).mean_nll()
    rmsprop = [sweep(f"RMSprop, eps {eps:g}", _rmsprop_start(st["lr_start"]["rmsprop"], eps), rule="rmsprop", eps=eps)
               for eps in st["rmsprop_eps"]]
    rows = []
    for fraction in sorted(st["fractions"]):
        batches = gradient_batches(fraction, full)
        ms = mean_squared_gradients(model, train, batch_size=gs["batch_size"], bptt=gs["bptt"], max_batches=batches)
        row = sweep(f"global RMS ({100 * fraction:g}% of the statistics)", st["lr_start"]["global_rms"],
                    rule="global_rms", ms_g=ms)
        row.update(fraction=fraction, batches=batches, tokens=batches * gs["batch_size"] * gs["bptt"])
        rows.append(row)
    return {"corpus": settings.optimizers["corpus"], "valid_tokens": valid.numel() - 1, "static_valid_nll": static,
            "static_valid_ppl": _ppl(static), "rmsprop": rmsprop, "global_rms": rows, "full_batches": full,
            "training_batches": available, "batch_size": gs["batch_size"], "bptt": gs["bptt"]}


def gradient_batches(fraction: float, full: int) -> int:
    """Number of batches for a fraction of ``full`` gradient-statistics batches: max(1, round(f N))."""
    if not 0.0 < fraction <= 1.0 or full < 1:
        raise ValueError(f"need 0 < fraction <= 1 and full >= 1, got {fraction}, {full}")
    return max(1, round(fraction * full))


def _statistics_locality(settings, model: nn.Module, corpus, device, amount: dict[str, Any], log) -> dict[str, Any]:
    """Table 5.7: non-local RMSprop (statistics from an independent stream) vs RMSprop and global RMS (§5.4.4.2).

    The statistics stream is the piece of ``statistics_study.source`` starting at ``offset`` with the length of
    the validation prefix; one row per RMSprop ε (α = 0.99), each beside the RMSprop row of the same ε.
    Static, RMSprop and global RMS (100% of the statistics, no decay prior) are shared with Table 5.6.
    """
    st = statistics_study_settings(settings)
    valid = _prefix(corpus.valid, st["valid_tokens"]).to(device)
    split = getattr(corpus, st["source"])
    if st["offset"] + valid.numel() > split.numel():
        raise ValueError(f"statistics_study: the {st['source']} split has {split.numel()} tokens, fewer than "
                         f"offset {st['offset']} + {valid.numel()}")
    other = split[st["offset"] : st["offset"] + valid.numel()].to(device)
    nonlocal_rows = []
    for eps in st["rmsprop_eps"]:
        start = _rmsprop_start(st["lr_start"]["nonlocal_rmsprop"], eps)
        nonlocal_rows.append(_lr_sweep(model, valid, settings.segment_len, f"non-local RMSprop, eps {eps:g}", start,
                                       st["lr_factor"], st["max_evals"], log, rule="nonlocal_rmsprop", eps=eps,
                                       statistics_tokens=other))
    global_rms = next(r for r in amount["global_rms"] if r["fraction"] == 1.0)
    return {"corpus": amount["corpus"], "valid_tokens": amount["valid_tokens"], "static_valid_nll": amount["static_valid_nll"],
            "static_valid_ppl": amount["static_valid_ppl"], "rmsprop": amount["rmsprop"], "global_rms": global_rms,
            "nonlocal_rmsprop": nonlocal_rows, "statistics_source": {"split": st["source"], "offset": st["offset"],
                                                                     "tokens": other.numel()}}


def _prefix(split: Tensor, tokens: int | None) -> Tensor:
    return split if tokens is None else split[: tokens + 1]


def run_dyneval(profile: str | None = None, progress: bool = True, out: str | None = None) -> Any:
    """Run the dynamic-evaluation experiment of ``params.yaml`` (profile ``profile``); returns the results path.

    Writes ``results/dyneval.json`` (numbers only; keys ``corpora``, ``optimizers``, ``timescale``,
    ``related_words``, ``statistics_amount``, ``statistics_locality``) and ``results/dyneval.provenance.json``
    (settings, versions, wall time per part). Trained models go to ``runs/dyneval/<corpus>/`` (resumable).
    """
    import time
    from pathlib import Path

    from paperlib.config import active_profile, experiment_params, load_params, repo_root, section_params
    from paperlib.data import load_corpus, pinned_checksums
    from paperlib.provenance import provenance, write_json_atomic

    started = time.time()
    root = repo_root()
    params = load_params()
    profile = active_profile(profile, params)
    settings = experiment_params("dyneval", profile, params)
    torch.set_num_threads(settings.threads)
    device = setup_stage(profile, params)
    data_root = root / section_params("data", params).root
    seconds: dict[str, float] = {}

    def log(message: str) -> None:
        if progress:
            print(message, flush=True)

    results: dict[str, Any] = {"profile": profile, "model": settings.model, "segment_len": settings.segment_len,
                               "search": settings.search, "corpora": {}}
    models, stats = {}, {}
    for name in settings.corpora:
        tick = time.time()
        corpus = load_corpus(name, data_root)
        log(f"dyneval: {name} ({len(corpus.vocab)} words)")
        model, info = _load_or_train(settings, name, corpus, root, device, progress)
        seconds[f"{name}_train"] = info.pop("train_seconds", 0.0)
        gs = settings.gradient_stats
        ms = {"full": mean_squared_gradients(model, corpus.train.to(device), batch_size=gs["batch_size"], bptt=gs["bptt"],
                                             max_batches=gs["max_batches"]),
              "sparse": mean_squared_gradients(model, corpus.train.to(device), batch_size=gs["batch_size"], bptt=gs["bptt"],
                                               max_batches=gs["max_batches"], sparse_units=settings.sparse_units)}
        valid = _prefix(corpus.valid, settings.valid_tokens).to(device)
        test = _prefix(corpus.test, settings.test_tokens).to(device)
        tick_eval = time.time()
        table = _corpus_table(settings, model, valid, test, ms, log)
        seconds[f"{name}_table"] = round(time.time() - tick_eval, 1)
        results["corpora"][name] = {"vocab_size": len(corpus.vocab), **info, "valid_tokens": valid.numel() - 1,
                                    "test_tokens": test.numel() - 1, **table}
        models[name], stats[name] = (model, corpus), ms
        seconds[name] = round(time.time() - tick, 1)

    tick = time.time()
    opt_name = settings.optimizers["corpus"]
    model, corpus = models[opt_name]
    log(f"dyneval: optimizer study on {opt_name}")
    valid = _prefix(corpus.valid, settings.optimizers["valid_tokens"]).to(device)
    results["optimizers"] = _optimizer_study(settings, model, valid, stats[opt_name]["full"], log)
    seconds["optimizers"] = round(time.time() - tick, 1)

    tick = time.time()
    ts_name = settings.timescale["corpus"]
    model, corpus = models[ts_name]
    log(f"dyneval: time scales on {ts_name}")
    results["timescale"] = _timescale(settings, model, corpus.test.to(device), results["corpora"][ts_name],
                                      stats[ts_name], log)
    seconds["timescale"] = round(time.time() - tick, 1)

    tick = time.time()
    rw_name = related_words_settings(settings)["corpus"]
    model, corpus = models[rw_name]
    log(f"dyneval: related words on {rw_name}")
    results["related_words"] = _related_words(settings, model, corpus, _prefix(corpus.test, settings.test_tokens).to(device),
                                              results["corpora"][rw_name], stats[rw_name], log)
    seconds["related_words"] = round(time.time() - tick, 1)

    tick = time.time()
    model, corpus = models[opt_name]
    log(f"dyneval: amount and locality of gradient statistics on {opt_name}")
    results["statistics_amount"] = _statistics_amount(settings, model, corpus, device, log)
    seconds["statistics_amount"] = round(time.time() - tick, 1)
    tick = time.time()
    results["statistics_locality"] = _statistics_locality(settings, model, corpus, device, results["statistics_amount"], log)
    seconds["statistics_locality"] = round(time.time() - tick, 1)

    path = Path(out) if out is not None else root / "results" / "dyneval.json"
    write_json_atomic(path, _jsonable(results))
    record = provenance(root, profile, _jsonable(vars(settings)), pinned_checksums(*settings.corpora), started)
    write_json_atomic(path.with_name(path.stem + ".provenance.json"), {**record, "seconds": seconds})
    return path


def _ppl(nll: float) -> float:
    """exp(nll), inf for a diverged (or overflowing) run."""
    return math.exp(nll) if nll < 700 else math.inf


def _jsonable(value: Any) -> Any:
    """Plain JSON: tuples to lists, non-finite floats (diverged runs) to null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def tune_table_row(corpus_name: str, row: str = "global_rms_rms_decay", *, profile: str | None = None,
                   grid: Mapping[str, Sequence[float]] | None = None,
                   ranges: Mapping[str, tuple[float, float]] | None = None, search: str = "grid", trials: int = 20,
                   seed: int = 0, valid_tokens: int | None = None, checkpoint: str | None = None,
                   data_root: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Tune one row of Krause Tables 4.1/4.2 (``TABLE_ROWS``) on a validation prefix; returns the trials and best.

    The model is the ``dyneval`` experiment's LM for the corpus under ``profile``: ``checkpoint`` (a Trainer
    checkpoint of that architecture), else the experiment's own checkpoint or trained run under
    ``runs/dyneval/<corpus>``. ``grid`` defaults to the profile's grid for the row; ``search="optuna"`` samples
    ``ranges``, by default Melis Table 2.6 (global RMS rows) or the grid's span widened 10x each way. Bad rows,
    corpora and grids are rejected before any data is loaded.
    """
    import dataclasses
    from pathlib import Path

    from paperlib.config import active_profile, experiment_params, load_params, repo_root, section_params
    from paperlib.data import load_corpus, pinned_checksums
    from paperlib.search_spaces import get_space

    rows = {key: (label, fixed, grid_name) for key, label, fixed, grid_name in TABLE_ROWS if grid_name is not None}
    if row not in rows:
        raise ValueError(f"unknown row {row!r}; tunable rows: {', '.join(rows)}")
    label, fixed, grid_name = rows[row]
    params = load_params()
    profile = active_profile(profile, params)
    settings = experiment_params("dyneval", profile, params)
    if corpus_name not in settings.corpora:
        raise ValueError(f"corpus {corpus_name!r} is not in experiments.dyneval.{profile}.corpora {settings.corpora}")
    grid = dict(grid) if grid else dict(settings.grids[grid_name])
    ranges = dict(ranges or {})
    if checkpoint:
        settings = dataclasses.replace(settings, checkpoints={**settings.checkpoints,
                                                              corpus_name: str(Path(checkpoint).resolve())})
    root = repo_root()
    device = setup_stage(profile, params)
    corpus = load_corpus(corpus_name, Path(data_root) if data_root else root / section_params("data", params).root)
    model, _ = _load_or_train(settings, corpus_name, corpus, root, device, progress)

    fixed = _row_settings(row, fixed, settings)
    if fixed["rule"] == "global_rms":
        gs = settings.gradient_stats
        fixed["ms_g"] = mean_squared_gradients(
            model, corpus.train.to(device), batch_size=gs["batch_size"], bptt=gs["bptt"],
            max_batches=gs["max_batches"], sparse_units=fixed.get("sparse_units"))
    if search == "optuna" and not ranges:
        if fixed["rule"] == "global_rms":
            table = get_space("dyneval_word")
            ranges = {h.name: (h.low, h.high) for h in table.hyperparameters if h.name in grid}
        else:
            ranges = {k: (min(v) / 10, max(v) * 10) for k, v in grid.items()}
    valid = _prefix(corpus.valid, settings.valid_tokens if valid_tokens is None else valid_tokens).to(device)
    tuned = tune_dynamic_evaluation(model, valid, grid=grid, ranges=ranges, search=search, n_trials=trials, seed=seed,
                                    **fixed)
    fixed.pop("ms_g", None)
    return {"row": row, "label": label, "corpus": corpus_name, "profile": profile, "fixed": fixed, "search": search,
            "best": tuned.best, "valid_nll": tuned.nll, "valid_tokens": valid.numel() - 1, "trials": tuned.trials}
