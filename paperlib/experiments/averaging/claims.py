"""The thesis' claims about Two-Tailed Averaging (Melis ch. 3, §3.6; index rows M-F3.1, M-F3.3, M-F3.4, M-F3.5), judged on
the ``averaging_ptb`` stage's results as :class:`~paperlib.experiments.common.claims.Claim` s, which the results index and
the notebook display. Pure Python (no torch).

Tie rule. Every averager watches one training trajectory and is evaluated deterministically on the same validation
tokens, so no seed spread is measured. A fixed margin stands in for one: a loss is "better" only by more than
:data:`ON_PAR_NATS` (0.5% perplexity), a smaller gap the thesis' way is "within noise"
(:func:`~paperlib.experiments.common.claims.direction_word`); where the thesis says "very close" or "on par", 2TA's loss may
exceed the other's by at most that much; "rises" means by more than that much.
"""

from __future__ import annotations

from typing import Any, Mapping

from paperlib.experiments.common.claims import Claim, Part, direction_word, strict_word
from paperlib.reference.averaging import AVERAGING_BEST_LOSS

Results = Mapping[str, Any]

ON_PAR_NATS = 0.005
BETTER = (f"lower loss wins by more than {ON_PAR_NATS} nats (a fixed margin: one trajectory, deterministic "
          "evaluation, no measured spread)")
ON_PAR = f"2TA's best loss at most {ON_PAR_NATS} nats above the other's (0.5% perplexity)"


def _better(label: str, claim: str, gap: float, evidence: str) -> Part:
    """``gap`` > 0 is the thesis' way; beyond :data:`ON_PAR_NATS` it holds, inside it is within noise."""
    return Part(label=label, claim=claim, verdict=direction_word(gap, ON_PAR_NATS),
                evidence=f"{evidence}: gap {gap:+.5f}, margin {ON_PAR_NATS}", rule=BETTER, kind="fixed margin")


def _strict(label: str, claim: str, gap: float, evidence: str, rule: str, kind: str) -> Part:
    """A part that holds when ``gap`` > 0; ``kind`` is its rule's kind (a threshold, a count, ...)."""
    return Part(label=label, claim=claim, verdict=strict_word(gap), evidence=evidence, rule=rule, kind=kind)


def main_claim(results: Results) -> Claim:
    """M-F3.3 (Fig. 3.3): 2TA beats the raw weights, is better early, and on par with tuned TA and EMA at the end."""
    m = results["summary"]["methods"]
    two, raw, ta, ema = m["2ta"], m["raw"], m["ta (tuned)"], m["ema (tuned)"]
    early = min(ta["early_mean"], ema["early_mean"])
    return Claim("M-F3.3", (
        _better("2TA beats raw weights", f"2TA's best validation loss is below the raw weights' "
                f"({AVERAGING_BEST_LOSS['2ta']} vs {AVERAGING_BEST_LOSS['raw']} nats)",
                raw["best"] - two["best"], f"2TA {two['best']:.4f} vs raw {raw['best']:.4f} nats"),
        _better("2TA better early", "2TA is ahead of tuned TA and EMA early in training (mean loss over the first "
                "third of the evaluations)", early - two["early_mean"],
                f"2TA {two['early_mean']:.4f} vs TA {ta['early_mean']:.4f}, EMA {ema['early_mean']:.4f} nats (the "
                "better of them)"),
        _strict("on par with tuned TA", "2TA's best loss is very close to tuned TA's, or better",
                ta["best"] + ON_PAR_NATS - two["best"],
                f"2TA {two['best']:.4f} vs TA {ta['best']:.4f} nats, allowance {ON_PAR_NATS}", ON_PAR, "threshold"),
        _strict("on par with tuned EMA", "2TA's best loss is very close to tuned EMA's, or better",
                ema["best"] + ON_PAR_NATS - two["best"],
                f"2TA {two['best']:.4f} vs EMA {ema['best']:.4f} nats, allowance {ON_PAR_NATS}", ON_PAR, "threshold"),
    ))


def period_claim(results: Results) -> Claim:
    """§3.6: 2TA's best loss hardly depends on the evaluation period (E/4 to 4E in our runs)."""
    periods = results["summary"]["periods"]
    spread = max(periods.values()) - min(periods.values())
    return Claim("§3.6", (_strict(
        "best loss robust to E", "2TA's best loss barely changes with the evaluation period",
        ON_PAR_NATS - spread, "; ".join(f"{k.removeprefix('2ta_')}: {v:.4f}" for k, v in sorted(periods.items()))
        + f" nats (spread {spread:.4f})", f"the best losses of every period within {ON_PAR_NATS} nats", "threshold"),))


def overfit_claim(results: Results) -> Claim:
    """M-F3.5 (Fig. 3.5): when training overfits, the raw loss rises and 2TA's reset heuristic fires."""
    summary, curves = results["summary"], results["overfit"]["curves"]
    raw = curves["raw"]["valid_nll"]
    resets = summary["overfit_resets"]
    return Claim("M-F3.5", (
        _strict("raw loss rises when overfitting", "the raw weights' validation loss rises in the overfitting run",
                raw[-1] - min(raw) - ON_PAR_NATS, f"final {raw[-1]:.3f} vs best {min(raw):.3f} nats",
                f"the final loss above the best by more than {ON_PAR_NATS} nats", "fixed margin"),
        _strict("resets fire", "2TA's reset heuristic fires in the overfitting run", len(resets),
                f"{len(resets)} resets" + (f", the first at step {resets[0]}" if resets else ""),
                "at least one reset", "count"),
    ))


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


def schematic_claim(results: Results) -> Claim:
    """M-F3.1 (Fig. 3.1, a schematic; the seed item asks for it as a real trace): the caption's readable statements,
    checked on the main run's 2TA lengths. After each evaluation the long average is at least as long as the short
    one; at a switch the short average (S at the previous evaluation plus the E steps since) becomes the long one
    and the short one restarts empty, or Alg. 2 falls back to the raw weights and empties both (L = 0, which the
    schematic, drawn for Alg. 1, does not show); and L intervals recur (at least two switches from a non-empty long
    average). The caption's last statement (a near-optimal L in every L interval) needs the optimal tail length at
    every evaluation, which the run does not record: it is not judged."""
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
    return Claim("M-F3.1", (
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
    ))


CLAIMS = {"M-F3.1": schematic_claim, "M-F3.3": main_claim, "M-F3.4": lengths_claim, "M-F3.5": overfit_claim, "§3.6": period_claim}


__all__ = ["CLAIMS", "ON_PAR_NATS", "almost_rising", "lengths_claim", "main_claim", "overfit_claim", "period_claim",
           "switch_heights"]
