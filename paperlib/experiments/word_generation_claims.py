"""Schmidt & Hofmann Tables 1 and 2 judged on ``results/word_generation.json`` and the budget ladder
(``results/word_generation_ladder.json``): one :class:`~paperlib.experiments.claims.Claim` for S-T1 and one for
S-T2, read by the results index (and, for S-T1, the notebook).

Ties: two rows differ only beyond twice the standard error of the difference of their seed means (stable seeds
only); with one stable seed there is no margin, and a gap the paper's way reads "within noise".
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

from paperlib.experiments.claims import Claim, Part, Unjudged, direction_word, ladder_part, part_word

_K = re.compile(r", K=\d+")


def _scored(rows: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {k: v for k, v in rows.items() if v.get("H_test") is not None and math.isfinite(v["H_test"])}


def _margin(a: Mapping[str, Any], b: Mapping[str, Any]) -> float | None:
    """Twice the standard error of the difference of two rows' seed means, over their stable seeds."""
    n = [row.get("seeds", 1) - row.get("unstable", 0) for row in (a, b)]
    sds = (a.get("H_test_std"), b.get("H_test_std"))
    if None in sds or min(n) < 2:
        return None
    return 2 * math.sqrt(sds[0] ** 2 / n[0] + sds[1] ** 2 / n[1])


def _comparison(rows: Mapping[str, Mapping[str, Any]], worse: str, better: str) -> tuple[str, str]:
    """(part verdict, evidence) of ``better`` (the paper's better row) against ``worse``: gap H(worse) - H(better)."""
    a, b = rows[worse], rows[better]
    margin = _margin(a, b)
    tie = f", margin {margin:.2f}" if margin is not None else ", no margin (one stable seed)"
    return (direction_word(a["H_test"] - b["H_test"], margin),
            f"{better} {b['H_test']:.2f} vs {worse} {a['H_test']:.2f} nats{tie}")


def table1_claim(main: Mapping[str, Any], ladder: Mapping[str, Any] | None) -> Claim:
    """S&H Table 1: at the ``word_generation`` stage's budget the best DSSM beats the best GRU baseline, and
    importance weighting helps (each ``X, K=n`` row against its ``X`` row, same flows and state size); and, over
    the budget ladder, the DSSM's gap to the GRU moves the paper's way."""
    rows = _scored({r["model"]: r for r in main["table1"]})
    dssms = [k for k in rows if "BASELINE" not in k and "ORACLE" not in k]
    grus = [k for k in rows if "BASELINE" in k]
    parts, not_run = [], []
    if dssms and grus:
        word, evidence = _comparison(rows, min(grus, key=lambda k: rows[k]["H_test"]),
                                     min(dssms, key=lambda k: rows[k]["H_test"]))
        parts.append(Part("best DSSM beats the best GRU", "the best DSSM row has a lower H_test than the best GRU "
                          "baseline", word, evidence, "gap beyond twice the standard error of the difference"))
    pairs = [(_K.sub("", k), k) for k in dssms if _K.search(k) and _K.sub("", k) in rows]
    if pairs:
        judged = [_comparison(rows, plain, weighted) for plain, weighted in pairs]
        parts.append(Part("importance weighting helps", "a row with K > 1 samples beats the same model with K = 1",
                          part_word([w for w, _ in judged]), "; ".join(e for _, e in judged),
                          "gap beyond twice the standard error of the difference, per matched pair"))
    else:
        not_run.append("importance weighting helps")
    reading = ladder.get("reading") if ladder else None
    if reading is not None:
        parts.append(_ladder_part(ladder, reading))
    else:
        not_run.append("the budget ladder")
    return Claim("S-T1", tuple(parts), tuple(not_run))


def table2_claim(main: Mapping[str, Any]) -> Claim:
    """S&H Table 2 (the alternative split: a tenth of the word types only in test): the DSSM row (2xTRIL, K=10)
    has a lower H_test than the GRU baseline of the same state size (BASELINE-8D), as in the paper's table."""
    rows = _scored({r["model"]: r for r in main["table2"]})
    dssm, gru = "2xTRIL, K=10", "BASELINE-8D"
    if dssm not in rows or gru not in rows:
        raise Unjudged(f"claim S-T2: {dssm} or {gru} has no finite H_test on the alternative split")
    word, evidence = _comparison(rows, gru, dssm)
    return Claim("S-T2", (Part("DSSM beats the GRU on unseen types", f"{dssm} has a lower H_test than {gru} on the "
                               "alternative split", word, evidence,
                               "gap beyond twice the standard error of the difference"),))


def estimator_check(ladder: Mapping[str, Any]) -> dict[str, Any] | None:
    """The DSSM's top-rung H_test scored with the ladder's ``check_samples`` trajectories, mean over its seeds
    (``step``, ``eval_samples``, ``H_test``, ``seeds``); None when the ladder did not run the check."""
    checks = [r["check"] for r in ladder.get("runs", []) if "check" in r]
    if not checks:
        return None
    return {"step": checks[0]["step"], "eval_samples": checks[0]["eval_samples"],
            "H_test": sum(c["H_test"] for c in checks) / len(checks), "seeds": len(checks)}


def _ladder_part(ladder: Mapping[str, Any], reading: str) -> Part:
    steps = [r for r in ladder["rungs"] if "gap" in r]
    gaps = " → ".join(f"{r['gap']:+.2f} ± {r['margin']:.2f}" for r in steps)
    budgets = " / ".join(f"{r['steps']:,}" for r in steps)
    converged = "; ".join(
        f"{m['row']} " + " ".join("flat" if r["models"][role].get("converged") else "falling" for r in steps)
        for role, m in steps[-1]["models"].items())
    paper = ladder["paper"].get("gap")
    found = estimator_check(ladder)
    check = ""
    if found is not None:
        top = steps[-1]["models"]["dssm"]["H_test"]
        check = (f"; the DSSM at {found['step']:,} steps scored with {found['eval_samples']:,} trajectories: "
                 f"{found['H_test']:.2f} instead of {top:.2f} (eq. 12's estimate is biased upward; the rungs use "
                 f"{ladder['training']['eval_samples']:,})")
    s = ladder["settings"]
    return Part(
        label=f"ladder {s['dssm']} vs {s['baseline']}", claim="the DSSM's gap to the GRU moves the paper's way as "
        "the training budget grows", verdict=ladder_part(reading),
        evidence=("" if reading == "reproduced" else f"{reading}; ") + f"gap H(GRU) - H(DSSM) {gaps} nats at "
                 f"{budgets} steps, paper " + (f"{paper:+.2f}" if paper is not None else "—")
                 + f"; last quarter of each rung: {converged}" + check,
        rule="top rung beyond 2 SE of the gap, else the change from the first to the last rung beyond twice its "
             "standard error (paperlib.experiments.claims.ladder_word)")
