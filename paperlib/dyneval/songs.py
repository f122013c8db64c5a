"""Dynamic evaluation of songs, Krause thesis §4.8: the update rules of chapter 4 applied to a model of piano rolls.

A model of songs has ``forward(frames [B, T, N], state=None) -> (log P(x_t | x_<t) [B, T], state)``, as the
LSTM-NADE of :mod:`paperlib.models.rnn_nade`. A song is cut into segments of ``segment_len`` frames; each
segment is scored with the current weights, then one update rule of :mod:`paperlib.dyneval.rules` (SGD,
eq. 4.3, or global RMS, eqs. 4.5-4.7) steps on the gradient of the segment's mean negative log-likelihood
per frame, and the recurrent state is carried to the next segment: the loop of :mod:`paperlib.dyneval.evaluate`
with frames for tokens. As §4.8 prescribes, the songs' boundaries are discrete, so the weights return to the
trained θ_g and the recurrent state to its start at the end of every song, and the decay rate is 0 by default
("we set the decay rate to zero for these experiments").

The segment length for music is not stated in §4.8; it is a hyperparameter here (the text-level defaults of
§4.5 are 5 tokens for words and 20 for characters). Losses are nats per frame (a frame's negative
log-likelihood is the sum over its notes); MS_g (eq. 4.4) is taken over batches of training songs with the
same per-frame mean, padded songs counting their real frames only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor, nn
from torch.func import functional_call

from paperlib.data.music import pad_songs
from paperlib.dyneval.core import AdaptSpec, Params, _eval_mode, adapted_parameters
from paperlib.dyneval.evaluate import _run
from paperlib.dyneval.gradients import _direct_oracle
from paperlib.dyneval.rules import _check_rule_args
from paperlib.models.rnn_nade import frame_mean_log_likelihood

SONG_RULES = ("sgd", "global_rms", "rmsprop", "adam")  # nonlocal_rmsprop needs a parallel stream, not songs


@dataclass
class SongEvaluation:
    """Per-frame losses (nats, the negative log-likelihood of each frame) of every song, in the songs' order."""

    losses: list[Tensor]  # song i: [T_i]

    def log_likelihood_per_frame(self) -> float:
        """Table 4.6's measure: log-likelihood summed over all frames of all songs, divided by their number."""
        frames = torch.cat(self.losses).double()
        return -float(frames.mean())

    def song_log_likelihoods(self) -> Tensor:
        """Each song's mean log-likelihood per frame, [songs] (for comparisons paired by song)."""
        return torch.stack([-song.double().mean() for song in self.losses])


def _negative_log_likelihood(log_probs: Tensor, _targets: Any) -> Tensor:
    return -log_probs  # [1, n]: the frames' losses


def _segments(frames: Tensor, segment_len: int) -> Iterator[tuple[Tensor, None]]:
    """Consecutive segments of ``segment_len`` frames of one song [1, T, N]; the model shifts frames itself."""
    for start in range(0, frames.shape[1], segment_len):
        yield frames[:, start : start + segment_len], None


def _check_songs(songs: Sequence[Tensor], notes: int | None) -> None:
    if not songs:
        raise ValueError("no songs to evaluate")
    for index, song in enumerate(songs):
        if song.dim() != 2 or song.shape[0] < 1 or (notes is not None and song.shape[1] != notes):
            raise ValueError(f"song {index} must be a non-empty [T, {notes or 'N'}] piano roll, "
                             f"got shape {tuple(song.shape)}")


def _as_model_input(model: nn.Module, frames: Tensor) -> Tensor:
    """Frames on the model's device, in its floating dtype."""
    like = next(model.parameters())
    return frames.to(device=like.device, dtype=like.dtype)


