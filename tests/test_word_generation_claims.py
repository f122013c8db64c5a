"""Schmidt & Hofmann's claims (paperlib.experiments.word_generation.claims) as they read §5.3-§5.4, on constructed
results, on the paper's own numbers and on the committed results, and the index rows that show them."""

import json
import math
import re

import pytest

from paperlib.experiments.common.claims import Unjudged
from paperlib.experiments.word_generation.claims import (LONGER_ORDERS, SHORTER_ORDERS, figure2_claim, free_positions,
                                                         ladder_reading, position_ends, position_spreads,
                                                         table1_claim, table2_claim, table3_claim)
from paperlib.reference.word_generation import PAPER_NGRAM_ORDERS, PAPER_TABLE1, PAPER_TABLE2
from tests.conftest import REPO

DSSM, GRU = "2xTRIL, K=10", "BASELINE-8D"


def _committed(name):
    path = REPO / "results" / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"results/{name}.json not present")
    return json.loads(path.read_text())


def _rendered(item):
    from paperlib.compendium import results_index as ri

    row = ri.ROWS[item]
    return row, row.render(ri.load_results(REPO))


# -- S-T2: Table 2 and §5.3's reading of it ------------------------------------------------------------------------


def _paper_table2(h_std=0.05, ppl_std=0.1):
    """The paper's Tables 1 and 2 as our results files hold them, with a spread of our choosing (3 seeds)."""
    def row(model, h_test, full, test):
        found = {"model": model, "H_test": h_test, "H_test_std": h_std, "seeds": 3, "unstable": 0}
        for source, values in (("full", full), ("test", test)):
            for n, value in zip(PAPER_NGRAM_ORDERS, values):
                found[f"ppl_{source}_{n}"], found[f"ppl_{source}_{n}_std"] = value, ppl_std
        return found

    return {"table1": [{"model": m, "H_test": PAPER_TABLE1[m]["H_test"][0], "H_test_std": h_std, "seeds": 3,
                        "unstable": 0} for m in (DSSM, GRU)],
            "table2": [row(m, PAPER_TABLE2[m]["H_test"], PAPER_TABLE2[m]["full"], PAPER_TABLE2[m]["test"])
                       for m in (DSSM, GRU)]}


def test_the_papers_table_2_reads_as_section_5_3_reads_it():
    """§5.3: "generalization for the alternative split is indeed harder but cross entropy results carry over ...
    a slight advantage of the baseline on longer n-grams and slightly better generalization of our proposed model":
    the orders the claim reads are those where the paper's own numbers show it, and with little spread every part
    of it holds on them."""
    for n in LONGER_ORDERS:
        assert all(PAPER_TABLE2[GRU][s][PAPER_NGRAM_ORDERS.index(n)] < PAPER_TABLE2[DSSM][s][PAPER_NGRAM_ORDERS.index(n)]
                   for s in ("full", "test"))
    for n in SHORTER_ORDERS:
        i = PAPER_NGRAM_ORDERS.index(n)
        assert PAPER_TABLE2[DSSM]["test"][i] < PAPER_TABLE2[GRU]["test"][i]
    claim = table2_claim(_paper_table2())
    assert {p.label: p.verdict for p in claim.parts} == {
        "generalization is harder": "reproduced", "the DSSM's lead carries over to unseen types": "reproduced",
        "GRU slightly ahead on longer n-grams": "reproduced", "DSSM generalizes slightly better": "reproduced"}
    harder = claim.parts[0].evidence
    assert "2xTRIL, K=10 12.27 nats on the alternative split vs 11.38 on the standard split" in harder
    # a spread of 1.0 per perplexity (margin 1.63) swallows the paper's slight n-gram differences (0.6-1.4) except the
    # train+test ones at orders 4 and 5 (3.4, 5.9)
    loose = {p.label: p.verdict for p in table2_claim(_paper_table2(ppl_std=1.0)).parts}
    assert loose["GRU slightly ahead on longer n-grams"] == "partly reproduced"
    assert loose["DSSM generalizes slightly better"] == "within noise"
    # the result that carries over is the paper's: the DSSM's lead, on the alternative split; our standard split's
    # order is shown beside it, and a GRU lead on both splits does not count as the DSSM's lead carrying over
    swapped = _paper_table2()
    for table in ("table1", "table2"):
        rows = {r["model"]: r for r in swapped[table]}
        rows[DSSM]["H_test"], rows[GRU]["H_test"] = rows[GRU]["H_test"], rows[DSSM]["H_test"]
    carried = "the DSSM's lead carries over to unseen types"
    part = next(p for p in table2_claim(swapped).parts if p.label == carried)
    assert part.verdict == "not reproduced" and "on our standard split" in part.evidence
    assert part.evidence.endswith(f"{GRU} ahead (S-T1 judges the standard split)")
    tied = _paper_table2(h_std=1.0)  # margin 1.63 swallows Table 2's 1.40 gap
    assert {p.label: p.verdict for p in table2_claim(tied).parts}[carried] == "within noise"
    main = _paper_table2()
    main["table1"] = []  # no standard-split rows: nothing to measure "harder" against
    assert "generalization is harder" not in {p.label for p in table2_claim(main).parts}
    for row in main["table2"]:
        row["H_test"] = None
        for key in [k for k in row if k.startswith("ppl_")]:
            row[key] = None
    with pytest.raises(Unjudged, match="S-T2"):
        table2_claim(main)


