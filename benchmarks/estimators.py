"""Cost of the MICMCO objectives relative to their base estimator, Melis thesis §5.4 ("negligible overhead").

One training step (forward + backward, no optimizer update) on the synthetic-task model of §5.7.1: a vocabulary
of 10,000 one-symbol examples, an encoder of embedding + two 128-unit tanh layers, and

- continuous latents: 40-d diagonal Gaussian q, standard normal prior, decoder of two 128-unit tanh layers and a
  softmax over the vocabulary (base estimators reparam / stl / dreg);
- discrete latents: 8 categorical latents with 10 categories and a uniform prior, decoder embedding the latents
  and one 128-unit tanh layer (base estimators reinforce / vimco).

For each base estimator and K in {16, 64} it times the IWAE step and the KL, Renyi and power objective steps on
the same batch, interleaved, and prints the ratio of medians (goal: <= 1.05). The batch size is not given in the
thesis; 64 is our choice. Run: ``python benchmarks/estimators.py [--batch-size 64 --repeats 7 --threads 1]``.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time

import torch
from torch import Tensor, nn
from torch.distributions import Categorical, Independent, Normal

from paperlib.estimators import PATHWISE_ESTIMATORS, MonteCarloObjective, surrogates

VOCAB, HIDDEN, LATENT = 10_000, 128, 40
NUM_CATEGORICAL, CATEGORIES = 8, 10

OBJECTIVES = {
    "iwae": MonteCarloObjective("iwae"),
    "kl": MonteCarloObjective("kl", lam=0.5),
    "renyi": MonteCarloObjective("renyi", lam=0.5, alpha=0.9),
    "power": MonteCarloObjective("power", alpha=2.0),
}


def mlp(inputs: int, layers: int) -> nn.Sequential:
    modules: list[nn.Module] = []
    for i in range(layers):
        modules += [nn.Linear(inputs if i == 0 else HIDDEN, HIDDEN), nn.Tanh()]
    return nn.Sequential(*modules)


class Encoder(nn.Module):
    """Embedding + two tanh layers + an affine head producing the parameters of q(z|x)."""

    def __init__(self, outputs: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Embedding(VOCAB, HIDDEN), mlp(HIDDEN, 2))
        self.head = nn.Linear(HIDDEN, outputs)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.body(x))


class GaussianVAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = Encoder(2 * LATENT)
        self.decoder = nn.Sequential(mlp(LATENT, 2), nn.Linear(HIDDEN, VOCAB))

    def posterior(self, x: Tensor) -> Independent:
        loc, log_var = self.encoder(x).chunk(2, dim=-1)  # [B, D] each; g(o) is the log variance
        return Independent(Normal(loc, (0.5 * log_var).exp()), 1)

    def log_prior(self, z: Tensor) -> Tensor:
        return Normal(0.0, 1.0).log_prob(z).sum(-1)  # [K, B]

    def log_likelihood(self, z: Tensor, x: Tensor) -> Tensor:
        logits = self.decoder(z)  # [K, B, V]
        return logits.log_softmax(-1).gather(-1, x.expand(z.shape[0], -1).unsqueeze(-1)).squeeze(-1)  # [K, B]


class CategoricalVAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = Encoder(NUM_CATEGORICAL * CATEGORIES)
        self.latent_embedding = nn.Embedding(NUM_CATEGORICAL * CATEGORIES, HIDDEN)
        self.decoder = nn.Sequential(mlp(HIDDEN, 1), nn.Linear(HIDDEN, VOCAB))
        self.register_buffer("offsets", torch.arange(NUM_CATEGORICAL) * CATEGORIES)

    def posterior(self, x: Tensor) -> Independent:
        logits = self.encoder(x).view(-1, NUM_CATEGORICAL, CATEGORIES)  # [B, L, C]
        return Independent(Categorical(logits=logits), 1)

    def log_prior(self, z: Tensor) -> Tensor:
        return torch.full(z.shape[:-1], -NUM_CATEGORICAL * math.log(CATEGORIES), device=z.device)  # uniform, [K, B]

    def log_likelihood(self, z: Tensor, x: Tensor) -> Tensor:
        h = self.latent_embedding(z + self.offsets).sum(-2)  # [K, B, H]
        logits = self.decoder(h)  # [K, B, V]
        return logits.log_softmax(-1).gather(-1, x.expand(z.shape[0], -1).unsqueeze(-1)).squeeze(-1)  # [K, B]


def training_step(model: nn.Module, estimator: str, objective: MonteCarloObjective, x: Tensor, k: int) -> None:
    q = model.posterior(x)
    z = q.rsample((k,)) if estimator in PATHWISE_ESTIMATORS else q.sample((k,))
    s = surrogates(estimator, objective, model.log_likelihood(z, x), model.log_prior(z), z, q)
    decoder_params = [p for name, p in model.named_parameters() if not name.startswith("encoder.")]
    s.backward(decoder_params, model.encoder.parameters())
    model.zero_grad(set_to_none=True)


def time_ratios(model: nn.Module, estimator: str, k: int, batch: int, repeats: int) -> dict[str, float]:
    x = torch.randint(VOCAB, (batch,))
    order = random.Random(k)
    names = list(OBJECTIVES)
    times: dict[str, list[float]] = {name: [] for name in OBJECTIVES}
    for round_ in range(repeats + 1):
        order.shuffle(names)  # interleaved in random order, so load drifts on a shared machine affect all alike
        for name in names:
            start = time.process_time()  # CPU time: robust to other processes competing for the cores
            training_step(model, estimator, OBJECTIVES[name], x, k)
            if round_ > 0:  # the first round warms up allocators and kernels
                times[name].append(time.process_time() - start)
    medians = {name: statistics.median(t) for name, t in times.items()}
    return {"iwae_seconds": medians["iwae"], **{n: medians[n] / medians["iwae"] for n in OBJECTIVES if n != "iwae"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--samples", type=int, nargs="+", default=[16, 64])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    models = {"gaussian": GaussianVAE(), "categorical": CategoricalVAE()}
    cases = [("gaussian", e) for e in ("reparam", "stl", "dreg")] + [("categorical", e) for e in ("reinforce", "vimco")]
    print(f"batch {args.batch_size}, {args.threads} thread(s), median CPU time of {args.repeats} steps")
    print("ratio = objective step / IWAE step with the same base estimator")
    print(f"{'latents':<12}{'estimator':<11}{'K':>4}{'IWAE step':>12}{'KL':>8}{'Renyi':>8}{'power':>8}")
    for k in args.samples:
        for latents, estimator in cases:
            r = time_ratios(models[latents], estimator, k, args.batch_size, args.repeats)
            print(
                f"{latents:<12}{estimator:<11}{k:>4}{1000 * r['iwae_seconds']:>10.1f}ms"
                f"{r['kl']:>8.3f}{r['renyi']:>8.3f}{r['power']:>8.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
