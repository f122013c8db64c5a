"""Tests of the MICMCO estimators, Melis thesis ch. 5 (paperlib/estimators.py).

Exact references come from two small models:

- a discrete one (M = 4 latent states, V = 3 symbols) where p(x), p(z|x), the KL and Renyi divergences and every
  expectation over z_{1:K} ~ q are computed by enumerating all M^K sample tuples (differentiable, so it also
  gives exact gradients);
- a scalar linear-Gaussian one (z ~ N(0, 1), x|z ~ N(a z + b, 0.8^2), q = N(m, s^2)) with a closed-form ELBO and,
  for K = 2, expectations by tensor-product Gauss-Hermite quadrature (converged to ~1e-6).

Monte Carlo checks hold a fixed seed and compare against the standard error of N independent replicates, whose
per-replicate gradients come from one backward pass by giving each replicate its own copy of the parameters.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.distributions import Categorical, Independent, Normal, kl_divergence

from paperlib.estimators import (
    MonteCarloObjective,
    analytic_elbo,
    detach_distribution,
    dreg_surrogates,
    dreg_weights,
    iwae_bound,
    kl_objective,
    mutual_information,
    power_objective,
    reinforce_surrogate,
    renyi_objective,
    reparameterised_surrogate,
    self_normalised_log_likelihood,
    stl_surrogate,
    surrogates,
    vimco_surrogate,
)
from tests.numerics import assert_close_after_reduction

DTYPE = torch.float64
# An estimator against its closed form written out in the test, or batched against per-example: float64, both sides
# reduce over at most K = 16 samples (means, logsumexp, softmax weights) in another order, on log-weights of magnitude
# up to about 10, hence the scale (a modelling error, a wrong weight or sign, is >= 1e-3).
FORMULA = dict(n_terms=16, scale=10.0, why="the estimator vs its closed form or per-example values, in another order")


def _random_samples(k: int, b: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    log_px_z = -torch.rand(k, b, generator=g, dtype=DTYPE) * 3.0
    log_pz = torch.randn(k, b, generator=g, dtype=DTYPE) - 1.0
    log_qz = torch.randn(k, b, generator=g, dtype=DTYPE) - 1.0
    return log_px_z, log_pz, log_qz


# ---------------------------------------------------------------------------------------------------
# discrete enumerable model

M, V, X_OBS = 4, 3, 0
_G = torch.Generator().manual_seed(0)
LOG_PRIOR = torch.log_softmax(0.5 * torch.randn(M, generator=_G, dtype=DTYPE), 0)  # [M]
THETA = 2.0 * torch.randn(M, V, generator=_G, dtype=DTYPE)  # decoder logits, p(x|z) = softmax(THETA[z])[x]
PHI = torch.randn(M, generator=_G, dtype=DTYPE)  # encoder logits, q(z|x) = softmax(PHI)


def _exact(log_lik: torch.Tensor, log_prior: torch.Tensor = LOG_PRIOR) -> dict[str, torch.Tensor]:
    """ln p(x), the posterior and KL(p(z|x) || p(z)) of the discrete model, by enumeration."""
    log_px = torch.logsumexp(log_prior + log_lik, 0)
    log_post = log_prior + log_lik - log_px
    return {"log_px": log_px, "log_post": log_post, "kl": (log_post.exp() * (log_post - log_prior)).sum()}


def _enumerated_expectation(fn, log_lik, log_prior, log_q, k: int) -> torch.Tensor:
    """E_{z_1..z_K ~ q} fn(ln p(x|z), ln p(z), ln q(z|x)) by summing over all M^K tuples (differentiable)."""
    m = log_q.shape[0]
    idx = torch.cartesian_prod(*[torch.arange(m)] * k).reshape(-1, k).T  # [K, M^K]
    values = fn(log_lik[idx], log_prior[idx], log_q[idx])  # [M^K]
    return (log_q[idx].sum(0).exp() * values).sum()


def _discrete_replicates(n: int, k: int, seed: int):
    """N replicates of K samples with per-replicate parameter copies: (log_px_z, log_pz, z, q, phi_r, theta_r)."""
    phi_r = PHI.expand(n, M).clone().requires_grad_()  # [N, M]
    theta_r = THETA.expand(n, M, V).clone().requires_grad_()  # [N, M, V]
    q = Categorical(logits=phi_r)
    torch.manual_seed(seed)
    z = q.sample((k,))  # [K, N]
    log_lik_table = theta_r.log_softmax(-1)[..., X_OBS]  # [N, M]
    log_px_z = log_lik_table.gather(1, z.T).T  # [K, N]
    return log_px_z, LOG_PRIOR[z], z, q, phi_r, theta_r


def _exact_discrete_gradient(objective, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    phi = PHI.clone().requires_grad_()
    theta = THETA.clone().requires_grad_()
    log_lik = theta.log_softmax(-1)[:, X_OBS]
    value = _enumerated_expectation(objective, log_lik, LOG_PRIOR, phi.log_softmax(0), k)
    return torch.autograd.grad(value, (phi, theta))


def _z_scores(per_replicate: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """|mean - exact| / standard error, per coordinate, for [N, ...] per-replicate estimates."""
    n = per_replicate.shape[0]
    se = per_replicate.std(0) / math.sqrt(n)
    return (per_replicate.mean(0) - exact).abs() / (se + 1e-12)


# ---------------------------------------------------------------------------------------------------
# linear-Gaussian model

X_CONT, SIGMA_X = 1.2, 0.8
ENC0, DEC0 = (0.2, math.log(0.9)), (1.5, 0.3)  # (m, ln s) is far from the posterior N(0.47, 0.47^2)


def _gaussian_densities(z, m, log_s, a, b):
    log_px_z = Normal(a * z + b, SIGMA_X).log_prob(torch.as_tensor(X_CONT, dtype=DTYPE))
    return log_px_z, Normal(0.0, 1.0).log_prob(z), Normal(m, log_s.exp()).log_prob(z)


def _exact_gaussian_gradient(objective, k: int, nodes: int = 100) -> torch.Tensor:
    """d/d(m, ln s, a, b) of E_{z_1..z_K ~ q} objective, by Gauss-Hermite quadrature over eps = (z - m)/s."""
    params = [torch.tensor(v, dtype=DTYPE, requires_grad=True) for v in (*ENC0, *DEC0)]
    t, w = np.polynomial.hermite.hermgauss(nodes)
    eps = torch.as_tensor(t, dtype=DTYPE) * math.sqrt(2.0)
    weights = torch.as_tensor(w, dtype=DTYPE) / math.sqrt(math.pi)
    grid = torch.cartesian_prod(*[eps] * k).reshape(-1, k).T  # [K, nodes^K]
    grid_weights = torch.cartesian_prod(*[weights] * k).reshape(-1, k).T.prod(0)  # [nodes^K]
    m, log_s, a, b = params
    value = (grid_weights * objective(*_gaussian_densities(m + log_s.exp() * grid, m, log_s, a, b))).sum()
    return torch.stack(torch.autograd.grad(value, params))


def _closed_form_elbo_gradient() -> torch.Tensor:
    params = [torch.tensor(v, dtype=DTYPE, requires_grad=True) for v in (*ENC0, *DEC0)]
    m, log_s, a, b = params
    s2 = (2 * log_s).exp()
    recon = -0.5 * math.log(2 * math.pi * SIGMA_X**2) - ((X_CONT - a * m - b) ** 2 + a**2 * s2) / (2 * SIGMA_X**2)
    kl = 0.5 * (m**2 + s2 - 1.0 - 2 * log_s)
    return torch.stack(torch.autograd.grad(recon - kl, params))


def _gaussian_replicates(n: int, k: int, seed: int):
    """N replicates with their own parameter copies; returns (log_px_z, log_pz, z, q, encoder, decoder params)."""
    m, log_s, a, b = (torch.full((n,), v, dtype=DTYPE, requires_grad=True) for v in (*ENC0, *DEC0))
    q = Normal(m, log_s.exp())
    torch.manual_seed(seed)
    z = q.rsample((k,))  # [K, N]
    log_px_z, log_pz, _ = _gaussian_densities(z, m, log_s, a, b)
    return log_px_z, log_pz, z, q, (m, log_s), (a, b)


def _dreg_per_replicate_gradients(objective, n: int, k: int, seed: int) -> torch.Tensor:
    log_px_z, log_pz, z, q, enc, dec = _gaussian_replicates(n, k, seed)
    dreg_surrogates(objective, log_px_z, log_pz, z, q).backward(dec, enc)
    return -n * torch.stack([p.grad for p in (*enc, *dec)], 1)  # undo the -mean of the loss; [N, 4]


def _pathwise_per_replicate_gradients(surrogate_fn, objective, n: int, k: int, seed: int) -> torch.Tensor:
    log_px_z, log_pz, z, q, enc, dec = _gaussian_replicates(n, k, seed)
    value = surrogate_fn(objective, log_px_z, log_pz, z, q)
    return torch.stack(torch.autograd.grad(value.sum(), (*enc, *dec)), 1)  # [N, 4]


# ---------------------------------------------------------------------------------------------------
# §5.5 and §5.6: single-sample equivalences


@pytest.mark.numerics
@pytest.mark.parametrize("lam", [-0.05, 0.0, 0.3, 0.9])
def test_single_sample_kl_estimate_is_representational_kl_prop11(lam):
    log_px_z, log_pz, log_qz = _random_samples(1, 7, seed=1)
    _, kl = kl_objective(log_px_z, log_pz, log_qz, lam)
    assert_close_after_reduction(kl, (log_qz - log_pz)[0], **FORMULA)


@pytest.mark.numerics
@pytest.mark.parametrize("alpha", [0.5, 0.9, 1.5, 4.0])
def test_single_sample_renyi_estimate_is_representational_kl_prop12(alpha):
    log_px_z, log_pz, log_qz = _random_samples(1, 7, seed=2)
    _, divergence = renyi_objective(log_px_z, log_pz, log_qz, 0.5, alpha)
    assert_close_after_reduction(divergence, (log_qz - log_pz)[0], **FORMULA)
    _, power_divergence = power_objective(log_px_z, log_pz, log_qz, alpha)
    assert_close_after_reduction(power_divergence, (log_qz - log_pz)[0], **FORMULA)


@pytest.mark.numerics
@pytest.mark.parametrize("beta", [0.1, 0.5, 1.0, 2.0])
def test_single_sample_objectives_equal_beta_vae_pointwise_prop13(beta):
    """lam = 1 - beta for the KL and Renyi objectives (any alpha), alpha = 1 / beta for the power objective."""
    log_px_z, log_pz, log_qz = _random_samples(1, 9, seed=3)
    beta_vae = (log_px_z - beta * (log_qz - log_pz))[0]  # eq. (5.19) with the single-sample KL
    assert_close_after_reduction(kl_objective(log_px_z, log_pz, log_qz, 1 - beta)[0], beta_vae, **FORMULA)
    for alpha in (0.5, 2.0, 7.0):
        renyi = renyi_objective(log_px_z, log_pz, log_qz, 1 - beta, alpha)[0]
        assert_close_after_reduction(renyi, beta_vae, **FORMULA)
    assert_close_after_reduction(power_objective(log_px_z, log_pz, log_qz, 1 / beta)[0], beta_vae, **FORMULA)


@pytest.mark.numerics
@pytest.mark.parametrize("beta", [0.25, 1.0, 3.0])
def test_single_sample_kl_objective_expectation_is_beta_vae_with_analytic_kl_prop13(beta):
    """E_q[O_KL(lam = 1 - beta)] = E_q ln p(x|z) - beta KL(q || p), exactly, on the discrete model."""
    log_q, log_lik = PHI.log_softmax(0), THETA.log_softmax(-1)[:, X_OBS]
    objective = MonteCarloObjective("kl", lam=1 - beta)
    expectation = _enumerated_expectation(objective, log_lik, LOG_PRIOR, log_q, 1)
    analytic_kl = kl_divergence(Categorical(logits=PHI), Categorical(logits=LOG_PRIOR))
    assert_close_after_reduction(expectation, (log_q.exp() * log_lik).sum() - beta * analytic_kl, **FORMULA)


@pytest.mark.numerics
def test_analytic_elbo_uses_closed_form_gaussian_kl():
    g = torch.Generator().manual_seed(4)
    loc, scale = torch.randn(3, 5, generator=g, dtype=DTYPE), torch.rand(3, 5, generator=g, dtype=DTYPE) + 0.3
    posterior = Independent(Normal(loc, scale), 1)
    prior = Independent(Normal(torch.zeros(3, 5, dtype=DTYPE), torch.ones(3, 5, dtype=DTYPE)), 1)
    log_px_z = -torch.rand(4, 3, generator=g, dtype=DTYPE)
    closed_kl = 0.5 * (loc**2 + scale**2 - 1 - 2 * scale.log()).sum(-1)  # [B]
    for beta in (1.0, 0.3):
        expected = log_px_z.mean(0) - beta * closed_kl
        assert_close_after_reduction(analytic_elbo(log_px_z, posterior, prior, beta), expected, **FORMULA)


@pytest.mark.numerics
def test_linear_gaussian_quadrature_reproduces_closed_form_elbo_gradient():
    """Validates the quadrature used as the exact reference below (K = 1 IWAE is the ELBO)."""
    exact = _closed_form_elbo_gradient()
    # 100 Gauss-Hermite nodes integrate the quadratic-in-z ELBO exactly; what remains is the rounding of the sum
    assert_close_after_reduction(_exact_gaussian_gradient(iwae_bound, 1), exact, n_terms=100,
                                 why="a 100-node quadrature sum vs the closed-form gradient")


# ---------------------------------------------------------------------------------------------------
# Prop. 9: properties of the KL objective


def test_iwae_expectation_increases_with_k_towards_log_px():
    log_q, log_lik = PHI.log_softmax(0), THETA.log_softmax(-1)[:, X_OBS]
    log_px = _exact(log_lik)["log_px"]
    expectations = torch.stack([_enumerated_expectation(iwae_bound, log_lik, LOG_PRIOR, log_q, k) for k in range(1, 6)])
    assert (expectations.diff() > 0).all(), expectations
    assert (expectations < log_px).all()
    torch.manual_seed(5)
    z = Categorical(logits=PHI).sample((4096, 100))  # [K, R]
    large_k = iwae_bound(log_lik[z], LOG_PRIOR[z], log_q[z])
    assert abs(float(log_px - large_k.mean())) < 0.01 < float(log_px - expectations[-1]) / 10


def test_kl_estimate_converges_to_true_kl_prop9_i():
    log_q, log_lik = PHI.log_softmax(0), THETA.log_softmax(-1)[:, X_OBS]
    true_kl = _exact(log_lik)["kl"]
    torch.manual_seed(6)
    mean_abs_errors = []
    for k in (1, 16, 256, 4096):
        z = Categorical(logits=PHI).sample((k, 100))  # [K, R]
        estimate = mutual_information(log_lik[z], LOG_PRIOR[z], log_q[z])  # = U^K - S^K
        mean_abs_errors.append(float((estimate - true_kl).abs().mean()))
    assert all(a > 2 * b for a, b in zip(mean_abs_errors, mean_abs_errors[1:])), mean_abs_errors
    assert mean_abs_errors[-1] < 0.04
    assert abs(float(estimate.mean() - true_kl)) < 0.01


def test_kl_estimate_can_be_biased_downward_despite_prop9_ii():
    """Prop. 9 (ii) says E[S^K] <= ln p(x) implies E[U^K - S^K] >= KL(p(z|x) || p(z)). That is false.

    E[U^K - S^K] - KL = (E[U^K] - E_{p(z|x)} ln p(x|z)) + (ln p(x) - E[S^K]): the premise makes the second term
    non-negative, but the self-normalised U^K can be biased downward by more. Take q = p(z): with K = 1 the
    estimate is ln q(z1|x) - ln p(z1) = 0 for every sample (Prop. 11), while the true KL is positive, although
    E[S^1] = E_{p(z)} ln p(x|z) <= ln p(x) holds. Enumeration shows the bias stays negative for K = 2..4 too. The
    conclusion needs the additional condition E[U^K] >= E_{p(z|x)} ln p(x|z) (e.g. q = p(z|x), where it holds with
    equality and the estimate is unbiased); the upward-bias statement is thus a tendency, not a theorem.
    """
    log_lik = THETA.log_softmax(-1)[:, X_OBS]
    exact = _exact(log_lik)
    assert exact["kl"] > 0.3
    kl_estimate = MonteCarloObjective("kl", lam=0.0).evaluate

    def estimate(*samples):
        return kl_estimate(*samples)[1]

    # K = 1, q = prior: the estimate is identically zero
    log_px_z, log_pz = log_lik[:, None], LOG_PRIOR[:, None]  # every z as one single-sample batch entry, [1, M]
    torch.testing.assert_close(estimate(log_px_z.T, log_pz.T, log_pz.T), torch.zeros(M, dtype=DTYPE))
    for k in range(1, 5):
        assert _enumerated_expectation(iwae_bound, log_lik, LOG_PRIOR, LOG_PRIOR, k) <= exact["log_px"]  # premise
        assert _enumerated_expectation(estimate, log_lik, LOG_PRIOR, LOG_PRIOR, k) < exact["kl"] - 0.01
    # with the exact posterior as proposal the estimate is unbiased, consistent with (ii) as an equality
    for k in range(1, 4):
        unbiased = _enumerated_expectation(estimate, log_lik, LOG_PRIOR, exact["log_post"], k)
        assert_close_after_reduction(unbiased, exact["kl"], n_terms=4**k + k,
                                     why="an expectation enumerated over the M^K sample tuples vs the exact KL")


def test_mutual_information_estimate_averages_kl_over_data():
    """Average of U^K - ln p^K over x ~ p(x) approaches I_p(X, Z) = E_{p(x)} KL(p(z|x) || p(z)), K = 100."""
    log_lik_table = THETA.log_softmax(-1)  # [M, V]
    log_px = torch.logsumexp(LOG_PRIOR[:, None] + log_lik_table, 0)  # [V]
    true_mi = sum(log_px[x].exp() * _exact(log_lik_table[:, x])["kl"] for x in range(V))
    torch.manual_seed(7)
    xs = Categorical(logits=log_px).sample((4000,))  # [B] data drawn from the model's marginal
    log_q = log_px.new_full((M,), -math.log(M))  # any full-support proposal; uniform here
    z = Categorical(logits=log_q).sample((100, xs.shape[0]))  # [K, B]
    estimate = mutual_information(log_lik_table[z, xs], LOG_PRIOR[z], log_q[z]).mean()
    assert abs(float(estimate - true_mi)) < 0.02, (float(estimate), float(true_mi))


# ---------------------------------------------------------------------------------------------------
# Prop. 10: the power objective


@pytest.mark.parametrize("alpha", [1.5, 2.0, 4.0])
def test_power_marginal_is_below_log_px_on_discrete_data_prop10(alpha):
    log_lik_table = THETA.log_softmax(-1)  # [M, V]
    for x in range(V):
        log_lik = log_lik_table[:, x]
        exact = _exact(log_lik)
        log_p_alpha = torch.logsumexp(LOG_PRIOR + alpha * log_lik, 0)  # ln p^alpha(x) = ln E_p(z) p(x|z)^alpha
        assert alpha * exact["log_px"] < log_p_alpha < exact["log_px"]  # p(x)^alpha <= p^alpha(x) <= p(x), strict
        renyi = torch.logsumexp(alpha * exact["log_post"] + (1 - alpha) * LOG_PRIOR, 0) / (alpha - 1)  # D_alpha
        torch.testing.assert_close(log_p_alpha - alpha * exact["log_px"], (alpha - 1) * renyi)  # eq. (5.13)
        # the estimator S_alpha^K is a lower bound on ln p^alpha(x) <= ln p(x) in expectation
        log_q = PHI.log_softmax(0)
        for k in (1, 2, 3):
            scaled_power = _enumerated_expectation(
                lambda *s: alpha * power_objective(*s, alpha)[0], log_lik, LOG_PRIOR, log_q, k
            )
            assert scaled_power <= log_p_alpha


@pytest.mark.parametrize("alpha", [1.5, 3.0])
def test_power_marginal_equals_log_px_iff_decoder_deterministic_prop10(alpha):
    deterministic = torch.full((M, V), -math.inf, dtype=DTYPE)
    deterministic[torch.arange(M), torch.tensor([0, 1, 1, 2])] = 0.0  # x is a function of z: H(X|Z) = 0
    for x in range(V):
        log_px = torch.logsumexp(LOG_PRIOR + deterministic[:, x], 0)
        torch.testing.assert_close(torch.logsumexp(LOG_PRIOR + alpha * deterministic[:, x], 0), log_px)


def test_power_objective_eq_5_18_itself_lies_above_log_px():
    """Finding: Prop. 10 bounds ln p^alpha(x) = alpha * O_P, not O_P = ln p^alpha(x) / alpha of eq. (5.18).

    By (5.13), ln p^alpha(x) / alpha = ln p(x) + (alpha - 1)/alpha * D_alpha(p(z|x) || p(z)) >= ln p(x), with equality
    only without latent usage, and a many-sample estimate of (5.18) exceeds ln p(x) as well. The "lower bound"
    remark of §5.4.3 holds for the objective with the constant 1/alpha dropped.
    """
    alpha = 2.0
    log_lik, log_q = THETA.log_softmax(-1)[:, X_OBS], PHI.log_softmax(0)
    exact = _exact(log_lik)
    assert torch.logsumexp(LOG_PRIOR + alpha * log_lik, 0) / alpha > exact["log_px"] + 0.1
    torch.manual_seed(8)
    z = Categorical(logits=PHI).sample((4096, 50))
    objective, _ = power_objective(log_lik[z], LOG_PRIOR[z], log_q[z], alpha)
    assert objective.mean() > exact["log_px"] + 0.1


# ---------------------------------------------------------------------------------------------------
# gradient estimators: unbiasedness against exact gradients


@pytest.mark.numerics
def test_dreg_weights_match_closed_forms_for_iwae_and_kl_objective():
    """IWAE-DReG weights are w^2 (Tucker et al. 2018); for U^K our second-derivative weights have a closed form."""
    log_px_z, log_pz, log_qz = _random_samples(6, 4, seed=9)
    w = torch.softmax(log_px_z + log_pz - log_qz, 0)
    c_lik, c_prior, c_q = dreg_weights(MonteCarloObjective("iwae"), log_px_z, log_pz, log_qz)
    for got, want in ((c_lik, w**2), (c_prior, w**2), (c_q, -(w**2))):
        assert_close_after_reduction(got, want, **FORMULA)
    lam = 0.3
    u = (w * log_px_z).sum(0)
    c_lik, c_prior, c_q = dreg_weights(MonteCarloObjective("kl", lam=lam), log_px_z, log_pz, log_qz)
    ratio_weight = (1 - lam) * w**2 + 2 * lam * w**2 * (log_px_z - u)
    assert_close_after_reduction(c_lik, ratio_weight + lam * w**2, **FORMULA)
    assert_close_after_reduction(c_prior, ratio_weight, **FORMULA)
    assert_close_after_reduction(c_q, -ratio_weight, **FORMULA)


DREG_OBJECTIVES = [
    MonteCarloObjective("iwae"),
    MonteCarloObjective("kl", lam=0.5),
    MonteCarloObjective("renyi", lam=0.5, alpha=0.5),
    MonteCarloObjective("kl", lam=0.7, num_lik_samples=1, num_kl_samples=2),  # the "1/K" ablation
]


@pytest.mark.parametrize("objective", DREG_OBJECTIVES, ids=lambda o: f"{o.name}-{o.num_lik_samples}")
def test_dreg_gradient_is_unbiased_for_encoder_and_decoder(objective):
    exact = _exact_gaussian_gradient(objective, 2)
    grads = _dreg_per_replicate_gradients(objective, n=20000, k=2, seed=10)
    z = _z_scores(grads, exact)
    assert (z < 4).all(), (z, grads.mean(0), exact)


def test_reparameterised_gradient_is_unbiased_for_iwae():
    exact = _exact_gaussian_gradient(iwae_bound, 2)
    grads = _pathwise_per_replicate_gradients(reparameterised_surrogate, iwae_bound, n=20000, k=2, seed=11)
    assert (_z_scores(grads, exact) < 4).all()


def test_stl_gradient_is_unbiased_for_elbo_but_biased_for_iwae():
    exact_elbo = _closed_form_elbo_gradient()
    grads = _pathwise_per_replicate_gradients(stl_surrogate, iwae_bound, n=20000, k=1, seed=12)
    assert (_z_scores(grads, exact_elbo) < 4).all()
    exact_iwae = _exact_gaussian_gradient(iwae_bound, 2)
    grads = _pathwise_per_replicate_gradients(stl_surrogate, iwae_bound, n=20000, k=2, seed=13)
    z = _z_scores(grads, exact_iwae)
    assert (z[2:] < 4).all()  # the decoder gradient is the usual pathwise one
    assert z[:2].max() > 10, z  # the encoder gradient misses a non-zero term for K > 1


def test_dreg_has_lower_encoder_variance_than_reparameterised_iwae():
    dreg = _dreg_per_replicate_gradients(iwae_bound, n=5000, k=2, seed=14)
    reparam = _pathwise_per_replicate_gradients(reparameterised_surrogate, iwae_bound, n=5000, k=2, seed=14)
    assert (dreg[:, :2].var(0) < reparam[:, :2].var(0)).all()


SCORE_CASES = [
    ("reinforce", MonteCarloObjective("iwae"), 1),  # the ELBO gradient, "REINFORCE 1"
    ("reinforce", MonteCarloObjective("kl", lam=0.5), 3),
    ("vimco", MonteCarloObjective("iwae"), 3),
    ("vimco", MonteCarloObjective("kl", lam=0.5), 3),
    ("vimco", MonteCarloObjective("renyi", lam=0.5, alpha=2.0, num_lik_samples=3, num_kl_samples=1), 3),
    ("vimco", MonteCarloObjective("power", alpha=2.0), 3),
]


@pytest.mark.parametrize("estimator,objective,k", SCORE_CASES, ids=lambda c: getattr(c, "name", str(c)))
def test_score_function_gradients_are_unbiased_on_discrete_model(estimator, objective, k):
    exact_phi, exact_theta = _exact_discrete_gradient(objective, k)
    log_px_z, log_pz, z, q, phi_r, theta_r = _discrete_replicates(n=20000, k=k, seed=15)
    value = surrogates(estimator, objective, log_px_z, log_pz, z, q).model
    grad_phi, grad_theta = torch.autograd.grad(value.sum(), (phi_r, theta_r))
    assert (_z_scores(grad_phi, exact_phi) < 4).all()
    assert (_z_scores(grad_theta, exact_theta) < 4).all()


def test_dropping_the_score_term_is_biased_on_discrete_model():
    """Negative control: the same check rejects an estimator without the score-function term."""
    objective = MonteCarloObjective("iwae")
    exact_phi, _ = _exact_discrete_gradient(objective, 3)
    log_px_z, log_pz, z, q, phi_r, _ = _discrete_replicates(n=20000, k=3, seed=16)
    (grad_phi,) = torch.autograd.grad(objective(log_px_z, log_pz, q.log_prob(z)).sum(), (phi_r,))
    assert _z_scores(grad_phi, exact_phi).max() > 10


def test_vimco_has_lower_variance_than_reinforce():
    objective = MonteCarloObjective("iwae")
    variances = []
    for name in ("reinforce", "vimco"):
        log_px_z, log_pz, z, q, phi_r, _ = _discrete_replicates(n=5000, k=4, seed=17)
        value = surrogates(name, objective, log_px_z, log_pz, z, q).model
        (grad_phi,) = torch.autograd.grad(value.sum(), (phi_r,))
        variances.append(grad_phi.var(0).sum())
    assert variances[1] < 0.5 * variances[0], variances


@pytest.mark.numerics
def test_vimco_baseline_is_leave_one_out_geometric_mean_for_iwae():
    """For IWAE the generic baseline is VIMCO's: sample k's weight replaced by the others' geometric mean."""
    k, b = 5, 3
    log_px_z, log_pz, _ = _random_samples(k, b, seed=18)
    logits = torch.randn(b, k, generator=torch.Generator().manual_seed(18), dtype=DTYPE, requires_grad=True)
    q = Categorical(logits=logits)
    z = torch.arange(k)[:, None].expand(k, b)  # sample k is category k, so ln q(z_k|x) = log_softmax(logits)[k]
    log_qz = q.log_prob(z).detach()
    log_w = log_px_z + log_pz - log_qz  # [K, B]
    signals = []
    for i in range(k):
        replaced = log_w.clone()
        replaced[i] = (log_w.sum(0) - log_w[i]) / (k - 1)
        signals.append(torch.logsumexp(log_w, 0) - torch.logsumexp(replaced, 0))
    signals = torch.stack(signals)  # [K, B], Mnih & Rezende (2016) eq. for L(h_k | h_-k)
    value = vimco_surrogate(iwae_bound, log_px_z, log_pz, z, q)
    (grad,) = torch.autograd.grad(value.sum(), (logits,))
    # d ln q_k / d logits_j = [k == j] - softmax_j; per sample the score term weighs it by the signal and the
    # direct dependence of the IWAE bound on ln q_k by -w_k
    coeff = (signals - torch.softmax(log_w, 0)).T  # [B, K]
    expected = coeff - logits.softmax(-1).detach() * coeff.sum(-1, keepdim=True)
    assert_close_after_reduction(grad, expected, **FORMULA)


