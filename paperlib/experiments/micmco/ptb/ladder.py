"""A scale ladder for MICMCO on Penn Treebank: do Melis Figs. 5.8, 5.9, 5.10/5.12 and Table 5.1 move
the thesis' way as the training budget grows?

The ``micmco_ptb`` stage draws every frontier after one budget (``steps``). Here the curves behind the chapter's key
PTB claims are trained, with the settings of that stage's profile (vocabulary, batch, model size, sentences,
evaluation), for a ladder of step budgets growing geometrically, ``rungs``:

- Fig. 5.8, "16 samples improve on 1 ... only with Rényi at high KL": DReG 16 (Rényi) beats DReG 1 on the
  training fit;
- Fig. 5.9, "16 samples improve markedly with either objective": VIMCO 16 (KL) beats VIMCO 1 on the training fit;
- Figs. 5.10 against 5.12, shared dropout masks restore the validation frontiers: DReG 16 (Rényi) with masks shared
  across the latent samples beats it with naive masks;
- Fig. 5.12, "multi-sample improves latent usage": with shared masks, DReG 16 (Rényi) beats DReG 1 on validation;
- Fig. 5.11, the same with L2 instead of dropout ("multiple samples significantly improve efficiency"), and "with
  only L2 regularization, the best NLL is higher than with dropout": DReG 16 (Rényi)'s best validation NLL with
  shared dropout masks below its best with L2;
- Table 5.1, "latents barely change the best perplexity": the best validation perplexities of DReG 16 (Rényi) and
  DReG 1 (shared masks) within :data:`~paperlib.experiments.micmco.ptb.micmco_ptb.PPL_TOLERANCE` of each other, as a seed mean
  of the signed change (a best trial out of a few is partly hyperparameter luck, which averages out); and "the
  optima are at low latent usage": the KL of both best trials at most
  :data:`~paperlib.experiments.micmco.ptb.micmco_ptb.LOW_KL` nats per token.

Each curve is a frontier over ``trials`` Halton points per seed. A trial's Adam has a constant learning rate
(§5.C), so one run stopped and scored at each rung is the run of each budget: the scores come from
:func:`~paperlib.experiments.micmco.ptb.micmco_ptb.train`'s ``score`` hook (:func:`~paperlib.experiments.micmco.ptb.micmco_ptb.evaluate`
sets the random state aside), and a test checks a rung against a separate ``run_trial`` of that length bit for bit.
A seed s fixes what a study's seed fixes in the main stage (the evaluation subsets, the Halton design, trial seeds
s + 1000 i), so seed 0 at the main stage's budget repeats that stage's start-design trials (the notebook checks it).

Per rung and seed the gap is signed the thesis' way: for the "better" ladders the difference of the two curves'
normalised hypervolumes on the pair's common reference (:func:`~paperlib.experiments.micmco.ptb.micmco_ptb.compare_hypervolumes`;
the stage's claims take the reference of a figure's whole trio of 1, 16 KL and 16 Rényi); its tie margin is twice
the standard error over seeds, measured at that rung, not the stage's fixed hypervolume tie ``HV_TIE``:
at this scale the latents carry a few hundredths of a nat per token, every hypervolume is a few hundredths, and the
fixed tie would hide gaps that every seed shows (the index gives the stage's reading beside the ladder's). For
Table 5.1 the tolerance minus the measured quantity (positive: the claim holds), margin twice the standard error.
With 3 seeds, 2 SE is a lenient test (a t quantile would be about 4.3); more seeds at the paper profile. The reading
is :func:`paperlib.experiments.common.ladder.reading`. Convergence per curve and rung: its best NLL three quarters into
the rung against the rung's end (:func:`paperlib.experiments.common.claims.convergence`); a rung converged when every
curve did.

Departures from the thesis: every trial of the ladder comes from the Halton design (the stage continues its
studies with a GP sampler, whose picks depend on one budget's scores); Table 5.1's quantities are read on the
validation subset the trials are scored on (the stage evaluates the best trials on the test set with 500
samples); only one 16-sample objective per figure (the one the thesis says improves); at ``cpu`` the thesis' budget
(hidden 128, the full vocabulary, 40,000 steps of 64 sentences, ~100 trials per curve) is far above the top rung.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import torch

from paperlib.device import Compute, current
from paperlib.experiments.common.claims import Part, convergence, scoring_steps
from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.config import register_experiment, section_params
from paperlib.experiments.common.ladder import (LadderParams, claim_part, finish_stage, map_jobs, mean_se,
                                         plan_runs, reading, repeat_check, runs_folder, seed_settings, start_stage)
from paperlib.experiments.micmco.ptb.micmco_ptb import (CURVES, DIVERGED_NLL, EXPERIMENT as MAIN, LOW_KL, PPL_TOLERANCE,
                                            MicmcoPtbParams, SentenceData, build_model, compare_hypervolumes,
                                            evaluate, load_data, train)
from paperlib.experiments.micmco.ptb.stacked_trials import StackedTrials, TrialSpec
from paperlib.experiments.micmco.synthetic.micmco_synthetic import HV_TIE, halton_design
from paperlib.experiments.common.runs import TimeLimitReached, json_safe, run_once, stop_time

NAME = "micmco_ptb_ladder"


@dataclass(frozen=True)
class Ladder:
    """One claim's ladder. ``kind`` "better": HV(curves[0]) - HV(curves[1]) per seed; "lower": best NLL of
    curves[1] - best NLL of curves[0] per seed (positive: curves[0] reaches the lower NLL); "perplexity": the tolerance
    minus |seed mean of (best perplexity of curves[0] / that of curves[1] - 1)|; "latents": the low-KL line minus
    the larger KL of the curves' best trials."""

    claim: str
    kind: str
    curves: tuple[str, str]

    def __post_init__(self) -> None:
        stretched = [c for c in self.curves if CURVES[c].steps_factor != 1]
        if stretched:  # the rungs are the curves' step counts; a T×n curve would be scored mid-run
            raise ValueError(f"a ladder's curves must train for the profile's steps; {stretched} do not")


