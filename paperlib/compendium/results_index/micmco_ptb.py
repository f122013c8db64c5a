"""Index rows of MICMCO on PTB (Melis §5.7.2, §5.B): the figures' claims, their budget ladders and Table 5.1.

The rows only display: each verdict is the :class:`~paperlib.experiments.common.claims.Claim` of
:func:`paperlib.experiments.micmco.ptb.claims.figure_claim` or :func:`~paperlib.experiments.micmco.ptb.claims.
table_claim` (the notebook shows the same claims); this module adds what the figures' numbers say to a reader
(why a curve has no hypervolume, which of its trials diverged), a one-line reason from the claims' comparisons, the
scale every PTB row shares (ours beside the thesis', what each kind of curve is scored on, what the budget ladder
finds about the budget) and the thesis' Table 5.1 with its NLLs and KLs.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Mapping, Sequence

from paperlib.reference.micmco import MICMCO_PTB_TABLE_5_1
from paperlib.reference.setups import MELIS_PTB_MICMCO
from paperlib.experiments.common.claims import Unjudged
from paperlib.experiments.micmco.ptb.claims import (
    ALIKE, BEST_FIT, BOTH_TERMS, DEGRADES, DISCRETE, DISCRETE_GAIN, DISCRETE_TRAILS, DROPOUT, FRONTIER, GENERALISE,
    KEEPS_ORDER, LADDER_ITEMS, LOW_LATENTS, MASKS, NO_GAIN, ON_PAR, PERPLEXITY, POWER, RENYI_HIGH, SAMPLES,
    SMALLER_GAIN, SPREAD, TABLE, TRADEOFF, Reading, Untestable, diverged_trials, figure_claim, frontier_tie,
    ladder_cannot_fail, lowest_nll, readings, readings_and_set_aside, table_cells, table_claim,
)
from paperlib.experiments.micmco.ptb.claims import plain_key as ptb_key  # noqa: F401 (the package exports it)
from paperlib.experiments.micmco.ptb.comparisons import pass_share, passes
from paperlib.experiments.micmco.ptb.unigram import matching_levels
from paperlib.experiments.micmco.ptb.untestable import WORD_FREQUENCIES
from paperlib.experiments.micmco.synthetic.claims import hv_tie

from paperlib.compendium.results_index.text import (MissingResult, NotAttempted, REASON_CHARS, Results, _clip, _f,
                                                 index_text)
from paperlib.compendium.results_index.micmco_synthetic import _counts_short
from paperlib.compendium.results_index.micmco_ptb_setup import split_choice, training_fit_search, trials_past


# -- MICMCO on PTB (Melis §5.7.2) ------------------------------------------------------------------

# The thesis' reading of each PTB figure (paperlib.experiments.micmco.ptb.micmco_ptb.FIGURES, without importing torch here).
_MICMCO_PTB_SAYS = {
    "5.8": "16 samples improve on 1: with both objectives at low KL, only with Rényi at high KL",
    "5.9": "16 samples improve markedly with either objective; discrete beats continuous",
    "5.10": "no multi-sample gain with continuous latents; a small one with discrete, which trail continuous",
    "5.11": "multi-sample helps; discrete degrade faster than continuous; best NLL worse than with dropout",
    "5.12": "multi-sample improves latent usage for both; discrete on par with continuous up to KL ≈ 0.5",
    "5.13": "more compute gives VIMCO 1 a better best fit at low KL, but its tradeoff stays as steep",
    "5.14": "VIMCO 16 better than VIMCO 1 trained 16x longer or with 16x larger batches",
    "5.16": "batch size shifts the curves but keeps their order",
    "5.17": "length shifts the curves but keeps their order",
    "5.18": "at 256 units the three DReG estimators differ very little",
    "5.19": "batch size shifts the curves but keeps their order",
    "5.20": "length shifts the curves but keeps their order",
    "5.21": "length shifts the curves but keeps their order",
    "5.22": "gains need multiple samples in both terms",
    "5.23": "gains need multiple samples in both terms",
    "5.24": "more compute helps DReG 1's best fit at low KL, not its tradeoff",
    "5.25": "DReG 16 generalises better than either (curves close)",
    "5.28": "power often better than KL but behind Rényi",
    "5.29": "power often better than KL but behind Rényi",
}
# The rows a PTB budget ladder is a part of (rows.py names the ladder's files for them).
_MICMCO_PTB_LADDER_ITEMS = tuple(LADDER_ITEMS)


class _ThesisCell(float):
    """A cell of the thesis' Table 5.1: its test perplexity as a number (the table's short cell compares them),
    written with the cell's NLL and KL per token beside it."""

    nll: float
    kl: float

    def __new__(cls, cell: Mapping[str, float]) -> "_ThesisCell":
        self = super().__new__(cls, cell["perplexity"])
        self.nll, self.kl = cell["nll"], cell["kl"]
        return self

    def __str__(self) -> str:
        return f"{float(self)} (NLL {self.nll:.3f}, KL {self.kl:.3f})"

    __repr__ = float.__repr__


