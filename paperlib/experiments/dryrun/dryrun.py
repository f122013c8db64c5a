"""Dry run of the ``paper`` profile: does one training step of every stage fit on a GPU, and how long would the
stage take there?

For every experiment stage (``data_summary`` trains nothing) the stage's own builders make the models of its
``paper`` profile, and ONE training step (forward, backward, clipping where the stage clips, optimizer step) runs on
fake tensors (``torch._subclasses.fake_tensor.FakeTensorMode``): shapes propagate, nothing is computed or allocated.
Per workload (a model, or the runs of a stage that share one shape), :class:`StepCounter` records the parameters,
the peak of live memory in a steady-state step (parameters, gradients, the optimizer state of one warm-up update,
activations, temporaries), FLOPs (``torch.utils.flop_counter``'s formulas: matmuls, convolutions, attention) and
kernels (ATen operators other than views and allocations, each one eager CUDA launch); the stage's adapter says how
many steps each run takes and how many runs (seeds, trials, grid points) there are. The GPU time of a workload is
the larger of compute-bound time, FLOPs / (MFU x peak at the profile's ``compute.precision``), and launch-bound
time, kernels x the time per kernel (:func:`paperlib.experiments.dryrun.gpu_time.estimate`, with a datasheet's constants or
ones fitted to a GPU measurement): recurrent models loop over time steps in Python with small matmuls, so on a GPU
they mostly wait for kernel launches. ``profile`` picks the settings (``paper`` by default).

Assumptions and departures (also in the JSON):

- Fake tensors live on the CPU device: autograd on fake ``cuda`` tensors aborts the process in a CPU-only torch
  build (``getDeviceGuardImpl``), and the CPU keeps the numbers the same on every machine. Optimizers use their
  ``foreach`` kernels, as on CUDA. ``nn.LSTM`` runs as one fused oneDNN layer on a CPU as cuDNN's does on a GPU,
  counted as the kernels cuDNN launches per time step (:data:`.measure.FUSED_RNN_KERNELS_PER_STEP`, checked on an H200);
  ``nn.GRU`` and LSTMs on packed sequences (the word-generation GRUs, micmco_ptb's encoder) run per time step on a
  CPU, so their kernel counts are upper bounds (not in a word-generation stack, whose GRUs run step by step on a GPU
  too: vmap needs it). The CUDA context (~0.5 GB), allocator rounding and library
  workspaces are not in the peak.
- Evaluation is counted for the stages that train language models, evaluate them dynamically or score PTB sentence
  VAEs (:mod:`.evaluation`, :mod:`.evaluation_plans`): validation during training, final and Monte Carlo dropout
  scores, dynamic evaluation's searches, tests and studies, importance-weighted bounds with hundreds of samples, each
  pass measured on fake tensors with the stage's own code. The synthetic MICMCO, word-generation, reverse-copy and
  music evaluations and weight averaging's arithmetic are not; one GPU, steps back to back, no data loading or host
  synchronisation.
- Every sequence has the profile's full length (BPTT; sentences of ``max_len`` tokens, whose masks then select
  everything, :class:`FullLengths`; words of ``max_len`` letters); hyperparameters tuned per trial that change
  shapes (ranks, rounds, embedding ratio, dropout on or off) sit at the centre of their search range; every trial
  runs to the end (tuning_ptb's pruning would shorten it). A reverse-copy model runs at four lengths: it is
  measured at the two shortest and extrapolated linearly (exact for FLOPs and kernels, one recurrent step per
  position; memory too once activations dominate, checked in the tests).
- A quick check (``max_length`` set, the smoke profile's) also stacks at most :data:`CHECK_STACK` models where a
  stage trains stacks (``stack_size``): the same code builds and steps as with ten, in a fraction of the time, and
  the counts, like the capped lengths', are not the paper's.

Modules: :mod:`.measure` (a workload and its counted step), :mod:`.workloads` (one adapter per stage),
:mod:`.evaluation` (an evaluation pass and its counted units), :mod:`.evaluation_plans` (the passes of each stage,
from the splits' sizes in :mod:`.split_sizes`);
this one runs them and re-exports their names. A stage's ``gpu_hours`` is its ``training_hours`` (the workloads) plus
its ``evaluation_hours`` (the evaluations).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch

from paperlib.experiments.common.config import experiment_params, load_params, section_params
from paperlib.experiments.dryrun.evaluation import measure_evaluation, evaluation_precision
from paperlib.experiments.dryrun.evaluation_plans import EVALUATIONS
from paperlib.experiments.dryrun.gpu_time import DATASHEET, Constants, estimate
from paperlib.experiments.dryrun.measure import (FAKE_DEVICE, NO_KERNEL, Workload, materialise, measure, measure_step,
                                                 num_parameters)
from paperlib.experiments.dryrun.workloads import ADAPTERS, STAGES, Cap


# ---------------------------------------------------------------------------------------------------
# the dry run, its table and the CLI's entry point

CHECK_STACK = 2  # a quick check's largest stack: more than one model, so the stacked code runs


def check_stacks(params: dict[str, Any], profile: str) -> dict[str, Any]:
    """A copy of ``params`` in which every experiment's ``profile`` settings, and each of their models', stack at most
    :data:`CHECK_STACK` models (``stack_size``), for a quick check."""
    params = copy.deepcopy(params)
    for profiles in (params.get("experiments") or {}).values():
        settings = profiles.get(profile) if isinstance(profiles, dict) else None
        if not isinstance(settings, dict):
            continue
        models = settings.get("models")
        for entry in [settings, *(models.values() if isinstance(models, dict) else ())]:
            if isinstance(entry, dict) and entry.get("stack_size") is not None:
                entry["stack_size"] = min(entry["stack_size"], CHECK_STACK)
    return params


def check_stages(stages: Sequence[str] | None) -> list[str]:
    """The stages asked for (all of them for None or empty), or a ValueError naming the valid ones."""
    unknown = [s for s in stages or () if s not in ADAPTERS]
    if unknown:
        raise ValueError(f"unknown stage(s) {', '.join(unknown)}; stages with a dry run: {', '.join(STAGES)} "
                         "(data_summary trains nothing)")
    return list(dict.fromkeys(stages)) if stages else list(STAGES)


def assumptions(precision: str, max_length: int | None = None, constants: Constants = DATASHEET,
                profile: str = "paper") -> dict[str, Any]:
    """The constants and choices every estimate rests on (written into the JSON)."""
    extra = {} if constants is DATASHEET else {"constants": constants.source}
    return {"profile": profile, "gpu": constants.gpu, "precision": precision, "peak_tflops": constants.peak_flops[precision] / 1e12,
            "mfu": constants.mfu, "kernel_latency_us": constants.kernel_latency_s * 1e6, "fake_device": FAKE_DEVICE,
            "torch": torch.__version__, "max_length": max_length,
            **({} if max_length is None else {"largest_stack": CHECK_STACK}), **extra,
            "counts": "training steps, and the evaluation passes of the language-model, dynamic-evaluation and PTB "
                      "MICMCO stages (not those of the synthetic MICMCO, word-generation, reverse-copy and music "
                      "stages, not weight averaging); every sequence at full length; tuned shape hyperparameters at "
                      "the centre of their ranges; every trial run to the end; learning-rate sweeps to their cap"}


def dry_run(stages: Sequence[str] | None = None, params: dict[str, Any] | None = None,
            max_length: int | None = None, progress: Callable[[str], None] | None = None, profile: str = "paper",
            constants: Constants = DATASHEET) -> dict[str, Any]:
    """Measure every workload of ``stages`` (default: all) in ``profile`` and estimate its GPU time with
    ``constants`` (the datasheet's, or fitted to a GPU measurement).

    ``max_length`` caps every sequence length and makes the run a quick check that the configs build and step, with
    stacks of at most :data:`CHECK_STACK` models (:func:`check_stacks`); the numbers are then not the paper's.
    Returns ``{"assumptions": ..., "stages": {stage: {"gpu_hours", "training_hours",
    "evaluation_hours", "peak_memory_bytes", "workloads": {name: {...}}, "evaluations": {name: {...}}}}}``, keys in a
    fixed order. A stage's peak memory is the largest of its training steps' and evaluation passes'.
    """
    chosen = check_stages(stages)
    params = params if params is not None else load_params()
    if max_length is not None:
        params = check_stacks(params, profile)
    precision = section_params("compute", params).precision[profile]
    cap: Cap = (lambda length: length) if max_length is None else (lambda length: min(length, max_length))
    out: dict[str, Any] = {"assumptions": assumptions(precision, max_length, constants, profile), "stages": {}}
    for stage in chosen:
        settings = experiment_params(stage, profile, params)
        cache: dict = {}
        workloads: dict[str, dict[str, Any]] = {}
        for workload in ADAPTERS[stage](stage, settings, precision, cap, profile):
            if progress is not None:
                progress(f"{stage}: {workload.name}")
            step = measure(workload, cache)
            steps = workload.steps * workload.runs
            workloads[workload.name] = {
                **step, "parameters": step["parameters"] // workload.models, "models_per_step": workload.models,
                "batch": workload.batch, "length": workload.length, "steps_per_run": workload.steps,
                "runs": workload.runs, "total_flops": step["flops_per_step"] * steps,
                **{k: round(v, 4) if isinstance(v, float) else v
                   for k, v in estimate(step["flops_per_step"], step["kernels_per_step"], steps, precision,
                                        constants).items()}}
        evaluations: dict[str, dict[str, Any]] = {}
        counted_passes: dict = {}
        for evaluation in EVALUATIONS.get(stage, lambda *args: ())(stage, settings, precision, cap, profile):
            if progress is not None:
                progress(f"{stage}: {evaluation.name}")
            if evaluation.name in evaluations:
                raise ValueError(f"{stage}: two evaluations are named {evaluation.name!r}")
            if max_length is not None:  # a quick check counts the first units (a Transformer's memory never fills)
                evaluation = dataclasses.replace(evaluation, probes=(1, 2))
            counted = measure_evaluation(evaluation, counted_passes)
            evaluations[evaluation.name] = {
                **counted, "unit": evaluation.unit, "units_per_pass": evaluation.units, "passes": evaluation.passes,
                "at_most": evaluation.upto,
                **{k: round(v, 4) if isinstance(v, float) else v
                   for k, v in estimate(counted["flops_per_pass"], counted["kernels_per_pass"], evaluation.passes,
                                        evaluation_precision(precision), constants).items()}}
        training = round(sum(w["gpu_hours"] for w in workloads.values()), 4)
        evaluating = round(sum(e["gpu_hours"] for e in evaluations.values()), 4)
        out["stages"][stage] = {"gpu_hours": round(training + evaluating, 4), "training_hours": training,
                                "evaluation_hours": evaluating,
                                "peak_memory_bytes": max(w["peak_memory_bytes"]
                                                         for w in [*workloads.values(), *evaluations.values()]),
                                "workloads": workloads, "evaluations": evaluations}
    return out


__all__ = ["ADAPTERS", "CHECK_STACK", "Cap", "FAKE_DEVICE", "NO_KERNEL", "STAGES", "Workload", "assumptions",
           "check_stacks", "check_stages", "dry_run", "materialise", "measure", "measure_step", "num_parameters"]
