"""Trials x seeds of a PTB MICMCO curve trained as one stacked model (paperlib.stacked, micmco/ptb/stacked_trials):
equal to separate runs, resumable in chunks, and the pieces they rest on."""

from __future__ import annotations

import dataclasses
import math
import time

import pytest
import torch
from torch import nn
from torch.distributions import Categorical, Independent, Normal

from paperlib.data import pad_sentences, sentence_batches
from paperlib.estimators import sample
from paperlib.experiments.micmco.ptb.design import MicmcoPtbParams, curve_of
from paperlib.experiments.micmco.ptb.data import SentenceData
from paperlib.experiments.micmco.ptb.data import BatchStream
from paperlib.experiments.micmco.ptb.stacked_trials import StackedTrials, TrialSpec
from paperlib.experiments.micmco.ptb.trials import build_model, run_trial, train, trial_record
from paperlib.models.masks import DropoutRates
from paperlib.models.sentence_vae import SentenceVAE
from paperlib.stacked import StackedModels, pad_to

V, EOS = 30, 0
SETTINGS = MicmcoPtbParams(figures=["5.12"], trials=2, startup_trials=2, steps=6, batch_size=5, hidden_size=8,
                           latent_dim=3, num_categorical=2, categories=3, eval_samples=6, workers=1)
BASE = {"learning_rate": 3e-3, "lam": 0.3, "alpha": 1.5, "input_dropout": 0.2, "state_dropout": 0.3,
        "output_dropout": 0.1, "l2_penalty": 1e-3}
# three trials of one curve: different learning rates, lambdas and seeds (so different batches and draws); the third
# drops out neither inputs nor state (no masks there: the stack gives it ones beside the others' masks)
TRIALS = ((3e-3, 0.3, 1, {}), (1e-2, -0.02, 2, {}), (5e-3, 0.8, 3, {"input_dropout": 0.0, "state_dropout": 0.0}))


def _sentences(n: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 9, (n,), generator=g)
    return [torch.cat([torch.randint(1, V, (int(k),), generator=g), torch.tensor([EOS])]) for k in lengths]


@pytest.fixture(scope="module")
def data() -> SentenceData:
    train = _sentences(60, 0)
    return SentenceData(train, train[:10], _sentences(10, 1), _sentences(10, 2), V, EOS)


def _specs(curve_name: str) -> list[TrialSpec]:
    curve = curve_of(curve_name)
    return [TrialSpec({k: v for k, v in {**BASE, "learning_rate": lr, "lam": lam, **rates}.items()
                       if k in curve.hyperparameters}, seed) for lr, lam, seed, rates in TRIALS]


# one curve per estimator family and regularisation regime: DReG (two surrogates) and VIMCO (score function), one
# and 16 samples, KL / Rényi / power objectives, shared and naive masks, L2 (weight decay per trial), no dropout
CURVES = ["dreg16_kl.shared", "vimco16_renyi.naive", "dreg1.train", "vimco1.l2", "dreg16_power.train"]


@pytest.mark.parametrize("name,device", [*((name, "cpu") for name in CURVES),
                                         *(pytest.param(name, "cuda", marks=pytest.mark.cuda)
                                           for name in ("dreg16_kl.shared", "vimco16_renyi.naive"))])
def test_a_stack_of_trials_equals_separate_runs(name, device, data, float64):
    """Every trial of the stack ends with the weights and final objective of its separate run. In float64 the
    stack and the separate runs differ only by rounding in differently shaped matmuls (about 1e-16 per operation);
    Adam's normalised steps carry such differences through six steps without growth beyond ~1e-13 (measured
    4e-14), so 1e-10 leaves room yet fails on any real difference (a wrong batch, draw or learning rate moves the
    weights by ~1e-3). On CUDA the separate run draws from the default CUDA generator, the stack from its copy."""
    curve, specs = curve_of(name), _specs(name)
    run = StackedTrials(curve, specs, SETTINGS, data, device)
    assert run.run()
    for spec, model, result in zip(specs, run.models, run.results()):
        torch.manual_seed(spec.seed)
        ref = build_model(curve, spec.params, SETTINGS, V).to(device)
        start = [p.detach().clone() for p in ref.parameters()]
        expected = train(ref, curve, spec.params, data.train, EOS, SETTINGS.steps, SETTINGS.batch_size, spec.seed)
        assert not result.diverged and result.steps == expected.steps == SETTINGS.steps
        assert result.final_objective == pytest.approx(expected.final_objective, abs=1e-10)
        for got, want, before in zip(model.parameters(), ref.parameters(), start):
            assert torch.allclose(got, want, rtol=0, atol=1e-10)
            assert not torch.equal(want, before)  # every weight trained, so equality is not trivial


