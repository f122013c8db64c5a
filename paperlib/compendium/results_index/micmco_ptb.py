"""Index rows of MICMCO on PTB (Melis §5.7.2): the figures' claims, their budget ladders and Table 5.1."""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Mapping, Sequence

from paperlib import reference
from paperlib.experiments.claims import part_word, verdict_word
from paperlib.experiments.micmco_synthetic_claims import comparison_word, counts as hv_counts, hv_tie

from paperlib.compendium.results_index.text import MissingResult, NotAttempted, REASON_CHARS, Results, _clip, _f
from paperlib.compendium.results_index.micmco_synthetic import _counts_short


# -- MICMCO on PTB (Melis §5.7.2) ------------------------------------------------------------------

# The thesis' reading of each PTB figure (paperlib.experiments.micmco_ptb.FIGURES), and the computed claims each is read for.
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
_KEEPS_ORDER = ("batch size and optimisation length shift the curves but keep their order",)
_MICMCO_PTB_CLAIMS = {
    "5.8": ("multiple samples improve latent usage",),
    "5.9": ("multiple samples improve latent usage", "discrete latents fit the training data better"),
    "5.10": ("shared dropout masks restore the validation frontiers",),
    "5.11": ("dropout reaches a better best NLL than L2", "multiple samples improve latent usage"),
    "5.12": ("shared dropout masks restore the validation frontiers", "multiple samples improve latent usage"),
    "5.13": ("16x compute buys one sample a better best fit but not a better tradeoff",),
    "5.14": ("16 samples generalise better than one sample given the same compute",),
    "5.16": _KEEPS_ORDER,
    "5.17": _KEEPS_ORDER,
    "5.18": ("at 256 units the three DReG estimators differ very little",),
    "5.19": _KEEPS_ORDER,
    "5.20": _KEEPS_ORDER,
    "5.21": _KEEPS_ORDER,
    "5.22": ("gains need multiple samples in both terms",),
    "5.23": ("gains need multiple samples in both terms",),
    "5.24": ("16x compute buys one sample a better best fit but not a better tradeoff",),
    "5.25": ("16 samples generalise better than one sample given the same compute",),
    "5.28": ("the power objective is better than KL but behind Rényi",),
    "5.29": ("the power objective is better than KL but behind Rényi",),
}
# Melis Table 5.1, test perplexity per hidden size and column
_THESIS_TABLE_5_1 = {hs: {column: v["perplexity"] for column, v in row.items()}
                     for hs, row in reference.MICMCO_PTB_TABLE_5_1.items()}


def _micmco_ptb_missing(results: Results, fig: str) -> None:
    r = results["micmco_ptb"]
    if fig not in r["figures"]:
        run = ", ".join(sorted(r["figures"], key=lambda f: tuple(int(p) for p in f.split(".")))) or "none"
        from paperlib.experiments.micmco_ptb import extra_minutes

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


def _lowest_nll(trials: list[Mapping[str, Any]]) -> float | None:
    finite = [t["nll"] for t in trials if isinstance(t.get("nll"), (int, float)) and math.isfinite(t["nll"])]
    return min(finite) if finite else None


def _zero_hypervolumes(r: Mapping[str, Any], fig: str) -> dict[str, Any] | None:
    """Why curves of PTB figure ``fig`` have no hypervolume (0 or none), from their trials and the figure's reference
    point (NLL = the lowest NLL of the figure's curves + ``hv_margin``, KL = 0; ``paperlib.experiments.micmco_ptb.
    compare_hypervolumes``): a curve scores 0 when none of its trials lies inside that box. None when every curve
    has an area. ``labels``: the curves without one; ``why``: the sentence the row shows."""
    figure = r["figures"][fig]
    names = [n for n in figure["normalised_hypervolume"] if n in r["curves"]]
    zero = [n for n in names if not figure["normalised_hypervolume"][n]]
    if not zero:
        return None
    lowest = {n: _lowest_nll(r["curves"][n]["trials"]) for n in names}
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
    "shared dropout masks restore the validation frontiers": "shared vs naive masks",
    "multiple samples improve latent usage": "16 vs 1 sample",
    "discrete latents fit the training data better": "VIMCO 16 vs DReG 16",
    "the power objective is better than KL but behind Rényi": "power between KL and Rényi",
    "gains need multiple samples in both terms": "16/16 vs 16/1 and 1/16",
    "16 samples generalise better than one sample given the same compute": "16 samples vs 1 with 16x compute",
    "16x compute buys one sample a better best fit but not a better tradeoff": "1 sample with 16x compute",
    "batch size and optimisation length shift the curves but keep their order": "order kept",
    "at 256 units the three DReG estimators differ very little": "DReG estimators close at 2x hidden",
    "dropout reaches a better best NLL than L2": "dropout vs L2 best NLL",
    "latents barely change the best perplexity": "best perplexity with or without 16 samples",
    "Table 5.1's optima are at low latent usage": "optima at low KL",
}


