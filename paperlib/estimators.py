"""Mutual-information constrained Monte Carlo objectives (MICMCO), Melis thesis ch. 5 (§5.4-5.6).

The thesis maximises ``ln p(x) + lambda * KL(p(z|x) || p(z))`` (eq. 5.6) with K-sample Monte Carlo
estimators. This module has two layers.

**Values.** Pure functions of the per-sample log densities at K samples ``z_k ~ q(z|x)``, each a tensor of
shape ``[K, *batch]`` (usually ``[K, B]``); they reduce over dim 0 and broadcast over the rest:

- ``log_px_z[k] = ln p(x|z_k)``, ``log_pz[k] = ln p(z_k)``, ``log_qz[k] = ln q(z_k|x)``.

- :func:`iwae_bound` -- S^K (Burda et al. 2015), and S_alpha^K of eq. (5.17) with ``alpha != 1``;
  K = 1 gives the single-sample ELBO estimate. :func:`analytic_elbo` is the ELBO (5.2) with the KL
  computed by ``torch.distributions.kl_divergence`` (the thesis' "ELBO" base estimator).
- :func:`self_normalised_log_likelihood` -- U^K, eq. (5.9).
- :func:`kl_objective` (eqs. 5.11/5.12), :func:`renyi_objective` (eqs. 5.15/5.16) and
  :func:`power_objective` (eq. 5.18) return ``(objective, divergence_estimate)``, both ``[*batch]``.
- :func:`mutual_information` -- the evaluation estimate U^K - ln p^K (thesis §5.7.1, K = 100).
- :class:`MonteCarloObjective` bundles a choice of objective and its hyperparameters into the callable
  ``objective(log_px_z, log_pz, log_qz) -> [*batch]`` that the gradient estimators take.

Separate sample counts (the "16/1" and "1/16" ablations of Figs. 5.4 and 5.7): ``num_lik_samples`` and
``num_kl_samples`` select the *first* n of the K samples for the ln p(x) term and for the divergence
term respectively, so one draw of K = max(n_lik, n_kl) samples and one decoder pass serve both terms
(the thesis does not say whether its asymmetric runs shared samples; nesting them is our choice).

**Gradients.** Each estimator returns a surrogate whose *value* is the objective estimate ``[*batch]``
and whose *gradient* is the estimator. All of them take any objective callable above, so every base
estimator combines with the KL, Renyi and power objectives and with separate sample counts:

- :func:`reparameterised_surrogate` -- pathwise gradient ("IWAE K" in Figs. 5.2 and 5.3);
- :func:`stl_surrogate` -- sticking the landing (Roeder et al. 2017): ln q evaluated with stopped
  encoder parameters. Unbiased for single-sample objectives, biased for K > 1;
- :func:`dreg_surrogates` -- doubly reparameterised gradients (Tucker et al. 2018), generalised here to
  any smooth objective of the per-sample log densities (see :func:`dreg_weights`); for the IWAE bound
  it is IWAE-DReG. It returns *two* surrogates, one to differentiate w.r.t. the model (decoder, prior)
  parameters and one w.r.t. the encoder parameters, because the two parameter sets need different
  per-sample weights on the same decoder output;
- :func:`reinforce_surrogate` -- the score-function estimator (Williams 1987; Mnih & Gregor 2014);
- :func:`vimco_surrogate` -- VIMCO's leave-one-out baselines (Mnih & Rezende 2016), generalised to any
  objective of the samples' log densities.

Cost (``benchmarks/estimators.py``, synthetic-task model of §5.7.1, B = 64, one CPU thread): the KL, Renyi and
power objectives cost within ~2% of their base estimator's step at K = 16 and 64; DReG's second backward pass
through the decoder makes its step ~1.4x that of the plain reparameterised one.

All of them share the signature ``(objective, log_px_z, log_pz, z, posterior)`` where ``posterior`` is the
``torch.distributions`` object of q(z|x) (batch shape ``[B]``) and ``z`` the ``[K, B, ...]`` samples the
decoder saw: reparameterised samples (``posterior.rsample((K,))``) for the pathwise estimators, plain
samples (``posterior.sample((K,))``) for the score-function ones (:func:`sample` draws either from an explicit
generator, for runs that keep one random stream per model). The estimators evaluate ln q(z|x)
themselves, with stopped parameters where STL and DReG need them. :func:`surrogates` dispatches on the
estimator name and returns :class:`Surrogates`, whose ``backward`` handles the DReG split.

Usage (continuous latents, DReG base, Renyi objective with 16 samples for ln p(x) and 1 for the KL)::

    objective = MonteCarloObjective("renyi", lam=0.5, alpha=0.9, num_lik_samples=16, num_kl_samples=1)
    q = Independent(Normal(loc, scale), 1)                     # from the encoder, batch [B], event [D]
    z = q.rsample((16,))                                       # [K, B, D]
    log_px_z = decoder_log_likelihood(z, x)                    # [K, B]
    log_pz = Independent(Normal(0.0, 1.0).expand(z.shape[-1:]), 1).log_prob(z)   # [K, B]
    s = surrogates("dreg", objective, log_px_z, log_pz, z, q)  # s.model, s.encoder: [B]
    s.backward(decoder.parameters(), encoder.parameters())     # gradients of -mean(objective)
    with torch.no_grad():
        _, kl_estimate = objective.evaluate(log_px_z, log_pz, q.log_prob(z))

Evaluation as in §5.7.1: ``iwae_bound`` and ``mutual_information`` on K = 100 samples of the trained q.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor
from torch.distributions import Categorical, Distribution, Independent, Normal, OneHotCategorical, kl_divergence

ObjectiveFn = Callable[[Tensor, Tensor, Tensor], Tensor]

OBJECTIVES = ("iwae", "kl", "renyi", "power")
ESTIMATORS = ("reparam", "stl", "dreg", "reinforce", "vimco")
PATHWISE_ESTIMATORS = ("reparam", "stl", "dreg")  # need z = posterior.rsample(...)


# ---------------------------------------------------------------------------------------------------
# argument checks (at the boundary)


def _check_samples(log_px_z: Tensor, log_pz: Tensor, log_qz: Tensor) -> int:
    if log_px_z.dim() < 1 or not (log_px_z.shape == log_pz.shape == log_qz.shape):
        raise ValueError(
            "log_px_z, log_pz and log_qz must have the same shape [K, *batch]; got "
            f"{tuple(log_px_z.shape)}, {tuple(log_pz.shape)}, {tuple(log_qz.shape)}"
        )
    return log_px_z.shape[0]


def _check_lambda(lam: float) -> None:
    # For lambda >= 1 eq. (5.6) stops rewarding data fit: with discrete x, KL(p(z|x)||p(z)) <= -ln p(x), so at
    # lambda = 1 every deterministic decoder is optimal. Table 5.2 tunes lambda in [-0.05, 0.9999].
    if not (math.isfinite(lam) and lam < 1.0):
        raise ValueError(f"lam must be a finite number below 1 (thesis Table 5.2 uses [-0.05, 0.9999]); got {lam}")


def _check_alpha(alpha: float, allow_one: bool) -> None:
    if not (math.isfinite(alpha) and alpha > 0.0):
        raise ValueError(f"alpha must be a finite positive number; got {alpha}")
    if not allow_one and alpha == 1.0:
        raise ValueError("alpha = 1 makes the Renyi objective 0/0; its limit is the KL objective (use kl_objective)")


def _resolve_count(count: int | None, total: int, name: str) -> int:
    if count is None:
        return total
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= total:
        raise ValueError(f"{name} must be an int in [1, K={total}] or None (all samples); got {count!r}")
    return count


def _first(count: int, *tensors: Tensor) -> tuple[Tensor, ...]:
    return tuple(t[:count] for t in tensors)


# ---------------------------------------------------------------------------------------------------
# value estimators


def _log_mean_exp(x: Tensor) -> Tensor:
    return torch.logsumexp(x, dim=0) - math.log(x.shape[0])


def iwae_bound(log_px_z: Tensor, log_pz: Tensor, log_qz: Tensor, alpha: float = 1.0) -> Tensor:
    """IWAE estimate S^K of ln p(x) (Burda et al. 2015); with ``alpha != 1`` S_alpha^K of ln p^alpha(x), eq. (5.17).

    S_alpha^K = ln (1/K) sum_k p(x|z_k)^alpha p(z_k) / q(z_k|x): p(x|z) raised to alpha inside the same estimator
    (§5.4.2). In expectation a lower bound on ln p(x) (resp. ln p^alpha(x)); K = 1 is the ELBO estimate.
    ``[K, *batch] -> [*batch]``.
    """
    _check_samples(log_px_z, log_pz, log_qz)
    return _log_mean_exp(alpha * log_px_z + log_pz - log_qz)


def self_normalised_log_likelihood(log_px_z: Tensor, log_pz: Tensor, log_qz: Tensor) -> Tensor:
    """U^K, eq. (5.9): self-normalised importance sampling estimate of E_{p(z|x)} ln p(x|z). ``[K, *b] -> [*b]``."""
    _check_samples(log_px_z, log_pz, log_qz)
    weights = torch.softmax(log_px_z + log_pz - log_qz, dim=0)  # [K, *batch], normalised importance weights
    return (weights * log_px_z).sum(0)


def analytic_elbo(log_px_z: Tensor, posterior: Distribution, prior: Distribution, beta: float = 1.0) -> Tensor:
    """ELBO (5.2) with the analytic KL(q(z|x) || p(z)) from ``torch.distributions.kl_divergence``.

    The reconstruction term is averaged over the K samples. With ``beta != 1`` it is the beta-VAE objective
    (5.19), which by Prop. 13 is what the KL and Renyi objectives reduce to with the "ELBO" base estimator of
    Fig. 5.2 (beta = 1 - lambda). ``log_px_z``: ``[K, B]``; ``posterior``, ``prior``: batch shape ``[B]``.
    """
    if not math.isfinite(beta):
        raise ValueError(f"beta must be finite; got {beta}")
    kl = kl_divergence(posterior, prior)  # [B]
    if kl.shape != log_px_z.shape[1:]:
        raise ValueError(f"KL has shape {tuple(kl.shape)} but log_px_z is {tuple(log_px_z.shape)} = [K, *batch]")
    return log_px_z.mean(0) - beta * kl


def kl_objective(
    log_px_z: Tensor,
    log_pz: Tensor,
    log_qz: Tensor,
    lam: float,
    num_lik_samples: int | None = None,
    num_kl_samples: int | None = None,
) -> tuple[Tensor, Tensor]:
    """KL objective, eqs. (5.11)/(5.12): returns ``(S^K + lam * (U^K - S^K), U^K - S^K)``, each ``[*batch]``.

    With all K samples in both terms this is ``(1 - lam) S^K + lam U^K`` (5.11); ``U^K - S^K`` estimates
    KL(p(z|x) || p(z)). ``num_lik_samples`` / ``num_kl_samples`` use the first n samples for the ln p(x) term /
    the KL term (asymmetric ablations of Figs. 5.4 and 5.7).
    """
    _check_lambda(lam)
    k = _check_samples(log_px_z, log_pz, log_qz)
    n_lik = _resolve_count(num_lik_samples, k, "num_lik_samples")
    n_kl = _resolve_count(num_kl_samples, k, "num_kl_samples")
    lik_samples, kl_samples = _first(n_lik, log_px_z, log_pz, log_qz), _first(n_kl, log_px_z, log_pz, log_qz)
    s_lik = iwae_bound(*lik_samples)
    s_kl = s_lik if n_kl == n_lik else iwae_bound(*kl_samples)
    kl = self_normalised_log_likelihood(*kl_samples) - s_kl
    return s_lik + lam * kl, kl


def _renyi_divergence(samples: tuple[Tensor, Tensor, Tensor], s: Tensor, alpha: float) -> Tensor:
    """(S_alpha^K - alpha S^K) / (alpha - 1), the estimate of D_alpha(p(z|x) || p(z)) in eq. (5.16)."""
    if alpha == 1.0:  # the alpha -> 1 limit is d/d alpha S_alpha^K - S^K = U^K - S^K, the KL estimate
        return self_normalised_log_likelihood(*samples) - s
    return (iwae_bound(*samples, alpha=alpha) - alpha * s) / (alpha - 1.0)


def renyi_objective(
    log_px_z: Tensor,
    log_pz: Tensor,
    log_qz: Tensor,
    lam: float,
    alpha: float,
    num_lik_samples: int | None = None,
    num_kl_samples: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Renyi objective, eqs. (5.15)/(5.16): ``(S^K + lam * D, D)`` with D = (S_alpha^K - alpha S^K) / (alpha - 1).

    D estimates the Renyi divergence D_alpha(p(z|x) || p(z)) by (5.13), S_alpha^K being (5.17). Definition 5 asks
    for lam > 0; we also accept lam <= 0 because the power objective with alpha < 1 (Table 5.2 tunes alpha from
    0.86) is this objective with lam = (alpha - 1) / alpha < 0.
    """
    _check_lambda(lam)
    _check_alpha(alpha, allow_one=False)
    k = _check_samples(log_px_z, log_pz, log_qz)
    n_lik = _resolve_count(num_lik_samples, k, "num_lik_samples")
    n_kl = _resolve_count(num_kl_samples, k, "num_kl_samples")
    lik_samples, kl_samples = _first(n_lik, log_px_z, log_pz, log_qz), _first(n_kl, log_px_z, log_pz, log_qz)
    s_lik = iwae_bound(*lik_samples)
    s_kl = s_lik if n_kl == n_lik else iwae_bound(*kl_samples)
    divergence = _renyi_divergence(kl_samples, s_kl, alpha)
    return s_lik + lam * divergence, divergence


