"""Sentence VAE of the MICMCO language-modelling experiments, Melis thesis §5.7.2 (and §5.B, Table 5.2).

One set of latents per sentence x = (w_1, ..., w_n) (the last token is ``<eos>``):

- **encoder** q(z|x): the tokens are embedded and read by a one-layer bidirectional LSTM; o is the average of the
  two directions' final outputs (each direction's last state at the sentence's real end, padding is packed away).
  Continuous latents: q(z|x) = N(f(o), diag(exp(g(o)))) with 40 dimensions and prior N(0, I); discrete latents:
  8 categorical variables of 10 classes, q ∝ exp(o') with o' an affine map of o, uniform prior (as in §5.7.1).
- **decoder** p(x|z): a unidirectional LSTM whose input at step t is the embedding of w_{t-1} (``<eos>`` opens
  the sentence) plus the latents' contribution: a linear map of z for Gaussian latents, the sum of one embedding
  per (latent, class) for categorical ones. ln p(x|z) sums the next-token log-probabilities over the real tokens.
- **decoder regularisation** (§5.7.2 / Table 5.2): dropout on the input embedding, the recurrent state
  (variational, one mask per sequence, Gal & Ghahramani 2016) and the LSTM output, with inverted scaling, drawn by
  :func:`paperlib.models.masks.sample_masks`. In ``mask_mode="shared"`` one mask set is drawn per *sentence* and
  broadcast over its K latent samples (the fix of Fig. 5.12); in ``"naive"`` mode every (sample, sentence) row
  gets its own masks (Fig. 5.10). L2 regularisation (Fig. 5.11) lives in the optimiser, not here.

The K samples of a batch of B sentences run as one batched pass over K * B rows (sample-major: row k * B + b);
masks carry a leading sample axis of size 1 (shared, broadcast over K) or K (naive). The model exposes the
protocol of :class:`paperlib.experiments.micmco.synthetic.micmco_synthetic.LatentVariableModel` with ``x`` a :class:`~paperlib.data.SentenceBatch`
(``posterior``, ``prior``, ``log_prior``, ``log_likelihood``, ``log_densities``, ``encoder_parameters``,
``model_parameters``), so :func:`paperlib.experiments.micmco.synthetic.micmco_synthetic.step_surrogates` trains it with any estimator of
:mod:`paperlib.estimators`.

Choices the thesis leaves open (ours): embedding size = hidden size ("the embedding and hidden sizes are all
128"); encoder and decoder embeddings are separate (DReG needs disjoint encoder / model parameter sets); the
output embedding is untied unless ``tie_embeddings``; input dropout acts on the token embedding before the
latents are added, so the latents themselves are never dropped; the decoder starts from a zero state.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.distributions import Categorical, Independent, Normal, kl_divergence
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence

from paperlib.data import SentenceBatch
from paperlib.models.layers import LSTMLayer
from paperlib.models.masks import DropoutRates, sample_masks

LATENTS = ("gaussian", "categorical")
MASK_MODES = ("shared", "naive")


class BiLSTMEncoder(nn.Module):
    """Token embedding, one bidirectional LSTM layer, o = mean of the two final states, affine head -> ``outputs``."""

    def __init__(self, vocab_size: int, hidden: int, outputs: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, hidden)
        self.rnn = nn.LSTM(hidden, hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(hidden, outputs)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """``tokens`` [B, T] (padded), ``lengths`` [B] -> posterior parameters [B, outputs]."""
        packed = pack_padded_sequence(self.embedding(tokens), lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, (h, _) = self.rnn(packed)  # h: [2, B, H], each direction's state at the sentence's own end
        return self.head(h.mean(0))


@dataclass
class DecoderMasks:
    """Decoder dropout masks with a leading sample axis K' = 1 (shared over the K samples) or K (naive).

    ``None`` means no dropout at that place. Entries are 0 or 1 / (1 - rate) (inverted dropout).
    """

    input: Tensor | None  # [K', B, T, E]
    state: Tensor | None  # [K', B, H]
    output: Tensor | None  # [K', B, T, H]

    def expanded(self, num_samples: int) -> "DecoderMasks":
        """The masks every one of the ``num_samples`` samples sees, each with a leading axis of size K."""

        def grow(mask: Tensor | None) -> Tensor | None:
            return None if mask is None else mask.expand(num_samples, *mask.shape[1:])

        return DecoderMasks(grow(self.input), grow(self.state), grow(self.output))


class SentenceVAE(nn.Module):
    """BiLSTM encoder, LSTM decoder with the latents added to its input (Melis thesis §5.7.2).

    ``latent``: ``"gaussian"`` (``latent_dim`` dims) or ``"categorical"`` (``num_latents`` x ``categories``).
    ``dropout``: decoder input / state / output rates (other fields of :class:`DropoutRates` must be 0);
    ``mask_mode``: ``"shared"`` or ``"naive"`` (see the module docstring).
    """

    def __init__(
        self,
        vocab_size: int,
        hidden: int = 128,
        latent: str = "gaussian",
        latent_dim: int = 40,
        num_latents: int = 8,
        categories: int = 10,
        dropout: DropoutRates | None = None,
        mask_mode: str = "shared",
        tie_embeddings: bool = False,
    ) -> None:
        super().__init__()
        if latent not in LATENTS:
            raise ValueError(f"unknown latent type {latent!r}; choose one of {LATENTS}")
        if mask_mode not in MASK_MODES:
            raise ValueError(f"unknown mask_mode {mask_mode!r}; choose one of {MASK_MODES}")
        dropout = dropout or DropoutRates()
        if dropout.embedding or dropout.cell_output:
            raise ValueError("the sentence VAE's decoder has input, state and output dropout only "
                             f"(embedding and cell_output must be 0); got {dropout}")
        if min(vocab_size, hidden, latent_dim, num_latents, categories) < 1:
            raise ValueError("vocab_size, hidden, latent_dim, num_latents and categories must be >= 1")
        self.vocab_size, self.hidden, self.latent = vocab_size, hidden, latent
        self.latent_dim, self.num_latents, self.categories = latent_dim, num_latents, categories
        self.dropout, self.mask_mode = dropout, mask_mode
        outputs = 2 * latent_dim if latent == "gaussian" else num_latents * categories
        self.encoder = BiLSTMEncoder(vocab_size, hidden, outputs)
        self.embedding = nn.Embedding(vocab_size, hidden)
        self.rnn = LSTMLayer(hidden, hidden, capped_input_gate=False)
        self.output = nn.Linear(hidden, vocab_size)
        if tie_embeddings:
            self.output.weight = self.embedding.weight
        if latent == "gaussian":
            self.latent_projection = nn.Linear(latent_dim, hidden, bias=False)
        else:
            self.latent_embedding = nn.Embedding(num_latents * categories, hidden)
            self.register_buffer("offsets", torch.arange(num_latents) * categories)  # [L]
            self.register_buffer("prior_logits", torch.zeros(num_latents, categories))  # [L, C]
        self.register_buffer("zero", torch.zeros(()))

    # -- the latent variable model protocol (paperlib.experiments.micmco.synthetic.micmco_synthetic.LatentVariableModel) ----------------------------------

    def posterior(self, x: SentenceBatch) -> Independent:
        """q(z|x) with batch shape [B]; the encoder reads the sentence itself (``x.targets``)."""
        o = self.encoder(x.targets, x.lengths)
        if self.latent == "gaussian":
            loc, log_var = o.chunk(2, dim=-1)  # [B, D] each; g(o) is the log variance
            return Independent(Normal(loc, (0.5 * log_var).exp(), validate_args=False), 1, validate_args=False)
        return Independent(Categorical(logits=o.view(-1, self.num_latents, self.categories), validate_args=False), 1,
                           validate_args=False)  # [B, L, C]

    def prior(self) -> Independent:
        if self.latent == "gaussian":
            return Independent(Normal(self.zero, self.zero + 1.0, validate_args=False).expand((self.latent_dim,)), 1,
                               validate_args=False)
        return Independent(Categorical(logits=self.prior_logits, validate_args=False), 1, validate_args=False)

    def log_prior(self, z: Tensor) -> Tensor:
        return self.prior().log_prob(z)  # [K, B]

    def encoder_parameters(self) -> list[nn.Parameter]:
        return list(self.encoder.parameters())

    def model_parameters(self) -> list[nn.Parameter]:
        return [p for name, p in self.named_parameters() if not name.startswith("encoder.")]

    def log_likelihood(self, z: Tensor, x: SentenceBatch, masks: DecoderMasks | None = None,
                       max_logits: int = 2**25, dense: bool = False) -> Tensor:
        """ln p(x|z) for samples ``z`` [K, B, ...] -> [K, B], summed over each sentence's real tokens.

        Without ``masks``, masks are drawn in training mode (if any rate is positive) and none are used in eval
        mode. The softmax is evaluated only at real tokens, in chunks of at most ``max_logits`` logits; with
        ``dense`` at every position, padding masked out afterwards (no data-dependent shapes, so ``torch.func``
        transforms can trace it, at the cost of the padding's logits).
        """
        k, b = z.shape[:2]
        t = x.inputs.shape[1]
        if masks is None and self.training:
            masks = self.sample_masks(k, b, t)
        masks = masks or DecoderMasks(None, None, None)
        inputs = self.embedding(x.inputs).unsqueeze(0)  # [1, B, T, E]
        if masks.input is not None:
            inputs = inputs * masks.input  # [K', B, T, E]
        inputs = inputs + self.latent_input(z).unsqueeze(2)  # [K, B, T, E]
        inputs = inputs.reshape(k * b, t, -1).transpose(0, 1)  # [T, K*B, E], time-major
        state_mask = None
        if masks.state is not None:
            state_mask = masks.state.expand(k, b, -1).reshape(k * b, -1)  # [K*B, H]
        out, _ = self.rnn(inputs, self.rnn.init_state(k * b), state_mask)  # [T, K*B, H]
        out = out.view(t, k, b, -1)
        if masks.output is not None:
            out = out * masks.output.permute(2, 0, 1, 3)  # [T, K', B, H]
        if dense:
            targets = x.targets.t().unsqueeze(1).expand(t, k, b)  # [T, K, B]
            token_log_probs = -F.cross_entropy(self.output(out).flatten(0, 2), targets.flatten(), reduction="none")
            real = x.mask.t().unsqueeze(1).expand(t, k, b).flatten()
            return torch.where(real, token_log_probs, 0.0).view(t, k, b).sum(0)
        real = x.mask.t().unsqueeze(1).expand(t, k, b)  # [T, K, B]
        hidden = out[real]  # [N, H], N = K * (real tokens)
        targets = x.targets.t().unsqueeze(1).expand(t, k, b)[real]  # [N]
        rows = torch.arange(k * b, device=z.device).view(1, k, b).expand(t, k, b)[real]  # [N]: row of each token
        chunk = max(1, max_logits // self.vocab_size)
        token_log_probs = torch.cat([
            -F.cross_entropy(self.output(h), y, reduction="none")
            for h, y in zip(hidden.split(chunk), targets.split(chunk))
        ]) if hidden.shape[0] else hidden.new_zeros(0)  # [N]
        totals = token_log_probs.new_zeros(k * b).index_add(0, rows, token_log_probs)  # [K*B]
        return totals.view(k, b)

    @torch.no_grad()
    def log_densities(self, x: SentenceBatch, num_samples: int) -> tuple[Tensor, Tensor, Tensor]:
        """``(ln p(x|z_k), ln p(z_k), ln q(z_k|x))`` at K samples of q, each [K, B], without dropout."""
        q = self.posterior(x)
        z = q.sample((num_samples,))  # [K, B, ...]
        return self.log_likelihood(z, x, DecoderMasks(None, None, None)), self.log_prior(z), q.log_prob(z)

    # -- pieces ----------------------------------------------------------------------------------------------------

    def latent_input(self, z: Tensor) -> Tensor:
        """What the latents add to every decoder input: [K, B, D] or [K, B, L] -> [K, B, E]."""
        if self.latent == "gaussian":
            return self.latent_projection(z)
        return self.latent_embedding(z + self.offsets).sum(-2)

    def representational_kl(self, x: SentenceBatch) -> Tensor:
        """KL(q(z|x) || p(z)) per sentence [B] in closed form (the single-sample objectives' divergence)."""
        return kl_divergence(self.posterior(x), self.prior())

    def sample_masks(self, num_samples: int, batch_size: int, seq_len: int,
                     generator: torch.Generator | None = None) -> DecoderMasks:
        """Draw the decoder's dropout masks for K = ``num_samples`` samples of ``batch_size`` sentences.

        Shared mode draws masks for the B sentences and gives them a broadcast sample axis of size 1; naive mode
        draws K * B independent rows. Variational state dropout keeps one mask per row for all time steps.
        """
        rows = batch_size if self.mask_mode == "shared" else num_samples * batch_size
        drawn = sample_masks(self.dropout, self.embedding.weight, rows, seq_len, self.vocab_size, self.hidden,
                             [self.hidden], generator=generator)

        def with_sample_axis(mask: Tensor | None) -> Tensor | None:
            return None if mask is None else mask.view(-1, batch_size, *mask.shape[1:])  # [K', B, ...]

        return DecoderMasks(with_sample_axis(drawn.input), with_sample_axis(drawn.state[0]),
                            with_sample_axis(drawn.output))


__all__ = ["LATENTS", "MASK_MODES", "BiLSTMEncoder", "DecoderMasks", "SentenceVAE"]