# The rows a PTB budget ladder is a part of (paperlib.experiments.micmco_ptb_ladder.ITEMS, without importing torch).
_MICMCO_PTB_LADDER_ITEMS = ("M-F5.8", "M-F5.9", "M-F5.10", "M-F5.11", "M-F5.12", "M-T5.1")


_PTB_LADDER_SUBJECTS = {"5.8": "16 vs 1", "5.9": "16 vs 1", "5.10": "shared vs naive masks", "5.11": "16 vs 1",
                        "5.11-dropout": "dropout vs L2", "5.12": "16 vs 1",
                        "T5.1-perplexity": "perplexity", "T5.1-latents": "latent usage"}  # for a row's reason


def _ptb_ladder(results: Results, item: str) -> tuple[list[str], bool, str, str]:
    """The budget ladder's parts of row ``item``: (their verdicts, whether some ladder of the row went unjudged,
    "; label: verdict (evidence)" text, a short reason). Nothing for a row without a ladder; a ladder run at
    another profile, not run or not read is unjudged (it keeps the row from "reproduced", as a part not run)."""
    if item not in _MICMCO_PTB_LADDER_ITEMS:
        return [], False, "", ""
    from paperlib.experiments.micmco_ptb_ladder import ITEMS, ladder_claim_part

    ladder = results["micmco_ptb_ladder"]
    if ladder["profile"] != results["micmco_ptb"]["profile"]:
        return [], True, f"; not run: the budget ladder (its results are of profile {ladder['profile']})", ""
    parts = [ladder_claim_part(ladder, key) for key in ITEMS[item]]
    unread = sum(p is None for p in parts)
    parts = [p for p in parts if p is not None]
    text = "".join(f"; {p.label}: {p.verdict} ({p.evidence})" for p in parts)
    text += (f"; not judged: {unread} budget ladder(s) (not run at this profile, no gap at the top rung, or a "
             "lone judged rung inside its margin)") if unread else ""
    read = [k for k in ITEMS[item] if ladder["ladders"].get(k, {}).get("reading")]
    reason = "; ".join(f"ladder{' ' + _PTB_LADDER_SUBJECTS[k] if len(ITEMS[item]) > 1 else ''}: "
                       f"{ladder['ladders'][k]['reading']}" for k in read)
    return [p.verdict for p in parts], bool(unread), text, reason


def _with_ladder(words: Sequence[str], unjudged: bool) -> str:
    """:func:`verdict_word` over a row's parts; "partly" at best when a ladder of the row went unjudged."""
    word = verdict_word(list(words))
    return "partly" if word == "reproduced" and unjudged else word


