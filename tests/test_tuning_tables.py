"""Melis thesis Tables 2.4-2.6 (the tuning ranges; index rows M-T2.4-M-T2.6) against the search spaces that encode
them: every row of every table, its low and high end and its spacing, as printed, and the printed tables against the
seed's text where the seeds are at hand."""

from pathlib import Path

import pytest

from paperlib.search_spaces import get_space
from tests.test_seed_quotes import find_seeds

# The tables as printed: per row (low, high, log spacing). Table 2.6's max_time_steps is 20 for words, 50 for
# characters.
TABLE_2_4 = {"learning_rate": (0.001, 0.004, True), "input_embedding_ratio": (0.0, 2.0, False),
             "l2_penalty": (5e-6, 1e-3, True), "input_dropout": (0.0, 0.9, False),
             "inter_layer_dropout": (0.0, 0.95, False), "state_dropout": (0.0, 0.8, False),
             "output_dropout": (0.0, 0.95, False), "mogrifier_rounds (r)": (0, 6, False),
             "mogrifier_rank (k)": (-20, 100, False)}
TABLE_2_5 = {"learning_rate": (0.001, 0.004, True), "l2_penalty": (5e-6, 1e-3, True),
             "input_dropout": (0.0, 0.2, False), "inter_layer_dropout": (0.0, 0.2, False),
             "state_dropout": (0.0, 0.25, False), "output_dropout": (0.0, 0.25, False),
             "mogrifier_rounds (r)": (0, 6, False), "mogrifier_rank (k)": (-20, 100, False)}
TABLE_2_6 = {"max_time_steps": (1, "20/50", False), "dyneval_learning_rate": (1e-6, 1e-3, True),
             "dyneval_decay_rate": (1e-6, 1e-2, True), "dyneval_epsilon": (1e-8, 1e-2, True)}


def encoded(space: str) -> dict[str, tuple[float, float, bool]]:
    """A search space's rows under the thesis' names."""
    return {h.label or h.name: (h.low, h.high, h.log) for h in get_space(space).hyperparameters}


def test_every_row_of_table_2_5_is_encoded_with_its_range_and_spacing():
    """M-T2.5 (Enwik8): the Mogrifier's space holds every row of the table, the LSTM's all but r and k."""
    assert encoded("enwik8_mogrifier") == TABLE_2_5
    assert encoded("enwik8_lstm") == {k: v for k, v in TABLE_2_5.items() if not k.startswith("mogrifier_")}
    assert get_space("enwik8_mogrifier")["mogrifier_rounds"].integer and \
        get_space("enwik8_mogrifier")["mogrifier_rank"].integer


def test_every_row_of_tables_2_4_and_2_6_is_encoded_with_its_range_and_spacing():
    assert encoded("mogrifier") == TABLE_2_4
    assert encoded("lstm") == {k: v for k, v in TABLE_2_4.items() if not k.startswith("mogrifier_")}
    for space, high in (("dyneval_word", 20), ("dyneval_char", 50)):
        assert encoded(space) == {**TABLE_2_6, "max_time_steps": (1, high, False)}, space
        assert get_space(space)["segment_len"].integer


def test_no_tuning_profile_runs_the_enwik8_spaces_as_the_index_says():
    """M-T2.5's row says the enwik8 spaces are encoded but no profile of tuning_ptb has a model for them (a profile
    that gains one makes that sentence false)."""
    import yaml

    from paperlib.compendium.results_index.rows import ROWS

    profiles = yaml.safe_load((Path(__file__).parents[1] / "params.yaml").read_text())["experiments"]["tuning_ptb"]
    assert profiles and all(not set(p["models"]) & {"enwik8_lstm", "enwik8_mogrifier"} for p in profiles.values())
    assert "no profile of `tuning_ptb` has an enwik8 model" in ROWS["M-T2.5"].ours


def _printed(text: str, caption: str) -> dict[str, tuple]:
    """The rows under the table caption ``caption`` in the seed's text: name, low, high and spacing, tab-separated."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == caption)
    def number(cell: str) -> float | str:
        try:
            return float(cell)
        except ValueError:
            return cell  # "20/50"

    rows: dict[str, tuple] = {}
    for line in lines[start + 1:]:
        cells = [c.strip() for c in line.split("\t")]
        if len(cells) >= 3 and cells[0]:  # a row; the header row starts with an empty cell
            rows[cells[0]] = (number(cells[1]), number(cells[2]), len(cells) > 3 and cells[3] == "log")
        elif rows and not line.strip():
            break
    return rows


def test_the_printed_tables_are_the_seeds():
    folder = find_seeds()
    if folder is None:
        pytest.skip("seed texts not found (set PAPERLIB_SEEDS)")
    text = (folder / "000_ef40330f94fd79c5.txt").read_text()
    for caption, table in (("Table 2.4: Hyperparameter tuning ranges for all tasks except Enwik8.", TABLE_2_4),
                           ("Table 2.5: Hyperparameter tuning ranges for Enwik8.", TABLE_2_5),
                           ("Table 2.6: Hyperparameter tuning ranges for dynamic evaluation.", TABLE_2_6)):
        assert _printed(text, caption) == table, caption
