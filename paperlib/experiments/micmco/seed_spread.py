"""The seed spread a MICMCO budget ladder measured for a hypervolume gap at the main stage's own budget, and whether
it may stand in for the fixed hypervolume tie when the stage's comparison of the same two curves is judged.

The stage trains one seed, so its gap is one draw: the noise it carries is the spread of one seed's gap, the
standard deviation of the ladder's per-seed gaps, not the standard error of their mean (which is √seeds smaller and
is what the ladder's own rungs are judged by). Twice that deviation, and never less than the tie, is the margin,
where the ladder's rung repeated the stage's run: the same training settings, and either the same trials all from
the same start design, or a start design shared trial for trial (the stage's first trials are the ladder's rung of
the stage's seed, with the same results; :func:`shared_start`), the stage drawing its last trials from the GP
sampler (at ``cpu`` two: one seed's gap is then the same draw, but for the trials the sampler adds). Where the rung
did not, the spread is shown beside the tie and the tie decides.

Pure Python: read by the synthetic and the PTB claims alike.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Spread:
    """The seed spread of one gap at the main stage's budget, as the budget ladder measured it."""

    two_sd: float  # twice the standard deviation of one seed's gap over the ladder's seeds
    margin: float  # the larger of two_sd and the tie: what the stage's one-seed gap must exceed, where it applies
    seeds: int
    steps: int
    differs: str  # how the ladder's rung differs from the stage's run ("" when it repeated it)
    shares: str = ""  # how the stage's run repeated the rung where their trials differ past a shared start design

    @property
    def applies(self) -> bool:
        """The spread replaces the tie: the rung repeated the stage's run."""
        return not self.differs

    def shown(self, tie: float) -> str:
        """"twice the spread (sd) of one seed's gap over 3 seeds at 150 steps in the budget ladder: 0.0220, <use>"
        (the seeds counted are those with a finite gap)."""
        raised = "" if self.margin == self.two_sd else f"raised to the {tie} tie"
        how = "; ".join(x for x in (raised, self.shares) if x)
        use = (f"the margin here{f' ({how})' if how else ''}" if self.applies else
               f"shown beside the {tie} tie, not in its place: {self.differs}")
        return (f"twice the spread (sd) of one seed's gap over {self.seeds} seeds at {self.steps:,} steps in the "
                f"budget ladder: {self.two_sd:.4f}, {use}")


def standing_in(spread: Spread | None) -> float | None:
    """The margin a comparison is judged against in place of the tie: the spread's, where it applies; else None (the
    tie decides)."""
    return spread.margin if spread is not None and spread.applies else None


def _stage_trials(results: Mapping[str, Any]) -> dict[str, dict[int, tuple[Any, Any]]]:
    """Per curve of the stage (``configurations`` of the synthetic stage, ``curves`` of the PTB one), its trials'
    (NLL, hyperparameters) by trial number."""
    curves = results.get("configurations") or results.get("curves") or {}
    return {name: {t["number"]: (t.get("nll"), t.get("params")) for t in curve.get("trials", ()) if "number" in t}
            for name, curve in curves.items()}


def _rung_trials(ladder: Mapping[str, Any], seed: int, steps: int) -> dict[str, dict[int, tuple[Any, Any]]]:
    """Per curve the ladder trains, seed ``seed``'s trials after ``steps`` steps, (NLL, hyperparameters) by trial
    number, from its runs' scores (named by ``configuration`` in the synthetic ladder, ``curve`` in the PTB one)."""
    out: dict[str, dict[int, tuple[Any, Any]]] = {}
    for run in ladder.get("runs", ()):
        name = run.get("configuration", run.get("curve"))
        score = next((x for x in run.get("scores", ()) if x.get("step") == steps), None)
        if run.get("seed") == seed and "trial" in run and name is not None and score is not None:
            out.setdefault(name, {})[run["trial"]] = (score.get("nll"), run.get("params"))
    return out


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _same(a: tuple[Any, Any], b: tuple[Any, Any]) -> bool:
    """Two trials alike: the same hyperparameters where both record them, and NLLs equal to 1e-9 (relative) or both
    missing or not finite (diverged)."""
    (nll_a, params_a), (nll_b, params_b) = a, b
    if params_a is not None and params_b is not None and params_a != params_b:
        return False
    if _finite(nll_a) and _finite(nll_b):
        return math.isclose(nll_a, nll_b, rel_tol=1e-9)
    return not _finite(nll_a) and not _finite(nll_b)