def _micmco_ptb_figure_verdict(fig: str) -> Callable[[Results], tuple[str, str]]:
    def verdict(results: Results) -> tuple[str, str]:
        _micmco_ptb_missing(results, fig)
        r = results["micmco_ptb"]
        claims = {c["claim"]: c for c in r["claims"]}
        checked = [claims[name] for name in _MICMCO_PTB_CLAIMS.get(fig, ()) if name in claims
                   and claims[name]["verdict"] != "not run at this profile"]
        if not checked:
            return (f"partly: {len(r['figures'][fig]['curves'])} curves drawn; no numeric rule for this figure's "
                    f"claim ('{_MICMCO_PTB_SAYS[fig]}'), compare the frontiers in the figure",
                    "no numeric rule for this figure's claim; compare the frontiers in the figure")
        checked = [_claim_for_figure(c, fig) for c in checked]
        parts = "; ".join(_ptb_part(c, r["curves"]) for c in checked)
        zero = _zero_hypervolumes(r, fig)
        note = ""
        if zero and "0.000" in parts:
            note = (f"; HV 0.000 is no area, not a failed computation: every trial of {', '.join(zero['labels'])} lies "
                    f"above the reference NLL {zero['reference']:.3f} (see 'ours')" if zero["above"] else
                    f"; HV 0.000 is no area: see 'ours' for why {', '.join(zero['labels'])} have none")
        reason = _ptb_reason(checked)
        if zero and len(reason) + 45 <= REASON_CHARS:
            reason += "; HV 0.000: no trial inside the reference box"
        words, unjudged, ladder, ladder_reason = _ptb_ladder(results, f"M-F{fig}")
        reason = _clip(f"{reason}; {ladder_reason}") if ladder_reason else reason
        return f"{_with_ladder([c['verdict'] for c in checked] + words, unjudged)}: {parts}{note}{ladder}", reason
    return verdict


def _ptb_reason(claims: Sequence[Mapping[str, Any]]) -> str:
    """Per claim its subject and how its comparisons came out (or its own reading, :data:`_PTB_REASONS`); counted
    over all claims when that is too long for a line."""
    readings = []
    for claim in claims:
        compared = list(_comparisons(claim).values())
        own = _PTB_REASONS.get(claim["claim"], lambda c: None)(claim)
        subject = _PTB_SUBJECTS.get(claim["claim"], claim["claim"])
        readings.append(own if own and claim["verdict"] != "reproduced" else
                        f"{subject}: {_counts_short(compared) if compared else claim['verdict']}")
    text = "; ".join(readings)
    if len(text) > REASON_CHARS and len(claims) > 1:
        compared = [c for claim in claims for c in _comparisons(claim).values()]
        subjects = " and ".join(_PTB_SUBJECTS.get(claim["claim"], claim["claim"]) for claim in claims)
        text = f"{subjects}: {_counts_short(compared)}"
        if len(text) > REASON_CHARS:
            text = f"{len(claims)} claims: {_counts_short(compared)}"
    return _clip(text)


_HV_PAIR = re.compile(r"HV (?P<a>[^=/]+?) / (?P<b>[^=/]+?) = (?P<x>\d+\.\d+) / (?P<y>\d+\.\d+)")
_NUMBER = r"(-?\d+\.\d+)"


def _gap_power(key: str, evidence: Mapping[str, str]) -> float | None:
    values = re.search(rf"= {_NUMBER} / {_NUMBER} / {_NUMBER}", evidence.get(key.split()[0], ""))
    if values is None:
        return None
    kl, power, renyi = (float(v) for v in values.groups())
    return power - kl if key.endswith("power > KL") else renyi - power


def _gap_both_terms(key: str, evidence: Mapping[str, str]) -> float | None:
    fig, objective, _, _, other = key.split()
    text = evidence.get(fig, "")
    lik_only = re.search(rf"HV 16/1 {_NUMBER}", text)
    pair = re.search(rf"{'KL' if objective == 'kl' else 'Rényi'} 1/16 / 16/16 = {_NUMBER} / {_NUMBER}", text)
    if lik_only is None or pair is None:
        return None
    both = float(pair[2])
    return both - (float(lik_only[1]) if other == "16/1" else float(pair[1]))


def _hv_four(text: str) -> list[float] | None:
    values = re.search(rf"HV 1 / 1 T×16 / 1 bs×16 / best 16 = {_NUMBER} / {_NUMBER} / {_NUMBER} / {_NUMBER}", text)
    return None if values is None else [float(v) for v in values.groups()]