def power_objective(log_px_z: Tensor, log_pz: Tensor, log_qz: Tensor, alpha: float) -> tuple[Tensor, Tensor]:
    """Power objective, eq. (5.18): ``(S_alpha^K / alpha, D)``, the Renyi objective with lam = (alpha - 1) / alpha.

    D is the Renyi divergence estimate of (5.16) (the KL estimate U^K - S^K at alpha = 1, where the objective is
    the IWAE bound). By Prop. 10, ln p^alpha(x) <= ln p(x) for alpha > 1 on discrete data, so ``alpha * objective``
    is in expectation a lower bound on ln p(x); the objective itself, scaled by 1/alpha as in (5.18), exceeds
    ln p^alpha(x) and, in the exact limit, also ln p(x) (by (alpha - 1)/alpha * D_alpha >= 0).
    """
    _check_alpha(alpha, allow_one=True)
    samples = (log_px_z, log_pz, log_qz)
    _check_samples(*samples)
    s = iwae_bound(*samples)
    s_alpha = s if alpha == 1.0 else iwae_bound(*samples, alpha=alpha)
    return s_alpha / alpha, _renyi_divergence(samples, s, alpha)


def mutual_information(log_px_z: Tensor, log_pz: Tensor, log_qz: Tensor) -> Tensor:
    """Per-example U^K - ln p^K(x) of §5.7.1, whose average over the data set estimates I_{p_D}^p(X, Z), eq. (5.4).

    Inputs are ``[K, *batch]`` log densities at K samples z_k ~ q(z|x) of the trained encoder (the thesis uses
    K = 100; any proposal with full support gives a consistent estimate, Prop. 9 (i)): ``ln p(x|z_k)``,
    ``ln p(z_k)`` and ``ln q(z_k|x)`` for every data example x. ln p^K is the IWAE estimate (5.8), so this is the
    KL estimate of the KL objective. Returns ``[*batch]``; average it over the data set (mean over examples).
    """
    _check_samples(log_px_z, log_pz, log_qz)
    return self_normalised_log_likelihood(log_px_z, log_pz, log_qz) - iwae_bound(log_px_z, log_pz, log_qz)


