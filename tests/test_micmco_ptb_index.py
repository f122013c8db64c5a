"""The PTB MICMCO rows of the results index (paperlib.compendium.results_index.micmco_ptb) on the committed results:
the scale every row shares states ours beside the thesis' and what each kind of curve is scored on, read from the
results; the thesis' Table 5.1 shows its NLLs and KLs beside its perplexities; a curve with diverged trials says so
where its zero hypervolume is explained; a tie above every hypervolume compared shows in the reason. The claims
themselves are tested in tests/test_micmco_ptb_claims.py."""

import copy
import json

import pytest

from paperlib.compendium import results_index as ri
from tests.conftest import REPO


@pytest.fixture(scope="module")
def results():
    if not (REPO / "results" / "micmco_ptb.json").exists():
        pytest.skip("no committed micmco_ptb results")
    return {name: json.loads((REPO / "results" / f"{name}.json").read_text())
            for name in ("micmco_ptb", "micmco_ptb_ladder")}


@pytest.fixture(scope="module")
def with_levels(results):
    """The committed results with the unigram levels of their sentences (``paperlib levels micmco_ptb``)."""
    return {**results, "micmco_ptb_unigram": json.loads((REPO / "results" / "micmco_ptb_unigram.json").read_text())}


def test_the_scale_states_budget_subsets_and_ladder_beside_the_thesis_from_the_results(results):
    r = results["micmco_ptb"]
    data, st = r["data"], r["settings"]
    scale = ri.ROWS["M-F5.22"].render(results)["scale"]
    assert f"vocabulary {st['vocab_size']:,} (thesis 10,000)" in scale
    assert f"{st['steps']} steps × {st['batch_size']} sentences (thesis 40,000 steps; ours 6% of one pass over the " \
           f"{data['train_sentences']:,} training sentences)" in scale
    assert "tuned trials per curve from one seed" in scale
    assert f"training fit scored on {data['train_eval_sentences']} random training sentences of the " \
           f"{data['train_sentences']:,}" in scale
    assert f"validation on {data['valid_sentences']} random validation sentences of the 3,370" in scale
    assert f"each Table 5.1 cell the best-validation trial of a curve trained 2× as long ({2 * st['steps']} steps), " \
           f"tested on {data['test_sentences']} random test sentences of the 3,761 ({data['test_tokens']:,} tokens)" \
           in scale
    assert "the budget ladder (3 seeds, up to 1,200 steps, 8× this budget) finds 8 of the 9 curves it trains still " \
           "improving at its top rung" in scale
    assert scale.startswith(ri.ROWS["M-T5.1"].render(results)["scale"])  # one scale for every PTB row, then the box
    # read from the results, not written in: other numbers, another text
    other = copy.deepcopy(results)
    other["micmco_ptb"]["data"].update(test_tokens=5000, train_eval_sentences=200)
    other["micmco_ptb"]["settings"]["steps"] = 300
    scale = ri.ROWS["M-F5.22"].render(other)["scale"]
    assert "(5,000 tokens)" in scale and "training fit scored on 200 random" in scale
    assert "300 steps × 16 sentences" in scale and "4× this budget" in scale and "(600 steps)" in scale


def test_the_thesis_table_5_1_shows_nll_and_kl_beside_each_perplexity():
    paper = ri.ROWS["M-T5.1"].paper
    assert "hs 128: DReG 1 K/R 92.5 (NLL 4.527, KL 0.047)" in paper
    assert "VIMCO 16 R 83.1 (NLL 4.420, KL 0.094)" in paper
    assert ri.ROWS["M-T5.1"].paper_short.startswith("test ppl, 1 / best 16 samples: hs 128 DReG 92.5 / 91.6")


def test_a_curve_with_diverged_trials_is_named_where_its_zero_hypervolume_is_explained(results):
    rendered = ri.ROWS["M-F5.22"].render(results)
    assert "every finite trial of DReG 16/1 K/R is worse than the reference (its lowest NLL 4.493); 4 of its 6 " \
           "trials diverged (trials 1, 3, 4, 5)" in rendered["ours"]
    assert "4 of DReG 16/1 K/R's 6 trials diverged (trials 1, 3, 4, 5): its comparisons rest on the other 2" in \
        rendered["verdict"]
    assert "not a failed computation" not in rendered["verdict"]


