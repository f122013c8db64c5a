"""Tables for readers (used by notebooks/word_generation.ipynb): ours beside the paper's. The claims are judged
in :mod:`paperlib.experiments.word_generation.claims`."""

from __future__ import annotations

from typing import Any

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