def test_committed_table_2_judges_all_three_statements_of_section_5_3():
    """On the committed results S-T2 reads "partly": both models generalize worse on the alternative split (DSSM
    16.74 ± 0.12 vs 13.84 ± 0.20, GRU 14.82 ± 0.11 vs 11.82 ± 0.02), the DSSM's lead does not carry over (the GRU
    is ahead on both splits, the reverse of the paper's order); neither n-gram statement is judged: both models'
    generated words are still far from the data (train+test P5 643.8 and 1,155.5 against the training oracle's 3.9),
    and the test-only cells score the same words."""
    claim = table2_claim(_committed("word_generation"))
    assert {p.label: p.verdict for p in claim.parts} == {
        "generalization is harder": "reproduced", "the DSSM's lead carries over to unseen types": "not reproduced"}
    assert claim.verdict == "partly"
    assert claim.not_run == ("GRU slightly ahead on longer n-grams (at this budget the generated words are far from "
                             "the data: train+test P5 2xTRIL K=10 643.8, GRU 8D 1,155.5, training oracle 3.9 (paper "
                             "30.7, 24.8, 4.1): its train+test cells compare models still far from generating words "
                             "like the data, a defect of the budget more than a finding)",
                             "DSSM generalizes slightly better (its test-only cells score the same generated words, "
                             "as far from the data)")


def test_the_t2_row_prints_table_2_in_full_and_discloses_the_n_gram_setup():
    row, rendered = _rendered("S-T2")
    for model, name in ((DSSM, "2xTRIL K=10"), (GRU, "GRU 8D")):
        paper = PAPER_TABLE2[model]
        assert (f"{name}: H_train {paper['H_train']:.2f}, H_test {paper['H_test']:.2f}, train+test P2–P5 "
                + " / ".join(f"{v:.1f}" for v in paper["full"])) in row.paper
    assert "test oracle: train+test P2–P5 9.5 / 6.0 / 4.5 / 3.9" in row.paper
    assert "2xTRIL, K=10: H_train 13.58 ± 0.19, H_test 16.74 ± 0.12, train+test P2–P5 10.4 ± 1.8" in rendered["ours"]
    assert "ORACLE-TRAIN: H_train 6.91, H_test ∞" in rendered["ours"]
    assert "1,000 generated words per run" in rendered["scale"] and "2,000 test-only types" in rendered["scale"]
    main = _committed("word_generation")
    split = main["data"]["splits"]["types"]
    assert (f"each type weighted by its token count in the virtual corpus "
            f"({split['train_tokens'] + split['test_tokens']:,} and {split['test_tokens']:,} tokens)") in rendered["scale"]
    oracle = next(r for r in main["table2"] if r["model"] == "ORACLE-TRAIN")
    assert (f"the training oracle, whose words are no test type, has test-only P5 {oracle['ppl_test_5']:,.1f} against "
            f"the paper's {PAPER_TABLE2['ORACLE-TRAIN']['test'][-1]:.1f}") in rendered["scale"]