def test_a_tie_above_every_hypervolume_compared_shows_in_the_row(results):
    rendered = ri.ROWS["M-F5.22"].render(results)
    assert rendered["status"] == "within noise" and rendered["reason"].endswith("(every HV below the tie)")
    assert "below the 0.02 tie itself" in ri.ROWS["M-F5.28"].render(results)["verdict"]


@pytest.mark.parametrize("item,status", [("M-F5.10", "not reproduced"), ("M-F5.11", "within noise"),
                                         ("M-F5.13", "partly"), ("M-F5.24", "partly"), ("M-F5.14", "not attempted"),
                                         ("M-F5.25", "not attempted"), ("M-T5.1", "partly")])
def test_the_rows_read_the_claims_as_judged_here(results, item, status):
    assert ri.ROWS[item].render(results)["status"] == status


def test_a_reading_that_cannot_be_tested_at_this_scale_is_named_as_not_run_in_the_row(results):
    """M-F5.10: "no DReG gain" (every hypervolume below the tie) and the VIMCO gain against a training-fit gain that
    is itself inside the tie are named as not run, not counted as holding; the row reads on the two judged parts."""
    verdict = ri.ROWS["M-F5.10"].render(results)["verdict"]
    assert verdict.startswith("not reproduced: with naive dropout, 16 samples improve discrete latents: within noise")
    assert verdict.endswith("not run: with naive dropout, 16 samples bring continuous latents no gain (cannot be "
                            "tested at this scale: every hypervolume below the tie), with naive dropout, the discrete "
                            "latents' gain is far below their training-fit gain (no training-fit gain large enough to "
                            "compare with: 50% of it must exceed the tie)")
    assert "so this reading cannot fail" not in verdict


def test_the_dropout_ladder_reads_as_the_shared_mask_reading_of_the_sentence(results):
    """Named so whether it is judged (runs that complete passes over the training data) or not (ours: the top rung
    saw 46% of one pass, where no run can overfit)."""
    assert ri.micmco_ptb._PTB_LADDER_SUBJECTS["5.11-dropout"] == "shared-mask dropout vs L2"
    label = "ladder: shared-mask dropout reaches a lower best NLL than L2 (DReG 16 Rényi, validation)"
    assert f"{label} — cannot be tested at this scale" in ri.ROWS["M-F5.11"].render(results)["verdict"]
    other = copy.deepcopy(results)
    other["micmco_ptb_ladder"]["data"]["train_sentences"] = 1000
    verdict = ri.ROWS["M-F5.11"].render(other)["verdict"]
    assert label in verdict and f"{label} — cannot be tested" not in verdict
    # the row's reason says which: a ladder that cannot be tested is not one that cannot fail
    assert "ladder shared-mask dropout vs L2: cannot be tested" in ri.micmco_ptb._ptb_ladder_reason(results, "M-F5.11")
    assert "ladder shared-mask dropout vs L2: cannot" not in ri.micmco_ptb._ptb_ladder_reason(other, "M-F5.11")


def _diverge(curve):
    for trial in curve["trials"]:
        trial.update(state="FAIL", diverged=True, nll=None, kl=None, elbo_nll=None)


def test_a_figure_whose_claims_cannot_be_tested_reads_not_attempted_with_the_reasons(results):
    """Fig. 5.10 with its VIMCO curves not run and every DReG hypervolume below the tie: nothing can be judged, so the
    row reads not attempted and says why, instead of a verdict word."""
    other = copy.deepcopy(results)
    curves = other["micmco_ptb"]["curves"]
    for name in [n for n in curves if n.startswith("vimco")]:
        del curves[name]
    row = ri.ROWS["M-F5.10"].render(other)
    assert row["status"] == "not attempted", row["verdict"]
    assert "cannot be tested at this scale" in row["verdict"] and "its curves did not run" in row["verdict"]


def test_curves_whose_every_trial_diverged_leave_their_comparisons_unjudged_without_failing(results):
    """A curve with no finite trial has nothing to compare: the claims that need it are named as not run (their
    curves did not run), and the row renders."""
    other = copy.deepcopy(results)
    curves = other["micmco_ptb"]["curves"]
    for name in ("vimco16_kl.naive", "vimco16_kl.l2", "vimco1.train.bs16", "dreg16_renyi.train"):
        _diverge(curves[name])
    for fig in ("5.8", "5.10", "5.11", "5.13"):
        row = ri.ROWS[f"M-F{fig}"].render(other)
        assert row["status"] in ri.VERDICTS and not row["verdict"].startswith("pending"), (fig, row["verdict"])


