"""Stacked PTB sentence-VAE trials whose training step is captured as one CUDA graph and replayed.

A stack of sentence VAEs at the thesis' sizes is still launch-bound on a GPU: every step issues thousands of small
kernels (per trial the encoder's bidirectional LSTM, the vmapped decoders' time loop, each trial's objective and
estimator, Adam with one parameter group per trial), and the host launching them sets the pace (on the H200 of
``benchmarks/results``, a 16-sample stack of 12 took 0.28 s a step, 3.0 times the pace of 12 separate steps). :class:`GraphedStackedTrials` is :class:`~paperlib.experiments.micmco.ptb.stacked_trials.
StackedTrials` with that step in a form a CUDA graph can hold, captured once and replayed: the same trials, seeds,
objectives, estimators, optimizer settings, chunks and checkpoints (either class continues the other's).

What a graph cannot hold, and what replaces it:

- **Shapes fixed by the data.** Every batch is padded to the longest training sentence (35 tokens at the seeds'
  truncation; with 64 sentences a batch nearly always reaches it anyway); the padding is masked out of ln p(x|z) as
  in the stacked step. The encoder's bidirectional LSTM reads padded sentences without packing them (packing reads
  the lengths on the host): the forward direction runs over the padded sentence and is read at the sentence's last
  token, the backward direction runs over each sentence reversed within its own length (:func:`padded_encode`): the
  same function as the packed layer, up to rounding. The decoders always run as one vmapped pass over the trials,
  dense (the stacked step runs them one by one when no trial drops out its recurrent state).
- **Host reads.** The tokens each trial's loss is divided by are a tensor; the objective values are read back after
  the step. So a trial whose objective becomes non-finite is seen after its update rather than before it; it stops
  there as in the stacked step (its weights are not evaluated again: a diverged trial has no scores), and the
  others' next steps are captured anew without it.
- **Random draws.** Each trial's generator is registered with the graph, so every replay draws new latent samples
  and dropout masks from the trial's own stream. The decoders' dropout masks are drawn at the padded length, so a
  batch shorter than the longest sentence draws other numbers than the stacked step (the same distribution, other
  draws); for batches of full length the two steps are the same function up to rounding (tested).
- **The optimizer** is capturable Adam on CUDA (step counts on the GPU), which differs from the default by rounding.

On a CPU, where there are no CUDA graphs, a replay calls the captured step (:class:`paperlib.graphed_train.
CapturedStep`): the same numbers without the speed, which is how the class is tested here.
"""

from __future__ import annotations

import contextlib
import math
import os
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from paperlib.data import SentenceBatch
from paperlib.estimators import Surrogates
from paperlib.experiments.micmco.ptb.data import SentenceData
from paperlib.experiments.micmco.ptb.design import Curve, MicmcoPtbParams
from paperlib.experiments.micmco.ptb.stacked_trials import (StackedTrials, TrialSpec, _decode, _stacked_masks,
                                                            backward_all)
from paperlib.experiments.micmco.ptb.trials import per_token
from paperlib.experiments.micmco.synthetic.trials import latent_samples, objective_surrogates
from paperlib.graphed_train import CapturedStep, graph_safe, side_stream
from paperlib.models.sentence_vae import BiLSTMEncoder
from paperlib.stacked import StackedModels, pad_to


