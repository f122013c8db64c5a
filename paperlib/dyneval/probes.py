"""What one update does to the other words' probabilities (Krause §5.3, Table 5.2): the forward pass of probed
positions repeated after their segment's update, and the change for the words nearest in embedding space."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call
from paperlib.data.batching import bptt_windows
from paperlib.dyneval.core import AdaptSpec, Params, _eval_mode, adapted_parameters
from paperlib.dyneval.evaluate import _run
from paperlib.dyneval.gradients import _direct_oracle
from paperlib.dyneval.rules import _check_rule_args


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

        _run(oracle, params, theta_g, hyper, bptt_windows(tokens[:stop].unsqueeze(0), segment_len), None, probe)
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
