"""The helpers the notebooks share: tables saved as results/<name>.csv, executed copies that do not depend on
when or where they ran, and a repository whose committed results are the ones dvc.lock records."""

import hashlib
import json
import math
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from paperlib.compendium.notebooks import run_notebook, save_table, strip_volatile_metadata
from tests.conftest import REPO


def example():
    return pd.DataFrame({"paper": [82.4, 61.3, float("nan")], "ours": [101.25, 77.0, 1 / 3],
                         "verdict": ["reproduced", "not reproduced", "±, Δ: not testable"]},
                        index=pd.Index(["lstm", "mogrifier", "mlstm"], name="model"))


def test_save_table_round_trips(tmp_path):
    table = example()
    path = save_table(table, "example_claims", root=tmp_path)
    assert path == tmp_path / "results" / "example_claims.csv"
    back = pd.read_csv(path, index_col=0)
    assert back.index.name == "model" and list(back.index) == list(table.index)
    assert list(back.columns) == list(table.columns)
    pd.testing.assert_frame_equal(back, table)
    assert math.isnan(back.loc["mlstm", "paper"])
    assert [p.name for p in path.parent.iterdir()] == ["example_claims.csv"]  # no temp file left behind


def test_save_table_is_deterministic_and_overwrites(tmp_path):
    first = save_table(example(), "example", root=tmp_path).read_bytes()
    second = save_table(example(), "example", root=tmp_path).read_bytes()
    assert first == second
    assert b"\r" not in first
    changed = example()
    changed.loc["lstm", "ours"] = 99.0
    assert save_table(changed, "example", root=tmp_path).read_bytes() != first


@pytest.mark.parametrize("name", ["", "Table", "a-b", "a.csv", "../escape", "a b", "sub/dir", "ä", 3])
def test_save_table_rejects_bad_names(tmp_path, name):
    with pytest.raises(ValueError, match="a-z0-9_"):
        save_table(example(), name, root=tmp_path)
    assert not (tmp_path / "results").exists()


def test_save_table_refuses_the_seed_items_input(tmp_path):
    seed = tmp_path / "results" / "seed_items.csv"
    seed.parent.mkdir()
    seed.write_text("id,claim\n")
    with pytest.raises(ValueError, match="seed_items"):
        save_table(example(), "seed_items", root=tmp_path)
    assert seed.read_text() == "id,claim\n"


# ------------------------------------------------------------------ executed notebooks, committed


def _executed_example(root: Path) -> dict:
    """What papermill leaves in an executed notebook, as far as the volatile parts go."""
    stamp = {"start_time": "2026-11-25T04:50:34+00:00", "end_time": "2026-11-25T04:50:35+00:00", "duration": 0.7}
    return {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"},
                     "language_info": {"name": "python", "version": "3.11.7"},
                     "papermill": {**stamp, "parameters": {"profile": "cpu"}, "default_parameters": {},
                                   "environment_variables": {}, "exception": None, "version": "2.7.0",
                                   "input_path": str(root / "notebooks/x.ipynb"),
                                   "output_path": str(root / "results/notebooks/x.ipynb")}},
        "cells": [
            {"cell_type": "code", "id": "e3f1c0de", "execution_count": 1, "source": "profile = 'cpu'",
             "metadata": {"tags": ["injected-parameters"], "papermill": {**stamp, "status": "completed"},
                          "execution": {"iopub.execute_input": "2026-11-25T04:50:34.700401Z"}},
             "outputs": []},
            {"cell_type": "code", "id": "keep-me", "execution_count": 2, "source": "save_table(t, 'x')",
             "metadata": {"tags": []},
             "outputs": [{"output_type": "execute_result", "execution_count": 2, "metadata": {},
                          "data": {"text/plain": f"PosixPath('{root}/results/x.csv')"}},
                         {"output_type": "stream", "name": "stdout", "text": f"wrote {root}\n"}]},
        ],
    }


def test_volatile_metadata_goes_and_what_the_notebook_computed_stays(tmp_path):
    root = tmp_path / "clone"
    notebook = strip_volatile_metadata(_executed_example(root), root)
    assert notebook["metadata"]["papermill"] == {"parameters": {"profile": "cpu"}, "default_parameters": {}}
    assert notebook["metadata"]["language_info"] == {"name": "python"}
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"
    injected, kept = notebook["cells"]
    assert injected["metadata"] == {"tags": ["injected-parameters"]} and injected["id"] == "injected-parameters"
    assert kept["id"] == "keep-me" and kept["execution_count"] == 2
    assert kept["outputs"][0]["data"]["text/plain"] == "PosixPath('results/x.csv')"
    assert kept["outputs"][1]["text"] == "wrote .\n"
    elsewhere = tmp_path / "another" / "place"
    assert strip_volatile_metadata(_executed_example(elsewhere), elsewhere) == notebook


