"""The LM comparison: summaries over seeds, the table beside the paper, the ordering verdict, stale runs."""

import json
import math

import pytest

from paperlib.experiments.common.claims import Unjudged
from paperlib.experiments.common.config import ParamsError, experiment_params, validate_params
from paperlib.experiments.language_models.claims import (
    NOT_ATTEMPTED, ablation_claim, against, compare_seed_means, ordering_claim, ordering_pairs,
)
from paperlib.experiments.language_models.lm_ptb import comparison_table, summarise
from paperlib.train import forget_stale_run
from tests.conftest import REPO


def run(model, seed, nll, params=1000):
    keys = ("valid_nll", "test_nll", "valid_nll_temp", "test_nll_temp", "valid_nll_mc", "test_nll_mc")
    return {"model": model, "seed": seed, "parameters": params, **{k: nll for k in keys}}


def test_summary_reports_perplexity_or_bpc_with_seed_spread():
    runs = [run("lstm", 1, 4.0), run("lstm", 2, 4.2), run("mogrifier_lstm", 1, 3.9)]
    word = summarise(runs, "word")
    assert word["lstm"]["test_ppl"] == pytest.approx((math.exp(4.0) + math.exp(4.2)) / 2)
    assert word["lstm"]["test_ppl_std"] == pytest.approx(abs(math.exp(4.0) - math.exp(4.2)) / math.sqrt(2))
    assert word["mogrifier_lstm"]["seeds"] == 1 and word["mogrifier_lstm"]["test_ppl_std"] == 0.0
    char = summarise([run("lstm", 1, math.log(2))], "char")
    assert char["lstm"]["valid_bpc"] == pytest.approx(1.0)


def test_each_table_claims_its_own_pairs_of_the_papers_ranking():
    runs = [run("lstm", s, 4.5 + 0.01 * s) for s in (1, 2)] + [run("mogrifier_lstm", s, 4.4) for s in (1, 2)] \
        + [run("mogrifier_rlstm", s, 4.45) for s in (1, 2)]
    results = {"experiment": "lm_ptb", "level": "word", "profile": "cpu", "summary": summarise(runs, "word")}
    assert [p["our gap"] > 0 for p in ordering_pairs(results)] == [True, False]
    # Table 2.1 claims the Mogrifier beats the LSTM, with and without MC dropout; Table 4.1 has no LSTM row: the
    # RLSTM beats the Mogrifier
    t21, t41 = ordering_claim(results, "M-T2.1"), ordering_claim(results, "M-T4.1")
    assert [p.label for p in t21.parts] == ["Mogrifier better than LSTM", "Mogrifier better than LSTM (MC dropout)"]
    assert [p.verdict for p in t21.parts] == ["reproduced", "reproduced"]
    assert t21.verdict == "partly"  # the WikiText-2 rows and the dyneval columns are not run
    assert [p.label for p in t41.parts] == ["Mogrifier RLSTM better than Mogrifier"]
    assert t41.verdict == "not reproduced"
    assert "thesis: 54.6 vs 51.0 ppl" in t21.parts[0].claim  # the paper's numbers joined by model and table
    assert "thesis: 54.1 vs 50.1 ppl, Table 2.1" in t21.parts[1].claim  # its MC rows'
    assert "thesis: 48.5 vs 47.9 ppl, Table 4.1" in t41.parts[0].claim
    with pytest.raises(ValueError, match="no ordering claim for 'M-T9.9'"):
        ordering_claim(results, "M-T9.9")
    table = comparison_table(results)
    assert ("mogrifier_rlstm", "paper (Melis T4.1, 24M params)") in table.index
    assert table.loc[("mogrifier_lstm", "paper (Melis T2.1, 24M params)"), "test"] == 51.0