def test_witten_bell_fitted_on_token_counts_leaves_unseen_letter_sequences_almost_no_probability():
    """What the S-T2 scale names as the cause of our large n-gram perplexities: the same types fitted with token
    counts in the millions instead of once each give words outside them a far higher perplexity, the more so the
    higher the order; the fitted types themselves are not penalised."""
    from paperlib.word_metrics import char_ngram_perplexity, fit_char_ngram

    fitted = ["stone", "storm", "strand", "beaten", "broken", "garden", "harden", "market", "winter", "tender"]
    unseen = ["starting", "brand", "wander", "market", "stormed", "bitten"]
    ratios = []
    for order in (2, 5):
        once = char_ngram_perplexity(fit_char_ngram(fitted, order), unseen)
        counted = char_ngram_perplexity(fit_char_ngram(fitted, order, [2e6] * len(fitted)), unseen)
        ratios.append(counted / once)
    assert ratios[0] > 1 and ratios[1] > 10 * ratios[0]
    assert char_ngram_perplexity(fit_char_ngram(fitted, 5, [2e6] * len(fitted)), fitted) < \
        char_ngram_perplexity(fit_char_ngram(fitted, 5), fitted)


# -- S-F2: I(t) decays, yet with increased variance ----------------------------------------------------------------


def _fig2(per_seed):
    """Per seed two trajectories over 6 positions, with mean I(t) flat at first then at last, apart by a at the first
    three positions and by b at the last three."""
    return {"figure2": {"runs": [{"I_t": [[f - a / 2] * 3 + [l - b / 2] * 3, [f + a / 2] * 3 + [l + b / 2] * 3]}
                                 for f, l, a, b in per_seed]}}


def test_the_spread_of_i_t_over_trajectories_is_judged_per_seed():
    # I(t) falls from 0.5 to 0.3; the two trajectories differ by 0.02 at the start and by 0.4 at the end
    growing = _fig2([(0.5, 0.3, 0.02, 0.4), (0.52, 0.31, 0.03, 0.38), (0.49, 0.3, 0.01, 0.42)])
    claim = figure2_claim(growing)
    assert [(p.label, p.verdict) for p in claim.parts] == [("I(t) decays along the word", "reproduced"),
                                                           ("the spread of I(t) grows", "reproduced")]
    assert "over 2 trajectories" in claim.parts[1].evidence and claim.verdict == "reproduced"
    shrinking = _fig2([(0.5, 0.3, 0.4, 0.02), (0.52, 0.31, 0.38, 0.03), (0.49, 0.3, 0.42, 0.01)])
    assert figure2_claim(shrinking).parts[1].verdict == "not reproduced"
    one = {"figure2": {"runs": [{"I_t": [[0.5] * 3 + [0.3] * 3]}] * 2}}
    assert figure2_claim(one).not_run == ("the spread of I(t) (one trajectory per seed)",)


def test_committed_figure_2_judges_the_increased_variance():
    """The quoted sentence ends "yet with increased variance": on the committed runs (200 trajectories × 13
    positions per seed, the 13th left out: there the word must end) the spread grows from about 0.10 over t = 1..3
    to 0.17 nats over t = 10..12, beyond its seed margin, so S-F2 reads "partly" (the decay itself is within noise)."""
    main = _committed("word_generation")
    claim = figure2_claim(main)
    assert [(p.label, p.verdict) for p in claim.parts] == [("I(t) decays along the word", "within noise"),
                                                           ("the spread of I(t) grows", "reproduced")]
    assert claim.verdict == "partly"
    _, rendered = _rendered("S-F2")
    assert "its standard deviation over the trajectories 0.100 vs 0.174" in rendered["ours"]
    assert "I(10..12) 0.35" in rendered["ours"] and all("position 13 is left out" in p.evidence for p in claim.parts)