def _gap_generalise(key: str, evidence: Mapping[str, str]) -> float | None:
    hv = _hv_four(evidence.get(key.split()[0], ""))
    return None if hv is None else hv[3] - (hv[1] if key.endswith("T×16") else hv[2])


def _gap_compute(key: str, evidence: Mapping[str, str]) -> float | None:
    """Only when the ×16 run does reach the lower best NLL is the claim a matter of the HV gap."""
    text = evidence.get(key.split()[0], "")
    hv, nll = _hv_four(text), re.search(rf"best 16 = {_NUMBER} / {_NUMBER} / {_NUMBER}", text)
    if hv is None or nll is None:
        return None
    longer = key.endswith("T×16")
    if not float(nll[1 if longer else 2]) < float(nll[3]):
        return None
    return hv[3] - (hv[1] if longer else hv[2])


def _gap_pair(key: str, evidence: Mapping[str, str]) -> float | None:
    pair = _HV_PAIR.fullmatch(evidence.get(key, ""))
    return None if pair is None else float(pair["x"]) - float(pair["y"])


# Per PTB claim whose comparisons are hypervolume gaps in the thesis' direction: how to read one gap from its
# evidence (``paperlib.experiments.micmco_ptb.claim_verdicts``' formats). The others (orders kept, spreads, NLL and
# perplexity thresholds) are held or not, without a direction.
_PTB_GAPS: dict[str, Callable[[str, Mapping[str, str]], float | None]] = {
    "shared dropout masks restore the validation frontiers": _gap_pair,
    "multiple samples improve latent usage": _gap_pair,
    "discrete latents fit the training data better": _gap_pair,
    "the power objective is better than KL but behind Rényi": _gap_power,
    "gains need multiple samples in both terms": _gap_both_terms,
    "16 samples generalise better than one sample given the same compute": _gap_generalise,
    "16x compute buys one sample a better best fit but not a better tradeoff": _gap_compute,
}


def _comparisons(claim: Mapping[str, Any]) -> dict[str, tuple[str, float | None]]:
    """Each comparison of a PTB claim (its ``wins``) as (part verdict (:func:`comparison_word`), HV gap in the
    thesis' direction or None)."""
    read = _PTB_GAPS.get(claim["claim"])
    out = {}
    for key, held in claim.get("wins", {}).items():
        gap = read(key, claim["evidence"]) if read else None
        out[key] = (comparison_word(held, gap), gap)
    return out


def _order_reason(claim: Mapping[str, Any]) -> str | None:
    """Claim 11 (orders kept under batch size and length) for a reason, from its figure's evidence."""
    texts = [v for k, v in claim["evidence"].items() if re.fullmatch(r"\d+\.\d+", k)]
    if len(texts) != 1:
        return None
    if "no order to keep" in texts[0]:
        return "the three estimators tie at both settings: no order to keep"
    found = re.search(r"pairs reversed: (\d+), separated at one setting only: (\d+)", texts[0])
    return None if found is None else (f"{found[1]} estimator pairs reversed; {found[2]} separated at one setting "
                                       "only")


def _spread_reason(claim: Mapping[str, Any]) -> str | None:
    """Claim 12 (DReG estimators close at twice the hidden size) for a reason."""
    spreads = [re.search(r"HV spread (\d+\.\d+)(?: \(base hidden size, same length: (\d+\.\d+)\))?", v)
               for k, v in claim["evidence"].items() if k.startswith("5.18 ")]
    spreads = [s for s in spreads if s]
    if not spreads:
        return None
    text = " and ".join(s[1] for s in spreads)
    base = " and ".join(s[2] for s in spreads if s[2])
    return f"HV spread {text} (tie {hv_tie()})" + (f", vs {base} at the base size" if base else "")


def _perplexity_reason(claim: Mapping[str, Any]) -> str | None:
    """Table 5.1's "latents barely change the best perplexity" for a reason: the range of the changes."""
    from paperlib.experiments.micmco_ptb import PPL_TOLERANCE

    changes = [abs(float(m[1])) for v in claim["evidence"].values() if (m := re.search(r"\(([+-]?\d+\.\d+)%\)", v))]
    if not changes:
        return None
    return (f"16 samples change the best perplexity by {min(changes):.1f}–{max(changes):.1f}% (thesis: within "
            f"{PPL_TOLERANCE:.0%})")