def test_tables_4_1_and_4_2_name_the_chapter_4_mogrifier_as_not_run_or_judge_it_against_chapter_2s():
    """Table 4.1 / 4.2 also claim that ch. 4's setup beats ch. 2's Mogrifier (51.0 -> 48.5 ppl): without a model
    trained with that setup the part is named as not run, and the row cannot read plain "reproduced"."""
    def summary(models):
        return {m: {"test_ppl": v, "test_ppl_std": 0.5, "seeds": 3, "parameters": 1} for m, v in models.items()}

    plain = {"level": "word", "summary": summary({"lstm": 139.3, "mogrifier_lstm": 134.1, "mogrifier_rlstm": 128.7})}
    claim = ordering_claim(plain, "M-T4.1")
    assert [p.verdict for p in claim.parts] == ["reproduced"]
    assert claim.not_run == ("Mogrifier (ch. 4 setup) vs Mogrifier (the ch. 4 setup not trained)",
                             "the WikiText-2 rows", "the dynamic evaluation columns",
                             "the size of the lead ('by a small margin': shown, not judged)",
                             "'a new state of the art on both datasets' (against published models at 24M parameters "
                             "on PTB, 35M on WikiText-2)")
    assert claim.verdict == "partly"
    t21 = ordering_claim(plain, "M-T2.1").not_run
    assert not any("ch. 4" in entry for entry in t21)  # Table 2.1: no such claim
    assert "the size of the lead ('by 3–4 perplexity points': shown, not judged)" in t21
    both = {"level": "word", "summary": summary({"lstm": 139.3, "mogrifier_lstm": 134.1,
                                                 "mogrifier_lstm_ch4": 131.0, "mogrifier_rlstm": 128.7})}
    claim = ordering_claim(both, "M-T4.1")
    assert claim.parts[-1].label == "Mogrifier (ch. 4 setup) better than Mogrifier"
    assert [p.verdict for p in claim.parts] == ["reproduced", "reproduced"]
    assert claim.verdict == "partly"  # every judged part holds; the WikiText-2 rows and dyneval columns are not run
    assert "thesis: 51.0 vs 48.5 ppl, Tables 2.1 / 4.1" in claim.parts[-1].claim
    both["summary"]["mogrifier_lstm_ch4"]["test_ppl"] = 135.0
    assert ordering_claim(both, "M-T4.1").parts[-1].verdict == "not reproduced"


def test_an_ordering_part_is_within_noise_inside_the_margin_and_with_one_seed():
    def results(gap, std, seeds):
        summary = {m: {"test_bpc": v, "test_bpc_std": std, "seeds": seeds, "parameters": 1}
                   for m, v in (("lstm", 1.70 + gap), ("mogrifier_lstm", 1.70))}
        return {"level": "char", "summary": summary}

    # margin 2 sqrt(2 * 0.01^2 / 3) = 0.0163
    assert ordering_claim(results(0.02, 0.01, 3), "M-T2.2").parts[0].verdict == "reproduced"
    assert ordering_claim(results(0.01, 0.01, 3), "M-T2.2").parts[0].verdict == "within noise"
    assert ordering_claim(results(-0.01, 0.01, 3), "M-T2.2").parts[0].verdict == "not reproduced"
    one = ordering_claim(results(0.05, 0.0, 1), "M-T2.2").parts[0]
    assert one.verdict == "within noise" and "one seed, no margin" in one.evidence


def _committed(name):
    path = REPO / "results" / f"{name}.json"
    if not path.exists():
        pytest.skip(f"results/{name}.json not present")
    return json.loads(path.read_text())


def test_table_2_1_judges_its_mc_column_and_names_the_rows_and_columns_no_stage_runs():
    """§2.2.3: the Mogrifier is ahead "regardless of whether or not dynamic evaluation ... and Monte Carlo averaging
    are used". The MC column is measured, so it is judged (committed results: 5.4 ppl ahead, margin 1.3); the
    WikiText-2 rows and the dynamic evaluation columns are not run, so the row reads partly, not reproduced."""
    r = _committed("lm_ptb")
    claim = ordering_claim(r, "M-T2.1")
    mc = claim.parts[1]
    assert mc.label == "Mogrifier better than LSTM (MC dropout)" and mc.verdict == "reproduced"
    pair = compare_seed_means(r["summary"], "lstm", "mogrifier_lstm", "test_ppl_mc")
    assert pair["our gap"] == pytest.approx(5.43, abs=0.01) and pair["tie margin"] == pytest.approx(1.32, abs=0.01)
    assert f"{r['mc_samples']} dropout masks averaged (thesis: 200)" in mc.evidence
    assert claim.not_run == NOT_ATTEMPTED["M-T2.1"] and claim.verdict == "partly"
    t22 = ordering_claim(_committed("lm_ptb_char"), "M-T2.2")  # the same two columns at the character level
    assert [p.verdict for p in t22.parts] == ["not reproduced", "not reproduced"] and t22.verdict == "not reproduced"
    assert t22.not_run == NOT_ATTEMPTED["M-T2.2"]


