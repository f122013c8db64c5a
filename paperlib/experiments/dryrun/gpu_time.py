"""GPU time from counted work: the model the dry run (:mod:`paperlib.experiments.dryrun.dryrun`) estimates with, its
constants (a datasheet's or fitted to a measurement), and the tables it prints.

A training step takes the larger of its compute-bound time, FLOPs / (MFU x peak at the precision), and its
launch-bound time, kernels x the time per kernel (:func:`estimate`). :data:`DATASHEET` holds an NVIDIA H100 SXM's
dense peaks with an assumed MFU and launch latency. :func:`calibrate` replaces the assumptions by what a GPU run of
``benchmarks/gpu.py`` measured: the card's own matmul peaks, and the MFU and the time per counted kernel that make
the model's step times closest to the measured ones (the smallest worst-case ratio over the timed workloads; the
kernels are the dry run's counts of ATen operators, so the fitted time per kernel also absorbs how many CUDA kernels
one operator launches). ``paperlib dryrun --calibration FILE`` estimates with those constants.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# The GPU of the estimate (NVIDIA H100 SXM5 datasheet, dense rates), the fraction of peak a well-fed training step
# reaches, and one eager kernel launch with PyTorch's dispatch overhead. Here rather than in params.yaml: they
# describe the estimate, not a setting of any stage.
GPU = "NVIDIA H100 SXM"
PEAK_FLOPS = {"fp32": 67e12, "tf32": 495e12, "bf16": 989e12}
MFU = 0.3
KERNEL_LATENCY_S = 5e-6


@dataclass(frozen=True)
class Constants:
    """What turns counts into time: the GPU, its dense peak per precision, the fraction of peak a step reaches and
    the time per counted kernel. :data:`DATASHEET` by default; :func:`calibrate` fits
    ``mfu`` and ``kernel_latency_s`` to a GPU measurement (``benchmarks/gpu.py``), with its measured peaks."""

    gpu: str
    peak_flops: dict
    mfu: float
    kernel_latency_s: float
    source: str = "datasheet"


DATASHEET = Constants(GPU, PEAK_FLOPS, MFU, KERNEL_LATENCY_S)


def estimate(flops_per_step: float, kernels_per_step: int, steps: int, precision: str,
             constants: Constants = DATASHEET) -> dict[str, Any]:
    """GPU hours of ``steps`` steps: the larger of compute-bound (FLOPs / (MFU x peak at ``precision``)) and
    launch-bound (kernels x latency) time, and which of the two it is."""
    if precision not in constants.peak_flops:
        raise ValueError(f"unknown precision {precision!r}; valid: {', '.join(constants.peak_flops)}")
    compute = steps * flops_per_step / (constants.mfu * constants.peak_flops[precision]) / 3600
    launch = steps * kernels_per_step * constants.kernel_latency_s / 3600
    return {"compute_bound_hours": compute, "launch_bound_hours": launch, "gpu_hours": max(compute, launch),
            "bound": "compute" if compute >= launch else "launch"}


def si_number(value: float) -> str:
    """``value`` with three significant digits and an SI suffix (k, M, G, T)."""
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}"


def render_tables(result: dict[str, Any]) -> str:
    """One plain-text table per stage: per training workload parameters, peak memory, FLOPs and kernels per step,
    steps x runs, the bound and the estimated GPU-hours; per evaluation its unit, kernels per unit, units x passes
    ("<=" where that work is a cap), FLOPs per pass, the bound and GPU-hours; the stage's and the grand total."""
    a = result["assumptions"]
    lines = [f"Estimated on one {a['gpu']} at {a['precision']} ({a['peak_tflops']:g} TFLOP/s dense, MFU {a['mfu']:g}) "
             f"or {a['kernel_latency_us']:g} us per kernel launch, whichever is slower; {a['counts']}; "
             f"settings of the {a.get('profile', 'paper')} profile."]
    if a.get("constants"):
        lines.append(f"Constants fitted to {a['constants']} ({a['kernel_latency_us']:.3g} us per counted kernel).")
    if a["max_length"] is not None:
        lines.append(f"QUICK CHECK: sequences cut to {a['max_length']} positions, not the paper's numbers.")
    header = f"{'workload':44s} {'batch':>8s} {'len':>4s} {'params':>7s} {'peak mem':>9s} {'FLOP/step':>9s} " \
             f"{'kernels':>8s} {'steps x runs':>15s} {'bound':>7s} {'GPU-h':>9s}"
    evaluation_header = f"{'evaluation':44s} {'unit':>22s} {'kernels':>8s} {'units x passes':>18s} " \
                        f"{'FLOP/pass':>9s} {'bound':>7s} {'GPU-h':>9s}"
    for stage, entry in result["stages"].items():
        evaluations = entry.get("evaluations", {})
        split = f" ({entry['training_hours']:,.1f} training, {entry['evaluation_hours']:,.1f} evaluation)" \
            if evaluations else ""
        lines += ["", f"{stage}: {entry['gpu_hours']:,.1f} GPU-hours{split}, peak memory "
                      f"{entry['peak_memory_bytes'] / 2**30:.2f} GiB", header]
        for name, w in entry["workloads"].items():
            lines.append(f"{name[:44]:44s} {w['batch']:>8s} {w['length']:>4d} {si_number(w['parameters']):>7s} "
                         f"{w['peak_memory_bytes'] / 2**30:>5.2f} GiB {si_number(w['flops_per_step']):>9s} "
                         f"{w['kernels_per_step']:>8,d} {w['steps_per_run']:>7,d} x {w['runs']:<5d} "
                         f"{w['bound']:>7s} {w['gpu_hours']:>9,.2f}")
        if evaluations:
            lines.append(evaluation_header)
        for name, e in evaluations.items():
            work = f"{'<=' if e['at_most'] else ''}{e['units_per_pass']:,d}"
            lines.append(f"{name[:44]:44s} {e['unit']:>22s} {e['kernels_per_unit']:>8,d} "
                         f"{work:>9s} x {e['passes']:<6,d} {si_number(e['flops_per_pass']):>9s} "
                         f"{e['bound']:>7s} {e['gpu_hours']:>9,.2f}")
    total = sum(entry["gpu_hours"] for entry in result["stages"].values())
    return "\n".join(lines + ["", f"total: {total:,.1f} GPU-hours"]) + "\n"