@dataclass(frozen=True)
class MonteCarloObjective:
    """A training objective of ch. 5 as a callable ``(log_px_z, log_pz, log_qz) [K, *b] -> [*b]``.

    ``name`` is one of :data:`OBJECTIVES`: ``"iwae"`` (the base estimator alone, S^K), ``"kl"`` (5.11), ``"renyi"``
    (5.15) or ``"power"`` (5.18). ``lam`` is used by kl/renyi, ``alpha`` by renyi/power; the sample counts by
    iwae/kl/renyi (the power objective has a single term).
    """

    name: str = "iwae"
    lam: float = 0.0
    alpha: float = 1.0
    num_lik_samples: int | None = None
    num_kl_samples: int | None = None

    def __post_init__(self) -> None:
        if self.name not in OBJECTIVES:
            raise ValueError(f"unknown objective {self.name!r}; choose one of {OBJECTIVES}")
        if self.name in ("kl", "renyi"):
            _check_lambda(self.lam)
        if self.name in ("renyi", "power"):
            _check_alpha(self.alpha, allow_one=self.name == "power")
        for count in (self.num_lik_samples, self.num_kl_samples):
            if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
                raise ValueError(f"sample counts must be positive ints or None; got {count!r}")
        if self.name == "power" and (self.num_lik_samples, self.num_kl_samples) != (None, None):
            raise ValueError("the power objective has a single term; leave num_lik_samples/num_kl_samples unset")

    def evaluate(self, log_px_z: Tensor, log_pz: Tensor, log_qz: Tensor) -> tuple[Tensor, Tensor]:
        """``(objective, divergence_estimate)``; for ``"iwae"`` the divergence is the KL estimate U^K - S^K."""
        if self.name == "kl":
            return kl_objective(log_px_z, log_pz, log_qz, self.lam, self.num_lik_samples, self.num_kl_samples)
        if self.name == "renyi":
            return renyi_objective(
                log_px_z, log_pz, log_qz, self.lam, self.alpha, self.num_lik_samples, self.num_kl_samples
            )
        if self.name == "power":
            return power_objective(log_px_z, log_pz, log_qz, self.alpha)
        k = _check_samples(log_px_z, log_pz, log_qz)
        n_lik = _resolve_count(self.num_lik_samples, k, "num_lik_samples")
        n_kl = _resolve_count(self.num_kl_samples, k, "num_kl_samples")
        samples = (log_px_z, log_pz, log_qz)
        return iwae_bound(*_first(n_lik, *samples)), mutual_information(*_first(n_kl, *samples))

    def __call__(self, log_px_z: Tensor, log_pz: Tensor, log_qz: Tensor) -> Tensor:
        if self.name == "iwae":  # skip the diagnostic KL estimate
            k = _check_samples(log_px_z, log_pz, log_qz)
            n_lik = _resolve_count(self.num_lik_samples, k, "num_lik_samples")
            return iwae_bound(*_first(n_lik, log_px_z, log_pz, log_qz))
        return self.evaluate(log_px_z, log_pz, log_qz)[0]


