"""The thesis' claims about the PTB figures and Table 5.1, judged on a results dictionary (each with its rule,
wins per comparison and evidence)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from paperlib.experiments.micmco.synthetic.micmco_synthetic import HV_TIE, verdict_of
from paperlib.experiments.micmco.ptb.design import (
    FIGURES, ROBUSTNESS, TABLE_5_1_VARIANTS, _TRIO_TAG, _VARIANT_TAG, _trio,
)
from paperlib.experiments.micmco.ptb.analysis import _best_trial, _points, compare_hypervolumes


PPL_TOLERANCE = 0.03  # "barely changes": best perplexities within 3% (the thesis' largest gap is 2.6%)
LOW_KL = 0.2  # "low latent usage" of Table 5.1's optima, nats per token (the thesis' largest is 0.167)


def _tie_note(ties: int, total: int) -> str:
    """Say how many comparisons fell within the tie: "not reproduced" then means no difference was detected."""
    if ties == total:
        return f"all {total} comparisons within the {HV_TIE} tie: no difference detected either way"
    return f"{ties} of {total} comparisons within the {HV_TIE} tie"


def _claim(claim: str, rule: str, wins: Mapping[str, bool], evidence: dict[str, str]) -> dict[str, Any]:
    """A claim's record: its rule, the comparisons it won (``wins``), their evidence and the pooled verdict."""
    return {"claim": claim, "rule": rule, "evidence": evidence, "verdict": verdict_of(sum(wins.values()), len(wins)),
            "wins": dict(wins)}


def _claim_with_ties(claim: str, rule: str, wins: Mapping[str, bool], evidence: dict[str, str],
                     ties: int) -> dict[str, Any]:
    """A verdict whose evidence also counts the comparisons that fell within the tie."""
    if wins:
        evidence["ties"] = _tie_note(ties, len(wins))
    return _claim(claim, rule, wins, evidence)


