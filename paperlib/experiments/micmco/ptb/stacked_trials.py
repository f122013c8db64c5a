"""Trials x seeds of one PTB curve trained as one stacked model (:mod:`paperlib.stacked`), resumable in chunks.

:class:`StackedTrials` trains the sentence VAEs of several (hyperparameters, seed) pairs of one curve together: each
step draws every trial's latent samples and dropout masks from that trial's own random stream, decodes all of
them in one vmapped pass where the decoders drop out their recurrent state (:func:`stacked_surrogates` says why
only there), forms each trial's objective and
estimator surrogates with the same code as a separate run (:func:`~paperlib.experiments.micmco.synthetic.trials.
objective_surrogates`) and takes one Adam step whose parameter groups carry each trial's learning rate and L2
coefficient. Trial m is therefore the run :func:`~paperlib.experiments.micmco.ptb.trials.run_trial` makes with the
same hyperparameters and seed, up to float rounding: the same initial weights (built under the same seed), the same
batches, latent samples and masks (the generator of trial m continues the default generator's stream from where a
separate run's model construction leaves it), the same optimizer arithmetic; only the matmul shapes of the vmapped
decoders differ (batched, and each batch padded to the longest of the step, which the masked sum of ln p(x|z)
ignores).

**Chunks**: :meth:`StackedTrials.run` trains up to a step count and stops early at a deadline; :meth:`save` /
:meth:`StackedTrials.load` write and read everything a continuation needs (weights, Adam state, random streams,
the batch streams' places, progress) atomically, so a run split over several processes or machines, each a few minutes long, ends exactly where one
uninterrupted run would. Every chunk records its steps, seconds and the device it ran on.

Departures from a separate run: a trial whose objective becomes non-finite stops updating (as a separate run stops
training) while the others continue; a trial's reported training seconds are its share of the stack's.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from paperlib.data import SentenceBatch
from paperlib.estimators import Surrogates
from paperlib.experiments.common.stage import stage_device
from paperlib.experiments.micmco.ptb.data import BatchStream, SentenceData
from paperlib.experiments.micmco.ptb.design import Curve, MicmcoPtbParams
from paperlib.experiments.micmco.ptb.trials import build_model, per_token
from paperlib.experiments.micmco.synthetic.trials import TrainResult, latent_samples, objective_surrogates
from paperlib.models.sentence_vae import DecoderMasks, SentenceVAE
from paperlib.stacked import StackedModels, pad_to
from paperlib.atomic_files import save_torch_atomic


@dataclass(frozen=True)
class TrialSpec:
    """One trial of a stack: its hyperparameters and its seed (initial weights, batch order, random draws)."""

    params: Mapping[str, float]
    seed: int


def _continuing_generator(device: torch.device) -> torch.Generator:
    """A generator in the state the default generator of ``device`` is in now (what a separate run draws next)."""
    if device.type == "cpu":
        generator = torch.Generator()
        generator.set_state(torch.get_rng_state())
        return generator
    generator = torch.Generator(device)
    generator.set_state(torch.cuda.get_rng_state(device))
    return generator


def _decode(vae: SentenceVAE, z: Tensor, inputs: Tensor, targets: Tensor, mask: Tensor, lengths: Tensor,
            input_mask: Tensor | None, state_mask: Tensor | None, output_mask: Tensor | None) -> Tensor:
    batch = SentenceBatch(inputs, targets, mask, lengths)
    return vae.log_likelihood(z, batch, DecoderMasks(input_mask, state_mask, output_mask), dense=True)


def _stacked_masks(masks: Sequence[DecoderMasks], width: int, lengths: Sequence[int]) -> list[Tensor | None]:
    """Per place (input, state, output): the trials' masks stacked, padded in time to ``width`` (a trial's batch
    is ``lengths[j]`` long); ones where a trial has none; None where no trial has one."""
    stacked: list[Tensor | None] = []
    for place, time_dim in (("input", 2), ("state", None), ("output", 2)):
        drawn = [getattr(m, place) for m in masks]
        if all(d is None for d in drawn):
            stacked.append(None)
            continue
        like = next(d for d in drawn if d is not None)
        rows = []
        for d, length in zip(drawn, lengths):
            if d is None:
                size = list(like.shape)
                if time_dim is not None:
                    size[time_dim] = length
                d = like.new_ones(size)
            rows.append(d if time_dim is None else pad_to(d, width, time_dim, 1.0))
        stacked.append(torch.stack(rows))
    return stacked


def stacked_surrogates(stack: StackedModels, members: Sequence[int], curve: Curve,
                       params: Sequence[Mapping[str, float]], batches: Sequence[SentenceBatch], tokens: Sequence[int],
                       generators: Sequence[torch.Generator | None]) -> list[Surrogates]:
    """The per-token surrogates of one training step of the models ``members`` of ``stack`` (trials of ``curve``).

    Member j has hyperparameters ``params[j]``, trains on ``batches[j]`` (``tokens[j]`` real tokens, on the
    models' device) and draws its latent samples and dropout masks from ``generators[j]`` (None: the default
    generator), in the order a separate run draws them (:func:`~paperlib.experiments.micmco.synthetic.trials.
    step_surrogates`: samples, then masks). What a fused recurrence (cuDNN on a GPU: a few kernels for a whole
    sequence) can run stays per trial: the encoders' bidirectional LSTMs, and the decoders when no trial drops
    out its recurrent state. Variational state dropout forces the decoder's time loop into one step at a time
    (about 40 kernels a step); those decoders run as one vmapped pass over the members, so the stack pays that
    loop once. The objectives and estimators are each trial's own, as in a separate run.
    """
    models = [stack.models[i] for i in members]
    posteriors = [model.posterior(batch) for model, batch in zip(models, batches)]
    samples, masks = [], []
    k = curve.estimator.num_samples
    for j, (model, generator) in enumerate(zip(models, generators)):
        samples.append(latent_samples(posteriors[j], curve.estimator, generator))  # [K, B, ...]
        b, t = batches[j].inputs.shape
        masks.append(model.sample_masks(k, b, t, generator))  # what log_likelihood draws in training mode
    if all(m.state is None for m in masks):
        log_px_z = [model.log_likelihood(samples[j], batches[j], masks[j]) for j, model in enumerate(models)]
    else:
        width = max(b.inputs.shape[1] for b in batches)
        inputs, targets, mask = (torch.stack([pad_to(getattr(b, f), width, 1, False if f == "mask" else 0)
                                              for b in batches]) for f in ("inputs", "targets", "mask"))  # [M, B, T]
        lengths = torch.stack([b.lengths for b in batches])  # [M, B]
        input_mask, state_mask, output_mask = _stacked_masks(masks, width, [b.inputs.shape[1] for b in batches])
        log_px_z = stack.call(
            _decode, torch.stack(samples), inputs, targets, mask, lengths, input_mask, state_mask, output_mask,
            in_dims=(0, 0, 0, 0, 0, *(None if m is None else 0 for m in (input_mask, state_mask, output_mask))),
            members=members)  # [M, K, B]
    return [per_token(objective_surrogates(model, curve.estimator, params[j], posteriors[j], samples[j], log_px_z[j]),
                      tokens[j]) for j, model in enumerate(models)]


def backward_all(surrogates: Sequence[Surrogates], models: Sequence[SentenceVAE]) -> None:
    """Accumulate each trial's gradients of its loss ``-mean(objective)``: :meth:`~paperlib.estimators.Surrogates.
    backward` for all trials at once (a trial's loss does not reach another trial's parameters)."""
    model_loss = sum(-s.model.mean() for s in surrogates)
    if all(s.model is s.encoder for s in surrogates):
        model_loss.backward()
        return
    model_loss.backward(inputs=[p for m in models for p in m.model_parameters()], retain_graph=True)
    sum(-s.encoder.mean() for s in surrogates).backward(inputs=[p for m in models for p in m.encoder_parameters()])


class StackedTrials:
    """The trials ``specs`` of ``curve`` trained together for ``steps`` steps (the curve's factors applied).

    ``device``: the stage's device by default. Models live in :attr:`models` (trial order); after training they
    are in eval mode and :meth:`results` gives each trial's :class:`~paperlib.experiments.micmco.synthetic.trials.
    TrainResult`.
    """

    def __init__(self, curve: Curve, specs: Sequence[TrialSpec], settings: MicmcoPtbParams, data: SentenceData,
                 device: torch.device | str | None = None) -> None:
        if not specs:
            raise ValueError("a stack needs at least one trial")
        missing = [name for spec in specs for name in curve.hyperparameters if name not in spec.params]
        if missing:
            raise ValueError(f"trials of curve {curve.label!r} need {curve.hyperparameters}; missing {sorted(set(missing))}")
        self.curve, self.specs, self.settings, self.data = curve, list(specs), settings, data
        self.device = torch.device(device) if device is not None else stage_device()
        self.steps = settings.steps * curve.steps_factor
        self.batch_size = settings.batch_size * curve.batch_factor
        self.models: list[SentenceVAE] = []
        self.generators: list[torch.Generator] = []
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            for spec in self.specs:  # as run_trial: seed, build, move; the random stream continues from there
                torch.manual_seed(spec.seed)
                self.models.append(build_model(curve, spec.params, settings, data.vocab_size).to(self.device))
                self.generators.append(_continuing_generator(self.device))
        self.stack = StackedModels(self.models)
        self.optimizer = torch.optim.Adam(
            [{"params": list(m.parameters()), "lr": float(s.params["learning_rate"]),
              "weight_decay": 2.0 * float(s.params.get("l2_penalty", 0.0))} for m, s in zip(self.models, self.specs)],
            betas=(0.0, 0.999), eps=1e-8)  # §5.C; the L2 coefficient as in trials.train
        self.step_count = 0
        self.stopped: list[int | None] = [None] * len(self.specs)  # the step a diverged trial stopped at
        self.last_objective: list[float] = [math.nan] * len(self.specs)
        self.tail_values: list[list[float]] = [[] for _ in self.specs]
        self.chunks: list[dict[str, Any]] = []
        self.extra: dict[str, Any] = {}  # what the caller saved with the run (see save)
        self._streams = [BatchStream(data.train, self.batch_size, data.eos_id, spec.seed) for spec in self.specs]

    # -- training -------------------------------------------------------------------------------------------------

    @property
    def live(self) -> list[int]:
        """The trials still training (not diverged)."""
        return [i for i, stopped in enumerate(self.stopped) if stopped is None]

    def step(self) -> None:
        """One Adam step of every live trial (every trial's batch stream advances, so streams stay in step)."""
        batches = [next(stream) for stream in self._streams]
        live = self.live
        if not live:
            self.step_count += 1
            return
        self.optimizer.zero_grad(set_to_none=True)
        surrogates = stacked_surrogates(
            self.stack, live, self.curve, [self.specs[i].params for i in live],
            [SentenceBatch(*(t.to(self.device) for t in (b.inputs, b.targets, b.mask, b.lengths)))
             for b in (batches[i] for i in live)],
            [int(batches[i].lengths.sum()) for i in live], [self.generators[i] for i in live])
        values = torch.stack([s.model.detach().mean() for s in surrogates]).tolist()  # the objective per token
        keep = []
        for j, i in enumerate(live):
            self.last_objective[i] = values[j]
            if math.isfinite(values[j]):
                keep.append(j)
            else:
                self.stopped[i] = self.step_count + 1
        if keep:
            backward_all([surrogates[j] for j in keep], [self.models[live[j]] for j in keep])
            for j in set(range(len(live))) - set(keep):  # zero (or NaN) gradients reach it through the stacking
                for p in self.models[live[j]].parameters():
                    p.grad = None  # no gradient: Adam leaves a trial that stopped as it is, as a separate run stops
            self.optimizer.step()
        tail = max(1, self.steps // 10)
        self.step_count += 1
        if self.step_count > self.steps - tail:
            for j in keep:
                self.tail_values[live[j]].append(values[j])

    def run(self, until: int | None = None, deadline: float | None = None) -> bool:
        """Train to step ``until`` (default: the end) or until ``time.time()`` passes ``deadline``; True when done.

        The chunk (steps, seconds, device) is appended to :attr:`chunks` when it took a step.
        """
        until = self.steps if until is None else min(until, self.steps)
        started, first = time.perf_counter(), self.step_count
        for model in self.models:
            model.train()
        while self.step_count < until and (deadline is None or time.time() < deadline):
            self.step()
        for model in self.models:
            model.eval()
        if self.step_count > first:
            self.chunks.append({"from_step": first, "to_step": self.step_count,
                                "seconds": round(time.perf_counter() - started, 3), "device": _device_name(self.device)})
        return self.step_count >= self.steps

    def results(self) -> list[TrainResult]:
        """Each trial's training outcome, as :func:`~paperlib.experiments.micmco.ptb.trials.train` reports it; its
        seconds are its share of the stack's (the stack's training time over its trials), so that the seconds of
        the trials add up to the time spent."""
        seconds = self.seconds / len(self.specs)
        out = []
        for i in range(len(self.specs)):
            if self.stopped[i] is not None:
                out.append(TrainResult(self.stopped[i], seconds, self.last_objective[i], True))
            else:
                tail = self.tail_values[i]
                out.append(TrainResult(self.step_count, seconds, float(np.mean(tail)) if tail else math.nan, False))
        return out

    @property
    def seconds(self) -> float:
        """The stack's training time so far, over every chunk."""
        return sum(c["seconds"] for c in self.chunks)

    # -- chunks ---------------------------------------------------------------------------------------------------

    def _identity(self) -> dict[str, Any]:
        return {"curve": self.curve.label, "regime": self.curve.regime, "steps": self.steps,
                "specs": [{"params": dict(s.params), "seed": s.seed} for s in self.specs],
                "settings": self.settings.trial_fingerprint()}

    def save(self, path: str | os.PathLike, extra: Mapping[str, Any] | None = None) -> None:
        """Write everything :meth:`load` needs to continue this run, atomically, with the caller's ``extra``
        (e.g. scores so far; :attr:`extra` after loading)."""
        self.extra = dict(extra or {})
        save_torch_atomic({"identity": self._identity(), "step": self.step_count, "extra": self.extra,
                     "models": [m.state_dict() for m in self.models], "optimizer": self.optimizer.state_dict(),
                     "generators": [g.get_state() for g in self.generators],
                     "streams": [stream.state() for stream in self._streams], "stopped": self.stopped,
                     "last_objective": self.last_objective, "tail_values": self.tail_values,
                     "chunks": self.chunks}, path)

    @classmethod
    def load(cls, path: str | os.PathLike, curve: Curve, specs: Sequence[TrialSpec], settings: MicmcoPtbParams,
             data: SentenceData, device: torch.device | str | None = None) -> "StackedTrials":
        """The run saved at ``path``, continued on ``device``; a checkpoint of other trials or settings is an error.

        Read onto the CPU (generator states must be CPU tensors; Adam's step counts stay there) and copied into the
        run's models and optimizer, which hold their tensors on ``device``."""
        run = cls(curve, specs, settings, data, device)
        saved = torch.load(Path(path), map_location="cpu", weights_only=False)
        if saved["identity"] != run._identity():
            raise ValueError(f"{path} holds another run: {saved['identity']} (expected {run._identity()})")
        for model, state in zip(run.models, saved["models"]):
            model.load_state_dict(state)
        run.optimizer.load_state_dict(saved["optimizer"])
        for generator, state in zip(run.generators, saved["generators"]):
            generator.set_state(state)
        for stream, state in zip(run._streams, saved["streams"]):
            stream.restore(state)
        run.step_count, run.stopped = saved["step"], list(saved["stopped"])
        run.last_objective, run.tail_values = list(saved["last_objective"]), [list(t) for t in saved["tail_values"]]
        run.chunks, run.extra = list(saved["chunks"]), dict(saved["extra"])
        return run


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


__all__ = ["StackedTrials", "TrialSpec", "backward_all", "stacked_surrogates"]
