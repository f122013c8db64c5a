"""Word generation experiments (Schmidt & Hofmann §4-5): runner, oracles, resumability."""

import itertools
import json
import math

import numpy as np
import pytest
import torch

from paperlib.experiments.common.config import PROFILES
from paperlib.data.wordlist import WordList, split_tokens, split_types
from paperlib.models.dssm import CharVocab, GRUWordModel
from paperlib.experiments.word_generation.word_generation import (
    PAPER_TABLE1,
    SplitData,
    WordGenerationParams,
    aggregate,
    build_model,
    complete_spec,
    entropy,
    expected_unique_fraction,
    gru_symbol_entropy,
    make_splits,
    oracle_rows,
    plan_runs,
    run_experiment,
    spec_key,
    table1_frame,
    table2_frame,
    table3_frames,
    train_model,
)
from tests.numerics import assert_bitwise


def _word_list(n_words: int = 60, seed: int = 0) -> WordList:
    """Distinct words over a 5-letter alphabet with Zipfian virtual counts (a toy stand-in for wordfreq)."""
    rng = np.random.default_rng(seed)
    words: list[str] = []
    seen = set()
    while len(words) < n_words:
        w = "".join(rng.choice(list("abcde"), size=int(rng.integers(2, 6))))
        if w not in seen:
            seen.add(w)
            words.append(w)
    counts = np.round(1e6 / np.arange(1, n_words + 1)).astype(np.int64)
    return WordList(words, counts)


def _settings(**over) -> WordGenerationParams:
    base = dict(
        table1={"TRIL": {"kind": "dssm", "generative_flow": "TRIL", "flow_hidden": [8], "q_hidden": [8]},
                "2xTRIL, K=2": {"kind": "dssm", "generative_flow": "2xTRIL", "samples": 2, "flow_hidden": [8],
                                "q_hidden": [8]},
                "BASELINE-8D": {"kind": "gru", "state_size": 8}},
        table2={"2xTRIL, K=2": {"kind": "dssm", "generative_flow": "2xTRIL", "samples": 2, "flow_hidden": [8],
                                "q_hidden": [8]},
                "BASELINE-8D": {"kind": "gru", "state_size": 8}},
        table3_generative=["ID", "TRIL"], table3_inference=["DIAG"],
        table3_base={"flow_hidden": [8], "q_hidden": [8]},
        figure_model="2xTRIL, K=2", baseline_reference="BASELINE-8D",
        steps=4, batch_size=8, lr=3e-3, seeds=[0], seeds_weighted=[0], eval_samples=20, generated_words=50,
        ngram_words=20, mi_prefixes=10, mi_noise=5, fig2_trajectories=3, history_every=2, history_prefixes=5,
        ngram_orders=[2, 3], max_len=5, samples_shown=5,
    )
    return WordGenerationParams(**{**base, **over})


