"""One command that measures paperlib on a GPU: the card, the unit suite on CUDA, the card's ceilings, and a
training step of every stage's ``paper`` workloads beside the dry run's prediction.

    python benchmarks/gpu.py [--out DIR] [--budget SECONDS] [--tests] [--stages ...] [--compile MODE ...]
    python benchmarks/gpu.py --cpu --out DIR        # the check mode CI runs: every code path, small sizes, seconds

``benchmarks/gpu.sh`` wraps it for a bare GPU machine (carried wheels, environment, where the output goes). In order:

1. **Environment**: card, driver, CUDA, cuDNN, torch, Python, the commit (when the copy has its ``.git``).
2. **Tests** (``--tests``): ``pytest -m "not slow"`` (``--pytest-args``) with the device policy on CUDA (``PAPERLIB_DEVICE=cuda``: every
   ``Trainer`` and stage in the suite trains there; ``cuda``-marked tests run instead of skipping), with a time limit
   of its own; the pass / fail / skip counts and the failing tests' names are recorded, not fatal. Each failure is
   also logged the moment it happens (:mod:`benchmarks.failure_log`: its test, phase and the end of its
   traceback), so a run cut off at its limit still names what failed.
3. **Ceilings**, once: a square matrix product at fp32 (IEEE), tf32 and bf16 (TFLOP/s: ``2 n^3`` over the median of
   timed products after warm-up, on random data) and a device-to-device copy (GB/s, bytes read plus written).
4. **Stacked trials** (``--stacked M ...``, before the workloads, at most ``--stacked-budget`` seconds): a training
   step of M PTB sentence-VAE trials of one curve as one stacked model
   (:mod:`paperlib.experiments.micmco.ptb.stacked_trials`) against M separate steps, at the paper's shapes
   (:func:`stacked_timings`); the small models of ch. 5 are launch-bound, which stacking is meant to fix. At the
   very end (``--graphed-stack-budget`` seconds beyond ``--budget``), each stack again with its step replayed as one
   CUDA graph (:func:`graphed_stack_timings`).
5. **Workloads**: :data:`paperlib.experiments.dryrun.dryrun.ADAPTERS` builds each stage's ``paper`` workloads, the models
   and steps the dry run counted, here materialised for real on the device. Each gets warm-up steps, then timed
   steps (the median step: forward, backward, clipping where the stage clips, optimizer step), tokens/s (batch x
   length / step; multi-sample objectives count each token once), peak memory, kernels per step (the CUDA kernels
   and copies a profiled step launched; on a CPU the ATen operators) and MFU = the dry run's FLOPs per step / step
   time / the measured peak at the profile's precision. Beside each: the dry run's predicted step time and kernels
   (``results/dryrun.json``). Each LM workload is also timed against ``torch.nn.LSTM`` (cuDNN) at its vocabulary,
   hidden size, layers, batch and BPTT (the goals: our LSTM >= 0.8x, the Mogrifier >= 0.5x its tokens/s).
   Workloads are taken round robin over the stages (every stage's first, then every stage's second, ...) while the
   budget lasts; the ones left are listed under ``not_timed`` with the reason, never dropped silently. Then the first
   ``--again`` of them are timed once more, last first (``step_s_again``: how well a step time repeats).
6. **Concurrent processes** (``--concurrent N ...``, after the stacked trials, at most ``--concurrent-budget``
   seconds): the first workload of ``--concurrent-stage`` (``tuning_ptb``'s LSTM: launch-bound, and the largest stage of
   the paper dry run) trained by N processes at once on the one device, each for ``--concurrent-seconds``; their total
   steps/s against one process's (:func:`concurrency_timings`). A launch-bound step leaves the card mostly idle while
   the host launches kernels, so independent runs (trials, seeds, grid points; the stages' ``workers``) may overlap
   there: this measures how far, before any profile counts on it.
7. **Evaluation passes** (at most ``--evaluations-budget`` seconds): per stage whose evaluation the dry run counts,
   the pass that weighs most there (dynamic evaluation at batch 1 for the dynamic-evaluation stages, validation or
   Monte Carlo dropout for the others), built by :mod:`paperlib.experiments.dryrun.evaluation_plans` and run for
   real with the stage's read-backs to the host: seconds per unit (window, segment, batch, sentence-VAE chunk) from
   two pass lengths, so the set-up cancels, beside the dry run's prediction per unit (:func:`measure_evaluations`);
   calibration fits these too.
8. **CUDA graphs** (``--graphs``): the first workload of each LM stage again, its whole training step captured as
   one CUDA graph and replayed (:func:`graphed_step`): the launch-bound part of a step, measured; and the stage's
   own loop at those shapes, :class:`paperlib.train.Trainer` against :class:`paperlib.graphed_train.GraphedTrainer`
   (:func:`time_trainers`, for the first LM stage): what a researcher's training gains.
9. **Compilation** (``--compile``): the first LM workload under ``torch.compile`` in each mode asked for, its first
   step (compilation included) and steady step; skipped, and listed, when the budget cannot cover the compile
   time measured on a CPU (:data:`COMPILE_SECONDS`).

The output is one JSON file, ``gpu-<card>-<date>.json`` (``cpu-check-<date>.json`` in check mode) under ``--out``,
and a table on standard output; commit the JSON of a GPU run under ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import multiprocessing
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
import traceback
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from paperlib.device import configure  # noqa: E402
from paperlib.experiments.dryrun import dryrun  # noqa: E402
from paperlib.experiments.common.config import experiment_params, load_params, section_params  # noqa: E402
from paperlib.experiments.dryrun.evaluation import Evaluation, evaluation_precision, measure_evaluation  # noqa: E402
from paperlib.experiments.dryrun.evaluation_plans import EVALUATIONS  # noqa: E402
from paperlib.experiments.dryrun.gpu_time import estimate  # noqa: E402
from paperlib.experiments.dryrun.measure import clip_gradients  # noqa: E402
from paperlib.graphed_train import CapturedStep, graph_safe, side_stream  # noqa: E402

SCHEMA = 1
LM_STAGES = ("lm_ptb", "lm_ptb_char", "lm_ptb_ablation", "lm_wt2_bytes", "averaging_ptb", "tuning_ptb", "dyneval",
             "dyneval_char")
# The budget a compile mode needs before it is tried. Measured on the reference 2-core machine (one thread, another
# job beside it): the first step of build_lm("lstm", 10,000 words, H = 256, 2 layers) under torch.compile's default
# mode at lm_ptb's paper batch and BPTT (64 x 70) took 186 s, the next steps 1.6 s. Compilation time grows with the
# unrolled graph (BPTT x layers x the cell's operators), hardly with H, and runs on the host, so a GPU machine
# compiles the same graph in comparable time; max-autotune also benchmarks kernel candidates (assumed 2x more).
COMPILE_SECONDS = {"default": 190.0, "reduce-overhead": 190.0, "max-autotune": 400.0}


# ---------------------------------------------------------------------------------------------------------------
# the machine

def environment(device: torch.device) -> dict[str, Any]:
    """What ran: card, driver, CUDA and cuDNN, torch, Python, the commit."""
    info: dict[str, Any] = {"device": str(device), "torch": torch.__version__, "python": platform.python_version(),
                            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                            "cpu_threads": torch.get_num_threads(), "commit": _commit()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(card=props.name, memory_gib=round(props.total_memory / 2**30, 1),
                    multiprocessors=props.multi_processor_count, capability=f"{props.major}.{props.minor}",
                    driver=_nvidia_smi("driver_version"))
    else:
        info.update(card=f"CPU ({platform.processor() or platform.machine()})", driver=None)
    return info


def _commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _nvidia_smi(field: str) -> str | None:
    try:
        done = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else None


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], Any], device: torch.device, warmup: int, repeats: int) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn`` after ``warmup`` calls (the device synchronised around each)."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return times


def ceilings(device: torch.device, quick: bool) -> dict[str, Any]:
    """The card's matmul rate at each precision and its copy bandwidth, measured once (METHOD: the two numbers)."""
    n = 256 if quick else 8192
    generator = torch.Generator(device).manual_seed(0)
    out: dict[str, Any] = {"matmul_size": n}
    for precision, dtype in (("fp32", torch.float32), ("tf32", torch.float32), ("bf16", torch.bfloat16)):
        configure("tf32" if precision == "tf32" else "fp32")
        a = torch.randn(n, n, device=device, dtype=dtype, generator=generator)
        b = torch.randn(n, n, device=device, dtype=dtype, generator=generator)
        seconds = statistics.median(timed(lambda: a @ b, device, 3, 3 if quick else 10))
        out[f"matmul_tflops_{precision}"] = round(2 * n**3 / seconds / 1e12, 3)
        del a, b
    configure("fp32")
    nbytes = (64 if quick else 4096) * 2**20
    source = torch.empty(nbytes, dtype=torch.uint8, device=device).random_(generator=generator)
    target = torch.empty_like(source)
    seconds = statistics.median(timed(lambda: target.copy_(source), device, 2, 3 if quick else 10))
    out["copy_gbps"] = round(2 * nbytes / seconds / 1e9, 1)  # read + written
    out["copy_bytes"] = nbytes
    return out


