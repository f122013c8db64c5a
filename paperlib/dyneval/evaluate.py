"""Dynamic evaluation of a token sequence, or of many streams at once, and static evaluation (Krause §4.3,
Algorithm 1): each segment is scored before the model is updated on it."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call
from torch.utils._pytree import tree_flatten, tree_unflatten

from paperlib.data.batching import bptt_windows
from paperlib.dyneval.core import AdaptSpec, DynamicEvalResult, Params, _as_streams, _eval_mode, adapted_parameters
from paperlib.dyneval.gradients import GradientOracle, _StateCodec, _direct_oracle, _token_losses, _vmap_oracle
from paperlib.dyneval.rules import StatisticsStream, _check_rule_args, make_update_rule
from paperlib.dyneval.sparse import _check_sparse_mode, sparse_adaptation


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
            result = _run(oracle, params, theta_g, hyper, bptt_windows(streams, segment_len), state, callback,
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
                result = _run(oracle, params, theta_g, hyper, bptt_windows(streams, segment_len), state, callback,
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
                result = _run(_vmap_oracle(model, frozen, codec), params, theta_g, hyper,
                              bptt_windows(streams, segment_len), packed, callback, statistics)
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


def _run(oracle: GradientOracle, params: Params, theta_g: Params, hyper: dict, segments: Iterable[tuple[Tensor, Any]],
         state: Any, callback, statistics: StatisticsStream | None = None) -> DynamicEvalResult:
    """Algorithm 1 with an update rule: score a segment, take its gradient, update, carry the state on.

    ``segments`` yields the oracle's (inputs, targets) per segment: ``bptt_windows`` of token streams, or
    frames with no separate targets for songs (:mod:`paperlib.dyneval.songs`).
    """
    hyper = dict(hyper)
    rule = make_update_rule(hyper.pop("rule"), params, theta_g, statistics=statistics, **hyper)
    losses = []
    for index, (inputs, targets) in enumerate(segments):
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
