"""Reverse-copy encoder/decoder (Melis thesis §2.3.3): model wiring, parameter budget, training, runner."""

import json
import math
from pathlib import Path

import pytest
import torch
import yaml
from torch.nn import functional as F

from paperlib.experiments.common.config import PROFILES
from paperlib.data import ReverseCopyData, reverse_copy
from paperlib.experiments.reverse_copy.reverse_copy import (
    RESULT_KEYS,
    ReverseCopyParams,
    TrainSettings,
    build_model,
    count_parameters,
    evaluate,
    grid_points,
    hidden_size_for_budget,
    num_parameters,
    run_reverse_copy,
    seed_means,
    select_best,
    train_model,
)
from paperlib.experiments.reverse_copy.claims import SOLVED_NATS, claim, record
from tests.numerics import assert_bitwise

REPO = Path(__file__).resolve().parents[1]


def tiny_settings(**overrides) -> dict:
    block = {
        "vocab_size": 5, "lengths": [2, 3], "train_examples": 256, "valid_examples": 32, "test_examples": 32,
        "parameter_budget": 1500, "steps": 4, "batch_size": 16, "learning_rates": [0.01, 0.003], "l2_penalties": [0.0],
        "models": {"lstm": {"embedding_sizes": [6]},
                   "mogrifier": {"embedding_sizes": [3], "rounds": [2], "ranks": [2]}},
        "log_every": 2, "eval_batch_size": 8,
    }
    return {**block, **overrides}


@pytest.mark.parametrize("rounds", [None, 3])
def test_model_shapes_and_one_final_state_per_encoder_layer(rounds):
    model = build_model(vocab_size=7, embedding_size=5, hidden_size=6, num_layers=2, mogrifier_rounds=rounds,
                        mogrifier_rank=2, seed=0)
    data = reverse_copy(4, 9, vocab_size=7, seed=0)
    logits = model(data.source, data.decoder_inputs)
    assert logits.shape == (4, 9, 7)  # the softmax covers the symbols, not the marker
    states = model.encode(data.source)
    assert len(states) == 2 and all(h.shape == c.shape == (4, 6) for h, c in states)
    assert model.decoder_embedding.num_embeddings == 8 and model.encoder_embedding.num_embeddings == 7


@pytest.mark.parametrize("layers,rounds,rank", [(1, None, 0), (2, None, 0), (1, 0, 0), (2, 3, 2), (1, 4, 0), (3, 5, 3)])
def test_closed_form_parameter_count_matches_the_built_model(layers, rounds, rank):
    model = build_model(11, 4, 9, layers, rounds, rank)
    assert count_parameters(11, 4, 9, layers, rounds, rank) == num_parameters(model)


def test_hidden_size_for_budget_is_the_largest_size_within_the_budget():
    for budget, emb, rounds, rank in [(3000, 4, None, 0), (3000, 2, 3, 2), (20_000, 8, 4, 0), (777, 1, None, 0)]:
        n = hidden_size_for_budget(budget, 10, emb, 1, rounds, rank)
        feasible = [h for h in range(1, 200) if count_parameters(10, emb, h, 1, rounds, rank) <= budget]
        assert n == max(feasible)
    with pytest.raises(ValueError, match="too small"):
        hidden_size_for_budget(100, 10, 8)


def test_thesis_lstm_sizes_fit_a_10m_budget_within_one_percent():
    # Melis §2.3.3: 10M parameters, vocabulary 1,000, LSTM embedding/hidden 498/787 and 493/790.
    assert hidden_size_for_budget(10_000_000, 1000, 498) == pytest.approx(787, rel=0.01)
    assert hidden_size_for_budget(10_000_000, 1000, 493) == pytest.approx(790, rel=0.01)