def test_tables_4_1_and_4_2_judge_only_their_own_rows_on_the_committed_results():
    """Tables 4.1 / 4.2 have no plain LSTM row: their claims are the RLSTM over the Mogrifier and ch. 4's setup over
    ch. 2's (not trained here), with their other rows and the dyneval columns not run."""
    for name, item in (("lm_ptb", "M-T4.1"), ("lm_ptb_char", "M-T4.2")):
        claim = ordering_claim(_committed(name), item)
        assert [p.label for p in claim.parts] == ["Mogrifier RLSTM better than Mogrifier"], item
        assert claim.not_run[1:] == NOT_ATTEMPTED[item], item
    assert ordering_claim(_committed("lm_ptb"), "M-T4.1").verdict == "partly"
    assert ordering_claim(_committed("lm_ptb_char"), "M-T4.2").verdict == "not reproduced"  # inside the margin, the
    # other way


def test_ablation_parts_name_unmatched_parameter_counts():
    """Table 2.3 compares models of 24M parameters each; ours share H = 192, so the full-rank Mogrifier and the mLSTM
    have more parameters than what they are compared with, and their parts say so (the counts from the results)."""
    r = _committed("lm_ptb_ablation")
    s = r["summary"]
    parts = {p.label: p for p in ablation_claim(r).parts}
    best = min((n for n in s if n.startswith("mogrifier_r")), key=lambda n: s[n]["valid_ppl"])
    full = f"parameters {s['full_rank']['parameters'] / 1e6:.2f}M vs {s[best]['parameters'] / 1e6:.2f}M (not matched"
    assert full in parts["full rank close behind low rank"].evidence
    mlstm = f"parameters {s['mlstm']['parameters'] / 1e6:.2f}M vs {s['lstm']['parameters'] / 1e6:.2f}M (not matched"
    assert mlstm in parts["mLSTM no better than LSTM"].evidence
    assert "Table 2.3: 24M each" in parts["mLSTM no better than LSTM"].evidence
    assert (s["no_zigzag"]["parameters"] == s["mogrifier_r4"]["parameters"]) == (
        "parameters" not in parts["zigzag helps"].evidence)


def test_a_run_folder_made_with_other_settings_is_redone(tmp_path):
    run_dir = tmp_path / "lstm-seed1"
    forget_stale_run(run_dir, {"lr": 1})
    (run_dir / "done.json").write_text("{}")
    forget_stale_run(run_dir, {"lr": 1})
    assert (run_dir / "done.json").exists()
    forget_stale_run(run_dir, {"lr": 2})
    assert not (run_dir / "done.json").exists()
    assert json.loads((run_dir / "spec.json").read_text()) == {"lr": 2}


def test_lm_experiment_params_reject_unknown_cells_options_and_train_keys():
    import yaml

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    cpu = raw["experiments"]["lm_ptb"]["cpu"]
    assert experiment_params("lm_ptb", "cpu", raw).train["bptt"] == cpu["train"]["bptt"]
    for path, value, message in (
        (("models", "lstm", "cell"), "lstmm", "unknown cell 'lstmm'"),
        (("models", "lstm", "options"), {"dropuot": 0.1}, r"unknown option\(s\) \['dropuot'\]"),
        (("train",), {"bptt": 70, "learning_rate": 1.0}, "learning_rate"),
    ):
        bad = yaml.safe_load(yaml.safe_dump(raw))
        block = bad["experiments"]["lm_ptb"]["smoke"]
        for key in path[:-1]:
            block = block[key]
        block[path[-1]] = value
        with pytest.raises(ParamsError, match=message):
            validate_params(bad)


