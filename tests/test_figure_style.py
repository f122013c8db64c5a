"""The compendium's one figure style: legible type, human names, a colour per method that never changes."""

import os
import subprocess
import sys

import matplotlib

from paperlib.compendium import figure_style

matplotlib.use("Agg")


def test_every_figure_is_drawn_with_type_a_paper_would_print():
    import matplotlib as mpl

    figure_style.use()
    for key in ("font.size", "axes.labelsize", "xtick.labelsize", "ytick.labelsize", "legend.fontsize"):
        size = mpl.font_manager.FontProperties(size=mpl.rcParams[key]).get_size_in_points()
        assert size >= 9, f"{key} is {size:.1f} pt: below a paper's caption size"


def test_config_keys_get_human_names_and_names_pass_through():
    assert figure_style.name("mogrifier_rlstm") == "Mogrifier RLSTM"
    assert figure_style.name("2ta") == "2TA" and figure_style.name("VIMCO") == "VIMCO"
    assert figure_style.name("2TA") == "2TA"  # already a name
    assert figure_style.name("some_new_key") == "some_new_key"


def test_methods_drawn_together_have_distinct_colours_and_a_key_and_its_name_share_one():
    groups = [("lstm", "mogrifier_lstm", "mogrifier_rlstm", "mlstm", "transformer"),
              ("raw", "ta", "2ta", "ema", "swa"),
              ("elbo", "iwae", "stl", "dreg", "reinforce", "vimco")]
    for group in groups:
        colours = [figure_style.colour(key) for key in group]
        assert len(set(colours)) == len(group), dict(zip(group, colours))
    assert figure_style.colour("mogrifier_lstm") == figure_style.colour("Mogrifier")


def test_a_key_without_an_assigned_colour_gets_the_same_one_in_every_process():
    """Not Python's salted hash: a figure drawn in another process (papermill, nbval) has the same colours."""
    colour = figure_style.colour("a method nobody named")
    assert colour in figure_style.PALETTE
    code = "from paperlib.compendium import figure_style; print(figure_style.colour('a method nobody named'))"
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip()
        assert out == colour


def test_every_ptb_micmco_figure_of_the_thesis_is_drawn_in_exactly_one_image():
    from paperlib.experiments.micmco.ptb.micmco_ptb import FIGURES

    drawn = [fig for _, rows in figure_style.MICMCO_PTB_GROUPS.values() for row in rows for fig in row]
    assert sorted(drawn) == sorted(FIGURES) and len(drawn) == len(set(drawn))
    assert figure_style.micmco_ptb_figure_file("5.24") == "figures/micmco_ptb_equal_compute.png"
    try:
        figure_style.micmco_ptb_figure_file("5.99")
    except KeyError as err:
        assert "5.99" in str(err)
    else:
        raise AssertionError("an unknown figure must be an error")


def test_a_ladder_title_leads_with_the_verdict_the_index_gives_and_keeps_the_reading():
    assert figure_style.ladder_title("no trend", "not reproduced") == "not reproduced (no trend)"
    assert figure_style.ladder_title("trend against", "not reproduced") == \
        "not reproduced (trend against the claim)"
    assert figure_style.ladder_title("reproduced", "reproduced") == "reproduced"  # said once
    assert figure_style.ladder_title("no trend") == "no trend" and figure_style.ladder_title(None) == "not judged"
    # with no trend the verdict is the top rung's direction alone; its place against its margin is said beside it
    assert figure_style.ladder_title("no trend", "not reproduced", (-0.01, 0.12)) == \
        "not reproduced (no trend; top rung the other way, inside its margin)"
    assert figure_style.ladder_title("no trend", "within noise", (0.05, 0.02)) == \
        "within noise (no trend; top rung the paper's way, beyond its margin)"
    assert figure_style.ladder_title("trend against", "not reproduced", (-0.01, 0.12)) == \
        "not reproduced (trend against the claim)"  # a trend is read from all rungs: no top-rung note