def test_a_trial_does_not_depend_on_its_company(data, float64):
    """Trial 2 trained alone and trained beside two others ends at the same weights (its own random stream)."""
    curve, specs = curve_of("vimco16_kl.shared"), _specs("vimco16_kl.shared")
    together = StackedTrials(curve, specs, SETTINGS, data, "cpu")
    alone = StackedTrials(curve, specs[1:2], SETTINGS, data, "cpu")
    together.run(), alone.run()
    for a, b in zip(together.models[1].parameters(), alone.models[0].parameters()):
        assert torch.allclose(a, b, rtol=0, atol=1e-10)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_a_run_interrupted_and_resumed_from_its_checkpoint_ends_bit_for_bit_where_one_run_ends(device, data, tmp_path):
    """Stopped after 2 of 6 steps (12 sentences of 60 drawn: the batch streams resume mid-epoch) and after 5 (25:
    past an epoch's end, whose last small batch is dropped), saved, loaded into a fresh stack: the same weights as an
    uninterrupted run, bit for bit (the same kernels on the same inputs)."""
    curve, specs = curve_of("dreg16_renyi.shared"), _specs("dreg16_renyi.shared")
    settings = dataclasses.replace(SETTINGS, steps=14)  # 70 sentences a trial: into a second epoch
    straight = StackedTrials(curve, specs, settings, data, device)
    straight.run()
    first = StackedTrials(curve, specs, settings, data, device)
    assert not first.run(until=2)
    first.save(tmp_path / "run.pt")
    del first
    middle = StackedTrials.load(tmp_path / "run.pt", curve, specs, settings, data, device)
    assert middle.step_count == 2 and not middle.run(until=13)
    middle.save(tmp_path / "run.pt")
    resumed = StackedTrials.load(tmp_path / "run.pt", curve, specs, settings, data, device)
    assert resumed.step_count == 13 and resumed.run()
    for a, b in zip(straight.models, resumed.models):
        for p, q in zip(a.parameters(), b.parameters()):
            assert torch.equal(p, q)
    assert [r.final_objective for r in resumed.results()] == [r.final_objective for r in straight.results()]
    card = "cpu" if device == "cpu" else torch.cuda.get_device_name()
    assert [(c["from_step"], c["to_step"], c["device"]) for c in resumed.chunks] == [(0, 2, card), (2, 13, card),
                                                                                    (13, 14, card)]
    with pytest.raises(ValueError, match="another run"):
        StackedTrials.load(tmp_path / "run.pt", curve, specs[:2], settings, data, device)


def test_a_batch_stream_is_the_shuffled_epochs_of_full_batches_and_resumes_where_it_was():
    sentences = _sentences(23, 5)
    stream = BatchStream(sentences, 5, EOS, 7)
    generator = torch.Generator().manual_seed(7)
    expected = [b for _ in range(3) for b in sentence_batches(sentences, 5, EOS, shuffle=True, generator=generator)
                if len(b.lengths) == 5]  # 4 full batches an epoch, the 3 left over dropped
    drawn = [next(stream) for _ in range(12)]
    assert all(torch.equal(a.targets, b.targets) for a, b in zip(drawn, expected))
    for stop in (0, 2, 4, 7):  # before the first epoch, inside one, at its end, inside the second
        head = BatchStream(sentences, 5, EOS, 7)
        for _ in range(stop):
            next(head)
        tail = BatchStream(sentences, 5, EOS, 0)
        tail.restore(head.state())
        assert all(torch.equal(next(tail).targets, b.targets) for b in expected[stop:12])


def test_a_past_deadline_stops_a_stack_and_its_trials_give_run_trial_records(data, monkeypatch):
    """``run`` with a deadline already past takes no step (and records no chunk); run on, each trial's record
    (training outcome and evaluation) is that of ``run_trial`` for the same trial up to float32 rounding (~1e-6)."""
    monkeypatch.setenv("PAPERLIB_DEVICE", "cpu")  # run_trial too: a GPU machine's CUDA draws other numbers
    curve, specs = curve_of("dreg1.shared"), _specs("dreg1.shared")
    run = StackedTrials(curve, specs, SETTINGS, data, "cpu")
    assert not run.run(deadline=time.time() - 1) and run.step_count == 0 and run.chunks == []
    assert run.run() and run.step_count == SETTINGS.steps
    for spec, result, model in zip(specs, run.results(), run.models):
        record = trial_record(curve, result, model, data, SETTINGS, spec.seed)
        expected, _ = run_trial(curve, spec.params, data, SETTINGS, spec.seed)
        assert record["steps"] == expected["steps"] and record["diverged"] is expected["diverged"] is False
        for key in ("nll", "kl", "elbo_nll", "q_kl", "final_objective"):
            assert record[key] == pytest.approx(expected[key], rel=1e-4, abs=1e-5)
    assert sum(r.seconds for r in run.results()) == pytest.approx(run.seconds)  # each trial its share


