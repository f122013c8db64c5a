"""MICMCO on synthetic data: rate vs data-fit Pareto frontiers, Melis thesis §5.7.1, §5.A, §5.B.3, §5.C.

Every data point is one symbol drawn uniformly from a vocabulary of V = 10,000, so the optimal NLL is
ln V ≈ 9.210 and a model can reach it while ignoring its latents; the experiments ask how much of the
latents' capacity (the mutual information I_p(X, Z), up to H(X) = ln V) each estimator of the objective
(5.5)/(5.6) can use before the data fit suffers.

**Models** (§5.7.1): :mod:`paperlib.models.symbol_vae` (Gaussian, categorical and VQ-VAE models of one symbol).

**Training** (§5.C): one step draws a batch of symbols, evaluates the chosen objective (KL (5.11), Renyi (5.15),
power (5.18), or the beta-VAE with analytic KL for the "ELBO" base estimator) with the chosen gradient estimator of
:mod:`paperlib.estimators` and sample counts (including the asymmetric 16/1 and 1/16 of Figs. 5.4/5.7), and takes
an Adam step with beta_1 = 0, beta_2 = 0.999, eps = 1e-8. :func:`evaluate` returns the NLL by IWAE and the mutual
information by :func:`~paperlib.estimators.mutual_information`, both with K = 100, averaged over a fixed set of
evaluation symbols.

**Frontiers**: :mod:`paperlib.frontiers` (Pareto fronts, hypervolumes, NLL at given MI), and
:func:`claim_verdicts`, the explicit rules deciding which of the thesis' claims our frontiers reproduce.

**Studies**: every configuration (:data:`CONFIGURATIONS`, grouped by thesis figure in :data:`FIGURES`) is tuned by an
Optuna multi-objective study over the ranges of Table 5.2 (:func:`search_space`); :func:`run_study` is resumable
from a SQLite file, and :func:`run_micmco_synthetic` runs every study of a ``params.yaml`` profile and writes
``results/micmco_synthetic.json``.

Departures from the thesis (which does not give them, or where we chose differently):

- Batch size, number of optimisation steps and the number of tuning trials are not given for the synthetic task;
  they are ``params.yaml`` settings (the ``cpu`` profile also shrinks the vocabulary, see there).
- The thesis tunes with batched Gaussian-process bandits (Golovin et al. 2017). We start each study with a scrambled
  Halton design of ``startup_trials`` points (enqueued one by one, so a resumed study continues the same sequence)
  and continue with Optuna's GP sampler (log expected hypervolume improvement for two objectives).
- Table 5.2 labels the alpha range [0.86, 16] (log) "power objective only", while §5.7.2 says alpha is also tuned for
  the Renyi objective; we use the same range for both. The VQ decay range [0.9, 0.99999] "log" is taken as
  log-uniform in 1 - decay in [1e-5, 0.1].
- With the analytic-KL "ELBO" base estimator the KL and Renyi objectives both equal the beta-VAE with
  beta = 1 - lambda exactly (Prop. 13 with the KL in closed form; the Renyi divergence estimate (5.16) becomes the
  analytic KL for every alpha), so one study ("elbo") stands for both markers of Figs. 5.2/5.3.
- The VQ-VAE posterior is deterministic and its prior uniform, so the MI estimate (U^K - ln p^K with samples from q)
  is exactly L ln C and the IWAE NLL is -ln p(x|z_q) + L ln C for every K ("the KL cost ... is fixed", §5.A); we
  evaluate it with one sample. Codebooks are per latent (so the decoder can sum the L code vectors, as it sums the
  embeddings of categorical latents) and updated by exponential moving averages with Laplace smoothing
  (van den Oord et al. 2017, appendix).
- Figs. 5.26/5.27 do not state the sample count of the power objective; we use 16 samples (the best KL/Renyi runs).
- MI estimates above H(X) = ln V (which only loose bounds produce) are capped at ln V for the tuner, the frontiers
  and the hypervolume; the raw estimate is kept in each trial record.
- "q(z|x) is proportional to exp(o)" with o the last encoder layer's output: for categorical latents we take that
  layer to be affine (8 x 10 unbounded logits), as f and g are for continuous ones; a tanh layer of width 128 could
  neither match the number of logits nor make q sharp.

Modules: :mod:`.design` (configurations, figures, Table 5.2 ranges), :mod:`.trials` (model, training, evaluation),
:mod:`.verdicts` (the stage's own claim verdicts), :mod:`.studies` (settings, resumable studies); this module runs the
stage and re-exports their public names, and those of the models and frontiers it uses. The claims the results
index reads are :mod:`.claims`, the ladder stage is :mod:`.ladder`.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict
from pathlib import Path

from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.runs import json_safe, map_jobs
from paperlib.experiments.common.stage import results_path, setup_stage
from paperlib.symbol_vae import CategoricalVAE, GaussianVAE, LatentVariableModel, VQVAE
from paperlib.frontiers import hypervolume, nll_at_mi, pareto_front
from paperlib.experiments.micmco.synthetic.design import (
    CONFIGURATIONS, Configuration, EXPERIMENT, FIGURES, Figure, Range, TABLE_5_2, halton_design, search_space,
    start_design, suggest, suggest_space,
)
from paperlib.experiments.micmco.synthetic.trials import TrainResult, build_model, evaluate, step_surrogates, train
from paperlib.experiments.micmco.synthetic.verdicts import (
    HIGH_MI_FRACTION, HV_TIE, NEAR_OPTIMAL_NATS, claim_verdicts, high_mi_excess, verdict_of,
)
from paperlib.experiments.micmco.synthetic.studies import (
    MicmcoSyntheticParams, _study_cost, _study_job, fail_stale_trials, open_study, run_study, run_trial,
    study_name, summarise_configuration, trial_index, trial_records, tune,
)


def run_micmco_synthetic(profile: str | None = None, progress: bool = True, runs_dir: str | os.PathLike | None = None,
                         out: str | os.PathLike | None = None) -> Path:
    """Run (or resume) every study of the profile and write ``results/micmco_synthetic.json`` plus provenance.

    Each study is a SQLite file ``runs/micmco_synthetic/<config>-<profile>-<settings hash>-<code hash>.sqlite3``;
    rerunning after an interruption continues every study where it stopped. With ``workers > 1`` studies run in
    parallel processes (``threads`` torch threads each), longest first.
    """
    from paperlib.experiments.common.config import active_profile, experiment_params, load_params, repo_root
    from paperlib.experiments.common.provenance import provenance
    from paperlib.atomic_files import write_json_atomic

    started = time.time()
    root = repo_root()
    params = load_params()
    profile = active_profile(profile, params)
    settings: MicmcoSyntheticParams = experiment_params(EXPERIMENT, profile, params)
    setup_stage(profile, params)
    runs_dir = Path(runs_dir) if runs_dir is not None else root / "runs" / EXPERIMENT
    runs_dir.mkdir(parents=True, exist_ok=True)
    names = sorted(settings.selected, key=_study_cost, reverse=True)
    jobs = [(name, settings, str(runs_dir), profile, progress) for name in names]
    finished = map_jobs(_study_job, jobs, settings.workers)
    optimum = math.log(settings.vocab_size)
    levels = [f * optimum for f in settings.mi_fractions]
    configurations, seconds = {}, {}
    for name, records, elapsed in sorted(finished, key=lambda job: settings.selected.index(job[0])):
        config = CONFIGURATIONS[name]
        seconds[name] = elapsed
        configurations[name] = {
            "label": config.label, **asdict(config), "search_space": list(config.hyperparameters),
            "trials": records, **summarise_configuration(records, optimum, settings.hypervolume_margin, levels),
        }
    results = {
        "experiment": EXPERIMENT, "profile": profile, "settings": asdict(settings),
        "optimum_nll": optimum, "mi_levels": levels,
        "reference_point": {"nll": optimum + settings.hypervolume_margin, "mi": 0.0, "mi_cap": optimum},
        "figures": {k: asdict(f) for k, f in FIGURES.items()},
        "configurations": configurations,
    }
    results["claims"] = claim_verdicts(results)
    out = Path(out) if out is not None else results_path(root, EXPERIMENT, profile)
    write_json_atomic(out, json_safe(results))
    write_json_atomic(out.with_suffix(".provenance.json"),
                      {**provenance(root, profile, asdict(settings), None, started,
                                    code=code_hash(__name__)), "study_seconds": seconds})
    return out


__all__ = [
    "CONFIGURATIONS", "EXPERIMENT", "FIGURES", "HIGH_MI_FRACTION", "HV_TIE", "NEAR_OPTIMAL_NATS", "TABLE_5_2", "VQVAE",
    "CategoricalVAE", "Configuration", "Figure", "GaussianVAE", "LatentVariableModel", "MicmcoSyntheticParams", "Range",
    "TrainResult", "build_model", "claim_verdicts", "evaluate", "fail_stale_trials", "halton_design", "high_mi_excess",
    "hypervolume",
    "json_safe", "nll_at_mi", "open_study", "pareto_front", "run_micmco_synthetic", "run_study", "run_trial",
    "search_space", "start_design", "step_surrogates", "study_name", "suggest", "suggest_space",
    "summarise_configuration", "train", "trial_index", "trial_records", "tune", "verdict_of",
]