@pytest.mark.numerics
def test_decoder_initialised_from_encoder_last_state_via_the_library_layers():
    model = build_model(6, 4, 5, 1, mogrifier_rounds=3, mogrifier_rank=2, seed=1)
    data = reverse_copy(3, 5, vocab_size=6, seed=1)
    enc_x = model.encoder_embedding(data.source).transpose(0, 1)
    _, enc_state = model.encoder[0](enc_x, model.encoder[0].init_state(3))
    dec_out, _ = model.decoder[0](model.decoder_embedding(data.decoder_inputs).transpose(0, 1), enc_state)
    expected = model.output(dec_out.transpose(0, 1))
    # float32, the model's own layers called by hand: allclose's rtol = 1e-5 (~80 eps) decides, atol only near zero
    assert torch.allclose(model(data.source, data.decoder_inputs), expected, atol=1e-6)
    # the source matters through that state only: another source changes the very first prediction
    other = reverse_copy(3, 5, vocab_size=6, seed=2).source
    assert not torch.allclose(model(other, data.decoder_inputs)[:, 0], expected[:, 0])


@pytest.mark.numerics
def test_decoder_position_t_sees_neither_later_decoder_inputs_nor_the_targets():
    torch.manual_seed(0)
    model = build_model(6, 4, 8, 2, mogrifier_rounds=4, mogrifier_rank=0, seed=3)
    data = reverse_copy(5, 7, vocab_size=6, seed=3)
    # teacher forcing feeds the marker, then the reversed source shifted by one: decoder input t + 1 is target t
    assert torch.equal(data.decoder_inputs[:, 0], torch.full((5,), 6))
    assert torch.equal(data.decoder_inputs[:, 1:], data.targets[:, :-1])
    base = model(data.source, data.decoder_inputs)
    for t in range(6):
        changed = data.decoder_inputs.clone()
        changed[:, t + 1 :] = (changed[:, t + 1 :] + 1) % 6  # i.e. change targets t, t+1, ... as inputs
        logits = model(data.source, changed)
        assert_bitwise(logits[:, : t + 1], base[:, : t + 1],
                       why="positions <= t see identical inputs, and every kernel (a GEMM row, a recurrence step) "
                           "computes them from those inputs alone, in the same order")
        assert not torch.allclose(logits[:, t + 1], base[:, t + 1])


def test_training_cannot_use_the_targets_it_scores():
    # Targets drawn independently of source and decoder inputs are unpredictable: the training loss must stay at
    # ln 5 (one pass over fresh examples, so nothing can be memorised). A leak of targets into the inputs would
    # let the loss fall towards 0, as it does on the real task in the next test.
    real = reverse_copy(4800, 3, vocab_size=5, seed=0)
    noise = torch.randint(5, real.targets.shape, generator=torch.Generator().manual_seed(9))
    data = ReverseCopyData(real.source, real.decoder_inputs, noise, 5)
    model = build_model(5, 8, 32, seed=0)
    curve = train_model(model, data, TrainSettings(steps=150, batch_size=32, lr=0.01, beta1=0.9, log_every=50))
    assert curve[-1]["loss"] > math.log(5) - 0.1


def test_training_on_length_3_over_5_symbols_drives_heldout_loss_well_below_ln5():
    train, test = reverse_copy(4800, 3, vocab_size=5, seed=0), reverse_copy(500, 3, vocab_size=5, seed=1)
    for rounds in (None, 2):
        model = build_model(5, 8, 32, mogrifier_rounds=rounds, mogrifier_rank=4, seed=0)
        before = evaluate(model, test)["cross_entropy"]
        train_model(model, train, TrainSettings(steps=150, batch_size=32, lr=0.01, beta1=0.9, log_every=50))
        after = evaluate(model, test)
        assert before > math.log(5) - 0.1
        assert after["cross_entropy"] < 0.25 * math.log(5), (rounds, after)
        assert after["token_accuracy"] > 0.9


@pytest.mark.numerics
@pytest.mark.parametrize("capped", [False, True])
def test_mogrifier_model_with_zero_rounds_equals_the_lstm_model_given_the_same_parameters(capped):
    lstm = build_model(7, 4, 6, 2, mogrifier_rounds=None, capped_input_gate=capped, seed=0)
    mog = build_model(7, 4, 6, 2, mogrifier_rounds=0, capped_input_gate=capped, seed=5)
    mog.load_state_dict(lstm.state_dict())  # strict: zero rounds add no parameters
    data = reverse_copy(3, 6, vocab_size=7, seed=0)
    assert_bitwise(mog(data.source, data.decoder_inputs), lstm(data.source, data.decoder_inputs),
                   why="with zero rounds LSTMLayer takes the plain LSTM's code path: same kernels, same weights")


