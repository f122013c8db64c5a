"""Index row of Melis §2.3.3's reverse-copy task (M-F2.4, Fig. 2.4): the thesis' lengths beside ours, the grid each
model was trained at, the settings picked, the runs that blew up, and how our lengths stand for the thesis'."""

from __future__ import annotations

import math
from typing import Any, Mapping

from paperlib.experiments.common.claims import Claim
from paperlib.experiments.common.grid_ends import grid_end
from paperlib.experiments.reverse_copy.claims import claim as reverse_copy_claim, thesis_lengths
from paperlib.reference.reverse_copy import REVERSE_COPY
from paperlib.reference.setups import MELIS_FIG_2_4B

from paperlib.compendium.results_index.text import Results, _claim_verdict, _f, _profile_note, three_quarters


# -- reverse copy ------------------------------------------------------------------------------


def _reverse_copy_paper() -> str:
    """M-F2.4: the lengths both models solve and those the Mogrifier is better at (Fig. 2.4a)."""
    solved, better = (thesis_lengths(k) for k in ("solved_by_both", "mogrifier_better"))
    return f"both solve lengths {solved}; Mogrifier clearly better at {better}"


def _reverse_copy_ours(results: Results) -> str:
    r = results["reverse_copy"]
    ce = r["cross_entropy"]
    lengths = " / ".join(str(n) for n in r["lengths"])
    return (f"lengths {lengths}: LSTM {' / '.join(_f(x) for x in ce['lstm'])}, Mogrifier "
            f"{' / '.join(_f(x) for x in ce['mogrifier'])} nats" + _profile_note(results, "reverse_copy"))


def _reverse_copy_seeds(settings: Results) -> str:
    """M-F2.4's seeds per model and length (results without ``seeds`` name their one ``seed``)."""
    seeds = settings.get("seeds", [settings.get("seed")])
    if len(seeds) == 1:
        return f"one seed ({seeds[0]}) per model and length, so no seed spread is measured"
    return f"{len(seeds)} seeds ({', '.join(map(str, seeds))}) per model and length, the tie margin their spread"


_COPY_MODELS = {"lstm": "LSTM", "mogrifier": "Mogrifier"}  # the reverse-copy stage's model keys


def _reverse_copy_scale(results: Results) -> str:
    """M-F2.4's scale: vocabulary, lengths, size, steps and seeds, and the grid each model was trained at (one
    setting per model is none tuned), beside what the thesis tunes."""
    r = results["reverse_copy"]
    st, models = r["settings"], r["settings"]["models"]
    grid = {"learning rate": st["learning_rates"], "L2": st["l2_penalties"],
            **{f"{_COPY_MODELS.get(m, m)} embedding": models[m]["embedding_sizes"] for m in models},
            "Mogrifier r": models.get("mogrifier", {}).get("rounds", []),
            "Mogrifier k": models.get("mogrifier", {}).get("ranks", [])}
    points = 1
    for values in grid.values():
        points *= max(1, len(values))
    shown = ", ".join(f"{name} {' / '.join(f'{v:g}' for v in values)}" for name, values in grid.items() if values)
    rank = models.get("mogrifier", {}).get("ranks", [])
    full = " (k <= 0: full rank)" if rank and all(k <= 0 for k in rank) else ""
    tuned = ("one setting per model, none tuned" if points == 1 else f"a grid of {points} settings per model") \
        + f": {shown}{full}"
    return (f"vocabulary {st.get('vocab_size', 100)}, lengths {r['lengths'][0]}–{r['lengths'][-1]}, "
            f"{st['parameter_budget']:,} params, {st['steps']:,} steps"
            + (f" over {st['train_examples']:,} training examples (thesis {REVERSE_COPY['train_examples']:,})"
               if "train_examples" in st else "") + f"; {_reverse_copy_seeds(st)}; {tuned} (thesis: "
            f"learning rate, L2 and embedding size tuned, and r and k for the Mogrifier, at "
            f"{REVERSE_COPY['parameters'] / 1e6:.0f}M params, vocabulary {REVERSE_COPY['vocab_size']:,})"
            + _reverse_copy_picked(r) + _reverse_copy_unstable(r) + _reverse_copy_halves(r) + _reverse_copy_falling(r))


def _reverse_copy_falling(r: Results) -> str:
    """"; not converged: ...": the runs of the grid points picked per model and length (:func:`_picked`) whose
    training loss still fell over the last quarter of their logged curve, and by how much (the comparisons rest on
    them)."""
    curves = [[point["loss"] for point in run.get("train_curve") or ()] for run in r.get("runs", ()) if _picked(r, run)]
    curves = [c for c in curves if len(c) >= 4]
    falls = [1 - c[-1] / three_quarters(c) for c in curves if c[-1] < three_quarters(c)]
    if not falls:
        return ""
    return (f"; not converged: the training loss still fell over the last quarter of the steps in {len(falls)} of the "
            f"{len(curves)} picked runs (by {min(falls):.0%}–{max(falls):.0%})")


def _reverse_copy_halves(r: Results) -> str:
    """How our lengths stand in for the thesis': the shorter half for its solved lengths, the longer for those where
    the Mogrifier leads, and which of ours both models solve (the thesis' 'at higher lengths' begins above them)."""
    from paperlib.experiments.reverse_copy.claims import SOLVED_NATS, halves

    short, long_ = halves(r["lengths"])
    means = {m: dict(zip(r["lengths"], r["cross_entropy"][m])) for m in r["cross_entropy"]}
    solved = [n for n in r["lengths"] if all(means[m][n] < SOLVED_NATS for m in means)]
    return (f"; our shorter lengths ({' and '.join(map(str, short))}) stand for the thesis' "
            f"{thesis_lengths('solved_by_both')}, our longer ({' and '.join(map(str, long_))}) for its "
            f"{thesis_lengths('mogrifier_better')}, by position; both models solve "
            + ("every one of our lengths" if solved == list(r["lengths"]) else
               f"only {' and '.join(map(str, solved))} of ours" if solved else "none of our lengths")
            + f" (below {SOLVED_NATS} nats)")


