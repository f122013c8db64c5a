"""Melis thesis §2.B's claim about its tuning studies (Figs. 2.5/2.6), judged once on ``results/tuning_ptb.json``:
one :class:`~paperlib.experiments.common.claims.Claim` per model, read by the results index and the notebook alike.

The thesis: the trials closest to the best one (every hyperparameter within about 15% of its tuning range around
the best value; the red lines of Figs. 2.5/2.6) are at most 1.2 perplexity points off the best, "so our results
are somewhat insensitive to jitter in the hyperparameters"; reruns of the best LSTM have a standard deviation of
about 0.2 points, and their mean lies about 0.7 points above the best tuning run's result.

Ours: the stage's probes (:func:`paperlib.experiments.language_models.tuning_ptb.probe`) put ``neighbours`` trials in that
window around the tuner's best trial and rerun the best at other seeds. One part, "neighbours near the best":

- the largest excess perplexity of a neighbour over the best hyperparameters' perplexity (a neighbour that failed
  counts as infinitely worse), against the thesis' 1.2 points *scaled to our perplexity level*: 1.2 / (the thesis'
  best validation perplexity, Table 2.1) of our best, i.e. the same relative jitter. Departure: "the best" is the
  mean over the best trial and its reruns, not the best trial alone, which as the minimum of the search is biased
  low by seed noise (so in the thesis: its reruns' mean lies 0.7 points above the best run's 55, more than half the
  1.2 points of its claim, with a standard deviation of 0.2);
- the largest excess against the allowed one, with the margin twice the seed standard deviation of the best's
  perplexity (the best and its reruns): below the allowance by more than the margin -> reproduced; below it by no
  more than the margin (or without a rerun, no margin) -> within noise; above it, by any amount -> not reproduced
  (the index's one rule: a gap inside the margin that points against the thesis is not counted in its favour). The best trial's hyperparameters at an end of
  their tuning range are named: an optimum in a corner of the search space is what a short budget gives.

A study whose neighbourhood holds no trial but the best (no probes, none sampled there) cannot be judged:
:class:`~paperlib.experiments.common.claims.Unjudged`. Pure Python (no torch).
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Mapping

from paperlib.experiments.common.claims import Claim, Part, Unjudged, direction_word
from paperlib.experiments.common.grid_ends import not_bracketed
from paperlib.reference.tuning import TUNING

TUNING_ITEMS = {"M-F2.5": "lstm", "M-F2.6": "mogrifier"}  # seed item -> the model (search space) its figure shows


def _ppl(trial: Mapping[str, Any]) -> float:
    value = trial.get("value")
    return math.exp(value) if trial["state"] == "COMPLETE" and value is not None and math.isfinite(value) else math.inf


def neighbourhood_numbers(record: Mapping[str, Any]) -> dict[str, Any]:
    """A model's study record read for the claim: the best trial's perplexity, the best hyperparameters' (the mean
    over the best trial and its reruns, ``reference``), the neighbours' (trials in the neighbourhood other than the
    best and its reruns, plus every neighbour probe, complete or not: a probe that failed stays in as infinitely
    worse) with their excesses over ``reference``, and the reruns' (the best's own first)."""
    best = record["best"]
    near = set(record["neighbourhood"]["trials"])
    neighbours = [t for t in record["trials"] if t["number"] != best["number"] and t.get("probe") != "rerun"
                  and (t["number"] in near or t.get("probe") == "neighbour")]
    reruns = [t for t in record["trials"] if t.get("probe") == "rerun"]
    runs = [math.exp(best["value"])] + [_ppl(t) for t in reruns]
    reference = statistics.fmean(runs)  # inf if a rerun failed: then nothing is judged near it
    return {"best": runs[0], "reference": reference, "neighbours": [_ppl(t) for t in neighbours],
            "excess": [_ppl(t) - reference for t in neighbours], "reruns": runs, "trials": neighbours}


def learning_rate_moves(record: Mapping[str, Any], allowed: float) -> str:
    """Where the neighbours beyond the ``allowed`` excess put the learning rate, against the best's and the other
    neighbours' (each move as a share of its tuning range on its sampling scale, the range as the study record
    states it), for the claim's evidence; "" when none is beyond it or the record has no learning-rate range."""
    best = record["best"]["params"]
    ranges = {h["name"]: h for h in record.get("hyperparameters", [])}
    if "learning_rate" not in best or "learning_rate" not in ranges:
        return ""
    lr = ranges["learning_rate"]
    scale = math.log if lr.get("log") else float

    def unit(value: float) -> float:
        return (scale(value) - scale(lr["low"])) / (scale(lr["high"]) - scale(lr["low"]))

    def move(trial: Mapping[str, Any]) -> float:
        return abs(unit(trial["params"]["learning_rate"]) - unit(best["learning_rate"]))

    found = neighbourhood_numbers(record)
    beyond = [t for t, e in zip(found["trials"], found["excess"]) if e > allowed]
    others = [move(t) for t, e in zip(found["trials"], found["excess"]) if e <= allowed]
    if not beyond:
        return ""
    return ("; beyond the allowance: learning rate " + ", ".join(  # an end of its range: said by _corner
        f"{t['params']['learning_rate']:.2g} ({move(t):.1%} of its range off the best's)" for t in beyond)
        + f", the best's {best['learning_rate']:.2g}"
        + ("" if not others else ", the other neighbours' at it" if max(others) < 5e-4 else
           f", the other neighbours' at most {max(others):.1%} off it"))