# Melis Table 5.1 per hidden size and column: test perplexity, shown with its NLL and KL per token
_THESIS_TABLE_5_1 = {hs: {column: _ThesisCell(v) for column, v in row.items()}
                     for hs, row in MICMCO_PTB_TABLE_5_1.items()}
# The thesis' optimisation length (Figs. 5.17-5.21: "40 or 80 thousand optimization steps") and vocabulary (the PTB
# of Mikolov et al.'s preprocessing), beside ours in the scale.
_THESIS_STEPS = MELIS_PTB_MICMCO["steps"]
_THESIS_VOCABULARY = MELIS_PTB_MICMCO["vocab_size"]
# Sentences in the PTB's validation and test files: the results record how many of them a profile scores on, and the
# training set's full size, but not these.
_PTB_SENTENCES = {"valid": 3_370, "test": 3_761}


def _micmco_ptb_missing(results: Results, fig: str) -> None:
    r = results["micmco_ptb"]
    if fig not in r["figures"]:
        run = ", ".join(sorted(r["figures"], key=lambda f: tuple(int(p) for p in f.split(".")))) or "none"
        from paperlib.experiments.micmco.ptb.micmco_ptb import extra_minutes

        extra = extra_minutes(r, fig)
        cost = "" if extra is None else f"; it would add ≈ {extra:.0f} min at this profile's trial budget"
        raise NotAttempted(f"the {r['profile']} profile runs Figs. {run} and Table 5.1, not this figure{cost} "
                           "(extrapolated from the measured seconds per cost unit of the curves that ran); every "
                           "figure runs in the `paper` profile",
                           f"not run at the {r['profile']} profile" + (
                               "" if extra is None else f" (≈ {extra:.0f} min more)")
                           + "; the `paper` profile runs it")


def _micmco_ptb_hv(r: Mapping[str, Any], fig: str) -> str:
    hv = r["figures"][fig]["normalised_hypervolume"]
    return ", ".join(f"{r['curves'][n]['label']} {_f(v, 3)}" for n, v in hv.items() if n in r["curves"])


def _micmco_ptb_figure_ours(fig: str) -> Callable[[Results], str]:
    def ours(results: Results) -> str:
        _micmco_ptb_missing(results, fig)
        r = results["micmco_ptb"]
        zero = _zero_hypervolumes(r, fig)
        return f"normalised hypervolume: {_micmco_ptb_hv(r, fig)}" + (f"; {zero['why']}" if zero else "")
    return ours


def _micmco_ptb_figure_ours_short(fig: str) -> Callable[[Results], str]:
    def ours(results: Results) -> str:
        _micmco_ptb_missing(results, fig)
        r = results["micmco_ptb"]
        zero = _zero_hypervolumes(r, fig)
        return f"HV {_micmco_ptb_hv(r, fig)}" + ("; 0.000: no trial inside the reference box" if zero else "")
    return ours


def _zero_hypervolumes(r: Mapping[str, Any], fig: str) -> dict[str, Any] | None:
    """Why curves of PTB figure ``fig`` have no hypervolume (0 or none), from their trials and the figure's reference
    point (NLL = the lowest NLL of the figure's curves + ``hv_margin``, KL = 0; ``paperlib.experiments.micmco.ptb.micmco_ptb.
    compare_hypervolumes``): a curve scores 0 when none of its trials lies inside that box. None when every curve
    has an area. ``labels``: the curves without one; ``diverged``: per such curve with trials that diverged, what
    of them; ``why``: the sentence the row shows."""
    figure = r["figures"][fig]
    names = [n for n in figure["normalised_hypervolume"] if n in r["curves"]]
    zero = [n for n in names if not figure["normalised_hypervolume"][n]]
    if not zero:
        return None
    lowest = {n: None if (v := lowest_nll(r["curves"][n]["trials"])) == math.inf else v for n in names}
    label = {n: r["curves"][n]["label"] for n in names}
    reference = figure.get("reference_nll")
    reasons, above = [], all(lowest[n] is not None and reference is not None and lowest[n] >= reference for n in zero)
    diverged = {label[n]: _diverged_text(r["curves"][n]) for n in zero if diverged_trials(r["curves"][n])}
    for n in zero:
        some = "every finite trial" if label[n] in diverged else "every trial"
        lost = f"; {diverged[label[n]]}" if label[n] in diverged and lowest[n] is not None else ""
        if lowest[n] is None:
            reasons.append(f"{label[n]} has no trial with a finite NLL (all diverged or failed)")
        elif reference is not None and lowest[n] >= reference:
            reasons.append(f"{some} of {label[n]} is worse than the reference (its lowest NLL {lowest[n]:.3f}){lost}")
        else:
            reasons.append(f"{label[n]} has no trial inside the box with KL above 0 (lowest NLL {lowest[n]:.3f}){lost}")
    box = "no finite trial in any curve, so no reference point"
    best = min((n for n in names if lowest[n] is not None), key=lambda n: lowest[n], default=None)
    if reference is not None and best is not None:
        box = (f"reference NLL {reference:.3f} = the figure's lowest NLL {lowest[best]:.3f} ({label[best]}) + the "
               f"{reference - lowest[best]:.2g}-nat margin")
    return {"labels": [label[n] for n in zero], "reference": reference, "above": above, "diverged": diverged,
            "why": f"0.000 means no trial inside the reference box ({box}): " + "; ".join(reasons)}


