"""Schmidt & Hofmann's Fig. 1 (§5.4, "Figures 1 and 1b show Ī for all trained models") judged on
``results/word_generation.json`` and the budget ladder: index row S-F1, read by the results index and the notebook
alike. Ī (eq. 13) is how much the letters emitted depend on the noise ξ; the claim has two parts: every trained DSSM
uses its noise (Ī above its own before training, :func:`noise_gains`), and its Ī lies in the paper's range; both
over the models the paper's range is drawn from (Tables 1 and 3b, no ID flow).
Ties as in :mod:`paperlib.experiments.word_generation.claims`: a per-seed difference counts beyond twice the
standard error of its mean over seeds.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Mapping

from paperlib.experiments.common.claims import Claim, Part, Unjudged, direction_word, mean_margin, part_word
from paperlib.experiments.word_generation.budget_notes import i_bar_note, noted
from paperlib.reference.word_generation import PAPER_TABLE1, PAPER_TABLE3


def paper_i_bar_range() -> tuple[float, float]:
    """S-F1's range of Ī over "all trained models" (§5.4): the mean Ī of every DSSM of Tables 1 and 3b with no
    identity (ID) flow in either role (as F_g it gives Ī = 0 and the paper calls it unsuited; as F_q it "degrades
    performance")."""
    values = [row["I_bar"][0] for row in PAPER_TABLE1.values() if row["I_bar"] is not None]
    values += [cell[0] for g, row in PAPER_TABLE3["I_bar"].items() for q, cell in row.items()
               if "ID" not in (g, q) and isinstance(cell, list)]
    return min(values), max(values)


def trained_dssms(main: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The trained DSSMs S-F1 speaks of ("all trained models", over the same set as :func:`paper_i_bar_range`): every
    Table 1 DSSM with an Ī, and every Table 3 cell with no ID flow in either role whose runs are not already a Table 1
    row's (TRIL×DIAG and 2xTRIL×DIAG are Table 1's TRIL and 2xTRIL), as ``{"model", "label", "I_bar", "I_bar_std"}``
    (``label``: the runs' label in ``main["runs"]``)."""
    models = [{"model": r["model"], "label": f"table1:{r['model']}", "I_bar": r["I_bar"],
               "I_bar_std": r.get("I_bar_std")} for r in main["table1"] if r.get("I_bar") is not None]
    shared = {label for run in main.get("runs", ()) for label in run.get("labels", ())
              if any(other.startswith("table1:") for other in run.get("labels", ()))}
    for g, row in ((main.get("table3") or {}).get("cells") or {}).items():
        for q, cell in row.items():
            label = f"table3:{g}/{q}"
            if "ID" in (g, q) or label in shared or not isinstance(cell, Mapping) or cell.get("I_bar") is None:
                continue
            models.append({"model": f"{g}×{q}", "label": label, "I_bar": cell["I_bar"],
                           "I_bar_std": cell.get("I_bar_std")})
    return models


def noise_gains(main: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per trained DSSM (:func:`trained_dssms`), how far training raised its Ī: each seed's run scored before any
    update (step 0) and at its last scoring, with the same estimator, paired by seed: ``{model: {"start", "end" (means
    over seeds), "gain" (the mean per-seed difference), "margin" (twice its standard error; None with one seed),
    "seeds"}}``. Models without such scorings are absent. A model that ignores its noise has Ī = 0 (§4.2); an
    untrained one does not, since its random flows and softmax already map the noise to the letters: the level to beat
    is the model's own start."""
    gains = {}
    for model in trained_dssms(main):
        pairs = [(h[0]["I_bar"], h[-1]["I_bar"]) for r in main.get("runs", [])
                 if model["label"] in r.get("labels", ()) and r.get("split") == "standard"
                 and not r.get("diverged") and len(h := r.get("history") or []) > 1 and h[0].get("step") == 0
                 and all(e.get("I_bar") is not None and math.isfinite(e["I_bar"]) for e in (h[0], h[-1]))]
        if pairs:
            gain, margin = mean_margin([b - a for a, b in pairs])
            gains[model["model"]] = {"start": statistics.fmean(a for a, _ in pairs),
                                     "end": statistics.fmean(b for _, b in pairs), "gain": gain, "margin": margin,
                                     "seeds": len(pairs)}
    return gains


NOISE_CLAIM = ("'all entropy about possible sequence continuations must arise from the noise process ξ, which cannot "
               "be ignored in a successfully trained model' (§2.1); 'for a model ignoring the noise variables ... "
               "I(t) = 0' (§4.2)")


def figure1_claim(main: Mapping[str, Any], ladder: Mapping[str, Any] | None = None) -> Claim:
    """S&H Fig. 1 (§5.4, "Figures 1 and 1b show Ī for all trained models"), judged over every
    trained DSSM (:func:`trained_dssms`: Table 1's and Table 3's without an ID flow), model by model: each uses its
    noise (:data:`NOISE_CLAIM`), i.e. training raised its Ī above the same model's at initialisation beyond the seed
    margin (:func:`noise_gains`); and its Ī lies in the paper's range (:func:`paper_i_bar_range`). A model without a
    scoring at step 0 is named as not run for the first part. Where the
    budget ``ladder`` finds Ī still rising, a range part below the paper's says so
    (:func:`~paperlib.experiments.word_generation.budget_notes.i_bar_note`)."""
    rows = trained_dssms(main)
    if not rows:
        raise Unjudged("claim S-F1: no trained DSSM has an Ī")
    low, high = paper_i_bar_range()
    shown = ", ".join(f"{r['model']} {r['I_bar']:.2f}" for r in rows)
    parts, not_run = [], []
    gains = noise_gains(main)
    if gains:
        judged = [(direction_word(g["gain"], g["margin"]),
                   f"{model} {g['start']:.3f} → {g['end']:.3f} ({g['gain']:+.3f}, "
                   + (f"margin {g['margin']:.3f}, {g['seeds']} seeds)" if g["margin"] is not None else "one seed)"))
                  for model, g in gains.items()]
        parts.append(Part(
            "every DSSM uses its noise (Ī above its own at initialisation)",
            f"{NOISE_CLAIM}: each trained DSSM's Ī is higher than the same model's before training",
            part_word([w for w, _ in judged]),
            "Ī at initialisation → at the end (gain): " + "; ".join(e for _, e in judged),
            "per model and seed, Ī at the last scoring minus Ī at step 0 (the same estimator, the same run), above "
            "zero by more than twice the standard error of its mean over seeds", kind="seed margin"))
    missing = [r["model"] for r in rows if r["model"] not in gains]
    if missing:
        not_run.append(f"every DSSM uses its noise for {', '.join(missing)} (no scoring at step 0)")
    parts.append(Part(f"Ī in the paper's range {low:.2f}–{high:.2f}",
                      "Ī of the trained DSSMs lies in the paper's range",
                      part_word([low <= r["I_bar"] <= high for r in rows]), f"Ī: {shown}",
                      "the paper's lowest to highest Ī over Tables 1 and 3b (no ID flow), per row", kind="threshold"))
    note = i_bar_note(main, ladder, low) if any(r["I_bar"] < low for r in rows) else ""
    return noted(Claim("S-F1", tuple(parts), tuple(not_run)), note, lambda p: p.label.startswith("Ī in the paper's"))


__all__ = ["NOISE_CLAIM", "figure1_claim", "noise_gains", "paper_i_bar_range", "trained_dssms"]