# ---------------------------------------------------------------------------------------------------
# gradient estimators


class Surrogates(NamedTuple):
    """Surrogates whose values are the objective ``[B]`` and whose gradients are the estimator.

    ``model`` is differentiated w.r.t. the decoder and prior parameters, ``encoder`` w.r.t. the encoder's. They
    are the same tensor for every estimator but DReG.
    """

    model: Tensor
    encoder: Tensor

    def backward(self, model_params: Iterable[Tensor], encoder_params: Iterable[Tensor]) -> None:
        """Accumulate into ``.grad`` the gradients of the loss ``-mean(objective)``.

        For DReG this runs two backward passes restricted to the two (disjoint) parameter sets; the second only
        propagates to the samples z, so it costs about one extra pass of the decoder's activation gradients.
        """
        if self.model is self.encoder:
            (-self.model.mean()).backward()
            return
        (-self.model.mean()).backward(inputs=list(model_params), retain_graph=True)
        (-self.encoder.mean()).backward(inputs=list(encoder_params))


def detach_distribution(dist: Distribution) -> Distribution:
    """The same distribution with its parameters cut from the graph (ln q with stopped encoder parameters)."""
    if isinstance(dist, Independent):
        return Independent(detach_distribution(dist.base_dist), dist.reinterpreted_batch_ndims, validate_args=False)
    if isinstance(dist, Normal):
        return Normal(dist.loc.detach(), dist.scale.detach(), validate_args=False)
    if isinstance(dist, (Categorical, OneHotCategorical)):
        return type(dist)(logits=dist.logits.detach(), validate_args=False)
    raise ValueError(
        f"detach_distribution supports Normal, Categorical, OneHotCategorical and Independent wrappers of them; "
        f"got {type(dist).__name__}"
    )


