"""The PTB MICMCO frontier images drawn from any profile's results (paperlib.compendium.micmco_ptb_frontiers)."""

import json

import matplotlib

from paperlib.compendium import figure_style
from paperlib.compendium.micmco_ptb_frontiers import GROUPS, draw_groups
from tests.conftest import REPO


def test_a_results_file_draws_the_committed_images_byte_for_byte_under_any_stem(tmp_path):
    """The notebook draws results/micmco_ptb.json into figures/micmco_ptb_<group>.*, and a GPU machine's results
    into figures/gpu/micmco_ptb_<group>.*, with the same function: the committed results drawn under the gpu stem
    give the committed images' bytes (figures are byte-deterministic), the unigram level's line included; without
    the levels a panel the line crosses comes out otherwise."""
    matplotlib.use("Agg")
    figure_style.use()
    results = json.loads((REPO / "results" / "micmco_ptb.json").read_text())
    levels = json.loads((REPO / "results" / "micmco_ptb_unigram.json").read_text())["nll"]  # the notebook's
    written = draw_groups(results, tmp_path, stem="gpu/micmco_ptb", show=False, levels=levels)
    assert written == [f"figures/gpu/micmco_ptb_{group}.png" for group in GROUPS]
    for group in GROUPS:
        for ext in ("png", "pdf"):
            ours = (tmp_path / "figures" / "gpu" / f"micmco_ptb_{group}.{ext}").read_bytes()
            assert ours == (REPO / "figures" / f"micmco_ptb_{group}.{ext}").read_bytes(), (group, ext)
    plain = draw_groups(results, tmp_path, stem="plain/micmco_ptb", show=False)
    assert any((tmp_path / p).read_bytes() != (tmp_path / w).read_bytes() for p, w in zip(plain, written))
