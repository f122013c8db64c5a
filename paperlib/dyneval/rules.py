"""The update rules of dynamic evaluation (Krause §4.4-4.5, §5.4): SGD with a decay prior (eq. 4.3, with momentum
eqs. 5.10-5.11), global RMS normalisation (eqs. 4.4-4.7), PyTorch's RMSprop and Adam, and non-local RMSprop
(§5.4.4.2)."""

from __future__ import annotations

import math
from typing import Any, Iterator, Mapping

import torch
from torch import Tensor
from paperlib.dyneval.core import Params
from paperlib.dyneval.gradients import GradientOracle


RULES = ("sgd", "global_rms", "rmsprop", "adam", "nonlocal_rmsprop")

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
