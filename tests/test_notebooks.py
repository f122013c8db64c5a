"""The helpers the notebooks share: tables saved as results/<name>.csv."""

import math

import pandas as pd
import pytest

from paperlib.notebooks import save_table


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
