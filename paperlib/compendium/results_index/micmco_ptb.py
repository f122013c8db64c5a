"""Index rows of MICMCO on PTB (Melis §5.7.2, §5.B): the figures' claims, their budget ladders and Table 5.1.

The rows only display: each verdict is the :class:`~paperlib.experiments.common.claims.Claim` of
:func:`paperlib.experiments.micmco.ptb.claims.figure_claim` or :func:`~paperlib.experiments.micmco.ptb.claims.
table_claim` (the notebook shows the same claims); this module adds what the figures' numbers say to a reader
(why a curve has no hypervolume) and a one-line reason from the claims' comparisons.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

from paperlib.reference.micmco import MICMCO_PTB_TABLE_5_1
from paperlib.experiments.common.claims import Unjudged
from paperlib.experiments.micmco.ptb.claims import (
    BOTH_TERMS, COMPUTE, DISCRETE, DROPOUT, GENERALISE, KEEPS_ORDER, LADDER_ITEMS, LOW_LATENTS, MASKS,
    PERPLEXITY, POWER, SAMPLES, SPREAD, TABLE, Reading, figure_claim, lowest_nll, readings, table_cells, table_claim,
)
from paperlib.experiments.micmco.ptb.claims import plain_key as ptb_key  # noqa: F401 (the package exports it)
from paperlib.experiments.micmco.synthetic.claims import hv_tie

from paperlib.compendium.results_index.text import MissingResult, NotAttempted, REASON_CHARS, Results, _clip, _f
from paperlib.compendium.results_index.micmco_synthetic import _counts_short


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
# Melis Table 5.1, test perplexity per hidden size and column
_THESIS_TABLE_5_1 = {hs: {column: v["perplexity"] for column, v in row.items()}
                     for hs, row in MICMCO_PTB_TABLE_5_1.items()}


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
    has an area. ``labels``: the curves without one; ``why``: the sentence the row shows."""
    figure = r["figures"][fig]
    names = [n for n in figure["normalised_hypervolume"] if n in r["curves"]]
    zero = [n for n in names if not figure["normalised_hypervolume"][n]]
    if not zero:
        return None
    lowest = {n: None if (v := lowest_nll(r["curves"][n]["trials"])) == math.inf else v for n in names}
    label = {n: r["curves"][n]["label"] for n in names}
    reference = figure.get("reference_nll")
    reasons, above = [], all(lowest[n] is not None and reference is not None and lowest[n] >= reference for n in zero)
    for n in zero:
        if lowest[n] is None:
            reasons.append(f"{label[n]} has no trial with a finite NLL (all diverged or failed)")
        elif reference is not None and lowest[n] >= reference:
            reasons.append(f"every trial of {label[n]} is worse than the reference (its lowest NLL {lowest[n]:.3f})")
        else:
            reasons.append(f"{label[n]} has no trial inside the box with KL above 0 (lowest NLL {lowest[n]:.3f})")
    box = "no finite trial in any curve, so no reference point"
    best = min((n for n in names if lowest[n] is not None), key=lambda n: lowest[n], default=None)
    if reference is not None and best is not None:
        box = (f"reference NLL {reference:.3f} = the figure's lowest NLL {lowest[best]:.3f} ({label[best]}) + the "
               f"{reference - lowest[best]:.2g}-nat margin")
    return {"labels": [label[n] for n in zero], "reference": reference, "above": above,
            "why": f"0.000 means no trial inside the reference box ({box}): " + "; ".join(reasons)}


# How each PTB claim reads in a reason: its subject in a few words.
_PTB_SUBJECTS = {
    MASKS: "shared vs naive masks", SAMPLES: "16 vs 1 sample", DISCRETE: "VIMCO 16 vs DReG 16",
    POWER: "power between KL and Rényi", BOTH_TERMS: "16/16 vs 16/1 and 1/16",
    GENERALISE: "16 samples vs 1 with 16x compute", COMPUTE: "1 sample with 16x compute", KEEPS_ORDER: "order kept",
    SPREAD: "DReG estimators close at 2x hidden", DROPOUT: "dropout vs L2 best NLL",
    PERPLEXITY: "best perplexity with or without 16 samples", LOW_LATENTS: "optima at low KL",
}
_PTB_LADDER_SUBJECTS = {"5.8": "16 vs 1", "5.9": "16 vs 1", "5.10": "shared vs naive masks", "5.11": "16 vs 1",
                        "5.11-dropout": "dropout vs L2", "5.12": "16 vs 1",
                        "T5.1-perplexity": "perplexity", "T5.1-latents": "latent usage"}  # for a row's reason


def _ptb_ladder_reason(results: Results, item: str) -> str:
    """The readings of row ``item``'s budget ladders for its reason ("ladder: no trend"); empty for a row without
    one, or with one of another profile."""
    keys = LADDER_ITEMS.get(item, ())
    ladder = results.get("micmco_ptb_ladder")
    if not keys or ladder is None or ladder["profile"] != results["micmco_ptb"]["profile"]:
        return ""
    read = [k for k in keys if ladder["ladders"].get(k, {}).get("reading")]
    return "; ".join(f"ladder{' ' + _PTB_LADDER_SUBJECTS[k] if len(keys) > 1 else ''}: "
                     f"{ladder['ladders'][k]['reading']}" for k in read)