# PTB claims read for a reason from their evidence rather than by counting comparisons.
_PTB_REASONS: dict[str, Callable[[Mapping[str, Any]], str | None]] = {
    "batch size and optimisation length shift the curves but keep their order": _order_reason,
    "at 256 units the three DReG estimators differ very little": _spread_reason,
    "latents barely change the best perplexity": _perplexity_reason,
}


_REGIMES = {"train": "training fit", "shared": "validation, shared masks", "naive": "validation, naive dropout",
            "l2": "validation, L2"}


def ptb_key(key: str, curves: Mapping[str, Mapping[str, Any]]) -> str:
    """A PTB claim's evidence key in plain words: "5.8 dreg16_kl.train" -> "Fig. 5.8 DReG 16 KL (training fit)",
    "dreg16_kl" -> "DReG 16 KL", "renyi" -> "Rényi"."""
    figure, _, rest = key.partition(" ")
    if not re.fullmatch(r"\d+\.\d+", figure):
        figure, rest = "", key
    if rest in curves:
        regime = curves[rest].get("regime")
        rest = curves[rest]["label"] + (f" ({_REGIMES[regime]})" if regime in _REGIMES else "")
    else:
        stem = next((c for c in curves if c.startswith(f"{rest}.")), None)
        bases = {"dreg": "DReG", "vimco": "VIMCO", "kl": "KL", "renyi": "Rényi"}
        rest = curves[stem]["label"] if stem else re.sub(r"\b(dreg|vimco|kl|renyi)\b", lambda m: bases[m[1]], rest)
    return " ".join(x for x in (f"Fig. {figure}" if figure else "", rest) if x)


def _hv_reading(key: str, evidence: str, held: bool | None) -> str:
    """One comparison of a PTB claim, "HV A / B = x / y" with the claim "A beats B by more than the tie", read out:
    a comparison that fails either leads in the claim's direction by less than the tie margin (no difference
    detected) or goes the other way."""
    tie = hv_tie()
    text = f"{key}: {evidence}"
    pair = _HV_PAIR.fullmatch(evidence)
    if pair is None or held is None:
        return text
    a, b, gap = pair["a"], pair["b"], float(pair["x"]) - float(pair["y"])
    if held:
        return f"{text}, {a} ahead of {b} by {gap:.3f}, more than the {tie} tie margin"
    if gap > 0:
        return f"{text}, {a} ahead of {b} by only {gap:.3f}, inside the {tie} tie margin: no difference detected"
    if gap >= -tie:
        return f"{text}, {a} behind {b} by {-gap:.3f}, inside the {tie} tie margin: no difference detected"
    return f"{text}, {a} behind {b} by {-gap:.3f}: the opposite of the thesis"


def _gap_reading(gap: float, held: bool) -> str:
    """A comparison whose evidence is not one "HV A / B" pair, read out as :func:`_hv_reading` does."""
    tie = hv_tie()
    if held:
        return f"ahead by {gap:.3f}, more than the {tie} tie margin"
    if gap > 0:
        return f"ahead by only {gap:.3f}, inside the {tie} tie margin"
    if gap == 0:
        return "no lead (equal HV)"
    if gap >= -tie:
        return f"behind by {-gap:.3f}, inside the {tie} tie margin"
    return f"behind by {-gap:.3f}: the opposite of the thesis"


