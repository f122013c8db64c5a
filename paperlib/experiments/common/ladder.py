"""What the scale ladders share: starting the stage, planning and running their independent runs,
and reading a ladder.

A ladder trains each run once to its top rung and scores it at every rung (the optimisers have constant learning
rates, so a run stopped at a rung is the run of that budget). The runs are independent jobs, dispatched by
:func:`map_jobs`; the per-rung gaps, signed the seed's way, are read by :func:`reading` with the shared vocabulary of
:func:`paperlib.experiments.common.claims.ladder_word`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Mapping, Sequence, TypeVar

from paperlib.device import cache_key
from paperlib.experiments.common.claims import Part, check_ladder, ladder_part, ladder_word, mean_se
from paperlib.experiments.common.runs import json_safe, map_jobs

Settings = TypeVar("Settings")


@dataclass(frozen=True)
class LadderParams:
    """A ladder stage's own settings (a subclass names its ladders, ``class P(LadderParams, ladders=...)``, which
    become :attr:`LADDERS`; everything else is its main stage's section of the same profile).

    ``figures``: keys of ``LADDERS``; ``rungs``: step budgets, increasing; ``seeds``: at least two (the tie margin
    is their spread); ``trials``: Halton points per curve and seed; ``workers`` processes train the runs.
    """

    LADDERS: ClassVar[Mapping[str, Any]] = {}  # key -> a ladder with ``curves``

    def __init_subclass__(cls, ladders: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if ladders is not None:
            cls.LADDERS = ladders

    figures: list[str]
    rungs: list[int]
    seeds: list[int]
    trials: int
    workers: int = 1

    def __post_init__(self) -> None:
        unknown = [f for f in self.figures if f not in self.LADDERS]
        if unknown or not self.figures:
            raise ValueError(f"figures must be some of {', '.join(self.LADDERS)}; got {self.figures}")
        check_ladder(self.rungs, self.seeds, self.workers)
        if self.trials < 2:
            raise ValueError(f"trials must be >= 2 (a frontier of one point has no shape), got {self.trials}")

    @property
    def curves(self) -> list[str]:
        """The curves of the chosen ladders, in ladder order, each once."""
        return list(dict.fromkeys(c for f in self.figures for c in self.LADDERS[f].curves))


def runs_folder(runs_dir: str | os.PathLike, ladder: LadderParams, code: str, main: Mapping[str, Any]) -> Path:
    """Where a ladder's runs live: a folder under ``runs_dir`` keyed on what changes a run (the rungs, ``main``: the
    main stage's settings a run reads, the code hash ``code`` and the compute settings). A run's file name adds
    curve, seed and trial, and a Halton point does not depend on the number of trials, so more seeds, trials or
    figures only add runs."""
    key = json.dumps({"rungs": ladder.rungs, "code": code, "compute": cache_key(), "main": main}, sort_keys=True)
    return Path(runs_dir) / hashlib.sha1(key.encode()).hexdigest()[:10]


def plan_runs(ladder: LadderParams, folder: Path, design: Callable[[str, int], Sequence[Mapping[str, float]]],
              cost: Callable[[str], float]) -> list[tuple[str, int, int, Mapping[str, float], str]]:
    """Every run of ``ladder`` as (curve, seed, trial, its Halton point, its file in ``folder``), the costliest
    curves first (``cost(curve)``); ``design(curve, seed)`` gives the seed's points. Creates ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    designs = {(n, s): design(n, s) for n in ladder.curves for s in ladder.seeds}
    jobs = sorted(((n, s, i) for n in ladder.curves for s in ladder.seeds for i in range(ladder.trials)),
                  key=lambda job: -cost(job[0]))
    return [(n, s, i, designs[n, s][i], str(folder / f"{n}-seed{s}-trial{i}.json")) for n, s, i in jobs]


def repeat_check(ladder_results: Mapping[str, Any], main_results: Mapping[str, Any],
                 pairs: Callable[[int, int], Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]]],
                 keys: Sequence[str]) -> dict[str, Any] | None:
    """Does the ladder's run of the main stage's seed, at the main stage's budget, repeat that stage's trials? The
    largest :func:`difference` in ``keys`` over the (main stage's trial, ladder's trial) pairs that
    ``pairs(steps, seed)`` yields; None when the ladder did not run that seed at that budget."""
    settings, ran = main_results["settings"], ladder_results["settings"]
    step, seed = settings["steps"], settings["seed"]
    if step not in ran["rungs"] or seed not in ran["seeds"]:
        return None
    compared = list(pairs(step, seed))
    diffs = [difference(theirs[k], ours[k]) for theirs, ours in compared for k in keys]
    return {"steps": step, "seed": seed, "trials": len(compared), "max_difference": max(diffs, default=None)}


def seed_settings(main: Settings, seed: int, steps: int) -> Settings:
    """The main stage's settings as one of its studies with seed ``seed``, trained for ``steps``, would see them."""
    return dataclasses.replace(main, seed=seed, steps=steps)


def difference(a: float | None, b: float | None) -> float:
    """How far a score of a ladder's run is from the main stage's (None: NaN, as the JSON holds it): 0 when both
    are NaN (both runs diverged), infinite when only one is, else the absolute difference."""
    a, b = (math.nan if v is None else v for v in (a, b))
    if math.isnan(a) or math.isnan(b):
        return 0.0 if math.isnan(a) and math.isnan(b) else math.inf
    return abs(a - b)


