"""Deep state space model for unconditional word generation, Schmidt & Hofmann (seed 004).

Generative model (§2.1): ``h_t = F_g(h_{t-1}, xi_t)``, ``xi_t ~ N(0, I)``, with no autoregressive
input, and a softmax observation model ``P(w_t | h_t)`` over letters plus an end-of-word symbol.
Inference model (§2.5): a GRU runs backwards over the word, ``a_t`` has read ``w_{t:T}``, and
``q(xi_t | a_t[, h_{t-1}])`` is a diagonal Gaussian pushed through its own flow ``F_q``. Training
maximises the two-flow ELBO (eq. 9) or its importance-weighted one-step variant (§2.7,
Algorithm 1). Also here: the Monte Carlo word probability of eq. (12), word sampling, and the
teacher-forced character GRU baseline of §5.1.

Choices the paper leaves open (stated once here):

* Words have at most ``max_len`` letters: at step ``max_len + 1`` the observation model puts all
  its mass on end-of-word, so ``P(w)`` is a distribution over the finite set of strings of length
  ``0..max_len`` (the data uses ``2 <= l <= 12``).
* ``h_0`` is a learned vector; MLPs use tanh units; ``q``'s scale is ``softplus + min_scale``.
* ``q`` conditions on ``a_t`` only by default (§2.5 reports better stability than also using
  ``h_{t-1}``; ``q_uses_state`` turns that on). With ``q_uses_proposal`` it also sees a proposal
  ``h_g = F_g(h_{t-1}, eps)`` as in Algorithm 1; the proposal stays reparametrised (gradients flow).
* The importance weights are those of Algorithm 1, ``w = P(w_t|h) p(h|h_{t-1}) / q_k(h)``, also
  when ``q_k`` depends on the proposal ``h_g^(k)``; as in the paper (one-step horizon), this makes
  the weighted objective a biased bound.
* The GRU baseline reads the end-of-word symbol as its start-of-word input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import torch
import torch.nn.functional as F
import zuko
from torch import Tensor, nn
from torch.distributions import Normal

from paperlib.flows import ConditionalFlow, InverseFlow, build_flow, combined_flow

EMISSIONS = ("sample", "argmax")


class CharVocab:
    """Letters plus one end-of-word symbol, which takes index ``len(letters)``."""

    def __init__(self, letters: Iterable[str], eow: str = "</w>") -> None:
        letters = tuple(letters)
        if len(set(letters)) != len(letters) or any(len(c) != 1 for c in letters):
            raise ValueError("letters must be distinct single characters")
        if eow in letters:
            raise ValueError(f"end-of-word symbol {eow!r} must not be a letter")
        self.letters = letters
        self.eow = eow
        self._index = {c: i for i, c in enumerate(letters)}

    @classmethod
    def from_words(cls, words: Iterable[str], eow: str = "</w>") -> "CharVocab":
        """Vocabulary of all letters occurring in ``words`` (sorted)."""
        return cls(sorted({c for w in words for c in w}), eow)

    @classmethod
    def from_symbols(cls, symbols: Sequence[str], eow: str = "</w>") -> "CharVocab":
        """From an alphabet that lists the letters and, anywhere among them, ``eow`` (e.g. ``WordList.alphabet()``)."""
        if eow not in symbols:
            raise ValueError(f"alphabet must contain the end-of-word symbol {eow!r}")
        return cls([s for s in symbols if s != eow], eow)

    @property
    def size(self) -> int:
        return len(self.letters) + 1

    @property
    def eow_index(self) -> int:
        return len(self.letters)

    def encode(self, words: Sequence[str], device: torch.device | str | None = None) -> tuple[Tensor, Tensor]:
        """Words -> ``tokens`` [N, T] (letters then end-of-word, padded with it) and ``lengths`` [N].

        ``lengths`` counts the end-of-word symbol, ``T = max(lengths)``.
        """
        if len(words) == 0:
            raise ValueError("need at least one word to encode")
        unknown = {c for w in words for c in w} - set(self.letters)
        if unknown:
            raise ValueError(f"characters {sorted(unknown)} are not in the vocabulary {self.letters}")
        lengths = torch.tensor([len(w) + 1 for w in words], device=device)
        tokens = torch.full((len(words), int(lengths.max())), self.eow_index, dtype=torch.long)
        for i, w in enumerate(words):
            tokens[i, : len(w)] = torch.tensor([self._index[c] for c in w], dtype=torch.long)
        return tokens.to(device), lengths

    def decode(self, symbols: Sequence[int]) -> str:
        """Letters up to the first end-of-word symbol."""
        out = []
        for s in symbols:
            if s == self.eow_index:
                break
            out.append(self.letters[s])
        return "".join(out)


def force_end_of_word(logits: Tensor, steps: Tensor, max_len: int, eow: int) -> Tensor:
    """At 0-based steps ``>= max_len`` only end-of-word is possible (words have <= max_len letters).

    ``steps`` broadcasts against ``logits.shape[:-1]``. A finite floor instead of ``-inf`` keeps
    masked gathers and their gradients free of NaN; its probability underflows to exactly 0.
    """
    floor = torch.finfo(logits.dtype).min
    eow_only = torch.full_like(logits, floor)
    eow_only[..., eow] = 0.0
    return torch.where((steps >= max_len).unsqueeze(-1), eow_only, logits)


def resample_index(log_weights: Tensor, uniform: Tensor) -> Tensor:
    """Index ``k`` drawn with probability ``w_k / sum w`` by inverting the CDF (Algorithm 1, last line).

    ``log_weights`` [K, B], ``uniform`` [B] in [0, 1) -> [B].
    """
    cdf = torch.softmax(log_weights, dim=0).cumsum(0)  # [K, B]
    return (cdf <= uniform).sum(0).clamp(max=log_weights.shape[0] - 1)


def _check_emission(emission: str) -> None:
    if emission not in EMISSIONS:
        raise ValueError(f"emission must be one of {EMISSIONS}, got {emission!r}")


def check_tokens(tokens: Tensor, lengths: Tensor, max_len: int) -> None:
    """Words as the bounds take them: ``tokens`` [B, T] with ``lengths`` [B] in 1..T, at most ``max_len`` letters."""
    if tokens.dim() != 2 or lengths.shape != tokens.shape[:1]:
        raise ValueError("tokens must be [B, T] and lengths [B]")
    if int(lengths.min()) < 1 or int(lengths.max()) > tokens.shape[1]:
        raise ValueError("lengths must lie in 1..T (they count the end-of-word symbol)")
    if tokens.shape[1] > max_len + 1:
        raise ValueError(f"words may have at most max_len={max_len} letters")


def _log_mean_exp(x: Tensor, dim: int) -> Tensor:
    return torch.logsumexp(x, dim) - math.log(x.shape[dim])


@dataclass
class DSSMConfig:
    """Sizes and flow choices of the deep state space model (§5.2: d = 8 unless stated)."""

    state_size: int = 8  # d
    embedding_size: int = 8  # d_E of the inference network's symbol embeddings
    inference_hidden: int = 8  # GRU size of the inference network
    generative_flow: str = "TRIL"  # F_g, e.g. "2xTRIL", "REAL-NVP-[2,3,4,5,6,7]"
    inference_flow: str = "DIAG"  # F_q
    invert_generative: bool = False  # parametrise F_g^{-1} directly (§2.4)
    flow_hidden: tuple[int, ...] = (32, 32)  # hidden sizes of the g and G MLPs of eq. (10)
    coupling_hidden: tuple[int, ...] = (8, 8)  # Real NVP hyper-networks (§5.2)
    delta: float = 0.1  # clipping of G's diagonal away from [-delta, delta]
    bidirectional: bool = False  # BIDI: q also sees w_{1:t} (§5.2)
    q_uses_state: bool = False  # q(xi_t | h_{t-1}, a_t) instead of q(xi_t | a_t)
    q_uses_proposal: bool = False  # q also sees h_g = F_g(h_{t-1}, eps) (Algorithm 1)
    q_hidden: tuple[int, ...] = (32,)
    min_scale: float = 1e-3
    max_len: int = 12

    def __post_init__(self) -> None:
        for name in ("state_size", "embedding_size", "inference_hidden", "max_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer")
        if self.min_scale <= 0:
            raise ValueError("min_scale must be positive")


@dataclass
class TrajectoryNoise:
    """All randomness of one pass of (IW)ELBO: drawn up front so runs can share it."""

    xi: Tensor  # [T, K, B, d] reparametrisation noise of q
    proposal: Tensor | None  # [T, K, B, d] noise of the proposals h_g (Algorithm 1)
    uniform: Tensor = field(repr=False)  # [T, B] for resampling


class DeepStateSpaceModel(nn.Module):
    """Non-autoregressive state space model with coupled flows F_g, F_q (§2)."""

    def __init__(self, vocab: CharVocab, config: DSSMConfig | None = None) -> None:
        super().__init__()
        self.vocab = vocab
        self.config = cfg = config or DSSMConfig()
        d = cfg.state_size
        self.h0 = nn.Parameter(torch.zeros(d))
        self.emission = nn.Linear(d, vocab.size)
        generative = build_flow(cfg.generative_flow, d, cfg.flow_hidden, cfg.delta, cfg.coupling_hidden)
        self.generative_flow: ConditionalFlow = InverseFlow(generative) if cfg.invert_generative else generative
        self.inference_flow = build_flow(cfg.inference_flow, d, cfg.flow_hidden, cfg.delta, cfg.coupling_hidden)

        self.embedding = nn.Embedding(vocab.size, cfg.embedding_size)
        self.backward_rnn = nn.GRU(cfg.embedding_size, cfg.inference_hidden, batch_first=True)
        self.forward_rnn = (
            nn.GRU(cfg.embedding_size, cfg.inference_hidden, batch_first=True) if cfg.bidirectional else None
        )
        q_in = cfg.inference_hidden * (2 if cfg.bidirectional else 1)
        q_in += d * (int(cfg.q_uses_state) + int(cfg.q_uses_proposal))
        self.q_net = zuko.nn.MLP(q_in, 2 * d, hidden_features=cfg.q_hidden, activation=nn.Tanh)
        with torch.no_grad():  # start q near N(0, I)
            self.q_net[-1].bias[:d] = 0.0
            self.q_net[-1].bias[d:] = math.log(math.expm1(1.0 - cfg.min_scale))

    # -- generative model -------------------------------------------------------------------

    def initial_state(self, batch_shape: Sequence[int] = ()) -> Tensor:
        """``h_0`` expanded to ``[*batch_shape, d]``."""
        return self.h0.expand(*batch_shape, self.config.state_size)

    def transition(self, h_prev: Tensor, xi: Tensor) -> Tensor:
        """``h_t = F_g(h_{t-1}, xi_t)`` (eq. 1); ``xi`` may carry extra leading dimensions."""
        return self.generative_flow(h_prev, xi)[0]

    def emission_logits(self, h: Tensor) -> Tensor:
        """Logits of ``P(w_t | h_t)`` (softmax observation model, §2.1), no length limit applied."""
        return self.emission(h)

    def emission_log_probs(self, h: Tensor, steps: Tensor | int) -> Tensor:
        """``log P(w_t | h_t)`` [..., V] with end-of-word forced at 0-based steps ``>= max_len``."""
        steps = torch.as_tensor(steps, device=h.device)
        logits = force_end_of_word(self.emission(h), steps, self.config.max_len, self.vocab.eow_index)
        return logits.log_softmax(-1)

    def sample_states(self, n: int, steps: int, generator: torch.Generator | None = None) -> Tensor:
        """Prior trajectories ``h_{1:steps}`` [n, steps, d]: white noise through F_g (§2.1 (i)-(ii))."""
        h = self.initial_state((n,))
        states = []
        for _ in range(steps):
            xi = torch.randn(n, self.config.state_size, generator=generator, device=h.device, dtype=h.dtype)
            h = self.transition(h, xi)
            states.append(h)
        return torch.stack(states, 1)

    @torch.no_grad()
    def log_prob_words(self, words: Sequence[str], n_samples: int = 1000,
                       generator: torch.Generator | None = None, chunk_size: int = 2048) -> Tensor:
        """Monte Carlo ``log P(w)`` [N] from ``K = n_samples`` prior trajectories shared by all words (eq. 12)."""
        if n_samples < 1:
            raise ValueError("n_samples must be at least 1")
        tokens, lengths = self.vocab.encode(words, self.h0.device)
        check_tokens(tokens, lengths, self.config.max_len)
        steps = self.config.max_len + 1
        h = self.sample_states(n_samples, steps, generator)  # [K, T, d]
        log_p = self.emission_log_probs(h, torch.arange(steps, device=h.device))  # [K, T, V]
        out = []
        for start in range(0, len(words), chunk_size):
            tok, lens = tokens[start:start + chunk_size], lengths[start:start + chunk_size]
            pos = torch.arange(tok.shape[1], device=tok.device)
            per_step = log_p[:, pos[None, :], tok]  # [K, n, T_w]
            per_word = torch.where(pos < lens[:, None], per_step, 0.0).sum(-1)  # [K, n]
            out.append(_log_mean_exp(per_word, 0))
        return torch.cat(out)

    @torch.no_grad()
    def sample_words(self, n: int, generator: torch.Generator | None = None, emission: str = "sample") -> list[str]:
        """Generate ``n`` words: noise -> states -> symbols (§2.1); ``argmax`` emission as for Table 2."""
        _check_emission(emission)
        steps = self.config.max_len + 1
        h = self.sample_states(n, steps, generator)  # [n, T, d]
        log_p = self.emission_log_probs(h, torch.arange(steps, device=h.device))  # [n, T, V]
        if emission == "argmax":
            symbols = log_p.argmax(-1)
        else:
            symbols = torch.multinomial(log_p.exp().flatten(0, 1), 1, generator=generator).view(n, steps)
        return [self.vocab.decode(row) for row in symbols.tolist()]

    # -- inference model --------------------------------------------------------------------

    def encode_suffixes(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """Backward GRU states ``a_t`` [B, T, H] having read ``w_{t:T}`` (§2.5); BIDI adds ``w_{1:t}``."""
        emb = self.embedding(tokens)  # [B, T, E]
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        # Reverse each word's valid part in place; padding stays behind it, so it is never read.
        rev = torch.where(pos < lengths[:, None], lengths[:, None] - 1 - pos, pos)  # [B, T]
        out, _ = self.backward_rnn(emb.gather(1, rev[..., None].expand_as(emb)))
        a = out.gather(1, rev[..., None].expand_as(out))
        if self.forward_rnn is not None:
            a = torch.cat([a, self.forward_rnn(emb)[0]], -1)
        return a

    def inference_distribution(self, a_t: Tensor, h_prev: Tensor, h_g: Tensor | None) -> Normal:
        """Diagonal Gaussian ``q(xi_t | a_t[, h_{t-1}][, h_g])`` (§2.5, Algorithm 1)."""
        parts = [a_t]
        if self.config.q_uses_state:
            parts.append(h_prev)
        if self.config.q_uses_proposal:
            if h_g is None:
                raise ValueError("this model's q conditions on a proposal h_g; pass one")
            parts.append(h_g)
        batch = torch.broadcast_shapes(*(p.shape[:-1] for p in parts))
        loc, raw = self.q_net(torch.cat([p.expand(*batch, p.shape[-1]) for p in parts], -1)).chunk(2, -1)
        return Normal(loc, F.softplus(raw) + self.config.min_scale, validate_args=False)

    def draw_noise(self, steps: int, n_samples: int, batch: int,
                   generator: torch.Generator | None = None) -> TrajectoryNoise:
        """Noise for :meth:`elbo` (``n_samples = 1``) and :meth:`iwae_elbo`, drawn in a fixed order."""
        kw = dict(generator=generator, device=self.h0.device, dtype=self.h0.dtype)
        shape = (steps, n_samples, batch, self.config.state_size)
        xi = torch.randn(shape, **kw)
        proposal = torch.randn(shape, **kw) if self.config.q_uses_proposal else None
        return TrajectoryNoise(xi, proposal, torch.rand(steps, batch, **kw))

    def _step_log_weight(self, h_prev: Tensor, a_t: Tensor, w_t: Tensor, step: int, eps: Tensor,
                         eps_g: Tensor | None) -> tuple[Tensor, Tensor]:
        """Integrand of eq. (9) at one step: ``log P(w_t|h_t) + log r(s(xi)) - log q(xi) + log|det J_s|``.

        ``h_prev`` [B, d], ``eps`` [..., B, d] -> log-weight [..., B] and ``h_t = F_q(h_{t-1}, xi)``.
        """
        h_g = self.transition(h_prev, eps_g) if eps_g is not None else None  # Algorithm 1, line 1
        q = self.inference_distribution(a_t, h_prev, h_g)
        xi = q.loc + q.scale * eps  # reparametrised sample of q
        log_q = q.log_prob(xi).sum(-1)
        h, zeta, log_det_s = combined_flow(self.generative_flow, self.inference_flow, h_prev, xi)
        log_r = -0.5 * zeta.pow(2).sum(-1) - 0.5 * zeta.shape[-1] * math.log(2 * math.pi)
        log_emit = self.emission_log_probs(h, step)  # [..., B, V]
        log_emit = log_emit.gather(-1, w_t.expand(h.shape[:-1]).unsqueeze(-1)).squeeze(-1)
        return log_emit + log_r - log_q + log_det_s, h

    def elbo(self, tokens: Tensor, lengths: Tensor, noise: TrajectoryNoise | None = None,
             generator: torch.Generator | None = None, check: bool = True) -> Tensor:
        """Single-sample two-flow ELBO ``sum_t L_t`` per word [B] (eqs. 4 and 9).

        ``check=False`` skips the host-side checks of ``tokens`` and ``lengths`` (under ``torch.func.vmap``, which
        cannot read values back; the caller checks them beforehand).
        """
        if check:
            check_tokens(tokens, lengths, self.config.max_len)
        batch, steps = tokens.shape
        noise = noise if noise is not None else self.draw_noise(steps, 1, batch, generator)
        if noise.xi.shape[1] != 1:
            raise ValueError("elbo uses one sample per step; use iwae_elbo for more")
        a = self.encode_suffixes(tokens, lengths)  # [B, T, H]
        h = self.initial_state((batch,))
        total = a.new_zeros(batch)
        for t in range(steps):
            eps_g = noise.proposal[t, 0] if noise.proposal is not None else None
            log_w, h = self._step_log_weight(h, a[:, t], tokens[:, t], t, noise.xi[t, 0], eps_g)
            total = total + torch.where(t < lengths, log_w, 0.0)
        return total

    def iwae_elbo(self, tokens: Tensor, lengths: Tensor, n_samples: int,
                  noise: TrajectoryNoise | None = None, generator: torch.Generator | None = None,
                  check: bool = True) -> Tensor:
        """Importance-weighted bound with one-step horizon and resampling, per word [B] (§2.7, Algorithm 1).

        Each step adds ``log (1/K) sum_k w_k`` (eq. 11 with horizon 1), whose gradient is the
        self-normalised weighting of eq. (11)/(22); the next state is ``h^(k)`` with ``k ~ w``.
        ``check``: as in :meth:`elbo`.
        """
        if check:
            check_tokens(tokens, lengths, self.config.max_len)
        if n_samples < 1:
            raise ValueError("n_samples (K) must be at least 1")
        batch, steps = tokens.shape
        noise = noise if noise is not None else self.draw_noise(steps, n_samples, batch, generator)
        if noise.xi.shape[1] != n_samples:
            raise ValueError("noise was drawn for a different number of samples")
        d = self.config.state_size
        a = self.encode_suffixes(tokens, lengths)
        h = self.initial_state((batch,))
        total = a.new_zeros(batch)
        for t in range(steps):
            eps_g = noise.proposal[t] if noise.proposal is not None else None
            log_w, h_k = self._step_log_weight(h, a[:, t], tokens[:, t], t, noise.xi[t], eps_g)  # [K, B], [K, B, d]
            total = total + torch.where(t < lengths, _log_mean_exp(log_w, 0), 0.0)
            k = resample_index(log_w.detach(), noise.uniform[t])  # [B]
            h = h_k.gather(0, k.view(1, batch, 1).expand(1, batch, d)).squeeze(0)
        return total

    def loss(self, tokens: Tensor, lengths: Tensor, n_samples: int = 1,
             generator: torch.Generator | None = None, noise: TrajectoryNoise | None = None,
             check: bool = True) -> Tensor:
        """Negative mean bound per word: ELBO for ``n_samples = 1``, else the weighted bound.

        ``noise`` (from :meth:`draw_noise` for these tokens) replaces the draws from ``generator``; ``check``: as
        in :meth:`elbo`.
        """
        if n_samples == 1:
            return -self.elbo(tokens, lengths, noise, generator, check).mean()
        return -self.iwae_elbo(tokens, lengths, n_samples, noise, generator, check).mean()


class GRUWordModel(nn.Module):
    """Baseline: character GRU language model trained with teacher forcing (§5.1)."""

    def __init__(self, vocab: CharVocab, state_size: int = 8, max_len: int = 12) -> None:
        super().__init__()
        if state_size < 1 or max_len < 1:
            raise ValueError("state_size and max_len must be positive")
        self.vocab = vocab
        self.max_len = max_len
        self.embedding = nn.Embedding(vocab.size, state_size)  # same size as the state (§5.1)
        self.rnn = nn.GRU(state_size, state_size, batch_first=True)
        self.output = nn.Linear(state_size, vocab.size)

    def forward(self, tokens: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Input symbols [B, T] -> next-symbol logits [B, T, V] and GRU state [1, B, d]."""
        out, state = self.rnn(self.embedding(tokens), state)
        return self.output(out), state

    def log_prob_tokens(self, tokens: Tensor, lengths: Tensor, check: bool = True) -> Tensor:
        """Exact ``log P(w) = sum_t log P(w_t | w_{<t})`` [B] with the true prefix as input (``check``: as in
        :meth:`DeepStateSpaceModel.elbo`)."""
        if check:
            check_tokens(tokens, lengths, self.max_len)
        start = tokens.new_full((tokens.shape[0], 1), self.vocab.eow_index)
        logits, _ = self(torch.cat([start, tokens[:, :-1]], 1))  # [B, T, V]
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        log_p = force_end_of_word(logits, pos, self.max_len, self.vocab.eow_index).log_softmax(-1)
        per_step = log_p.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)  # [B, T]
        return torch.where(pos < lengths[:, None], per_step, 0.0).sum(-1)

    def loss(self, tokens: Tensor, lengths: Tensor, check: bool = True) -> Tensor:
        """Teacher-forced negative log-likelihood per word."""
        return -self.log_prob_tokens(tokens, lengths, check).mean()

    @torch.no_grad()
    def log_prob_words(self, words: Sequence[str], chunk_size: int = 2048) -> Tensor:
        """Exact ``log P(w)`` [N] for strings."""
        device = self.output.weight.device
        out = []
        for start in range(0, len(words), chunk_size):
            out.append(self.log_prob_tokens(*self.vocab.encode(words[start:start + chunk_size], device)))
        return torch.cat(out)

    @torch.no_grad()
    def sample_words(self, n: int, generator: torch.Generator | None = None, emission: str = "sample") -> list[str]:
        """Ancestral sampling, feeding back each emitted symbol (or the argmax)."""
        _check_emission(emission)
        device = self.output.weight.device
        symbol = torch.full((n, 1), self.vocab.eow_index, dtype=torch.long, device=device)
        state, symbols = None, []
        for t in range(self.max_len + 1):
            logits, state = self(symbol, state)
            step = torch.tensor(t, device=device)
            log_p = force_end_of_word(logits[:, 0], step, self.max_len, self.vocab.eow_index).log_softmax(-1)
            if emission == "argmax":
                symbol = log_p.argmax(-1, keepdim=True)
            else:
                symbol = torch.multinomial(log_p.exp(), 1, generator=generator)
            symbols.append(symbol)
        return [self.vocab.decode(row) for row in torch.cat(symbols, 1).tolist()]