def test_figure_2_leaves_out_the_last_position_where_the_word_must_end():
    """Two positions per trajectory plus the forced last one: the ends are the two free positions' (first three and
    last three of two are both), whatever the estimate at the forced position reads."""
    main = {"figure2": {"model": "m", "runs": [{"seed": s, "I_t": [[0.5, 0.1, 9.0], [0.7, 0.3, 9.0]]} for s in (0, 1)]}}
    assert free_positions(main) == 2
    assert position_ends(main) == [(pytest.approx(0.4), pytest.approx(0.4))] * 2
    assert position_spreads(main)[0] == (pytest.approx(0.14142, abs=1e-4), pytest.approx(0.14142, abs=1e-4))


# -- S-T1: the ladder's reading, the not-run parts, diminishing returns ---------------------------------------------


def _ladder(first_gap, top_gap, check, fall=-0.1, margin=0.05):
    rungs = [{"steps": s, "gap": g, "se": 0.05, "margin": 0.1,
              "models": {"dssm": {"row": DSSM, "H_test": h, "fall": fall, "margin": margin, "converged": fall <= margin},
                         "baseline": {"row": GRU, "fall": 0.2, "margin": 0.05, "converged": False}}}
             for s, g, h in ((500, first_gap, 14.4), (8000, top_gap, 13.72))]
    return {"reading": "trend against", "rungs": rungs, "paper": {"gap": 1.59}, "training": {"eval_samples": 500},
            "settings": {"dssm": DSSM, "baseline": GRU},
            "runs": [{"check": {"step": 8000, "eval_samples": 5000, "H_test": check}}] * 2}


def test_a_trend_no_larger_than_the_estimators_measured_bias_is_not_read():
    # change -0.4 against a bias of 13.72 - 12.93 = 0.79 measured at the top rung only: no trend readable
    reading, why = ladder_reading(_ladder(-1.83, -2.23, 12.93))
    assert reading == "no trend" and why.startswith("no trend readable") and "0.79 nats" in why
    # the same change against a bias of 0.1: the trend stands
    assert ladder_reading(_ladder(-1.83, -2.23, 13.62)) == ("trend against", "")
    main = {"table1": [], "scale": {"eval_samples": 500}}
    part = table1_claim(main, _ladder(-1.83, -2.23, 12.93)).parts[-1]
    assert part.verdict == "not reproduced"  # no trend: the top rung's comparison, the other way
    assert part.evidence.startswith("no trend readable") and "2xTRIL, K=10 rose rose" in part.evidence
    # a rise inside its margin is flat, a fall beyond it falling
    assert "2xTRIL, K=10 flat flat" in table1_claim(main, _ladder(-1.83, -2.23, 12.93, fall=-0.03)).parts[-1].evidence
    assert "2xTRIL, K=10 falling falling" in table1_claim(main, _ladder(-1.83, -2.23, 12.93, fall=0.1)).parts[-1].evidence


def test_committed_ladder_reads_no_trend_and_the_top_rung_dssm_rose():
    """At the committed ladder the gap moves -1.83 -> -2.23 (change -0.41, noise 0.20): read alone a trend against
    the paper, but eq. 12's bias of the DSSM estimate is 0.79 nats at the top rung and unmeasured below it; and the
    DSSM's H_test rose by 0.097 (margin 0.077) over the top rung's last quarter."""
    part = table1_claim(_committed("word_generation"), _committed("word_generation_ladder")).parts[-1]
    assert part.label == "ladder 2xTRIL, K=10 vs BASELINE-8D" and part.verdict == "not reproduced"
    assert part.evidence.startswith("no trend readable: the gap's change -0.41 nats")
    assert "2xTRIL, K=10 falling falling rose" in part.evidence