def _micmco_ptb_figure_verdict(fig: str) -> Callable[[Results], tuple[str, str]]:
    def verdict(results: Results) -> tuple[str, str]:
        """The figure's claim as :func:`paperlib.experiments.micmco.ptb.claims.figure_claim` judges it (the notebook
        shows the same claims), with why a curve has no hypervolume where one shows 0.000."""
        _micmco_ptb_missing(results, fig)
        r = results["micmco_ptb"]
        ladder = results["micmco_ptb_ladder"] if f"M-F{fig}" in LADDER_ITEMS else None
        try:
            claim = figure_claim(r, ladder, fig)
        except Unjudged:
            return (f"partly: {len(r['figures'][fig]['curves'])} curves drawn; no numeric rule for this figure's "
                    f"claim ('{_MICMCO_PTB_SAYS[fig]}') compared curves at this profile, compare the frontiers in "
                    "the figure", "no numeric rule for this figure's claim ran; compare the frontiers in the figure")
        text = claim.text()
        zero = _zero_hypervolumes(r, fig)
        if zero and "0.000" in text:
            text += (f"; HV 0.000 is no area, not a failed computation: every trial of {', '.join(zero['labels'])} "
                     f"lies above the reference NLL {zero['reference']:.3f} (see 'ours')" if zero["above"] else
                     f"; HV 0.000 is no area: see 'ours' for why {', '.join(zero['labels'])} have none")
        reason = _ptb_reason(readings(r, fig, ladder))
        if zero and len(reason) + 45 <= REASON_CHARS:
            reason += "; HV 0.000: no trial inside the reference box"
        ladder_reason = _ptb_ladder_reason(results, f"M-F{fig}")
        return text, _clip(f"{reason}; {ladder_reason}") if ladder_reason else reason
    return verdict


def _tie(*judged: Reading) -> str:
    """What "inside the tie" means in a reason: the fixed hypervolume tie, or the seed margins measured instead."""
    seeded = sorted({c.numbers["seed margin"] for claim in judged for c in claim.comparisons
                     if "seed margin" in c.numbers})
    if not seeded:
        return f"{hv_tie()} tie"
    both = len(seeded) < sum(len(claim.comparisons) for claim in judged)
    return ("seed margin" + ("s " if len(seeded) > 1 else " ") + "/".join(f"{m:.3f}" for m in seeded)
            + (f" or the {hv_tie()} tie" if both else ""))


def _ptb_reason(judged: Sequence[Reading]) -> str:
    """Per claim its subject and how its comparisons came out (or its own reading, :data:`_PTB_REASONS`, when it
    does not hold, and always for orders kept); counted over all claims when that is too long for a line."""
    texts = []
    for claim in judged:
        own = _PTB_REASONS.get(claim.name, lambda c: None)(claim)
        subject = _PTB_SUBJECTS.get(claim.name, claim.name)
        texts.append(own if own and (claim.verdict != "reproduced" or claim.name == KEEPS_ORDER)
                     else f"{subject}: {_counts_short(claim.compared, _tie(claim))}")
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
    r = results["micmco_ptb"]
    st, data = r["settings"], r.get("data", {})
    trials = len(next(iter(r["curves"].values()))["trials"]) if r["curves"] else 0
    vocab = f"vocabulary {st['vocab_size']:,}" if st.get("vocab_size") else "full vocabulary"
    from paperlib.experiments.micmco.ptb.micmco_ptb import hidden_sizes

    hidden = " / ".join(str(h) for h in hidden_sizes(r))
    thesis = " / ".join(map(str, MICMCO_PTB_TABLE_5_1))  # Table 5.1's hidden sizes
    return (f"hidden {hidden} (thesis {thesis}), {vocab}, {st['steps']} steps × {st['batch_size']} "
            f"sentences, {trials} tuned trials per curve, {len(r['curves'])} curves"
            + (f", {data['valid_sentences']:,} validation sentences" if data.get("valid_sentences") else "")
            + (f"; hypervolume box per figure: NLL up to the lowest NLL of its curves + {st['hv_margin']} nats, KL "
               f"from 0 to {st['kl_cap']} nats per token" if "hv_margin" in st and "kl_cap" in st else ""))


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
        claim = table_claim(r, results["micmco_ptb_ladder"])
    except Unjudged:
        raise MissingResult("Table 5.1 claims") from None
    run, cells, _ = table_cells(r)
    unrun = f"{cells - run} of {cells} cells not run at this profile" if run < cells else ""
    text = claim.text() + "; absolute perplexities far from the thesis' (smaller model, vocabulary and budget)"
    ladder_reason = _ptb_ladder_reason(results, "M-T5.1")
    reason = _ptb_reason(readings(r, TABLE, results.get("micmco_ptb_ladder"))) + (f"; {ladder_reason}" if ladder_reason else "")
    return text, _clip(reason + (f"; {unrun}" if unrun else ""))