@pytest.fixture(scope="module")
def tiny_results(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    return run_experiment(_settings(), _word_list(), runs), runs


def test_runner_on_a_tiny_config_fills_every_table_with_finite_numbers(tiny_results):
    results, _ = tiny_results
    json.dumps(results, allow_nan=False)  # strict JSON: infinities are stored as null
    rows1 = {r["model"]: r for r in results["table1"]}
    assert list(rows1) == ["TRIL", "2xTRIL, K=2", "BASELINE-8D", "ORACLE-TRAIN"]
    assert all(rows1[name]["paper"] == PAPER_TABLE1[name] for name in ("TRIL", "2xTRIL, K=2", "BASELINE-8D"))
    for name, row in rows1.items():
        assert row["unstable"] == 0
        for key in ("H_train", "H_test", "in_vocab_unique", "in_vocab"):
            assert math.isfinite(row[key]), (name, key)
        assert 0.0 <= row["in_vocab_unique"] <= row["in_vocab"] <= 1.0
    assert rows1["TRIL"]["I_bar"] >= 0.0 and rows1["BASELINE-8D"]["I_bar"] is None
    rows2 = {r["model"]: r for r in results["table2"]}
    assert list(rows2) == ["2xTRIL, K=2", "BASELINE-8D", "ORACLE-TRAIN", "ORACLE-TEST"]
    for name in ("2xTRIL, K=2", "BASELINE-8D", "ORACLE-TRAIN"):
        assert all(rows2[name][f"ppl_full_{n}"] >= 1.0 for n in (2, 3))
    cells = results["table3"]["cells"]
    assert set(cells) == {"ID", "TRIL"} and all(math.isfinite(cells[g]["DIAG"]["H_test"]) for g in cells)
    fig2 = results["figure2"]["runs"]
    assert len(fig2) == 1 and np.asarray(fig2[0]["I_t"]).shape == (3, 6)  # trajectories x (max_len + 1)
    history = results["figure3"]["histories"][0]
    assert [h["step"] for h in history] == [0, 2, 4] and all(h["I_bar"] >= 0 for h in history)
    assert results["figure3"]["baseline_symbol_entropy"] > 0
    dssm_types = next(r for r in results["runs"] if r["split"] == "types" and r["spec"]["kind"] == "dssm")
    assert dssm_types["metrics"]["ngram_emission"] == "argmax"  # §5.3: argmax of P(w_t | h_t) for Table 2
    assert set(table1_frame(results).columns) >= {"w∈V ours", "w∈V paper", "Ī ours", "Ī paper"}
    assert table2_frame(results).loc["ORACLE-TEST", ("cross-entropy", "H[P_train,P̂]")] == "∞ (–)"
    assert set(table3_frames(results)) == {"H_test", "I_bar"}
    from paperlib.experiments.word_generation.claims import figure2_claim, figure3_claim
    from paperlib.experiments.word_generation.noise_claims import figure1_claim

    assert [c.item for c in (figure1_claim(results), figure2_claim(results), figure3_claim(results))] == \
        ["S-F1", "S-F2", "S-F3"]  # the smoke run's figures are judged by the claim path


def test_cross_entropies_are_at_least_the_data_entropy(tiny_results):
    # The Monte Carlo P_hat of eq. (12) is itself a normalised distribution, so Gibbs' inequality
    # holds exactly for every model row, not only in expectation.
    results, _ = tiny_results
    splits = results["data"]["splits"]
    for table, split in (("table1", "standard"), ("table2", "types")):
        for row in results[table]:
            if row["model"].startswith("ORACLE"):
                continue
            assert row["H_train"] >= splits[split]["train_entropy"] - 1e-9
            assert row["H_test"] >= splits[split]["test_entropy"] - 1e-9


def test_same_seed_gives_the_same_numbers_and_finished_runs_are_reused(tiny_results, tmp_path):
    results, runs = tiny_results
    again = run_experiment(_settings(), _word_list(), tmp_path)
    assert json.dumps(again, sort_keys=True) == json.dumps(results, sort_keys=True)
    done = sorted(runs.glob("*/*/done.json"))
    assert len(done) == len(plan_runs(_settings())) == 6  # TRIL and TRIL/DIAG share one run
    reread = run_experiment(_settings(), _word_list(), runs)
    assert json.dumps(reread, sort_keys=True) == json.dumps(results, sort_keys=True)
    run_experiment(_settings(lr=1e-3, steps=1), _word_list(), runs)  # other settings: their own folder
    assert len(list(runs.glob("*/*/done.json"))) == 12


def test_resumed_training_continues_bit_for_bit(tmp_path):
    data = make_splits(_word_list())["standard"]
    spec = {"kind": "dssm", "generative_flow": "TRIL", "samples": 2, "flow_hidden": [8], "q_hidden": [8]}

    def fresh():
        torch.manual_seed(3)
        return build_model(spec, data.vocab, 5)

    straight = fresh()
    full = train_model(straight, data, _settings(steps=6), 2, seed=5)
    interrupted = fresh()
    first = train_model(interrupted, data, _settings(steps=6), 2, seed=5, checkpoint=tmp_path / "ck.pt", stop_at=3)
    assert first.steps == 3
    resumed = fresh()  # a new process: weights come from the checkpoint only
    result = train_model(resumed, data, _settings(steps=6), 2, seed=5, checkpoint=tmp_path / "ck.pt")
    assert result.steps == 6 and result.history == full.history
    for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()):
        assert_bitwise(a, b, why="a resumed run performs the uninterrupted run's operations")
    other_seed = fresh()
    train_model(other_seed, data, _settings(steps=6), 2, seed=6)
    assert not torch.equal(other_seed.emission.weight, straight.emission.weight)