LADDERS: dict[str, Ladder] = {
    "5.8": Ladder("DReG 16 (Rényi) improves on DReG 1 (training fit)", "better",
                  ("dreg16_renyi.train", "dreg1.train")),
    "5.9": Ladder("VIMCO 16 (KL) improves on VIMCO 1 (training fit)", "better", ("vimco16_kl.train", "vimco1.train")),
    "5.10": Ladder("shared dropout masks beat naive ones (DReG 16 Rényi, validation)", "better",
                   ("dreg16_renyi.shared", "dreg16_renyi.naive")),
    "5.12": Ladder("with shared masks, DReG 16 (Rényi) improves on DReG 1 (validation)", "better",
                   ("dreg16_renyi.shared", "dreg1.shared")),
    "5.11": Ladder("with L2 instead of dropout, DReG 16 (Rényi) improves on DReG 1 (validation)", "better",
                   ("dreg16_renyi.l2", "dreg1.l2")),
    "5.11-dropout": Ladder("dropout reaches a lower best NLL than L2 (DReG 16 Rényi, validation)", "lower",
                           ("dreg16_renyi.shared", "dreg16_renyi.l2")),
    "T5.1-perplexity": Ladder("latents barely change the best perplexity (DReG 16 Rényi against DReG 1)", "perplexity",
                              ("dreg16_renyi.shared", "dreg1.shared")),
    "T5.1-latents": Ladder("the best models use the latents little (DReG 16 Rényi and DReG 1)", "latents",
                           ("dreg16_renyi.shared", "dreg1.shared")),
}
_QUANTITY = {"better": "HV difference", "lower": "best-NLL difference (nats per token)",
             "perplexity": "tolerance − |seed-mean perplexity change|",
             "latents": "low-KL line − KL at the best trial"}


@register_experiment(NAME)
@dataclass(frozen=True)
class MicmcoPtbLadderParams(LadderParams, ladders=LADDERS):
    """The PTB ladder's settings (:class:`~paperlib.experiments.common.ladder.LadderParams`: which figures of
    :data:`LADDERS`, rungs, seeds, trials, workers); each run's own are ``micmco_ptb``'s in the same profile.

    ``stack_size``: train each curve's runs (its seeds' trials, in plan order) in stacks of at most this many, each
    one stacked model (:mod:`~paperlib.experiments.micmco.ptb.stacked_trials`) checkpointed at every scoring step,
    instead of one job per run (None, the default): the same runs up to float rounding, in a fraction of the kernel
    launches (for GPUs; on a CPU it is slower)."""

    stack_size: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.stack_size is not None and (isinstance(self.stack_size, bool) or self.stack_size < 1):
            raise ValueError(f"stack_size must be None (separate runs) or a positive integer, got {self.stack_size!r}")


