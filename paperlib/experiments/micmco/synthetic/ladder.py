"""A scale ladder for the synthetic MICMCO figures: do Melis Figs. 5.2, 5.3 and 5.6 move the thesis'
way as the training budget grows?

The ``micmco_synthetic`` stage draws every frontier after one budget (``steps``). Here the curves behind three of
the chapter's claims are trained, with the settings of that stage's profile (vocabulary, batch, model sizes,
evaluation), for a ladder of step budgets growing geometrically, ``rungs``:

- Fig. 5.2, "IWAE 1 ... much worse than the ELBO. As the number of samples grows, this is reversed": IWAE 16 beats
  the ELBO (KL objective; IWAE 1 is trained beside them and shown);
- Fig. 5.3, "DReG 16 improves on DReG 1" (KL objective);
- Fig. 5.6, "VIMCO 16 almost perfect": the better of VIMCO 16 KL / Rényi has an NLL within
  :data:`~paperlib.experiments.micmco.synthetic.micmco_synthetic.NEAR_OPTIMAL_NATS` of ln V at MI = 0.75 ln V (the rule of the
  stage's claim).

Each curve is a frontier over ``trials`` hyperparameter settings per seed. A trial's optimiser has a constant
learning rate (Adam, §5.C), so one run stopped and scored at each rung is the run of each budget: the scores are
taken in :func:`~paperlib.experiments.micmco.synthetic.micmco_synthetic.train`'s ``score`` hook with the random state set aside,
and a test checks a rung against a separate run of that length bit for bit. A seed s fixes everything a study's
seed fixes in the main stage (data stream, evaluation symbols, the Halton design, trial seeds), so seed 0 at the
main stage's budget repeats that stage's first trials exactly (the notebook checks it).

Per rung and seed: each curve's normalised hypervolume and its NLL at 0.75 ln V. The ladder's gap is signed the
thesis' way: the difference of two curves' hypervolumes, paired by seed, for Figs. 5.2/5.3 (its tie margin is
the larger of twice the standard error over seeds and the stage's hypervolume tie ``HV_TIE``, so the ladder
never calls a gap the figure's own rule calls a tie); ``NEAR_OPTIMAL_NATS`` minus the excess NLL over ln V for
Fig. 5.6 (positive: near-optimal; margin twice the standard error). A rung where some seed's frontier never
reaches 0.75 ln V has no gap (the claim fails there for that seed, and an average over the others would flatter
it); the ladder is read from the rungs with a gap, and only when the top rung has one
(:func:`paperlib.experiments.common.ladder.reading`).
With 3 seeds, 2 SE is a lenient test (a t quantile would be about 4.3); more seeds at the paper profile.
Convergence per curve and rung: the hypervolume three quarters into the rung against the rung's end
(:func:`paperlib.experiments.common.claims.convergence`); a rung converged when every curve did.

Departures from the thesis: every trial of the ladder comes from the Halton design (the main stage continues its
studies with a GP sampler, whose choices depend on the scores of one budget, so one run could not serve every
rung); at ``cpu`` the thesis' budget (V = 10,000, 20,000 steps, ~50 trials per curve) is far above the top rung.
Only the KL objective is laddered for Figs. 5.2/5.3 (the thesis says both objectives).
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import torch

from paperlib.data import uniform_symbols
from paperlib.device import Compute, current
from paperlib.experiments.common.claims import convergence, scoring_steps
from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.ladder import (LadderParams, finish_stage, map_jobs, mean_se, plan_runs,
                                         reading, repeat_check, runs_folder, seed_settings, start_stage)
from paperlib.experiments.common.config import register_experiment
from paperlib.experiments.micmco.synthetic.micmco_synthetic import (EXPERIMENT as MAIN, CONFIGURATIONS, HIGH_MI_FRACTION, HV_TIE,
                                                  NEAR_OPTIMAL_NATS, MicmcoSyntheticParams, build_model, evaluate,
                                                  start_design, summarise_configuration, train)
from paperlib.experiments.common.runs import run_once

NAME = "micmco_synthetic_ladder"
# the main stage's settings that change a run of the ladder (steps: the top rung)
_RUN_SETTINGS = ("steps", "batch_size", "vocab_size", "eval_symbols", "eval_samples", "hidden_size", "latent_dim",
                 "num_categorical", "categories", "threads")


@dataclass(frozen=True)
class Ladder:
    """One claim's ladder: ``kind`` "better" compares HV(curves[0]) - HV(curves[1]) per seed (further curves are
    trained and shown beside them); "optimum" takes the best of ``curves`` at MI = 0.75 ln V against ln V."""

    claim: str
    kind: str
    curves: tuple[str, ...]


LADDERS: dict[str, Ladder] = {
    "5.2": Ladder("IWAE 16 better than the ELBO", "better", ("iwae16_kl", "elbo", "iwae1_kl")),
    "5.3": Ladder("DReG 16 improves on DReG 1", "better", ("dreg16_kl", "dreg1_kl")),
    "5.6": Ladder("VIMCO 16 reaches near-optimal NLL at high MI", "optimum", ("vimco16_kl", "vimco16_renyi")),
}


@register_experiment(NAME)
@dataclass(frozen=True)
class MicmcoSyntheticLadderParams(LadderParams, ladders=LADDERS):
    """The synthetic ladder's own settings, ``figures`` from :data:`LADDERS`; the rest is ``micmco_synthetic``'s."""


def _run(name: str, seed: int, index: int, params: Mapping[str, float], settings: MicmcoSyntheticParams,
         steps: Sequence[int], path: str, device: str, compute: Compute | None = None) -> dict[str, Any]:
    """Train trial ``index`` of curve ``name`` at seed ``seed`` (the settings' ``steps`` long), scored at ``steps``;
    read back from ``path`` once done. ``compute``: the parent's precision settings, for a worker process."""
    def body() -> dict[str, Any]:
        config, trial_seed = CONFIGURATIONS[name], seed + 1000 * index  # the main stage's trial seed
        batches = uniform_symbols(settings.steps * settings.batch_size, settings.vocab_size, settings.seed)
        batches = batches.view(settings.steps, settings.batch_size).to(device)  # [steps, B]
        eval_set = uniform_symbols(settings.eval_symbols, settings.vocab_size, settings.seed + 1).to(device)
        torch.manual_seed(trial_seed)
        model = build_model(config, settings.vocab_size, settings.hidden_size, settings.latent_dim,
                            settings.num_categorical, settings.categories, params).to(device)
        scores: list[dict[str, float]] = []
        cuda = [torch.device(device).index or 0] if torch.device(device).type == "cuda" else []

        def score(step: int) -> None:
            with torch.random.fork_rng(devices=cuda):  # the training run continues with its own random state
                torch.manual_seed(trial_seed + 1)  # as run_trial seeds its evaluation
                nll, mi = evaluate(model, eval_set, settings.eval_samples)
            scores.append({"step": step, "nll": nll, "mi": mi})

        result = train(model, config, params, batches, steps, score)
        return {"configuration": name, "seed": seed, "trial": index, "params": dict(params), "scores": scores,
                "diverged_at": result.steps if result.diverged else None}

    return run_once(path, settings.threads, compute, body)


def run_folder(ladder: MicmcoSyntheticLadderParams, main: MicmcoSyntheticParams, runs_dir: str | os.PathLike) -> Path:
    """Where the ladder's runs live (:func:`~paperlib.experiments.common.ladder.runs_folder`): keyed on the rungs, the main
    stage's run settings, the code and the compute settings; more seeds, trials, figures or workers only add runs."""
    settings = seed_settings(main, 0, ladder.rungs[-1])
    return runs_folder(runs_dir, ladder, code_hash(__name__), {k: getattr(settings, k) for k in _RUN_SETTINGS})


def run_ladder(ladder: MicmcoSyntheticLadderParams, main: MicmcoSyntheticParams, runs_dir: str | os.PathLike,
               device: str = "cpu") -> list[dict[str, Any]]:
    """Every (curve, seed, trial) run, the costliest curves first; each is read back when already done."""
    top = ladder.rungs[-1]
    runs = plan_runs(ladder, run_folder(ladder, main, runs_dir),
                     lambda n, s: start_design(CONFIGURATIONS[n], ladder.trials, s),
                     lambda n: CONFIGURATIONS[n].num_samples * (1.6 if CONFIGURATIONS[n].base == "dreg" else 1.0))
    args = [(n, s, i, point, seed_settings(main, s, top), scoring_steps(ladder.rungs), path, str(device), current())
            for n, s, i, point, path in runs]
    records = map_jobs(_run, args, ladder.workers)
    return sorted(records, key=lambda r: (ladder.curves.index(r["configuration"]), r["seed"], r["trial"]))


def _at(record: Mapping[str, Any], step: int, mi_cap: float) -> dict[str, Any]:
    """A run's trial record at ``step`` in the main stage's shape (NaN after a divergence or for a non-finite score,
    which the JSON holds as None; MI capped at ln V)."""
    found = next((s for s in record["scores"] if s["step"] == step), None)
    nll, mi = (found["nll"], found["mi"]) if found else (math.nan, math.nan)
    nll, mi = (math.nan if v is None else v for v in (nll, mi))
    return {"number": record["trial"], "nll": nll, "mi": mi if not mi > mi_cap else mi_cap}


def frontiers(records: Sequence[Mapping[str, Any]], ladder: MicmcoSyntheticLadderParams,
              main: MicmcoSyntheticParams) -> dict[str, dict[str, dict[str, Any]]]:
    """Per curve, seed (as text) and scoring step: the frontier summary of the main stage
    (:func:`~paperlib.experiments.micmco.synthetic.micmco_synthetic.summarise_configuration`) with the NLL at 0.75 ln V."""
    optimum = math.log(main.vocab_size)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in ladder.curves:
        for seed in ladder.seeds:
            runs = [r for r in records if r["configuration"] == name and r["seed"] == seed]
            for step in scoring_steps(ladder.rungs):
                summary = summarise_configuration([_at(r, step, optimum) for r in runs], optimum,
                                                  main.hypervolume_margin, [HIGH_MI_FRACTION * optimum])
                out.setdefault(name, {}).setdefault(str(seed), {})[str(step)] = summary
    return out


def summarise(fronts: Mapping[str, Mapping[str, Mapping[str, Any]]], ladder: MicmcoSyntheticLadderParams,
              optimum: float) -> dict[str, Any]:
    """Per figure and rung: each curve's hypervolume (seed mean) and convergence, the gap signed the thesis' way
    with its standard error over seeds and tie margin (2 SE), then the ladder's reading."""
    seeds = [str(s) for s in ladder.seeds]
    out = {}
    for fig in ladder.figures:
        spec, rungs = LADDERS[fig], []
        for rung in ladder.rungs:
            quarter = str(rung - rung // 4)
            entry: dict[str, Any] = {"steps": rung, "curves": {}}
            for name in spec.curves:
                hv = [fronts[name][s][str(rung)]["normalised_hypervolume"] for s in seeds]
                earlier = [fronts[name][s][quarter]["normalised_hypervolume"] for s in seeds]
                rise = convergence([-h for h in earlier], [-h for h in hv])  # HV grows while learning
                entry["curves"][name] = {"hv": statistics.fmean(hv), "hv_sd": statistics.stdev(hv),
                                         "rise": rise["fall"], "margin": rise["margin"],
                                         "converged": rise["converged"]}
            entry["converged"] = all(c["converged"] for c in entry["curves"].values())
            if spec.kind == "better":
                a, b = spec.curves[:2]
                per_seed = [fronts[a][s][str(rung)]["normalised_hypervolume"]
                            - fronts[b][s][str(rung)]["normalised_hypervolume"] for s in seeds]
                floor = HV_TIE  # the figure's own tie: the ladder never calls a gap inside it
            else:
                excess = []
                for s in seeds:
                    reached = [fronts[n][s][str(rung)]["nll_at_mi"][0] for n in spec.curves]
                    reached = [v for v in reached if v is not None]
                    excess.append(min(reached) - optimum if reached else None)
                entry["excess"] = excess
                entry["reached"] = sum(e is not None for e in excess)
                # a seed whose frontier misses the MI level fails the claim there: no gap for the rung
                per_seed = [NEAR_OPTIMAL_NATS - e for e in excess] if None not in excess else []
                floor = 0.0
            entry["per_seed"] = per_seed
            if len(per_seed) >= 2:
                gap, se = mean_se(per_seed)
                entry.update(gap=gap, se=se, margin=max(2 * se, floor))
            rungs.append(entry)
        out[fig] = {**dataclasses.asdict(spec), "labels": [CONFIGURATIONS[c].label for c in spec.curves],
                    "rungs": rungs, "reading": reading(rungs)}
    return out


def main_stage_check(ladder_results: Mapping[str, Any], main_results: Mapping[str, Any]) -> dict[str, Any] | None:
    """Seed ``main.seed`` at the main stage's budget repeats that stage's Halton trials: the largest difference in
    (NLL, capped MI) over the start-design trials both ran, all curves together (a run that diverged in one and
    not the other counts as an infinite difference); None when no rung equals the main budget. Trials are matched
    by their place among the study's finished trials (the stage's records leave interrupted ones out, whose
    numbers Optuna skips)."""
    startup = main_results["settings"]["startup_trials"]

    def pairs(step: int, seed: int) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any]]]:
        for run in ladder_results["runs"]:
            conf = main_results["configurations"].get(run["configuration"])
            if conf is not None and run["seed"] == seed and run["trial"] < min(startup, len(conf["trials"])):
                yield conf["trials"][run["trial"]], _at(run, step, main_results["optimum_nll"])

    return repeat_check(ladder_results, main_results, pairs, ("nll", "mi"))


