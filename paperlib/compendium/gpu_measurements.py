"""The GPU measurements in ``docs/gpu.md``, generated from the newest ``benchmarks/results/gpu-*.json``.

Also the dry run's estimate per stage (``results/dryrun.json``) between :data:`ESTIMATE_START` and
:data:`ESTIMATE_END`. ``benchmarks/gpu.py`` writes one JSON per run on a GPU (card, versions, the unit suite's outcome on CUDA, the card's
measured ceilings, a training step of each ``paper`` workload beside the dry run's prediction, an evaluation pass
per stage, stacked sentence-VAE trials against separate ones, and one workload trained by several processes at
once). ``paperlib index
--readme`` puts the newest one into :data:`PAGE` between :data:`START` and :data:`END`, so that every GPU number the
documentation states was measured, and the dry run's estimates stay beside them; with none committed the block says
so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

START = "<!-- gpu-measurements:start (written by `paperlib index --readme` from benchmarks/results/; do not edit) -->"
END = "<!-- gpu-measurements:end -->"
RESULTS = Path("benchmarks") / "results"
PAGE = Path("docs") / "gpu.md"
_NAME = re.compile(r"^gpu-(?P<card>.+)-(?P<date>\d{4}-\d{2}-\d{2})\.json$")


def _measurements(root: str | Path) -> list[tuple[str, str, Path]]:
    """(date, card, path) of every GPU measurement under ``root/benchmarks/results``, by the names."""
    return [(m["date"], m["card"], path) for path in (Path(root) / RESULTS).glob("gpu-*.json")
            if (m := _NAME.match(path.name))]


def newest(root: str | Path) -> Path | None:
    """The newest GPU measurement under ``root/benchmarks/results`` (by the date in its name, then its card)."""
    found = _measurements(root)
    return max(found)[2] if found else None


def _number(value: Any, digits: str) -> str:
    return "–" if value is None else format(value, digits)


def render(result: dict[str, Any], source: str) -> str:
    """A short paragraph (card, versions, tests, ceilings), one table row per workload timed, and the evaluation
    passes, stacked trials and concurrent processes where the measurement has them."""
    env, ceil, tests = result["environment"], result["ceilings"], result.get("tests") or {}
    lines = [f"Measured by `benchmarks/gpu.sh` on one {env['card']} (driver {env.get('driver')}, torch {env['torch']}, "
             f"CUDA {env['cuda']}), `{result['profile']}` workloads at {result['precision']}, in [`{source}`]({source}). "
             f"Ceilings measured there: matmul {ceil['matmul_tflops_fp32']:g} (fp32) / {ceil['matmul_tflops_tf32']:g} "
             f"(tf32) / {ceil['matmul_tflops_bf16']:g} (bf16) TFLOP/s, copy {ceil['copy_gbps']:g} GB/s."]
    if tests:
        lines[0] += (f" Unit suite on CUDA: {tests.get('passed', '?')} passed, {tests.get('failed', '?')} failed, "
                     f"{tests.get('errors', '?')} errors, {tests.get('skipped', '?')} skipped.")
    lines += ["", "| stage | workload | batch × length | step (ms) | dry run (ms) | measured / dry run | tokens/s | "
                  "MFU | kernels / step (dry run) | vs nn.LSTM | peak GiB |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["workloads"]:
        if row["status"] != "timed":
            lines.append(f"| {row['stage']} | {row['workload']} | {row['batch']} × {row['length']} | "
                         f"{row['status']} | | | | | | | |")
            continue
        predicted = row.get("predicted_step_s")
        lines.append(
            f"| {row['stage']} | {row['workload']} | {row['batch']} × {row['length']} | {row['step_s'] * 1e3:.2f} | "
            f"{_number(predicted and predicted * 1e3, '.2f')} | {_number(row.get('measured_over_predicted'), '.2f')} | "
            f"{row['tokens_per_s']:,.0f} | {_number(row.get('mfu'), '.3f')} | {row['kernels_per_step']:,} "
            f"({_number(row.get('predicted_kernels'), ',')}) | {_number(row.get('over_reference'), '.2f')} | "
            f"{_number(row.get('peak_memory_gib'), '.2f')} |")
    passes = result.get("evaluations", [])
    if passes:
        lines += ["", "Evaluation passes (per stage, the one that weighs most in the dry run), time per unit beside the "
                      "dry run's:", "", "| stage | evaluation | unit | per unit (ms) | dry run (ms) | measured / dry run | "
                      "kernels / unit (dry run) |", "|---|---|---|---|---|---|---|"]
        for row in passes:
            lines.append(f"| {row['stage']} | {row['workload']} | {row['unit']} | " + (
                f"{row['unit_s'] * 1e3:.3f} | {row['predicted_unit_s'] * 1e3:.3f} | "
                f"{_number(row.get('measured_over_predicted'), '.2f')} | {row['kernels_per_unit']:,} |"
                if row["status"] == "timed" else f"{row['status']} | | | |"))
    stacked = [row for row in result.get("stacked", []) if row["status"] == "timed"]
    if stacked:
        lines += ["", "Trials of a PTB sentence-VAE curve trained as one stacked model (hidden × vocabulary × batch × "
                      "samples), one step against as many separate steps:", "",
                  "| curve | shape | separate step (ms) | trials stacked | stacked step (ms) | speed-up | peak GiB |",
                  "|---|---|---|---|---|---|---|"]
        for row in stacked:
            shape = f"{row['hidden']} × {row['vocab']:,} × {row['batch']} × {row['samples']}"
            for stack in row["stacks"]:
                timed = stack["status"] == "timed"
                lines.append(f"| {row['curve']} | {shape} | {row['separate_step_s'] * 1e3:.2f} | {stack['trials']} | "
                             + (f"{stack['step_s'] * 1e3:.2f} | {_number(stack['speedup'], '.2f')}× | "
                                f"{_number(stack.get('peak_memory_gib'), '.2f')} |" if timed
                                else f"{stack['status']} | | |"))
    concurrent = result.get("concurrent") or {}
    if any(row["status"] == "timed" for row in concurrent.get("rows", [])):
        lines += ["", f"Processes training {concurrent['stage']}'s first workload at once on the one card (each for "
                      f"{concurrent['seconds']:g} s), total steps/s against one process's:", "",
                  "| processes | steps/s | speed-up |", "|---|---|---|"]
        for row in concurrent["rows"]:
            lines.append(f"| {row['processes']} | " + (f"{row['steps_per_s']:.2f} | {_number(row.get('speedup'), '.2f')}× |"
                                                     if row["status"] == "timed" else f"{row['status']} | |"))
    if result.get("not_timed"):
        lines += ["", f"Not timed within the run's budget: {len(result['not_timed'])} workloads "
                      f"({', '.join(sorted({r['stage'] for r in result['not_timed']}))})."]
    return "\n".join(lines)


def earlier(root: str | Path, path: Path, precision: str | None) -> tuple[Path, dict[str, Any]] | None:
    """The newest measurement of the same card at ``precision`` (that of ``path``) made before ``path`` (by the date
    in the names), with its contents, if any."""
    mine = _NAME.match(path.name)
    for date, card, other in sorted(_measurements(root), reverse=True):
        if card == mine["card"] and date < mine["date"]:
            result = json.loads(other.read_text())
            if result.get("precision") == precision:
                return other, result
    return None


def repeatability(newer: dict[str, Any], older: dict[str, Any]) -> dict[str, Any]:
    """How far the step times of the workloads timed in both measurements moved: their ``count``, the largest
    relative change (``largest``, newer / older - 1, signed) and which workload it was (``worst``)."""
    def timed(result: dict[str, Any]) -> dict[tuple, float]:
        return {(r["stage"], r["workload"], str(r["batch"]), r["length"]): r["step_s"] for r in result["workloads"]
                if r["status"] == "timed" and r.get("step_s")}

    old, new = timed(older), timed(newer)
    changes = {key: new[key] / old[key] - 1 for key in sorted(set(old) & set(new))}
    if not changes:
        return {"count": 0, "largest": None, "worst": None}
    worst = max(changes, key=lambda key: abs(changes[key]))
    return {"count": len(changes), "largest": changes[worst], "worst": f"{worst[0]} {worst[1]}"}


def block(root: str | Path) -> str:
    """The block: the newest measurement's table, or the sentence that there is none yet; when the same card was
    measured before, how far the step times moved since (the timings should repeat within 10%)."""
    path = newest(root)
    if path is None:
        return ("No GPU measurement is committed yet: every GPU-hour here is the dry run's estimate. "
                "`bash benchmarks/gpu.sh` on a GPU machine writes one to `benchmarks/results/`.")
    result = json.loads(path.read_text())
    text = render(result, "../" + path.relative_to(root).as_posix())
    before = earlier(root, path, result.get("precision"))
    if before is not None:
        moved = repeatability(result, before[1])
        text += (f"\n\nAgainst the earlier measurement of this card at {result.get('precision')} (`{before[0].name}`): "
                 + ("no workload was timed in both." if not moved["count"] else
                    f"{moved['count']} workloads timed in both, step times within {abs(moved['largest']):.1%} "
                    f"(largest change {moved['largest']:+.1%}, {moved['worst']}); "
                    + ("they repeat within 10%." if abs(moved["largest"]) <= 0.10 else "not within 10%.")))
    return text


DRYRUN = Path("results") / "dryrun.json"
ESTIMATE_START = "<!-- dryrun-estimate:start (written by `paperlib index --readme` from results/dryrun.json; do not edit) -->"
ESTIMATE_END = "<!-- dryrun-estimate:end -->"
DRYRUN_GPU = Path("results") / "dryrun_gpu.json"
GPU_ESTIMATE_START = ("<!-- dryrun-gpu-estimate:start (written by `paperlib index --readme` from results/dryrun_gpu.json; "
                      "do not edit) -->")
GPU_ESTIMATE_END = "<!-- dryrun-gpu-estimate:end -->"


def render_estimate(result: dict[str, Any]) -> str:
    """The dry run's table per stage (models, parameters per model, peak memory, the largest step's FLOPs and
    kernels, optimizer steps (a stacked step counts once), what bounds training, GPU-hours of training, of evaluation
    and both) with the totals and the largest peak memory. A stage without counted evaluation shows "not counted"."""
    from paperlib.experiments.dryrun.gpu_time import si_number as _si

    lines = ["| stage | models | parameters | peak memory | FLOPs / step (largest) | kernels / step (largest) | "
             "optimizer steps | bound | training GPU-hours | evaluation GPU-hours | GPU-hours |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for stage, entry in result["stages"].items():
        rows = list(entry["workloads"].values())
        sizes = [_si(min(r["parameters"] for r in rows)), _si(max(r["parameters"] for r in rows))]
        params = sizes[0] if sizes[0] == sizes[1] else "–".join(sizes)
        peak = entry["peak_memory_bytes"] / 2**30
        steps = sum(r["steps_per_run"] * r["runs"] for r in rows)
        evaluation = f"{entry['evaluation_hours']:,.1f}" if entry["evaluations"] else "not counted"
        lines.append(f"| {stage} | {len(rows)} | {params} | {peak:.{1 if peak >= 1 else 2}f} GiB | "
                     f"{_si(max(r['flops_per_step'] for r in rows))} | {max(r['kernels_per_step'] for r in rows):,} | "
                     f"{steps / 1e6:.3g}M | {', '.join(sorted({r['bound'] for r in rows}))} | "
                     f"{entry['training_hours']:,.1f} | {evaluation} | {entry['gpu_hours']:,.1f} |")
    totals = [sum(entry[k] for entry in result["stages"].values())
              for k in ("training_hours", "evaluation_hours", "gpu_hours")]
    digits = 1 if totals[2] < 100 else 0
    lines.append("| **total** | | | | | | | | " + " | ".join(f"**{t:,.{digits}f}**" for t in totals) + " |")
    stage, entry = max(result["stages"].items(), key=lambda item: item[1]["peak_memory_bytes"])
    lines += ["", f"The largest step needs {entry['peak_memory_bytes'] / 2**30:.1f} GiB ({stage})."]
    return "\n".join(lines)


def readme_with_measurements(readme: str, root: str | Path) -> str:
    """``readme`` (the text of :data:`PAGE`) with the text between :data:`START` and :data:`END` replaced by
    :func:`block`, that between :data:`ESTIMATE_START` and :data:`ESTIMATE_END` by the dry run's table of the
    ``paper`` profile (:func:`render_estimate` of ``results/dryrun.json``) and that between
    :data:`GPU_ESTIMATE_START` and :data:`GPU_ESTIMATE_END` by the ``gpu`` profile's (``results/dryrun_gpu.json``)."""
    from paperlib.compendium.results_index.render import replace_between

    text = replace_between(readme, START, END, lambda: block(root), "gpu-measurements", str(PAGE))
    text = replace_between(text, ESTIMATE_START, ESTIMATE_END,
                           lambda: render_estimate(json.loads((Path(root) / DRYRUN).read_text())),
                           "dryrun-estimate", str(PAGE))
    return replace_between(text, GPU_ESTIMATE_START, GPU_ESTIMATE_END,
                           lambda: render_estimate(json.loads((Path(root) / DRYRUN_GPU).read_text())),
                           "dryrun-gpu-estimate", str(PAGE))


__all__ = ["DRYRUN", "DRYRUN_GPU", "END", "ESTIMATE_END", "ESTIMATE_START", "GPU_ESTIMATE_END", "GPU_ESTIMATE_START",
           "PAGE", "START", "block", "earlier", "newest", "readme_with_measurements", "render", "render_estimate",
           "repeatability"]