def _model_step(row: dict[str, Any], peak: float, mfu: float, latency: float) -> float:
    return max(row["flops_per_step"] / (mfu * peak), row["predicted_kernels"] * latency)


def calibrate(measurement: dict[str, Any], source: str = "measurement",
              counts: dict[str, Any] | None = None) -> tuple[Constants, dict[str, Any]]:
    """Constants fitted to a ``benchmarks/gpu.py`` measurement, and how well they fit.

    Peaks: the card's measured matmul rates. MFU and time per kernel: on a log grid (MFU 0.01-1, 0.1 us-1 ms), the
    pair that minimises the largest ratio, either way, between the model's step time (with the dry run's FLOPs and
    kernel counts for each workload) and the measured one, over every timed workload with a dry-run prediction and
    every timed evaluation pass (its time per unit, at the precision evaluation runs at). The counts are those the
    measurement recorded, or, with ``counts`` (a dry run of the measured profile, :func:`~.dryrun.dry_run`), the dry
    run's current ones for every workload it has by the same stage and name: a dry run that counts better then fits
    better without measuring again.
    Returns (constants, {"workloads", "max_ratio", "ratios", "training_max_ratio", "evaluation_max_ratio"}):
    ``max_ratio`` is the agreement to quote (<= 1.5 is the goal); the last two are its parts over the training steps
    and over the evaluation passes (None without any).
    """
    precision = measurement["precision"]
    current = {(stage, name): w for stage, entry in (counts or {}).get("stages", {}).items()
               for name, w in entry["workloads"].items()}
    rows = [{**r, **({"flops_per_step": current[key]["flops_per_step"],
                      "predicted_kernels": current[key]["kernels_per_step"]}
                     if (key := (r.get("stage"), r.get("workload"))) in current else {})}
            for r in measurement["workloads"]]
    rows = [r for r in rows if r.get("status") == "timed" and r.get("flops_per_step") and r.get("predicted_kernels")]
    rows += [{"stage": r["stage"], "workload": r["workload"], "flops_per_step": r["flops_per_unit"],
              "predicted_kernels": r["kernels_per_unit"], "step_s": r["unit_s"], "precision": r["precision"],
              "evaluation": True}
             for r in measurement.get("evaluations", [])
             if r.get("status") == "timed" and r.get("unit_s") and r.get("flops_per_unit") and r.get("kernels_per_unit")]
    if not rows:
        raise ValueError(f"{source}: no timed workload with a dry-run prediction to calibrate on")
    ceilings = measurement["ceilings"]
    peaks = {p: ceilings[f"matmul_tflops_{p}"] * 1e12 for p in ("fp32", "tf32", "bf16")}

    def modelled(r: dict[str, Any], mfu: float, latency: float) -> float:
        return _model_step(r, peaks[r.get("precision", precision)], mfu, latency)

    best: tuple[float, float, float] | None = None
    for i in range(101):  # MFU 10^-2 .. 10^0
        mfu = 10 ** (-2 + 2 * i / 100)
        for j in range(201):  # latency 10^-7 .. 10^-3 s
            latency = 10 ** (-7 + 4 * j / 200)
            worst = max(abs(math.log(modelled(r, mfu, latency) / r["step_s"])) for r in rows)
            if best is None or worst < best[0]:
                best = (worst, mfu, latency)
    worst, mfu, latency = best
    constants = Constants(measurement["environment"]["card"], peaks, mfu, latency, source)
    ratios = {f"{r['stage']}:{r['workload']}": round(modelled(r, mfu, latency) / r["step_s"], 3) for r in rows}

    def agreement(part: list[dict[str, Any]]) -> float | None:
        logs = [abs(math.log(modelled(r, mfu, latency) / r["step_s"])) for r in part]
        return round(math.exp(max(logs)), 3) if logs else None

    return constants, {"workloads": len(rows), "max_ratio": round(math.exp(worst), 3), "ratios": ratios,
                       "training_max_ratio": agreement([r for r in rows if not r.get("evaluation")]),
                       "evaluation_max_ratio": agreement([r for r in rows if r.get("evaluation")])}


