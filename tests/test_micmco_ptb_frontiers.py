"""The PTB MICMCO frontier images drawn from any profile's results (paperlib.compendium.micmco_ptb_frontiers)."""

import json

import matplotlib
import pytest

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


def test_the_kl_axis_stops_before_an_isolated_tail_and_never_inside_the_bulk():
    """kl_reach cuts the upper half's first point more than twice its predecessor (and all after it); a jump in the
    lower half, or a steady climb, keeps every point; nothing to reach is an error."""
    from paperlib.compendium.micmco_ptb_frontiers import kl_reach

    assert kl_reach([0.01, 0.02, 0.05, 0.08, 0.13, 0.49]) == 0.13
    assert kl_reach([0.13, 0.49, 0.01, 0.05, 0.08, 0.02, 1.5]) == 0.13  # order-free; the tail may hold several points
    assert kl_reach([0.001, 0.01, 0.02, 0.03]) == 0.03  # the 10× jump lies in the lower half
    assert kl_reach([0.1, 0.19, 0.3]) == 0.3  # no step beyond twice
    assert kl_reach([0.2]) == 0.2
    with pytest.raises(ValueError, match="no KL values"):
        kl_reach([])


def test_committed_fig_5_22_keeps_its_dreg_curves_readable_and_shares_kl_only_within_a_family():
    """On the committed results DReG 16/1's one frontier point (KL ≈ 0.49) would stretch Fig. 5.22's axis almost
    fourfold: the axis stops before it, yet still covers every other point below the NLL top. Figs. 5.22 and 5.23
    are of two families, so the image does not make them share a KL axis (Fig. 5.23's own reach decides its)."""
    from paperlib.compendium.micmco_ptb_frontiers import _frontier_points, family_of, kl_limits, nll_limits

    results = json.loads((REPO / "results" / "micmco_ptb.json").read_text())
    ids = [f for row in GROUPS["asymmetric_samples"][1] for f in row]
    _, top = nll_limits(results, ids)
    far = results["curves"]["dreg16-1.train"]["frontier"]
    assert len(far) == 1 and far[0]["nll"] <= top  # the point this guards against, as committed
    left, right = kl_limits(results, ["5.22"], top)
    shown = sorted(k for k, n in _frontier_points(results, ["5.22"]) if n <= top)
    assert shown[-2] < right < far[0]["kl"] == shown[-1]
    assert (family_of(results, "5.22"), family_of(results, "5.23")) == ("dreg", "vimco")
    assert kl_limits(results, ["5.23"], top) != (left, right)


def test_a_departure_has_one_colour_in_every_image_and_no_family_shares_it():
    """Steps ×2 and ×16 are one kind (more steps) and share a colour, as do the batch sizes; the kinds differ from
    each other and from the families' colours, and 16/1, 1/16 carry the thesis' names ("DReG 16/1")."""
    from paperlib.compendium.micmco_ptb_frontiers import DEPARTURE_COLOUR, departure_key

    kind = {"T×16": "steps", "T×2": "steps", "bs×16": "batch", "bs×2": "batch", "hs×2": "hidden",
            "hs×2 T×2": "hidden and steps", "16/1": "16/1", "1/16": "1/16"}
    assert set(kind) == set(DEPARTURE_COLOUR)
    by_kind = {k: {DEPARTURE_COLOUR[d] for d in kind if kind[d] == k} for k in set(kind.values())}
    assert all(len(c) == 1 for c in by_kind.values())
    colours = [c.pop() for c in by_kind.values()]
    assert len(set(colours)) == len(colours)
    assert not set(colours) & {figure_style.colour("dreg"), figure_style.colour("vimco")}
    key = departure_key(32, {"dreg", "vimco"})
    assert key["16/1"].startswith("DReG 16/1 and VIMCO 16/1:") and key["1/16"].startswith("DReG 1/16 and VIMCO 1/16:")
    assert departure_key(32)["1/16"].startswith("1/16:") and "(64)" in key["hs×2"]
