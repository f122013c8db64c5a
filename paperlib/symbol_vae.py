"""Latent-variable models of single symbols (Melis thesis §5.7.1, §5.A): the models of the synthetic MICMCO task.

:class:`GaussianVAE` (40 continuous latents, N(f(o), diag(exp(g(o)))) posterior, standard normal prior),
:class:`CategoricalVAE` (8 categorical latents of 10 classes, q ∝ exp(o), uniform prior) and the :class:`VQVAE`
baseline of §5.A (van den Oord et al. 2017). Encoders embed the symbol and apply two 128-unit tanh layers; decoders
mirror them with a final softmax over the vocabulary (one hidden layer for categorical latents, which are embedded).
All share ``posterior``/``log_likelihood``/``log_prior`` and :meth:`LatentVariableModel.log_densities`.

Departures (the thesis does not give them):

- "q(z|x) is proportional to exp(o)" with o the last encoder layer's output: for categorical latents we take that
  layer to be affine (8 x 10 unbounded logits), as f and g are for continuous ones; a tanh layer of width 128 could
  neither match the number of logits nor make q sharp.
- VQ-VAE codebooks are per latent (so the decoder can sum the L code vectors, as it sums the embeddings of
  categorical latents) and updated by exponential moving averages with Laplace smoothing (van den Oord et al.
  2017, appendix).

Distributions are built with ``validate_args=False``: checking that a scale is positive or a sample in the support
reads a value back to the host on every construction (a GPU synchronisation per step, and an error under the dry
run's fake tensors); the encoders' parameterisations (exp, softmax logits) satisfy the constraints by construction."""

from __future__ import annotations

import abc
import math

import torch
from torch import Tensor, nn
from torch.distributions import Categorical, Distribution, Independent, Normal
from torch.nn import functional as F


def tanh_mlp(inputs: int, hidden: int, layers: int) -> nn.Sequential:
    """``layers`` densely connected tanh layers of width ``hidden``."""
    modules: list[nn.Module] = []
    for i in range(layers):
        modules += [nn.Linear(inputs if i == 0 else hidden, hidden), nn.Tanh()]
    return nn.Sequential(*modules)


class SymbolEncoder(nn.Module):
    """Embedding of the symbol, two tanh layers, and an affine head giving the posterior's parameters o."""

    def __init__(self, vocab_size: int, hidden: int, outputs: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, hidden)
        self.body = tanh_mlp(hidden, hidden, 2)
        self.head = nn.Linear(hidden, outputs)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.body(self.embedding(x)))  # [B, outputs]


def _symbol_log_likelihood(logits: Tensor, x: Tensor) -> Tensor:
    """ln softmax(logits)[x] for logits ``[K, B, V]`` and symbols ``[B]`` -> ``[K, B]``."""
    k, b, v = logits.shape
    targets = x.expand(k, b).reshape(-1)
    return -F.cross_entropy(logits.reshape(k * b, v), targets, reduction="none").view(k, b)


class LatentVariableModel(nn.Module, abc.ABC):
    """Shared interface: ``posterior(x)`` (batch ``[B]``), ``prior()``, ``log_prior(z)``, ``log_likelihood(z, x)``.

    ``z`` carries a leading sample dimension ``[K, B, ...]``; log densities are ``[K, B]``. Parameters whose name
    starts with ``encoder.`` belong to q; the rest to the generative model (needed by DReG's split backward).
    """

    encoder: SymbolEncoder

    @abc.abstractmethod
    def posterior(self, x: Tensor) -> Distribution:
        """q(z|x) with batch shape ``[B]``."""

    @abc.abstractmethod
    def prior(self) -> Distribution:
        """p(z) with batch shape ``[]``."""

    @abc.abstractmethod
    def log_likelihood(self, z: Tensor, x: Tensor) -> Tensor:
        """ln p(x|z) for samples ``[K, B, ...]`` -> ``[K, B]``."""

    def log_prior(self, z: Tensor) -> Tensor:
        return self.prior().log_prob(z)  # [K, B]

    def encoder_parameters(self) -> list[nn.Parameter]:
        return list(self.encoder.parameters())

    def model_parameters(self) -> list[nn.Parameter]:
        return [p for name, p in self.named_parameters() if not name.startswith("encoder.")]

    @torch.no_grad()
    def log_densities(self, x: Tensor, num_samples: int) -> tuple[Tensor, Tensor, Tensor]:
        """``(ln p(x|z_k), ln p(z_k), ln q(z_k|x))`` at K samples of q, each ``[K, B]``, for evaluation."""
        q = self.posterior(x)
        z = q.sample((num_samples,))  # [K, B, ...]
        return self.log_likelihood(z, x), self.log_prior(z), q.log_prob(z)