@pytest.mark.numerics
def test_mogrifier_with_zeroed_round_matrices_is_the_lstm_and_otherwise_differs():
    # 2σ(0) = 1: with Q^i = R^i = 0 every round of eq. (2.2) is the identity, whatever r.
    lstm = build_model(7, 4, 6, 2, seed=0)
    mog = build_model(7, 4, 6, 2, mogrifier_rounds=5, mogrifier_rank=3, seed=1)
    missing, unexpected = mog.load_state_dict(lstm.state_dict(), strict=False)
    assert not unexpected and missing and all(".mogrifier." in key for key in missing)
    data = reverse_copy(3, 6, vocab_size=7, seed=0)
    ref = lstm(data.source, data.decoder_inputs)
    assert not torch.allclose(mog(data.source, data.decoder_inputs), ref, atol=1e-4)
    with torch.no_grad():
        for key in missing:
            mog.get_parameter(key).zero_()
    # 2σ(0) = 1 exactly, but the fused Mogrifier recurrence vs nn.LSTM / the fused LSTM: float32 over 6 steps, where
    # allclose's rtol = 1e-5 (~80 eps) decides for these O(1) logits
    assert torch.allclose(mog(data.source, data.decoder_inputs), ref, atol=1e-6)


def test_training_stops_with_an_error_when_the_loss_is_not_finite():
    model = build_model(5, 4, 6, seed=0)
    with torch.no_grad():
        model.output.bias[0] = float("nan")
    with pytest.raises(FloatingPointError, match="diverged at step 1"):
        train_model(model, reverse_copy(64, 3, vocab_size=5), TrainSettings(steps=5, batch_size=8, lr=0.01))


def test_evaluate_sums_over_batches_to_the_full_data_mean():
    model = build_model(6, 3, 5, seed=0)
    data = reverse_copy(7, 4, vocab_size=6, seed=0)
    logits = model(data.source, data.decoder_inputs)
    scores = evaluate(model, data, batch_size=3)
    expected = F.cross_entropy(logits.reshape(-1, 6), data.targets.reshape(-1)).item()
    assert scores["cross_entropy"] == pytest.approx(expected)
    assert scores["token_accuracy"] == pytest.approx((logits.argmax(-1) == data.targets).float().mean().item())


def test_settings_reject_bad_values_naming_the_valid_choices():
    ReverseCopyParams(**tiny_settings())
    bad = [
        ({"models": {"lstm": {"embedding_sizes": [4]}}}, "exactly the entries lstm, mogrifier"),
        ({"models": {"lstm": {"embedding_sizes": [4], "rounds": [2]},
                     "mogrifier": {"embedding_sizes": [3], "rounds": [2], "ranks": [2]}}}, "valid keys"),
        ({"models": {"lstm": {"embedding_sizes": [4]}, "mogrifier": {"embedding_sizes": [3]}}}, "rounds"),
        ({"optimizer": "sgd"}, "adam, radam"),
        ({"parameter_budget": 50}, "too small"),
        ({"lengths": [3, 3]}, "distinct"),
        ({"learning_rates": []}, "learning_rates"),
    ]
    for change, message in bad:
        with pytest.raises(ValueError, match=message):
            ReverseCopyParams(**tiny_settings(**change))
    with pytest.raises(ValueError, match="adam, radam"):
        TrainSettings(steps=1, batch_size=1, lr=0.1, optimizer="sgd")
    with pytest.raises(ValueError, match="constant, cosine, linear"):
        ReverseCopyParams(**tiny_settings(schedule="plateau"))