def test_table_1_names_what_it_does_not_judge_and_judges_diminishing_returns_where_k_ran():
    claim = table1_claim(_committed("word_generation"), _committed("word_generation_ladder"))
    note = claim.note
    assert "diminishing returns at K=10 (needs three values of K for one model; K = 1, 10 ran)" in note
    assert "BIDI inference on par with the standard one (no BIDI row ran)" in note
    assert "d=32 2xTRIL K=10" in note and "REAL-NVP-[2,3,4,5,6,7]" in note and "TRIL K=5" in note
    assert "d=16 2xTRIL K=10" not in note  # it ran

    def rows(std):
        return {"table1": [{"model": m, "H_test": PAPER_TABLE1[m]["H_test"][0], "H_test_std": std, "seeds": 3,
                            "unstable": 0} for m in ("TRIL", "TRIL, K=2", "TRIL, K=5", "TRIL, K=10")]}

    # the paper's TRIL: gains 0.31 (K=2 -> 5) and 0.04 (K=5 -> 10), margin 2 sqrt(6 s² / 3)
    parts = {p.label: p for p in table1_claim(rows(0.05), None).parts}
    assert parts["diminishing returns at K=10"].verdict == "reproduced"
    assert "TRIL: gain K=2→5 +0.31, K=5→10 +0.04 nats, margin 0.14" in parts["diminishing returns at K=10"].evidence
    assert {p.label: p.verdict for p in table1_claim(rows(0.2), None).parts}["diminishing returns at K=10"] == \
        "within noise"
    assert not any("diminishing" in n for n in table1_claim(rows(0.05), None).not_run)


def test_the_best_dssm_against_the_best_gru_also_reads_the_abstracts_on_par():
    """Table 1's rows put the DSSM ahead; the abstract only says "on par", which fails only where the GRU is better
    beyond the margin (here 2 sqrt(2 · 0.05² / 3) = 0.082 nats)."""
    def claim(gru_h):
        rows = [{"model": m, "H_test": h, "H_test_std": 0.05, "seeds": 3, "unstable": 0}
                for m, h in ((DSSM, 12.0), (GRU, gru_h))]
        return {p.label: p for p in table1_claim({"table1": rows}, None).parts}["best DSSM beats the best GRU"]

    ahead, level, behind = claim(12.5), claim(11.95), claim(11.5)
    assert ahead.verdict == "reproduced" and "the abstract's 'on par' holds" in ahead.evidence
    assert level.verdict == "not reproduced" and "the abstract's 'on par' holds" in level.evidence
    assert behind.verdict == "not reproduced" and "'on par' fails too" in behind.evidence
    assert "the abstract says the weaker 'on par'" in ahead.claim


def test_the_t1_row_shows_every_paper_number_it_compares():
    row, rendered = _rendered("S-T1")
    assert "d=16 2xTRIL K=10 11.43" in row.paper
    assert "w ∈ V: TRIL 0.43" in row.paper and "w ∈ V (share of generated words in the vocabulary): TRIL 0.21" in \
        rendered["ours"]  # the data-space column, which the paper leans on, beside ours
    assert ("our standard split draws its training and test tokens from one word-frequency list, so every row's "
            "H_train and H_test agree within 0.001 nats (the paper's differ by up to 0.22)") in rendered["scale"]


def test_the_longer_n_gram_part_is_not_run_while_the_generated_words_are_far_from_the_data():
    _, rendered = _rendered("S-T2")
    note = ("at this budget the generated words are far from the data: train+test P5 2xTRIL K=10 643.8, GRU 8D "
            "1,155.5, training oracle 3.9 (paper 30.7, 24.8, 4.1): its train+test cells compare models still far "
            "from generating words like the data, a defect of the budget more than a finding")
    # said once, where the longer n-grams' part is named as not run; not on the test-only part (the token weighting
    # shapes those cells besides), nor the cross entropies
    assert rendered["verdict"].count(note) == 1
    assert f"not run: GRU slightly ahead on longer n-grams ({note})" in rendered["verdict"]


# -- S-T3, S-F1, S-F3 and the scale of every S row -----------------------------------------------------------------


