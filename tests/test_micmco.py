"""Tests of the synthetic MICMCO experiment, Melis thesis §5.7.1 / §5.A / §5.C (paperlib/experiments/micmco/synthetic/,
paperlib/symbol_vae.py, paperlib/frontiers.py).

Frontier functions are checked against brute force (all pairs for dominance; an exact cell decomposition of the
union of dominated rectangles for the hypervolume); models at tiny sizes so that the file runs in seconds.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
import torch

from paperlib.estimators import analytic_elbo
from paperlib.experiments.micmco.synthetic.micmco_synthetic import (
    CONFIGURATIONS,
    FIGURES,
    TABLE_5_2,
    VQVAE,
    CategoricalVAE,
    Configuration,
    GaussianVAE,
    MicmcoSyntheticParams,
    build_model,
    claim_verdicts,
    evaluate,
    hypervolume,
    nll_at_mi,
    open_study,
    pareto_front,
    run_study,
    start_design,
    step_surrogates,
    study_name,
    summarise_configuration,
    train,
)
from tests.numerics import assert_close_after_reduction, reduction_tolerance

V, H = 40, 16  # tiny vocabulary and width


# ---------------------------------------------------------------------------------------------------
# models


def test_gaussian_model_shapes_and_standard_normal_prior():
    torch.manual_seed(0)
    model = GaussianVAE(V, hidden=H, latent_dim=5)
    x = torch.randint(V, (7,))
    q = model.posterior(x)
    assert q.batch_shape == (7,) and q.event_shape == (5,)
    z = q.rsample((3,))  # [K, B, D]
    assert model.log_likelihood(z, x).shape == (3, 7)
    expected_prior = torch.distributions.Normal(0.0, 1.0).log_prob(z).sum(-1)
    torch.testing.assert_close(model.log_prior(z), expected_prior)
    # q's variance is exp(g(o)): the encoder's second half of outputs is the log variance
    loc, log_var = model.encoder(x).chunk(2, -1)
    torch.testing.assert_close(q.base_dist.scale ** 2, log_var.exp())
    # decoder outputs a normalised distribution over the vocabulary
    all_x = torch.arange(V)
    z1 = torch.randn(1, 1, 5).expand(1, V, 5)
    assert torch.logsumexp(model.log_likelihood(z1, all_x)[0], 0).abs() < 1e-5


def test_categorical_model_shapes_uniform_prior_and_one_hidden_decoder_layer():
    torch.manual_seed(0)
    model = CategoricalVAE(V, hidden=H, num_latents=8, categories=10)
    x = torch.randint(V, (6,))
    q = model.posterior(x)
    assert q.batch_shape == (6,) and q.event_shape == (8,)
    z = q.sample((4,))  # [K, B, L]
    assert z.shape == (4, 6, 8) and int(z.max()) < 10
    assert model.log_likelihood(z, x).shape == (4, 6)
    torch.testing.assert_close(model.log_prior(z), torch.full((4, 6), -8 * math.log(10)))
    torch.testing.assert_close(q.base_dist.probs, torch.softmax(model.encoder(x).view(6, 8, 10), -1))
    assert sum(isinstance(m, torch.nn.Linear) for m in model.decoder.modules()) == 2  # one hidden + softmax layer


@pytest.mark.numerics
def test_vqvae_shapes_and_evaluation_is_fixed_rate():
    """q is a point mass and p(z) uniform: NLL = -ln p(x|z_q) + L ln C and MI = L ln C exactly (§5.A)."""
    torch.manual_seed(0)
    model = VQVAE(V, hidden=H, num_latents=3, categories=5)
    x = torch.randint(V, (9,))
    z_e = model.encode(x)
    index, codes = model.quantize(z_e)
    assert z_e.shape == codes.shape == (9, 3, H) and index.shape == (9, 3)
    # nearest code by brute force
    dist = ((z_e.unsqueeze(2) - model.codebook.unsqueeze(0)) ** 2).sum(-1)  # [B, L, C]
    # cdist vs this sum give the same argmin unless the two nearest codes tie within rounding (H terms): rule that out
    nearest_two = dist.detach().topk(2, dim=-1, largest=False).values
    rounding = reduction_tolerance(torch.float32, H, float(nearest_two.max()))["atol"]
    assert (nearest_two[..., 1] - nearest_two[..., 0] > rounding).all()
    assert torch.equal(index, dist.argmin(-1))
    log_lik = model.decode_log_likelihood(codes, x)[0].detach()  # [B]
    nll, mi = evaluate(model, x, num_samples=100)
    rate = 3 * math.log(5)
    # float32: a logsumexp over K = 100 identical samples minus ln K, then a mean over 9 symbols
    assert_close_after_reduction(mi, rate, n_terms=100 + 9, dtype=torch.float32, why="U^K - ln p^K vs L ln C")
    assert_close_after_reduction(nll, float(-log_lik.mean()) + rate, n_terms=100 + 9, dtype=torch.float32,
                                 why="-IWAE of a point mass vs -ln p(x|z_q) + L ln C")


def test_vqvae_straight_through_gradient_reaches_the_encoder():
    torch.manual_seed(0)
    model = VQVAE(V, hidden=H, num_latents=2, categories=4, beta=0.0)
    x = torch.randint(V, (5,))
    z_e = model.encode(x)
    _, codes = model.quantize(z_e)
    z_q = model.straight_through(z_e, codes)
    torch.testing.assert_close(z_q, codes)  # forward pass sees the codes
    log_lik = model.decode_log_likelihood(z_q, x).sum()
    grad_zq, grad_ze = torch.autograd.grad(log_lik, (z_q, z_e), retain_graph=True)
    torch.testing.assert_close(grad_ze, grad_zq)  # identity in the backward pass
    assert grad_ze.abs().sum() > 0
    model.zero_grad()
    loss, _ = model.eval().loss(x)  # beta = 0: only the reconstruction term, which reaches the encoder by ST
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.encoder.parameters())


def test_vqvae_ema_codebook_is_unbiased_mean_of_assigned_outputs():
    """Zero-initialised averages: after one update a used code is the mean of its assigned encoder outputs (up to
    Laplace smoothing), not pulled towards its initial value; an unused code keeps its initial value."""
    torch.manual_seed(0)
    model = VQVAE(V, hidden=3, num_latents=1, categories=3, decay=0.99)
    initial = model.codebook.clone()
    z_e = torch.tensor([[[1.0, 0.0, 0.0]], [[3.0, 0.0, 0.0]], [[0.0, -2.0, 0.0]]])  # [B=3, L=1, H=3]
    index = torch.tensor([[0], [0], [1]])
    model.update_codebook(z_e, index)
    # not rounding: Laplace smoothing (epsilon 1e-5 per code) scales a mean by about 1 - 3e-5; 1e-3 bounds that
    torch.testing.assert_close(model.codebook[0, 0], torch.tensor([2.0, 0.0, 0.0]), atol=1e-3, rtol=0)
    torch.testing.assert_close(model.codebook[0, 1], torch.tensor([0.0, -2.0, 0.0]), atol=1e-3, rtol=0)
    torch.testing.assert_close(model.codebook[0, 2], initial[0, 2])
    for _ in range(50):  # a code that stops being used stays near its last mean (smoothing shrinks it slowly: 1e-2)
        model.update_codebook(z_e[:2], index[:2])
    torch.testing.assert_close(model.codebook[0, 1], torch.tensor([0.0, -2.0, 0.0]), atol=1e-2, rtol=0)


def test_elbo_configuration_is_beta_vae_with_analytic_kl_prop13():
    torch.manual_seed(0)
    model = GaussianVAE(V, hidden=H, latent_dim=4)
    x = torch.randint(V, (6,))
    lam = 0.3
    torch.manual_seed(1)
    s = step_surrogates(model, x, CONFIGURATIONS["elbo"], {"lam": lam})
    torch.manual_seed(1)
    q = model.posterior(x)
    z = q.rsample((1,))
    expected = analytic_elbo(model.log_likelihood(z, x), q, model.prior(), beta=1 - lam)
    torch.testing.assert_close(s.model, expected)


def test_asymmetric_configurations_draw_the_larger_sample_count():
    assert CONFIGURATIONS["dreg16-1_kl"].num_samples == 16 and CONFIGURATIONS["dreg16-1_kl"].kl_samples == 1
    assert CONFIGURATIONS["vimco1-16_renyi"].num_samples == 16
    assert CONFIGURATIONS["vimco1-16_renyi"].objective_fn({"lam": 0.5, "alpha": 2.0}).num_lik_samples == 1
    assert CONFIGURATIONS["vimco1-16_renyi"].label == "VIMCO 1/16 Rényi"
    for figure in FIGURES.values():
        assert all(name in CONFIGURATIONS for name in figure.configurations)
    with pytest.raises(ValueError, match="choose one of"):
        Configuration("gaussian", "dreg", "entropy")


# ---------------------------------------------------------------------------------------------------
# training


def _continuous_run(lam: float, steps: int = 250) -> tuple[float, float, float, float]:
    config = Configuration("gaussian", "iwae", "kl", 4, 4)
    torch.manual_seed(0)
    model = GaussianVAE(16, hidden=32, latent_dim=4)
    symbols = torch.arange(16).repeat(4)  # every symbol, four times
    torch.manual_seed(5)
    init = evaluate(model, symbols, 50)
    batches = torch.randint(16, (steps, 32), generator=torch.Generator().manual_seed(2))
    result = train(model, config, {"learning_rate": 1e-2, "lam": lam}, batches)
    assert not result.diverged and result.steps == steps
    torch.manual_seed(5)
    return (*init, *evaluate(model, symbols, 50))


def test_training_with_mutual_information_term_increases_latent_usage():
    """The plain IWAE bound (lambda = 0) trains to the collapsed optimum (NLL ln V, MI ~ 0), while the KL objective
    (5.11) with lambda = 0.5 makes the model use its latents at a small cost in NLL (§5.7.1)."""
    init_nll, init_mi, nll_0, mi_0 = _continuous_run(0.0)
    _, _, nll_5, mi_5 = _continuous_run(0.5)
    assert init_mi < 0.05 and mi_0 < 0.05 and abs(nll_0 - math.log(16)) < 0.02, (init_mi, mi_0, nll_0)
    assert nll_0 < init_nll
    assert mi_5 > mi_0 + 0.7, (mi_0, mi_5)
    assert math.log(16) < nll_5 < math.log(16) + 0.3, nll_5


def test_training_flags_divergence_instead_of_continuing():
    config = CONFIGURATIONS["elbo"]
    model = GaussianVAE(V, hidden=H, latent_dim=2)
    with torch.no_grad():
        model.encoder.head.bias[2:].fill_(200.0)  # log variance so large that exp overflows
    result = train(model, config, {"learning_rate": 1e-3, "lam": 0.5}, torch.randint(V, (5, 4)))
    assert result.diverged and result.steps == 1


# ---------------------------------------------------------------------------------------------------
# frontiers


def _brute_force_front(nll: np.ndarray, mi: np.ndarray) -> set[int]:
    keep = set()
    for i in range(len(nll)):
        dominated = any(
            (nll[j] <= nll[i] and mi[j] >= mi[i] and (nll[j] < nll[i] or mi[j] > mi[i]))
            or (nll[j] == nll[i] and mi[j] == mi[i] and j < i)
            for j in range(len(nll)) if j != i
        )
        if not dominated:
            keep.add(i)
    return keep


def _brute_force_hypervolume(nll: np.ndarray, mi: np.ndarray, ref: tuple[float, float], cap: float) -> float:
    """Exact area of the union of rectangles [nll_i, ref_nll] x [ref_mi, min(mi_i, cap)] by cell decomposition."""
    mi = np.minimum(mi, cap)
    xs = np.unique(np.clip(np.concatenate([nll, [ref[0]]]), None, ref[0]))
    ys = np.unique(np.clip(np.concatenate([mi, [ref[1]]]), ref[1], None))
    area = 0.0
    for (x0, x1), (y0, y1) in itertools.product(zip(xs, xs[1:]), zip(ys, ys[1:])):
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        if any(nll[i] <= cx and mi[i] >= cy for i in range(len(nll))):
            area += (x1 - x0) * (y1 - y0)
    return area


@pytest.mark.parametrize("seed", range(6))
def test_pareto_front_and_hypervolume_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 14))
    nll = np.round(rng.uniform(9.0, 11.5, n), 1)  # rounding makes ties and duplicates likely
    mi = np.round(rng.uniform(-0.5, 10.0, n), 1)
    front = pareto_front(nll, mi)
    assert set(front.tolist()) == _brute_force_front(nll, mi)
    assert np.all(np.diff(mi[front]) > 0) and np.all(np.diff(nll[front]) > 0)  # sorted by MI, NLL increasing
    for cap in (math.inf, 9.2):
        ref = (10.5, 0.0)
        expected = _brute_force_hypervolume(nll, mi, ref, cap)
        # float64 areas of at most 13 x 13 cells of size <= 10, summed in another order: <= ~1e-13; 1e-9 is a margin
        assert hypervolume(nll, mi, ref, mi_cap=cap) == pytest.approx(expected, abs=1e-9)


def test_pareto_front_ignores_non_finite_points_and_hypervolume_of_ideal_model():
    nll = np.array([9.3, np.nan, 9.5, 9.2])
    mi = np.array([1.0, 5.0, 4.0, np.inf])
    assert pareto_front(nll, mi).tolist() == [0, 2]
    ln_v = math.log(10_000)
    # an ideal frontier: NLL = ln V at every MI up to ln V (and an over-estimated MI above it is capped)
    assert hypervolume([ln_v, ln_v], [3.0, 12.0], (ln_v + 1.0, 0.0), mi_cap=ln_v) == pytest.approx(ln_v)
    assert hypervolume([], [], (10.0, 0.0)) == 0.0


def test_nll_at_mi_interpolates_a_hand_made_frontier():
    front_mi = [1.0, 3.0, 7.0]
    front_nll = [9.2, 9.4, 10.2]
    got = nll_at_mi(front_mi, front_nll, [0.0, 1.0, 2.0, 5.0, 7.0, 7.5])
    np.testing.assert_allclose(got[:5], [9.2, 9.2, 9.3, 9.8, 10.2])
    assert np.isnan(got[5])  # beyond the frontier's largest MI: not reached
    assert np.isnan(nll_at_mi([], [], [1.0])).all()
    with pytest.raises(ValueError, match="Pareto frontier"):
        nll_at_mi([1.0, 2.0], [9.5, 9.3], [1.5])


def test_summarise_configuration_uses_frontier_and_normalises_hypervolume():
    records = [{"number": i, "nll": n, "mi": m} for i, (n, m) in
               enumerate([(9.3, 2.0), (9.6, 1.0), (9.5, 6.0), (float("nan"), float("nan"))])]
    summary = summarise_configuration(records, optimum=9.0, margin=1.0, levels=[2.0, 4.0, 7.0])
    assert [p["trial"] for p in summary["frontier"]] == [0, 2]
    assert summary["hypervolume"] == pytest.approx(0.7 * 2.0 + 0.5 * 4.0)
    assert summary["normalised_hypervolume"] == pytest.approx(summary["hypervolume"] / 9.0)
    assert summary["nll_at_mi"][0] == pytest.approx(9.3) and summary["nll_at_mi"][1] == pytest.approx(9.4)
    assert summary["nll_at_mi"][2] is None


def _results(hv: dict[str, float], frontiers: dict[str, list[tuple[float, float]]] | None = None) -> dict:
    frontiers = frontiers or {}
    configs = {name: {"normalised_hypervolume": value,
                      "frontier": [{"mi": m, "nll": n} for m, n in frontiers.get(name, [])]}
               for name, value in hv.items()}
    return {"optimum_nll": math.log(10_000), "configurations": configs}


def test_claim_verdicts_follow_their_rules():
    ln_v = math.log(10_000)
    hv = {"vimco16_kl": 0.50, "vimco16_renyi": 0.60, "vimco16_power": 0.55,
          "vimco16-1_kl": 0.40, "vimco1-16_kl": 0.45, "vimco16-1_renyi": 0.65, "vimco1-16_renyi": 0.10,
          "dreg16_kl": 0.30, "dreg16_renyi": 0.20, "dreg16_power": 0.10,
          "iwae16_kl": 0.30, "iwae16_renyi": 0.31}  # within the tie margin: not "better"
    good_front = [(1.0, ln_v), (8.0, ln_v + 0.1)]
    verdicts = {v["claim"]: v for v in claim_verdicts(_results(hv, {"vimco16_renyi": good_front}))}
    assert verdicts["VIMCO 16 reaches near-optimal NLL at high MI"]["verdict"] == "reproduced"
    assert verdicts["multi-sample in both terms beats 16/1 and 1/16"]["verdict"] == "partly reproduced"  # 1 of 2
    assert verdicts["Rényi slightly better than KL"]["verdict"] == "not reproduced"  # 1 of 3 (vimco16)
    assert verdicts["power objective between KL and Rényi"]["verdict"] == "partly reproduced"  # vimco16 only
    bad_front = [(1.0, ln_v), (5.0, ln_v + 0.3)]  # high MI never reached
    verdicts = {v["claim"]: v["verdict"]
                for v in claim_verdicts(_results({"vimco16_kl": 0.1}, {"vimco16_kl": bad_front}))}
    assert verdicts["VIMCO 16 reaches near-optimal NLL at high MI"] == "not reproduced"
    assert verdicts["power objective between KL and Rényi"] == "not run at this profile"


# ---------------------------------------------------------------------------------------------------
# tuning


def test_search_space_follows_table_5_2_and_design_is_prefix_stable():
    assert (TABLE_5_2["learning_rate"].low, TABLE_5_2["learning_rate"].high) == (1e-4, 1e-2)
    assert (TABLE_5_2["lam"].low, TABLE_5_2["lam"].high) == (-0.05, 0.9999)
    config = CONFIGURATIONS["vqvae"]
    long, short = start_design(config, 9, seed=3), start_design(config, 4, seed=3)
    assert long[:4] == short
    for point in long:
        assert 1 <= point["num_latents"] <= 8 and isinstance(point["num_latents"], int)
        assert 2 <= point["categories"] <= 20
        assert 1e-4 <= point["learning_rate"] <= 1e-2 and 0.01 <= point["vq_beta"] <= 20.0
    assert set(start_design(CONFIGURATIONS["dreg16_power"], 1, 0)[0]) == {"learning_rate", "alpha"}


def test_settings_reject_unknown_configurations():
    with pytest.raises(ValueError, match="choose 'all' or from"):
        MicmcoSyntheticParams(configurations=["dreg17_kl"], trials=2, startup_trials=1, steps=1, batch_size=1,
                              vocab_size=10)


def test_study_resumes_without_repeating_trials(tmp_path):
    """Two trials, reopen the SQLite study, one more: three finished trials, distinct, the first two from the
    Halton start design and the third from the GP sampler."""
    settings = dict(configurations=["dreg16_renyi"], startup_trials=2, steps=3, batch_size=4, vocab_size=20,
                    eval_symbols=6, eval_samples=5, hidden_size=8, latent_dim=2, workers=1)
    storage = f"sqlite:///{tmp_path / 'study.sqlite3'}"
    first = run_study("dreg16_renyi", MicmcoSyntheticParams(trials=2, **settings), storage, "smoke")
    again = run_study("dreg16_renyi", MicmcoSyntheticParams(trials=2, **settings), storage, "smoke")
    assert again == first  # nothing left to do
    records = run_study("dreg16_renyi", MicmcoSyntheticParams(trials=3, **settings), storage, "smoke")
    assert [r["number"] for r in records] == [0, 1, 2]
    assert records[:2] == first
    assert len({tuple(sorted(r["params"].items())) for r in records}) == 3
    design = start_design(CONFIGURATIONS["dreg16_renyi"], 2, seed=0)
    assert [r["params"] for r in records[:2]] == design
    assert all(r["state"] == "COMPLETE" and math.isfinite(r["nll"]) and math.isfinite(r["mi"]) for r in records)
    assert all(r["mi"] == min(r["mi_estimate"], math.log(20)) for r in records)  # the tuner sees MI capped at ln V
    assert study_name("dreg16_renyi", "smoke", MicmcoSyntheticParams(trials=3, **settings)) == \
        study_name("dreg16_renyi", "smoke", MicmcoSyntheticParams(trials=9, **settings))


def test_build_model_of_each_latent_type():
    params = {"num_latents": 3, "categories": 7, "vq_beta": 0.5, "vq_one_minus_decay": 0.01}
    assert isinstance(build_model(CONFIGURATIONS["elbo"], V, H), GaussianVAE)
    assert isinstance(build_model(CONFIGURATIONS["vimco16_kl"], V, H), CategoricalVAE)
    vq = build_model(CONFIGURATIONS["vqvae"], V, H, params=params)
    assert (vq.num_latents, vq.categories, vq.beta, vq.decay) == (3, 7, 0.5, pytest.approx(0.99))


def test_an_interrupted_trial_is_retried_with_its_design_point_and_seed_and_costs_no_budget(tmp_path):
    """A trial a killed run left RUNNING is retried with the same design point and seed and left out of the
    records: the resumed study still finishes ``trials`` real trials, and its start-design trials equal those of a
    study that was never interrupted. (Later, sampler-chosen trials may differ: the sampler's random state
    restarts with each process.)"""
    settings = MicmcoSyntheticParams(configurations=["dreg16_renyi"], trials=3, startup_trials=2, steps=3,
                                     batch_size=4, vocab_size=20, eval_symbols=6, eval_samples=5, hidden_size=8,
                                     latent_dim=2, workers=1)
    clean = run_study("dreg16_renyi", settings, f"sqlite:///{tmp_path / 'clean.sqlite3'}", "smoke")

    storage = f"sqlite:///{tmp_path / 'killed.sqlite3'}"
    run_study("dreg16_renyi", dataclasses.replace(settings, trials=1), storage, "smoke")
    study = open_study(study_name("dreg16_renyi", "smoke", settings), storage, settings.seed,
                       settings.startup_trials)
    study.enqueue_trial(dict(start_design(CONFIGURATIONS["dreg16_renyi"], 2, settings.seed)[1]))
    study.ask()  # trial 1 starts, then the process dies: it stays RUNNING
    resumed = run_study("dreg16_renyi", settings, storage, "smoke")
    assert [r["number"] for r in resumed] == [0, 2, 3]  # trial 1 was interrupted and is not a record
    assert all(r["state"] == "COMPLETE" for r in resumed)

    def same(record):
        return {k: v for k, v in record.items() if k not in ("number", "train_seconds")}
    assert [same(r) for r in resumed[:2]] == [same(r) for r in clean[:2]]  # same design points, same seeds
    states = {t.number: (t.state.name, t.user_attrs.get("interrupted")) for t in study.get_trials(deepcopy=False)}
    assert states[1] == ("FAIL", True)
