"""Schmidt & Hofmann's numbers (Tables 1-3, footnotes 6-7), for display beside ours (data; imports nothing)."""

from __future__ import annotations

from typing import Any


# [mean, std]; std None where the paper gives a single run; None where it reports nothing.

PAPER_TABLE1: dict[str, dict[str, list[float | None] | None]] = {
    name: dict(zip(("H_train", "H_test", "in_vocab_unique", "in_vocab", "I_bar"), values))
    for name, values in {
        "TRIL": ([12.13, .11], [11.99, .11], [.18, .00], [.43, .03], [.95, .04]),
        "TRIL, K=2": ([11.76, .12], [11.82, .12], [.16, .01], [.46, .02], [1.06, .16]),
        "TRIL, K=5": ([11.46, .05], [11.51, .05], [.16, .01], [.48, .02], [1.08, .13]),
        "TRIL, K=10": ([11.43, .05], [11.47, .05], [.16, .01], [.49, .02], [1.12, .12]),
        "2xTRIL": ([11.91, .08], [11.86, .13], [.17, .01], [.45, .02], [.89, .07]),
        "2xTRIL, K=2": ([11.55, .09], [11.61, .09], [.16, .00], [.47, .01], [1.00, .13]),
        "2xTRIL, K=5": ([11.42, .07], [11.46, .06], [.16, .00], [.49, .01], [1.20, .12]),
        "2xTRIL, K=10": ([11.33, .05], [11.38, .06], [.16, .00], [.49, .01], [1.28, .13]),
        "2xTRIL, K=10, BIDI": ([11.33, .09], [11.39, .10], [.16, .01], [.48, .00], [1.25, .16]),
        "d=16, 2xTRIL, K=10": ([11.21, None], [11.43, None], [.15, None], [.48, None], [1.43, None]),
        "d=32, 2xTRIL, K=10": ([11.27, None], [11.13, None], [.15, None], [.50, None], [1.31, None]),
        "REAL-NVP-[2,3,4,5,6,7]": ([11.77, None], [11.81, None], [.12, None], [.53, None], [.94, None]),
        "BASELINE-8D": ([12.92, None], [12.97, None], [.13, None], [.53, None], None),
        "BASELINE-16D": ([12.55, None], [12.60, None], [.14, None], [.62, None], None),
        "ORACLE-TRAIN": ([7.0, None], [7.02, None], [.27, None], [1.0, None], None),
    }.items()
}
PAPER_TEST_ENTROPY = 6.80  # footnote 7
PAPER_BEST_SINGLE = {"model": "2xTRIL, K=10", "H_train": 11.26, "H_test": 11.28}  # footnote 6

PAPER_TABLE2: dict[str, dict[str, Any]] = {
    "2xTRIL, K=10": {"H_train": 11.56, "H_test": 12.27,
                     "full": [10.4, 12.8, 20.9, 30.7], "test": [13.1, 21.9, 49.6, 81.1]},
    "BASELINE-8D": {"H_train": 12.90, "H_test": 13.67,
                    "full": [11.4, 12.1, 17.5, 24.8], "test": [14.5, 22.7, 48.3, 80.5]},
    "ORACLE-TRAIN": {"H_train": None, "H_test": None, "full": [10.1, 6.7, 4.8, 4.1], "test": [13.2, 15.7, 21.4, 26.4]},
    "ORACLE-TEST": {"H_train": None, "H_test": None, "full": [9.5, 6.0, 4.5, 3.9], "test": [7.9, 4.1, 2.9, 2.6]},
}
PAPER_NGRAM_ORDERS = (2, 3, 4, 5)

# Table 3 as legible in our copy of the paper: rows F_g, columns F_q; "unstable" = the paper's bar,
# None = not legible.
PAPER_TABLE3_FLOWS = ("ID", "DIAG", "TRIL", "2xTRIL")
PAPER_TABLE3: dict[str, dict[str, dict[str, Any]]] = {
    "H_test": {
        "ID": {"ID": [14.23, .00], "DIAG": [14.23, .00], "TRIL": [14.23, .00], "2xTRIL": "unstable"},
        "DIAG": {"ID": None, "DIAG": [12.35, .37], "TRIL": None, "2xTRIL": "unstable"},
        "TRIL": {"ID": None, "DIAG": [11.99, .11], "TRIL": "unstable", "2xTRIL": "unstable"},
        "2xTRIL": {"ID": "unstable", "DIAG": [11.86, .13], "TRIL": "unstable", "2xTRIL": "unstable"},
    },
    "I_bar": {
        "ID": {"ID": [0.0, .00], "DIAG": [0.0, .00], "TRIL": [0.0, .00], "2xTRIL": "unstable"},
        "DIAG": {"ID": [.93, .15], "DIAG": [.85, .16], "TRIL": [.92, .13], "2xTRIL": "unstable"},
        "TRIL": {"ID": [.65, .01], "DIAG": [.95, .04], "TRIL": "unstable", "2xTRIL": "unstable"},
        "2xTRIL": {"ID": "unstable", "DIAG": [.89, .07], "TRIL": "unstable", "2xTRIL": "unstable"},
    },
}