def _zero_names(r: Mapping[str, Any], fig: str) -> list[str]:
    hv = r["figures"][fig]["normalised_hypervolume"]
    return [n for n in hv if n in r["curves"] and not hv[n]]


def _lost(curve: Mapping[str, Any]) -> str:
    """ "4 of DReG 16/1 K/R's 6 trials diverged (trials 1, 3, 4, 5): its comparisons rest on the other 2"."""
    lost, n = diverged_trials(curve), len(curve["trials"])
    return (f"{len(lost)} of {curve['label']}'s {n} trials diverged (trial{'s' if len(lost) > 1 else ''} "
            f"{', '.join(map(str, lost))}): its comparisons rest on the other {n - len(lost)}")


def _diverged_text(curve: Mapping[str, Any]) -> str:
    """ "4 of its 6 trials diverged (trials 1, 3, 4, 5)": the trials of ``curve`` without a finite NLL."""
    lost, n = diverged_trials(curve), len(curve["trials"])
    return f"{len(lost)} of its {n} trials diverged (trial{'s' if len(lost) > 1 else ''} {', '.join(map(str, lost))})"


# How each PTB claim reads in a reason: its subject in a few words.
_PTB_SUBJECTS = {
    MASKS: "shared vs naive masks", SAMPLES: "16 vs 1 sample", DISCRETE: "VIMCO 16 vs DReG 16",
    POWER: "power between KL and Rényi", BOTH_TERMS: "16/16 vs 16/1 and 1/16",
    GENERALISE: "16 samples vs 1 with 16x compute", KEEPS_ORDER: "order kept",
    SPREAD: "DReG estimators close at 2x hidden", DROPOUT: "naive dropout vs L2 best NLL",
    PERPLEXITY: "best perplexity with or without 16 samples", LOW_LATENTS: "optima at low KL",
    NO_GAIN: "no DReG gain", DISCRETE_GAIN: "VIMCO gain", SMALLER_GAIN: "VIMCO gain below training's",
    DISCRETE_TRAILS: "VIMCO behind DReG", DEGRADES: "VIMCO degrades faster", ON_PAR: "VIMCO on par with DReG",
    BEST_FIT: "16x compute's best fit", TRADEOFF: "16x compute's tradeoff", ALIKE: "single-sample runs alike",
    RENYI_HIGH: "Rényi alone gaining at high KL",
}
_PTB_LADDER_SUBJECTS = {"5.8": "16 vs 1", "5.9": "16 vs 1", "5.10": "shared vs naive masks", "5.11": "16 vs 1",
                        "5.11-dropout": "shared-mask dropout vs L2", "5.12": "16 vs 1",
                        "T5.1-perplexity": "perplexity", "T5.1-latents": "latent usage"}  # for a row's reason


def _ptb_ladder_reason(results: Results, item: str) -> str:
    """The readings of row ``item``'s budget ladders for its reason ("ladder: no trend", or "cannot fail" / "cannot
    be tested" for one the claim names as not run, :func:`~paperlib.experiments.micmco.ptb.claims.ladder_cannot_fail`);
    empty for a row without one, or with one of another profile."""
    keys = LADDER_ITEMS.get(item, ())
    ladder = results.get("micmco_ptb_ladder")
    if not keys or ladder is None or ladder["profile"] != results["micmco_ptb"]["profile"]:
        return ""
    read = [k for k in keys if ladder["ladders"].get(k, {}).get("reading")]
    return "; ".join(f"ladder {_PTB_LADDER_SUBJECTS[k]}: "
                     + (why.split(" at this scale")[0] if (why := ladder_cannot_fail(ladder, k))
                        else ladder["ladders"][k]["reading"])
                     for k in read)