def test_a_smaller_validation_gain_needs_room_below_the_tie_to_be_judged():
    """"Far below the training-fit gain" cuts the training gain in half: judged only when that half clears the tie."""
    from paperlib.experiments.micmco.ptb.claims import SMALLER_GAIN, UNTESTABLE, Comparison
    from paperlib.experiments.micmco.ptb.comparisons import SMALLER_SHARE, hv_tie

    def why(train):
        return UNTESTABLE[SMALLER_GAIN](Comparison("kl", "", False, 0.0, {"training gain": train}))

    assert why(0.03) is not None and why(-0.1) is not None  # 0.015 of a 0.03 gain is inside the 0.02 tie
    assert why(1.01 * hv_tie() / SMALLER_SHARE) is None


def test_a_figures_scale_says_how_far_its_trials_reach_into_its_hypervolume_box(results):
    """The most KL of a trial below the figure's reference NLL bounds every normalised hypervolume of the figure
    (KL / the box's KL cap); a trial above the reference NLL, however high its KL, adds no area and is not counted."""
    other = copy.deepcopy(results)
    r = other["micmco_ptb"]
    figure = r["figures"]["5.8"]
    trials = r["curves"][figure["curves"][0]]["trials"]
    trials[0].update(nll=figure["reference_nll"] - 0.01, kl=1.0)
    trials[1].update(nll=figure["reference_nll"] + 0.01, kl=1.5)
    scale = ri.ROWS["M-F5.8"].render(other)["scale"]
    assert scale.endswith("on this figure's common box (the hypervolumes under Ours) its trials reach at most KL "
                          "1.000 nats per token of the box's 2.0, so none of those hypervolumes can exceed 0.500, "
                          "against the 0.02 tie")
    assert "at most KL 1.000" not in ri.ROWS["M-F5.9"].render(other)["scale"]  # another figure, its own box


def test_a_figure_whose_claims_cannot_be_tested_keeps_its_numbers_and_scale(results, with_levels):
    """M-F5.14: its sentence on generalisation needs runs that completed a pass, its sentence on the single-sample
    runs a VIMCO 1 past the unigram level; the row is not attempted, with why, and still shows the hypervolumes that
    ran and the scale they ran at."""
    rendered = ri.ROWS["M-F5.14"].render(with_levels)
    assert rendered["status"] == "not attempted" and "saw 91% of one pass" in rendered["verdict"]
    assert "VIMCO 1 K/R (validation, shared masks) at lowest NLL 3.943 (unigram 3.941)" in rendered["verdict"]
    assert rendered["reason"] == ("ran, but its sentences need runs past one pass over the training data (ours: at "
                                  "most 91%) and curves past word frequencies")
    assert ri.ROWS["M-F5.14"].render(results)["reason"] == ("ran, but its sentences need runs past one pass over the "
                                                            "training data (ours: at most 91%)")
    assert "VIMCO 1 K/R T×16 0.037" in rendered["ours"] and "6% of one pass" in rendered["scale"]


def test_a_claim_set_aside_at_the_unigram_level_is_named_in_the_reason(with_levels):
    """M-F5.13: the tradeoff compares VIMCO 16's frontier point 0.7 nats above the unigram level; with the levels the
    row's reason names it as not run beside the best fit that holds, and the details name the point."""
    rendered = ri.ROWS["M-F5.13"].render(with_levels)
    assert rendered["reason"] == ("16x compute's best fit: both hold; 16x compute's tradeoff: not run (a curve at word "
                                  "frequencies)")
    assert "VIMCO 16 KL (training fit) at frontier NLL 4.629 at KL 0.132 (unigram 3.921)" in rendered["verdict"]
    assert ri.ROWS["M-F5.20"].render(with_levels)["status"] == "within noise"


def test_the_sample_split_reason_names_the_splits_it_judged_and_those_at_word_frequencies(with_levels):
    """Fig. 5.22 judges 16/16 against 1/16 only (DReG 16/1 is no better than word frequencies), Fig. 5.23 against
    16/1 only (VIMCO 1/16 likewise): each reason names what it judged, and the other split as not run."""
    dreg = ri.ROWS["M-F5.22"].render(with_levels)["reason"]
    vimco = ri.ROWS["M-F5.23"].render(with_levels)["reason"]
    assert dreg.startswith("16/16 vs 1/16: ") and "vs 16/1: not run" in dreg
    assert vimco.startswith("16/16 vs 16/1: both the other way by 0.042–0.044") and "vs 1/16: not run" in vimco


