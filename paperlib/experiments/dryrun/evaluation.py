"""Evaluation in the dry run: the passes over data a stage makes besides its training steps, counted on fake tensors
like a training step (:mod:`paperlib.experiments.dryrun.measure`) and turned into GPU time by the same model
(:func:`~paperlib.experiments.dryrun.gpu_time.estimate`).

An :class:`Evaluation` is one kind of pass of one model: validation during training (forward windows), dynamic
evaluation (per segment a forward pass, its gradient and an update of the fast weights, Krause §4.3), the gradient
statistics of RMS-normalised rules (forward and backward per batch). A pass is ``units`` units (windows, segments,
batches) long and is made ``passes`` times; a unit is counted by running the stage's own code on fake data for one and
for two units (``probes``): the difference is one unit's kernels and FLOPs, the rest the pass's set-up (cloning the
fast weights, the rule's constants). How many passes a stage makes follows from its settings
(:data:`EVALUATIONS`, one function per stage); where a search stops on what it measures (learning-rate sweeps), the
count is its cap, and the evaluation says so (``upto``).

Evaluation runs in float32 with TF32 matmuls where the profile allows them (no autocast: ``paperlib.train``), so its
time is estimated at ``tf32`` for a ``bf16`` profile. A Transformer's attention grows with its memory until the memory
is full; the probes see the first segments, so its FLOPs per unit are a lower bound (such passes at batch 1 are
launch-bound by orders of magnitude, so the time is not).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from unittest import mock

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor

from paperlib.experiments.dryrun.measure import FAKE_DEVICE, StepCounter, build_model, cached, on_fake_tensors

@dataclass(frozen=True)
class Evaluation:
    """``passes`` passes of ``units`` units each (windows, segments, batches) of one model, ``build`` (on the meta
    device); ``run(model, units, device)`` makes one pass of ``units`` units on fake data with the stage's code.
    Evaluations of one ``key`` share their measured costs. ``upto``: the work (units x passes) is a cap, not a count
    (sweeps that stop when the loss stops improving, a probe that stops at its last target). ``probes``: the numbers
    of units counted (a Transformer's from the pass where its memory is full)."""

    name: str
    build: Callable[[], nn.Module]
    run: Callable[[nn.Module, int, torch.device], None]
    units: int
    passes: int
    unit: str  # what one unit is, for the table: "window 10x70", "segment 1x5"
    key: tuple | None = None
    upto: bool = False
    probes: tuple[int, int] = (1, 2)


def count_pass(evaluation: Evaluation, units: int) -> dict[str, int]:
    """Kernels, FLOPs and peak memory (weights included) of one pass of ``units`` units, on fake tensors."""
    model, on_meta = build_model(evaluation.build)
    with on_fake_tensors(model, on_meta), StepCounter([*model.parameters(), *model.buffers()]) as counter, \
            warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Accessing the data pointer of FakeTensor")  # nn.LSTM's weight check
        evaluation.run(model, units, torch.device(FAKE_DEVICE))
    return {"kernels": counter.kernels, "flops": counter.flops, "peak_memory_bytes": counter.peak}


def measure_evaluation(evaluation: Evaluation, cache: dict | None = None) -> dict[str, int]:
    """Per unit and per pass: kernels and FLOPs (one unit = the difference between the two ``probes``, extrapolated
    linearly to ``units``; a pass no longer than the larger probe is counted outright), and the larger probe's peak
    memory. Counts of one ``key`` are shared through ``cache``."""
    def at(units: int) -> dict[str, int]:
        return cached(cache, evaluation.key, units, lambda: count_pass(evaluation, units))

    low, high, counts = *evaluation.probes, ("kernels", "flops")
    if evaluation.units <= high:  # short enough to count outright
        per_pass = at(evaluation.units)
        unit = {k: per_pass[k] / evaluation.units for k in counts}
    else:
        a, b = at(low), at(high)
        unit = {k: (b[k] - a[k]) / (high - low) for k in counts}
        per_pass = {**b, **{k: a[k] + unit[k] * (evaluation.units - low) for k in counts}}
    return {**{f"{k}_per_unit": round(unit[k]) for k in counts}, **{f"{k}_per_pass": round(per_pass[k]) for k in counts},
            "peak_memory_bytes": per_pass["peak_memory_bytes"]}


def read_back(*values: torch.Tensor) -> None:
    """Read ``values`` to the host as the stage does after each window or chunk (a ``.item()``: on a GPU the host
    waits for the device there); nothing on fake tensors, which hold no values (and no kernel is counted)."""
    for value in values:
        if not isinstance(value, FakeTensor):
            value.item()


@contextlib.contextmanager
def foreach_optimizers() -> Iterator[None]:
    """``torch.optim`` SGD, RMSprop and Adam take their ``foreach`` (multi-tensor) kernels inside the block, as they
    do by default on CUDA; on the fake tensors, which live on the CPU, they would loop over the tensors (the update
    rules of dynamic evaluation build these optimizers themselves, :func:`paperlib.dyneval.rules.make_update_rule`)."""
    with contextlib.ExitStack() as stack:
        for name in ("sgd", "rmsprop", "adam"):  # torch.optim does not keep its submodules as attributes
            stack.enter_context(mock.patch.object(importlib.import_module(f"torch.optim.{name}"),
                                                  "_default_to_fused_or_foreach", lambda *args, **kwargs: (False, True)))
        yield


def evaluation_precision(precision: str) -> str:
    """The precision evaluation runs at in a profile of ``precision``: float32 (TF32 matmuls unless ``fp32``)."""
    return "fp32" if precision == "fp32" else "tf32"


# ---------------------------------------------------------------------------------------------------
# passes: what one unit of each kind runs

def windows(tokens: int, batch: int, length: int) -> int:
    """Windows of ``length`` of a split of ``tokens`` tokens cut into ``batch`` rows
    (:func:`paperlib.data.batching.batchify`, :func:`~paperlib.data.batching.num_windows`)."""
    return math.ceil((tokens // batch - 1) / length)


def forward_windows(vocab: int, batch: int, length: int) -> Callable[[nn.Module, int, torch.device], None]:
    """A language model scored without gradients (validation, static evaluation, the neural cache's features):
    ``units`` windows of [batch, length] tokens in eval mode, the state carried on, the logits divided by a
    temperature, the NLL summed and read back to the host (:func:`read_back`): the operators of
    :func:`paperlib.models.evaluation.evaluate_nll`, whose own ``.item()`` fake tensors could not answer."""
    from paperlib.models.objective import token_log_likelihood

    def run(model: nn.Module, units: int, device: torch.device) -> None:
        model.eval()
        state = None
        with torch.no_grad():
            for _ in range(units):
                inputs = torch.randint(vocab, (batch, length), device=device)
                logits, state = model(inputs, state)
                read_back(token_log_likelihood(logits / 1.0, torch.randint(vocab, (batch, length), device=device)).sum())

    return run


def mc_dropout_windows(vocab: int, batch: int, length: int, masks: int) -> Callable[[nn.Module, int, torch.device], None]:
    """Monte Carlo dropout (:func:`paperlib.models.evaluation.mc_dropout_log_likelihood`): ``units`` windows of
    [batch, length] tokens, each scored under one chunk of ``masks`` dropout masks as one batch, its sum read back
    (:func:`paperlib.models.evaluation.mc_dropout_nll`)."""
    from paperlib.models.evaluation import mc_dropout_log_likelihood

    def run(model: nn.Module, units: int, device: torch.device) -> None:
        states = None
        for _ in range(units):
            inputs = torch.randint(vocab, (batch, length), device=device)
            log_p, states = mc_dropout_log_likelihood(model, inputs, torch.randint(vocab, (batch, length),
                                                                                 device=device), masks, states,
                                                      chunk_size=masks)
            read_back(log_p.sum())

    return run


def gradient_batches(vocab: int, batch: int, length: int, sparse_units: int | None = None,
                     sparse_mode: str = "recurrent") -> Callable[[nn.Module, int, torch.device], None]:
    """Gradient statistics (:func:`paperlib.dyneval.mean_squared_gradients`): ``units`` batches of [batch, length]
    training tokens, each a forward and a backward pass (of M only with ``sparse_units``)."""
    from paperlib.dyneval import mean_squared_gradients

    def run(model: nn.Module, units: int, device: torch.device) -> None:
        tokens = torch.randint(vocab, (batch * (units * length + 1),), device=device)
        mean_squared_gradients(model, tokens, batch_size=batch, bptt=length, max_batches=units,
                               sparse_units=sparse_units, sparse_mode=sparse_mode)

    return run


def sentence_chunks(vocab: int, sentences: int, length: int, samples: int
                    ) -> Callable[[nn.Module, int, torch.device], None]:
    """A sentence VAE's evaluation (:func:`paperlib.experiments.micmco.ptb.trials.evaluate`): ``units`` chunks of
    ``sentences`` sentences of ``length`` tokens, each through the encoder and the decoder at ``samples`` latent
    samples (:meth:`paperlib.models.sentence_vae.SentenceVAE.log_densities`), the bounds summed and read back."""
    from paperlib.data import SentenceBatch
    from paperlib.estimators import iwae_bound, mutual_information

    def run(model: nn.Module, units: int, device: torch.device) -> None:
        model.eval()
        with torch.no_grad():
            for _ in range(units):
                tokens = torch.randint(vocab, (sentences, length), device=device)  # [b, T]
                batch = SentenceBatch(tokens, tokens, torch.ones_like(tokens, dtype=torch.bool),
                                      torch.full((sentences,), length, device=device))
                log_px_z, log_pz, log_qz = model.log_densities(batch, samples)  # [K, b] each
                read_back(iwae_bound(log_px_z, log_pz, log_qz).sum(), mutual_information(log_px_z, log_pz, log_qz).sum(),
                          (log_px_z + log_pz - log_qz).mean(0).sum(), model.representational_kl(batch).sum())

    return run


def dynamic_segments(vocab: int, segment: int, streams: int = 1, **rule: Any) -> Callable[[nn.Module, int, torch.device], None]:
    """Dynamic evaluation (:func:`paperlib.dyneval.dynamic_evaluate` with the ``rule`` settings) of ``streams``
    streams of ``units`` segments of ``segment`` tokens. Global RMS gets gradient statistics made outside the fake
    mode; non-local RMSprop a statistics stream (a second forward and backward pass per segment)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from paperlib.dyneval import dynamic_evaluate

    def run(model: nn.Module, units: int, device: torch.device) -> None:
        settings = {"lr": 1e-4, **rule}  # the learning rate changes no shape
        if settings.get("rule") == "global_rms":
            units_ = settings.get("sparse_units")
            with unset_fake_temporarily():  # real: the rule reads their mean on the host once, at set-up
                shapes = {"adaptation": (1, units_, units_)} if units_ is not None else \
                    {n: tuple(p.shape) for n, p in model.named_parameters() if p.requires_grad}
                settings["ms_g"] = {n: torch.full(s, 1e-6) for n, s in shapes.items()}
        shape = (streams, units * segment + 1) if streams > 1 else (units * segment + 1,)
        if settings.get("rule") == "nonlocal_rmsprop":  # the parallel model's statistics stream
            settings["statistics_tokens"] = torch.randint(vocab, shape, device=device)
        with foreach_optimizers():
            dynamic_evaluate(model, torch.randint(vocab, shape, device=device), segment_len=segment, **settings)

    return run


__all__ = ["Evaluation", "count_pass", "dynamic_segments", "evaluation_precision", "forward_windows",
           "gradient_batches", "mc_dropout_windows", "measure_evaluation", "sentence_chunks", "windows"]