# ---------------------------------------------------------------------------------------------------
# shapes, vectorisation, API contract


def _value_functions():
    return {
        "iwae": lambda *s: iwae_bound(*s),
        "iwae_alpha": lambda *s: iwae_bound(*s, alpha=1.7),
        "u": self_normalised_log_likelihood,
        "kl": lambda *s: torch.stack(kl_objective(*s, 0.4)),
        "kl_asym": lambda *s: torch.stack(kl_objective(*s, 0.4, num_lik_samples=5, num_kl_samples=2)),
        "renyi": lambda *s: torch.stack(renyi_objective(*s, 0.4, 0.7)),
        "renyi_asym": lambda *s: torch.stack(renyi_objective(*s, 0.4, 2.0, num_lik_samples=1, num_kl_samples=6)),
        "power": lambda *s: torch.stack(power_objective(*s, 3.0)),
        "power_one": lambda *s: torch.stack(power_objective(*s, 1.0)),
        "mi": mutual_information,
    }


@pytest.mark.numerics
@pytest.mark.parametrize("name", list(_value_functions()))
def test_batched_values_equal_per_example_values(name):
    fn = _value_functions()[name]
    samples = _random_samples(6, 5, seed=19)
    batched = fn(*samples)
    for b in range(5):
        assert_close_after_reduction(batched[..., b], fn(*(t[:, b] for t in samples)), **FORMULA)
    stacked = fn(*(t.unsqueeze(1).expand(6, 3, 5) for t in samples))  # extra batch dims broadcast
    assert_close_after_reduction(stacked, batched.unsqueeze(-2).expand(stacked.shape), **FORMULA)


