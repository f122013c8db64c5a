"""The paper's numbers sit beside ours by key (method, model, rank, length), never by position.

Results JSON files are written with sorted keys, so our rows need not come in the order the paper lists them. Each
test runs a notebook's own setup cell and table cell (no kernel) on results whose order differs from the paper's,
and checks that every row carries its own paper number, read from the data where it is written once.
"""
import json

import pandas as pd
import pytest

from paperlib.reference.reverse_copy import REVERSE_COPY
from paperlib.reference import byte_lm as reference_byte_lm
from paperlib.reference import dynamic_evaluation as reference_dyneval
from paperlib.reference.averaging import AVERAGING_BEST_LOSS as AVERAGING_PAPER
from paperlib.experiments.averaging.averaging_ptb import summarise
from tests.conftest import REPO


def run_table_cell(notebook: str, marker: str, monkeypatch, **names) -> dict[str, pd.DataFrame]:
    """Run `notebook`'s parameters and setup cells, then set `names`, then run the code cell containing `marker`;
    returns the tables that cell saves, by name (nothing is written; `display` shows nothing)."""
    monkeypatch.setenv("PAPERLIB_ROOT", str(REPO))
    nb = json.loads((REPO / "notebooks" / f"{notebook}.ipynb").read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    table_cell = [c for c in cells if marker in c]
    assert len(table_cell) == 1, f"{len(table_cell)} cells of {notebook} contain {marker!r}"
    namespace: dict = {"display": lambda *args, **kwargs: None}
    for source in cells[:2]:  # the parameters cell and the setup cell (imports, results)
        exec(compile(source, f"{notebook}.ipynb", "exec"), namespace)
    saved = {}
    namespace.update(names, save_table=lambda table, name, root=None: saved.setdefault(name, table))
    exec(compile(table_cell[0], f"{notebook}.ipynb", "exec"), namespace)
    return saved


def averaging_summary(method_order: list[str]) -> dict:
    """`summarise` on made-up curves, through the sorted-keys JSON the stage writes, methods in `method_order`."""
    def curve(losses):
        return {"step": [10 * (i + 1) for i in range(len(losses))], "valid_nll": list(losses)}

    curves = {"2ta": curve([4.0, 3.0]), "raw": curve([4.1, 3.2]), "ta_0.5": curve([4.2, 3.1]),
              "ema_0.99": curve([4.3, 3.05]), "2ta_E0.25": curve([4.0, 3.01])}
    overfit = {"curves": {"raw": curve([3.0, 2.0, 2.5]),
                          "2ta": {**curve([3.0, 2.0, 2.5]), "action": ["keep", "keep", "reset_long"]}}}
    summary = json.loads(json.dumps(summarise({"curves": curves, "period": 10}, overfit), sort_keys=True))
    summary["methods"] = {m: summary["methods"][m] for m in method_order}
    return summary


@pytest.mark.parametrize("method_order", [["2ta", "ema (tuned)", "raw", "ta (tuned)"],  # as the JSON sorts them
                                          ["ta (tuned)", "raw", "ema (tuned)", "2ta"]])
def test_averaging_table_gives_each_method_its_own_paper_number(method_order, monkeypatch):
    tables = run_table_cell("averaging", 'save_table(table, "averaging_methods")', monkeypatch,
                            summary=averaging_summary(method_order))
    paper = tables["averaging_methods"]["paper best (thesis §3.6)"]
    assert list(paper.index) == method_order
    assert paper["2ta"] == AVERAGING_PAPER["2ta"] and paper["raw"] == AVERAGING_PAPER["raw"]
    for tuned in ("ta (tuned)", "ema (tuned)"):  # the thesis gives no number for the tuned baselines
        assert isinstance(paper[tuned], str) and "very close" in paper[tuned]


def test_byte_lm_table_puts_the_bits_per_byte_on_the_byte_mlstm_row(monkeypatch):
    reordered = dict(reversed(reference_byte_lm.TABLE_3_3.items()))  # the byte mLSTM first instead of last
    tables = run_table_cell("byte_lm", '"byte_lm_table_3_3"', monkeypatch, THESIS_TABLE_3_3=reordered)
    thesis = tables["byte_lm_table_3_3"].xs("thesis", level="source")["test bits/byte"]
    assert thesis["byte mLSTM +emb +WN +VD"] == reference_byte_lm.TEST_BITS_PER_BYTE
    assert (thesis.drop("byte mLSTM +emb +WN +VD") == "").all()


def test_related_words_table_keeps_the_median_beside_the_median_whatever_top(monkeypatch):
    results = json.loads((REPO / "results" / "dyneval.json").read_text())
    rw = results["related_words"]
    top = len(reference_dyneval.DYNEVAL_RELATED_WORDS) - 1 - 4  # four related words fewer than the thesis' 10
    rw["rows"], rw["top"] = rw["rows"][: top + 1], top
    tables = run_table_cell("dyneval", '"dyneval_related_words"', monkeypatch, results=results)
    frame = tables["dyneval_related_words"]
    median = frame.loc["median (vocabulary)"]
    assert (median["cosine (ours)"], median["Δ log p (ours)"]) == (rw["median"]["cosine"], rw["median"]["delta"])
    assert (median["cosine (thesis)"], median["Δ log p (thesis)"]) == reference_dyneval.DYNEVAL_RELATED_WORDS_MEDIAN
    ranks = frame.drop("median (vocabulary)")
    assert list(ranks["word (thesis)"]) == list(reference_dyneval.DYNEVAL_RELATED_WORDS)
    assert list(ranks["word (ours)"].dropna()) == [r["word"] for r in rw["rows"]]


def test_reverse_copy_lengths_quote_the_thesis_only_at_lengths_it_found_the_mogrifier_better(monkeypatch):
    results = json.loads((REPO / "results" / "reverse_copy.json").read_text())
    lengths = [10, 20, 30, 40, 50, 60]  # three "long" lengths against the thesis' two (150, 200)
    some = next(iter(results["best"]["lstm"].values())), next(iter(results["best"]["mogrifier"].values()))
    best = {m: {str(n): run for n in lengths} for m, run in zip(("lstm", "mogrifier"), some)}
    tables = run_table_cell("reverse_copy", '"reverse_copy_lengths"', monkeypatch, lengths=lengths, best=best)
    says = tables["reverse_copy_lengths"]["thesis says"]
    better = REVERSE_COPY["mogrifier_better"]
    assert says[60].startswith(f"thesis ({better[-1]}): Mogrifier considerably better")
    assert says[50].startswith(f"thesis ({better[-2]}): Mogrifier considerably better")
    assert "Mogrifier considerably better" not in says[40]  # the thesis' third-longest length is solved by both
    sizes = REVERSE_COPY["best_embedding_hidden"]
    assert f"LSTM {'/'.join(map(str, sizes['lstm'][str(better[-1])]))} vs Mogrifier" in says[60]