def sample(dist: Distribution, sample_shape: tuple[int, ...], reparameterised: bool,
           generator: torch.Generator | None = None) -> Tensor:
    """``dist.rsample(sample_shape)`` (``reparameterised``) or ``dist.sample(sample_shape)``, from ``generator``.

    ``torch.distributions`` always draws from the default generator; with a ``generator`` this draws the same numbers
    from it (the same kernels: ``normal_`` for a Normal's noise, ``torch.normal`` for its plain samples,
    ``torch.multinomial`` for a Categorical), so a run can keep one random stream per model. Supports Normal
    (both kinds of sample) and Categorical (plain samples), optionally ``Independent``. Without a generator it calls
    the distribution's own method, whatever the distribution.
    """
    if generator is None:
        return dist.rsample(sample_shape) if reparameterised else dist.sample(sample_shape)
    base = dist.base_dist if isinstance(dist, Independent) else dist
    shape = dist._extended_shape(torch.Size(sample_shape))
    if isinstance(base, Normal):
        if reparameterised:
            noise = torch.empty(shape, dtype=base.loc.dtype, device=base.loc.device).normal_(generator=generator)
            return base.loc + noise * base.scale
        with torch.no_grad():
            return torch.normal(base.loc.expand(shape), base.scale.expand(shape), generator=generator)
    if isinstance(base, Categorical) and not reparameterised:
        with torch.no_grad():
            probs = base.probs.reshape(-1, base._num_events)
            count = torch.Size(sample_shape).numel()
            return torch.multinomial(probs, count, True, generator=generator).T.reshape(shape)
    raise ValueError(f"sample draws reparameterised Normal and plain Normal or Categorical samples (optionally "
                     f"Independent); got {type(base).__name__} with reparameterised={reparameterised}")