def test_power_objective_at_alpha_one_is_iwae_and_renyi_tends_to_kl():
    samples = _random_samples(8, 4, seed=20)
    objective, divergence = power_objective(*samples, 1.0)
    torch.testing.assert_close(objective, iwae_bound(*samples))
    _, kl = kl_objective(*samples, 0.5)
    torch.testing.assert_close(divergence, kl)
    _, near_one = renyi_objective(*samples, 0.5, 1.0 + 1e-6)
    torch.testing.assert_close(near_one, kl, rtol=0, atol=1e-5)  # not rounding: D_α - KL = O(α - 1) = O(1e-6)


@pytest.mark.numerics
def test_iwae_and_self_normalised_estimators_follow_eqs_5_8_and_5_9():
    log_px_z, log_pz, log_qz = _random_samples(7, 4, seed=30)
    ratios = (log_px_z + log_pz - log_qz).exp()  # p(x, z_k) / q(z_k|x)
    p_hat = ratios.mean(0)  # eq. (5.8)
    assert_close_after_reduction(iwae_bound(log_px_z, log_pz, log_qz), p_hat.log(), **FORMULA)
    u_hat = (ratios * log_px_z).mean(0) / p_hat  # eq. (5.9)
    assert_close_after_reduction(self_normalised_log_likelihood(log_px_z, log_pz, log_qz), u_hat, **FORMULA)
    alpha = 2.5
    p_hat_alpha = ((alpha * log_px_z).exp() * (log_pz - log_qz).exp()).mean(0)  # eq. (5.17): p(x|z)^alpha
    assert_close_after_reduction(iwae_bound(log_px_z, log_pz, log_qz, alpha), p_hat_alpha.log(), **FORMULA)


