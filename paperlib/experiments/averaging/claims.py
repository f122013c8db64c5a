"""The thesis' claims about Two-Tailed Averaging (Melis ch. 3, §3.6; index rows M-F3.1, M-F3.3, M-F3.4, M-F3.5), judged on
the ``averaging_ptb`` stage's results, and M-F3.6 on the ``averaging_basin`` stage's (:data:`BASIN_CLAIMS`), as :class:`~paperlib.experiments.common.claims.Claim` s, which the results index and
the notebook display. Pure Python (no torch).

Tie rule. Every averager watches one training trajectory and is evaluated deterministically on the same validation
tokens, so no seed spread is measured. A fixed margin stands in for one: a loss is "better" only by more than
:data:`ON_PAR_NATS` (0.5% perplexity), a smaller gap the thesis' way is "within noise"
(:func:`~paperlib.experiments.common.claims.direction_word`); where the thesis says "very close" or "on par", 2TA's loss may
exceed the other's by at most that much. The overfitting run's raw loss "rises" only by more than its own noise:
twice the standard deviation of its change from one evaluation to the next, measured on the run (at least
:data:`ON_PAR_NATS`; :func:`evaluation_noise`). Where a claim needs it, the parts read the curves themselves: the
noise of the raw loss that 2TA smooths out (its summed rises between evaluations), the resets of the overfitting
run and the losses after them.
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from paperlib.experiments.common.claims import Claim, Part, direction_word, part_word, strict_word
from paperlib.reference.averaging import AVERAGING_BEST_LOSS

Results = Mapping[str, Any]

ON_PAR_NATS = 0.005
ON_PAR = f"2TA's best loss at most {ON_PAR_NATS} nats above the other's (0.5% perplexity)"


NEVER_WORSE = ("2TA is never worse than the raw weights at an evaluation (Alg. 2 falls back to them), so only the "
               "size of its lead can fail")
BEYOND_NOISE = ("lower loss wins by more than twice the standard deviation of the raw loss's change from one evaluation "
                f"to the next (at least {ON_PAR_NATS} nats): one trajectory's noise in place of a seed spread")


def _beyond_noise(label: str, claim: str, gap: float, evidence: str, margin: float, noise: float | None) -> Part:
    """A lead of 2TA over the raw weights (or over an average that is still the raw weights): ``gap`` > 0 is the
    thesis' way, judged against ``margin``, twice the raw loss's noise between evaluations (:func:`evaluation_noise`),
    since the direction itself cannot fail (:data:`NEVER_WORSE`)."""
    measured = f" (s.d. of the raw loss's change between evaluations {noise:.4f})" if noise is not None else ""
    return Part(label=label, claim=claim, verdict=direction_word(gap, margin),
                evidence=f"{evidence}: gap {gap:+.4f}, margin {margin:.4f}{measured}; {NEVER_WORSE}",
                rule=BEYOND_NOISE, kind="sampling margin")


def _strict(label: str, claim: str, gap: float, evidence: str, rule: str, kind: str) -> Part:
    """A part that holds when ``gap`` > 0; ``kind`` is its rule's kind (a threshold, a count, ...)."""
    return Part(label=label, claim=claim, verdict=strict_word(gap), evidence=evidence, rule=rule, kind=kind)


SMOOTHED = 0.1  # 2TA's summed rises at most this share of the raw loss's: the raw loss's noise "smoothed out"
LAST = 5  # the evaluations whose changes say whether a curve was still falling at the end


def rises(losses: Sequence[float]) -> tuple[int, float]:
    """How often and by how much in all a loss rises from one evaluation to the next: on a falling learning curve,
    the noise the curve shows."""
    up = [b - a for a, b in zip(losses, losses[1:]) if b > a]
    return len(up), sum(up)


def last_changes(losses: Sequence[float], count: int = LAST) -> str:
    """The loss's change at each of its last ``count`` evaluations, for evidence: "falling by 0.0016-0.0036 nats per
    evaluation over the last 5" when every one is a fall."""
    changes = [b - a for a, b in zip(losses[-count - 1:], losses[-count:])]
    if not changes:
        return "one evaluation"
    if all(c < 0 for c in changes):
        return (f"still falling by {min(-c for c in changes):.4f}-{max(-c for c in changes):.4f} nats per evaluation "
                f"over the last {len(changes)}")
    return f"changes of {min(changes):+.4f} to {max(changes):+.4f} nats over the last {len(changes)} evaluations"