def shared_start(results: Mapping[str, Any], ladder: Mapping[str, Any]) -> int | None:
    """How many start-design trials per curve the stage's run shares with the ladder's rung of the stage's seed at the
    stage's budget: the stage's whole start design, where the ladder tunes at least as many trials and every curve the
    rung trained has those first trials in the stage alike (:func:`_same`), at least one of them finite; None where
    one differs, a curve is missing, the ladder tunes fewer trials or the results do not say."""
    st = results.get("settings", {})
    ladder_trials, startup = ladder.get("settings", {}).get("trials"), st.get("startup_trials")
    if not ladder_trials or not startup or "steps" not in st or ladder_trials < startup:
        return None
    stage, rung = _stage_trials(results), _rung_trials(ladder, st.get("seed", 0), st["steps"])
    if not rung:
        return None
    for curve, trials in rung.items():
        ours = stage.get(curve)
        if ours is None or any(i not in trials or i not in ours or not _same(trials[i], ours[i])
                               for i in range(startup)):
            return None
        if not any(_finite(trials[i][0]) for i in range(startup)):
            return None
    return startup


def design_shared(results: Mapping[str, Any], ladder: Mapping[str, Any]) -> str:
    """How the stage's trials repeat the ladder's rung where the trial designs differ past a start design they share
    trial for trial (:func:`shared_start`), or "" where they do not share one or do not differ."""
    st = results.get("settings", {})
    n, trials = shared_start(results, ladder), st.get("trials")
    if n is None or trials is None or st.get("startup_trials") is None or st["startup_trials"] >= trials:
        return ""
    theirs = ladder.get("settings", {}).get("trials") or n
    rest = (f"the ladder's last {theirs - n} from the Halton design" if theirs > n else
            "which the ladder does not run (its spread is of the start design alone)")
    return (f"the stage's first {n} trials of each curve are the ladder's seed {st.get('seed', 0)} at this budget, "
            f"with the same results; its last {trials - st['startup_trials']} of {trials} come from the GP sampler, "
            f"{rest}")


def differences(results: Mapping[str, Any], ladder: Mapping[str, Any], shares: str | None = None) -> list[str]:
    """How the ladder's rungs differ from the stage's run, besides their budget: the number of trials per curve,
    the stage's trials from the GP sampler (the ladder's all come from the Halton start design), unless the two share
    their start design trial for trial (:func:`design_shared`, or ``shares`` where the caller has it, then says how
    they differ), and any training setting the ladder records with another value than the stage's settings."""
    st, out = results.get("settings", {}), []
    trials, startup = st.get("trials"), st.get("startup_trials")
    theirs = ladder.get("settings", {}).get("trials")
    if design_shared(results, ladder) if shares is None else shares:
        trials = theirs = startup = None  # the trial designs differ only past a shared start design
    if theirs != trials:
        out.append(f"the ladder tunes {theirs if theirs is not None else 'an unrecorded number of'} trials per "
                   f"curve, the stage {trials if trials is not None else 'an unrecorded number'}")
    if trials is not None and startup is None:
        out.append("the stage's trial design is not recorded")
    elif trials is not None and startup < trials:
        out.append(f"the ladder's trials all come from the Halton start design, the stage's last {trials - startup} "
                   f"of {trials} from the GP sampler")
    out += [f"its {k} is {v}, the stage's {st.get(k)}" for k, v in ladder.get("training", {}).items()
            if st.get(k) != v]
    return out