def test_oracle_rows_equal_their_closed_forms():
    data = _word_list()
    splits = make_splits(data)
    standard = splits["standard"]
    rows = oracle_rows(standard, _settings(generated_words=400), seed=0)
    oracle = rows["ORACLE-TRAIN"]
    p_train = standard.train.counts / standard.train.counts.sum()
    # rel_tol=1e-12 (~4500 float64 eps) here and below: entropies summed over the word types in another order
    assert math.isclose(oracle["H_train"], float(-(p_train * np.log(p_train)).sum()), rel_tol=1e-12)
    assert math.isclose(oracle["H_train"], entropy(standard.train.counts), rel_tol=1e-12)
    log_p = dict(zip(standard.train.words, np.log(p_train)))
    p_test = standard.test.counts / standard.test.counts.sum()
    expected_test = -sum(p * log_p[w] for w, p in zip(standard.test.words, p_test))
    assert math.isclose(oracle["H_test"], expected_test, rel_tol=1e-12)
    assert oracle["in_vocab"] == 1.0 and oracle["infinite"] == []
    assert abs(oracle["in_vocab_unique"] - oracle["in_vocab_unique_expected"]) < 0.08
    # Alternative split: no test type is a training type, so P_train gives them probability zero.
    types = splits["types"]
    ngram = {"full": {}, "test": {}}
    rows = oracle_rows(types, _settings(), seed=0, ngram=ngram)
    assert rows["ORACLE-TRAIN"]["H_test"] is None and "H_test" in rows["ORACLE-TRAIN"]["infinite"]
    assert math.isclose(rows["ORACLE-TEST"]["H_test"], entropy(types.test.counts), rel_tol=1e-12)
    assert rows["ORACLE-TEST"]["in_vocab"] == 0.0


def test_expected_unique_fraction_matches_exact_enumeration():
    probs = np.array([0.5, 0.3, 0.2])
    n = 3
    exact = 0.0
    for draw in itertools.product(range(3), repeat=n):
        exact += np.prod(probs[list(draw)]) * len(set(draw)) / n
    assert math.isclose(expected_unique_fraction(probs, n), exact, rel_tol=1e-12)
    assert expected_unique_fraction(probs, 1) == pytest.approx(1.0)


def test_gru_symbol_entropy_of_a_uniform_model_is_log_vocabulary_size():
    vocab = CharVocab("abc")  # 3 letters + end of word
    model = GRUWordModel(vocab, state_size=4, max_len=40)
    with torch.no_grad():
        model.output.weight.zero_()
        model.output.bias.zero_()
    value = gru_symbol_entropy(model, 2000, torch.Generator().manual_seed(0))
    assert value == pytest.approx(math.log(4), abs=1e-4)  # forced end only after 40 letters: p = 0.75^40


def test_aggregate_drops_unstable_runs_and_flags_infinite_values():
    def record(h, diverged=False):
        return {"diverged": diverged, "metrics": None if diverged else {"H_test": h, "ppl": None}}

    out = aggregate([record(3.0), record(5.0), record(float("nan"), diverged=True)], ("H_test", "ppl", "I_bar"))
    assert (out["seeds"], out["unstable"]) == (3, 1)
    assert out["H_test"] == 4.0 and out["H_test_std"] == pytest.approx(math.sqrt(2.0))
    assert out["ppl"] is None and out["infinite"] == ["ppl"]
    assert out["I_bar"] is None  # absent (e.g. the GRU has no noise), not infinite
    assert aggregate([record(1.0, diverged=True)], ("H_test",))["H_test"] is None