_ONE_PASS = "of one pass over the training sentences"


def _untestable_reason(r: Mapping[str, Any], fig: str | None, not_run: Sequence[str]) -> str:
    """The one-line reason of a figure (or, ``fig`` None, Table 5.1) none of whose claims can be tested at this
    scale, where each waits for a completed pass over the training sentences (the most of one the figure's curves
    saw) or for a curve compared to get past a model without context, else the plain fact."""
    st = r["settings"]
    shares = passes(st.get("steps", 0), st.get("batch_size", 0), r.get("data", {}).get("train_sentences"),
                    [n for n in r["figures"].get(fig, {}).get("curves", ()) if n in r["curves"]])
    if not all(_ONE_PASS in why or WORD_FREQUENCIES in why for why in not_run):
        return "ran, but its claims cannot be judged at this profile"
    needs = []
    if shares and any(_ONE_PASS in why for why in not_run):
        needs.append(f"runs past one pass over the training data (ours: at most {max(shares):.0%})")
    if any(WORD_FREQUENCIES in why for why in not_run):
        needs.append("curves past word frequencies")
    return (f"ran, but its sentences need {' and '.join(needs)}" if needs else
            "ran, but its claims cannot be judged at this profile")


def _micmco_ptb_figure_verdict(fig: str) -> Callable[[Results], tuple[str, str]]:
    def verdict(results: Results) -> tuple[str, str]:
        """The figure's claim as :func:`paperlib.experiments.micmco.ptb.claims.figure_claim` judges it (the notebook
        shows the same claims), with why a curve has no hypervolume where one shows 0.000."""
        _micmco_ptb_missing(results, fig)
        r = results["micmco_ptb"]
        ladder = results["micmco_ptb_ladder"] if f"M-F{fig}" in LADDER_ITEMS else None
        try:
            claim = figure_claim(r, ladder, fig, results.get("micmco_ptb_unigram"))
        except Untestable as why:
            raise NotAttempted(f"the curves ran at this profile, but {'; '.join(why.not_run)}",
                               _untestable_reason(r, fig, why.not_run)) from None
        except Unjudged:
            return (f"partly: {len(r['figures'][fig]['curves'])} curves drawn; no numeric rule for this figure's "
                    f"claim ('{_MICMCO_PTB_SAYS[fig]}') compared curves at this profile, compare the frontiers in "
                    "the figure", "no numeric rule for this figure's claim ran; compare the frontiers in the figure")
        text = index_text(claim)
        zero = _zero_hypervolumes(r, fig)
        if zero and re.search(r"\bHV [^;()]*\b0\.000\b", text):
            text += (f"; HV 0.000 is no area: every finite trial of {', '.join(zero['labels'])} lies above the "
                     f"reference NLL {zero['reference']:.3f} (see 'ours')" if zero["above"] else
                     f"; HV 0.000 is no area: see 'ours' for why {', '.join(zero['labels'])} have none")
            text += "".join(f"; {_lost(r['curves'][n])}" for n in _zero_names(r, fig)  # some finite, some not
                            if diverged_trials(r["curves"][n]) and lowest_nll(r["curves"][n]["trials"]) < math.inf)
        levels = results.get("micmco_ptb_unigram")
        judged, aside = readings_and_set_aside(r, fig, ladder, levels)
        reason = "; ".join(x for x in (_ptb_reason(judged), _ptb_ladder_reason(results, f"M-F{fig}")) if x)
        at_level = _at_level_reason(aside)  # in the details where it does not fit
        if at_level and len(reason) + len(at_level) + 2 <= REASON_CHARS:
            reason += f"; {at_level}"
        if zero and len(reason) + 45 <= REASON_CHARS:
            reason += "; HV 0.000: no trial inside the reference box"
        return text, _clip(reason)
    return verdict


def _at_level_reason(aside: Sequence[Reading]) -> str:
    """The claims of a row none of whose comparisons could be tested because a curve compared is no better than word
    frequencies alone (:func:`~paperlib.experiments.micmco.ptb.untestable.at_unigram_level`), for its reason."""
    names = [_PTB_SUBJECTS.get(c.name, c.name) for c in aside if all(WORD_FREQUENCIES in why for _, why in c.untested)]
    return f"{' and '.join(names)}: not run (a curve at word frequencies)" if names else ""