def test_ablation_findings_are_judged_against_the_measured_seed_spread():
    models = {"lstm": {"cell": "lstm"},
              "mogrifier_r2": {"cell": "mogrifier_lstm", "options": {"mogrifier_rounds": 2}},
              "mogrifier_r4": {"cell": "mogrifier_lstm", "options": {"mogrifier_rounds": 4}},
              "full_rank": {"cell": "mogrifier_lstm", "options": {"mogrifier_rounds": 4, "mogrifier_rank": 0}},
              "no_zigzag": {"cell": "mogrifier_lstm", "options": {"mogrifier_rounds": 4, "mogrifier_zigzag": False}},
              "mlstm": {"cell": "mlstm"}}

    def summary(ppl, std=1.0, seeds=3):
        return {k: {"valid_ppl": v, "valid_ppl_std": std, "seeds": seeds} for k, v in ppl.items()}

    def verdicts(ppl, **kw):
        return {p.label: p.verdict for p in ablation_claim({"models": models, "summary": summary(ppl, **kw)}).parts}

    # margin = 2 sqrt(1/3 + 1/3) = 1.63 for every pair
    ppl = {"lstm": 100, "mogrifier_r2": 95, "mogrifier_r4": 90, "full_rank": 91, "no_zigzag": 89, "mlstm": 99}
    assert verdicts(ppl) == {
        "more rounds help": "reproduced",
        "full rank close behind low rank": "partly reproduced",  # ahead by 1 < 1.63; 1 from it < 10 / 2
        "zigzag helps": "not reproduced",  # 89 vs 90: the other way, inside 1.63
        "mLSTM no better than LSTM": "reproduced",  # 99 vs 100: within noise, so not an improvement
    }
    # "underperformed the baseline Mogrifier ... and was on par with the r = 2 model": both halves judged
    assert verdicts({**ppl, "no_zigzag": 91})["zigzag helps"] == "not reproduced"  # 4 from r = 2: not on par
    assert verdicts({**ppl, "no_zigzag": 91, "mogrifier_r2": 92})["zigzag helps"] == "partly reproduced"  # behind
    # r = 4 by 1 (inside the margin), on par with r = 2 (1 apart)
    assert verdicts({**ppl, "no_zigzag": 93, "mogrifier_r2": 94})["zigzag helps"] == "reproduced"  # 3 behind, 1 apart
    # r = 2 itself within the margin of r = 4: "on par with r = 2" would not set no-zigzag apart, so it is not read
    # (a no-zigzag 4 from r = 2 would otherwise fail it) and the part rests on "underperformed" alone
    level = {**ppl, "mogrifier_r2": 91, "no_zigzag": 95}
    assert verdicts(level)["zigzag helps"] == "reproduced"
    part = next(p for p in ablation_claim({"models": models, "summary": summary(level)}).parts
                if p.label == "zigzag helps")
    assert "on par with r = 2 not read: r = 2 (91.0) is itself within the tie margin of the Mogrifier r=4 (90.0)" \
        in part.evidence
    # r = 2 ahead of r = 4 beyond the margin: the two are apart, so "on par with r = 2" is read (and here fails)
    assert verdicts({**ppl, "mogrifier_r2": 80, "no_zigzag": 95})["zigzag helps"] == "partly reproduced"
    ppl.update(mogrifier_r4=97, mlstm=95, no_zigzag=93, full_rank=99)  # r2 -> r4 rises by 2 > 1.63
    assert verdicts(ppl) == {"more rounds help": "partly reproduced",  # r=0 -> 2 falls by 5; r=2 -> 4 rises
                             "full rank close behind low rank": "partly reproduced",  # 4 behind r=2, 4 > 5 / 2
                             "zigzag helps": "not reproduced", "mLSTM no better than LSTM": "not reproduced"}
    claim = ablation_claim({"models": models, "summary": summary(ppl)})
    assert "Mogrifier r=2 -> Mogrifier r=4 rises by 2.0" in claim.parts[0].evidence and claim.verdict == "partly"
    one = verdicts({**ppl, "no_zigzag": 99}, std=0.0, seeds=1)  # no margins: a gap the thesis' way is within noise,
    assert one["zigzag helps"] == "within noise" and one["mLSTM no better than LSTM"] == "not reproduced"  # else fails
    # Fig. 2.3 is the rounds alone; a finding whose models were not trained is left out
    assert [p.label for p in ablation_claim({"models": models, "summary": summary(ppl)}, "M-F2.3").parts] == [
        "more rounds help"]
    # one seed: the rounds' ends the thesis' way are within noise (no margin), never "reproduced"
    falling = {"lstm": 100, "mogrifier_r2": 95, "mogrifier_r4": 90, "full_rank": 91, "no_zigzag": 95, "mlstm": 99}
    assert verdicts(falling, std=0.0, seeds=1)["more rounds help"] == "within noise"
    del models["mlstm"], ppl["mlstm"]
    assert "mLSTM no better than LSTM" not in verdicts(ppl)
    assert ablation_claim({"models": models, "summary": summary(ppl)}).not_run == (
        "mLSTM no better than LSTM (its models not trained)",)


