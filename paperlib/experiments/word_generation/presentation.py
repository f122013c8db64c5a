"""Tables and claims for readers (used by notebooks/word_generation.ipynb): ours beside the paper's."""

from __future__ import annotations

from typing import Any

import numpy as np

from paperlib.reference.word_generation import PAPER_NGRAM_ORDERS


def format_value(mean: float | None, std: float | None = None, digits: int = 2) -> str:
    """``12.13 ± 0.11``, ``12.13`` without a spread, ``–`` without a value."""
    if mean is None:
        return "–"
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if std is not None else "")


def _ours_cell(row: dict[str, Any], key: str, digits: int = 2) -> str:
    if key in row.get("infinite", []):
        return "∞"
    return format_value(row.get(key), row.get(key + "_std"), digits)


def _paper_cell(paper: Any, digits: int = 2) -> str:
    if paper is None:
        return "–"
    if paper == "unstable":
        return "unstable"
    return format_value(paper[0], paper[1], digits)


def table1_frame(results: dict[str, Any]):
    """Table 1 as a DataFrame: ours (mean ± std over seeds) beside the paper's."""
    import pandas as pd

    columns = {"H_train": "H[P_train,P̂]", "H_test": "H[P_test,P̂]", "in_vocab_unique": "w∈V unique",
               "in_vocab": "w∈V", "I_bar": "Ī"}
    rows = []
    for row in results["table1"]:
        entry = {"model": row["model"], "seeds": row["seeds"], "unstable": row["unstable"]}
        for key, title in columns.items():
            entry[f"{title} ours"] = _ours_cell(row, key)
            paper = (row.get("paper") or {}).get(key)
            entry[f"{title} paper"] = _paper_cell(paper)
        rows.append(entry)
    return pd.DataFrame(rows).set_index("model")


def table2_frame(results: dict[str, Any]):
    """Table 2 in the paper's shape (models as rows); each cell reads "ours (paper)"."""
    import pandas as pd

    orders = results["scale"].get("ngram_orders") or list(PAPER_NGRAM_ORDERS)
    rows = {}
    for row in results["table2"]:
        paper = row.get("paper") or {}
        entry = {}
        for key, title in (("H_train", "H[P_train,P̂]"), ("H_test", "H[P_test,P̂]")):
            entry[("cross-entropy", title)] = f"{_ours_cell(row, key)} ({format_value(paper.get(key))})"
        for source, title in (("full", "n-gram from train+test"), ("test", "n-gram from test")):
            values = paper.get(source)
            for n in orders:
                theirs = values[PAPER_NGRAM_ORDERS.index(n)] if values and n in PAPER_NGRAM_ORDERS else None
                entry[(title, f"P{n}")] = f"{_ours_cell(row, f'ppl_{source}_{n}', 1)} ({format_value(theirs, None, 1)})"
        rows[row["model"]] = entry
    frame = pd.DataFrame(rows).T
    frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    return frame.rename_axis(index="model")


def table3_frames(results: dict[str, Any]) -> dict[str, Any]:
    """Table 3 (a) test cross-entropy and (b) ``I_bar``: rows F_g, columns F_q, "ours / paper"."""
    import pandas as pd

    t3 = results["table3"]
    frames = {}
    for key in ("H_test", "I_bar"):
        rows = {}
        for g in t3["generative"]:
            rows[g] = {}
            for q in t3["inference"]:
                cell = t3["cells"][g][q]
                ours = "unstable" if cell["unstable"] == cell["seeds"] else _ours_cell(cell, key)
                paper = t3["paper"][key].get(g, {}).get(q)
                rows[g][q] = f"{ours}  (paper {_paper_cell(paper) if paper is not None else 'n/a'})"
        frames[key] = pd.DataFrame(rows).T.rename_axis(index="F_g", columns="F_q")
    return frames


def _row(table: list[dict[str, Any]], model: str) -> dict[str, Any] | None:
    return next((r for r in table if r["model"] == model), None)


def paper_claims(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The paper's qualitative claims (§5.3–5.4), each checked on our numbers where we ran both sides."""
    t1 = results["table1"]
    claims = []

    def compare(claim: str, better: str, worse: str, key: str = "H_test") -> None:
        a, b = _row(t1, better), _row(t1, worse)
        if a is None or b is None or a.get(key) is None or b.get(key) is None:
            return
        claims.append({"claim": claim, "ours": f"{a[key]:.2f} vs {b[key]:.2f}", "holds": a[key] < b[key]})

    compare("2xTRIL beats TRIL in test cross-entropy", "2xTRIL", "TRIL")
    compare("importance weighting (K=10) beats the ELBO (2xTRIL)", "2xTRIL, K=10", "2xTRIL")
    compare("DSSM 2xTRIL, K=10 beats BASELINE-8D in test cross-entropy", "2xTRIL, K=10", "BASELINE-8D")
    compare("DSSM TRIL beats BASELINE-8D in test cross-entropy", "TRIL", "BASELINE-8D")
    compare("BASELINE-16D beats BASELINE-8D", "BASELINE-16D", "BASELINE-8D")
    fig2 = results["figure2"]["runs"]
    if fig2:
        per_t = np.mean([np.mean(r["I_t"], 0) for r in fig2], 0)
        claims.append({"claim": "I(t) is largest at the first positions and decreases (Fig. 2)",
                       "ours": f"I(1..3) {per_t[:3].mean():.2f} vs I(T-2..T) {per_t[-3:].mean():.2f}",
                       "holds": bool(per_t[:3].mean() > per_t[-3:].mean())})
    histories = [h for h in results["figure3"]["histories"] if len(h) > 1 and "I_bar" in h[-1]]
    if histories:
        curves = [[p["I_bar"] for p in h if "I_bar" in p] for h in histories]
        first, last = np.mean([c[0] for c in curves]), np.mean([c[-1] for c in curves])
        lowest = np.mean([min(c) for c in curves])
        claims.append({"claim": "I_bar grows over training (Fig. 3)",
                       "ours": f"{first:.2f} at initialisation, lowest {lowest:.2f}, final {last:.2f}",
                       "holds": bool(last > first)})
    return claims