def _tie(*judged: Reading) -> str:
    """What "inside the tie" means in a reason: the fixed hypervolume tie, or the seed margins measured instead; for
    frontier-NLL comparisons (:data:`~paperlib.experiments.micmco.ptb.claims.FRONTIER`) their tie in nats."""
    frontier = [claim.name in FRONTIER for claim in judged]
    if any(frontier):
        return f"{frontier_tie():.4f}-nat tie" if all(frontier) else "tie"
    seeded = sorted({c.numbers["seed margin"] for claim in judged for c in claim.comparisons
                     if "seed margin" in c.numbers})
    if not seeded:
        return f"{hv_tie()} tie"
    both = len(seeded) < sum(len(claim.comparisons) for claim in judged)
    return ("seed margin" + ("s " if len(seeded) > 1 else " ") + "/".join(f"{m:.3f}" for m in seeded)
            + (f" or the {hv_tie()} tie" if both else ""))


def _against(key: str) -> str:  # the split a "16/16 > 16/1" key sets 16/16 against
    return key.rsplit(">", 1)[-1].strip()


def _subject(claim: Reading) -> str:
    """A claim's subject in a reason (:data:`_PTB_SUBJECTS`); the sample-split claim's names the splits it judged."""
    if claim.name == BOTH_TERMS and claim.comparisons:
        return "16/16 vs " + " and ".join(dict.fromkeys(_against(c.key) for c in claim.comparisons))
    return _PTB_SUBJECTS.get(claim.name, claim.name)


def _half_untested(claim: Reading) -> str:
    """"; vs 16/1: not run (...)": the sample-split claim's splits set aside at word frequencies beside judged ones."""
    if claim.name != BOTH_TERMS or not claim.untested:
        return ""
    judged = {_against(c.key) for c in claim.comparisons}
    aside = [x for x in dict.fromkeys(_against(key) for key, _ in claim.untested) if x not in judged]
    return f"; vs {' and '.join(aside)}: not run (a curve at word frequencies)" if aside else ""


def _ptb_reason(judged: Sequence[Reading]) -> str:
    """Per claim its subject and how its comparisons came out (or its own reading, :data:`_PTB_REASONS`, when it
    does not hold, and always for orders kept), saying so where every hypervolume compared lies below the tie;
    counted over all claims when that is too long for a line."""
    texts = []
    for claim in judged:
        own = _PTB_REASONS.get(claim.name, lambda c: None)(claim)
        subject = _subject(claim)
        below = " (every HV below the tie)" if len(claim.below_tie) == len(claim.comparisons) else ""
        texts.append(own if own and (claim.verdict != "reproduced" or claim.name == KEEPS_ORDER)
                     else f"{subject}: {_counts_short(claim.compared, _tie(claim))}{below}{_half_untested(claim)}")
    text = "; ".join(texts)
    if len(text) > REASON_CHARS and len(judged) > 1:
        compared = [c for claim in judged for c in claim.compared]
        subjects = " and ".join(_PTB_SUBJECTS.get(claim.name, claim.name) for claim in judged)
        text = f"{subjects}: {_counts_short(compared, _tie(*judged))}"
        if len(text) > REASON_CHARS:
            text = f"{len(judged)} claims: {_counts_short(compared)}"
    return _clip(text)


def _order_reason(claim: Reading) -> str:
    """Orders kept under batch size and length, for a reason: estimator pairs separated the same way at both
    settings, keeping their sign inside the tie, and changing sign (a figure whose pairs all tie counts once)."""
    gaps = [c.numbers["kept gap"] for c in claim.comparisons]
    both = sum(c.held for c in claim.comparisons)
    inside = sum(g > 0 for g in gaps) - both
    text = f"{both} of {len(gaps)} estimator orders separated the same way at both settings"
    text += (f", {inside} keep{'s its' if inside == 1 else ' their'} sign inside the tie") if inside else ""
    changed = len(gaps) - both - inside
    if changed:
        text += f", {changed} {'does not keep its' if changed == 1 else 'do not keep their'} sign"
    return text


def _spread_reason(claim: Reading) -> str:
    """DReG estimators close at twice the hidden size, for a reason: their HV spreads against the tie and against
    the base hidden size's."""
    spreads = [c.numbers["spread"] for c in claim.comparisons]
    base = [b for c in claim.comparisons if (b := c.numbers["base spread"]) is not None]
    return (f"HV spread {' and '.join(f'{s:.3f}' for s in spreads)} (tie {hv_tie()})"
            + (f", vs {' and '.join(f'{b:.3f}' for b in base)} at the base size" if base else ""))