def run_micmco_synthetic_ladder(profile: str | None = None, progress: bool = True,
                                runs_dir: str | os.PathLike | None = None,
                                out: str | os.PathLike | None = None) -> Path:
    """The DVC stage: settings from params.yaml, results to ``results/micmco_synthetic_ladder.json``."""
    stage = start_stage(NAME, MAIN, profile, runs_dir, progress)
    ladder, main = stage.ladder, stage.main
    records = run_ladder(ladder, main, stage.runs_dir, stage.device)
    optimum = math.log(main.vocab_size)
    fronts = frontiers(records, ladder, main)
    results = {
        "experiment": NAME, "profile": stage.profile, "settings": dataclasses.asdict(ladder),
        "training": {k: getattr(main, k) for k in ("vocab_size", "batch_size", "eval_symbols", "eval_samples",
                                                    "hidden_size", "hypervolume_margin")},
        "optimum_nll": optimum, "mi_level": HIGH_MI_FRACTION * optimum, "near_optimal_nats": NEAR_OPTIMAL_NATS,
        "ladders": summarise(fronts, ladder, optimum),
        "frontiers": fronts,
        "runs": [{k: v for k, v in r.items() if k != "seconds"} for r in records],
    }
    return finish_stage(stage, results, records, "configuration", MAIN, code_hash(__name__), out)