def _ptb_part(claim: Mapping[str, Any], curves: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """One claim of a PTB figure row: its verdict, then in parentheses (no verdict words there) the rule, how its
    comparisons came out against the tie margin, each comparison read out, and how the claim fares over all its
    figures."""
    curves = curves or {}
    wins = claim.get("wins", {})
    gap = _PTB_GAPS.get(claim["claim"])
    details = [f"rule: {claim['rule']}"] if claim.get("rule") else []
    if wins:
        details.append(hv_counts(list(_comparisons(claim).values())) if gap else
                       f"{sum(wins.values())} of {len(wins)} comparisons hold")
    shown = {k: v for k, v in claim["evidence"].items() if not (k == "ties" and gap)}
    details.append("; ".join(_hv_reading(ptb_key(k, curves), v, wins.get(k)) for k, v in shown.items()))
    if gap and _gap_pair is not gap:
        readings = [f"{ptb_key(k, curves)}: {_gap_reading(g, held)}" for k, held in wins.items()
                    if (g := gap(k, claim["evidence"])) is not None]
        if readings:
            details.append("; ".join(readings))
    if claim.get("pooled"):
        held, total = claim["pooled"]
        details.append(f"over all the claim's figures {held} of {total} comparisons hold")
    return f"'{claim['claim']}' {claim['verdict']} ({'; '.join(details)})"


def _claim_for_figure(claim: Mapping[str, Any], fig: str) -> dict[str, Any]:
    """``claim`` restricted to the comparisons of figure ``fig`` when its ``wins`` are keyed by figure (as in
    ``paperlib.experiments.micmco_ptb.claim_verdicts``), with ``pooled`` = (comparisons held, compared) over all its figures;
    otherwise the claim over all its comparisons. Its verdict follows from its comparisons by :func:`part_word`
    (:func:`_comparisons`)."""
    def ours(key: str) -> bool:
        return key == fig or key.startswith(f"{fig} ")

    wins = {k: v for k, v in claim.get("wins", {}).items() if ours(k)}
    if not wins:
        words = [w for w, _ in _comparisons(claim).values()]
        return {**claim, "verdict": part_word(words)} if words else dict(claim)
    evidence = {k: v for k, v in claim["evidence"].items() if ours(k)}
    restricted = {**claim, "evidence": evidence, "wins": wins}
    restricted["verdict"] = part_word([w for w, _ in _comparisons(restricted).values()])
    if len(wins) < len(claim["wins"]):
        restricted["pooled"] = (sum(claim["wins"].values()), len(claim["wins"]))
    return restricted


def _micmco_ptb_scale(results: Results) -> str:
    r = results["micmco_ptb"]
    st, data = r["settings"], r.get("data", {})
    trials = len(next(iter(r["curves"].values()))["trials"]) if r["curves"] else 0
    vocab = f"vocabulary {st['vocab_size']:,}" if st.get("vocab_size") else "full vocabulary"
    from paperlib.experiments.micmco_ptb import hidden_sizes

    hidden = " / ".join(str(h) for h in hidden_sizes(r))
    return (f"hidden {hidden} (thesis 128 / 256), {vocab}, {st['steps']} steps × {st['batch_size']} "
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
    claims = [c for c in results["micmco_ptb"]["claims"] if c["claim"] in (
        "latents barely change the best perplexity", "Table 5.1's optima are at low latent usage")
        and c["verdict"] != "not run at this profile"]
    if not claims:
        raise MissingResult("Table 5.1 claims")
    claims = [_claim_for_figure(c, "Table 5.1") for c in claims]
    words, unjudged, ladder, ladder_reason = _ptb_ladder(results, "M-T5.1")
    head = _with_ladder([c["verdict"] for c in claims] + words, unjudged)
    rows = [row for row in results["micmco_ptb"]["table_5_1"] if row.get("curve")]
    missing = len(results["micmco_ptb"]["table_5_1"]) - len(rows)
    if missing and head == "reproduced":
        head = "partly"
    unrun = f"{missing} of {missing + len(rows)} cells not run at this profile" if missing else ""
    text = (f"{head}: " + "; ".join(_ptb_part(c) for c in claims) + ladder
            + (f"; {unrun} (hs 256 needs the robustness curves)" if missing else "")
            + "; absolute perplexities far from the thesis' (smaller model, vocabulary and budget)")
    reason = _ptb_reason(claims) + (f"; {ladder_reason}" if ladder_reason else "")
    return text, _clip(reason + (f"; {unrun}" if unrun else ""))