def _perplexity_reason(claim: Reading) -> str:
    """Table 5.1's "latents barely change the best perplexity" for a reason: the range of the changes."""
    from paperlib.experiments.micmco.ptb.micmco_ptb import PPL_TOLERANCE

    changes = [100 * abs(c.numbers["change"]) for c in claim.comparisons]
    return (f"16 samples change the best perplexity by {min(changes):.1f}–{max(changes):.1f}% (thesis: within "
            f"{PPL_TOLERANCE:.0%})")


# PTB claims read for a reason from their own numbers rather than by counting comparisons.
_PTB_REASONS: dict[str, Callable[[Reading], str | None]] = {
    KEEPS_ORDER: _order_reason, SPREAD: _spread_reason, PERPLEXITY: _perplexity_reason,
}


def _micmco_ptb_scale(results: Results) -> str:
    """The scale every PTB row shares: model, vocabulary and budget beside the thesis', the trials and seeds behind
    each curve, what training-fit and validation curves and Table 5.1's cells are scored on, what the budget ladder
    finds about the budget, and the hypervolume box; every number of ours read from the results."""
    r = results["micmco_ptb"]
    st, data = r["settings"], r.get("data", {})
    trials = len(next(iter(r["curves"].values()))["trials"]) if r["curves"] else 0
    vocab = (f"vocabulary {st['vocab_size']:,} (thesis {_THESIS_VOCABULARY:,})" if st.get("vocab_size") else
             "full vocabulary")
    from paperlib.experiments.micmco.ptb.micmco_ptb import hidden_sizes

    hidden = " / ".join(str(h) for h in hidden_sizes(r))
    thesis = " / ".join(map(str, MICMCO_PTB_TABLE_5_1))  # Table 5.1's hidden sizes
    budget = f"{st['steps']} steps × {st['batch_size']} sentences (thesis {_THESIS_STEPS:,} steps"
    if data.get("train_sentences"):
        share = pass_share(st["steps"], st["batch_size"], data["train_sentences"])
        budget += f"; ours {share:.0%} of one pass over the {data['train_sentences']:,} training sentences"
    return "; ".join(x for x in (
        f"hidden {hidden} (thesis {thesis}), {vocab}, {budget}), {trials} tuned trials per curve from one seed, "
        f"{len(r['curves'])} curves" + training_fit_search(r), _scored_on(r), _ladder_budget(results, st["steps"]),
        (f"hypervolume box per figure: NLL up to the lowest NLL of its curves + {st['hv_margin']} nats, KL from 0 to "
         f"{st['kl_cap']} nats per token" if "hv_margin" in st and "kl_cap" in st else "")) if x)


def _micmco_ptb_figure_scale(fig: str) -> Callable[[Results], str]:
    """The shared PTB scale and how far the figure's trials reach into its common hypervolume box (the one the row's
    Ours shows; a comparison on a box of its own, capped lower or with another reference, says so in its evidence):
    the most KL per token of a trial below the box's reference NLL, and so the largest normalised hypervolume any of
    its curves could have there (a single trial at that KL with the lowest NLL), beside the tie."""
    def scale(results: Results) -> str:
        r = results["micmco_ptb"]
        figure, st = r.get("figures", {}).get(fig, {}), r["settings"]
        reference, cap = figure.get("reference_nll"), st.get("kl_cap")
        kls = [t["kl"] for name in figure.get("curves", ()) for t in r["curves"].get(name, {}).get("trials", ())
               if reference is not None and t.get("nll") is not None and t["nll"] < reference
               and t.get("kl") is not None]
        top = min(max(kls), cap) if kls and cap else None
        reach = (f"on this figure's common box (the hypervolumes under Ours) its trials reach at most KL {top:.3f} nats "
                 f"per token of the box's {cap}, so none of those hypervolumes can exceed {top / cap:.3f}, against the "
                 f"{hv_tie()} tie" if top is not None else "")
        names = [n for n in figure.get("curves", ()) if n in r["curves"]]
        return "; ".join(x for x in (_micmco_ptb_scale(results), split_choice(r, fig), reach,
                                     _unigram_level(results, names)) if x)
    return scale


_SPLIT_WORDS = {"train": "the training-fit sentences", "valid": "validation"}


