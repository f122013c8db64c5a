"""The thesis' claims about the synthetic frontiers, judged by explicit rules on a results dictionary."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from paperlib.frontiers import nll_at_mi


NEAR_OPTIMAL_NATS = 0.25  # "near-optimal": within this many nats of ln V
HIGH_MI_FRACTION = 0.75  # "high MI": 75% of the maximum ln V
HV_TIE = 0.02  # normalised hypervolumes closer than this (2% of the ideal area) are a tie


def verdict_of(wins: int, total: int) -> str:
    """"reproduced" if all ``total`` comparisons hold, "partly reproduced" if at least half, else "not reproduced"."""
    if total == 0:
        return "not run at this profile"
    if wins == total:
        return "reproduced"
    return "partly reproduced" if 2 * wins >= total else "not reproduced"


def high_mi_excess(results: Mapping[str, Any]) -> dict[str, float]:
    """Claim 1's numbers: for VIMCO 16 KL and Rényi (those run), the frontier's NLL interpolated at
    MI = ``HIGH_MI_FRACTION`` ln V, minus ln V (nats; infinite where the frontier never reaches that MI)."""
    configs, ln_v = results["configurations"], float(results["optimum_nll"])
    excess = {}
    for name in ("vimco16_kl", "vimco16_renyi"):
        if name in configs:
            front = configs[name]["frontier"]
            value = nll_at_mi([p["mi"] for p in front], [p["nll"] for p in front], [HIGH_MI_FRACTION * ln_v])[0]
            excess[name] = float(value - ln_v)
    return excess


def claim_verdicts(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Decide the thesis' claims on ``results`` (the JSON of :func:`run_micmco_synthetic`) by explicit rules.

    HV is the normalised hypervolume; "A beats B" means HV(A) > HV(B) + 0.02 (smaller differences are ties).

    1. *VIMCO 16 reaches near-optimal NLL at high MI*: the better of VIMCO 16 KL/Renyi has, at MI = 0.75 ln V, an
       interpolated NLL within 0.25 nats of ln V.
    2. *Multiple samples in both terms beat 16/1 and 1/16*: for each base estimator and objective with all three
       runs, 16 beats both asymmetric ones.
    3. *Renyi slightly better than KL*: for every base estimator and sample count run with both objectives (not
       ELBO, where they coincide), Renyi beats KL.
    4. *Power objective between KL and Renyi*: for each base estimator with a power run,
       HV(KL) - 0.02 <= HV(power) <= HV(Renyi) + 0.02.

    The stage stores these records with a tally word per claim ("reproduced" if every comparison holds, "partly
    reproduced" if at least half do, else "not reproduced"; "not run at this profile" when its runs are missing).
    Nothing displays that word: the results index and the notebook judge each figure's claim from the numbers
    (:mod:`paperlib.experiments.micmco.synthetic.claims`, the one claim path).
    """
    configs = results["configurations"]

    def hv(name: str) -> float | None:
        entry = configs.get(name)
        return None if entry is None else float(entry["normalised_hypervolume"])

    def beats(a: float, b: float) -> bool:
        return a > b + HV_TIE

    def record(claim: str, rule: str, evidence: Mapping[str, str], held: Mapping[str, bool]) -> dict[str, Any]:
        return {"claim": claim, "rule": rule, "evidence": dict(evidence),
                "verdict": verdict_of(sum(held.values()), len(held))}

    # 1
    gaps = high_mi_excess(results)
    finite_gaps = [g for g in gaps.values() if math.isfinite(g)]
    near = {"best of KL/Rényi": bool(finite_gaps) and min(finite_gaps) <= NEAR_OPTIMAL_NATS} if gaps else {}
    verdicts = [record("VIMCO 16 reaches near-optimal NLL at high MI",
                       f"min over KL/Rényi of NLL(MI = {HIGH_MI_FRACTION:g} ln V) - ln V <= {NEAR_OPTIMAL_NATS} nats",
                       {k: (f"{v:+.3f} nats" if math.isfinite(v) else "MI level not reached") for k, v in gaps.items()},
                       near)]
    # 2
    comparisons, evidence = {}, {}
    for base in ("dreg", "vimco"):
        for objective in ("kl", "renyi"):
            values = [hv(f"{base}{tag}_{objective}") for tag in ("16", "16-1", "1-16")]
            if all(v is not None for v in values):
                key = f"{base} {objective}"
                comparisons[key] = beats(values[0], values[1]) and beats(values[0], values[2])
                evidence[key] = "HV 16 / 16-1 / 1-16 = " + " / ".join(f"{v:.3f}" for v in values)
    verdicts.append(record(
        "multi-sample in both terms beats 16/1 and 1/16",
        f"HV(16) > HV(16/1) + {HV_TIE} and HV(16) > HV(1/16) + {HV_TIE}, per base estimator and objective",
        evidence, comparisons))
    # 3
    pairs, evidence = {}, {}
    for name in configs:
        stem = name[: -len("_kl")]
        if name.endswith("_kl") and f"{stem}_renyi" in configs:
            kl, renyi = hv(name), hv(f"{stem}_renyi")
            pairs[stem] = beats(renyi, kl)
            evidence[stem] = f"HV Rényi / KL = {renyi:.3f} / {kl:.3f}"
    verdicts.append(record("Rényi slightly better than KL",
                           f"HV(Rényi) > HV(KL) + {HV_TIE} for every base estimator / sample count run with both",
                           evidence, pairs))
    # 4
    between, evidence = {}, {}
    for stem in ("dreg16", "vimco16"):
        values = [hv(f"{stem}_{o}") for o in ("kl", "power", "renyi")]
        if all(v is not None for v in values):
            between[stem] = values[0] - HV_TIE <= values[1] <= values[2] + HV_TIE
            evidence[stem] = "HV KL / power / Rényi = " + " / ".join(f"{v:.3f}" for v in values)
    verdicts.append(record("power objective between KL and Rényi",
                           f"HV(KL) - {HV_TIE} <= HV(power) <= HV(Rényi) + {HV_TIE}, per base estimator",
                           evidence, between))
    return verdicts