@pytest.mark.numerics
def test_kl_objective_equals_interpolation_of_eq_5_11():
    samples = _random_samples(8, 4, seed=21)
    lam = 0.35
    objective, _ = kl_objective(*samples, lam)
    expected = (1 - lam) * iwae_bound(*samples) + lam * self_normalised_log_likelihood(*samples)
    assert_close_after_reduction(objective, expected, **FORMULA)
    objective, _ = renyi_objective(*samples, lam, 2.5)
    a = 2.5
    expected = lam / (a - 1) * iwae_bound(*samples, alpha=a) - (lam * a / (a - 1) - 1) * iwae_bound(*samples)
    assert_close_after_reduction(objective, expected, **FORMULA)  # eq. (5.15)


def test_asymmetric_sample_counts_use_the_first_samples():
    samples = _random_samples(16, 3, seed=22)
    objective, kl = kl_objective(*samples, 0.5, num_lik_samples=16, num_kl_samples=1)  # "16/1"
    torch.testing.assert_close(kl, (samples[2] - samples[1])[0])
    torch.testing.assert_close(objective, iwae_bound(*samples) + 0.5 * kl)
    objective, kl = kl_objective(*samples, 0.5, num_lik_samples=1, num_kl_samples=16)  # "1/16"
    torch.testing.assert_close(kl, mutual_information(*samples))
    torch.testing.assert_close(objective, iwae_bound(*(t[:1] for t in samples)) + 0.5 * kl)