def neighbourhood_claim(results: Mapping[str, Any], item: str) -> Claim:
    """Seed item ``item``'s (M-F2.5: the LSTM, M-F2.6: the Mogrifier) claim on the stage's results; raises
    :class:`~paperlib.experiments.common.claims.Unjudged` when the neighbourhood holds no trial but the best. The
    evidence names the learning rate of every neighbour beyond the allowance beside the best's and the other
    neighbours' (:func:`learning_rate_moves`)."""
    space = TUNING_ITEMS[item]
    record = results["models"].get(space)
    if record is None or record.get("best") is None:
        raise Unjudged(f"claim {item}: the {space} study has no complete trial")
    found = neighbourhood_numbers(record)
    if not found["excess"]:
        raise Unjudged(f"claim {item}: no trial but the best in its {TUNING['neighbourhood_fraction']:.0%} "
                       "neighbourhood (the stage ran no probes)")
    paper_gap, paper_best = TUNING["neighbourhood_max_gap_ppl"], TUNING["best_valid_ppl"][space]
    allowed = paper_gap / paper_best * found["reference"]
    worst = max(found["excess"])
    finite = [r for r in found["reruns"] if math.isfinite(r)]
    spread = statistics.stdev(finite) if len(finite) >= 2 else None
    margin = None if spread is None else 2 * spread
    shown = ", ".join("failed" if not math.isfinite(e) else f"{e:+.1f}" for e in found["excess"])
    reruns = " / ".join("failed" if not math.isfinite(r) else f"{r:.1f}" for r in found["reruns"])
    count = len(found["excess"])
    evidence = (f"best hyperparameters' valid ppl {found['reference']:.1f} (the best trial and its reruns {reruns}"
                + (f", s.d. {spread:.2f}" if spread is not None else "") + f"); {count} "
                f"neighbour{'s' if count > 1 else ''} {shown} ppl off it (largest {worst:+.1f}, allowed {allowed:.1f}: "
                f"the thesis' {paper_gap} of {paper_best} at our {found['reference']:.1f}; "
                + (f"margin {margin:.1f}, 2 s.d." if margin is not None else "no margin (no rerun)") + ")"
                + learning_rate_moves(record, allowed))
    rule = (f"largest neighbour excess < {paper_gap} ppl scaled by our best / the thesis' {paper_best} "
            f"({paper_gap / paper_best:.1%}); the best: mean of the best trial and its reruns; margin 2 s.d. of "
            "those runs: below the allowance by more than it holds, below by no more than it is noise (so is below "
            "without reruns: no margin), above the allowance by any amount fails")
    claim = (f"trials within {TUNING['neighbourhood_fraction']:.0%} of each range around the best are at most "
             f"{paper_gap} ppl off it (§2.B)")
    over = worst - allowed
    word = direction_word(-over, margin) if math.isfinite(over) else "not reproduced"
    return Claim(item, (Part("neighbours near the best", claim, word, evidence + _corner(record), rule,
                             kind="threshold + seed margin"),))


def _at_end(value: float, low: float, high: float) -> float:
    """``value`` snapped to a range end it equals up to float rounding: a sampler's value reached through a transform
    and its inverse (2 as 1.9999999999999998) is that end, and must read as it."""
    return next((end for end in (low, high) if math.isclose(value, end, rel_tol=1e-9, abs_tol=1e-12)), value)


def _corner(record: Mapping[str, Any]) -> str:
    """The best trial's hyperparameters at an end of their tuning range, for the evidence: an optimum in a corner of
    the search space, where a budget far from convergence puts it, is not the thesis' interior optimum."""
    best, ends = record["best"]["params"], []
    for h in record.get("hyperparameters", []):
        value = best.get(h["name"])
        note = not_bracketed(_at_end(value, h["low"], h["high"]), (h["low"], h["high"]), "allowed") if (
            value is not None and "low" in h and "high" in h) else ""
        if h["name"] == "mogrifier_rank" and value is not None and value <= 0:  # every k <= 0 is one setting
            note = (f"{value:g}, full rank (every k <= 0 of {h['low']:g} to {h['high']:g} is; the highest rank the "
                    "range allows: optimum not bracketed)")
        if note:
            name = (h.get("label") or h["name"]).replace("_", " ").replace("l2", "L2").replace("mogrifier", "Mogrifier")
            ends.append(f"{name} {note}")
    return f"; the best trial at an end of its range: {', '.join(ends)}" if ends else ""


__all__ = ["TUNING_ITEMS", "learning_rate_moves", "neighbourhood_claim", "neighbourhood_numbers"]