def test_the_scale_says_what_each_objective_searches_with_the_same_trials(results):
    scale = ri.ROWS["M-F5.28"].render(results)["scale"]
    assert ("each curve's trials search its objective's hyperparameters (Table 5.2): KL learning rate, λ; Rényi "
            "learning rate, λ, α; power learning rate, α; the same number of trials over more of them leaves that "
            "objective the less tuned (the regularised curves search their regulariser's too)") in scale


def test_the_robustness_and_power_rows_say_their_split_is_ours(results):
    """The thesis does not say which split Figs. 5.16-5.21 and 5.28-5.29 show, nor its batch size."""
    batch = ri.ROWS["M-F5.16"].render(results)["scale"]
    assert ("the thesis does not say which split Fig. 5.16 shows; ours: validation NLL with shared dropout masks, and "
            "its larger batch ×2 ours too") in batch
    assert "ours: the training fit" in ri.ROWS["M-F5.28"].render(results)["scale"]
    assert "does not say which split" not in ri.ROWS["M-F5.8"].render(results)["scale"]


def test_curves_with_few_trials_past_word_frequencies_are_counted():
    """Only curves with some, but fewer than half, of their trials below the unigram level by more than the tie are
    named: those with none are named as no better than word frequencies elsewhere, those with half or more stand on
    enough trials; a diverged trial (no NLL) counts as not past."""
    from paperlib.compendium.results_index.micmco_ptb_setup import trials_past

    def curve(label, nlls):
        return {"label": label, "trials": [{"nll": v} for v in nlls]}

    curves = {"few": curve("VIMCO 16 KL", [3.80, 3.95, 4.10, None, 5.0, 3.90]),
              "none": curve("VIMCO 1 K/R", [3.93, 3.95, 4.0]), "half": curve("DReG 16", [3.5, 3.6, 4.0, 4.1])}
    text = trials_past(curves, list(curves), level=3.92, tie=0.03)
    assert text.endswith(": VIMCO 16 KL 1 of 6")  # 3.90 is below 3.92 but not by more than the tie
    assert trials_past(curves, ["none", "half"], level=3.92, tie=0.03) == ""


def test_the_on_par_reading_on_a_narrower_kl_box_is_judged_on_the_whole_box_width(results):
    """Fig. 5.12's "on par up to KL 0.5" is read on a box cut at the KL both curves reach; its hypervolumes are
    normalised over that range for display, and judged as shares of the box of the whole KL width, which the tie is a
    share of: each reading gives both, the gap as that share, and the verdict that gap gives against the tie."""
    import re

    from paperlib.experiments.micmco.ptb.claims import ON_PAR, figure_claim
    from paperlib.experiments.micmco.ptb.comparisons import hv_tie

    claim = figure_claim(results["micmco_ptb"], results["micmco_ptb_ladder"], "5.12")
    whole = results["micmco_ptb"]["settings"]["kl_cap"]
    evidence = next((p.evidence for p in claim.parts if p.label == ON_PAR), "")
    found = re.findall(r"on KL 0 to ([0-9.]+) .*?HV VIMCO 16 ([0-9.]+) vs DReG 16 ([0-9.]+) \(normalised over "
                       r"this KL range, (\d+)% of the box's KL width to [0-9.]+; as shares of the whole box: VIMCO 16 "
                       r"([0-9.]+) vs DReG 16 ([0-9.]+): .*?\), \S+ 16 ahead by ([0-9.]+) as a share of the whole box, "
                       r"(within|beyond)", evidence)
    assert found
    for cap, x, y, share, x_whole, y_whole, gap, side in found:
        assert int(share) == round(100 * float(cap) / whole)
        for zoomed, there in ((x, x_whole), (y, y_whole)):
            assert float(there) == pytest.approx(float(zoomed) * float(cap) / whole, abs=2e-4)  # printed rounded
        assert float(gap) == pytest.approx(abs(float(x_whole) - float(y_whole)), abs=2e-4)
        assert (side == "within") == (float(gap) <= hv_tie())
