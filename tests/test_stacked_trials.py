"""Trials x seeds of a PTB MICMCO curve trained as one stacked model (paperlib.stacked, micmco/ptb/stacked_trials):
equal to separate runs, resumable in chunks, and the pieces they rest on."""

from __future__ import annotations

import math
import time

import pytest
import torch
from torch import nn
from torch.distributions import Categorical, Independent, Normal

from paperlib.data import pad_sentences
from paperlib.estimators import sample
from paperlib.experiments.micmco.ptb.design import MicmcoPtbParams, curve_of
from paperlib.experiments.micmco.ptb.data import SentenceData
from paperlib.experiments.micmco.ptb.stacked_trials import StackedTrials, TrialSpec, run_stacked_trials
from paperlib.experiments.micmco.ptb.trials import build_model, run_trial, train
from paperlib.models.masks import DropoutRates
from paperlib.models.sentence_vae import SentenceVAE
from paperlib.stacked import StackedModels

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


@pytest.fixture
def float64():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


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


def test_a_run_interrupted_and_resumed_from_its_checkpoint_ends_bit_for_bit_where_one_run_ends(data, tmp_path):
    curve, specs = curve_of("dreg16_renyi.shared"), _specs("dreg16_renyi.shared")
    straight = StackedTrials(curve, specs, SETTINGS, data, "cpu")
    straight.run()
    first = StackedTrials(curve, specs, SETTINGS, data, "cpu")
    assert not first.run(until=2)
    first.save(tmp_path / "run.pt")
    del first
    resumed = StackedTrials.load(tmp_path / "run.pt", curve, specs, SETTINGS, data, "cpu")
    assert resumed.step_count == 2 and resumed.run()
    for a, b in zip(straight.models, resumed.models):
        for p, q in zip(a.parameters(), b.parameters()):
            assert torch.equal(p, q)
    assert [r.final_objective for r in resumed.results()] == [r.final_objective for r in straight.results()]
    assert [(c["from_step"], c["to_step"], c["device"]) for c in resumed.chunks] == [(0, 2, "cpu"), (2, 6, "cpu")]
    with pytest.raises(ValueError, match="another run"):
        StackedTrials.load(tmp_path / "run.pt", curve, specs[:2], SETTINGS, data, "cpu")


def test_a_past_deadline_stops_the_run_and_a_later_call_finishes_it_with_run_trial_records(data, tmp_path):
    """``run_stacked_trials`` with a deadline saves and returns no records; called again it continues, and its
    records (training outcome and evaluation) are those of ``run_trial`` for the same trials."""
    curve, specs = curve_of("dreg1.shared"), _specs("dreg1.shared")
    checkpoint = tmp_path / "stack.pt"
    records, run = run_stacked_trials(curve, specs, data, SETTINGS, checkpoint, deadline=time.time() - 1)
    assert records is None and run.step_count == 0 and checkpoint.exists()
    records, run = run_stacked_trials(curve, specs, data, SETTINGS, checkpoint)
    assert run.step_count == SETTINGS.steps
    for spec, record in zip(specs, records):
        expected, _ = run_trial(curve, spec.params, data, SETTINGS, spec.seed)
        assert record["steps"] == expected["steps"] and record["diverged"] is expected["diverged"] is False
        for key in ("nll", "kl", "elbo_nll", "q_kl", "final_objective"):  # float32: rounding only (~1e-6)
            assert record[key] == pytest.approx(expected[key], rel=1e-4, abs=1e-5)


def test_a_diverging_trial_stops_where_its_separate_run_stops_and_the_others_train_on(data, float64):
    curve = curve_of("dreg16_kl.train")
    specs = _specs("dreg16_kl.train")
    specs[1] = TrialSpec({**specs[1].params, "learning_rate": math.inf}, specs[1].seed)  # NaN weights after a step
    run = StackedTrials(curve, specs, SETTINGS, data, "cpu")
    run.run()
    results = run.results()
    for spec, model, result in zip(specs, run.models, results):
        torch.manual_seed(spec.seed)
        ref = build_model(curve, spec.params, SETTINGS, V)
        expected = train(ref, curve, spec.params, data.train, EOS, SETTINGS.steps, SETTINGS.batch_size, spec.seed)
        assert (result.diverged, result.steps) == (expected.diverged, expected.steps)
        if not expected.diverged:
            for got, want in zip(model.parameters(), ref.parameters()):
                assert torch.allclose(got, want, rtol=0, atol=1e-10)
    assert results[1].diverged and results[1].steps == 2 and not results[0].diverged and not results[2].diverged


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