@pytest.mark.numerics
@pytest.mark.parametrize("estimator", ["reparam", "stl", "dreg"])
def test_pathwise_surrogates_per_example_gradients_match_single_examples(estimator):
    objective = MonteCarloObjective("renyi", lam=0.3, alpha=1.5)
    log_px_z, log_pz, z, q, enc, dec = _gaussian_replicates(4, 5, seed=23)
    batched = surrogates(estimator, objective, log_px_z, log_pz, z, q)
    torch.testing.assert_close(batched.model, objective(log_px_z, log_pz, q.log_prob(z)))  # value = objective
    torch.testing.assert_close(batched.encoder, batched.model)
    enc_grads = torch.autograd.grad(batched.encoder.sum(), enc, retain_graph=True)
    dec_grads = torch.autograd.grad(batched.model.sum(), dec, retain_graph=True)
    for b in range(4):
        one = slice(b, b + 1)
        q_one = Normal(q.loc[one], q.scale[one])
        single = surrogates(estimator, objective, log_px_z[:, one], log_pz[:, one], z[:, one], q_one)
        enc_single = torch.autograd.grad(single.encoder.sum(), enc, retain_graph=True)
        dec_single = torch.autograd.grad(single.model.sum(), dec, retain_graph=True)
        for got, want in zip((*enc_grads, *dec_grads), (*enc_single, *dec_single)):
            assert_close_after_reduction(got[b], want[b], **FORMULA)