def test_a_cosine_schedule_decays_the_learning_rate_over_the_steps(monkeypatch):
    from paperlib.schedules import schedule_factor

    seen = []
    step = torch.optim.Adam.step

    def spy(self, *args, **kwargs):
        seen.append(self.param_groups[0]["lr"])
        return step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", spy)
    data = reverse_copy(64, 3, vocab_size=5, seed=0)
    train_model(build_model(5, 4, 8, seed=0), data, TrainSettings(steps=4, batch_size=8, lr=0.01, schedule="cosine"))
    assert seen == pytest.approx([0.01 * schedule_factor("cosine", s / 4) for s in range(4)])
    assert seen[0] == 0.01 and seen[-1] < 0.002


def test_grid_gives_every_model_the_same_budget_and_every_length_and_learning_rate():
    settings = ReverseCopyParams(**tiny_settings(parameter_budget=5000))
    points = grid_points(settings)
    assert len(points) == 2 * 2 * 2  # models x lengths x learning rates
    for p in points:
        size = count_parameters(5, p.embedding_size, p.hidden_size, 1, p.mogrifier_rounds, p.mogrifier_rank)
        assert size <= 5000 < count_parameters(5, p.embedding_size, p.hidden_size + 1, 1, p.mogrifier_rounds,
                                               p.mogrifier_rank)
    assert {p.mogrifier_rounds for p in points if p.model == "lstm"} == {None}


def run_record(model, length, valid, test, emb=8, seed=1, lr=0.01):
    return {"model": model, "length": length, "lr": lr, "valid_cross_entropy": valid, "test_cross_entropy": test,
            "valid_token_accuracy": 0.5, "test_token_accuracy": 0.5, "embedding_size": emb, "seed": seed,
            "diverged": not math.isfinite(valid), "train_curve": [], "seconds": 1.0}


def _results(best, lengths, embedding_sizes, seeds=None):
    """A reverse-copy results dictionary (the keys the claim reads) from selected runs; ``seeds``: {model: [[test
    cross-entropy per seed] per length]} (default: each best run's one value)."""
    ordered = sorted(lengths)
    return {"lengths": ordered, "best": best,
            "cross_entropy": {m: [best[m][str(n)]["test_cross_entropy"] for n in ordered] for m in best},
            "cross_entropy_seeds": seeds or {m: [[best[m][str(n)]["test_cross_entropy"]] for n in ordered]
                                             for m in best},
            "settings": {"models": {m: {"embedding_sizes": sizes} for m, sizes in embedding_sizes.items()}}}


def test_selection_uses_validation_and_claims_follow_from_the_numbers():
    runs = [run_record("lstm", 10, 0.01, 0.02), run_record("lstm", 10, 0.005, 0.03, lr=0.02),  # by valid, not test
            run_record("lstm", 20, 0.5, 0.6, emb=16), run_record("mogrifier", 10, 0.01, 0.01, emb=4),
            run_record("mogrifier", 20, 0.3, 0.3, emb=4),
            run_record("mogrifier", 20, math.inf, math.inf, emb=4, lr=0.02)]  # diverged
    best = select_best(runs)
    assert best["lstm"]["10"]["test_cross_entropy"] == 0.03
    judged = claim(_results(best, [20, 10], {"lstm": [8, 16], "mogrifier": [4, 8]}, seeds={
        "lstm": [[0.03, 0.031], [0.6, 0.62]], "mogrifier": [[0.01, 0.011], [0.3, 0.31]]}))
    assert judged.item == "M-F2.4" and judged.verdict == "reproduced" and not judged.not_run
    assert [p.verdict for p in judged.parts] == ["reproduced"] * 3
    # one seed gives no margin: the Mogrifier's way is within noise; a short length above the threshold is not
    # solved, and an untuned embedding grid leaves that part unrun
    best["lstm"]["10"]["test_cross_entropy"] = SOLVED_NATS * 1.5
    judged = claim(_results(best, [10, 20], {"lstm": [8], "mogrifier": [4, 8]}))
    assert [p.verdict for p in judged.parts] == ["not reproduced", "within noise"]
    assert judged.verdict == "not reproduced" and judged.not_run == ("embedding sizes not tuned",)
    # a gap inside the seeds' spread is within noise
    spread = {"lstm": [[0.06, 0.06], [0.5, 0.7]], "mogrifier": [[0.01, 0.01], [0.45, 0.65]]}
    assert claim(_results(best, [10, 20], {"lstm": [8], "mogrifier": [4]}, spread)).parts[1].verdict == "within noise"
    # the LSTM better at the long length: not reproduced at any size
    best["mogrifier"]["20"]["test_cross_entropy"] = 0.6 + 1e-4
    assert claim(_results(best, [10, 20], {"lstm": [8], "mogrifier": [4]})).parts[1].verdict == "not reproduced"