# ---------------------------------------------------------------------------------------------------------------
# the unit suite on the device

def data_mirror(raw: Path, dest: Path) -> list[str]:
    """A data mirror at ``dest`` made of links to the corpora fetched under ``raw`` (the ``data`` stage's
    ``data/raw/``, carried to a machine without the project's mirror): each corpus's files and folders where
    :mod:`paperlib.data.corpora` says a mirror keeps them, and the ``MANIFEST.json`` the tests look for. Returns the
    corpora it holds (every file and folder of each present; a corpus only partly fetched is left out); with none,
    ``dest`` is not written. Fetching from it verifies every checksum, as from any mirror."""
    from paperlib.data.corpora import CORPORA

    held = [name for name, corpus in CORPORA.items()
            if (corpus.files or corpus.folders)
            and all((raw / name / f.name).is_file() for f in corpus.files)
            and all((raw / name / f.name).is_dir() for f in corpus.folders)]
    if not held:
        return []
    for name in held:
        for entry in (*CORPORA[name].files, *CORPORA[name].folders):
            link = dest / entry.mirror_path
            link.parent.mkdir(parents=True, exist_ok=True)
            link.unlink(missing_ok=True)
            link.symlink_to((raw / name / entry.name).resolve())
    (dest / "MANIFEST.json").write_text(json.dumps({"_about": f"links to the corpora fetched under {raw}",
                                                    "corpora": held}, indent=1) + "\n")
    return held


def run_tests(out_dir: Path, limit_s: float, select: list[str], device: torch.device) -> dict[str, Any]:
    """``pytest`` on ``select`` with the device policy on ``device``, cut off after ``limit_s`` seconds.

    Counts and failing tests come from its JUnit XML when the run finished; every failure is also logged the moment
    it happens (:mod:`benchmarks.failure_log`), so a run cut off at its limit still names what failed, with the end
    of each traceback (``failures``). A cut-off run's whole process group (pytest-xdist's workers too) is ended, so
    nothing keeps the device busy afterwards. Without a data mirror (``PAPERLIB_DATA_MIRROR`` or ``../shared/data``)
    the tests that need corpora skip; where the copy has the corpora fetched under ``data/raw/``, a mirror of links
    to them (:func:`data_mirror`) lets those tests run too. ``mirror``: the corpora of that mirror, ``"given"``
    where the machine had one, null where the tests that need corpora skipped."""
    import shutil
    import tempfile

    from benchmarks import failure_log

    report, log = out_dir / "pytest-junit.xml", out_dir / "pytest-failures.jsonl"
    for stale in (report, log):
        stale.unlink(missing_ok=True)
    env = {**os.environ, "PAPERLIB_DEVICE": device.type, "PYTHONUNBUFFERED": "1", failure_log.VARIABLE: str(log)}
    mirror: list[str] | str | None = "given"
    given = [Path(env["PAPERLIB_DATA_MIRROR"])] if env.get("PAPERLIB_DATA_MIRROR") else []
    if not any((folder / "MANIFEST.json").is_file() for folder in (*given, REPO.parent / "shared" / "data")):
        folder = Path(tempfile.gettempdir()) / f"paperlib-mirror-{os.getpid()}"
        shutil.rmtree(folder, ignore_errors=True)
        mirror = data_mirror(REPO / "data" / "raw", folder) or None
        if mirror:
            env["PAPERLIB_DATA_MIRROR"] = str(folder)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "benchmarks.failure_log",
               f"--junitxml={report}", *select]
    start = time.perf_counter()
    with subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace", start_new_session=True) as process:
        try:
            output, _ = process.communicate(timeout=limit_s)
            code: int | str = process.returncode
        except subprocess.TimeoutExpired:
            code = "timed out"
            output = _end_group(process)
    result: dict[str, Any] = {"command": " ".join(command[1:]), "device": device.type, "exit": code,
                              "limit_s": limit_s, "seconds": round(time.perf_counter() - start, 1),
                              "mirror": mirror, "tail": output[-3000:]}
    if report.is_file():
        result.update(junit_counts(report))
    failures = failure_log.read(log)
    result["failures"] = failures
    if "failing" not in result:  # cut off: what failed before the limit (the counts stay unknown)
        result["failing"] = list(dict.fromkeys(f["test"] for f in failures))
    return result


def _end_group(process: subprocess.Popen) -> str:
    """Stop a timed-out test run and every process it started (SIGTERM, then SIGKILL after 10 s); its output."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            return process.communicate(timeout=10)[0] or ""
        except subprocess.TimeoutExpired:
            continue
    return ""


def junit_counts(path: Path) -> dict[str, Any]:
    """passed / failed / errors / skipped and the failing tests' ids from a pytest JUnit XML report."""
    root = ElementTree.parse(path).getroot()
    failed, errors, skipped, total = [], [], 0, 0
    for case in root.iter("testcase"):
        total += 1
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        if case.find("failure") is not None:
            failed.append(name)
        elif case.find("error") is not None:
            errors.append(name)
        elif case.find("skipped") is not None:
            skipped += 1
    return {"passed": total - len(failed) - len(errors) - skipped, "failed": len(failed), "errors": len(errors),
            "skipped": skipped, "failing": failed + errors}


# ---------------------------------------------------------------------------------------------------------------
# one training step of a workload, for real

