"""Melis thesis §2.B's findings about its hyperparameter tuning (Figs. 2.5/2.6), for display beside ours (data;
imports only the LM tables)."""

from __future__ import annotations

from paperlib.reference.language_models import LM_PTB

# Melis thesis §2.B and Table 2.1 (PTB, 2 layers, 24M weights): what a reader of Figs. 2.5/2.6 is told. Table 2.1's
# perplexities are read from the LM tables, where they are written once.
_TABLE_2_1 = {row["model"]: row for row in LM_PTB if row["source"] == "Melis T2.1"}
TUNING = {
    "neighbourhood_fraction": 0.15,  # each hyperparameter restricted to ~15% of its range around the best
    "neighbourhood_max_gap_ppl": 1.2,  # the neighbours are at most 1.2 perplexity points off the best
    "rerun_std_ppl": 0.2,  # std of LSTM reruns with the best hyperparameters
    "rerun_mean_gap_ppl": 0.7,  # reruns' mean vs the best tuning run
    "best_valid_ppl": {"lstm": _TABLE_2_1["lstm"]["valid"], "mogrifier": _TABLE_2_1["mogrifier_lstm"]["valid"]},
    "parameters": 24_000_000,
    "tuner": "Google Vizier (batched GP bandits)",
}