def test_seeds_are_pooled_per_grid_point_and_the_best_point_has_the_lowest_mean_validation_loss():
    runs = [run_record("lstm", 10, 0.10, 0.11, seed=1), run_record("lstm", 10, 0.30, 0.31, seed=2),  # mean 0.2
            run_record("lstm", 10, 0.15, 0.16, seed=1, lr=0.02), run_record("lstm", 10, 0.17, 0.18, seed=2, lr=0.02)]
    pooled = seed_means(runs)
    assert [p["seeds"] for p in pooled] == [[1, 2], [1, 2]]
    assert pooled[0]["valid_cross_entropy"] == pytest.approx(0.2)
    assert pooled[0]["test_cross_entropy_seeds"] == [0.11, 0.31] and "seed" not in pooled[0]
    best = select_best(runs)["lstm"]["10"]  # seed 1 alone would pick lr 0.01; the seed mean picks 0.02
    assert best["lr"] == 0.02 and best["test_cross_entropy"] == pytest.approx(0.17)
    # a diverged seed makes its point's mean infinite, so it is never picked over a finite one
    runs[2] = run_record("lstm", 10, math.inf, math.inf, seed=1, lr=0.02)
    assert select_best(runs)["lstm"]["10"]["lr"] == 0.01 and seed_means(runs)[1]["diverged"]


def test_every_grid_point_runs_once_per_seed_with_the_seed_in_the_run_key():
    from paperlib.experiments.reverse_copy.reverse_copy import run_key

    settings = ReverseCopyParams(**tiny_settings(seeds=[3, 4]))
    points = grid_points(settings)
    assert len(points) == 2 * 2 * 2 * 2 and {p.seed for p in points} == {3, 4}
    keys = {run_key(p, settings) for p in points}
    assert len(keys) == len(points)
    with pytest.raises(ValueError, match="seeds"):
        ReverseCopyParams(**tiny_settings(seeds=[1, 1]))


def test_the_claim_judges_each_length_and_combines_them_by_the_one_rule():
    ce = {"lstm": [0.01, 0.30, 1.0, 2.0], "mogrifier": [0.02, 0.04, 0.5, 2.5]}
    best = {m: {str(n): {"test_cross_entropy": x, "embedding_size": 8} for n, x in zip((10, 20, 30, 40), ce[m])}
            for m in ce}
    seeds = {m: [[x - 0.01, x + 0.01] for x in values] for m, values in ce.items()}  # two seeds, sd 0.014 each
    judged = claim(_results(best, [10, 20, 30, 40], {"lstm": [8], "mogrifier": [8]}, seeds))
    solved, better = judged.parts
    assert solved.verdict == "partly reproduced"  # 10 solved by both, 20 not by the LSTM
    assert better.verdict == "partly reproduced"  # the Mogrifier better at 30 beyond the margin, worse at 40
    margin = 2 * math.sqrt(2 * 0.01**2)  # 2 sqrt(se1² + se2²), se = sd / sqrt(2) = 0.01 for two values 0.02 apart
    assert "30: LSTM 1.000 (0.990–1.010) vs Mogrifier 0.500 (0.490–0.510)" in better.evidence
    assert f"+0.500, margin {margin:.3f}" in better.evidence and "2 seeds per model" in better.evidence
    assert judged.verdict == "partly"
    stored = record(_results(best, [10, 20, 30, 40], {"lstm": [8], "mogrifier": [8]}, seeds))
    assert stored["verdict"] == "partly" and [r["verdict"] for r in stored["parts"]] == [solved.verdict, better.verdict]
    assert json.loads(json.dumps(stored)) == stored  # what the stage writes reads back equal (the notebook checks it)