def _run(name: str, seed: int, index: int, params: Mapping[str, float], settings: MicmcoPtbParams,
         steps: Sequence[int], path: str, device: str, data: SentenceData | None, data_root: str | None,
         compute: Compute | None = None) -> dict[str, Any]:
    """Train trial ``index`` of curve ``name`` at seed ``seed`` (the settings' ``steps`` long), scored at ``steps``
    as the main stage's ``run_trial`` scores a trial; read back from ``path`` once done. ``data``: the sentences
    (else loaded from ``data_root`` for this seed); ``compute``: the parent's precision settings, for a worker."""
    def body() -> dict[str, Any]:
        loaded = data if data is not None else load_data(settings, data_root)
        curve, trial_seed = CURVES[name], seed + 1000 * index  # the main stage's trial seed
        torch.manual_seed(trial_seed)
        model = build_model(curve, params, settings, loaded.vocab_size).to(device)
        scores: list[dict[str, float]] = []

        def score(step: int) -> None:
            found = evaluate(model, loaded.split(curve.split), loaded.eos_id, settings.eval_samples, trial_seed + 1)
            scores.append({"step": step, "nll": found["nll"], "kl": found["kl"]})

        result = train(model, curve, params, loaded.train, loaded.eos_id, settings.steps * curve.steps_factor,
                       settings.batch_size * curve.batch_factor, trial_seed, steps, score)
        return {"curve": name, "seed": seed, "trial": index, "params": dict(params), "scores": scores,
                "diverged_at": result.steps if result.diverged else None}

    return run_once(path, settings.threads, compute, body, encode=json_safe)


def run_folder(ladder: MicmcoPtbLadderParams, main: MicmcoPtbParams, runs_dir: str | os.PathLike) -> Path:
    """Where the ladder's runs live (:func:`~paperlib.experiments.common.ladder.runs_folder`): keyed on the rungs, the main
    stage's trial settings at the top rung, its torch threads, the code and the compute settings."""
    own = dataclasses.replace(main, stack_size=None)  # how the main stage batches its studies changes no ladder run
    key: dict[str, Any] = {"trial": seed_settings(own, 0, ladder.rungs[-1]).trial_fingerprint(), "threads": main.threads}
    if ladder.stack_size is not None:  # equal to separate runs up to rounding, not bit for bit: their own folder
        key["stacked"] = True
    return runs_folder(runs_dir, ladder, code_hash(__name__), key)


