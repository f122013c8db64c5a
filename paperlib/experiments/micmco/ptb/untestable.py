"""Which PTB MICMCO comparisons cannot be tested at this scale, and why: the reason a claim's comparison (or a
budget ladder) is named as not run rather than judged (:data:`paperlib.experiments.micmco.ptb.claims.UNTESTABLE`
maps each claim to its reason; :func:`at_unigram_level` is asked first, of every claim). A comparison one of whose
curves is no better than a unigram model of the same sentences (it has not learned what word frequencies do not
give, so the comparison measures the budget), a reading that could not fail whatever the models did (every
hypervolume below the tie it must stay within, every trial below the low-KL line it must stay under), a quantity the
trials do not reach
(a KL level, a latent usage above the best fit), a training-fit gain too small to cut in half, and a sentence about
regularisation, overfitting, validation set against the training fit or runs trained to their best read where the
runs have not completed one pass over the training data.

Pure Python at import, as :mod:`~paperlib.experiments.micmco.ptb.claims`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from paperlib.experiments.micmco.ptb.comparisons import ON_PAR_KL, SMALLER_SHARE, Results, frontier_tie, hv_tie, passes
from paperlib.experiments.micmco.ptb.curve_names import plain_key

if TYPE_CHECKING:
    from paperlib.experiments.micmco.ptb.claims import Comparison


WORD_FREQUENCIES = "no better than word frequencies alone"  # in every reason of :func:`at_unigram_level`


def at_unigram_level(c: Comparison, results: Results, levels: Mapping[str, Any] | None) -> str | None:
    """Why comparison ``c`` cannot be tested at this scale where a curve it sets against another has not learned what
    word frequencies do not give: its lowest NLL (for a comparison of frontier points, its frontier NLL at the KL
    compared; for Table 5.1's cells, their test NLLs; ``c.numbers["compared NLL"]``) not below the ``levels`` of a
    unigram model of the same sentences (:mod:`paperlib.experiments.micmco.ptb.unigram`, NLL per token per split) by
    more than the frontier tie. Such a curve is still at the level of a model without context, and what it is
    compared on (latent usage, multiple samples, regularisation) has nothing to act on: the comparison measures the
    budget, not the claim, whichever way it comes out. None without levels, or where every compared curve lies below
    by more than the tie."""
    compared = c.numbers.get("compared NLL")
    if not levels or not compared:
        return None
    tie, curves = frontier_tie(), results["curves"]
    stuck = []
    for name, nll in compared.items():
        curve = curves.get(name, {})  # a Table 5.1 cell is named by its column, not a curve
        split = c.numbers.get("compared split") or curve.get("split") or (
            "train" if curve.get("regime") == "train" else "valid")
        level = levels["nll"][split]
        if not nll <= level - tie:  # a NaN or an infinite NLL (no finite trial) has not got past it either
            stuck.append(f"{plain_key(name, curves)} at {_nll_words(c, nll)} (unigram {level:.3f})")
    if not stuck:
        return None
    who = "a curve compared is" if len(stuck) == 1 else "curves compared are"
    return (f"cannot be tested at this scale: {who} {WORD_FREQUENCIES}, {', '.join(stuck)}, not below a unigram "
            f"model of the same sentences by more than the {tie:.4f}-nat tie")


def _nll_words(c: Comparison, nll: float) -> str:
    """ "lowest NLL 3.943", "frontier NLL 4.629 at KL 0.132", "test NLL 3.887" or "no finite NLL"."""
    if not math.isfinite(nll):
        return "no finite NLL"
    if "compared at KL" in c.numbers:
        return f"frontier NLL {nll:.3f} at KL {c.numbers['compared at KL']:.3f}"
    return f"{'test' if c.numbers.get('compared split') == 'test' else 'lowest'} NLL {nll:.3f}"


def _every_hv_below_tie(c: Comparison) -> str | None:
    """A tie reading ("no gain", "on par") whose hypervolumes all lie at or below the tie cannot fail."""
    if c.numbers.get("reach", 1.0) <= 0:
        return "cannot be tested at this scale: no KL range both curves' trials reach"
    top = c.numbers.get("larger HV")
    return ("cannot be tested at this scale: every hypervolume below the tie" if top is not None and top <= hv_tie()
            else None)


def _no_training_gain(c: Comparison) -> str | None:
    """A validation gain "far below" the training fit's needs a training-fit gain whose share
    :data:`SMALLER_SHARE` exceeds the tie: a smaller cut would fall inside the noise."""
    train = c.numbers["training gain"]
    return (f"no training-fit gain large enough to compare with: {SMALLER_SHARE:.0%} of it must exceed the tie"
            if SMALLER_SHARE * train <= hv_tie() else None)


def _line_cannot_fail(c: Comparison) -> str | None:
    """A cell whose curve has no trial above the low-KL line (and whose test KL is not above it) cannot fail."""
    from paperlib.experiments.micmco.ptb.micmco_ptb import LOW_KL

    top = c.numbers["curve max"]
    return (f"cannot fail at this scale: every trial of the curve below {LOW_KL} nats"
            if top is not None and top <= LOW_KL and c.numbers["kl"] <= LOW_KL else None)


def _short_of_one_pass(share: float | None, run: str, so: str, alike: bool = False) -> str | None:
    """Why a sentence cannot be tested where the ``run`` run compared saw ``share`` (< 1) of one pass over the
    training sentences (``alike``: every run compared saw that share), or None where it saw at least one pass (or the
    results do not say)."""
    if share is None or share >= 1:
        return None
    who = "the runs compared" if alike else f"the {run} run compared"
    return f"cannot be tested at this scale: {who} saw {share:.0%} of one pass over the training sentences, {so}"


def _cannot_overfit(c: Comparison) -> str | None:
    """Dropout's best NLL below L2's, a sentence about regularisation, read where no compared run completed one pass
    over the training data: none can overfit, so regularisation has nothing yet to improve on and the less
    regularised run leads by learning faster."""
    return _short_of_one_pass(c.numbers.get("most passes"), "longest-trained",
                              "so none could overfit and regularisation had nothing yet to improve on")


def _unregularised(c: Comparison) -> str | None:
    """Table 5.1's best perplexity barely changed by more samples "for this combination of a small model and strong
    regularization", read where no compared cell completed one pass over the training data: none can overfit, so
    the regularisation the sentence credits had nothing yet to act on, and the cells differ by how fast their
    estimators learn."""
    return _short_of_one_pass(c.numbers.get("most passes"), "longest-trained",
                              "so none could overfit and the strong regularisation the sentence conditions on had "
                              "nothing yet to act on")


def _overfitting_unseen(c: Comparison) -> str | None:
    """16 samples validating better than the runs with 16x compute (Figs. 5.14, 5.25: "VIMCO 16 performs better than
    either", "DREG 16 generalizes better than either"), which the thesis reads as "the steeper training curves
    translate to steeper validation curves" and those runs' training gains coming "at the cost of more overfitting",
    read where no compared run completed one pass over the training data: every sentence a run trains on is as new to
    it as a validation sentence, so validation repeats the training fit's comparison (Figs. 5.13, 5.24), where the
    runs with 16x compute read 16 times the sentences."""
    return _short_of_one_pass(c.numbers.get("most passes"), "longest-trained",
                              "so none could overfit and validation only repeats the training fit, where the runs with "
                              "16x compute read 16 times the sentences; the thesis reads the figure as their training "
                              "gains coming at the cost of more overfitting")


def _validation_as_training(c: Comparison) -> str | None:
    """With L2, discrete latents losing validation NLL faster than continuous ones "unlike the training fit" (Fig.
    5.11), read where no compared run completed one pass over the training data: the training sentences are as unseen
    as the validation ones, so validation cannot yet part from the training fit."""
    return _short_of_one_pass(c.numbers.get("most passes"), "longest-trained",
                              "so none could overfit, and validation could not yet part from the training fit that "
                              "the sentence sets it against",
                              alike=c.numbers.get("least passes") == c.numbers.get("most passes"))


def _undertrained(c: Comparison) -> str | None:
    """The single-sample runs alike at zero latent usage, the thesis' expectation for runs trained to their best
    validation loss (their dropouts making up for the regularising effect of fewer steps and smaller batches), read
    where the least-trained run compared did not complete one pass over the training data: it is still far from its
    best, so the runs differ by the training the shorter one never had."""
    return _short_of_one_pass(c.numbers.get("least passes"), "least-trained",
                              "far from its best validation loss, so the runs differ by the training it never had")


def _too_short(c: Comparison) -> str | None:
    """An equal-compute tradeoff whose shared KL range ends at or below the run's best fit."""
    if not c.numbers["short"]:
        return None
    return (f"cannot be tested at this scale: the KL range both curves' trials reach ends at {c.numbers['reach']:.3f}, "
            f"not above the run's best fit at KL {c.numbers.get('best fit KL', 0.0):.3f}, so no higher latent usage is "
            "left to compare")


def _high_kl_unreached(c: Comparison) -> str | None:
    """Fig. 5.8's high latent usage (KL :data:`ON_PAR_KL`) not reached by both DReG 16 training-fit curves."""
    if not c.numbers["short"]:
        return None
    reach = " and ".join(f"{v:.3f} with {k.split(' ', 1)[1]}" for k, v in c.numbers.items() if k.startswith("reach "))
    return (f"cannot be tested at this scale: high latent usage, read as a KL of {ON_PAR_KL} nats per token, lies "
            f"beyond the DReG 16 training-fit trials, which reach at most KL {reach}")


# ladders reading a sentence about regularisation, or conditioned on it (Table 5.1's "small model and strong
# regularization")
REGULARISATION_LADDERS = frozenset({"5.11-dropout", "T5.1-perplexity"})


def ladder_cannot_fail(ladder: Results, key: str) -> str | None:
    """Why ladder ``key`` cannot fail (or be tested) at this scale, or None: a low-latent-usage ladder whose curves
    have no validation trial above the low-KL line at any rung or seed meets the line whatever the models do (as
    Table 5.1's cells, :func:`_line_cannot_fail`), judged when no trials were recorded to tell; a ladder on a sentence
    about regularisation (:data:`REGULARISATION_LADDERS`) whose top rung stays under one pass over the training
    sentences, where no run can overfit (as :func:`_cannot_overfit`)."""
    entry, low = ladder.get("ladders", {}).get(key) or {}, ladder.get("low_kl")
    if key in REGULARISATION_LADDERS:
        top = max((r["steps"] for r in entry.get("rungs", ())), default=0)
        share = max(passes(top, ladder.get("training", {}).get("batch_size", 0),
                           ladder.get("data", {}).get("train_sentences"), entry.get("curves", ())), default=None)
        if share is None or share >= 1:
            return None
        return (f"cannot be tested at this scale: its top rung ({top:,} steps) saw {share:.0%} of one pass over the "
                "training sentences, so no run could overfit and regularisation had nothing yet to improve on")
    kls = [t["kl"] for curve in entry.get("curves", ()) for by_step in ladder.get("trials", {}).get(curve, {}).values()
           for trials in by_step.values() for t in trials if t.get("kl") is not None]
    if entry.get("kind") != "latents" or not kls or max(kls) > low:
        return None
    return f"cannot fail at this scale: every trial of its curves at every rung and seed below {low} nats " \
           f"(at most {max(kls):.3f})"


# Clauses of the quoted sentences that no comparison reads, per figure: named as not run.
UNJUDGED_CLAUSES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("5.22", "5.23"), ("the need for both terms 'even more so than' on the synthetic data (Figs. 5.4, "
                                       "5.7): a comparison across tasks, whose hypervolumes are on other scales",)),
    "5.24": ("'steeper training curves translate to steeper validation curves' (no rule for a curve's steepness)",),
}