def test_surrogates_backward_routes_dreg_gradients_to_their_parameter_sets():
    objective = MonteCarloObjective("kl", lam=0.4)
    log_px_z, log_pz, z, q, enc, dec = _gaussian_replicates(3, 4, seed=24)
    s = dreg_surrogates(objective, log_px_z, log_pz, z, q)
    want_dec = torch.autograd.grad(-s.model.mean(), dec, retain_graph=True)
    want_enc = torch.autograd.grad(-s.encoder.mean(), enc, retain_graph=True)
    stl_enc = torch.autograd.grad(-s.model.mean(), enc, retain_graph=True)  # what a single backward would give
    s.backward(dec, enc)
    for p, want in zip((*dec, *enc), (*want_dec, *want_enc)):
        torch.testing.assert_close(p.grad, want)
    assert not torch.allclose(want_enc[0], stl_enc[0])


def test_score_function_surrogate_value_is_the_objective():
    objective = MonteCarloObjective("kl", lam=0.2)
    log_px_z, log_pz, z, q, _, _ = _discrete_replicates(7, 5, seed=25)
    for estimator in ("reinforce", "vimco"):
        s = surrogates(estimator, objective, log_px_z, log_pz, z, q)
        torch.testing.assert_close(s.model, objective(log_px_z, log_pz, q.log_prob(z)))
    baseline = torch.full((7,), -1.0, dtype=DTYPE)
    value = reinforce_surrogate(objective, log_px_z, log_pz, z, q, baseline=baseline)
    torch.testing.assert_close(value, objective(log_px_z, log_pz, q.log_prob(z)))