# What a reverse-copy grid point varies besides the seed, with the words the scale uses for each.
_COPY_GRID = {"lr": "learning rate", "l2": "L2", "embedding_size": "embedding", "mogrifier_rounds": "r",
              "mogrifier_rank": "k"}


def _picked(r: Results, run: Mapping[str, Any]) -> bool:
    """Whether ``run`` belongs to the grid point the stage picked for its model and length (the one whose seeds'
    mean validation cross-entropy is lowest), whose seeds make the reported numbers."""
    best = r["best"][run["model"]][str(run["length"])]
    return all(run.get(k) == best.get(k) for k in _COPY_GRID)


def _reverse_copy_picked(r: Results) -> str:
    """"; picked on validation: LSTM learning rate 0.012 / 0.006 / ... at lengths ...": per model, each setting its
    grid gave more than one value, at every length; empty when the grid has one point per model."""
    shown = []
    for model, by_length in r["best"].items():
        varied = [k for k in _COPY_GRID if len({run.get(k) for run in r["runs"] if run["model"] == model}) > 1]
        for key in varied:
            picks = [by_length[str(n)][key] for n in r["lengths"]]
            tried = {run.get(key) for run in r["runs"] if run["model"] == model}
            ends = sum(grid_end(v, tried) is not None for v in picks)
            edge = (" (every pick at an end of its grid: no optimum bracketed)" if ends == len(picks) else
                    f" ({ends} of {len(picks)} at an end of its grid)" if ends else "")
            shown.append(f"{_COPY_MODELS.get(model, model)} {_COPY_GRID[key]} "
                         + " / ".join(f"{v:g}" for v in picks) + edge)
    if not shown:
        return ""
    return (f"; picked per model and length by the seeds' mean validation cross-entropy (lengths "
            f"{' / '.join(map(str, r['lengths']))}): " + ", ".join(shown))


# A run whose training loss climbs more than this share above the lowest it had reached blew up: the stage's training
# loss is a mean over hundreds of steps, whose changes between logs on a stable run are a few percent at most.
BLOW_UP = 0.25


def blown_up(curve: list[Mapping[str, Any]], share: float = BLOW_UP) -> tuple[int, bool] | None:
    """(the step at which a training curve, ``{"step", "loss"}`` records, first rose more than ``share`` above its
    running minimum; whether its last loss was back at or below that minimum), or None when it never did."""
    lowest = math.inf
    for record in curve:
        if record["loss"] > (1 + share) * lowest:
            return record["step"], curve[-1]["loss"] <= lowest
        lowest = min(lowest, record["loss"])
    return None


def _reverse_copy_unstable(r: Results) -> str:
    """"; training loss blew up ... in 3 of 12 Mogrifier runs (...); without them ...": the runs whose training loss
    rose more than :data:`BLOW_UP` above its running minimum (:func:`blown_up`; the divergence check stops none of
    them), and each affected length's test cross-entropy over the runs that did not, so a reader sees how much of a
    model's mean the blow-ups carry."""
    found: dict[str, list[tuple[int, int, int, bool]]] = {}
    counts: dict[str, int] = {}
    elsewhere: dict[str, int] = {}  # blow-ups at grid points the stage did not pick
    for run in r["runs"]:
        event = blown_up(run.get("train_curve", []))
        if not _picked(r, run):
            elsewhere[run["model"]] = elsewhere.get(run["model"], 0) + (event is not None)
            continue
        counts[run["model"]] = counts.get(run["model"], 0) + 1
        if event is not None:
            found.setdefault(run["model"], []).append((run["length"], run["seed"], *event))
    other = "".join(f"; at the settings not picked, {elsewhere[m]} {_COPY_MODELS.get(m, m)} run"
                    f"{'s' if elsewhere[m] != 1 else ''} blew up" for m in elsewhere if elsewhere[m])
    if not found:
        picked = sum(counts.values()) < len(r["runs"])
        return (f"; no run of the picked settings blew up (training loss never rose more than {BLOW_UP:.0%} above its "
                f"lowest){other}" if picked else "")
    shown = []
    for model, runs in found.items():
        where = "; ".join(f"length {n} seed {seed} at step {step:,}" + (" (back by the end)" if back else "")
                          for n, seed, step, back in runs)
        if not any(back for *_, back in runs):
            where += "; none back at or below that lowest by the end"
        rest = []
        for n in sorted({run[0] for run in runs}):
            kept = [x["test_cross_entropy"] for x in r["runs"] if x["model"] == model and x["length"] == n
                    and _picked(r, x) and blown_up(x.get("train_curve", [])) is None]
            rest.append(f"length {n} " + (f"{sum(kept) / len(kept):.2f} nats over {len(kept)} seed(s)" if kept
                                          else "none left"))
        shown.append(f"{len(runs)} of {counts[model]} {_COPY_MODELS.get(model, model)} runs ({where}); without them "
                     + ", ".join(rest))
    return f"; training loss rose more than {BLOW_UP:.0%} above its lowest in " + "; ".join(shown) + other


def _reverse_copy_verdict(results: Results) -> tuple[str, str]:
    """M-F2.4's claim (:func:`paperlib.experiments.reverse_copy.claims.claim`), with Fig. 2.4b (no stage runs it)
    named as not run."""
    judged = reverse_copy_claim(results["reverse_copy"])
    return _claim_verdict(Claim(judged.item, judged.parts, judged.not_run + (MELIS_FIG_2_4B,)))