def test_table_2_3s_numbers_are_shown_and_the_full_rank_finding_is_judged_against_them():
    from paperlib.compendium.results_index import ROWS
    from paperlib.reference.language_models import TABLE_2_3

    assert TABLE_2_3 == {"mogrifier_lstm": 54.1, "full_rank": 54.6, "no_zigzag": 55.0, "lstm": 57.5, "mlstm": 57.8}
    paper = ROWS["M-T2.3"].paper
    assert "lost" not in paper and all(f" {ppl}" in paper for ppl in TABLE_2_3.values())
    models = {"lstm": {"cell": "lstm"}, "full_rank": {"cell": "mogrifier_lstm", "options": {"mogrifier_rank": 0}},
              "mogrifier_r4": {"cell": "mogrifier_lstm", "options": {"mogrifier_rounds": 4}}}

    def full_rank(ppl):
        summary = {k: {"valid_ppl": v, "valid_ppl_std": 0.5, "seeds": 3} for k, v in ppl.items()}
        parts = {p.label: p for p in ablation_claim({"models": models, "summary": summary}).parts}
        return parts["full rank close behind low rank"]

    # the thesis' own pattern: low rank ahead beyond the margin (0.82), full rank nearer to it than to the LSTM
    part = full_rank({"lstm": 57.5 * 3, "mogrifier_r4": 54.1 * 3, "full_rank": 54.6 * 3})
    assert part.verdict == "reproduced" and "54.6" in part.claim and "57.5" in part.claim
    # full rank far ahead of low rank (as at our scale) is neither "behind" nor "close"
    assert full_rank({"lstm": 174, "mogrifier_r4": 165, "full_rank": 159}).verdict == "not reproduced"
    assert full_rank({"lstm": 174, "mogrifier_r4": 165, "full_rank": 162}).verdict == "partly reproduced"  # close


