"""One trial: build, train and evaluate a sentence VAE (the studies that run trials: :mod:`.studies`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from paperlib.data import SentenceBatch, pad_sentences
from paperlib.experiments.common.stage import stage_device
from paperlib.estimators import Surrogates, iwae_bound, mutual_information
from paperlib.experiments.micmco.synthetic.micmco_synthetic import TrainResult, step_surrogates
from paperlib.models.masks import DropoutRates
from paperlib.models.sentence_vae import SentenceVAE
from paperlib.experiments.micmco.ptb.design import Curve, MicmcoPtbParams
from paperlib.experiments.micmco.ptb.data import BatchStream, SentenceData


def build_model(curve: Curve, params: Mapping[str, float], settings: MicmcoPtbParams, vocab_size: int) -> SentenceVAE:
    """The §5.7.2 model of ``curve``, with the trial's dropout rates for the dropout regimes."""
    dropout = None
    if curve.regime in ("shared", "naive"):
        dropout = DropoutRates(input=float(params["input_dropout"]), state=float(params["state_dropout"]),
                               output=float(params["output_dropout"]))
    return SentenceVAE(vocab_size, settings.hidden_size * curve.hidden_factor, curve.estimator.latent,
                       settings.latent_dim, settings.num_categorical, settings.categories, dropout, curve.mask_mode,
                       settings.tie_embeddings)


def per_token(s: Surrogates, tokens: int) -> Surrogates:
    """Rescale per-sentence surrogates ``[B]`` so that ``-mean`` becomes the negative objective per token."""
    scale = s.model.shape[0] / tokens
    if s.model is s.encoder:
        scaled = s.model * scale
        return Surrogates(scaled, scaled)
    return Surrogates(s.model * scale, s.encoder * scale)