def _run_stack(name: str, runs: Sequence[tuple[int, int, Mapping[str, float], str]], ladder: MicmcoPtbLadderParams,
               main: MicmcoPtbParams, device: str, data: SentenceData | None, data_root: str | None,
               checkpoint: Path, deadline: float | None = None) -> bool:
    """Train the runs ``(seed, trial, point, path)`` of curve ``name`` as one stack, scored as :func:`_run` scores
    a run (the same evaluation subsets and seeds), and write each run's record to its path.

    The stack (and the scores so far) is saved to ``checkpoint`` after every scoring step, and when ``deadline``
    (``time.time()``) passes, and continued from there by a later call (a checkpoint of other runs, left by other
    settings, is replaced); the file goes once every record is written. Returns False when the deadline stopped it.
    Every seed trains on the same training sentences (a seed changes only the evaluation subsets), so the stack
    reads the first seed's. A run's ``seconds`` is its share of the stack's training time.
    """
    from paperlib.atomic_files import write_json_atomic

    curve, top = CURVES[name], ladder.rungs[-1]
    seeds = sorted({seed for seed, *_ in runs})
    loaded = {s: data if data is not None else load_data(seed_settings(main, s, top), data_root) for s in seeds}
    settings = seed_settings(main, seeds[0], top)
    specs = [TrialSpec(dict(point), seed + 1000 * index) for seed, index, point, _ in runs]  # _run's trial seeds
    first = loaded[seeds[0]]
    stack = None
    if checkpoint.is_file():
        try:
            stack = StackedTrials.load(checkpoint, curve, specs, settings, first, device)
        except ValueError:  # another stack's
            checkpoint.unlink()
    if stack is None:
        stack = StackedTrials(curve, specs, settings, first, device)
    scores: list[list[dict[str, float]]] = stack.extra.get("scores", [[] for _ in specs])
    for step in scoring_steps(ladder.rungs):
        if step <= stack.step_count:
            continue  # scored before the checkpoint
        stack.run(until=step, deadline=deadline)
        if stack.step_count < step:  # stopped by the deadline
            stack.save(checkpoint, extra={"scores": scores})
            return False
        for k, (seed, _, _, _) in enumerate(runs):
            if stack.stopped[k] is None:  # as train's score hook, which a diverged run no longer calls
                found = evaluate(stack.models[k], loaded[seed].split(curve.split), first.eos_id, settings.eval_samples,
                                 specs[k].seed + 1)
                scores[k].append({"step": step, "nll": found["nll"], "kl": found["kl"]})
        stack.save(checkpoint, extra={"scores": scores})
    seconds = round(stack.seconds / len(runs), 1)
    for k, (seed, index, point, path) in enumerate(runs):
        write_json_atomic(path, json_safe({
            "curve": name, "seed": seed, "trial": index, "params": dict(point), "scores": scores[k],
            "diverged_at": stack.stopped[k], "seconds": seconds, "chunks": stack.chunks, "stacked_with": len(runs)}))
    checkpoint.unlink()
    return True


def run_ladder(ladder: MicmcoPtbLadderParams, main: MicmcoPtbParams, runs_dir: str | os.PathLike,
               device: str = "cpu", data: SentenceData | None = None,
               data_root: str | os.PathLike | None = None, deadline: float | None = None) -> list[dict[str, Any]]:
    """Every (curve, seed, trial) run, the costliest curves first; each is read back when already done.

    Give ``data`` (the same sentences for every seed; needs ``workers == 1``) or ``data_root`` (each run loads its
    seed's sentences, as the main stage's study of that seed would). With stacks (``stack_size``), a ``deadline``
    (``time.time()``) stops the work there, the running stack checkpointed, and raises
    :class:`~paperlib.experiments.common.runs.TimeLimitReached`; the same call continues it. No stack starts when
    the time left is shorter than the last stack of the call took."""
    if (data is None) == (data_root is None):
        raise ValueError("give the sentences (data=...) or the corpus folder (data_root=...), not both")
    if deadline is not None and ladder.stack_size is None:
        raise ValueError("a time limit needs stacks (stack_size): separate runs cannot stop part-way")
    if data is not None and ladder.workers > 1:
        raise ValueError("in-memory data needs workers == 1; give data_root for parallel workers")
    top, root = ladder.rungs[-1], None if data_root is None else str(data_root)
    folder = run_folder(ladder, main, runs_dir)
    runs = plan_runs(ladder, folder, lambda n, s: halton_design(CURVES[n].space, ladder.trials, s),
                     lambda n: CURVES[n].cost)
    if ladder.stack_size is not None:
        size, last = ladder.stack_size, 0.0  # last: seconds the last stack of this call took
        for name in dict.fromkeys(n for n, *_ in runs):  # the costliest curves first
            mine = [(s, i, point, path) for n, s, i, point, path in runs if n == name]
            for k in range(0, len(mine), size):  # fixed groups: an interrupted stack finds its checkpoint again
                group = [run for run in mine[k : k + size] if not Path(run[-1]).is_file()]
                if not group:
                    continue
                done = sum(Path(path).is_file() for *_, path in runs)
                if deadline is not None and time.time() + last >= deadline:  # (a stack it would not finish)
                    raise TimeLimitReached(f"{NAME} stopped at its time limit with {done} of {len(runs)} runs done; "
                                           "the same command continues")
                started = time.time()
                if not _run_stack(name, group, ladder, main, str(device), data, root,
                                  folder / f"{name}.stack{k // size}.pt", deadline):
                    raise TimeLimitReached(
                        f"{NAME} stopped at its time limit with {done} of {len(runs)} runs done; {name}'s stack "
                        f"{k // size} is checkpointed in {folder}; the same command continues")
                last = time.time() - started
        records = [json.loads(Path(path).read_text()) for *_, path in runs]
    else:
        args = [(n, s, i, point, seed_settings(main, s, top), scoring_steps(ladder.rungs), path, str(device), data,
                 root, current()) for n, s, i, point, path in runs]
        records = map_jobs(_run, args, ladder.workers)
    return sorted(records, key=lambda r: (ladder.curves.index(r["curve"]), r["seed"], r["trial"]))