def _check_pathwise(z: Tensor, name: str) -> None:
    if not z.requires_grad:
        raise ValueError(f"{name} is a pathwise estimator: pass reparameterised samples z = posterior.rsample((K,))")


def _check_score_function(z: Tensor, name: str) -> None:
    if z.requires_grad:
        raise ValueError(f"{name} is a score-function estimator: pass z = posterior.sample((K,)) without gradient")


def reparameterised_surrogate(
    objective: ObjectiveFn, log_px_z: Tensor, log_pz: Tensor, z: Tensor, posterior: Distribution
) -> Tensor:
    """Pathwise (reparameterisation) gradient of the objective (Kingma & Welling 2013; IWAE: Burda et al. 2015)."""
    _check_pathwise(z, "reparam")
    return objective(log_px_z, log_pz, posterior.log_prob(z))


def stl_surrogate(
    objective: ObjectiveFn, log_px_z: Tensor, log_pz: Tensor, z: Tensor, posterior: Distribution
) -> Tensor:
    """Sticking the landing (Roeder et al. 2017): the pathwise gradient with ln q(z|x) at stopped encoder parameters.

    Dropping the score term E[d ln q / d phi] is unbiased when the objective is affine in each ln q(z_k|x) with
    constant coefficients (the ELBO, and all single-sample objectives here); for K > 1 (IWAE STL) it is biased.
    """
    _check_pathwise(z, "stl")
    return objective(log_px_z, log_pz, detach_distribution(posterior).log_prob(z))


