"""Melis thesis §2.3.3's reverse-copy task: its setting and what Fig. 2.4a shows, for display beside ours (data;
imports nothing)."""

from __future__ import annotations

from typing import Any

# Melis thesis §2.3.3 and Fig. 2.4a (the thesis gives the curves only as a figure).
REVERSE_COPY: dict[str, Any] = {
    "vocab_size": 1000,
    "train_examples": 500_000,
    "valid_examples": 10_000,
    "test_examples": 10_000,
    "lengths": [50, 100, 150, 200],
    "parameters": 10_000_000,
    "solved_by_both": [50, 100],
    "mogrifier_better": [150, 200],
    "best_embedding_hidden": {
        "lstm": {"150": [498, 787], "200": [493, 790]},
        "mogrifier": {"150": [41, 1054], "200": [181, 961]},
    },
}
