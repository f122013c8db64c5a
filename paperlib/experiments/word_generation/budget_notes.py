"""When the budget, not the method, explains a word-generation shortfall: what a claim's evidence then adds.

Two readings of our results say a gap to the paper is the training budget's: the DSSM's Ī still rising with more
training on the budget ladder (S-F1's range; :func:`i_bar_growth`), and generated words still far from the data
by their n-gram perplexities against the oracle's (S-T2's n-gram parts; :func:`generated_words_note`). The claims of
:mod:`paperlib.experiments.word_generation.claims` attach them to the parts they explain (:func:`noted`), so the
results index and the notebook show the same evidence. Also the names the rows give the paper's models.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Mapping

from paperlib.experiments.common.claims import Claim, Part, mean_margin
from paperlib.reference.word_generation import PAPER_NGRAM_ORDERS, PAPER_TABLE2

# What the rows call the paper's models, and Table 2's two oracles (the training and the test distribution).
MODEL_NAMES = {"2xTRIL, K=10": "2xTRIL K=10", "d=16, 2xTRIL, K=10": "d=16 2xTRIL K=10", "BASELINE-8D": "GRU 8D",
               "BASELINE-16D": "GRU 16D", "ORACLE-TRAIN": "oracle"}
TABLE2_NAMES = {**MODEL_NAMES, "ORACLE-TRAIN": "training oracle", "ORACLE-TEST": "test oracle"}
# The generated words are "far from the data" when a model's train+test perplexity over the training oracle's is
# more than this multiple of the same ratio in the paper (its models against its oracle).
FAR_FACTOR = 2.0
# The paper's vocabulary (S&H §5, BooksCorpus words of 2-12 letters seen at least 10 times: "a 143K vocabulary"),
# which its range of Ī comes from.
PAPER_VOCABULARY = 143_000


def i_bar_growth(main: Mapping[str, Any], ladder: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ladder DSSM's Ī from the rung of the main stage's steps to the top rung, per seed, when it grows beyond
    twice the standard error of its mean over seeds (``{"model", "steps", "top", "start", "end"}``, the seed means);
    None without a ladder of the same profile with that rung, with fewer than two seeds scored at both, or without
    such growth."""
    steps = (main.get("scale") or {}).get("steps")
    if not ladder or ladder.get("profile") != main.get("profile") or steps is None:
        return None
    if not any(r["steps"] == steps for r in ladder["rungs"]):
        return None
    top, dssm = ladder["rungs"][-1]["steps"], ladder["settings"]["dssm"]
    ends = [[next((s.get("I_bar") for s in run["scores"] if s["step"] == at), None) for at in (steps, top)]
            for run in ladder.get("runs", []) if run["row"] == dssm]
    ends = [e for e in ends if None not in e]
    if top <= steps or len(ends) < 2:
        return None
    growth, margin = mean_margin([b - a for a, b in ends])
    if growth <= margin:
        return None
    return {"model": dssm, "steps": steps, "top": top, "start": sum(a for a, _ in ends) / len(ends),
            "end": sum(b for _, b in ends) / len(ends)}


def i_bar_note(main: Mapping[str, Any], ladder: Mapping[str, Any] | None, low: float) -> str:
    """S-F1's range part, where the ladder finds Ī still rising (:func:`i_bar_growth`): how far the ladder's top rung
    gets toward the paper's range, whose lowest Ī is ``low`` (a range that comes from :data:`PAPER_VOCABULARY`
    words). Only a top rung that reaches the range shows the shortfall to be the budget's; one still below it leaves
    the question open."""
    growth = i_bar_growth(main, ladder)
    if growth is None:
        return ""
    rising = (f"Ī is still rising with training on the budget ladder ({growth['model']} {growth['start']:.2f} at "
              f"{growth['steps']:,} steps to {growth['end']:.2f} at {growth['top']:,}), and the paper's range comes "
              f"from a vocabulary of {PAPER_VOCABULARY:,} words")
    if growth["end"] >= low:
        return f"{rising}: below it at this budget is a defect of the budget, not a finding"
    return (f"{rising}: the budget may explain the shortfall, but the ladder does not show it closing (its top rung "
            f"still below the range's lowest, {low:.2f})")


def generated_words_note(main: Mapping[str, Any]) -> str:
    """The generated words' train+test perplexity at the highest n-gram order beside the training oracle's, ours and
    the paper's, when our models are more than :data:`FAR_FACTOR` times farther from our oracle than the paper's
    from theirs: how far from words like the data the models generate at this budget. Empty otherwise."""
    top = ((main.get("scale") or {}).get("ngram_orders") or list(PAPER_NGRAM_ORDERS))[-1]
    rows = {r["model"]: r.get(f"ppl_full_{top}") for r in main.get("table2", ())}
    models = [m for m in ("2xTRIL, K=10", "BASELINE-8D", "ORACLE-TRAIN") if rows.get(m) is not None]
    if len(models) < 3 or top not in PAPER_NGRAM_ORDERS:
        return ""
    at = PAPER_NGRAM_ORDERS.index(top)
    far = max(rows[m] / rows["ORACLE-TRAIN"] for m in models[:2])
    theirs = max(PAPER_TABLE2[m]["full"][at] / PAPER_TABLE2["ORACLE-TRAIN"]["full"][at] for m in models[:2])
    if far <= FAR_FACTOR * theirs:
        return ""
    return (f"at this budget the generated words are far from the data: train+test P{top} "
            + ", ".join(f"{TABLE2_NAMES.get(m, m)} {rows[m]:,.1f}" for m in models) + " (paper "
            + ", ".join(f"{PAPER_TABLE2[m]['full'][at]:,.1f}" for m in models) + "): its train+test cells compare "
            "models still far from generating words like the data, a defect of the budget more than a finding")


def noted(claim: Claim, note: str, applies: Callable[[Part], bool]) -> Claim:
    """``claim`` with ``note`` added to the evidence of every part ``applies`` picks that did not reproduce."""
    if not note:
        return claim
    return replace(claim, parts=tuple(replace(p, evidence=f"{p.evidence}; {note}")
                                      if applies(p) and p.verdict != "reproduced" else p for p in claim.parts))


__all__ = ["FAR_FACTOR", "MODEL_NAMES", "PAPER_VOCABULARY", "TABLE2_NAMES", "generated_words_note", "i_bar_growth",
           "i_bar_note", "noted"]
