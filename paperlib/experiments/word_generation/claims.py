"""Schmidt & Hofmann's claims judged on ``results/word_generation.json`` and the budget ladder
(``results/word_generation_ladder.json``): one :class:`~paperlib.experiments.common.claims.Claim` each for Table 1 (S-T1,
with §5.3's row comparisons), Table 2 (S-T2), Fig. 2 (S-F2) and Fig. 3 (S-F3), read by the results index and the
notebook alike.

Ties: two rows differ only beyond twice the standard error of the difference of their seed means (stable seeds
only); with one stable seed there is no margin, and a gap the paper's way reads "within noise". A figure's trend
(per seed: a difference between two ends) counts beyond twice the standard error of its mean over seeds.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Any, Mapping

from paperlib.experiments.common.claims import (Claim, Part, Unjudged, direction_word, ladder_part, mean_margin,
                                         part_word)
from paperlib.reference.word_generation import PAPER_TABLE3, PAPER_TABLE3_FLOWS

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


NOISE_USED = 0.05  # S-F1: a DSSM "uses its noise" when its average noise MI Ī exceeds this (nats)


def paper_i_bar_range() -> tuple[float, float]:
    """S-F1's range of Ī over "all trained models" (§5.4): the mean Ī of every DSSM of Tables 1 and 3b with no
    identity (ID) flow in either role (as F_g it gives Ī = 0 and the paper calls it unsuited; as F_q it "degrades
    performance")."""
    from paperlib.reference.word_generation import PAPER_TABLE1, PAPER_TABLE3

    values = [row["I_bar"][0] for row in PAPER_TABLE1.values() if row["I_bar"] is not None]
    values += [cell[0] for g, row in PAPER_TABLE3["I_bar"].items() for q, cell in row.items()
               if "ID" not in (g, q) and isinstance(cell, list)]
    return min(values), max(values)


def figure1_claim(main: Mapping[str, Any]) -> Claim:
    """S&H Fig. 1 (§5.4): every trained DSSM uses its noise (Ī > :data:`NOISE_USED`), with Ī in the paper's range
    (:func:`paper_i_bar_range`); each part judged over the Table 1 DSSMs, row by row."""
    rows = [r for r in main["table1"] if r.get("I_bar") is not None]
    if not rows:
        raise Unjudged("claim S-F1: no trained DSSM has an Ī")
    low, high = paper_i_bar_range()
    shown = ", ".join(f"{r['model']} {r['I_bar']:.2f}" for r in rows)
    return Claim("S-F1", (
        Part(f"every DSSM uses its noise (Ī > {NOISE_USED})", "the trained DSSMs use their noise",
             part_word([r["I_bar"] > NOISE_USED for r in rows]), f"Ī: {shown}", f"Ī > {NOISE_USED} nats per row",
             kind="threshold"),
        Part(f"Ī in the paper's range {low:.2f}–{high:.2f}", "Ī of the trained DSSMs lies in the paper's range",
             part_word([low <= r["I_bar"] <= high for r in rows]), f"Ī: {shown}",
             "the paper's lowest to highest Ī over Tables 1 and 3b (no ID flow), per row", kind="threshold")))


SECTION_5_3 = (("2xTRIL beats TRIL", "2xTRIL", "TRIL"), ("DSSM TRIL beats BASELINE-8D", "TRIL", "BASELINE-8D"),
               ("BASELINE-16D beats BASELINE-8D", "BASELINE-16D", "BASELINE-8D"))


def _margin_text(margin: float | None) -> str:
    return f", margin {margin:.2f}" if margin is not None else ", no margin (one seed)"


def position_ends(main: Mapping[str, Any]) -> list[tuple[float, float]]:
    """Fig. 2 per seed: the mean I(t) over the first three positions and over the last three (nats)."""
    ends = []
    for run in main["figure2"]["runs"]:
        per_t = [statistics.fmean(column) for column in zip(*run["I_t"])]
        ends.append((statistics.fmean(per_t[:3]), statistics.fmean(per_t[-3:])))
    return ends


def end_means(ends: list[tuple[float, float]]) -> tuple[float, float]:
    """Fig. 2's mean I(t) over the first three and over the last three positions (:func:`position_ends`), averaged
    over seeds."""
    first, last = (statistics.fmean(e[i] for e in ends) for i in (0, 1))
    return first, last


def figure2_claim(main: Mapping[str, Any]) -> Claim:
    """S&H Fig. 2: the noise's information I(t) is highest at a word's first positions and decays."""
    ends = position_ends(main)
    if not ends:
        raise Unjudged("claim S-F2: no Fig. 2 trajectories")
    gap, margin = mean_margin([first - last for first, last in ends])
    first, last = end_means(ends)
    return Claim("S-F2", (Part("I(t) decays along the word", "I(t) is highest at the first positions and decays",
                               direction_word(gap, margin),
                               f"I(1..3) {first:.2f} vs I(T-2..T) {last:.2f} nats over {len(ends)} seed(s)"
                               + _margin_text(margin),
                               "first-three minus last-three mean I(t) per seed; margin 2 SE over seeds",
                               kind="seed margin"),))


def figure3_claim(main: Mapping[str, Any]) -> Claim:
    """S&H Fig. 3: over training the emission entropy falls and the noise's information Ī grows (per seed, the
    first scoring against the last)."""
    histories = [h for h in main["figure3"]["histories"] if len(h) > 1 and "I_bar" in h[-1] and "I_bar" in h[0]]
    if not histories:
        raise Unjudged("claim S-F3: no Fig. 3 histories")
    parts = []
    for label, key, sign, unit in (("emission entropy falls", "emission_entropy", -1, "nats"),
                                   ("Ī grows", "I_bar", 1, "nats")):
        gap, margin = mean_margin([sign * (h[-1][key] - h[0][key]) for h in histories])
        start, end = (statistics.fmean(h[i][key] for h in histories) for i in (0, -1))
        parts.append(Part(label, f"{label} over training (Fig. 3)", direction_word(gap, margin),
                          f"{start:.2f} at initialisation to {end:.2f} {unit} at the end, {len(histories)} seed(s)"
                          + _margin_text(margin), "last minus first scoring per seed; margin 2 SE over seeds",
                          kind="seed margin"))
    return Claim("S-F3", tuple(parts))


def table1_claim(main: Mapping[str, Any], ladder: Mapping[str, Any] | None) -> Claim:
    """S&H Table 1: at the ``word_generation`` stage's budget the best DSSM beats the best GRU baseline, and
    importance weighting helps (each ``X, K=n`` row against its ``X`` row, same flows and state size); and, over
    the budget ladder, the DSSM's gap to the GRU moves the paper's way."""
    rows = _scored({r["model"]: r for r in main["table1"]})
    dssms = [k for k in rows if "BASELINE" not in k and "ORACLE" not in k]
    grus = [k for k in rows if "BASELINE" in k]
    parts, not_run = [], []
    bias = estimator_bias(main, ladder)
    if dssms and grus:
        gru, dssm = min(grus, key=lambda k: rows[k]["H_test"]), min(dssms, key=lambda k: rows[k]["H_test"])
        word, evidence = _comparison(rows, gru, dssm)
        parts.append(Part("best DSSM beats the best GRU", "the best DSSM row has a lower H_test than the best GRU "
                          "baseline", word, evidence + _bias_note(bias, rows[gru]["H_test"] - rows[dssm]["H_test"]),
                          "gap beyond twice the standard error of the difference", kind="seed margin"))
    pairs = [(_K.sub("", k), k) for k in dssms if _K.search(k) and _K.sub("", k) in rows]
    if pairs:
        judged = [_comparison(rows, plain, weighted) for plain, weighted in pairs]
        parts.append(Part("importance weighting helps", "a row with K > 1 samples beats the same model with K = 1",
                          part_word([w for w, _ in judged]), "; ".join(e for _, e in judged),
                          "gap beyond twice the standard error of the difference, per matched pair", kind="seed margin"))
    else:
        not_run.append("importance weighting helps")
    # §5.3's further row comparisons (better row, worse row), each where both rows ran
    for label, better, worse in SECTION_5_3:
        if better in rows and worse in rows:
            word, evidence = _comparison(rows, worse, better)
            if "BASELINE" in worse and "BASELINE" not in better:  # a DSSM against a GRU
                evidence += _bias_note(bias, rows[worse]["H_test"] - rows[better]["H_test"])
            parts.append(Part(label, f"{better} has a lower H_test than {worse} (§5.3)", word, evidence,
                              "gap beyond twice the standard error of the difference", kind="seed margin"))
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
                               "gap beyond twice the standard error of the difference", kind="seed margin"),))