def test_runner_on_a_tiny_config_writes_the_documented_keys_and_resumes_from_its_cache(tmp_path):
    real = yaml.safe_load((REPO / "params.yaml").read_text())
    block = tiny_settings()
    params = {"profile": "smoke", "data": real["data"],
              "experiments": {"reverse_copy": {p: block for p in PROFILES}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    out = run_reverse_copy("smoke", progress=False, root=tmp_path)
    results = json.loads(out.read_text())
    assert set(results) == set(RESULT_KEYS)
    assert results["lengths"] == [2, 3] and results["profile"] == "smoke"
    assert len(results["runs"]) == 8 and len(list((tmp_path / "runs" / "reverse_copy").glob("*.json"))) == 8
    for model in ("lstm", "mogrifier"):
        assert len(results["cross_entropy"][model]) == 2 and all(0 < ce < 3 for ce in results["cross_entropy"][model])
        assert all(p <= 1500 for p in results["parameters"][model])
    assert results["chance_cross_entropy"] == pytest.approx(math.log(5))
    assert results["claims"] == record(results)  # the stage stores the one claim path's verdicts
    provenance = json.loads(out.with_suffix(".provenance.json").read_text())
    assert provenance["profile"] == "smoke" and "wall_time_s" in provenance
    # a rerun reads the cached runs instead of training again (same records, same seconds)
    again = json.loads(run_reverse_copy("smoke", progress=False, root=tmp_path).read_text())
    assert again["runs"] == results["runs"]
    # at a profile other than the pipeline's, the results go to results/<profile>/, never over what DVC tracks
    pipeline = tmp_path / "results" / "reverse_copy.json"
    assert out == pipeline
    before = pipeline.read_bytes()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({**params, "profile": "cpu"}))
    elsewhere = run_reverse_copy("smoke", progress=False, root=tmp_path)
    assert elsewhere == tmp_path / "results" / "smoke" / "reverse_copy.json"
    assert elsewhere.with_suffix(".provenance.json").is_file() and pipeline.read_bytes() == before


# ------------------------------------------------------------------------------------------ stacked runs


def _separate_and_stacked(rounds, specs, steps=40, poisoned=None):
    """Each (lr, l2, seed) of ``specs`` trained on its own (train_model) and all of them as one stack; model
    ``poisoned`` starts with a NaN output bias, so its first loss is not finite."""
    from paperlib.experiments.reverse_copy.training import train_stacked

    data = reverse_copy(256, 4, vocab_size=8, seed=3)
    settings = [TrainSettings(steps=steps, batch_size=16, lr=lr, l2=l2, beta1=0.9, log_every=10, schedule="cosine")
                for lr, l2, _ in specs]

    def build(index, seed):
        model = build_model(8, 6, 12, 1, rounds, 2, seed=seed)
        if index == poisoned:
            with torch.no_grad():
                model.output.bias[0] = float("nan")
        return model

    separate = []
    for index, ((_, _, seed), s) in enumerate(zip(specs, settings)):
        model = build(index, seed)
        try:
            separate.append((model, train_model(model, data, s, seed=seed)))
        except FloatingPointError:
            separate.append((model, None))
    stacked = [build(index, seed) for index, (_, _, seed) in enumerate(specs)]
    curves = train_stacked(stacked, data, settings, [seed for _, _, seed in specs])
    return separate, list(zip(stacked, curves))


@pytest.mark.parametrize("rounds", [None, 3])
def test_a_stack_of_runs_trains_each_model_as_its_separate_run_does(rounds):
    separate, stacked = _separate_and_stacked(rounds, [(0.01, 0.0, 1), (0.003, 1e-4, 2), (0.02, 0.0, 3)])
    for (model, curve), (twin, twin_curve) in zip(separate, stacked):
        assert [c["step"] for c in twin_curve] == [c["step"] for c in curve] == [10, 20, 30, 40]
        # float32 rounding only (batched matmuls and the traceable recurrences instead of the fused kernels): measured
        # up to 8e-8 on the curves and 6e-7 on the weights after 60 such steps; 1e-5 leaves a 15x margin, while a
        # model trained with another model's learning rate, batches or initialisation is off by > 1e-2
        assert [c["loss"] for c in twin_curve] == pytest.approx([c["loss"] for c in curve], abs=1e-5)
        for p, q in zip(model.parameters(), twin.parameters()):
            torch.testing.assert_close(q, p, atol=1e-5, rtol=0)
    losses = [curve[-1]["loss"] for _, curve in stacked]
    assert len({round(x, 3) for x in losses}) == 3  # three different runs, not one run three times


def test_a_diverging_model_of_a_stack_stops_while_the_others_train_as_they_would_alone():
    separate, stacked = _separate_and_stacked(None, [(0.01, 0.0, 1), (0.01, 0.0, 2), (0.02, 0.0, 3)], steps=20,
                                              poisoned=1)
    assert separate[1][1] is None and stacked[1][1] is None  # the separate run raised; the stack reports it
    for before, after in zip(build_model(8, 6, 12, 1, None, 2, seed=2).parameters(), stacked[1][0].parameters()):
        if torch.isfinite(after).all():  # all but the poisoned bias: never updated (its NaN gradient is dropped)
            assert torch.equal(before, after)
    for index in (0, 2):
        assert [c["loss"] for c in stacked[index][1]] == pytest.approx([c["loss"] for c in separate[index][1]],
                                                                        abs=1e-5)


def test_a_stack_refuses_runs_that_cannot_share_a_step():
    from paperlib.experiments.reverse_copy.training import train_stacked

    data = reverse_copy(64, 3, vocab_size=5)
    models = [build_model(5, 4, 6, seed=s) for s in (1, 2)]
    base = TrainSettings(steps=3, batch_size=8, lr=0.01)
    with pytest.raises(ValueError, match="must share steps"):
        train_stacked(models, data, [base, TrainSettings(steps=4, batch_size=8, lr=0.01)], [1, 2])
    with pytest.raises(ValueError, match="one TrainSettings and one seed per model"):
        train_stacked(models, data, [base], [1, 2])
    with pytest.raises(ValueError, match="model 1 is configured differently"):  # other sizes
        train_stacked([models[0], build_model(5, 4, 7, seed=3)], data, [base, base], [1, 2])
    with pytest.raises(ValueError, match="does not match the model's"):
        train_stacked(models, reverse_copy(64, 3, vocab_size=6), [base, base], [1, 2])
    # equal shapes, other configuration: a stacked pass would run model 1 through model 0's (uncapped) gates
    with pytest.raises(ValueError, match="model 1 is configured differently"):
        train_stacked([models[0], build_model(5, 4, 6, capped_input_gate=True, seed=2)], data, [base, base], [1, 2])


def test_an_interrupted_stack_continues_from_its_checkpoint_to_the_uninterrupted_result(tmp_path):
    from paperlib.experiments.reverse_copy.training import train_stacked
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    data = reverse_copy(256, 4, vocab_size=8, seed=3)
    settings = [TrainSettings(steps=30, batch_size=16, lr=lr, l2=l2, beta1=0.9, log_every=10, schedule="cosine")
                for lr, l2 in ((0.01, 0.0), (0.003, 1e-4))]

    def models():  # what each process builds before it trains (or continues)
        return [build_model(8, 6, 12, 1, 3, 2, seed=seed) for seed in (1, 2)]

    whole = models()
    uninterrupted = train_stacked(whole, data, settings, [1, 2])
    path, steps = tmp_path / "stack.pt", []

    def interrupt(optimizer, args, kwargs):  # the process dies before its 18th update
        steps.append(1)
        if len(steps) == 18:
            raise KeyboardInterrupt

    handle = register_optimizer_step_pre_hook(interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            train_stacked(models(), data, settings, [1, 2], path, checkpoint_every=7)
    finally:
        handle.remove()
    assert torch.load(path, weights_only=False)["step"] == 14  # the last checkpoint before the interruption
    again = models()
    assert train_stacked(again, data, settings, [1, 2], path, checkpoint_every=7) == uninterrupted
    for model, twin in zip(whole, again):
        for p, q in zip(model.parameters(), twin.parameters()):
            assert_bitwise(q, p, why="the same kernels on the same inputs from an exact copy of the state")
    with pytest.raises(ValueError, match="written by another stack"):
        train_stacked(models(), data, settings[::-1], [1, 2], path, checkpoint_every=7)


def test_stacks_hold_the_runs_of_one_shape_in_grid_order():
    from paperlib.experiments.reverse_copy.reverse_copy import stacks

    block = tiny_settings(seeds=[1, 2, 3], l2_penalties=[0.0, 1e-4])
    grid = grid_points(ReverseCopyParams(**block))  # 2 models x 2 lengths, each 2 lr x 2 l2 x 3 seeds = 12 runs
    assert stacks(grid, ReverseCopyParams(**block)) == [[p] for p in grid]
    block["models"]["mogrifier"]["stack_size"] = 5  # the Mogrifier in stacks, the LSTM alone
    jobs = stacks(grid, ReverseCopyParams(**block))
    assert [len(job) for job in jobs] == [1] * 24 + [5, 5, 2] * 2
    for job in jobs:
        assert len({(p.model, p.length, p.embedding_size, p.hidden_size, p.mogrifier_rounds) for p in job}) == 1
    assert [p for job in jobs for p in job] == sorted(grid, key=lambda p: (p.model != "lstm", p.model == "lstm"
                                                                           or p.length))
    for bad in (0, -1, 1.5, True):
        block["models"]["lstm"]["stack_size"] = bad
        with pytest.raises(ValueError, match=r"models\.lstm\.stack_size must be null"):
            ReverseCopyParams(**block)


def test_the_experiment_in_stacks_gives_the_separate_runs_results_and_resumes_by_stack(tmp_path, monkeypatch):
    import paperlib.experiments.reverse_copy.reverse_copy as rc

    separate = rc.run_experiment(ReverseCopyParams(**tiny_settings(seeds=[1, 2])), tmp_path / "separate")
    block = tiny_settings(seeds=[1, 2])
    block["models"] = {name: {**spec, "stack_size": 3} for name, spec in block["models"].items()}
    settings = ReverseCopyParams(**block)
    stacked = rc.run_experiment(settings, tmp_path / "stacked")
    assert len(stacked["runs"]) == len(separate["runs"]) == 16
    for one, other in zip(separate["runs"], stacked["runs"]):
        assert (one["model"], one["length"], one["lr"], one["seed"]) == (other["model"], other["length"], other["lr"],
                                                                         other["seed"])
        # float rounding only (see the test above): 4 steps and evaluation
        assert other["test_cross_entropy"] == pytest.approx(one["test_cross_entropy"], abs=1e-5)
    # the run keys differ (a stacked run is another computation) and an interrupted stage resumes by stack
    assert not set(p.name for p in (tmp_path / "separate").glob("*.json")) & set(
        p.name for p in (tmp_path / "stacked").glob("*.json"))
    stack = rc.stacks(rc.grid_points(settings), settings)[0]
    for point in stack[1:]:
        (tmp_path / "stacked" / f"{point.model}-L{point.length}-s{point.seed}-{rc.run_key(point, settings)}.json").unlink()
    assert not list((tmp_path / "stacked").glob("stack-*.pt"))  # a finished stack's checkpoint is gone
    trained = []
    real = rc.run_stack
    monkeypatch.setattr(rc, "run_stack", lambda points, s, checkpoint=None: trained.append(points)
                        or real(points, s, checkpoint))
    again = rc.run_experiment(settings, tmp_path / "stacked")
    assert trained == [stack[1:]]  # only the missing runs of that stack trained, as one stack
    assert again["runs"][0] == stacked["runs"][0]