def dynamic_evaluate_songs(
    model: nn.Module,
    songs: Sequence[Tensor],
    *,
    lr: float,
    segment_len: int,
    rule: str = "global_rms",
    decay: float = 0.0,
    eps: float | None = None,
    ms_g: Mapping[str, Tensor] | None = None,
    rms_decay: bool = True,
    adapt: AdaptSpec = None,
    callback: Callable[[int, Params, Params], None] | None = None,
) -> SongEvaluation:
    """Dynamically evaluate ``model`` on each song ``[T, N]`` from θ_g and the zero state (Krause §4.8).

    Every frame is scored before the update on its segment. ``rule`` is ``"sgd"`` (eq. 4.3) or
    ``"global_rms"`` (eq. 4.7, with ``ms_g`` from :func:`song_mean_squared_gradients`); PyTorch's RMSprop and
    Adam, the §5.4 baselines, also apply. ``callback(i, params, grads)`` runs after the i-th update of a song.
    The model's own parameters are never changed.
    """
    if rule not in SONG_RULES:
        raise ValueError(f"rule must be one of {SONG_RULES} for songs, got {rule!r}")
    _check_rule_args(rule, lr, decay, eps, None, None, rms_decay)
    if not isinstance(segment_len, int) or segment_len < 1:
        raise ValueError(f"segment_len must be a positive integer, got {segment_len!r}")
    _check_songs(songs, getattr(model, "notes", None))
    hyper = dict(rule=rule, lr=lr, decay=decay, eps=eps, momentum=None, alpha=None, ms_g=ms_g, rms_decay=rms_decay)
    losses = []
    with _eval_mode(model):
        names = adapted_parameters(model, adapt)
        named = dict(model.named_parameters())
        theta_g = {n: named[n].detach() for n in names}
        frozen = {n: p.detach() for n, p in named.items() if n not in theta_g}
        call = lambda p, x, s: functional_call(model, {**frozen, **p}, (x, s))  # noqa: E731
        oracle = _direct_oracle(call, per_stream=True, step_losses=_negative_log_likelihood)
        for song in songs:
            params = {n: p.clone() for n, p in theta_g.items()}  # the weights reset at every song boundary
            frames = _as_model_input(model, song).unsqueeze(0)  # [1, T, N]
            result = _run(oracle, params, theta_g, hyper, _segments(frames, segment_len), None, callback)
            losses.append(result.losses[0])
    return SongEvaluation(losses)


@torch.no_grad()
def static_evaluate_songs(model: nn.Module, songs: Sequence[Tensor], batch_size: int = 16) -> SongEvaluation:
    """Per-frame losses of the fixed trained model (no dropout), each song from the zero state."""
    _check_songs(songs, getattr(model, "notes", None))
    losses = []
    with _eval_mode(model):
        for start in range(0, len(songs), batch_size):
            chunk = songs[start : start + batch_size]
            frames, lengths = pad_songs(chunk)
            log_probs, _ = model(_as_model_input(model, frames))
            losses += [-log_probs[row, :length] for row, length in enumerate(lengths.tolist())]
    return SongEvaluation(losses)


def song_mean_squared_gradients(
    model: nn.Module,
    songs: Sequence[Tensor],
    *,
    batch_size: int,
    max_batches: int | None = None,
    adapt: AdaptSpec = None,
) -> Params:
    """MS_g = (1/N_b) Σ_k (∇L_k)², eq. (4.4), with L_k the mean negative log-likelihood per frame of batch k.

    Batches are ``batch_size`` consecutive training songs (padded; padding is not counted), in eval mode
    (no dropout), each song from the zero state; ``max_batches`` limits N_b.
    """
    _check_songs(songs, getattr(model, "notes", None))
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if max_batches is not None and max_batches < 1:
        raise ValueError(f"max_batches must be >= 1 or None, got {max_batches}")
    with _eval_mode(model):
        names = adapted_parameters(model, adapt)
        named = dict(model.named_parameters())
        frozen = {n: p.detach() for n, p in named.items() if n not in names}
        total = {n: torch.zeros_like(named[n]) for n in names}
        batches = 0
        for start in range(0, len(songs), batch_size):
            if max_batches is not None and batches >= max_batches:
                break
            frames, lengths = pad_songs(songs[start : start + batch_size])
            frames = _as_model_input(model, frames)
            lengths = lengths.to(frames.device)
            leaves = {n: named[n].detach().requires_grad_() for n in names}
            with torch.enable_grad():
                log_probs, _ = functional_call(model, {**frozen, **leaves}, (frames,))
                loss = -frame_mean_log_likelihood(log_probs, lengths)
                grads = torch.autograd.grad(loss, list(leaves.values()))
            for name, g in zip(names, grads):
                total[name].addcmul_(g, g)
            batches += 1
    return {n: v / batches for n, v in total.items()}
