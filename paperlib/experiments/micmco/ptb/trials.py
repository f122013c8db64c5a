"""One trial (build, train, evaluate a sentence VAE) and one resumable Optuna study per curve."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from paperlib.experiments.common.code_hash import code_hash
from paperlib.data import SentenceBatch, pad_sentences
from paperlib.device import cache_key
from paperlib.experiments.common.stage import setup_stage, stage_device
from paperlib.estimators import Surrogates, iwae_bound, mutual_information
from paperlib.experiments.micmco.synthetic.micmco_synthetic import (
    TrainResult, fail_stale_trials, halton_design, open_study, step_surrogates, suggest_space, trial_index,
    trial_records, tune,
)
from paperlib.models.masks import DropoutRates
from paperlib.models.sentence_vae import SentenceVAE
from paperlib.experiments.micmco.ptb.design import CURVES, Curve, EXPERIMENT, MicmcoPtbParams, curve_of
from paperlib.experiments.micmco.ptb.data import SentenceData, _batch_stream, load_data


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
    stream = _batch_stream(sentences, batch_size, eos_id, seed)
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


# ---------------------------------------------------------------------------------------------------
# studies (one per curve, resumable)


def study_name(curve_name: str, profile: str, settings: MicmcoPtbParams) -> str:
    code = code_hash("paperlib.experiments.micmco.ptb.micmco_ptb")  # a study made by other code (of the stage) starts anew
    return f"{curve_name}-{profile}-{settings.trial_fingerprint()}-{code[:8]}" + "".join(f"-{v}" for v in cache_key().values())


def _checkpoint_path(runs_dir: Path, study: str) -> Path:
    return runs_dir / f"{study}.best.pt"


def _save_checkpoint(path: Path, trial: int, model: SentenceVAE) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save({"trial": trial, "state": model.state_dict()}, tmp)
    os.replace(tmp, path)


def run_curve_study(name: str, settings: MicmcoPtbParams, data: SentenceData, runs_dir: str | os.PathLike,
                    profile: str, progress: bool = False) -> list[dict[str, Any]]:
    """Tune curve ``name`` until ``settings.trials`` trials have finished (resuming its SQLite study).

    The tuner sees (NLL, min(KL, ``kl_cap``)) per token; the raw KL estimate is kept as ``kl_estimate``. The model
    of the best trial so far (lowest NLL) is saved for Table 5.1. Returns the trial records (``kl`` = capped KL).
    """
    import optuna

    curve = CURVES[name] if name in CURVES else curve_of(name)
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    study_id = study_name(name, profile, settings)
    study = open_study(study_id, f"sqlite:///{runs_dir / study_id}.sqlite3", settings.seed, settings.startup_trials)
    fail_stale_trials(study)
    space = curve.space
    design = halton_design(space, settings.startup_trials, settings.seed)
    checkpoint = _checkpoint_path(runs_dir, study_id)

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        params = suggest_space(trial, space)
        record, model = run_trial(curve, params, data, settings, settings.seed + 1000 * trial_index(trial))
        for key in ("steps", "train_seconds", "eval_seconds", "final_objective", "diverged", "elbo_nll", "q_kl"):
            trial.set_user_attr(key, record[key])
        trial.set_user_attr("kl_estimate", record["kl"])
        best = min((t.values[0] for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))),
                   default=math.inf)
        if math.isfinite(record["nll"]) and record["nll"] < best:
            _save_checkpoint(checkpoint, trial.number, model)
        if progress:
            shown = ", ".join(f"{k}={v:.3g}" for k, v in params.items())
            print(f"  {curve.label:<22} {curve.regime:<6} trial {trial.number:>3}: NLL {record['nll']:.4f}  "
                  f"KL {record['kl']:.4f}  ({shown}; {record['train_seconds']:.0f}+{record['eval_seconds']:.0f}s)",
                  flush=True)
        return record["nll"], (record["kl"] if not record["kl"] > settings.kl_cap else settings.kl_cap)

    tune(study, objective, design, settings.trials)
    records = trial_records(study)
    for r in records:
        r["kl"] = r.pop("mi")
    return records


def _study_job(name: str, settings: MicmcoPtbParams, runs_dir: str, profile: str, progress: bool,
               data_root: str | None, data: SentenceData | None) -> tuple[str, list[dict[str, Any]], float]:
    import optuna

    torch.set_num_threads(settings.threads)
    setup_stage(profile)  # precision in this (possibly spawned) worker
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if data is None:
        data = load_data(settings, data_root)
    if progress:
        print(f"{EXPERIMENT} [{profile}]: {name} ({CURVES[name].label}, {CURVES[name].regime})", flush=True)
    started = time.time()
    records = run_curve_study(name, settings, data, runs_dir, profile, progress)
    return name, records, round(time.time() - started, 1)