def test_non_finite_loss_stops_the_run_as_unstable():
    data = make_splits(_word_list())["standard"]
    torch.manual_seed(0)
    model = build_model({"kind": "dssm", "flow_hidden": [8], "q_hidden": [8]}, data.vocab, 5)
    with torch.no_grad():
        model.emission.bias.fill_(float("nan"))
    result = train_model(model, data, _settings(steps=5), 1, seed=0)
    assert result.diverged and result.steps == 0 and result.history[-1] == {"step": 0, "diverged": True}


def test_specs_are_completed_so_equal_models_share_one_run():
    short = {"kind": "dssm", "generative_flow": "TRIL"}
    explicit = {"kind": "dssm", "samples": 1, "generative_flow": "TRIL", "inference_flow": "DIAG", "state_size": 8}
    assert spec_key(short) == spec_key(explicit)
    assert complete_spec({"kind": "dssm", "samples": 5})["q_uses_proposal"] is True  # Algorithm 1
    assert complete_spec({"kind": "dssm", "state_size": 16})["inference_hidden"] == 16
    with pytest.raises(ValueError, match="valid keys"):
        complete_spec({"kind": "dssm", "flows": "TRIL"})
    with pytest.raises(ValueError, match="TRIL"):
        complete_spec({"kind": "dssm", "generative_flow": "LOWER"})
    with pytest.raises(ValueError, match="dssm"):
        complete_spec({"kind": "lstm"})
    with pytest.raises(ValueError, match="figure_model"):
        _settings(figure_model="BASELINE-8D")


def test_training_batches_follow_the_unigram_distribution():
    data = WordList(["ab", "cd", "abc"], np.array([6, 3, 1]))
    train, test = split_tokens(data, 0.5, seed=0)
    split = SplitData.build("standard", train, test, CharVocab("abcd"))
    tokens, lengths = split.batch(20000, torch.Generator().manual_seed(0))
    words = [split.vocab.decode(row) for row in tokens.tolist()]
    freq = np.array([words.count(w) for w in split.train.words]) / len(words)
    # atol=0.015: about 4 standard errors of a frequency over 20000 draws
    assert np.allclose(freq, split.train.counts / split.train.counts.sum(), atol=0.015)
    assert tokens.shape[1] == int(lengths.max()) == 4
    assert split_types(data, 0.34, seed=0)[1].words  # the type split keeps at least one test type


def test_stage_entry_point_writes_results_and_provenance(tmp_path, monkeypatch):
    import yaml

    from paperlib.experiments.word_generation.word_generation import run_word_generation

    tiny = {"top_n": 20, "table1": {"TRIL": {"kind": "dssm", "flow_hidden": [8], "q_hidden": [8]},
                                    "BASELINE-8D": {"kind": "gru", "state_size": 8}},
            "table2": {"BASELINE-8D": {"kind": "gru", "state_size": 8}},
            "table3_generative": [], "table3_inference": [], "figure_model": "TRIL",
            "baseline_reference": "BASELINE-8D", "steps": 2, "batch_size": 4, "lr": 0.003, "seeds": [0],
            "seeds_weighted": [0], "eval_samples": 5, "generated_words": 20, "ngram_words": 5, "mi_prefixes": 4,
            "mi_noise": 3, "fig2_trajectories": 2, "history_every": 1, "history_prefixes": 3, "threads": 1}
    params = {"profile": "smoke", "data": {"root": "data/raw", "corpora": ["ptb"]},
              "experiments": {"word_generation": {p: tiny for p in PROFILES}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    monkeypatch.setenv("PAPERLIB_ROOT", str(tmp_path))
    out = run_word_generation("smoke", progress=False)
    assert out == tmp_path / "results" / "word_generation.json"
    results = json.loads(out.read_text())
    made = json.loads(out.with_suffix(".provenance.json").read_text())
    assert results["profile"] == made["profile"] == "smoke" and results["data"]["types"] == 20
    assert len(made["data_sha256"]["wordfreq_en_filtered"]) == 64 and made["run_seconds"]
    assert (tmp_path / "runs" / "word_generation").is_dir()