def test_the_rounds_claim_judges_the_lstm_as_r_0_and_the_effect_of_r_among_mogrifiers_apart():
    """Fig. 2.3: the LSTM of the same recipe is the sweep's r = 0, compared with the fewest rounds on its own, so that
    its gap (173.8 -> 165.6) cannot stand in for r = 2 / 4 / 6 being flat (165.6 / 164.8 / 165.4); unmatched parameter
    counts and the untrained rounds of Table 2.4's range are stated."""
    recipe = {"hidden_size": 192, "num_layers": 2, "options": {"input_dropout": 0.05}}
    models = {"lstm": {"cell": "lstm", **recipe},
              **{f"mogrifier_r{r}": {"cell": "mogrifier_lstm", **recipe,
                                     "options": {"input_dropout": 0.05, "mogrifier_rounds": r}} for r in (2, 4, 6)}}
    ppl = {"lstm": 173.8, "mogrifier_r2": 165.6, "mogrifier_r4": 164.8, "mogrifier_r6": 165.4}
    params = {"lstm": 2.52e6, "mogrifier_r2": 2.58e6, "mogrifier_r4": 2.65e6, "mogrifier_r6": 2.71e6}
    summary = {k: {"valid_ppl": v, "valid_ppl_std": 0.9, "seeds": 3, "parameters": params[k]} for k, v in ppl.items()}

    def judged():
        return ablation_claim({"models": models, "summary": summary}, "M-F2.3")

    part = judged().parts[0]
    assert part.verdict == "partly reproduced" and judged().verdict == "partly"  # +8.2 beyond 1.5; r=2 -> 6 +0.2 inside
    assert "r=0 (LSTM) 173.8, r=2 165.6, r=4 164.8, r=6 165.4" in part.evidence
    assert "r=0 (LSTM) -> 2 gap +8.2" in part.evidence and "among Mogrifiers r=2 -> 6 gap +0.2" in part.evidence
    assert "2.52M / 2.58M / 2.65M / 2.71M (not matched)" in part.evidence
    assert "r = 1, 3, 5 of Table 2.4's range not trained" in part.evidence
    summary["mogrifier_r6"]["valid_ppl"] = 160.0
    assert judged().verdict == "reproduced"
    summary["lstm"]["valid_ppl"] = 166.0  # the LSTM level with r = 2: r matters only among the Mogrifiers
    assert judged().parts[0].verdict == "partly reproduced"
    # an LSTM of another recipe is shown, not compared: the part rests on the Mogrifiers alone
    models["lstm"] = {"cell": "lstm", "hidden_size": 256, "num_layers": 2, "options": {"input_dropout": 0.05}}
    part = judged().parts[0]
    assert part.verdict == "reproduced" and "the LSTM (r=0) 166.0, another recipe: not compared" in part.evidence


def test_a_gap_counts_only_beyond_two_standard_errors_of_the_difference_of_seed_means():
    summary = {"lstm": {"test_ppl": 120.0, "test_ppl_std": 3.0, "seeds": 3},
               "mogrifier_lstm": {"test_ppl": 115.0, "test_ppl_std": 4.0, "seeds": 3}}
    pair = compare_seed_means(summary, "lstm", "mogrifier_lstm", "test_ppl")
    assert pair["tie margin"] == pytest.approx(2 * math.sqrt(9 / 3 + 16 / 3))  # 5.77 > the gap of 5
    assert pair["our gap"] == 5.0 and not against(pair)
    summary["mogrifier_lstm"]["test_ppl"] = 110.0
    assert against(compare_seed_means(summary, "mogrifier_lstm", "lstm", "test_ppl"))  # 10 beyond 5.77 the other way
    summary["lstm"]["seeds"] = 1
    one = compare_seed_means(summary, "mogrifier_lstm", "lstm", "test_ppl")
    assert one["tie margin"] is None and not against(one)  # one seed: no margin, never "beyond" it


def test_table_4_1_compares_the_rlstm_with_the_chapter_4_mogrifier_when_one_was_trained():
    def row(ppl):
        return {"test_ppl": ppl, "test_ppl_std": 0.5, "seeds": 3, "parameters": 1}

    summary = {"lstm": row(140.0), "mogrifier_lstm": row(135.0), "mogrifier_lstm_ch4": row(125.0),
               "mogrifier_rlstm": row(128.0)}
    claim = ordering_claim({"level": "word", "summary": summary}, "M-T4.1")
    assert [p.label for p in claim.parts] == ["Mogrifier RLSTM better than Mogrifier (ch. 4 setup)",
                                              "Mogrifier (ch. 4 setup) better than Mogrifier"]
    # the RLSTM (128) beats the ch. 2 Mogrifier (135) but not the ch. 4 one (125), which it is compared with
    assert [p.verdict for p in claim.parts] == ["not reproduced", "reproduced"]
    assert "thesis: 48.5 vs 47.9 ppl, Table 4.1" in claim.parts[0].claim
    assert not any(p.label.endswith(" than LSTM") for p in claim.parts)  # Table 4.1 has no plain LSTM row