class GaussianVAE(LatentVariableModel):
    """Continuous latents: q(z|x) = N(f(o), diag(exp(g(o)))), p(z) = N(0, I), decoder of two tanh layers (§5.7.1)."""

    def __init__(self, vocab_size: int, hidden: int = 128, latent_dim: int = 40) -> None:
        super().__init__()
        self.latent_dim = latent_dim
        self.encoder = SymbolEncoder(vocab_size, hidden, 2 * latent_dim)  # f and g: two affine maps of o
        self.decoder = nn.Sequential(tanh_mlp(latent_dim, hidden, 2), nn.Linear(hidden, vocab_size))
        self.register_buffer("zero", torch.zeros(()))

    def posterior(self, x: Tensor) -> Independent:
        loc, log_var = self.encoder(x).chunk(2, dim=-1)  # [B, D] each; g(o) is the log variance
        return Independent(Normal(loc, (0.5 * log_var).exp(), validate_args=False), 1, validate_args=False)

    def prior(self) -> Independent:
        standard = Normal(self.zero, self.zero + 1.0, validate_args=False).expand((self.latent_dim,))
        return Independent(standard, 1, validate_args=False)

    def log_likelihood(self, z: Tensor, x: Tensor) -> Tensor:
        return _symbol_log_likelihood(self.decoder(z), x)  # z: [K, B, D] -> [K, B]


class CategoricalVAE(LatentVariableModel):
    """Discrete latents: L categorical variables of C classes, q ∝ exp(o), uniform prior (§5.7.1).

    The decoder sums one embedding per (latent, class) and applies one tanh layer before the softmax.
    """

    def __init__(self, vocab_size: int, hidden: int = 128, num_latents: int = 8, categories: int = 10) -> None:
        super().__init__()
        self.num_latents, self.categories = num_latents, categories
        self.encoder = SymbolEncoder(vocab_size, hidden, num_latents * categories)
        self.latent_embedding = nn.Embedding(num_latents * categories, hidden)
        self.decoder = nn.Sequential(tanh_mlp(hidden, hidden, 1), nn.Linear(hidden, vocab_size))
        self.register_buffer("offsets", torch.arange(num_latents) * categories)  # [L]
        self.register_buffer("prior_logits", torch.zeros(num_latents, categories))  # [L, C]

    def posterior(self, x: Tensor) -> Independent:
        logits = self.encoder(x).view(-1, self.num_latents, self.categories)  # [B, L, C]
        return Independent(Categorical(logits=logits, validate_args=False), 1, validate_args=False)

    def prior(self) -> Independent:
        return Independent(Categorical(logits=self.prior_logits, validate_args=False), 1, validate_args=False)

    def log_likelihood(self, z: Tensor, x: Tensor) -> Tensor:
        h = self.latent_embedding(z + self.offsets).sum(-2)  # z: [K, B, L] -> [K, B, H]
        return _symbol_log_likelihood(self.decoder(h), x)