def _late_start(tuned: str | None, early: float = 1 / 3) -> str:
    """"; tuned TA starts averaging at 0.75 of the run: over the first third it is the raw weights" when the tuned
    tail average (``"ta_<start>"``) starts after the early window, else ""."""
    if not tuned or not tuned.startswith("ta_"):
        return ""
    start = float(tuned.removeprefix("ta_"))
    return (f"; tuned TA starts averaging at {start:g} of the run: over the first third it is the raw weights"
            if start >= early else "")


def main_claim(results: Results) -> Claim:
    """M-F3.3 (Fig. 3.3): 2TA beats the raw weights, is better early, on par with tuned TA and EMA at the end (the
    on-par parts' evidence says whether 2TA was still falling there), and smooths out the raw loss's noise: summed
    over the main run, 2TA's loss rises between evaluations by at most :data:`SMOOTHED` of what the raw loss does
    (the rises of a falling learning curve are its noise). The variant that switches on training losses, which §3.6
    reports beside the figure, is named as not run (:data:`SWITCH_ON_TRAINING`)."""
    m = results["summary"]["methods"]
    two, raw, ta, ema = m["2ta"], m["raw"], m["ta (tuned)"], m["ema (tuned)"]
    early = min(ta["early_mean"], ema["early_mean"])
    curves = results["main"]["curves"]
    ending = "; 2TA " + last_changes(curves["2ta"]["valid_nll"])
    (raw_count, raw_rise), (two_count, two_rise) = (rises(curves[k]["valid_nll"]) for k in ("raw", "2ta"))
    changes = len(curves["raw"]["valid_nll"]) - 1
    margin, noise = noise_margin(curves["raw"]["valid_nll"])
    return Claim("M-F3.3", (
        _beyond_noise("2TA beats raw weights", f"2TA's best validation loss is below the raw weights' "
                      f"({AVERAGING_BEST_LOSS['2ta']} vs {AVERAGING_BEST_LOSS['raw']} nats)",
                      raw["best"] - two["best"], f"2TA {two['best']:.4f} vs raw {raw['best']:.4f} nats", margin, noise),
        _beyond_noise("2TA much better early", "2TA is much better than tuned TA and EMA early in training (mean loss "
                      "over the first third of the evaluations; 'much': beyond the raw loss's own noise)",
                      early - two["early_mean"],
                      f"2TA {two['early_mean']:.4f} vs TA {ta['early_mean']:.4f}, EMA {ema['early_mean']:.4f} nats (the "
                      "better of them)" + _late_start(results["summary"].get("tuned_ta")), margin, noise),
        _strict("on par with tuned TA", "2TA's best loss is very close to tuned TA's, or better",
                ta["best"] + ON_PAR_NATS - two["best"],
                f"2TA {two['best']:.4f} vs TA {ta['best']:.4f} nats, allowance {ON_PAR_NATS}" + ending, ON_PAR,
                "threshold"),
        _strict("on par with tuned EMA", "2TA's best loss is very close to tuned EMA's, or better",
                ema["best"] + ON_PAR_NATS - two["best"],
                f"2TA {two['best']:.4f} vs EMA {ema['best']:.4f} nats, allowance {ON_PAR_NATS}" + ending, ON_PAR,
                "threshold"),
        Part(label="noise smoothed out", claim="the noise in the raw loss is smoothed out by 2TA",
             verdict="reproduced" if two_rise <= SMOOTHED * raw_rise else "not reproduced",
             evidence=f"over {changes} changes between evaluations the raw loss rises {raw_count} times by "
                      f"{raw_rise:.4f} nats in all, 2TA's {two_count} times by {two_rise:.4f}",
             rule=f"2TA's summed rises between successive evaluations at most {SMOOTHED:.0%} of the raw loss's (the "
                  "rises of a falling learning curve are its noise)", kind="threshold"),
    ), (SWITCH_ON_TRAINING,))


# §3.6's other sentence beside Fig. 3.3, about a variant we do not train: named as not run.
SWITCH_ON_TRAINING = ("2TA switching on the training losses of its two averages (§3.6: its best validation loss "
                      "'worsened moderately (3.93 vs 3.92)' and stayed well below the raw loss; not trained here)")


def period_claim(results: Results) -> Claim:
    """§3.6: 2TA's best loss hardly depends on the evaluation period (E/4 to 4E in our runs)."""
    periods = results["summary"]["periods"]
    spread = max(periods.values()) - min(periods.values())
    return Claim("§3.6", (_strict(
        "best loss robust to E", "2TA's best loss barely changes with the evaluation period",
        ON_PAR_NATS - spread, "; ".join(f"{k.removeprefix('2ta_')}: {v:.4f}" for k, v in sorted(periods.items()))
        + f" nats (spread {spread:.4f})", f"the best losses of every period within {ON_PAR_NATS} nats", "threshold"),))