def test_a_pair_whose_models_were_not_trained_is_named_as_not_run():
    def row(ppl):
        return {"test_bpc": ppl, "test_bpc_std": 0.01, "seeds": 3, "parameters": 1}

    two = {"lstm": row(1.8), "mogrifier_lstm": row(1.7), "mogrifier_lstm_ch4": row(1.6)}
    claim = ordering_claim({"level": "char", "summary": two}, "M-T4.2")
    assert [p.label for p in claim.parts] == ["Mogrifier (ch. 4 setup) better than Mogrifier"]
    assert claim.verdict == "partly"
    assert claim.not_run == ("Mogrifier RLSTM vs Mogrifier (not both trained)", "the Enwik8 and Text8 rows",
                             "the dynamic evaluation columns")
    t22 = ordering_claim({"level": "char", "summary": two}, "M-T2.2")  # no MC numbers in these summaries
    assert [p.verdict for p in t22.parts] == ["reproduced"] and t22.verdict == "partly"
    assert t22.not_run == ("Mogrifier vs LSTM with MC dropout (not evaluated)", "the MWC and Enwik8 rows",
                           "the dynamic evaluation columns",
                           "'a new state of the art' (against published models at 24M parameters)")
    with pytest.raises(Unjudged):  # nothing of Table 4.2 can be judged without an RLSTM or ch. 4's Mogrifier
        ordering_claim({"level": "char", "summary": {"lstm": row(1.8), "mogrifier_lstm": row(1.7)}}, "M-T4.2")


def test_averaging_override_trains_with_2ta_into_separate_outputs(tmp_path, monkeypatch, mirror):
    """`paperlib train lm_ptb --averaging 2ta` in a scratch compendium (smoke sizes, one model)."""
    import shutil

    import yaml

    from paperlib.compendium.cli import main
    from paperlib.data import fetch_corpus

    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    smoke = raw["experiments"]["lm_ptb"]["smoke"]
    smoke["models"] = {"lstm": smoke["models"]["lstm"]}
    smoke["eval_tokens"] = 500
    raw["profile"] = "smoke"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    fetch_corpus("ptb", tmp_path / raw["data"]["root"], mirror=mirror)
    monkeypatch.setenv("PAPERLIB_ROOT", str(tmp_path))
    assert main(["train", "lm_ptb", "--averaging", "2ta", "--quiet"]) == 0
    results = json.loads((tmp_path / "results" / "lm_ptb.2ta.json").read_text())
    assert results["train"]["averaging"] == "2ta"
    assert any("averaged_length" in h for h in results["runs"][0]["history"])
    assert (tmp_path / "runs" / "lm_ptb.2ta" / "lstm-seed1" / "done.json").exists()
    assert not (tmp_path / "results" / "lm_ptb.json").exists()


def test_runs_trained_in_parallel_processes_give_the_numbers_of_runs_trained_in_turn(tmp_path):
    from types import SimpleNamespace

    import torch

    from paperlib.experiments.language_models.lm_ptb import train_and_evaluate
    from tests.test_train import VOCAB, markov_stream

    models = {"lstm": {"cell": "lstm", "hidden_size": 8, "num_layers": 1, "options": {"input_dropout": 0.1}},
              "mogrifier_lstm": {"cell": "mogrifier_lstm", "hidden_size": 8, "num_layers": 1,
                                 "options": {"mogrifier_rounds": 2, "mogrifier_rank": 2}}}
    train = {"batch_size": 4, "bptt": 8, "max_steps": 6, "eval_every": 3, "eval_batch_size": 2, "eval_max_windows": 2}
    streams = [markov_stream(n, seed) for n, seed in ((2000, 0), (300, 1), (300, 2))]
    threads = torch.get_num_threads()

    def records(workers, folder):
        settings = SimpleNamespace(models=models, train=train, seeds=[1, 2], eval_tokens=None, mc_samples=2,
                                   threads=1, workers=workers)
        out = train_and_evaluate("t", settings, VOCAB, *streams, tmp_path / folder, torch.device("cpu"), progress=False)
        return [{k: v for k, v in r.items() if not k.endswith("_seconds")} for r in out]

    try:
        torch.set_num_threads(1)  # the workers' thread count: the same kernels in both
        in_turn = records(1, "in_turn")
    finally:
        torch.set_num_threads(threads)
    parallel = records(2, "parallel")
    assert [(r["model"], r["seed"]) for r in parallel] == [("lstm", 1), ("lstm", 2), ("mogrifier_lstm", 1),
                                                          ("mogrifier_lstm", 2)]
    assert parallel == in_turn  # same seeds, same one-thread kernels: the same floats