class VQVAE(nn.Module):
    """VQ-VAE baseline of §5.A (van den Oord et al. 2017) with the synthetic task's encoder and decoder.

    The encoder outputs L vectors z_e of size ``hidden``; each is replaced by its nearest code among C in its own
    codebook (z_q), the decoder sees the sum of the L code vectors through one tanh layer, and the encoder receives
    the decoder's gradient by the straight-through estimator. Codebooks follow exponential moving averages of the
    encoder outputs assigned to them (decay ``decay``, Laplace smoothing); the loss adds beta ||z_e - sg(z_q)||^2.
    """

    def __init__(
        self,
        vocab_size: int,
        hidden: int = 128,
        num_latents: int = 1,
        categories: int = 2,
        beta: float = 0.25,
        decay: float = 0.99,
        epsilon: float = 1e-5,
    ) -> None:
        super().__init__()
        if not (0.0 < decay < 1.0) or beta < 0.0:
            raise ValueError(f"need 0 < decay < 1 and beta >= 0; got decay={decay}, beta={beta}")
        self.num_latents, self.categories, self.hidden = num_latents, categories, hidden
        self.beta, self.decay, self.epsilon = beta, decay, epsilon
        self.encoder = SymbolEncoder(vocab_size, hidden, num_latents * hidden)
        self.decoder = nn.Sequential(tanh_mlp(hidden, hidden, 1), nn.Linear(hidden, vocab_size))
        codebook = torch.randn(num_latents, categories, hidden) / math.sqrt(hidden)
        self.register_buffer("codebook", codebook)  # [L, C, H]
        self.register_buffer("ema_count", torch.zeros(num_latents, categories))  # [L, C]
        self.register_buffer("ema_sum", torch.zeros_like(codebook))  # [L, C, H]

    def encode(self, x: Tensor) -> Tensor:
        return self.encoder(x).view(-1, self.num_latents, self.hidden)  # [B, L, H]

    def quantize(self, z_e: Tensor) -> tuple[Tensor, Tensor]:
        """Nearest codes: indices ``[B, L]`` and code vectors ``[B, L, H]`` (no gradient)."""
        distances = torch.cdist(z_e.detach().transpose(0, 1), self.codebook)  # [L, B, C]
        index = distances.argmin(-1).T  # [B, L]
        codes = self.codebook[torch.arange(self.num_latents, device=z_e.device), index]  # [B, L, H]
        return index, codes

    def straight_through(self, z_e: Tensor, codes: Tensor) -> Tensor:
        """z_q in the forward pass, identity gradient to z_e in the backward pass."""
        return z_e + (codes - z_e).detach()

    def decode_log_likelihood(self, z_q: Tensor, x: Tensor) -> Tensor:
        """ln p(x|z_q) as ``[1, B]`` (one "sample") for code vectors ``[B, L, H]``."""
        logits = self.decoder(z_q.sum(-2)).unsqueeze(0)  # [1, B, V]
        return _symbol_log_likelihood(logits, x)

    @torch.no_grad()
    def update_codebook(self, z_e: Tensor, index: Tensor) -> None:
        """EMA codebook update (van den Oord et al. 2017, appendix A.1) with Laplace-smoothed counts.

        Both averages start at zero, so their common start-up bias (1 - decay^t) cancels in the ratio and a code
        is the (decayed) mean of the encoder outputs assigned to it; codes never assigned keep their initial value.
        """
        assign = F.one_hot(index, self.categories).to(z_e.dtype)  # [B, L, C]
        counts = assign.sum(0)  # [L, C]
        sums = torch.einsum("blc,blh->lch", assign, z_e.detach())  # [L, C, H]
        self.ema_count.mul_(self.decay).add_(counts, alpha=1.0 - self.decay)
        self.ema_sum.mul_(self.decay).add_(sums, alpha=1.0 - self.decay)
        total = self.ema_count.sum(-1, keepdim=True)  # [L, 1]
        smoothed = (self.ema_count + self.epsilon) / (total + self.categories * self.epsilon) * total  # [L, C]
        used = (self.ema_count > 0).unsqueeze(-1)  # [L, C, 1]
        self.codebook.copy_(torch.where(used, self.ema_sum / smoothed.clamp_min(1e-12).unsqueeze(-1), self.codebook))

    def loss(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(loss, ln p(x|z_q))``: mean over the batch of -ln p(x|z_q) + beta ||z_e - sg(z_q)||^2; updates codes."""
        z_e = self.encode(x)
        index, codes = self.quantize(z_e)
        log_lik = self.decode_log_likelihood(self.straight_through(z_e, codes), x)[0]  # [B]
        commitment = (z_e - codes).pow(2).sum((-1, -2))  # [B]
        if self.training:
            self.update_codebook(z_e, index)
        return (-log_lik + self.beta * commitment).mean(), log_lik

    @torch.no_grad()
    def log_densities(self, x: Tensor, num_samples: int) -> tuple[Tensor, Tensor, Tensor]:
        """One sample suffices: q is a point mass, so every estimate over K copies equals the one-sample value."""
        _, codes = self.quantize(self.encode(x))
        log_px_z = self.decode_log_likelihood(codes, x)  # [1, B]
        log_pz = log_px_z.new_full(log_px_z.shape, -self.num_latents * math.log(self.categories))
        return log_px_z, log_pz, torch.zeros_like(log_px_z)