def test_vimco_with_one_sample_is_reinforce():
    objective = MonteCarloObjective("iwae")
    grads = []
    for fn in (vimco_surrogate, reinforce_surrogate):
        log_px_z, log_pz, z, q, phi_r, theta_r = _discrete_replicates(6, 1, seed=26)
        grads.append(torch.autograd.grad(fn(objective, log_px_z, log_pz, z, q).sum(), (phi_r, theta_r)))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize(
    "call",
    [
        lambda s: kl_objective(*s, 1.0),
        lambda s: kl_objective(*s, float("nan")),
        lambda s: kl_objective(*s, 0.5, num_kl_samples=0),
        lambda s: kl_objective(*s, 0.5, num_lik_samples=9),
        lambda s: renyi_objective(*s, 0.5, 1.0),
        lambda s: renyi_objective(*s, 0.5, 0.0),
        lambda s: renyi_objective(*s, 0.5, -2.0),
        lambda s: renyi_objective(*s, 1.5, 2.0),
        lambda s: power_objective(*s, 0.0),
        lambda s: power_objective(*s, float("inf")),
        lambda s: iwae_bound(s[0], s[1], s[2][:3]),
        lambda s: MonteCarloObjective("elbo"),
        lambda s: MonteCarloObjective("renyi", lam=0.5, alpha=1.0),
        lambda s: MonteCarloObjective("power", alpha=2.0, num_kl_samples=1),
        lambda s: MonteCarloObjective("kl", lam=0.5, num_kl_samples=0),
    ],
)
def test_bad_arguments_raise_value_error(call):
    samples = _random_samples(8, 2, seed=27)
    with pytest.raises(ValueError):
        call(samples)