def evaluation_noise(losses: Sequence[float]) -> float | None:
    """The standard deviation of a loss's change from one evaluation to the next, from the end of the initial fall
    on (the first evaluation the loss does not improve on), so that the fall from the untrained model does not count
    as noise; None with fewer than two such changes."""
    start = next((i for i in range(len(losses) - 1) if losses[i + 1] >= losses[i]), None)
    if start is None:
        return None
    changes = [b - a for a, b in zip(losses[start:], losses[start + 1:])]
    return statistics.stdev(changes) if len(changes) >= 2 else None


def noise_margin(losses: Sequence[float]) -> tuple[float, float | None]:
    """(margin, noise): twice a loss's noise between evaluations (:func:`evaluation_noise`), at least
    :data:`ON_PAR_NATS` (the margin alone where the noise cannot be measured), and that noise."""
    noise = evaluation_noise(losses)
    return (ON_PAR_NATS if noise is None else max(ON_PAR_NATS, 2 * noise)), noise


def reset_episodes(curve: Mapping[str, Sequence[Any]], margin: float = 0.0) -> list[dict[str, Any]]:
    """The resets of a 2TA curve (steps, actions, the losses 2TA reports), grouped by the best loss reported before
    them: one episode per bottom. Each: ``resets`` (their steps), the ``bottom`` loss and its ``step``, the first
    later loss below the bottom by more than ``margin`` (``recovered``: (step, loss), or None when none is) and the
    lowest loss from the first reset on (``lowest``: (step, loss))."""
    steps, losses, actions = curve["step"], curve["valid_nll"], curve["action"]
    episodes: list[dict[str, Any]] = []
    for i, action in enumerate(actions):
        if action not in ("reset_long", "reset_short") or i == 0:
            continue
        bottom = min(range(i), key=lambda k: losses[k])
        if episodes and episodes[-1]["bottom_index"] == bottom:
            episodes[-1]["resets"].append(steps[i])
            continue
        episodes.append({"resets": [steps[i]], "bottom_index": bottom, "bottom": losses[bottom],
                         "step": steps[bottom], "first": i})
    for e in episodes:
        later = next((k for k in range(e["first"], len(losses)) if losses[k] < e["bottom"] - margin), None)
        e["recovered"] = None if later is None else (steps[later], losses[later])
        lowest = min(range(e["first"], len(losses)), key=lambda k: losses[k])
        e["lowest"] = (steps[lowest], losses[lowest])
    return episodes