def table3_claim(main: Mapping[str, Any]) -> Claim:
    """S&H Table 3 (flow combinations F_g × F_q) and §5.3's reading of it, "a powerful generative flow is essential
    for successful models while the inference flow can remain relatively simple – yet simplistic choices, such as ID
    degrade performance", by the seed margin of :func:`_comparison`:

    - a more powerful F_g helps: each learned F_g against the next more powerful one of ID < DIAG < TRIL < 2xTRIL
      with F_q = DIAG (the paper's H_test falls along DIAG, TRIL, 2xTRIL);
    - ID inference degrades: per learned F_g, F_q = DIAG beats F_q = ID;
    - a learned F_g beats ID (the caption: ID as F_g is "by design unsuited"), with F_q = DIAG.

    "Choosing F_g slightly more powerful than F_q" needs an inference flow beyond DIAG; without one it is named as
    not run."""
    cells = main["table3"]["cells"]

    def cell(g: str, q: str) -> Mapping[str, Any] | None:
        found = cells.get(g, {}).get(q)
        if not isinstance(found, Mapping) or not _scored({g: found}):
            return None
        return {**found, "model": f"{g}×{q}"}

    def compare(worse: tuple[str, str], better: tuple[str, str]) -> tuple[str, str]:
        rows = {"worse": cell(*worse), "better": cell(*better)}
        word, evidence = _comparison(rows, "worse", "better")
        return word, evidence.replace("better", rows["better"]["model"]).replace("worse", rows["worse"]["model"])

    learned = [g for g in PAPER_TABLE3_FLOWS[1:] if cell(g, "DIAG")]
    parts, not_run = [], []
    steps = [compare((a, "DIAG"), (b, "DIAG")) for a, b in zip(learned, learned[1:])]
    if steps:
        parts.append(Part("a more powerful F_g helps", "'a powerful generative flow is essential for successful "
                          "models' (§5.3): with DIAG inference each learned F_g has a higher H_test than the next more "
                          "powerful one (paper: " + ", ".join(f"{g} {PAPER_TABLE3['H_test'][g]['DIAG'][0]}" for g in
                                                    PAPER_TABLE3_FLOWS[1:]) + ")", part_word([w for w, _ in steps]),
                          "; ".join(e for _, e in steps), "gap beyond twice the standard error of the difference, "
                          "per neighbouring pair of ID < DIAG < TRIL < 2xTRIL", kind="seed margin"))
    degrades = [compare((g, "ID"), (g, "DIAG")) for g in PAPER_TABLE3_FLOWS[1:] if cell(g, "ID") and cell(g, "DIAG")]
    if degrades:
        parts.append(Part("ID inference degrades", "'simplistic choices, such as ID degrade performance' (§5.3): per "
                          "learned F_g, DIAG inference has a lower H_test than ID inference",
                          part_word([w for w, _ in degrades]), "; ".join(e for _, e in degrades),
                          "gap beyond twice the standard error of the difference, per learned F_g", kind="seed margin"))
    if cell("ID", "DIAG") and learned:
        against_id = [compare(("ID", "DIAG"), (g, "DIAG")) for g in learned]
        parts.append(Part("a learned F_g beats ID", "ID as F_g is 'by design unsuited' (Table 3's caption): each "
                          "learned generative flow has a lower H_test than the identity, with DIAG inference",
                          part_word([w for w, _ in against_id]), "; ".join(e for _, e in against_id),
                          "gap beyond twice the standard error of the difference, per learned F_g", kind="seed margin"))
    if not any(cell(g, q) for g in cells for q in PAPER_TABLE3_FLOWS[2:]):
        not_run.append("F_g slightly more powerful than F_q (no inference flow beyond DIAG ran)")
    if not parts:
        raise Unjudged("claim S-T3: no pair of Table 3 cells to compare")
    return Claim("S-T3", tuple(parts), tuple(not_run))