def train(model: SentenceVAE, curve: Curve, params: Mapping[str, float], sentences: list[Tensor], eos_id: int,
          steps: int, batch_size: int, seed: int, score_at: Sequence[int] = (),
          score: Callable[[int], None] | None = None) -> TrainResult:
    """Adam (beta_1 = 0, beta_2 = 0.999, eps = 1e-8; §5.C) on the curve's objective, per-token loss.

    L2 (``params["l2_penalty"]``, regime ``"l2"``) is Adam's weight decay of 2 x coefficient, i.e. the gradient of
    coefficient x ||theta||^2. Stops early, flagged ``diverged``, when the objective becomes non-finite.
    ``score(n)`` is called, with the model in eval mode, after each step count n in ``score_at`` (a scale ladder
    scores one run at several budgets; it must leave the random state as it found it, as :func:`evaluate` does).
    """
    started = time.perf_counter()
    device = next(model.parameters()).device
    l2 = float(params.get("l2_penalty", 0.0))
    optimizer = torch.optim.Adam(model.parameters(), lr=float(params["learning_rate"]), betas=(0.0, 0.999), eps=1e-8,
                                 weight_decay=2.0 * l2)
    model.train()
    stream = BatchStream(sentences, batch_size, eos_id, seed)
    tail = max(1, steps // 10)
    tail_values: list[float] = []
    for step in range(steps):
        batch = next(stream)
        batch = SentenceBatch(*(t.to(device) for t in (batch.inputs, batch.targets, batch.mask, batch.lengths)))
        tokens = int(batch.lengths.sum())
        optimizer.zero_grad(set_to_none=True)
        s = per_token(step_surrogates(model, batch, curve.estimator, params), tokens)
        s.backward(model.model_parameters(), model.encoder_parameters())
        value = float(s.model.detach().mean())  # the objective per token
        if not math.isfinite(value):
            model.eval()
            return TrainResult(step + 1, time.perf_counter() - started, value, True)
        optimizer.step()
        if step >= steps - tail:
            tail_values.append(value)
        if score is not None and step + 1 in score_at:
            model.eval()
            score(step + 1)
            model.train()
    model.eval()
    return TrainResult(steps, time.perf_counter() - started, float(np.mean(tail_values)), False)


EVAL_TOKEN_SAMPLES = 2**16  # sample x token evaluations per evaluation chunk


@torch.no_grad()
def evaluate(model: SentenceVAE, sentences: Sequence[Tensor], eos_id: int, num_samples: int = 100,
             seed: int = 0) -> dict[str, float]:
    """Per-token NLL (-IWAE, eq. 5.8), KL (U^K - ln p^K, §5.7.1) and diagnostics with K = ``num_samples``.

    Also the per-token ELBO NLL of the same samples (>= the IWAE NLL by Jensen), the closed-form representational
    KL(q(z|x) || p(z)) per token, and the KL per sentence. Sentences are evaluated in length-sorted chunks without
    dropout; the sampling is seeded, so the result is a deterministic function of the model.
    """
    model.eval()
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    chunks: list[list[int]] = [[]]
    budget = 0
    for i in order:
        cost = num_samples * len(sentences[i])
        if chunks[-1] and budget + cost > EVAL_TOKEN_SAMPLES:
            chunks.append([])
            budget = 0
        chunks[-1].append(i)
        budget += cost
    totals = {"log_p": 0.0, "kl": 0.0, "elbo": 0.0, "q_kl": 0.0}
    device = next(model.parameters()).device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        for chunk in chunks:
            batch = pad_sentences([sentences[i] for i in chunk], eos_id)
            batch = SentenceBatch(*(t.to(device) for t in (batch.inputs, batch.targets, batch.mask, batch.lengths)))
            log_px_z, log_pz, log_qz = model.log_densities(batch, num_samples)  # [K, b] each
            totals["log_p"] += float(iwae_bound(log_px_z, log_pz, log_qz).sum())
            totals["kl"] += float(mutual_information(log_px_z, log_pz, log_qz).sum())
            totals["elbo"] += float((log_px_z + log_pz - log_qz).mean(0).sum())
            totals["q_kl"] += float(model.representational_kl(batch).sum())
    tokens = sum(len(s) for s in sentences)
    return {"nll": -totals["log_p"] / tokens, "kl": totals["kl"] / tokens, "elbo_nll": -totals["elbo"] / tokens,
            "q_kl": totals["q_kl"] / tokens, "kl_per_sentence": totals["kl"] / len(sentences),
            "sentences": len(sentences), "tokens": tokens}


DIVERGED_NLL = 10.0  # x ln V: an evaluated NLL per token this far above the uniform model's means a broken model


def run_trial(curve: Curve, params: Mapping[str, float], data: SentenceData, settings: MicmcoPtbParams,
              seed: int) -> tuple[dict[str, Any], SentenceVAE]:
    """Train one model of ``curve`` with ``params`` and evaluate it on the curve's split; returns (record, model).

    A trial diverged when its training objective became non-finite or when the evaluated NLL per token exceeds
    ``DIVERGED_NLL`` x ln V (a finite objective can still leave e.g. posterior means so large that the bound
    explodes); its NLL and KL are then NaN, which fails the Optuna trial.
    """
    device = stage_device()
    torch.manual_seed(seed)
    model = build_model(curve, params, settings, data.vocab_size).to(device)
    result = train(model, curve, params, data.train, data.eos_id, settings.steps * curve.steps_factor,
                   settings.batch_size * curve.batch_factor, seed)
    return trial_record(curve, result, model, data, settings, seed), model


def trial_record(curve: Curve, result: TrainResult, model: SentenceVAE, data: SentenceData,
                 settings: MicmcoPtbParams, seed: int) -> dict[str, Any]:
    """The record of a trained trial: its training outcome and, unless it diverged, its evaluation (seed + 1)."""
    record: dict[str, Any] = {"steps": result.steps, "train_seconds": round(result.seconds, 2),
                              "final_objective": result.final_objective, "diverged": result.diverged}
    diverged = {"diverged": True, "nll": math.nan, "kl": math.nan, "elbo_nll": math.nan, "q_kl": math.nan}
    if result.diverged:
        return {**record, **diverged, "eval_seconds": 0.0}
    started = time.perf_counter()
    scores = evaluate(model, data.split(curve.split), data.eos_id, settings.eval_samples, seed + 1)
    seconds = round(time.perf_counter() - started, 2)
    if not scores["nll"] <= DIVERGED_NLL * math.log(data.vocab_size):
        return {**record, **diverged, "eval_seconds": seconds}
    return {**record, **{k: scores[k] for k in ("nll", "kl", "elbo_nll", "q_kl")}, "eval_seconds": seconds}