def _at(record: Mapping[str, Any], step: int, main: MicmcoPtbParams, vocab_size: int) -> dict[str, Any]:
    """A run's trial record at ``step`` in the main stage's shape: NaN after a divergence, for a non-finite score
    (None in the JSON) or for an NLL beyond the stage's divergence line; KL capped at ``kl_cap``."""
    found = next((s for s in record["scores"] if s["step"] == step), None)
    nll, kl = (found["nll"], found["kl"]) if found else (math.nan, math.nan)
    nll, kl = (math.nan if v is None else v for v in (nll, kl))
    if not (nll <= DIVERGED_NLL * math.log(vocab_size) and math.isfinite(kl)):  # Optuna fails either as a whole
        nll, kl = math.nan, math.nan
    return {"number": record["trial"], "nll": nll, "kl": kl if not kl > main.kl_cap else main.kl_cap}


def trials_at(records: Sequence[Mapping[str, Any]], ladder: MicmcoPtbLadderParams, main: MicmcoPtbParams,
              vocab_size: int) -> dict[str, dict[str, dict[str, list[dict[str, Any]]]]]:
    """Per curve, seed (as text) and scoring step: the trial records (:func:`_at`), by trial."""
    out: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {}
    for name in ladder.curves:
        for seed in ladder.seeds:
            runs = [r for r in records if r["curve"] == name and r["seed"] == seed]
            for step in scoring_steps(ladder.rungs):
                out.setdefault(name, {}).setdefault(str(seed), {})[str(step)] = [_at(r, step, main, vocab_size)
                                                                                 for r in runs]
    return out