def test_the_t3_row_reads_the_papers_unstable_cells_from_its_table_and_shows_table_3b():
    row, rendered = _rendered("S-T3")
    unstable = re.search(r"unstable \(the paper's bar\): ([^;]*);", row.paper).group(1).split(", ")
    assert "TRIL×TRIL" in unstable and "2xTRIL×ID" in unstable
    assert "DIAG×TRIL" not in unstable and "ID×TRIL" not in unstable  # TRIL inference trained under ID and DIAG
    assert "TRIL inference unstable" not in row.paper
    assert "Ī: ID×ID 0.00" in row.paper and "DIAG×TRIL 0.92" in row.paper and "TRIL×ID 0.65" in row.paper
    assert "; Ī: ID×ID 0.07" in rendered["ours"] and "2xTRIL×DIAG 0.20" in rendered["ours"]
    assert "a DIAG×TRIL cell" in table3_claim(_committed("word_generation")).note


def test_the_f1_row_says_its_range_leaves_out_id_flows():
    row, _ = _rendered("S-F1")
    assert "0.85 and 1.43 for the trained DSSMs of Tables 1 and 3b without an ID flow" in row.paper
    assert "TRIL×ID 0.65" in row.paper


def test_the_f1_row_judges_noise_use_against_each_models_own_start_not_a_fixed_level():
    """Each trained DSSM against its own runs before training (step 0), paired by seed: TRIL's Ī rose by 0.021
    from 0.153, beyond twice the standard error of the mean gain; the header does not define noise use by a fixed
    level. "All trained models" are those the paper's range is drawn from: Table 1's DSSMs and Table 3's cells
    without an ID flow, each once (TRIL×DIAG is Table 1's TRIL), so DIAG×DIAG, whose Ī fell, is judged too."""
    from paperlib.compendium.results_index.render import render_definitions
    from paperlib.experiments.word_generation.noise_claims import figure1_claim, noise_gains, trained_dssms

    main = _committed("word_generation")
    part = figure1_claim(main).parts[0]
    gains = noise_gains(main)
    assert part.label == "every DSSM uses its noise (Ī above its own at initialisation)" and part.kind == "seed margin"
    table1 = [r["model"] for r in main["table1"] if r.get("I_bar") is not None]
    judged = [*table1, "DIAG×DIAG"]
    assert [m["model"] for m in trained_dssms(main)] == judged and list(gains) == judged
    tril = gains["TRIL"]
    assert tril["seeds"] == 3 and tril["start"] != gains["2xTRIL"]["start"]  # its own start, not another model's
    assert f"TRIL {tril['start']:.3f} → {tril['end']:.3f} ({tril['gain']:+.3f}, margin {tril['margin']:.3f}" \
        in part.evidence
    assert all(gains[m]["gain"] > gains[m]["margin"] for m in table1)  # every Table 1 DSSM's Ī rose beyond its margin
    diag = gains["DIAG×DIAG"]
    assert diag["seeds"] == 3 and diag["gain"] < -diag["margin"] and part.verdict == "partly reproduced"
    assert "DIAG×DIAG 0.10" in figure1_claim(main).parts[1].evidence
    _, rendered = _rendered("S-F1")
    assert f"before training (step 0) TRIL {tril['start']:.2f}" in rendered["ours"]
    # Ī still rising on the ladder, but its top rung below the paper's range: the cause is left open
    assert ("the budget may explain the shortfall, but the ladder does not show it closing (its top rung still below "
            "the range's lowest, 0.85)") in rendered["verdict"]
    assert "a defect of the budget, not a finding" not in rendered["verdict"]
    assert "(S-F1) when Ī >" not in "\n".join(render_definitions())


def test_the_f3_row_shows_the_seed_means_its_evidence_judges():
    _, rendered = _rendered("S-F3")
    assert "from 3.09 to 1.50 nats over training and Ī from 0.17 to 0.38 (means over 3 seed(s))" in rendered["ours"]