def estimator_bias(main: Mapping[str, Any], ladder: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """How far eq. 12's DSSM estimate with the stage's trajectories lies above one with many more, as the budget
    ladder measured it at its top rung (:func:`estimator_check`, same number of trajectories as the main stage):
    ``bias`` (nats), ``samples``, ``check_samples``, ``step``; None without that measurement."""
    found = estimator_check(ladder) if ladder else None
    samples = main.get("scale", {}).get("eval_samples")
    if found is None or samples is None or ladder["training"]["eval_samples"] != samples:
        return None
    steps = [r for r in ladder["rungs"] if r.get("steps") == found["step"] and "dssm" in r.get("models", {})]
    if not steps:
        return None
    return {"bias": steps[0]["models"]["dssm"]["H_test"] - found["H_test"], "samples": samples,
            "check_samples": found["eval_samples"], "step": found["step"]}


def _bias_note(bias: Mapping[str, Any] | None, gap: float) -> str:
    """A DSSM-vs-GRU comparison's disclosure: the DSSM's H_test is an upward-biased estimate; ``gap`` is
    H(GRU) - H(DSSM) as measured, shown again less the bias the ladder measured (not a correction of this row: the
    bias was measured on another model at another budget)."""
    if bias is None:
        return ""
    return (f"; the DSSM's H_test is eq. 12's estimate from {bias['samples']:,} trajectories, biased upward: at the "
            f"ladder's top rung ({bias['step']:,} steps) {bias['check_samples']:,} trajectories gave "
            f"{bias['bias']:.2f} nats less; H(GRU) - H(DSSM) {gap:+.2f} measured, {gap + bias['bias']:+.2f} without that "
            "bias")


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
        "the training budget grows", verdict=ladder_part(reading, steps[-1]["gap"]),
        evidence=("" if reading == "reproduced" else f"{reading}; ") + f"gap H(GRU) - H(DSSM) {gaps} nats at "
                 f"{budgets} steps, paper " + (f"{paper:+.2f}" if paper is not None else "—")
                 + f"; last quarter of each rung: {converged}" + check,
        rule="top rung beyond 2 SE of the gap, else the change from the first to the last rung beyond twice its "
             "standard error (paperlib.experiments.common.claims.ladder_word)", kind="ladder reading")