def _best(trials: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    finite = [t for t in trials if math.isfinite(t["nll"])]
    return min(finite, key=lambda t: t["nll"]) if finite else None


def _seed_value(spec: Ladder, trials: Mapping[str, Sequence[Mapping[str, Any]]], main: MicmcoPtbParams
                ) -> float | None:
    """One seed's quantity at one scoring step (None: no finite trial to judge): for "better", "lower" and "latents"
    the gap itself, signed so that positive agrees with the thesis; for "perplexity" the signed relative change of
    the best perplexity, ppl(curves[0]) / ppl(curves[1]) - 1 (:func:`_gap` takes its seed mean against the
    tolerance)."""
    a, b = spec.curves
    if spec.kind == "better":
        hv = compare_hypervolumes({n: {"trials": trials[n]} for n in (a, b)}, (a, b), main.hv_margin,
                                  main.kl_cap)["hypervolume"]
        return None if hv[a] is None or hv[b] is None else hv[a] - hv[b]
    best = [_best(trials[n]) for n in (a, b)]
    if None in best:
        return None
    if spec.kind == "perplexity":
        return math.exp(best[0]["nll"] - best[1]["nll"]) - 1.0
    if spec.kind == "lower":
        return best[1]["nll"] - best[0]["nll"]
    return LOW_KL - max(t["kl"] for t in best)


def _gap(kind: str, per_seed: Sequence[float]) -> tuple[float, float]:
    """The rung's gap and its standard error over seeds. For "perplexity", the tolerance minus the size of the
    seed-mean change: with few trials the best trial of each seed is partly hyperparameter luck, which the
    per-seed changes show as opposite signs; their mean, not the mean of their sizes, is the latents' effect."""
    mean, se = mean_se(per_seed)
    return (PPL_TOLERANCE - abs(mean), se) if kind == "perplexity" else (mean, se)


_REGIME = {"train": "training fit", "shared": "shared masks", "naive": "naive masks", "l2": "L2, no dropout"}


def label(name: str) -> str:
    """A ladder curve's name for readers: estimator and regime, e.g. "DReG 16 Rényi (naive masks)"."""
    return f"{CURVES[name].label} ({_REGIME[CURVES[name].regime]})"


def summarise(trials: Mapping[str, Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]]],
              ladder: MicmcoPtbLadderParams, main: MicmcoPtbParams) -> dict[str, Any]:
    """Per figure and rung: each curve's best NLL and its KL (seed means) and convergence, the gap signed the
    thesis' way with its standard error over seeds and tie margin, then the ladder's reading. A curve whose every
    trial diverged has no area (the stage's rule), so a hypervolume gap stands unless both curves diverged; the
    Table 5.1 ladders have no gap where a seed has no best trial of either curve. A curve without a best trial at
    a rung or three quarters into it has unknown convergence (None), and so has the rung."""
    seeds = [str(s) for s in ladder.seeds]
    out = {}
    for fig in ladder.figures:
        spec, rungs = LADDERS[fig], []
        quantity = _QUANTITY[spec.kind]
        for rung in ladder.rungs:
            quarter = str(rung - rung // 4)
            entry: dict[str, Any] = {"steps": rung, "curves": {}}
            for name in spec.curves:
                best = [_best(trials[name][s][str(rung)]) for s in seeds]
                earlier = [_best(trials[name][s][quarter]) for s in seeds]
                if None in best or None in earlier:
                    entry["curves"][name] = {"best_nll": None, "converged": None}
                    continue
                fall = convergence([t["nll"] for t in earlier], [t["nll"] for t in best])
                entry["curves"][name] = {"best_nll": statistics.fmean(t["nll"] for t in best),
                                         "best_nll_sd": statistics.stdev(t["nll"] for t in best),
                                         "kl_at_best": statistics.fmean(t["kl"] for t in best),
                                         "fall": fall["fall"], "margin": fall["margin"],
                                         "converged": fall["converged"]}
            known = [c["converged"] for c in entry["curves"].values()]
            entry["converged"] = None if None in known else all(known)
            per_seed = [_seed_value(spec, {n: trials[n][s][str(rung)] for n in spec.curves}, main) for s in seeds]
            entry["per_seed"] = per_seed
            if None not in per_seed:
                gap, se = _gap(spec.kind, per_seed)
                entry.update(gap=gap, se=se, margin=2 * se)
            rungs.append(entry)
        out[fig] = {**dataclasses.asdict(spec), "quantity": quantity, "labels": [label(c) for c in spec.curves],
                    "regime": CURVES[spec.curves[0]].regime,
                    "rungs": rungs, "reading": reading(rungs)}
    return out


def main_stage_check(ladder_results: Mapping[str, Any], main_results: Mapping[str, Any]) -> dict[str, Any] | None:
    """Seed ``main.seed`` at the main stage's budget repeats that stage's Halton trials: the largest difference in
    (NLL, capped KL) over the start-design trials both ran, all curves together (a run that diverged in one and not
    the other counts as an infinite difference); None when no rung equals the main budget or that seed did not run.
    Trials are matched by their place among the study's finished trials, as the stage numbers its trial seeds."""
    startup = main_results["settings"]["startup_trials"]

    def pairs(step: int, seed: int) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any]]]:
        for name, per_seed in ladder_results["trials"].items():
            curve = main_results["curves"].get(name)
            if curve is not None:
                yield from zip(curve["trials"][:startup], per_seed[str(seed)][str(step)])

    return repeat_check(ladder_results, main_results, pairs, ("nll", "kl"))


# The seed items each ladder is a part of (the results index's rows M-F5.8 ... and M-T5.1).
ITEMS: dict[str, tuple[str, ...]] = {"M-F5.8": ("5.8",), "M-F5.9": ("5.9",), "M-F5.10": ("5.10",),
                                     "M-F5.11": ("5.11", "5.11-dropout"), "M-F5.12": ("5.10", "5.12"),
                                     "M-T5.1": ("T5.1-perplexity", "T5.1-latents")}
_RULE = ("top rung beyond its margin, else the change from the first to the last rung beyond the two margins "
         "combined (paperlib.experiments.common.claims.ladder_word)")