def _unigram_level(results: Results, names: Sequence[str]) -> str:
    """How far the curves ``names`` got past a model without context: per split they are scored on, the unigram
    model's NLL per token there (``results/micmco_ptb_unigram.json``, by ``paperlib levels micmco_ptb``) beside the
    curves' lowest NLLs (an IWAE bound, the unigram's exact), naming the curves above it and those below it by no more than
    the frontier tie (they have not yet learned what the word frequencies do not give), and counting the frontier
    points above it. Empty without the levels of the same profile and sentences."""
    r, level = results["micmco_ptb"], _same_sentences(results)
    if level is None:
        return ""
    texts = []
    for split in ("train", "valid"):
        best = {r["curves"][n]["label"]: r["curves"][n]["best"]["nll"] for n in names
                if r["curves"][n].get("split") == split and (r["curves"][n].get("best") or {}).get("nll") is not None
                and math.isfinite(r["curves"][n]["best"]["nll"])}
        if not best:
            continue
        unigram, tie = level["nll"][split], frontier_tie()
        gains = sorted(unigram - v for v in best.values())
        text = (f"a unigram model of the same sentences (no context) scores NLL {unigram:.3f} per token on "
                f"{_SPLIT_WORDS[split]}: the curves' lowest NLLs are {_span_about(gains)} it")
        above = [f"{label} ({v:.3f})" for label, v in best.items() if v > unigram]
        level_with = [f"{label} ({v:.3f})" for label, v in best.items() if 0 <= unigram - v <= tie]
        if above:
            text += f"; {', '.join(above)} above it: worse than word frequencies alone"
        if level_with:
            text += (f"; {', '.join(level_with)} below it by no more than the {tie:.4f}-nat tie: no better than word "
                     "frequencies alone")
        text += trials_past(r["curves"], [n for n in names if r["curves"][n].get("split") == split], unigram, tie)
        points = [p["nll"] for n in names if r["curves"][n].get("split") == split
                  for p in r["curves"][n].get("frontier", ())]
        if over := sum(v > unigram for v in points):
            text += (f"; {over} of the {len(points)} frontier points lie above it (their latent usage bought with a "
                     "fit worse than the unigram model's)")
        texts.append(text)
    return "; ".join(texts)


def _same_sentences(results: Results) -> Mapping[str, Any] | None:
    """The unigram levels of ``results/micmco_ptb_unigram.json`` when they were made at the stage results' profile
    on the sentences it scored (:func:`paperlib.experiments.micmco.ptb.unigram.matching_levels`), else None."""
    return matching_levels(results["micmco_ptb"], results.get("micmco_ptb_unigram"))


def _span_about(gains: Sequence[float], digits: str = ".3f", to: str = " to ") -> str:
    """Where values lie against a level, from their gains below it (negative: above it), sorted, each written with
    ``digits``: "0.139 to 0.157 below", "from 0.002 above it to 0.137 below", "0.010 to 0.160 above"."""
    low, high = gains[0], gains[-1]
    if low >= 0:
        return f"{high:{digits}} below" if low == high else f"{low:{digits}}{to}{high:{digits}} below"
    if high < 0:
        return f"{-high:{digits}} above" if low == high else f"{-high:{digits}}{to}{-low:{digits}} above"
    return f"from {-low:{digits}} above it to {high:{digits}} below"


def _of(count: int | None, split: str, total: int | None) -> str:
    """ "300 of the 3,370 validation sentences" (all of them when ``count`` is None or the whole split)."""
    if count is None or count == total:
        return f"all {total:,} {split} sentences" if total else f"all {split} sentences"
    return f"{count:,} random {split} sentences" + (f" of the {total:,}" if total else "")


def _scored_on(r: Mapping[str, Any]) -> str:
    """What training-fit and validation curves and Table 5.1's cells are scored on."""
    st, data = r["settings"], r.get("data", {})
    parts = []
    if data.get("train_eval_sentences"):
        subset = _of(data["train_eval_sentences"], "training", data.get("train_sentences"))
        parts.append(f"training fit scored on {subset}")
    if data.get("valid_sentences"):
        parts.append(f"validation on {_of(data['valid_sentences'], 'validation', _PTB_SENTENCES['valid'])}")
    rows = [row for row in r.get("table_5_1", []) if row.get("curve") in r["curves"]]
    if rows:
        factors = sorted({r["curves"][row["curve"]].get("steps_factor", 1) for row in rows})
        longer = " or ".join(f"{f}× as long ({f * st['steps']:,} steps)" if f != 1 else f"for {st['steps']} steps"
                             for f in factors)
        tokens = f" ({data['test_tokens']:,} tokens)" if data.get("test_tokens") else ""
        parts.append(f"each Table 5.1 cell the best-validation trial of a curve trained {longer}, tested on "
                     f"{_of(data.get('test_sentences'), 'test', _PTB_SENTENCES['test'])}{tokens}")
    return ", ".join(parts)