def test_estimators_reject_samples_of_the_wrong_kind():
    objective = MonteCarloObjective("iwae")
    log_px_z, log_pz, z, q, _, _ = _gaussian_replicates(3, 2, seed=28)
    for name in ("reinforce", "vimco"):
        with pytest.raises(ValueError, match="score-function"):
            surrogates(name, objective, log_px_z, log_pz, z, q)
    log_px_z, log_pz, z, q, _, _ = _discrete_replicates(3, 2, seed=29)
    for name in ("reparam", "stl", "dreg"):
        with pytest.raises(ValueError, match="pathwise"):
            surrogates(name, objective, log_px_z, log_pz, z, q)
    with pytest.raises(ValueError, match="choose one of"):
        surrogates("iwae", objective, log_px_z, log_pz, z, q)
    with pytest.raises(ValueError, match="supports"):
        detach_distribution(torch.distributions.Gamma(torch.ones(2), torch.ones(2)))


def test_detach_distribution_stops_parameter_gradients_only():
    loc = torch.zeros(2, 3, dtype=DTYPE, requires_grad=True)
    q = Independent(Normal(loc, torch.ones(2, 3, dtype=DTYPE)), 1)
    z = q.rsample((4,))
    log_q = detach_distribution(q).log_prob(z)
    torch.testing.assert_close(log_q, q.log_prob(z))
    (grad,) = torch.autograd.grad(log_q.sum(), loc)
    # z = loc + eps only moves through z: d ln N(z; loc_detached, 1)/d loc = -(z - loc) summed over samples
    torch.testing.assert_close(grad, -(z - loc).detach().sum(0))