def ladder_spreads(results: Mapping[str, Any], ladder: Mapping[str, Any] | None, tie: float
                   ) -> dict[tuple[str, str], Spread]:
    """(better curve, worse curve) -> the spread the budget ladder (same profile) measured for the gap between those
    two curves at the stage's budget, for each of its "better" ladders with a rung there whose gap at least two seeds
    measured. A caller whose gap is taken on another reference than the ladder's adds that to ``differs``."""
    st = results.get("settings", {})
    if not ladder or ladder.get("profile") != results.get("profile") or "steps" not in st:
        return {}
    shares = design_shared(results, ladder)
    steps, differs, out = st["steps"], "; ".join(differences(results, ladder, shares)), {}
    for entry in ladder.get("ladders", {}).values():
        if entry.get("kind") != "better":
            continue
        rung = next((r for r in entry.get("rungs", []) if r.get("steps") == steps), None)
        gaps = [g for g in (rung or {}).get("per_seed", []) if isinstance(g, (int, float)) and math.isfinite(g)]
        if len(gaps) < 2:
            continue
        two_sd = 2 * statistics.stdev(gaps)
        out[tuple(entry["curves"][:2])] = Spread(two_sd, max(two_sd, tie), len(gaps), steps, differs, shares)
    return out


def tie_floored(entry: Mapping[str, Any], tie: float) -> dict[str, Any]:
    """A "better" budget-ladder entry (per rung a hypervolume ``gap`` and its ``margin``, twice the standard error
    over seeds) read with every rung's margin raised to the hypervolume ``tie`` where it falls below it, and its
    reading recomputed (:func:`paperlib.experiments.common.ladder.reading`): a normalised hypervolume gap inside the
    tie is no difference wherever it is read, on a ladder's rung as in the stage's comparison, whose seed margin never
    falls below the tie either. The synthetic ladder stage floors its margins so itself; the PTB one records 2 SE."""
    from paperlib.experiments.common.ladder import reading  # loads torch: only when a ladder is read

    rungs = [{**r, "margin": max(r["margin"], tie)} if "gap" in r else dict(r) for r in entry["rungs"]]
    return {**entry, "rungs": rungs, "reading": reading(rungs)}


def perplexity_spread(results: Mapping[str, Any], ladder: Mapping[str, Any] | None) -> str:
    """"one seed per cell: on the budget ladder ... changes ... by ...": the seed spread of the best-perplexity change
    (16 samples against 1, signed per seed) the PTB ladder (of the stage's profile) measured at the Table 5.1 cells'
    budget, beside a one-seed cell's change; empty without a rung there measured by two seeds or more."""
    if not ladder or ladder.get("profile") != results.get("profile"):
        return ""
    curves, base = results.get("curves", {}), results.get("settings", {}).get("steps", 0)
    steps = max((curves[r["curve"]].get("steps_factor", 1) * base for r in results.get("table_5_1", ())
                 if r.get("curve") in curves), default=0)
    entry = ladder.get("ladders", {}).get("T5.1-perplexity")
    rung = next((r for r in (entry or {}).get("rungs", ()) if r.get("steps") == steps), None)
    changes = [c for c in (rung or {}).get("per_seed", ()) if isinstance(c, (int, float)) and math.isfinite(c)]
    if len(changes) < 2:
        return ""
    labels = entry.get("labels", ["16 samples", "1 sample"])
    return (f"one seed per cell: on the budget ladder {labels[0]} against {labels[1]} changes the best validation "
            f"perplexity by {' / '.join(f'{100 * c:+.1f}%' for c in changes)} over its {len(changes)} seeds at "
            f"{steps:,} steps, the cells' budget (sd {100 * statistics.stdev(changes):.1f}%): a cell's change within "
            "about that may be seed noise")