@pytest.mark.slow
def test_an_executed_notebook_is_byte_identical_across_runs_and_clone_locations(tmp_path):
    """Two runs, from two folders, of a notebook that prints where it runs: the committed copy may not differ."""
    import nbformat

    source = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("profile = None", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("import os, time\nprint(os.getcwd())\nos.path.join(os.getcwd(), 'results')"),
        nbformat.v4.new_code_cell("sum(range(10))"),
    ], metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}})
    copies = []
    for where in ("first", "second/deeper"):
        root = tmp_path / where
        (root / "notebooks").mkdir(parents=True)
        nbformat.write(source, root / "notebooks" / "where.ipynb")
        copies.append(run_notebook("where", profile="smoke", root=root).read_bytes())
    assert copies[0] == copies[1]
    text = copies[0].decode()
    assert str(tmp_path) not in text and "start_time" not in text and "iopub" not in text
    assert '"45"' in text and "'results'" in text and '".\\n"' in text  # outputs kept; paths relative to the clone


def test_every_committed_result_file_is_the_one_dvc_lock_records():
    """A fresh clone is up to date: each file a stage writes (executed notebooks included) is in the repository
    with the md5 that dvc.lock holds, so `dvc repro` there re-runs only the data fetch. Folders (the corpora
    under data/raw/, git-ignored) are what a clone has to fetch."""
    lock = yaml.safe_load((REPO / "dvc.lock").read_text())["stages"]
    tracked = set(subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                                 check=True).stdout.splitlines())
    checked, wrong = 0, []
    for stage, entry in lock.items():
        for out in entry.get("outs", []):
            if out.get("isexec") is not None or "nfiles" in out:
                continue
            path = REPO / out["path"]
            if out["path"] not in tracked or hashlib.md5(path.read_bytes()).hexdigest() != out["md5"]:
                wrong.append(f"{stage}: {out['path']}")
            checked += 1
    assert not wrong, f"not committed as dvc.lock records them (run `dvc repro` and commit): {wrong}"
    executed = {f"results/notebooks/{p.stem}.ipynb" for p in (REPO / "notebooks").glob("*.ipynb")}
    assert executed <= tracked, "every notebook's executed copy is in the repository"
    assert checked > 50


@pytest.mark.parametrize("stage, key, column, cell", [
    ("micmco_ptb_ladder", "ladder", "best NLL {}",
     lambda c: f"{c['best_nll']:.3f} ± {c['best_nll_sd']:.3f}" if c["best_nll"] is not None else "every trial diverged"),
    ("micmco_synthetic_ladder", "figure", "HV {}", lambda c: f"{c['hv']:.3f} ± {c['hv_sd']:.3f}"),
])
def test_the_committed_ladder_tables_put_each_curves_numbers_under_its_own_name(stage, key, column, cell):
    """A rung keeps its curves by name (the JSON sorts them), while a ladder lists its labels in its own order:
    the table must join them by name, never by position, or two curves' numbers trade columns."""
    path = REPO / "results" / f"{stage}.json"
    if not path.exists():
        pytest.skip(f"no committed {stage} results")
    ladder = json.loads(path.read_text())
    # keyed by claim too: a figure may have more than one ladder reading
    table = pd.read_csv(REPO / "results" / f"{stage}.csv", dtype=str).set_index([key, "claim", "steps"])
    checked = swapped_order = 0
    for name in ladder["settings"]["figures"]:
        lad = ladder["ladders"][name]
        for rung in lad["rungs"]:
            swapped_order += list(rung["curves"]) != lad["curves"]
            for label, curve in zip(lad["labels"], lad["curves"]):
                assert table.loc[(name, lad["claim"], str(rung["steps"])), column.format(label)] == cell(
                    rung["curves"][curve])
                checked += 1
    assert checked and swapped_order, "some rung lists its curves in another order than its ladder's labels"


def test_saved_figures_and_inline_images_name_no_software_and_no_date(tmp_path):
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from paperlib.compendium.notebooks import png_without_text, save_figure

    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    png, pdf = save_figure(fig, "example", root=tmp_path)
    assert b"Matplotlib" not in png.read_bytes() and b"tEXt" not in png.read_bytes()
    assert b"Matplotlib" not in pdf.read_bytes() and b"CreationDate" not in pdf.read_bytes()
    again = save_figure(fig, "example", root=tmp_path)
    assert [p.read_bytes() for p in again] == [png.read_bytes(), pdf.read_bytes()]
    inline = io.BytesIO()
    fig.savefig(inline, format="png")  # what the inline backend embeds: matplotlib's version in a tEXt chunk
    plt.close(fig)
    assert b"Software" in inline.getvalue()
    stripped = png_without_text(inline.getvalue())
    assert b"Software" not in stripped and len(stripped) < len(inline.getvalue())
    pixels = [matplotlib.image.imread(io.BytesIO(b), format="png") for b in (inline.getvalue(), stripped)]
    assert (pixels[0] == pixels[1]).all()  # the same decoded pixels: only the text chunk went
    with pytest.raises(ValueError, match="not a PNG"):
        png_without_text(b"GIF89a")