def window_rise(losses: Sequence[float], count: int = LAST) -> tuple[float, float, int, int] | None:
    """(mean of the last ``count`` evaluations, the lowest mean of ``count`` consecutive evaluations that end before
    them, the index of that window's first evaluation, the window size): whether a noisy loss ended above the level
    it had reached, read on window means rather than on its single lowest evaluation, whose pick out of a noisy
    plateau is biased low. The first evaluation (an untrained model's) never counts; a short run uses windows of half
    the rest; None with fewer than three evaluations."""
    body = list(losses[1:])
    count = min(count, len(body) // 2)
    if count < 1:
        return None
    means = [statistics.mean(body[i:i + count]) for i in range(len(body) - 2 * count + 1)]
    low = min(range(len(means)), key=means.__getitem__)
    return statistics.mean(body[-count:]), means[low], low + 1, count


def overfit_claim(results: Results) -> Claim:
    """M-F3.5 (Fig. 3.5: "The averaged loss bottoms out due to overfitting. Thus when the averages are reset (twice),
    the validation loss does not recover."), on the overfitting run: the raw loss rises (the mean of its last
    :data:`LAST` evaluations above the lowest mean of as many consecutive ones before them, :func:`window_rise`,
    by more than its noise, :func:`evaluation_noise`, at least :data:`ON_PAR_NATS`); 2TA's reset heuristic fires; and
    after each episode of resets (:func:`reset_episodes`) the loss 2TA reports never falls below the bottom it had
    reached before them, up to the end of the run: a fall beyond twice 2TA's own noise is a recovery, a smaller one
    within noise (per episode; some holding -> partly)."""
    summary, curves = results["summary"], results["overfit"]["curves"]
    raw = curves["raw"]["valid_nll"]
    resets = summary["overfit_resets"]
    margin, noise = noise_margin(raw)
    window = window_rise(raw)
    if window is None:
        rise, shown = None, f"{len(raw)} evaluations, too few for two windows"
    else:
        last, low, start, count = window
        steps = curves["raw"]["step"]
        rise = last - low
        shown = (f"mean of the last {count} evaluations {last:.3f} vs the lowest {count}-evaluation mean before them "
                 f"{low:.3f} (steps {steps[start]}-{steps[start + count - 1]}): rise {rise:.3f}, margin {margin:.3f}"
                 + (f" (s.d. of the change between evaluations {noise:.3f})" if noise else "")
                 + f"; single evaluations: final {raw[-1]:.3f}, lowest {min(raw):.3f}")
    parts = [
        Part(label="raw loss rises when overfitting",
             claim="the raw weights' validation loss rises in the overfitting run",
             verdict=direction_word(rise, margin), evidence=shown,
             rule=f"the mean of the last {LAST} evaluations above the lowest mean of {LAST} consecutive evaluations "
                  f"before them by more than twice the standard deviation of the raw loss's change from one "
                  f"evaluation to the next, measured on this run after its initial fall (at least {ON_PAR_NATS} "
                  f"nats): one trajectory's noise in place of a seed spread", kind="sampling margin"),
    ]
    back, smoothed = noise_margin(curves["2ta"]["valid_nll"])  # 2TA's own noise: the losses the episodes read
    episodes = reset_episodes(curves["2ta"], back)
    parts.append(_strict("resets fire", "2TA's reset heuristic fires in the overfitting run", len(resets),
                         f"{len(resets)} resets" + (f", the first at step {resets[0]}" if resets else "")
                         + (f", in {len(episodes)} episode{'s' * (len(episodes) != 1)} after a new bottom (the "
                            "thesis' run: 'reset (twice)'; how often they fire is shown, not judged)" if resets else ""),
                         "at least one reset", "count"))
    if episodes:
        def word(e: Mapping[str, Any]) -> str:
            return ("not reproduced" if e["recovered"] is not None else
                    "within noise" if e["lowest"][1] < e["bottom"] else "reproduced")

        def told(e: Mapping[str, Any]) -> str:
            lowest, dip = e["lowest"], e["bottom"] - e["lowest"][1]
            after = (f"below it by more than the margin from step {e['recovered'][0]} ({e['recovered'][1]:.3f})"
                     if e["recovered"] is not None else
                     f"lowest later {lowest[1]:.3f} at step {lowest[0]}, "
                     + (f"{dip:.3f} below it, inside the {back:.3f} margin" if dip > 0 else "never below it"))
            return (f"resets at step{'s' if len(e['resets']) > 1 else ''} {', '.join(map(str, e['resets']))} after "
                    f"the bottom {e['bottom']:.3f} (step {e['step']}): {after}")

        noise_2ta = f" (s.d. of 2TA's change between evaluations {smoothed:.3f})" if smoothed else ""
        parts.append(Part(label="no recovery after a reset", claim="after the averages are reset, the validation loss "
                          "does not recover: it stays above the bottom 2TA reached before the reset",
                          verdict=part_word([word(e) for e in episodes]),
                          evidence=f"margin {back:.3f}{noise_2ta}; {len(episodes)} episode"
                          f"{'s' if len(episodes) > 1 else ''}: " + "; ".join(told(e) for e in episodes),
                          rule="per episode of resets (the resets after one bottom): never below that bottom again "
                               "holds, below it by more than twice 2TA's own noise between evaluations fails, below "
                               "it by less is within noise (some episodes holding: partly)",
                          kind="sampling margin"))
    return Claim("M-F3.5", tuple(parts))


def switch_heights(results: Results) -> dict[str, list[int]]:
    """Fig. 3.4's peaks and valleys of L in the main run, in evaluation periods E, at every switch of its 2TA (the
    short average overtook the long one, or replaced a stagnating one): the peak is L just before the switch (the
    previous evaluation's L plus the E steps since), the valley L just after it (0 when Alg. 2 then fell back to the
    raw weights and reinitialised). A switch right after a reinitialisation (S = L) is not a peak. ``evaluation``:
    the 1-based evaluation of each switch."""
    main = results["main"]
    period, curve = main["period"], main["curves"]["2ta"]
    out: dict[str, list[int]] = {"peaks": [], "valleys": [], "evaluation": []}
    previous = 0
    for i, (length, action) in enumerate(zip(curve["long_len"], curve["action"]), start=1):
        if action in ("switch", "reset_long") and previous > 0:
            out["peaks"].append((previous + period) // period)
            out["valleys"].append(length // period)
            out["evaluation"].append(i)
        previous = length
    return out


def almost_rising(heights: list[int], evaluations: list[int]) -> tuple[bool, str]:
    """Fig. 3.4's "increase almost monotonically", read as: the sequence ends higher than it starts and never falls
    more than one evaluation period below its running maximum (a one-period dip is the smallest a length in whole
    periods can make). Returns whether it holds and the evidence."""
    top, dip, where = heights[0], 0, None
    for height, evaluation in zip(heights, evaluations):
        if top - height > dip:
            dip, where = top - height, (top, height, evaluation)
        top = max(top, height)
    holds = heights[-1] > heights[0] and dip <= 1
    fall = f"largest fall {dip} E, from {where[0]} E to {where[1]} E at evaluation {where[2]}" if where else "no fall"
    return holds, f"{heights[0]} E first, {heights[-1]} E last, {fall}"


RISING = ("each sequence ends higher than it starts and never falls more than one period E below its running "
          "maximum (Fig. 3.4's 'the heights of both peaks and valleys increase almost monotonically')")


def lengths_claim(results: Results) -> Claim:
    """M-F3.4 (Fig. 3.4): the peaks of the long average's length L (before each switch) and its valleys (after it)
    rise almost monotonically, as its caption says. (The near-optimal L between peaks, §3.6 Prop. 4, is a statement
    of the text, not of the figure; judging it would need the optimal tail length at every evaluation, which the run
    does not record.)"""
    h = switch_heights(results)
    if len(h["peaks"]) < 2:
        part = Part(label="peaks and valleys rise", claim="the heights of peaks and valleys of L rise",
                    verdict="not reproduced", evidence=f"2TA switched {len(h['peaks'])} time(s) with a non-empty long "
                    "average: too few for peaks and valleys", rule=RISING, kind="count")
        return Claim("M-F3.4", (part,))
    parts = []
    for key, label, said in (("peaks", "peaks of L rise", "the peaks of L (just before each switch)"),
                             ("valleys", "valleys rise", "the valleys of L (just after each switch)")):
        holds, evidence = almost_rising(h[key], h["evaluation"])
        parts.append(Part(label=label, claim=f"{said} rise almost monotonically", verdict=strict_word(float(holds)),
                          evidence=evidence, rule=RISING, kind="count"))
    return Claim("M-F3.4", tuple(parts))


SCHEMATIC = "every evaluation of the main run's 2TA trace (lengths in optimisation steps, after the evaluation)"
NEAR_OPTIMAL = ("a near-optimal long average in every L interval (the run does not record the optimal tail length "
                "at each evaluation)")
SWITCHES = ("switch", "reset_long")  # what calls Alg. 1's switch(): S beat L, or L stagnated (Alg. 2 line 3)


def near_optimal_intervals(results: Results) -> list[dict[str, Any]] | None:
    """Proposition 4 on the main run (Fig. 3.1's "near optimal"): per interval between two subsequent switch points
    (evaluations i1 .. i2 - 1, those after the first switch up to the one before the next), with a long average at
    some evaluation (Alg. 2 can fall back to the raw weights and empty both), the evaluation where the long average's
    length L is closest to the best tail measured there (``optimal_tail``: the argmin over the averages of the last
    1..t whole periods, the shortest on a tie), as ``{"first", "last" (1-based evaluations), "at", "length", "best",
    "off" (|L - best| in steps), "excess" (its loss minus the best tail's, nats)}``. None for a run without the
    optimal tail."""
    main = results["main"]
    tails = main.get("optimal_tail")
    if not tails:
        return None
    period, curve, losses = main["period"], main["curves"]["2ta"], tails["losses"]
    best = tails["length"]  # per evaluation, the best tail's length in steps, as the run recorded it
    switches = [i for i, action in enumerate(curve["action"]) if action in SWITCHES]
    intervals = []
    for i1, i2 in zip(switches, switches[1:]):
        held = [i for i in range(i1, i2) if curve["long_len"][i] > 0]
        if not held:
            continue
        at = min(held, key=lambda i: (abs(curve["long_len"][i] - best[i]), i))
        length = curve["long_len"][at]
        intervals.append({"first": i1 + 1, "last": i2, "at": at + 1, "length": length, "best": best[at],
                          "off": abs(length - best[at]),
                          "excess": losses[at][length // period - 1] - min(losses[at])})
    return intervals


def _near_optimal_part(results: Results, checks: str) -> Part:
    """The caption's statement about the run, judged on :func:`near_optimal_intervals`: in every interval L comes
    within one evaluation period of the best tail (Proposition 4's resolution: L equals the optimal length rounded
    down or up to a multiple of E); ``checks``: the trace's checks of Alg. 2, shown beside."""
    intervals = near_optimal_intervals(results) or []
    period = results["main"]["period"]
    missed = [iv for iv in intervals if iv["off"] > period]
    exact = sum(iv["off"] == 0 for iv in intervals)
    shown = "; ".join(f"evaluations {iv['first']}–{iv['last']}: L {iv['length'] // period} E vs best "
                      f"{iv['best'] // period} E at evaluation {iv['at']}" for iv in missed[:4])
    worst = max(intervals, key=lambda iv: iv["excess"]) if intervals else None
    evidence = (f"{len(intervals)} intervals between subsequent switch points with a long average: L within one "
                f"period of the best tail at least once in {len(intervals) - len(missed)} (at it exactly in {exact})"
                + (f"; missed: {shown}" + (f" and {len(missed) - 4} more" if len(missed) > 4 else "") if missed else "")
                + (f"; at each interval's closest point the long average's loss lies at most {worst['excess']:.4f} "
                   f"nats above the best tail's (evaluations {worst['first']}–{worst['last']})" if worst else "")
                + f"; the trace follows Alg. 2 at every evaluation ({checks}: checks of our implementation)")
    return _strict("a near-optimal L in every L interval",
                   "in any interval labelled with L there is at least one point where the length of the long average "
                   "is near optimal (Fig. 3.1; Proposition 4: between two subsequent switch points L equals the "
                   "optimal length rounded down or up to a multiple of E at least once)",
                   -float(len(missed)) if missed else float(len(intervals)), evidence,
                   "per interval between subsequent switch points (a switch or a reset of the long average), L after "
                   "each evaluation against the best of the averages of the last 1..t whole periods scored at that "
                   "evaluation with the same validation loss; near optimal: within one period E of it, in every "
                   "interval", "count")


def schematic_claim(results: Results) -> Claim:
    """M-F3.1 (Fig. 3.1, a schematic; the seed item asks for it as a real trace): the caption's readable statements,
    checked on the main run's 2TA lengths. After each evaluation the long average is at least as long as the short
    one; at a switch the short average (S at the previous evaluation plus the E steps since) becomes the long one
    and the short one restarts empty, or Alg. 2 falls back to the raw weights and empties both (L = 0, which the
    schematic, drawn for Alg. 1, does not show); and L intervals recur (at least two switches from a non-empty long
    average). These hold by Alg. 2's construction on any run: checks of our implementation, not findings, returned
    as the parts where one fails. Where they all hold, the claim is the caption's one statement about the run, a
    near-optimal L in every L interval (:func:`_near_optimal_part`, with the checks in its evidence), judged on the
    optimal tail the run recorded at every evaluation; a run without it names that statement as not run
    (:data:`NEAR_OPTIMAL`) beside the checks, which the item's row reads as not attempted."""
    main = results["main"]
    period, curve = main["period"], main["curves"]["2ta"]
    short, long_, actions = curve["short_len"], curve["long_len"], curve["action"]
    longer = [i for i, (s, l) in enumerate(zip(short, long_), start=1) if s > l]
    switches, handed, previous_short = 0, [], 0
    for i, (s, l, action) in enumerate(zip(short, long_, actions), start=1):
        if action in ("switch", "reset_long"):
            switches += 1
            if s != 0 or l not in (previous_short + period, 0):
                handed.append(i)
        previous_short = s
    peaks = len(switch_heights(results)["peaks"])
    checks = (
        _strict("S never longer than L", "after every evaluation the long average is at least as long as the short",
                -float(len(longer)) if longer else 1.0,
                f"S > L after {len(longer)} of {len(short)} evaluations"
                + (f" (first: evaluation {longer[0]})" if longer else ""), SCHEMATIC, "count"),
        _strict("a switch hands S to L", "at a switch the short average becomes the long one and restarts empty",
                -float(len(handed)) if handed else float(switches),
                f"{switches} switches, {len(handed)} not of that form"
                + (f" (first: evaluation {handed[0]})" if handed else ""),
                SCHEMATIC + "; L after a switch = S before it + E, or 0 where Alg. 2 fell back to the raw weights",
                "count"),
        _strict("L intervals recur", "the long average is switched out again and again", peaks - 1.0,
                f"{peaks} switches from a non-empty long average", "at least two such switches", "count"),
    )
    if any(p.verdict != "reproduced" for p in checks) or near_optimal_intervals(results) is None:
        return Claim("M-F3.1", checks, (NEAR_OPTIMAL,))
    return Claim("M-F3.1", (_near_optimal_part(results, "; ".join(p.evidence for p in checks)),))


# An entry into the new basin within this many evaluations of a run's start or end is not judged: before it the
# averages are only a few periods long, after it they need several evaluations to grow back (the thesis' example
# enters at evaluation 40 of a long run).
ENTRY_MARGIN = 10
CHANGES = ("switch", "reset_long", "reset_short")  # what 2TA's evaluate() can do to its averages (paperlib.averaging)


def basin_events(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """Fig. 3.6's sequence in one run of ``averaging_basin``, as 0-based evaluation indices and losses (the loss is
    the one 2TA reports). None when the run did not settle in basin B.

    ``entry``: the first evaluation in basin B for good. ``change``: the first evaluation from the entry on at which 2TA
    changed its averages (a switch, a reset, or Alg. 2's reinitialisation to the raw weights), or None. ``reset``: that
    evaluation when the change is a reset of the stagnating long average, else None. ``bottom``: the lowest loss before
    the change (or the end); ``rising``: whether the loss rose at every evaluation from the bottom to the one before the
    change (at least one). ``emptied``: the first evaluation from the reset on at which the long average holds only
    iterates added since the last evaluation before the entry (the crossing happened in between), or None;
    ``second_reset``: whether a reset made it so after the first one. ``spike``: the loss there; ``peak``: the highest
    loss from the bottom up to it; ``short``: the long average's length there. ``back``: evaluations from
    ``emptied`` until the loss is below ``bottom_loss`` again, or None."""
    if run["entry"] is None:
        return None
    ev = run["evaluations"]
    steps, loss, actions, lengths = ev["step"], ev["loss"], ev["action"], ev["long_len"]
    entry = steps.index(run["entry"])
    changed = [a in CHANGES or (raw and length == 0) for a, raw, length in zip(actions, ev["using_raw"], lengths)]
    change = next((k for k in range(entry, len(steps)) if changed[k]), None)
    end = change if change is not None else len(steps)
    bottom = min(range(end), key=lambda k: loss[k]) if end else None
    out: dict[str, Any] = {
        "entry": entry, "change": change, "evaluations": len(steps), "bottom": bottom,
        "bottom_loss": None if bottom is None else loss[bottom],
        "reset": change if change is not None and actions[change] == "reset_long" else None,
        "rising": bottom is not None and bottom < end - 1 and all(loss[k + 1] > loss[k] for k in range(bottom, end - 1)),
        "before": loss[end - 1] if end else None, "emptied": None, "second_reset": False, "spike": None, "peak": None,
        "short": None, "back": None}
    if out["reset"] is None or bottom is None:
        return out
    since = steps[entry - 1] if entry else 0
    emptied = next((k for k in range(out["reset"], len(steps)) if lengths[k] <= steps[k] - since), None)
    if emptied is None:
        return out
    below = next((k for k in range(emptied, len(steps)) if loss[k] < loss[bottom]), None)
    out.update(emptied=emptied, second_reset=emptied > out["reset"] and actions[emptied] == "reset_long",
               spike=loss[emptied], peak=max(loss[bottom:emptied]), short=lengths[emptied],
               back=None if below is None else below - emptied)
    return out


def judged_entries(results: Results) -> list[tuple[int, dict[str, Any]]]:
    """(seed, :func:`basin_events`) of the runs that entered basin B at least :data:`ENTRY_MARGIN` evaluations after
    their start and before their end."""
    out = []
    for run in results["runs"]:
        events = basin_events(run)
        if events is not None and ENTRY_MARGIN <= events["entry"] and events["entry"] + ENTRY_MARGIN < \
                events["evaluations"]:
            out.append((run["seed"], events))
    return out


BASIN_RULE = (f"every run that entered the new basin at least {ENTRY_MARGIN} evaluations from its start and its end "
              "(some of them: partly); the loss is the exact generalisation loss, so comparisons are strict")


def _span(values: Sequence[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return format(low, fmt) if low == high else f"{format(low, fmt)} to {format(high, fmt)}"


def basin_claim(results: Results) -> Claim:
    """M-F3.6 (Fig. 3.6, on the synthetic landscape of ``averaging_basin``): "At t = 40E the validation loss bottoms
    out and starts to slightly worsen. This is detected at t = 43E, and both averages are reset. With the averages
    now way too short, the loss spikes but then recovers." Each sentence is a part, checked on every judged run
    (:func:`judged_entries`, :func:`basin_events`): the loss 2TA reports bottoms out at or just before the entry and
    rises at every evaluation until 2TA next changes its averages (more than a reset needs: Alg. 2 resets an average
    whose loss has not beaten its best for ``patience`` evaluations); that change is a reset of the long average, not
    an ordinary switch (its delay from the bottom is the patience by Alg. 2's rule); at it the long average holds only
    iterates from after the entry (both averages emptied; one evaluation later reads partly: Alg. 2 empties the short
    average at a reset and hands the long one its contents, so a second reset can be needed); the loss there exceeds every loss
    since the bottom (the spike); and it falls below the bottom again before the run ends (the recovery)."""
    runs = judged_entries(results)
    total = len(results["runs"])
    if not runs:
        part = Part(label="a run enters the new basin", claim="optimisation enters a new basin during the run",
                    verdict="not reproduced", evidence=f"none of {total} runs settled in basin B away from its start "
                    f"and end ({ENTRY_MARGIN} evaluations)", rule=BASIN_RULE, kind="count")
        return Claim("M-F3.6", (part,))

    def part(label: str, claim: str, holds: list[bool], detail: str) -> Part:
        return Part(label=label, claim=claim, verdict=part_word(holds),
                    evidence=f"{sum(holds)} of {len(holds)} runs; {detail}", rule=BASIN_RULE, kind="count")

    events = [e for _, e in runs]
    where = {-1: 0, 0: 0}
    for e in events:
        offset = e["bottom"] - e["entry"] if e["bottom"] is not None else None
        where[offset] = where.get(offset, 0) + 1
    placed = f"the bottom at the last evaluation before the entry in {where[-1]}, at the entry in {where[0]}"
    others = len(events) - where[-1] - where[0]
    rises = [(e["before"] - e["bottom_loss"]) / e["bottom_loss"] for e in events if e["rising"]]
    reset = [e for e in events if e["reset"] is not None]
    delays = sorted({e["reset"] - e["bottom"] for e in reset})
    emptied = [e["emptied"] is not None and e["emptied"] - e["reset"] <= 1 for e in reset] + \
        [False] * (len(events) - len(reset))
    at_once = sum(1 for e in reset if e["emptied"] == e["reset"])
    # the thesis resets both at the detection; one evaluation later (Alg. 2's second reset) is a part of it
    both = "reproduced" if at_once == len(events) else ("partly reproduced" if all(emptied) else part_word(emptied))
    second = sum(1 for e in reset if e["second_reset"] and e["emptied"] == e["reset"] + 1)
    spiked = [e for e in reset if e["spike"] is not None]
    spikes = [e in spiked and e["spike"] > e["peak"] for e in events]
    backs = [e["back"] for e in spiked if e["back"] is not None]
    recovered = [e["back"] is not None for e in events]
    return Claim("M-F3.6", (
        part("loss bottoms out, then worsens", "the averaged loss bottoms out as optimisation enters the new basin and "
             "then worsens at every evaluation until 2TA changes its averages", [e["rising"] for e in events],
             placed + (f", elsewhere in {others}" if others else "") + "; rise to the change "
             + (_span(rises, ".1%") if rises else "none") + " of the bottom"),
        part("a reset detects it", "the reset heuristic detects it: 2TA's next change is a reset of the long average, "
             "not an ordinary switch", [e["reset"] is not None for e in events],
             f"reset {' or '.join(map(str, delays)) or 'never'} evaluations after the bottom (the thesis: 3; Alg. 2's "
             "patience of 3 evaluations, read off this figure, sets the delay)"),
        Part(label="both averages reset", claim="both averages are reset when the worsening is detected: from the "
             "reset on the long average holds only iterates from after the entry", verdict=both,
             evidence=f"{sum(emptied)} of {len(emptied)} runs within one evaluation: at the reset in {at_once}, one "
             f"evaluation later by a second reset in {second} (the thesis: at once, at t = 43E; Alg. 2 hands the "
             "stagnating long average the short one's iterates, which may predate the entry, so a second reset "
             "empties it)", rule=BASIN_RULE + "; both emptied at the reset: reproduced, one evaluation later: partly",
             kind="count"),
        part("the loss spikes", "with the averages now way too short, the loss spikes above every loss since the bottom",
             spikes, "jump over the highest loss before it " + (_span([e["spike"] - e["peak"] for e in spiked], "+.2f")
                                                               if spiked else "none")
             + (f", with a long average of {_span([e['short'] for e in spiked], 'd')} steps" if spiked else "")),
        part("then recovers", "the loss then recovers: it falls below its bottom before the reset again", recovered,
             f"after {_span(backs, 'd')} evaluations" if backs else "never"),
    ))


BASIN_CLAIMS = {"M-F3.6": basin_claim}  # judged on results/averaging_basin.json

# M-F3.1's schematic_claim is not among them: the notebook draws the trace; the index judges the caption's statement
# about the run where the run recorded the optimal tail, and reads "not attempted" where it did not
# (paperlib.compendium.results_index.averaging).
CLAIMS = {"M-F3.3": main_claim, "M-F3.4": lengths_claim, "M-F3.5": overfit_claim, "§3.6": period_claim}


__all__ = ["BASIN_CLAIMS", "CHANGES", "CLAIMS", "ENTRY_MARGIN", "NEAR_OPTIMAL", "ON_PAR_NATS", "SMOOTHED",
           "almost_rising", "basin_claim", "basin_events", "evaluation_noise", "judged_entries", "last_changes",
           "lengths_claim", "main_claim", "near_optimal_intervals", "overfit_claim", "period_claim",
           "reset_episodes", "rises", "schematic_claim", "switch_heights"]