def _ladder_budget(results: Results, steps: int) -> str:
    """What the budget ladder (same profile) finds about the stage's budget: how many of the curves it trains still
    improve at its top rung, as a multiple of the stage's steps, and over how many seeds."""
    ladder = results.get("micmco_ptb_ladder")
    if not ladder or ladder.get("profile") != results["micmco_ptb"].get("profile") or not ladder.get("ladders"):
        return ""
    tops = [entry["rungs"][-1] for entry in ladder["ladders"].values() if entry.get("rungs")]
    if not tops:
        return ""
    top = max(rung["steps"] for rung in tops)
    improving = {}
    for rung in tops:
        if rung["steps"] == top:
            for name, curve in rung.get("curves", {}).items():
                if curve.get("converged") is not None:
                    improving[name] = improving.get(name, False) or not curve["converged"]
    seeds = len(ladder.get("settings", {}).get("seeds", [])) or "several"
    still = sum(improving.values())
    return (f"the budget ladder ({seeds} seeds, up to {top:,} steps, {top / steps:g}× this budget) finds {still} of "
            f"the {len(improving)} curves it trains still improving at its top rung")


def _micmco_ptb_table_scale(results: Results) -> str:
    """The shared PTB scale and the test sentences' unigram level beside the cells' test perplexities."""
    r, level = results["micmco_ptb"], _same_sentences(results)
    rows = [row for row in r.get("table_5_1", []) if row.get("curve") and row.get("test_perplexity") is not None
            and math.isfinite(row["test_perplexity"])]
    text = _micmco_ptb_scale(results)
    if level is not None and rows:
        unigram = level["perplexity"]["test"]
        shares = sorted(1 - row["test_perplexity"] / unigram for row in rows)
        cells = sorted(row["test_perplexity"] for row in rows)
        text += (f"; a unigram model of the same test sentences (no context) has perplexity {unigram:.1f}: the cells' "
                 f"{cells[0]:.1f}–{cells[-1]:.1f} are {_span_about(shares, '.0%', '–')} it")
    return text


def _micmco_ptb_table_ours(results: Results) -> str:
    rows = [row for row in results["micmco_ptb"]["table_5_1"] if row.get("curve")]
    if not rows:
        raise MissingResult("Table 5.1 rows")
    return "test perplexity (KL/token), " + "; ".join(
        f"hs {row['hidden_size']} {row['column']} {_f(row['test_perplexity'], 1)} ({_f(row['test_kl'], 3)})"
        for row in rows)


def _table_5_1_short(cells: Mapping[int, Mapping[str, float]]) -> str:
    """Table 5.1 for a table cell: per hidden size and estimator, the single-sample perplexity vs the best
    16-sample one."""
    out = []
    for hs, columns in cells.items():
        pairs = []
        for base in ("DReG", "VIMCO"):
            one = columns.get(f"{base} 1 K/R")
            many = [v for c, v in columns.items() if c.startswith(f"{base} 16")]
            if one is not None and many:
                pairs.append(f"{base} {one:.1f} / {min(many):.1f}")
        if pairs:
            out.append(f"hs {hs} {', '.join(pairs)}")
    return "test ppl, 1 / best 16 samples: " + "; ".join(out)


def _micmco_ptb_table_ours_short(results: Results) -> str:
    cells: dict[int, dict[str, float]] = {}
    for row in results["micmco_ptb"]["table_5_1"]:
        if row.get("curve"):
            cells.setdefault(row["hidden_size"], {})[row["column"]] = row["test_perplexity"]
    return _table_5_1_short(cells)


def _micmco_ptb_table_verdict(results: Results) -> tuple[str, str]:
    """Table 5.1's claim as :func:`paperlib.experiments.micmco.ptb.claims.table_claim` judges it."""
    r = results["micmco_ptb"]
    try:
        claim = table_claim(r, results["micmco_ptb_ladder"], results.get("micmco_ptb_unigram"))
    except Untestable as why:
        raise NotAttempted(f"the cells ran at this profile, but {'; '.join(why.not_run)}",
                           _untestable_reason(r, None, why.not_run)) from None
    except Unjudged:
        raise MissingResult("Table 5.1 claims") from None
    run, cells, _ = table_cells(r)
    unrun = f"{cells - run} of {cells} cells not run at this profile" if run < cells else ""
    text = index_text(claim) + "; absolute perplexities far from the thesis' (smaller model, vocabulary and budget)"
    ladder_reason = _ptb_ladder_reason(results, "M-T5.1")
    judged = readings(r, TABLE, results.get("micmco_ptb_ladder"), results.get("micmco_ptb_unigram"))
    reason = _ptb_reason(judged) + (f"; {ladder_reason}" if ladder_reason else "")
    return text, _clip(reason + (f"; {unrun}" if unrun else ""))