def claim_verdicts(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Decide the thesis' PTB claims on ``results`` (the JSON of :func:`run_micmco_ptb`) by explicit rules.

    HV is the normalised hypervolume on a reference common to the compared curves; "A beats B" means
    HV(A) > HV(B) + 0.02 (:data:`paperlib.experiments.micmco.synthetic.micmco_synthetic.HV_TIE`).

    1. *Shared masks restore the validation frontiers* (Figs. 5.10 vs 5.12): for each 16-sample estimator run
       with both, HV(shared) beats HV(naive).
    2. *Multiple samples improve latent usage* (Figs. 5.8, 5.9, 5.11, 5.12): in each of these figures, for each base
       estimator and objective, HV(16) beats HV(1).
    3. *Latents barely change the best perplexity* (Table 5.1): per base estimator and hidden size, the best test
       perplexity of the 16-sample columns is within 3% of the single-sample one.
    4. *Table 5.1's optima are at low latent usage*: every row's test KL is at most 0.2 nats per token.
    5. *Dropout beats L2 on the best NLL* (Fig. 5.11): per base estimator, the lowest validation NLL with shared
       dropout masks is below the lowest with L2.
    6. *Discrete latents fit the training data better* (Figs. 5.8 vs 5.9): per 16-sample objective (KL, Rényi),
       HV(VIMCO) beats HV(DReG) on the training-fit curves, with KL capped at the most the categorical latents
       can carry per token (``num_categorical * ln(categories)`` per sentence over the mean sentence length), so
       that continuous latents gain no area where discrete ones cannot go.
    7. *The power objective is better than KL but behind Rényi* (Figs. 5.28, 5.29): per base estimator, HV(power)
       beats HV(KL), and HV(Rényi) beats HV(power) -- two checks per figure.

    8. *Gains need multiple samples in both terms* (Figs. 5.22, 5.23): per base estimator and objective (KL, Rényi),
       on the training fit, HV(16/16) beats both HV(16/1) (16 samples in the likelihood term only) and HV(1/16)
       (16 in the divergence term only), on the reference of the figure's curves.
    9. *16 samples generalise better than one sample given the same compute* (Figs. 5.14, 5.25, validation): the
       better of HV(16 KL) and HV(16 Rényi) beats the single-sample estimator trained 16x longer (T×16) and the one
       trained with 16x larger batches (bs×16), on a reference common to these curves.
    10. *16x compute buys one sample a better best fit but not a better tradeoff* (Figs. 5.13, 5.24, training fit;
        the thesis: "their best NLL at very low latent usage is lower than that of VIMCO 16, [but] they lose this
        advantage at higher latent usage"): per ×16 variant, its lowest NLL is below the 16-sample estimators'
        lowest, and the better 16-sample HV still beats its HV.
    11. *Batch size and optimisation length shift the curves but keep their order* (§5.B.1; Figs. 5.16, 5.17,
        5.19-5.21, length also at twice the hidden size in 5.21): per figure and pair of its three estimators (1,
        16 KL, 16 Rényi) separated by more than the tie at either setting of the factor, the pair is not separated
        the other way at the other setting ("relative positions the same": a gap may widen or close, the order may
        not reverse); HVs per setting on the reference of that setting's curves, since the factor moves all curves.
        Pairs tied at both settings are not counted; a figure whose pairs all tie fails (no order to keep).
    12. *At 256 units the three DReG estimators differ very little* (Fig. 5.18, the thesis' exception to 11): at
        each length, their HVs lie within the tie of each other, and closer than at the base hidden size (Fig. 5.17)
        when that ran.

    Verdicts as in :func:`paperlib.experiments.micmco.synthetic.micmco_synthetic.verdict_of`; claims whose curves did not run say so. For 6-11 the
    evidence also counts the comparisons within the tie, which separates "no difference detected" from "the
    opposite holds". Every claim lists each comparison's outcome (``wins``); keys that start with a figure id let
    :mod:`paperlib.experiments.micmco.ptb.claims` read a claim that spans several figures on each figure alone.
    """
    curves = results["curves"]
    margin, cap = results["settings"]["hv_margin"], results["settings"]["kl_cap"]
    verdicts = []

    # 1
    wins, evidence = {}, {}
    for stem in ("dreg16_kl", "dreg16_renyi", "vimco16_kl", "vimco16_renyi"):
        shared, naive = f"{stem}.shared", f"{stem}.naive"
        if shared in curves and naive in curves:
            hv = compare_hypervolumes(curves, [shared, naive], margin, cap)["hypervolume"]
            if hv[shared] is not None:
                wins[stem] = hv[shared] > hv[naive] + HV_TIE
                evidence[stem] = f"HV shared / naive = {hv[shared]:.3f} / {hv[naive]:.3f}"
    verdicts.append(_claim("shared dropout masks restore the validation frontiers",
                           f"HV(shared) > HV(naive) + {HV_TIE} per 16-sample estimator (Figs. 5.10, 5.12)",
                           wins, evidence))
    # 2
    wins, evidence = {}, {}
    for fig_id, regime, bases in (("5.8", "train", ("dreg",)), ("5.9", "train", ("vimco",)),
                                  ("5.11", "l2", ("dreg", "vimco")), ("5.12", "shared", ("dreg", "vimco"))):
        for base in bases:
            one = f"{base}1.{regime}"
            many = [f"{base}16_{o}.{regime}" for o in ("kl", "renyi")]
            if one not in curves:
                continue
            hv = compare_hypervolumes(curves, [one, *many], margin, cap)["hypervolume"]
            for name in many:
                if name in curves and hv.get(name) is not None:
                    wins[f"{fig_id} {name}"] = hv[name] > hv[one] + HV_TIE
                    evidence[f"{fig_id} {name}"] = f"HV 16 / 1 = {hv[name]:.3f} / {hv[one]:.3f}"
    verdicts.append(_claim("multiple samples improve latent usage",
                           f"HV(16) > HV(1) + {HV_TIE} per estimator and objective in Figs. 5.8, 5.9, 5.11, 5.12",
                           wins, evidence))
    # 3 and 4
    rows = [r for r in results.get("table_5_1", []) if r.get("curve")]
    wins, evidence = {}, {}
    for thesis_hs in TABLE_5_1_VARIANTS:
        for base, label in (("dreg", "DReG"), ("vimco", "VIMCO")):
            one = [r for r in rows if r["thesis_hidden"] == thesis_hs and r["column"] == f"{label} 1 K/R"]
            many = [r for r in rows if r["thesis_hidden"] == thesis_hs and r["column"].startswith(f"{label} 16")]
            if one and many:
                best = min(many, key=lambda r: r["test_perplexity"])
                change = best["test_perplexity"] / one[0]["test_perplexity"] - 1.0
                key = f"{label} hs {one[0]['hidden_size']}"
                wins[key] = abs(change) <= PPL_TOLERANCE
                evidence[key] = (f"perplexity 1 / best 16 = {one[0]['test_perplexity']:.1f} / "
                                 f"{best['test_perplexity']:.1f} ({100 * change:+.1f}%)")
    verdicts.append(_claim("latents barely change the best perplexity",
                           f"|best 16-sample / 1-sample test perplexity - 1| <= {PPL_TOLERANCE:.0%} per estimator "
                           "and hidden size (Table 5.1)", wins, evidence))
    verdicts.append(_claim("Table 5.1's optima are at low latent usage",
                           f"test KL <= {LOW_KL} nats per token in every row",
                           {f"{r['column']} hs {r['hidden_size']}": r["test_kl"] <= LOW_KL for r in rows},
                           {f"{r['column']} hs {r['hidden_size']}": f"KL {r['test_kl']:.3f}" for r in rows}))
    # 5
    wins, evidence = {}, {}
    for base in ("dreg", "vimco"):
        best = {}
        for regime in ("shared", "l2"):
            values = [_points(curves[f"{stem}.{regime}"]["trials"])[0] for stem in _trio(base)
                      if f"{stem}.{regime}" in curves]
            finite = [v[np.isfinite(v)] for v in values if np.isfinite(v).any()]
            if finite:
                best[regime] = float(min(v.min() for v in finite))
        if len(best) == 2:
            wins[base] = best["shared"] < best["l2"]
            evidence[base] = f"best NLL dropout / L2 = {best['shared']:.4f} / {best['l2']:.4f}"
    verdicts.append(_claim("dropout reaches a better best NLL than L2",
                           "min validation NLL over shared-mask curves < min over L2 curves, per base estimator",
                           wins, evidence))
    # 6 (KL capped at what the discrete latents can carry, so that continuous ones gain no area beyond it)
    wins, evidence, ties = {}, {}, 0
    settings, data = results["settings"], results.get("data", {})
    discrete_cap = cap
    if data.get("train_eval_tokens") and data.get("train_eval_sentences") and settings.get("num_categorical"):
        per_sentence = settings["num_categorical"] * math.log(settings["categories"])
        discrete_cap = min(cap, per_sentence * data["train_eval_sentences"] / data["train_eval_tokens"])
    for objective in ("kl", "renyi"):
        discrete, continuous = f"vimco16_{objective}.train", f"dreg16_{objective}.train"
        if discrete in curves and continuous in curves:
            hv = compare_hypervolumes(curves, [discrete, continuous], margin, discrete_cap)["hypervolume"]
            if hv[discrete] is not None:
                wins[objective] = hv[discrete] > hv[continuous] + HV_TIE
                ties += abs(hv[discrete] - hv[continuous]) <= HV_TIE
                evidence[objective] = f"HV VIMCO 16 / DReG 16 = {hv[discrete]:.3f} / {hv[continuous]:.3f}"
    rule = (f"HV(VIMCO 16) > HV(DReG 16) + {HV_TIE} per objective on the training fit (Figs. 5.8, 5.9), KL capped "
            f"at the discrete latents' entropy per token ({discrete_cap:.2f} nats)")
    verdicts.append(_claim_with_ties("discrete latents fit the training data better", rule, wins, evidence, ties))
    # 7
    wins, evidence, ties = {}, {}, 0
    for fig_id, base in (("5.28", "dreg"), ("5.29", "vimco")):
        kl, renyi, power = (f"{base}16_{o}.train" for o in ("kl", "renyi", "power"))
        if not all(n in curves for n in (kl, renyi, power)):
            continue
        hv = compare_hypervolumes(curves, [kl, renyi, power], margin, cap)["hypervolume"]
        if hv[power] is None:
            continue
        wins[f"{fig_id} power > KL"] = hv[power] > hv[kl] + HV_TIE
        wins[f"{fig_id} Rényi > power"] = hv[renyi] > hv[power] + HV_TIE
        ties += (abs(hv[power] - hv[kl]) <= HV_TIE) + (abs(hv[renyi] - hv[power]) <= HV_TIE)
        evidence[fig_id] = f"HV KL / power / Rényi = {hv[kl]:.3f} / {hv[power]:.3f} / {hv[renyi]:.3f}"
    rule = (f"HV(power) > HV(KL) + {HV_TIE} and HV(Rényi) > HV(power) + {HV_TIE} per base estimator on the training "
            "fit (Figs. 5.28, 5.29)")
    verdicts.append(_claim_with_ties("the power objective is better than KL but behind Rényi", rule, wins, evidence,
                                     ties))
    # 8
    wins, evidence, ties = {}, {}, 0
    for fig_id, base in (("5.22", "dreg"), ("5.23", "vimco")):
        both = {o: f"{base}16_{o}.train" for o in ("kl", "renyi")}
        lik_only = f"{base}16-1.train"
        div_only = {o: f"{base}1-16_{o}.train" for o in ("kl", "renyi")}
        names = [n for n in FIGURES[fig_id].configurations if n in curves]
        if not all(n in curves for n in (*both.values(), lik_only, *div_only.values())):
            continue
        hv = compare_hypervolumes(curves, names, margin, cap)["hypervolume"]
        if any(hv[n] is None for n in (*both.values(), lik_only, *div_only.values())):
            continue
        for o, name in both.items():
            for other, tag in ((lik_only, "16/1"), (div_only[o], "1/16")):
                wins[f"{fig_id} {o} 16/16 > {tag}"] = hv[name] > hv[other] + HV_TIE
                ties += abs(hv[name] - hv[other]) <= HV_TIE
        evidence[fig_id] = (f"HV 16/1 {hv[lik_only]:.3f}; KL 1/16 / 16/16 = {hv[div_only['kl']]:.3f} / "
                            f"{hv[both['kl']]:.3f}; Rényi 1/16 / 16/16 = {hv[div_only['renyi']]:.3f} / "
                            f"{hv[both['renyi']]:.3f}")
    rule = (f"HV(16/16) > HV(16/1) + {HV_TIE} and HV(16/16) > HV(1/16) + {HV_TIE} per base estimator and objective "
            "on the training fit (Figs. 5.22, 5.23)")
    verdicts.append(_claim_with_ties("gains need multiple samples in both terms", rule, wins, evidence, ties))
    # 9 and 10
    val_wins, val_evidence, val_ties = {}, {}, 0
    fit_wins, fit_evidence, fit_ties = {}, {}, 0
    for fig_id, base, regime in (("5.13", "vimco", "train"), ("5.14", "vimco", "shared"),
                                 ("5.24", "dreg", "train"), ("5.25", "dreg", "shared")):
        single = f"{base}1.{regime}"
        longer, larger = f"{single}.T16", f"{single}.bs16"
        many = [f"{base}16_{o}.{regime}" for o in ("kl", "renyi")]
        if not all(n in curves for n in (single, longer, larger, *many)):
            continue
        hv = compare_hypervolumes(curves, [single, longer, larger, *many], margin, cap)["hypervolume"]
        if any(hv[n] is None for n in (longer, larger, *many)):
            continue
        best = max(hv[n] for n in many)
        shown = (f"HV 1 / 1 T×16 / 1 bs×16 / best 16 = {hv[single]:.3f} / {hv[longer]:.3f} / {hv[larger]:.3f} / "
                 f"{best:.3f}")
        if regime == "shared":  # 9: validation
            for name, tag in ((longer, "T×16"), (larger, "bs×16")):
                val_wins[f"{fig_id} 16 > 1 {tag}"] = best > hv[name] + HV_TIE
                val_ties += abs(best - hv[name]) <= HV_TIE
            val_evidence[fig_id] = shown
            continue
        lowest = {name: (_best_trial(curves[name]["trials"]) or {"nll": math.inf})["nll"]  # 10: training fit
                  for name in (longer, larger, *many)}
        best_16 = min(lowest[n] for n in many)
        for name, tag in ((longer, "T×16"), (larger, "bs×16")):
            fit_wins[f"{fig_id} 1 {tag}"] = lowest[name] < best_16 and best > hv[name] + HV_TIE
            fit_ties += abs(best - hv[name]) <= HV_TIE
        fit_evidence[fig_id] = (f"lowest NLL 1 T×16 / 1 bs×16 / best 16 = {lowest[longer]:.4f} / {lowest[larger]:.4f} "
                                f"/ {best_16:.4f}; {shown}")
    rule = (f"max(HV(16 KL), HV(16 Rényi)) > HV(1 T×16) + {HV_TIE} and > HV(1 bs×16) + {HV_TIE} on validation "
            "(Figs. 5.14, 5.25)")
    verdicts.append(_claim_with_ties("16 samples generalise better than one sample given the same compute", rule,
                                     val_wins, val_evidence, val_ties))
    rule = ("per single-sample run with 16x compute (T×16, bs×16): its lowest training NLL is below the 16-sample "
            f"estimators' lowest, and yet max(HV(16 KL), HV(16 Rényi)) > its HV + {HV_TIE} (Figs. 5.13, 5.24)")
    verdicts.append(_claim_with_ties("16x compute buys one sample a better best fit but not a better tradeoff", rule,
                                     fit_wins, fit_evidence, fit_ties))
    # 11 and 12: robustness (§5.B.1), each setting's HVs on the reference of its own three curves
    trio_hv: dict[tuple[str, str], list[float]] = {}  # (figure, variant) -> HV of 1, 16 KL, 16 Rényi
    for fig_id, (base, variants) in ROBUSTNESS.items():
        for v in variants:
            names = [f"{stem}.shared{v}" for stem in _trio(base)]
            if all(n in curves for n in names):
                hv = compare_hypervolumes(curves, names, margin, cap)["hypervolume"]
                if all(hv[n] is not None for n in names):
                    trio_hv[fig_id, v] = [hv[n] for n in names]

    def trio_text(fig_id: str) -> str:
        return "; ".join(f"HV {_VARIANT_TAG[v]} 1 / 16 K / 16 R = " + " / ".join(f"{x:.3f}" for x in trio_hv[fig_id, v])
                         for v in ROBUSTNESS[fig_id][1])

    wins, evidence, ties = {}, {}, 0
    for fig_id, (_, variants) in ROBUSTNESS.items():
        if fig_id == "5.18" or not all((fig_id, v) in trio_hv for v in variants):
            continue
        reversed_, one_sided, compared = 0, 0, 0
        for i, j in ((0, 1), (0, 2), (1, 2)):
            classes = [_order(trio_hv[fig_id, v][i], trio_hv[fig_id, v][j]) for v in variants]
            if classes == [0, 0]:  # no order at either setting: nothing to keep
                ties += 1
                continue
            compared += 1
            kept = classes[0] * classes[1] >= 0  # not separated the other way
            wins[f"{fig_id} {_TRIO_TAG[i]} vs {_TRIO_TAG[j]}"] = kept
            reversed_ += not kept
            one_sided += (classes[0] == 0) != (classes[1] == 0)
        if compared:
            evidence[fig_id] = (f"{trio_text(fig_id)}; pairs reversed: {reversed_}, separated at one setting "
                                f"only: {one_sided}")
        else:
            wins[f"{fig_id} order"] = False
            evidence[fig_id] = f"{trio_text(fig_id)}; the three estimators tie at both settings: no order to keep"
    if evidence:
        evidence["ties"] = f"pairs tied at both settings (not counted): {ties}"
    rule = (f"per figure and pair of its three estimators (1, 16 KL, 16 Rényi) that is separated (HV difference > "
            f"{HV_TIE}) at either setting of the factor, the pair is not reversed (separated the other way) at the "
            "other setting, each setting's HVs on the reference of its own curves; a figure whose pairs all tie at "
            "both settings fails (Figs. 5.16, 5.17, 5.19-5.21). The evidence also counts pairs separated at one "
            "setting only (the factor widened or closed a gap)")
    verdicts.append(_claim("batch size and optimisation length shift the curves but keep their order", rule, wins,
                           evidence))
    wins, evidence = {}, {}
    if all(("5.18", v) in trio_hv for v in ROBUSTNESS["5.18"][1]):
        evidence["5.18"] = trio_text("5.18")
        for v, narrow in zip(ROBUSTNESS["5.18"][1], ROBUSTNESS["5.17"][1]):
            spread = max(trio_hv["5.18", v]) - min(trio_hv["5.18", v])
            base_hidden = trio_hv.get(("5.17", narrow))
            base_spread = None if base_hidden is None else max(base_hidden) - min(base_hidden)
            key = f"5.18 {_VARIANT_TAG[v]}"
            wins[key] = spread <= HV_TIE and (base_spread is None or spread < base_spread)
            evidence[key] = f"HV spread {spread:.3f}" + (
                "" if base_spread is None else f" (base hidden size, same length: {base_spread:.3f})")
    rule = (f"at each length, the three DReG estimators' HVs at twice the hidden size lie within {HV_TIE} of each "
            "other, and closer than at the base hidden size when Fig. 5.17 ran (Fig. 5.18, the thesis' exception)")
    verdicts.append(_claim("at 256 units the three DReG estimators differ very little", rule, wins, evidence))
    return verdicts


def _order(a: float, b: float) -> int:
    """+1 if ``a`` beats ``b`` by more than the tie, -1 if ``b`` beats ``a``, 0 within the tie."""
    return 0 if abs(a - b) <= HV_TIE else (1 if a > b else -1)