def _direction(rnn: nn.LSTM, x: Tensor, suffix: str) -> Tensor:
    """One direction of the bidirectional one-layer ``rnn`` (``suffix`` ``""`` or ``"_reverse"``) run forward over
    ``x`` [B, T, H] from a zero state, as a unidirectional LSTM with that direction's weights: outputs [B, T, H].

    The operator ``nn.LSTM`` runs (``torch.lstm``, cuDNN on a GPU), called with the weights themselves: a
    unidirectional module given them (``functional_call``) would re-point their storage into a fresh flat buffer
    on CUDA (``flatten_parameters``), the encoder's parameters included."""
    weights = [getattr(rnn, name + suffix) for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")]
    zeros = x.new_zeros(1, x.shape[0], rnn.hidden_size)
    out, _, _ = torch.lstm(x, (zeros, zeros), weights, True, 1, 0.0, rnn.training, False, True)
    return out


def padded_encode(encoder: BiLSTMEncoder, tokens: Tensor, lengths: Tensor) -> Tensor:
    """:meth:`BiLSTMEncoder.forward` without packing: ``tokens`` [B, T] padded past each sentence's ``lengths`` [B]
    (a tensor on the tokens' device) -> the posterior parameters [B, outputs]. Each direction's final state at the
    sentence's own end, as the packed layer gives it: the forward direction read at position length - 1, the
    backward direction run over the sentence reversed within its length (padding left in place) and read there."""
    x = encoder.embedding(tokens)  # [B, T, H]
    rows, steps = tokens.shape
    positions = torch.arange(steps, device=tokens.device).expand(rows, steps)
    ends = lengths.to(tokens.device).unsqueeze(1)  # [B, 1]
    reverse = torch.where(positions < ends, ends - 1 - positions, positions)  # [B, T]: w_len .. w_1, then padding
    last = (ends.squeeze(1) - 1).clamp(min=0)
    row = torch.arange(rows, device=tokens.device)
    forward = _direction(encoder.rnn, x, "")[row, last]  # [B, H]
    # indexing, not gather: gather's backward (scatter_add) checks its indices on the host under deterministic
    # algorithms in some releases, which a capture refuses
    backward = _direction(encoder.rnn, x[row.unsqueeze(1), reverse], "_reverse")[row, last]
    return encoder.head(torch.stack([forward, backward]).mean(0))


@contextlib.contextmanager
def padded_encoders(models: Sequence[nn.Module]) -> Iterator[None]:
    """The sentence VAEs ``models`` with their encoders reading padded sentences (:func:`padded_encode`)."""
    encoders = [m for model in models for m in model.modules() if isinstance(m, BiLSTMEncoder)]
    try:
        for encoder in encoders:
            encoder.forward = types.MethodType(padded_encode, encoder)
        yield
    finally:
        for encoder in encoders:
            del encoder.forward


def padded_surrogates(stack: StackedModels, members: Sequence[int], curve: Curve,
                      params: Sequence[Mapping[str, float]], batch: SentenceBatch, tokens: Tensor,
                      generators: Sequence[torch.Generator]) -> list[Surrogates]:
    """:func:`~paperlib.experiments.micmco.ptb.stacked_trials.stacked_surrogates` with fixed shapes and no host
    reads: member j trains on row j of ``batch`` (every field [M, B, T], T the padded length, on the models'
    device), its loss is divided by ``tokens[j]`` (a tensor), its draws come from ``generators[j]`` in the order
    of a separate run (samples, then masks); the decoders run as one vmapped dense pass."""
    models = [stack.models[i] for i in members]
    b, t = batch.inputs.shape[1:]
    with padded_encoders(models):
        posteriors = [model.posterior(SentenceBatch(batch.inputs[j], batch.targets[j], batch.mask[j],
                                                    batch.lengths[j])) for j, model in enumerate(models)]
    samples, masks = [], []
    k = curve.estimator.num_samples
    for j, (model, generator) in enumerate(zip(models, generators)):
        samples.append(latent_samples(posteriors[j], curve.estimator, generator))  # [K, B, ...]
        masks.append(model.sample_masks(k, b, t, generator))
    stacked = _stacked_masks(masks, t, [t] * len(models))
    log_px_z = stack.call(_decode, torch.stack(samples), batch.inputs, batch.targets, batch.mask, batch.lengths,
                          *stacked, in_dims=(0, 0, 0, 0, 0, *(None if m is None else 0 for m in stacked)),
                          members=members)  # [M, K, B]
    return [per_token(objective_surrogates(model, curve.estimator, params[j], posteriors[j], samples[j], log_px_z[j]),
                      tokens[j]) for j, model in enumerate(models)]


@dataclass
class _Captured:
    """The step of one set of live trials and the tensors it reads (batch, tokens) and writes (objectives)."""

    members: tuple[int, ...]
    step: CapturedStep | None  # None until captured: its warm-up steps call the same function eagerly
    run: Any  # the step's function
    batch: SentenceBatch  # [M, B, T] each
    tokens: Tensor  # [M]
    values: Tensor  # [M]: each member's objective per token, written by the step


class GraphedStackedTrials(StackedTrials):
    """:class:`~paperlib.experiments.micmco.ptb.stacked_trials.StackedTrials` with its step replayed as one
    captured CUDA graph (module docstring). ``eager_steps``: steps run eagerly (the same function) before the
    capture, again after a trial stops (2: at the seeds' sizes an eager step of a stack takes a good part of a
    second). :attr:`step_counts` says how the steps ran."""

    def __init__(self, curve: Curve, specs: Sequence[TrialSpec], settings: MicmcoPtbParams, data: SentenceData,
                 device: torch.device | str | None = None, eager_steps: int = 2) -> None:
        if eager_steps < 1:
            raise ValueError(f"eager_steps must be >= 1 (warm-up before a capture), got {eager_steps}")
        super().__init__(curve, specs, settings, data, device)
        self.eager_steps = eager_steps
        self.width = max(len(s) for s in data.train)  # every batch padded to the longest training sentence
        self.step_counts = {"eager": 0, "replayed": 0, "captures": 0}
        self._captured: _Captured | None = None
        self._eager_since = 0  # eager steps of the current set of live trials
        self._make_graph_safe()

    def _make_graph_safe(self) -> None:
        """Capturable Adam on CUDA (:func:`paperlib.graphed_train.graph_safe`); again after a checkpoint's optimizer
        state is loaded."""
        graph_safe(self.optimizer, self.device)
        self._captured = None

    def save(self, path: str | os.PathLike, extra: Mapping[str, Any] | None = None) -> None:
        """As :meth:`StackedTrials.save`, with the optimizer's default flags, so that either class continues it."""
        flags = [group.get("capturable", False) for group in self.optimizer.param_groups]
        try:
            for group in self.optimizer.param_groups:
                group["capturable"] = False
            super().save(path, extra)
        finally:
            for group, flag in zip(self.optimizer.param_groups, flags):
                group["capturable"] = flag

    @classmethod
    def load(cls, path: str | os.PathLike, curve: Curve, specs: Sequence[TrialSpec], settings: MicmcoPtbParams,
             data: SentenceData, device: torch.device | str | None = None) -> "GraphedStackedTrials":
        run = super().load(path, curve, specs, settings, data, device)
        run._make_graph_safe()
        return run

    # -- the step -------------------------------------------------------------------------------------------------

    def _prepare(self, members: tuple[int, ...]) -> _Captured:
        """Buffers and the step function of the live trials ``members``."""
        m, device = len(members), self.device
        dtype = next(self.models[0].parameters()).dtype  # the models' (float64 in the tests' comparisons)
        rows = min(self.batch_size, len(self.data.train))  # a training set smaller than a batch is the batch
        batch = SentenceBatch(*(torch.zeros(m, rows, self.width, dtype=kind, device=device)
                                for kind in (torch.long, torch.long, torch.bool)),
                              torch.ones(m, rows, dtype=torch.long, device=device))
        tokens, values = torch.ones(m, dtype=dtype, device=device), torch.zeros(m, dtype=dtype, device=device)
        optimizer, stack, curve = self.optimizer, self.stack, self.curve
        params = [self.specs[i].params for i in members]
        generators = [self.generators[i] for i in members]
        models = [self.models[i] for i in members]

        def run() -> None:
            optimizer.zero_grad(set_to_none=True)  # at capture: the backward writes fresh gradients
            surrogates = padded_surrogates(stack, members, curve, params, batch, tokens, generators)
            values.copy_(torch.stack([s.model.detach().mean() for s in surrogates]))
            backward_all(surrogates, models)
            optimizer.step()

        return _Captured(members, None, run, batch, tokens, values)

    def step(self) -> None:
        """One Adam step of every live trial (every trial's batch stream advances, so streams stay in step)."""
        batches = [next(stream) for stream in self._streams]
        live = tuple(self.live)
        if not live:
            self.step_count += 1
            return
        if self._captured is None or self._captured.members != live:
            self._captured, self._eager_since = self._prepare(live), 0
        captured = self._captured
        for j, i in enumerate(live):
            width = batches[i].inputs.shape[1]
            if width > self.width:
                raise ValueError(f"a batch of {width} tokens is longer than the longest training sentence "
                                 f"({self.width}); the stream and the data disagree")
            for field in ("inputs", "targets", "mask"):
                getattr(captured.batch, field)[j].copy_(pad_to(getattr(batches[i], field), self.width, 1,
                                                               False if field == "mask" else 0))
            captured.batch.lengths[j].copy_(batches[i].lengths)
        captured.tokens.copy_(torch.tensor([float(batches[i].lengths.sum()) for i in live], dtype=captured.tokens.dtype))
        if captured.step is not None and captured.step.stale():
            captured.step, self._eager_since = None, 0  # weights moved or precision changed: warm up, capture again
        if captured.step is not None:
            captured.step.replay()
            self.step_counts["replayed"] += 1
        elif self._eager_since >= self.eager_steps:
            captured.step = CapturedStep(captured.run, self.device, [self.generators[i] for i in live],
                                         watch=[t for i in live for t in self.models[i].parameters()])
            self.step_counts["captures"] += 1
            captured.step.replay()
            self.step_counts["replayed"] += 1
        else:
            with side_stream(self.device):
                captured.run()
            self._eager_since += 1
            self.step_counts["eager"] += 1
        values = captured.values.tolist()
        tail = max(1, self.steps // 10)
        self.step_count += 1
        for j, i in enumerate(live):
            self.last_objective[i] = values[j]
            if not math.isfinite(values[j]):
                self.stopped[i] = self.step_count  # updated before it was seen (module docstring); stops here
            elif self.step_count > self.steps - tail:
                self.tail_values[i].append(values[j])


__all__ = ["GraphedStackedTrials", "padded_encode", "padded_encoders", "padded_surrogates"]