def test_every_s_row_says_its_models_were_not_trained_to_convergence_and_names_its_results():
    for item in ("S-T1", "S-T2", "S-T3", "S-F1", "S-F2", "S-F3"):
        row, rendered = _rendered(item)
        assert ("not trained to convergence: on the budget ladder's 2,000-step rung H_test was still falling over the "
                "last quarter for BASELINE-8D") in rendered["scale"], item
        assert "Ī still rising, 0.38 at 2,000 steps to 0.66 at 8,000" in rendered["scale"], item
        assert (f"ours ln 20,000 = {math.log(20000):.2f} nats, the trained rows (DSSMs 13.64–14.45; GRUs 10.93–11.82) "
                "every one above it; the paper's ln 143,000 = 11.87, its same DSSM rows 11.38–11.99, 3 of 4 below "
                "it") in rendered["scale"], item
        assert "`results/word_generation.json`" in row.file and "`results/word_generation_ladder.json`" in row.file


# -- diagram rows --------------------------------------------------------------------------------------------------


def test_diagram_rows_name_code_that_exists_or_say_it_does_not():
    import paperlib.averaging

    row, _ = _rendered("M-F3.2")
    named = re.findall(r"`(TwoTailed\w*)`", row.verdict)
    assert named and all(hasattr(paperlib.averaging, name) for name in named)
    for item, missing in (("K-F2.2", "no vanilla tanh RNN"), ("K-F2.5", "recurrent depth")):
        row, rendered = _rendered(item)
        assert rendered["status"] == "diagram" and missing in rendered["verdict"] and "not implemented" in \
            rendered["verdict"] and "implemented in" not in rendered["verdict"], item


def test_budget_notes_travel_with_the_claims_so_notebook_and_index_show_the_same_evidence():
    """S-F1's range part says the shortfall is the budget's only where the budget ladder finds the DSSM's Ī still
    rising beyond its seed margin; S-T2's longer n-grams are named as not run, saying how far the generated words are
    from the data, when that is more than twice the paper's distance. On the committed results both apply; with the
    top rung's Ī set back to the main stage's rung, the S-F1 note goes; with words as near the oracle as the paper's,
    the n-gram part is judged."""
    import copy

    from paperlib.experiments.word_generation.budget_notes import i_bar_growth
    from paperlib.experiments.word_generation.noise_claims import figure1_claim

    main, ladder = _committed("word_generation"), _committed("word_generation_ladder")
    growth = i_bar_growth(main, ladder)
    assert growth is not None, "the committed ladder finds the DSSM's Ī rising (the index says so)"
    assert growth["end"] > growth["start"] and growth["steps"] == main["scale"]["steps"] < growth["top"]
    noted = figure1_claim(main, ladder)
    rising = [p for p in noted.parts if "still rising with training on the budget ladder" in p.evidence]
    assert len(rising) == 1 and rising[0].label.startswith("Ī in the paper's range"), noted.parts
    assert rising[0].verdict != "reproduced"
    assert f"{growth['start']:.2f} at {growth['steps']:,} steps to {growth['end']:.2f}" in rising[0].evidence
    assert all("still rising" not in p.evidence for p in figure1_claim(main).parts)  # no ladder, no note
    flat = copy.deepcopy(ladder)
    for run in flat["runs"]:
        scores = {s["step"]: s for s in run["scores"]}
        if run["row"] == growth["model"]:
            scores[growth["top"]]["I_bar"] = scores[growth["steps"]]["I_bar"]
    assert i_bar_growth(main, flat) is None
    assert all("still rising" not in p.evidence for p in figure1_claim(main, flat).parts)
    assert not any("far from the data" in part.evidence for part in table2_claim(main).parts)
    assert [n for n in table2_claim(main).not_run if "the generated words are far from the data" in n]
    close = copy.deepcopy(main)  # generated words as near their oracle as the paper's: the part is judged
    for row in close["table2"]:
        if row["model"] in ("2xTRIL, K=10", "BASELINE-8D"):
            row["ppl_full_5"] = 8 * [r for r in close["table2"] if r["model"] == "ORACLE-TRAIN"][0]["ppl_full_5"]
    judged = table2_claim(close)
    assert "GRU slightly ahead on longer n-grams" in {p.label for p in judged.parts} and not judged.not_run