def ladder_claim_part(ladder: Mapping[str, Any], key: str) -> Part | None:
    """Ladder ``key`` of the stage's results as one part of its seed item's claim; None when the ladder did not run
    that key or could not be read (the top rung had no gap)."""
    entry = ladder.get("ladders", {}).get(key)
    if entry is None or entry.get("reading") is None:
        return None
    rungs = entry["rungs"]
    if entry["kind"] == "better":
        values = " → ".join(f"{r['gap']:+.3f} ± {r['margin']:.3f}" if "gap" in r else "no gap" for r in rungs)
        shown = f"HV({entry['labels'][0]}) − HV({entry['labels'][1]}) {values}"
        rule = (f"paired by seed; margin 2 SE (the stage's claims use a fixed hypervolume tie of {ladder['hv_tie']}); "
                f"{_RULE}")
    elif entry["kind"] == "lower":
        values = " → ".join(f"{r['gap']:+.3f} ± {r['margin']:.3f}" if "gap" in r else "no gap" for r in rungs)
        shown = f"best validation NLL, {entry['labels'][1]} − {entry['labels'][0]}: {values} nats per token"
        rule = f"paired by seed, best trial of each curve; margin 2 SE; {_RULE}"
    elif entry["kind"] == "perplexity":
        tolerance = ladder["ppl_tolerance"]
        values = " → ".join(f"{100 * (tolerance - r['gap']):.1f} ± {100 * r['margin']:.1f}%" if "gap" in r
                            else "no gap" for r in rungs)
        shown = (f"best validation perplexity, 16 samples against 1, differs on average over seeds by {values} "
                 f"(tolerance {tolerance:.0%})")
        rule = f"gap = {tolerance} − |seed mean of ppl(16) / ppl(1) − 1|; margin 2 SE; {_RULE}"
    else:
        low = ladder["low_kl"]
        values = " → ".join(f"{low - r['gap']:.3f} ± {r['margin']:.3f}" if "gap" in r else "no gap" for r in rungs)
        shown = f"KL of the best trials (the larger) {values} nats per token (low: at most {low})"
        rule = f"gap = {low} − the larger KL per seed; margin 2 SE; {_RULE}"
    return claim_part(entry, shown, rule)


def run_micmco_ptb_ladder(profile: str | None = None, progress: bool = True,
                          runs_dir: str | os.PathLike | None = None, out: str | os.PathLike | None = None) -> Path:
    """The DVC stage: settings from params.yaml, results to ``results/micmco_ptb_ladder.json``. With stacks, the
    stage stops at ``$PAPERLIB_TIME_LIMIT`` seconds (:func:`~paperlib.experiments.common.runs.stop_time`) with its
    work checkpointed, raising :class:`~paperlib.experiments.common.runs.TimeLimitReached`."""
    stage = start_stage(NAME, MAIN, profile, runs_dir, progress)
    ladder, main = stage.ladder, stage.main
    data_root = stage.root / section_params("data", stage.params).root
    limit = stop_time() if ladder.stack_size is not None else None  # $PAPERLIB_TIME_LIMIT, honoured by stacks
    records = run_ladder(ladder, main, stage.runs_dir, stage.device, data_root=data_root, deadline=limit)
    data = load_data(seed_settings(main, ladder.seeds[0], ladder.rungs[-1]), data_root)
    trials = trials_at(records, ladder, main, data.vocab_size)
    results = {
        "experiment": NAME, "profile": stage.profile, "settings": dataclasses.asdict(ladder),
        "training": {k: getattr(main, k) for k in ("vocab_size", "batch_size", "hidden_size", "valid_sentences",
                                                    "train_eval_sentences", "eval_samples", "hv_margin", "kl_cap")},
        "data": data.summary(), "hv_tie": HV_TIE, "ppl_tolerance": PPL_TOLERANCE, "low_kl": LOW_KL,
        "ladders": summarise(trials, ladder, main),
        "trials": trials,
        "runs": [{k: v for k, v in r.items() if k not in ("seconds", "chunks")} for r in records],
    }
    return finish_stage(stage, results, records, "curve", MAIN, code_hash(__name__), out)


__all__ = ["ITEMS", "LADDERS", "Ladder", "ladder_claim_part", "MicmcoPtbLadderParams", "main_stage_check", "run_folder",
           "run_ladder", "run_micmco_ptb_ladder", "summarise", "trials_at"]
