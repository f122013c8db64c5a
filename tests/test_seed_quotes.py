"""Every row of the results index quotes the seed sentences it judges, verbatim."""

import os
import re
from pathlib import Path

import pytest

from paperlib.compendium import results_index as ri
from paperlib.compendium.results_index.quotes import ELLIPSIS, QUOTES, SEEDS
from tests.conftest import REPO


def find_seeds() -> Path | None:
    """The seed texts: $PAPERLIB_SEEDS, else ../shared/seeds beside the repository."""
    env = os.environ.get("PAPERLIB_SEEDS")
    for folder in ([Path(env)] if env else []) + [REPO.parent / "shared" / "seeds"]:
        if all((folder / file).is_file() for _, file in SEEDS.values()):
            return folder
    return None


def normalise(text: str) -> str:
    """Whitespace and line breaks collapsed to single spaces."""
    return re.sub(r"\s+", " ", text).strip()


def seed_texts(folder: Path) -> dict[str, tuple[str, str]]:
    """Per seed its normalised text, as it stands and with words hyphenated at a line end joined."""
    texts = {}
    for seed, (_, file) in SEEDS.items():
        raw = (folder / file).read_text()
        texts[seed] = (normalise(raw), normalise(re.sub(r"(\w)-\n\s*(\w)", r"\1\2", raw)))
    return texts


def unquoted(quotes: dict, texts: dict[str, tuple[str, str]]) -> list[tuple[str, str, str]]:
    """Every piece of a quote (its text split at " … ") that is empty or not in its seed's text."""
    missing = []
    for item, item_quotes in quotes.items():
        for seed, section, text in item_quotes:
            for piece in text.split(ELLIPSIS):
                if not piece.strip() or not any(normalise(piece) in t for t in texts[seed]):
                    missing.append((item, section, piece))
    return missing


@pytest.fixture(scope="module")
def texts() -> dict[str, tuple[str, str]]:
    folder = find_seeds()
    if folder is None:
        pytest.skip("no seed texts: set PAPERLIB_SEEDS to the folder holding " +
                    ", ".join(file for _, file in SEEDS.values()))
    return seed_texts(folder)


def test_every_quoted_piece_occurs_verbatim_in_its_seed(texts):
    assert not unquoted(QUOTES, texts)


def test_the_check_catches_an_altered_word_a_joined_gap_and_an_empty_piece(texts):
    quote = QUOTES["M-F2.3"][0]
    altered = quote[2].replace("greatly", "strongly")
    joined = QUOTES["M-T2.3"][0][2].replace(ELLIPSIS, " ")
    doctored = {"X": [quote[:2] + (altered,), quote[:2] + (joined,), quote[:2] + (quote[2] + ELLIPSIS,)]}
    assert [piece for _, _, piece in unquoted(doctored, texts)] == [altered, joined, ""]
    assert not unquoted({"M-F2.3": [quote[:2] + ("  Figure 2.3 shows that\nthe number  of rounds",)]}, texts)


def test_every_seed_item_in_the_index_has_a_quote():
    ids = [item["id"] for item in ri.read_seed_items(REPO / ri.SEED_ITEMS)]
    assert [i for i in ids if not QUOTES.get(i)] == []


def test_quotes_are_keyed_by_seed_items_and_lead_with_the_items_own_seed():
    ids = {item["id"]: item for item in ri.read_seed_items(REPO / ri.SEED_ITEMS)}
    assert set(QUOTES) <= set(ids), sorted(set(QUOTES) - set(ids))
    for item, quotes in QUOTES.items():
        assert quotes and f"({quotes[0][0]})" in ids[item]["seed"], (item, ids[item]["seed"])
        for seed, section, text in quotes:
            assert seed in SEEDS and section.strip() and text.strip(), (item, seed, section)
            assert ELLIPSIS.strip() not in text.replace(ELLIPSIS, ""), (item, "an ellipsis outside ' … '")


def test_each_rows_details_show_its_quotes_with_seed_name_and_section():
    table = ri.build_index(ri.read_seed_items(REPO / ri.SEED_ITEMS), ri.load_results(REPO))
    for row in table:
        details = "\n".join(ri.render_details(row))
        for seed, section, text in QUOTES.get(row["id"], []):
            assert f"“{text}” — {SEEDS[seed][0]}, {section}" in details, row["id"]
        summary = ri.render_markdown([row]).split("## Details")[0]
        assert not any(text in summary for _, _, text in QUOTES.get(row["id"], [])), row["id"]