def reestimate(result: dict[str, Any], constants: Constants, evaluation_precision: str) -> dict[str, Any]:
    """Each stage's GPU-hours of a dry run ``result`` (:func:`~.dryrun.dry_run`) with other ``constants``, from its
    counts (FLOPs and kernels per step or pass, steps, passes; evaluation at ``evaluation_precision``):
    ``{stage: {"training_hours", "evaluation_hours", "gpu_hours"}}``, as the dry run with those constants would
    give them."""
    precision = result["assumptions"]["precision"]
    stages = {}
    for stage, entry in result["stages"].items():
        training = sum(estimate(w["flops_per_step"], w["kernels_per_step"], w["steps_per_run"] * w["runs"], precision,
                                constants)["gpu_hours"] for w in entry["workloads"].values())
        evaluating = sum(estimate(e["flops_per_pass"], e["kernels_per_pass"], e["passes"], evaluation_precision,
                                  constants)["gpu_hours"] for e in entry["evaluations"].values())
        stages[stage] = {"training_hours": training, "evaluation_hours": evaluating,
                         "gpu_hours": training + evaluating}
    return stages


__all__ = ["DATASHEET", "GPU", "KERNEL_LATENCY_S", "MFU", "PEAK_FLOPS", "Constants", "calibrate", "estimate",
           "reestimate", "render_tables", "si_number"]