def reading(rungs: Sequence[Mapping[str, Any]]) -> str | None:
    """A ladder's reading from the rungs with a gap (``gap`` and ``margin`` = 2 SE or more; see
    :func:`paperlib.experiments.common.claims.ladder_word`). None when the top rung has no gap (the claim could not be
    measured at the largest budget), or when it is the only rung with one and its gap is inside its margin (no trend
    to measure); a lone top rung beyond its margin reads "reproduced"."""
    judged = [(r["gap"], r["margin"] / 2) for r in rungs if "gap" in r]
    if not rungs or "gap" not in rungs[-1]:
        return None
    if len(judged) >= 2:
        return ladder_word(judged)
    return "reproduced" if judged[0][0] > 2 * judged[0][1] else None


def claim_part(entry: Mapping[str, Any], shown: str, rule: str) -> Part | None:
    """A ladder's summary ``entry`` (``claim``, ``rungs`` with ``steps`` and ``converged``, ``reading``) as one part
    of its seed item's claim, with ``shown``, the per-rung values as text, and the reading's ``rule``; None when the
    ladder could not be read."""
    reading_ = entry.get("reading")
    if reading_ is None:
        return None
    rungs = entry["rungs"]
    budgets = " / ".join(f"{r['steps']:,}" for r in rungs)
    converged = " ".join("unknown" if r["converged"] is None else "flat" if r["converged"] else "still improving"
                         for r in rungs)
    return Part(label=f"ladder: {entry['claim']}", claim=f"{entry['claim']}, more clearly as the training budget grows",
                verdict=ladder_part(reading_, rungs[-1].get("gap")),
                evidence=("" if reading_ == "reproduced" else f"{reading_}; ") + f"{shown} at {budgets} steps; last "
                         f"quarter of each rung: {converged}",
                rule=rule, kind="ladder reading")


@dataclass(frozen=True)
class LadderStage:
    """What a ladder stage starts from: its name, profile, repository root, ``params.yaml``, its own settings and its
    main stage's, the device, the runs folder and the start time."""

    name: str
    profile: str
    root: Path
    params: dict[str, Any]
    ladder: Any
    main: Any
    device: str
    runs_dir: Path
    started: float


def start_stage(name: str, main_name: str, profile: str | None, runs_dir: str | os.PathLike | None,
                progress: bool) -> LadderStage:
    """Read the ladder's settings and its main stage's (same profile), set the stage up (precision, device) and, with
    ``progress`` and a ladder of curves (:class:`LadderParams`), say what it will train. ``runs_dir`` defaults to
    ``runs/<name>``."""
    from paperlib.experiments.common.config import active_profile, experiment_params, load_params, repo_root
    from paperlib.experiments.common.stage import setup_stage

    started, root = time.time(), repo_root()
    params = load_params()
    profile = active_profile(profile, params)
    ladder = experiment_params(name, profile, params)
    main = experiment_params(main_name, profile, params)
    device = setup_stage(profile, params)
    runs = Path(runs_dir) if runs_dir is not None else root / "runs" / name
    if progress and isinstance(ladder, LadderParams):
        print(f"{name} [{profile}]: {len(ladder.curves)} curves x {len(ladder.seeds)} seeds x {ladder.trials} "
              f"trials to {ladder.rungs[-1]:,} steps", flush=True)
    return LadderStage(name, profile, root, params, ladder, main, str(device), runs, started)


def finish_stage(stage: LadderStage, results: Mapping[str, Any], records: Sequence[Mapping[str, Any]],
                 curve_key: str, main_name: str, code: str, out: str | os.PathLike | None) -> Path:
    """Write the ladder's results (``results/<name>.json`` unless ``out``; NaN as null) and its provenance, with
    each run's seconds (runs named by ``curve_key``, seed and trial), a stacked run's chunks, and the code hash
    ``code``."""
    from paperlib.atomic_files import write_json_atomic
    from paperlib.experiments.common.provenance import provenance
    from paperlib.experiments.common.stage import results_path

    path = Path(out) if out is not None else results_path(stage.root, stage.name, stage.profile)
    write_json_atomic(path, json_safe(dict(results)))
    settings = {"ladder": dataclasses.asdict(stage.ladder), main_name: dataclasses.asdict(stage.main)}
    def run(r: Mapping[str, Any]) -> str:
        return f"{r[curve_key]} seed {r['seed']} trial {r['trial']}"

    chunks = {run(r): r["chunks"] for r in records if "chunks" in r}  # stacked runs: steps, seconds, device
    write_json_atomic(path.with_suffix(".provenance.json"),
                      {**provenance(stage.root, stage.profile, settings, {}, stage.started, code=code),
                       "run_seconds": {run(r): r.get("seconds") for r in records},
                       **({"run_chunks": chunks} if chunks else {})})
    return path


__all__ = ["LadderParams", "LadderStage", "claim_part", "difference", "finish_stage", "map_jobs", "mean_se",
           "plan_runs", "reading", "repeat_check", "runs_folder", "seed_settings", "start_stage"]
