"""The GPU measurements in ``docs/gpu.md``, generated from the newest ``benchmarks/results/gpu-*.json``.

``benchmarks/gpu.py`` writes one JSON per run on a GPU (card, versions, the unit suite's outcome on CUDA, the card's
measured ceilings, a training step of each ``paper`` workload beside the dry run's prediction, and stacked
sentence-VAE trials against separate ones). ``paperlib index
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


def newest(root: str | Path) -> Path | None:
    """The newest GPU measurement under ``root/benchmarks/results`` (by the date in its name, then its card)."""
    found = [(m["date"], m["card"], path) for path in (Path(root) / RESULTS).glob("gpu-*.json")
             if (m := _NAME.match(path.name))]
    return max(found)[2] if found else None


def _number(value: Any, digits: str) -> str:
    return "–" if value is None else format(value, digits)


def render(result: dict[str, Any], source: str) -> str:
    """A short paragraph (card, versions, tests, ceilings) and one table row per workload timed."""
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
    if result.get("not_timed"):
        lines += ["", f"Not timed within the run's budget: {len(result['not_timed'])} workloads "
                      f"({', '.join(sorted({r['stage'] for r in result['not_timed']}))})."]
    return "\n".join(lines)


def block(root: str | Path) -> str:
    """The block: the newest measurement's table, or the sentence that there is none yet."""
    path = newest(root)
    if path is None:
        return ("No GPU measurement is committed yet: every GPU-hour here is the dry run's estimate. "
                "`bash benchmarks/gpu.sh` on a GPU machine writes one to `benchmarks/results/`.")
    return render(json.loads(path.read_text()), "../" + path.relative_to(root).as_posix())


def readme_with_measurements(readme: str, root: str | Path) -> str:
    """``readme`` (the text of :data:`PAGE`) with the text between :data:`START` and :data:`END` replaced by
    :func:`block`."""
    from paperlib.compendium.results_index.render import replace_between

    return replace_between(readme, START, END, lambda: block(root), "gpu-measurements", str(PAGE))


__all__ = ["END", "PAGE", "START", "block", "newest", "readme_with_measurements", "render"]