def dreg_weights(
    objective: ObjectiveFn, log_px_z: Tensor, log_pz: Tensor, log_qz: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """Per-sample DReG weights ``c_a = dF/da_k + d^2F / (d ln q_k d a_k)`` for a in (ln p(x|z), ln p(z), ln q(z|x)).

    Generalises Tucker et al. (2018): the score term E[(dF/d ln q_k) d ln q_phi(z_k)/d phi] is rewritten with the
    reparameterisation identity E_q[h(z) d ln q_phi(z)/d phi] = E[dh/dz dz/dphi] (h evaluated at fixed phi), which
    moves the diagonal second derivatives into the pathwise weights. For the IWAE bound this gives the familiar
    (w_k^2, w_k^2, -w_k^2) with w the normalised importance weights. The second derivatives are computed with
    ``torch.func`` (K vector-Jacobian products, vmapped) on the cheap ``[K, *batch]`` scalars only.
    Returns three ``[K, *batch]`` tensors, without gradient.
    """
    primals = tuple(t.detach() for t in (log_px_z, log_pz, log_qz))
    first_derivatives = torch.func.grad(lambda a, b, c: objective(a, b, c).sum(), argnums=(0, 1, 2))

    def score_weight(a: Tensor, b: Tensor, c: Tensor) -> tuple[Tensor, tuple[Tensor, ...]]:
        grads = first_derivatives(a, b, c)
        return grads[2], grads  # dF/d ln q_k, [K, *batch]

    _, pullback, grads = torch.func.vjp(score_weight, *primals, has_aux=True)
    k = primals[0].shape[0]
    eye = torch.eye(k, dtype=primals[0].dtype, device=primals[0].device)
    cotangents = eye.reshape(k, k, *([1] * (primals[0].dim() - 1))).expand(k, *primals[0].shape)  # [K, K, *b]
    rows = torch.func.vmap(pullback)(cotangents)  # rows[a][k] = d(dF/d ln q_k)/da, each [K, K, *batch]
    diagonals = (r.diagonal(dim1=0, dim2=1).movedim(-1, 0) for r in rows)  # [K, *batch]
    return tuple(g + d for g, d in zip(grads, diagonals))


def dreg_surrogates(
    objective: ObjectiveFn, log_px_z: Tensor, log_pz: Tensor, z: Tensor, posterior: Distribution
) -> Surrogates:
    """Doubly reparameterised gradient (Tucker et al. 2018; IWAE-DReG for the IWAE bound), for any objective.

    ``model``: the objective with ln q at stopped encoder parameters; its decoder/prior gradient is the usual
    pathwise one. ``encoder``: sum_k sum_a c_a[k] * a_k with the weights of :func:`dreg_weights` held constant,
    its gradient reaching the encoder only through z. Differentiate each w.r.t. its own parameter set
    (:meth:`Surrogates.backward`). For the KL objective the second-derivative weights involve U^K; this
    extension to objectives beyond IWAE is ours (the thesis does not spell out how DReG is applied to them).
    """
    _check_pathwise(z, "dreg")
    log_qz = detach_distribution(posterior).log_prob(z)
    value = objective(log_px_z, log_pz, log_qz)  # [B]
    weights = dreg_weights(objective, log_px_z, log_pz, log_qz)
    pathwise = sum(((c * (a - a.detach())).sum(0) for c, a in zip(weights, (log_px_z, log_pz, log_qz))))
    return Surrogates(model=value, encoder=value.detach() + pathwise)


def _score_function_surrogate(value: Tensor, signal: Tensor, log_qz: Tensor) -> Tensor:
    """value + sum_k stop(signal_k) (ln q_k - stop(ln q_k)): value unchanged, gradient gains the score term."""
    return value + (signal.detach() * (log_qz - log_qz.detach())).sum(0)


def reinforce_surrogate(
    objective: ObjectiveFn,
    log_px_z: Tensor,
    log_pz: Tensor,
    z: Tensor,
    posterior: Distribution,
    baseline: Tensor | None = None,
) -> Tensor:
    """Score-function (REINFORCE) gradient: E[dF|_z + (F - b) sum_k d ln q(z_k|x)] (Williams 1987).

    ``baseline`` is an optional ``[*batch]`` control variate independent of z (e.g. a learned baseline as in
    Mnih & Gregor 2014); it is detached.
    """
    _check_score_function(z, "reinforce")
    log_qz = posterior.log_prob(z)
    value = objective(log_px_z, log_pz, log_qz)  # [B]
    signal = value if baseline is None else value - baseline
    return _score_function_surrogate(value, signal.expand_as(log_qz), log_qz)


def _leave_one_out(x: Tensor) -> Tensor:
    """``out[i, j] = x[i]`` for i != j and the mean of the other samples' x for i == j: ``[K, *b] -> [K, K, *b]``."""
    k = x.shape[0]
    others_mean = (x.sum(0, keepdim=True) - x) / (k - 1)  # [K, *batch]
    on_diagonal = torch.eye(k, dtype=torch.bool, device=x.device).reshape(k, k, *([1] * (x.dim() - 1)))
    return torch.where(on_diagonal, others_mean.unsqueeze(0), x.unsqueeze(1))


def vimco_surrogate(
    objective: ObjectiveFn, log_px_z: Tensor, log_pz: Tensor, z: Tensor, posterior: Distribution
) -> Tensor:
    """VIMCO (Mnih & Rezende 2016): score-function gradient with per-sample leave-one-out baselines.

    The baseline of sample k is the objective with sample k's log densities replaced by the mean of the other
    samples' (for the IWAE bound: its log weight by the others' mean log weight, i.e. the geometric mean of
    their weights, as in VIMCO). It does not depend on z_k, so the estimator is unbiased for any objective; here
    it is evaluated for all k at once on ``[K, K, *batch]`` inputs, so the objective must reduce over dim 0 and
    broadcast over the rest (all objectives of this module do). With K = 1 the baseline is zero, i.e.
    REINFORCE 1, which the thesis uses wherever "VIMCO 1" would be needed (§5.7.1).
    """
    _check_score_function(z, "vimco")
    log_qz = posterior.log_prob(z)
    value = objective(log_px_z, log_pz, log_qz)  # [B]
    if log_qz.shape[0] == 1:
        return _score_function_surrogate(value, value.expand_as(log_qz), log_qz)
    with torch.no_grad():
        loo = tuple(_leave_one_out(t) for t in (log_px_z, log_pz, log_qz))  # [K, K, B]: dim 1 picks the sample
        baselines = objective(*loo)  # [K, B]
    return _score_function_surrogate(value, value - baselines, log_qz)


_SINGLE_SURROGATE = {
    "reparam": reparameterised_surrogate,
    "stl": stl_surrogate,
    "reinforce": reinforce_surrogate,
    "vimco": vimco_surrogate,
}


def surrogates(
    estimator: str, objective: ObjectiveFn, log_px_z: Tensor, log_pz: Tensor, z: Tensor, posterior: Distribution
) -> Surrogates:
    """Dispatch on ``estimator`` (one of :data:`ESTIMATORS`); see the module docstring for the contract."""
    if estimator == "dreg":
        return dreg_surrogates(objective, log_px_z, log_pz, z, posterior)
    if estimator not in _SINGLE_SURROGATE:
        raise ValueError(f"unknown estimator {estimator!r}; choose one of {ESTIMATORS}")
    value = _SINGLE_SURROGATE[estimator](objective, log_px_z, log_pz, z, posterior)
    return Surrogates(model=value, encoder=value)