@pytest.mark.parametrize("name", ["dreg16_kl.train", "dreg16_kl.shared"])  # decoders per trial; vmapped
def test_a_diverging_trial_stops_where_its_separate_run_stops_and_the_others_train_on(name, data, float64):
    curve = curve_of(name)
    specs = _specs(name)
    specs[1] = TrialSpec({**specs[1].params, "learning_rate": 1e12}, specs[1].seed)  # weights ~1e12 after a step
    run = StackedTrials(curve, specs, SETTINGS, data, "cpu")
    run.run()
    results = run.results()
    for spec, model, result in zip(specs, run.models, results):
        torch.manual_seed(spec.seed)
        ref = build_model(curve, spec.params, SETTINGS, V)
        expected = train(ref, curve, spec.params, data.train, EOS, SETTINGS.steps, SETTINGS.batch_size, spec.seed)
        assert (result.diverged, result.steps) == (expected.diverged, expected.steps)
        for got, want in zip(model.parameters(), ref.parameters()):  # the stopped trial: its weights at its stop
            assert torch.allclose(got, want, rtol=1e-10, atol=1e-10)
    assert results[1].diverged and results[1].steps == 2 and not results[0].diverged and not results[2].diverged
    stopped = [p.detach().clone() for p in run.models[1].parameters()]
    assert all(p.isfinite().all() for p in stopped)  # finite weights, whose objective was not
    run.steps += 2  # two more steps: the stopped trial's weights stay exactly as they are
    run.run()
    assert all(torch.equal(a, b) for a, b in zip(run.models[1].parameters(), stopped))


def test_bad_stacks_are_clear_errors(data):
    with pytest.raises(ValueError, match="missing"):
        StackedTrials(curve_of("dreg1.shared"), [TrialSpec({"learning_rate": 1e-3, "lam": 0.1}, 0)], SETTINGS, data)
    with pytest.raises(ValueError, match="at least one"):
        StackedTrials(curve_of("dreg1.train"), [], SETTINGS, data)
    with pytest.raises(ValueError, match="one architecture"):
        StackedModels([nn.Linear(3, 2), nn.Linear(3, 4)])


def test_stacked_models_call_equals_calling_each_model():
    torch.manual_seed(0)
    models = [nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2)) for _ in range(3)]
    x = torch.randn(3, 7, 4)
    stack = StackedModels(models)
    out = stack.call(lambda m, inputs: m(inputs), x)
    for i, m in enumerate(models):
        assert torch.allclose(out[i], m(x[i]), atol=1e-6)
    shared = stack.call(lambda m, inputs: m(inputs), x[0], in_dims=(None,), members=[2, 0])
    assert torch.allclose(shared[0], models[2](x[0]), atol=1e-6) and torch.allclose(shared[1], models[0](x[0]), atol=1e-6)
    out.sum().backward()  # gradients reach each model's own parameters
    assert all(p.grad is not None for m in models for p in m.parameters())


def test_pad_to_extends_one_dimension_with_the_value_and_keeps_dtype():
    words = torch.tensor([[1, 2], [3, 4]])
    assert torch.equal(pad_to(words, 4, 1, 9), torch.tensor([[1, 2, 9, 9], [3, 4, 9, 9]]))
    mask = torch.ones(2, 3, dtype=torch.bool)
    padded = pad_to(mask, 5, 0, False)
    assert padded.dtype == torch.bool and padded.shape == (5, 3) and not padded[2:].any() and padded[:2].all()
    assert pad_to(words, 2, 1) is words  # already that long
    with pytest.raises(ValueError, match="down to"):
        pad_to(words, 1, 1)


@pytest.mark.parametrize("latent", ["gaussian", "categorical"])
def test_the_dense_likelihood_computes_the_sparse_one(latent):
    """Float32 rounding in a different summation order: the two forms agree to ~1e-6 on values of order 10."""
    torch.manual_seed(0)
    model = SentenceVAE(V, 8, latent, 3, 2, 3, DropoutRates(input=0.3, state=0.2, output=0.1))
    batch = pad_sentences(_sentences(6, 4), EOS)
    z = model.posterior(batch).sample((4,))
    masks = model.sample_masks(4, 6, batch.inputs.shape[1])
    assert torch.allclose(model.log_likelihood(z, batch, masks, dense=True), model.log_likelihood(z, batch, masks),
                          atol=1e-4)


def test_sampling_from_a_generator_draws_what_the_default_generator_draws():
    torch.manual_seed(1)
    gaussian = Independent(Normal(torch.randn(4, 3), torch.rand(4, 3) + 0.1), 1)
    categorical = Independent(Categorical(logits=torch.randn(4, 2, 5)), 1)
    for dist, reparameterised in ((gaussian, True), (gaussian, False), (categorical, False)):
        torch.manual_seed(3)
        expected = dist.rsample((7,)) if reparameterised else dist.sample((7,))
        torch.manual_seed(3)
        generator = torch.Generator()
        generator.set_state(torch.get_rng_state())
        assert torch.equal(sample(dist, (7,), reparameterised, generator), expected)
    with pytest.raises(ValueError, match="reparameterised"):
        sample(categorical, (2,), True, torch.Generator())