class OpCounter(TorchDispatchMode):
    """ATen operators other than views and allocations (each one eager kernel launch on a GPU): the CPU's stand-in
    for the profiler's kernel count, the same rule as the dry run's :class:`~paperlib.experiments.dryrun.dryrun.StepCounter`."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "aten" and not func.is_view and not func.__name__.startswith(dryrun.NO_KERNEL):
            self.kernels += 1
        return func(*args, **(kwargs or {}))


def kernels_per_step(step: Callable[[], None], device: torch.device) -> int:
    """Kernels one call of ``step`` launches: CUDA kernels, copies and memsets from the profiler on a GPU."""
    if device.type != "cuda":
        with OpCounter() as counter:
            step()
        return counter.kernels
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        synchronize(device)
    return sum(1 for event in prof.events() if event.device_type == DeviceType.CUDA)


def _tokens_per_step(workload: dryrun.Workload) -> int:
    """Batch x length, each token once (a ``"2x64"`` batch is 2 samples of 64 sequences), times the models of a
    stacked workload (each reads its own batch)."""
    return int(workload.batch.split("x")[-1] or 1) * workload.length * workload.models


def build(workload: dryrun.Workload, device: torch.device) -> nn.Module:
    torch.manual_seed(0)
    with torch.device(device):
        return workload.build()


def step_of(workload: dryrun.Workload, model: nn.Module, device: torch.device) -> Callable[[], None]:
    """One training step as the stage takes it: forward + backward, clipping, optimizer step."""
    optimizer = workload.optimizer(model)

    def step() -> None:
        workload.backward(model, workload.length, device)
        clip_gradients(workload, model)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def graphed_step(workload: dryrun.Workload, model: nn.Module, device: torch.device,
                 warmup: int = 3) -> Callable[[], None]:
    """The workload's training step captured once as a CUDA graph (forward, backward, clipping, the optimizer step)
    and replayed (:class:`paperlib.graphed_train.CapturedStep`): the host no longer launches the thousands of small
    kernels of a BPTT window one by one, the kernels themselves stay. The optimizer is made graph-safe (its step
    counts live on the device); the batch is drawn inside the graph, so each replay trains on new random tokens.
    Warm-up steps run on a side stream first, as capture requires (PyTorch's whole-network capture recipe)."""
    optimizer = workload.optimizer(model)
    graph_safe(optimizer, device)

    def step() -> None:
        workload.backward(model, workload.length, device)
        clip_gradients(workload, model)
        optimizer.step()

    with side_stream(device):
        for _ in range(warmup):
            optimizer.zero_grad(set_to_none=True)
            step()
    optimizer.zero_grad(set_to_none=True)
    return CapturedStep(step, device).replay


def time_graphed(workload: dryrun.Workload, device: torch.device, repeats: int) -> dict[str, Any]:
    """Median replay time of :func:`graphed_step` and tokens/s (a fresh model of the workload)."""
    replay = graphed_step(workload, build(workload, device), device)
    median = statistics.median(timed(replay, device, 1, max(repeats, 3)))
    return {"graph_step_s": round(median, 6), "graph_tokens_per_s": round(_tokens_per_step(workload) / median, 1)}


def time_trainers(workload: dryrun.Workload, device: torch.device, steps: int = 20, warmup: int = 6
                  ) -> dict[str, Any]:
    """The stage's own training loop at the workload's shapes: :class:`paperlib.train.Trainer` against
    :class:`paperlib.graphed_train.GraphedTrainer` (the step replayed as one CUDA graph), on random tokens at the
    workload's vocabulary, batch, BPTT length, dropout samples, optimizer and clipping. Seconds per step over
    ``steps`` steps after ``warmup`` (the graphed trainer captures within those), each step's loss read back to the
    host (``sync_every`` 1, the trainer's default; the ``gpu`` and ``paper`` profiles read every 50th); empty for a
    model that is not a language model (no ``vocab_size``)."""
    import dataclasses
    import tempfile

    from paperlib.graphed_train import GraphedTrainer
    from paperlib.train import Trainer, TrainConfig

    probe = build(workload, device)
    if not hasattr(probe, "vocab_size"):
        return {}
    optimizer = workload.optimizer(probe)
    group = optimizer.param_groups[0]
    name = {"RAdam": "radam", "Adam": "adam", "SGD": "sgd"}[type(optimizer).__name__]
    betas = dict(beta1=group["betas"][0], beta2=group["betas"][1]) if "betas" in group else {}
    samples, _, batch = workload.batch.rpartition("x")
    config = TrainConfig(batch_size=int(batch), bptt=workload.length, optimizer=name, lr=float(group["lr"]),
                         weight_decay=group["weight_decay"], clip_norm=workload.clip_norm or 0.0,
                         num_samples=int(samples or 1), max_steps=warmup, eval_every=10**9, eval_batch_size=1,
                         eval_max_windows=1, **betas)
    generator = torch.Generator().manual_seed(0)
    train = torch.randint(probe.vocab_size, (config.batch_size * workload.length * (warmup + steps + 2) + 1,),
                          generator=generator)
    valid = torch.randint(probe.vocab_size, (2 * workload.length + 1,), generator=generator)
    del probe, optimizer
    row: dict[str, Any] = {}
    for key, trainer_class in (("trainer", Trainer), ("graphed_trainer", GraphedTrainer)):
        with tempfile.TemporaryDirectory() as out:
            trainer = trainer_class(build(workload, device), train, valid, dataclasses.replace(config), out,
                                    device=device, progress=False, sync_every=1)
            trainer.fit()
            before = trainer.train_seconds
            trainer.config.max_steps = warmup + steps
            trainer.fit()
            row[f"{key}_step_s"] = round((trainer.train_seconds - before) / steps, 6)
            if key == "graphed_trainer":
                row["graphed_trainer_steps"] = dict(trainer.step_counts)
            del trainer
            gc.collect()  # the model, optimizer and graph of this trainer gone before the next one is built
    row["graphed_trainer_speedup"] = round(row["trainer_step_s"] / row["graphed_trainer_step_s"], 3)
    return row


@contextlib.contextmanager
def recorded(row: dict[str, Any], device: torch.device) -> Iterator[None]:
    """The block times one row: running out of memory or failing otherwise becomes the row's ``status`` and
    ``error`` instead of ending the run (one broken workload must not hide the others' numbers); the device's cache
    is emptied after it either way."""
    try:
        yield
    except torch.cuda.OutOfMemoryError as err:  # not fatal: the next workload may fit
        row.update(status="out of memory", error=str(err).splitlines()[0])
    except Exception as err:  # noqa: BLE001
        row.update(status="error", error=f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()


def time_workload(workload: dryrun.Workload, device: torch.device, warmup: int, repeats: int,
                  model: nn.Module | None = None) -> dict[str, Any]:
    """Median step time, tokens/s, kernels per step and peak memory of one workload on ``device``."""
    model = build(workload, device) if model is None else model
    step = step_of(workload, model, device)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    step()  # the first step: lazy initialisation, cuDNN / cuBLAS handles, compilation under torch.compile
    synchronize(device)
    first = time.perf_counter() - start
    times = timed(step, device, max(warmup - 1, 0), repeats)
    median = statistics.median(times)
    out = {"first_step_s": round(first, 4), "step_s": round(median, 6), "step_s_spread": round(max(times) -
           min(times), 6), "tokens_per_s": round(_tokens_per_step(workload) / median, 1),
           "kernels_per_step": kernels_per_step(step, device),
           "parameters": dryrun.num_parameters(model)}
    out["peak_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 3) if device.type == "cuda" \
        else None
    return out


def predicted(dry: dict[str, Any] | None, stage: str, workload: dryrun.Workload,
              precision: str) -> dict[str, Any]:
    """The dry run's numbers for this workload (step time = its GPU-hours over its steps): from
    ``results/dryrun.json`` (the paper profile), or counted now by the dry run's own functions when ``dry`` is None
    (the check mode's small workloads, which that file does not hold)."""
    if dry is None:
        step = dryrun.measure(workload)
        entry = {**step, "steps_per_run": 1, "runs": 1,
                 **estimate(step["flops_per_step"], step["kernels_per_step"], 1, precision)}
    else:
        entry = dry.get("stages", {}).get(stage, {}).get("workloads", {}).get(workload.name)
    if entry is None:
        return {}
    steps = entry["steps_per_run"] * entry["runs"]
    return {"predicted_step_s": entry["gpu_hours"] * 3600 / steps, "predicted_kernels": entry["kernels_per_step"],
            "predicted_bound": entry["bound"], "flops_per_step": entry["flops_per_step"],
            "predicted_peak_gib": round(entry["peak_memory_bytes"] / 2**30, 3)}


def reference_workload(workload: dryrun.Workload, model: nn.Module) -> dryrun.Workload | None:
    """``torch.nn.LSTM`` (cuDNN on a GPU) at an LM workload's vocabulary, hidden size, layers, batch and length,
    stepped exactly like it (the same objective and dropout samples, optimizer and clipping); None for a model
    without those attributes."""
    from paperlib.models import build_lm

    if not all(hasattr(model, a) for a in ("vocab_size", "hidden_size", "layers")):
        return None
    vocab, hidden, layers = model.vocab_size, model.hidden_size, len(model.layers)
    return dryrun.Workload(f"nn.LSTM {layers}x{hidden}", lambda: build_lm("torch_lstm", vocab, hidden, layers),
                           workload.backward, workload.optimizer, workload.steps, workload.length, 1,
                           workload.clip_norm, workload.batch)


# ---------------------------------------------------------------------------------------------------------------
# the plan

def plan(stages: list[str], params: dict[str, Any], profile: str, cap: dryrun.Cap, precision: str,
         per_stage: int | None) -> list[tuple[str, dryrun.Workload]]:
    """Every stage's workloads, round robin over the stages (``per_stage`` caps each stage's count)."""
    queues = []
    for stage in stages:
        settings = experiment_params(stage, profile, params)
        workloads = list(dryrun.ADAPTERS[stage](stage, settings, precision, cap))
        queues.append([(stage, w) for w in workloads[:per_stage]])
    order = []
    for index in range(max(map(len, queues), default=0)):
        order += [queue[index] for queue in queues if index < len(queue)]
    return order


def measure_workloads(order: list[tuple[str, dryrun.Workload]], device: torch.device, deadline: float,
                      warmup: int, repeats: int, dry: dict[str, Any] | None, precision: str,
                      peak_tflops: float, graphs: bool = False, again: int = 0) -> tuple[list, list]:
    """Time the planned workloads until ``deadline`` (``time.monotonic()``), then the first ``again`` of them once more
    (:func:`time_again`); returns (measured, not timed). With
    ``graphs`` (CUDA only), the first workload of each LM stage is also timed as a CUDA graph (:func:`graphed_step`),
    and the first LM stage's training loop with both trainers (:func:`time_trainers`)."""
    measured, not_timed, references, graphed_stages = [], [], {}, set()
    for index, (stage, workload) in enumerate(order):
        if time.monotonic() > deadline:
            not_timed += [{"stage": s, "workload": w.name, "reason": "budget"} for s, w in order[index:]]
            break
        row: dict[str, Any] = {"stage": stage, "workload": workload.name, "batch": workload.batch,
                               "length": workload.length}
        with recorded(row, device):
            model = build(workload, device)
            row.update(time_workload(workload, device, warmup, repeats, model))
            row.update(predicted(dry, stage, workload, precision))
            if row.get("flops_per_step"):
                row["mfu"] = float(f"{row['flops_per_step'] / row['step_s'] / (peak_tflops * 1e12):.3g}")
            if row.get("predicted_step_s"):
                row["measured_over_predicted"] = round(row["step_s"] / row["predicted_step_s"], 3)
            reference = reference_workload(workload, model) if stage in LM_STAGES else None
            del model
            if reference is not None:
                shape = (reference.name, reference.batch, reference.length)
                if shape not in references:
                    references[shape] = time_workload(reference, device, warmup, repeats)["tokens_per_s"]
                row["reference"] = reference.name
                row["reference_tokens_per_s"] = references[shape]
                row["over_reference"] = round(row["tokens_per_s"] / references[shape], 3)
            if graphs and stage in LM_STAGES and stage not in graphed_stages:
                graphed_stages.add(stage)
                try:
                    row.update(time_graphed(workload, device, repeats))
                    row["graph_speedup"] = round(row["step_s"] / row["graph_step_s"], 3)
                except Exception as err:  # noqa: BLE001 - a step that cannot be captured is a finding
                    row["graph_error"] = _error_text(err)
                # the first LM stage only (two trainers' checkpoints cost seconds), not after its capture failed
                if len(graphed_stages) == 1 and "graph_error" not in row:
                    try:
                        row.update(time_trainers(workload, device))
                    except Exception as err:  # noqa: BLE001 - the same for the trainer's own graphed steps
                        row["graphed_trainer_error"] = _error_text(err)
            row["status"] = "timed"
        measured.append(row)
    time_again(measured, order, device, warmup, repeats, again)
    return measured, not_timed


def time_again(measured: list[dict[str, Any]], order: list[tuple[str, dryrun.Workload]], device: torch.device,
               warmup: int, repeats: int, count: int) -> None:
    """The first ``count`` timed workloads timed once more, last of them first, after every other workload (a fresh
    model, the same warm-up and repeats): ``step_s_again`` beside ``step_s`` is how well one step time repeats on
    the card and its host, the noise a calibration of the time model cannot fit below. Runs past the budget (a few
    steps: seconds); a failure is recorded, not raised."""
    workloads = {(stage, w.name): w for stage, w in order}
    for row in [r for r in measured if r.get("status") == "timed"][:count][::-1]:
        try:
            again = time_workload(workloads[row["stage"], row["workload"]], device, warmup, repeats)
            row["step_s_again"], row["step_s_again_spread"] = again["step_s"], again["step_s_spread"]
        except Exception as err:  # noqa: BLE001 - the first timing stands
            row["again_error"] = _error_text(err)
            if device.type == "cuda":  # (an out-of-memory error leaves its tensors to the collector)
                torch.cuda.empty_cache()


def _error_text(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300]


def evaluation_plan(stages: list[str], params: dict[str, Any], profile: str, cap: dryrun.Cap, precision: str,
                    dry: dict[str, Any] | None) -> list[tuple[str, Evaluation]]:
    """Per stage whose evaluation the dry run counts (:data:`~paperlib.experiments.dryrun.evaluation_plans.
    EVALUATIONS`), its evaluation that weighs most in the dry run (``dry``), or its first one in check mode."""
    chosen = []
    for stage in stages:
        if stage not in EVALUATIONS:
            continue
        evaluations = list(EVALUATIONS[stage](stage, experiment_params(stage, profile, params), precision, cap, profile))
        counted = (dry or {}).get("stages", {}).get(stage, {}).get("evaluations", {})
        chosen.append((stage, max(evaluations, key=lambda e: counted.get(e.name, {}).get("gpu_hours", 0.0))
                       if counted else evaluations[0]))
    return chosen


def time_evaluation(evaluation: Evaluation, device: torch.device, repeats: int, extra: int = 6) -> dict[str, Any]:
    """Seconds per unit (window, segment, batch) of an evaluation pass on ``device``: passes of the dry run's larger
    probe and of twice that (at least ``extra`` units more; fewer when the pass is shorter), timed ``repeats`` times
    each after one of each untimed; the difference of their medians over the units between (the pass's set-up
    cancels). A pass no longer than the probe is timed whole; a difference within the repeats' spread is
    ``unresolved`` (no time per unit is claimed)."""
    model = evaluation.build().to(device)
    low = min(evaluation.probes[1], evaluation.units)
    high = min(max(low + extra, 2 * low), evaluation.units)
    if high == low:  # a pass this short is timed whole, its set-up shared out over its units
        times = timed(lambda: evaluation.run(model, low, device), device, 1, repeats)
        return {"units_timed": [low], "unit_s": round(statistics.median(times) / low, 7), "status": "timed"}
    runs = [timed(lambda units=units: evaluation.run(model, units, device), device, 1, repeats) for units in (low, high)]
    difference = statistics.median(runs[1]) - statistics.median(runs[0])
    spread = max(max(times) - min(times) for times in runs)
    if difference <= spread:
        return {"units_timed": [low, high], "status": "unresolved"}
    return {"units_timed": [low, high], "unit_s": round(difference / (high - low), 7), "status": "timed"}


def measure_evaluations(chosen: list[tuple[str, Evaluation]], device: torch.device, deadline: float, repeats: int,
                        dry: dict[str, Any] | None, precision: str) -> tuple[list, list]:
    """Time the chosen evaluations until ``deadline``, each beside the dry run's time per unit (its GPU-hours over
    the pass's units, from ``dry``; counted now with the datasheet's constants in check mode); a pass the dry run
    expects to take longer than the time left is not started. Returns (measured, not timed)."""
    measured, not_timed = [], []
    for stage, evaluation in chosen:
        if dry is None:
            counted = {**measure_evaluation(evaluation), "units_per_pass": evaluation.units, "passes": 1}
            counted.update(estimate(counted["flops_per_pass"], counted["kernels_per_pass"], 1,
                                    evaluation_precision(precision)))
        else:
            counted = dry["stages"][stage]["evaluations"][evaluation.name]
        unit_s = counted["gpu_hours"] * 3600 / (counted["passes"] * counted["units_per_pass"])
        low = min(evaluation.probes[1], evaluation.units)
        expected = (1 + repeats) * 3 * low * unit_s  # both lengths: at most 3 x low units a round
        if time.monotonic() + 3 * expected > deadline:  # room for a dry run three times too optimistic
            not_timed.append({"stage": stage, "workload": evaluation.name, "reason": "budget"})
            continue
        row: dict[str, Any] = {"stage": stage, "workload": evaluation.name, "unit": evaluation.unit,
                               "kernels_per_unit": counted["kernels_per_unit"],
                               "flops_per_unit": counted["flops_per_unit"], "precision": evaluation_precision(precision),
                               "predicted_unit_s": unit_s}
        with recorded(row, device):
            row.update(time_evaluation(evaluation, device, repeats))
            if row["status"] == "timed":
                row["measured_over_predicted"] = round(row["unit_s"] / unit_s, 3)
        measured.append(row)
    return measured, not_timed


def compile_timings(order: list[tuple[str, dryrun.Workload]], modes: list[str], device: torch.device,
                    deadline: float, warmup: int, repeats: int) -> list[dict[str, Any]]:
    """The first LM workload under ``torch.compile`` in each mode: first step (compilation included), steady step."""
    lm = next(((s, w) for s, w in order if s in LM_STAGES), None)
    rows = []
    for mode in modes:
        if lm is None:
            rows.append({"mode": mode, "status": "not timed: no LM workload planned"})
            continue
        stage, workload = lm
        row = {"mode": mode, "stage": stage, "workload": workload.name}
        if time.monotonic() + COMPILE_SECONDS[mode] > deadline:
            rows.append({**row, "status": f"not timed: budget (compiling takes >= {COMPILE_SECONDS[mode]:g} s)"})
            continue
        try:
            torch._dynamo.reset()
            model = build(workload, device)
            compiled = torch.compile(model, mode=mode)
            compiled_workload = dryrun.Workload(workload.name, lambda: compiled, workload.backward,
                                                lambda _: workload.optimizer(model), workload.steps, workload.length,
                                                workload.runs, workload.clip_norm, workload.batch)
            result = time_workload(compiled_workload, device, warmup, repeats, compiled)
            rows.append({**row, "status": "timed", "compile_and_first_step_s": result["first_step_s"],
                         "step_s": result["step_s"], "tokens_per_s": result["tokens_per_s"],
                         "kernels_per_step": result["kernels_per_step"]})
        except Exception as err:  # noqa: BLE001 - a compiler failure is a finding, recorded
            rows.append({**row, "status": "error", "error": f"{type(err).__name__}: {str(err)[:300]}"})
    return rows


# ---------------------------------------------------------------------------------------------------------------
# stacked trials

# The PTB MICMCO curves the stacks are timed on: DReG 16 (Renyi) with shared dropout masks (the ladder's and Table
# 5.1's curve: two surrogates, state-masked decoder) and DReG 1 on the training fit (no dropout).
STACKED_CURVES = ("dreg16_renyi.shared", "dreg1.train")


def stacked_timings(device: torch.device, quick: bool, deadline: float, warmup: int, repeats: int,
                    sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    """A training step of M trials of a PTB sentence-VAE curve as one stack against M separate steps.

    Paper shapes (hidden 128, 10,000 words, 64 sentences of 5-35 tokens, the curve's samples) on random sentences;
    tiny ones in the check mode. Per curve: the median separate step (``trials.train``: the fused recurrences,
    packed encoder; steps timed through its scoring hook) and, per stack size M in ``sizes``, the median stacked step (:class:`~paperlib.experiments.micmco.ptb.
    stacked_trials.StackedTrials`) and its speed-up over M separate steps.
    """
    from paperlib.experiments.micmco.ptb.stacked_trials import StackedTrials
    from paperlib.experiments.micmco.ptb.trials import build_model, train

    vocab, hidden, batch, data, settings = _stacked_setup(quick, max(sizes))
    rows = []
    for name in STACKED_CURVES:
        curve, specs = _stacked_curve(name, max(sizes))
        row: dict[str, Any] = {"curve": name, "hidden": hidden, "vocab": vocab, "batch": batch,
                               "samples": curve.estimator.num_samples, "stacks": []}
        try:
            if time.monotonic() > deadline:
                raise TimeoutError("budget")

            torch.manual_seed(0)
            model = build_model(curve, specs[0].params, settings, vocab).to(device)
            marks: list[float] = []

            def mark(_: int) -> None:  # train's scoring hook, called after every step: a timestamp
                synchronize(device)
                marks.append(time.perf_counter())

            steps = warmup + repeats + 1
            train(model, curve, specs[0].params, data.train, 0, steps, batch, 0, range(1, steps + 1), mark)
            row["separate_step_s"] = statistics.median(b - a for a, b in zip(marks[warmup:], marks[warmup + 1:]))
            del model
            for size in sizes:
                if time.monotonic() > deadline:
                    row["stacks"].append({"trials": size, "status": "not timed: budget"})
                    continue
                try:
                    stack = StackedTrials(curve, specs[:size], settings, data, device)
                    step = statistics.median(timed(stack.step, device, warmup, repeats))
                    entry = {"trials": size, "status": "timed", "step_s": step,
                             "speedup": round(size * row["separate_step_s"] / step, 3) if step else None,
                             "peak_memory_gib": (round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
                                                 if device.type == "cuda" else None)}
                    row["stacks"].append(entry)
                    del stack
                except torch.cuda.OutOfMemoryError as err:
                    row["stacks"].append({"trials": size, "status": "out of memory", "error": str(err).splitlines()[0]})
                finally:
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
                        torch.cuda.reset_peak_memory_stats(device)
            row["status"] = "timed"
        except Exception as err:  # noqa: BLE001 - recorded, not fatal
            row.update(status="error" if not isinstance(err, TimeoutError) else "not timed: budget",
                       error=f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300])
        rows.append(row)
    return rows


def _stacked_setup(quick: bool, trials: int) -> tuple[int, int, int, Any, Any]:
    """Vocabulary, hidden size, batch, random sentences of 5-35 tokens and the settings of the stacked timings: paper
    shapes, tiny ones in the check mode."""
    from paperlib.experiments.micmco.ptb.data import SentenceData
    from paperlib.experiments.micmco.ptb.design import MicmcoPtbParams

    vocab, hidden, batch = (50, 8, 4) if quick else (10_000, 128, 64)
    generator = torch.Generator().manual_seed(0)
    sentences = [torch.cat([torch.randint(1, vocab, (int(n),), generator=generator), torch.tensor([0])])
                 for n in torch.randint(4, 35, (2_000,), generator=generator)]
    data = SentenceData(sentences, sentences[:8], sentences[:8], sentences[:8], vocab, 0)
    settings = MicmcoPtbParams(figures=["5.12"], trials=trials, startup_trials=trials, steps=10**6,
                               batch_size=batch, hidden_size=hidden, **({"latent_dim": 4} if quick else {}))
    return vocab, hidden, batch, data, settings


def _stacked_curve(name: str, trials: int) -> tuple[Any, list]:
    """The curve and ``trials`` Halton points of it, seeds 0, 1, ...: the trials every stacked timing trains."""
    from paperlib.experiments.micmco.ptb.design import curve_of
    from paperlib.experiments.micmco.ptb.stacked_trials import TrialSpec
    from paperlib.experiments.micmco.synthetic.micmco_synthetic import halton_design

    curve = curve_of(name)
    return curve, [TrialSpec(p, i) for i, p in enumerate(halton_design(curve.space, trials, 0))]


def graphed_stack_timings(rows: list[dict[str, Any]], device: torch.device, quick: bool, deadline: float,
                          repeats: int) -> None:
    """Each stack that :func:`stacked_timings` timed, again with its step replayed as one CUDA graph
    (:class:`~paperlib.experiments.micmco.ptb.graphed_stack.GraphedStackedTrials`), added to its entry: the median
    replayed step after the eager warm-up and the capture, the speed-up over the stacked step, how the steps ran;
    the error instead when it cannot be captured (a finding). Run last of all (the measurement so far is on disk
    before it), and no further stack after a failure: a capture that fails part-way can leave the CUDA state
    unusable for what would follow (the language models' captures, which worked on the H200, stay with their
    workloads). ``deadline`` is checked before each stack. The one exception: when the capture itself fails
    (:class:`~paperlib.graphed_train.CaptureError`, not an error of the eager warm-up) on CUDA with cuDNN on, that
    stack is tried once more without cuDNN (``graph_without_cudnn_step_s`` or ``_error``), since the encoders' LSTMs
    are the step's one cuDNN operator: a last attempt, whose own failure ends nothing else (the failed capture's
    private memory pool is PyTorch's to keep)."""
    from paperlib.graphed_train import CaptureError

    sizes = [s["trials"] for row in rows for s in row.get("stacks", [])]
    if not sizes:
        return
    *_, data, settings = _stacked_setup(quick, max(sizes))
    failed = False
    for row in rows:
        curve, specs = _stacked_curve(row["curve"], max(sizes))
        for entry in row.get("stacks", []):
            if entry.get("status") != "timed":
                continue
            if time.monotonic() > deadline or failed:
                entry["graph_status"] = "not timed: " + ("an earlier capture failed" if failed else "budget")
                continue
            try:
                entry.update(_graphed_stack_step(curve, specs[:entry["trials"]], settings, data, device, repeats,
                                                 entry["step_s"], "graph"))
            except Exception as err:  # noqa: BLE001 - recorded, not fatal
                entry["graph_error"], failed = _error_text(err), True
                uncapturable = isinstance(err, CaptureError)  # not an eager warm-up's error (out of memory, ...)
                traceback.clear_frames(err.__traceback__)  # the failed stack's frames: its memory goes with them
            else:
                uncapturable = False
            if uncapturable and device.type == "cuda" and torch.backends.cudnn.enabled and time.monotonic() < deadline:
                # the encoders' LSTMs are cuDNN's: is it cuDNN's kernels a graph cannot hold? The same stack once
                # more with PyTorch's own LSTM kernels, after the failed one's objects are released (no further
                # stack either way; its step time is against no eager step of the same kernels: no speed-up given)
                gc.collect()
                torch.backends.cudnn.enabled = False
                try:
                    found = _graphed_stack_step(curve, specs[:entry["trials"]], settings, data, device, repeats,
                                                entry["step_s"], "graph_without_cudnn")
                    entry.update({k: v for k, v in found.items() if not k.endswith("_speedup")})
                except Exception as again:  # noqa: BLE001 - recorded, not fatal
                    entry["graph_without_cudnn_error"] = _error_text(again)
                finally:
                    torch.backends.cudnn.enabled = True


def _graphed_stack_step(curve: Any, specs: list, settings: Any, data: Any, device: torch.device, repeats: int,
                        stacked_s: float, prefix: str) -> dict[str, Any]:
    """The median replayed step of a :class:`~paperlib.experiments.micmco.ptb.graphed_stack.GraphedStackedTrials`
    of ``specs`` after its eager warm-up and capture, its speed-up over the stacked step's ``stacked_s`` and how the
    steps ran, as ``<prefix>_step_s``, ``<prefix>_speedup`` and ``<prefix>_steps``; its memory released after."""
    from paperlib.experiments.micmco.ptb.graphed_stack import GraphedStackedTrials

    graphed = None
    try:
        graphed = GraphedStackedTrials(curve, specs, settings, data, device)
        step = statistics.median(timed(graphed.step, device, graphed.eager_steps + 1, repeats))
        return {f"{prefix}_step_s": step, f"{prefix}_speedup": round(stacked_s / step, 3) if step else None,
                f"{prefix}_steps": dict(graphed.step_counts)}
    finally:
        del graphed
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()


# ---------------------------------------------------------------------------------------------------------------
# concurrent processes on one device

def _concurrent_worker(stage: str, params: dict[str, Any], profile: str, max_length: int | None, precision: str,
                       device_name: str, seconds: float, wait_until: float, barrier: Any, queue: Any) -> None:
    """One of N processes: build ``stage``'s first workload, warm up, wait for the others (until the wall-clock
    ``wait_until`` at most), then train for ``seconds``; put (steps, elapsed seconds) or an error on ``queue``."""
    import threading

    try:
        torch.manual_seed(0)
        device = torch.device(device_name)
        if device.type == "cpu":
            torch.set_num_threads(1)
        configure(precision)
        cap: dryrun.Cap = (lambda n: min(n, max_length)) if max_length else (lambda n: n)
        _, workload = plan([stage], params, profile, cap, precision, 1)[0]
        step = step_of(workload, build(workload, device), device)
        for _ in range(2):
            step()
        synchronize(device)
        barrier.wait(timeout=max(1.0, wait_until - time.time()))
        start, steps = time.perf_counter(), 0
        while time.perf_counter() - start < seconds:  # the host runs ahead of the device by the launch queue only
            step()
            steps += 1
        synchronize(device)
        queue.put({"steps": steps, "seconds": time.perf_counter() - start})
    except Exception as err:  # noqa: BLE001 - reported by the parent
        queue.put({"error": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300],
                   "cause": not isinstance(err, threading.BrokenBarrierError)})
        barrier.abort()  # after the report, so that the cause arrives before the others' broken barriers


def _concurrent_row(context: Any, count: int, args: tuple, seconds: float, limit: float) -> dict[str, Any]:
    """One row of :func:`concurrency_timings`: ``count`` workers, waited for until the monotonic ``limit`` at most
    (a worker that dies without a report breaks the barrier for the others); every worker is gone on return."""
    barrier, queue = context.Barrier(count), context.Queue()
    wait_until = time.time() + (limit - time.monotonic()) - seconds - 5  # the barrier's last moment, wall-clock
    workers = [context.Process(target=_concurrent_worker, args=(*args, wait_until, barrier, queue), daemon=True)
               for _ in range(count)]
    reports: list[dict[str, Any]] = []
    try:
        for worker in workers:
            worker.start()
        while len(reports) < count and time.monotonic() < limit:
            try:
                reports.append(queue.get(timeout=0.5))
            except Exception:  # noqa: BLE001 - queue.Empty: check on the workers
                silent = [w for w in workers if w.exitcode not in (None, 0)]
                if silent and len(reports) + len(silent) >= count:
                    barrier.abort()
                    reports.append({"error": f"a process exited with status {silent[0].exitcode} without a report",
                                    "cause": True})
                    break
                if silent:
                    barrier.abort()
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
            worker.join(5)
    errors = sorted((r for r in reports if "error" in r), key=lambda r: not r["cause"])
    if errors or len(reports) < count:
        return {"processes": count, "status": "error",
                "error": errors[0]["error"] if errors else f"{count - len(reports)} of {count} processes did not report "
                                                          "in time"}
    rates = [r["steps"] / r["seconds"] for r in reports]
    return {"processes": count, "status": "timed", "steps_per_s": round(sum(rates), 3),
            "per_process_steps_per_s": [round(rate, 3) for rate in rates]}


def concurrency_timings(stage: str, params: dict[str, Any], profile: str, max_length: int | None, precision: str,
                        device: torch.device, processes: tuple[int, ...], seconds: float,
                        deadline: float) -> dict[str, Any]:
    """``stage``'s first workload trained by N processes at once on ``device``, for each N of ``processes``: the
    total steps/s and its ratio to one process's (the first N = 1 measured). Spawned processes, as the stages'
    ``workers`` use. Without MPS the processes' CUDA contexts take turns on the card, so the speed-up measures how
    far one process's kernel launches overlap another's work, not kernels running side by side. A row the budget
    cannot cover (``seconds`` plus 15 s to start) is listed as not timed; a row may overrun the budget by 30 s at
    most, its processes killed then; a failure is a row's error, never the script's."""
    context = multiprocessing.get_context("spawn")
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the earlier timings' cached blocks, not held while the workers run
    rows: list[dict[str, Any]] = []
    for count in processes:
        if time.monotonic() + seconds + 15 > deadline:
            rows.append({"processes": count, "status": "not timed: budget"})
            continue
        try:
            rows.append(_concurrent_row(context, count, (stage, params, profile, max_length, precision, str(device),
                                                         seconds), seconds, deadline + 30))
        except Exception as err:  # noqa: BLE001 - recorded, not fatal
            rows.append({"processes": count, "status": "error", "error": f"{type(err).__name__}: {err}"[:300]})
    single = next((r["steps_per_s"] for r in rows if r["processes"] == 1 and r["status"] == "timed"), None)
    for row in rows:
        if single and row["status"] == "timed":
            row["speedup"] = round(row["steps_per_s"] / single, 3)
    return {"stage": stage, "seconds": seconds, "rows": rows}


# ---------------------------------------------------------------------------------------------------------------
# the table and the command

def render(result: dict[str, Any]) -> str:
    """A plain-text summary: environment, tests, ceilings, one line per workload, what was not timed."""
    env, ceil = result["environment"], result["ceilings"]
    lines = [f"{env['card']} | driver {env.get('driver')} | torch {env['torch']} | CUDA {env['cuda']} | "
             f"precision {result['precision']} | {result['mode']} | {result['profile']} workloads",
             f"ceilings: matmul fp32 {ceil['matmul_tflops_fp32']:g} / tf32 {ceil['matmul_tflops_tf32']:g} / bf16 "
             f"{ceil['matmul_tflops_bf16']:g} TFLOP/s (n = {ceil['matmul_size']}), copy {ceil['copy_gbps']:g} GB/s"]
    tests = result.get("tests")
    if tests:
        lines.append(f"tests on {tests['device']}: exit {tests['exit']}, {tests.get('passed', '?')} passed, "
                     f"{tests.get('failed', '?')} failed, {tests.get('errors', '?')} errors, "
                     f"{tests.get('skipped', '?')} skipped in {tests['seconds']:g} s")
        lines += [f"  FAILED {name}" for name in tests.get("failing", [])[:20]]
    lines.append(f"{'stage':24s} {'workload':34s} {'step ms':>9s} {'pred ms':>9s} {'tok/s':>10s} {'MFU':>6s} "
                 f"{'kernels':>8s} {'pred':>8s} {'vs nn.LSTM':>10s} {'GiB':>6s}")
    for row in result["workloads"]:
        if row["status"] != "timed":
            lines.append(f"{row['stage']:24s} {row['workload'][:34]:34s} {row['status']}: {row.get('error', '')}"[:160])
            continue
        pred = row.get("predicted_step_s")
        lines.append(
            f"{row['stage']:24s} {row['workload'][:34]:34s} {row['step_s'] * 1e3:9.2f} "
            f"{pred * 1e3 if pred else float('nan'):9.2f} {row['tokens_per_s']:10.0f} {row.get('mfu', float('nan')):6.3f} "
            f"{row['kernels_per_step']:8d} {row.get('predicted_kernels', 0):8d} "
            f"{row.get('over_reference', float('nan')):9.2f}x "
            f"{row['peak_memory_gib'] if row['peak_memory_gib'] is not None else float('nan'):6.2f}")
    for row in result.get("evaluations", []):
        lines.append(f"evaluation {row['stage']}:{row['workload']} ({row['unit']}): " + (
            f"{row['unit_s'] * 1e3:.3f} ms per unit, dry run {row['predicted_unit_s'] * 1e3:.3f} ms, "
            f"{row['kernels_per_unit']:,} kernels" if row["status"] == "timed" else
            f"{row['status']} {row.get('error', '')}"))
    for row in result["workloads"]:
        if "graph_step_s" in row:
            lines.append(f"CUDA graph {row['stage']}:{row['workload']}: step {row['graph_step_s'] * 1e3:.2f} ms "
                         f"({row['graph_speedup']:.2f}x eager), {row['graph_tokens_per_s']:,.0f} tok/s")
        elif "graph_error" in row:
            lines.append(f"CUDA graph {row['stage']}:{row['workload']}: {row['graph_error']}")
        if "graphed_trainer_step_s" in row:
            lines.append(f"GraphedTrainer {row['stage']}:{row['workload']}: step "
                         f"{row['graphed_trainer_step_s'] * 1e3:.2f} ms against Trainer's "
                         f"{row['trainer_step_s'] * 1e3:.2f} ms ({row['graphed_trainer_speedup']:.2f}x), "
                         f"steps {row['graphed_trainer_steps']}")
        elif "graphed_trainer_error" in row:
            lines.append(f"GraphedTrainer {row['stage']}:{row['workload']}: {row['graphed_trainer_error']}")
    for row in result.get("stacked", []):
        if row["status"] != "timed":
            lines.append(f"stacked {row['curve']}: {row['status']} {row.get('error', '')}")
            continue
        stacks = ", ".join(f"M={r['trials']} {r['step_s'] * 1e3:.1f} ms ({r['speedup']:.2f}x)" + (
            f", as a CUDA graph {r['graph_step_s'] * 1e3:.1f} ms ({r['graph_speedup']:.2f}x)"
            if "graph_step_s" in r else f", as a CUDA graph: {r.get('graph_error') or r.get('graph_status')}"
            if "graph_error" in r or "graph_status" in r else "") + (
            f"; without cuDNN {r['graph_without_cudnn_step_s'] * 1e3:.1f} ms" if "graph_without_cudnn_step_s" in r
            else f"; without cuDNN: {r['graph_without_cudnn_error']}" if "graph_without_cudnn_error" in r else "")
            if r["status"] == "timed" else f"M={r['trials']} {r['status']}" for r in row["stacks"])
        lines.append(f"stacked {row['curve']} (H {row['hidden']}, V {row['vocab']}, B {row['batch']}, "
                     f"K {row['samples']}): separate step {row['separate_step_s'] * 1e3:.1f} ms; {stacks}")
    concurrent = result.get("concurrent")
    if concurrent:
        parts = ", ".join(f"{r['processes']}: {r['steps_per_s']:.2f} steps/s" + (f" ({r['speedup']:.2f}x)"
                                                                                  if "speedup" in r else "")
                          if r["status"] == "timed" else f"{r['processes']}: {r['status']} {r.get('error', '')}"
                          for r in concurrent["rows"])
        lines.append(f"concurrent processes, {concurrent['stage']}'s first workload: {parts}")
    for row in result.get("compile", []):
        lines.append(f"compile {row['mode']}: {row['status']}"
                     + (f", first step {row['compile_and_first_step_s']:.1f} s, step {row['step_s'] * 1e3:.2f} ms"
                        if row["status"] == "timed" else f" {row.get('error', '')}"))
    skipped = result["not_timed"]
    if skipped:
        lines.append(f"not timed ({len(skipped)}): " + ", ".join(f"{r['stage']}:{r['workload']} ({r['reason']})"
                                                                 for r in skipped))
    lines.append(f"elapsed {result['elapsed_s']:.0f} s of a {result['budget_s']:g} s budget -> {result['path']}")
    return "\n".join(lines)


def output_name(env: dict[str, Any], mode: str, today: datetime.date) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", env["card"].lower()).strip("-")
    return f"cpu-check-{today.isoformat()}.json" if mode == "cpu check" else f"gpu-{slug}-{today.isoformat()}.json"


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="check mode: on the CPU, the smoke profile's workloads "
                        "with sequences cut to 2 positions, one per stage, one timed step, small ceilings")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds for everything after the tests")
    parser.add_argument("--tests", action="store_true", help="run the unit suite on the device first")
    parser.add_argument("--pytest-args", default='-m "not slow" tests/', help="what --tests runs (one string)")
    parser.add_argument("--tests-limit", type=float, default=150.0, help="seconds the test run may take")
    parser.add_argument("--stages", nargs="*", default=None, help=f"default: all of {', '.join(dryrun.STAGES)}")
    parser.add_argument("--per-stage", type=int, default=None, help="at most this many workloads per stage")
    parser.add_argument("--compile", nargs="*", default=[], choices=sorted(COMPILE_SECONDS), metavar="MODE")
    parser.add_argument("--graphs", action="store_true",
                        help="also time the first workload of each LM stage as a CUDA graph of its whole step, "
                             "and the first one's training loop with Trainer and GraphedTrainer")
    parser.add_argument("--stacked", nargs="*", type=int, default=[1, 4, 12], metavar="M",
                        help="stack sizes to time PTB sentence-VAE trials at (none: skip; check mode: 1 and 2)")
    parser.add_argument("--stacked-budget", type=float, default=45.0,
                        help="seconds of --budget the stacked timings may take (they run before the workloads)")
    parser.add_argument("--graphed-stack-budget", type=float, default=40.0,
                        help="seconds after everything else for the stacks again as replayed CUDA graphs (0: none)")
    parser.add_argument("--concurrent", nargs="*", type=_positive_int, default=[1, 2, 4], metavar="N",
                        help="process counts to train --concurrent-stage's first workload with at once on the one "
                             "device (none: skip; check mode: 1 and 2)")
    parser.add_argument("--concurrent-stage", default="tuning_ptb", choices=dryrun.STAGES)
    parser.add_argument("--concurrent-seconds", type=float, default=4.0, help="how long each process trains")
    parser.add_argument("--concurrent-budget", type=float, default=50.0,
                        help="seconds of --budget the concurrent-process timings may take (after the stacked ones)")
    parser.add_argument("--evaluations-budget", type=float, default=30.0,
                        help="seconds of --budget the evaluation passes may take (after the concurrent processes)")
    parser.add_argument("--again", type=int, default=6,
                        help="how many of the first timed workloads to time once more at the end (the step times' "
                             "repeatability; beyond --budget, seconds; check mode: 1)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dryrun", type=Path, default=REPO / "results" / "dryrun.json")
    args = parser.parse_args(argv)
    if not args.cpu and not torch.cuda.is_available():
        parser.error("no CUDA device here: run on a GPU machine, or use --cpu for the check mode")
    start = time.monotonic()
    device = torch.device("cpu" if args.cpu else "cuda")
    mode = "cpu check" if args.cpu else "gpu"
    stages = dryrun.check_stages(args.stages)
    params = load_params()
    precision = section_params("compute", params).precision["paper"]
    cap: dryrun.Cap = (lambda n: min(n, 2)) if args.cpu else (lambda n: n)
    profile = "smoke" if args.cpu else "paper"  # the same builders and steps; small models in the check mode
    per_stage = 1 if args.cpu and args.per_stage is None else args.per_stage
    warmup, repeats = (1, 1) if args.cpu else (args.warmup, args.repeats)
    args.out.mkdir(parents=True, exist_ok=True)

    env = environment(device)
    tests = None
    if args.tests:
        tests = run_tests(args.out, args.tests_limit, shlex.split(args.pytest_args), device)
    deadline = time.monotonic() + args.budget
    ceiling = ceilings(device, quick=args.cpu)
    configure(precision)
    dry = None if args.cpu else json.loads(args.dryrun.read_text())  # check mode: counted per workload
    order = plan(stages, params, profile, cap, precision, per_stage)
    if args.graphs and args.cpu:
        parser.error("--graphs needs CUDA (CUDA graphs); the check mode runs on the CPU")
    stacked = stacked_timings(device, args.cpu, min(deadline, time.monotonic() + args.stacked_budget), warmup,
                              repeats, (1, 2) if args.cpu else tuple(args.stacked)) if args.stacked else []
    concurrent = concurrency_timings(
        args.concurrent_stage, params, profile, 2 if args.cpu else None, precision, device,
        (1, 2) if args.cpu else tuple(args.concurrent), 1.0 if args.cpu else args.concurrent_seconds,
        min(deadline, time.monotonic() + args.concurrent_budget)) if args.concurrent else None
    evaluations, evaluations_not_timed = measure_evaluations(
        evaluation_plan(stages, params, profile, cap, precision, dry), device,
        min(deadline, time.monotonic() + args.evaluations_budget), repeats, dry, precision)
    path = args.out / output_name(env, mode, datetime.date.today())
    compiled: list[dict[str, Any]] = []
    measured: list[dict[str, Any]] = []
    not_timed: list[dict[str, Any]] = []

    def write(stopped_before: str | None) -> dict[str, Any]:
        """The measurement so far to ``path``; ``stopped_before`` names the phase about to run (a process that
        dies there, e.g. in a capture that aborts, leaves everything measured before it on disk, saying so)."""
        result = {"schema": SCHEMA, "mode": mode, "profile": profile, "precision": precision,
                  "max_length": 2 if args.cpu else None, "environment": env, "tests": tests, "ceilings": ceiling,
                  "workloads": measured, "evaluations": evaluations, "compile": compiled, "stacked": stacked,
                  "concurrent": concurrent, "not_timed": not_timed + evaluations_not_timed, "budget_s": args.budget,
                  "elapsed_s": round(time.monotonic() - start, 1),
                  "path": str(path.relative_to(args.out.parent) if path.is_relative_to(args.out.parent) else path),
                  **({"stopped_before": stopped_before} if stopped_before else {})}
        path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
        return result

    if args.graphs:  # the language models' steps are captured as CUDA graphs among the workloads
        write("the workloads' steps")
    found, skipped = measure_workloads(order, device, deadline, warmup, repeats, dry, precision,
                                       ceiling[f"matmul_tflops_{precision}"], args.graphs, 1 if args.cpu else args.again)
    measured += found
    not_timed += skipped
    if args.compile:
        write("torch.compile's timings")
    compiled += compile_timings(order, args.compile, device, deadline, warmup, repeats)
    if stacked and args.graphed_stack_budget > 0:
        write("the stacks' steps as CUDA graphs")
        graphed_stack_timings(stacked, device, args.cpu, time.monotonic() + args.graphed_stack_budget, repeats)
    configure("fp32")
    print(render(write(None)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
