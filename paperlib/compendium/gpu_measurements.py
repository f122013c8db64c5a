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
_PROGRESS = re.compile(r"^([.sxXFE]+) *\[ *\d+%\]", re.M)  # pytest -q's progress lines
_PERCENT = re.compile(r"\[ *(\d+)%\]")
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
        lines[0] += " " + _tests_sentence(tests)
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
    lines += ["", "The dry-run columns hold its predictions when the card was measured; the estimate tables above use "
                  "its current counts."]
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


def _tests_sentence(tests: dict[str, Any]) -> str:
    """The unit suite's outcome on the device: its counts, or, for a run cut off at its time limit, that it was and
    the failures logged before then; the failing tests by name either way."""
    failing = tests.get("failing") or []
    named = f" Failing: {', '.join(f'`{t}`' for t in failing)}." if failing else ""
    mirror = tests.get("mirror", "given")  # measurements made before the script recorded it: not said
    if mirror is None:
        named += " The tests that need corpora skipped (no data mirror there)."
    elif isinstance(mirror, list):
        named += f" The tests that need corpora read {', '.join(mirror)} (carried as `data/raw/`)."
    if tests.get("exit") == "timed out":
        if "failures" in tests:
            by_then = (f"; {len(failing)} test{'' if len(failing) == 1 else 's'} had failed by then." if failing
                       else "; no test had failed by then.")
        else:  # a measurement made before failures were logged as they happen: pytest's progress marks
            marks = "".join(m.group(1) for m in _PROGRESS.finditer(str(tests.get("tail", "")).replace("\\n", "\n")))
            percent = max((int(p) for p in _PERCENT.findall(str(tests.get("tail", "")))), default=None)
            by_then = (f" ({percent}% of the tests had run: {marks.count('F')} failed, {marks.count('E')} errors, by "
                       "pytest's progress marks; which ones failed was not recorded)." if percent is not None else
                       " (which tests failed was not recorded).")
        limit = tests.get("limit_s", tests.get("seconds", "?"))
        return f"Unit suite on CUDA: cut off at its {limit:g} s limit before the end{by_then}{named}" \
            if isinstance(limit, (int, float)) else f"Unit suite on CUDA: cut off before the end{by_then}{named}"
    return (f"Unit suite on CUDA: {tests.get('passed', '?')} passed, {tests.get('failed', '?')} failed, "
            f"{tests.get('errors', '?')} errors, {tests.get('skipped', '?')} skipped.{named}")


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
SAME_WORK_NOTED = 1.1  # steps of the same work further apart than this in one run are named beside the fit
GOAL = 1.5  # the agreement between the calibrated time model and every measured step that the estimates aim at
ESTIMATE_START = "<!-- dryrun-estimate:start (written by `paperlib index --readme` from results/dryrun.json; do not edit) -->"
ESTIMATE_END = "<!-- dryrun-estimate:end -->"
DRYRUN_GPU = Path("results") / "dryrun_gpu.json"
GPU_ESTIMATE_START = ("<!-- dryrun-gpu-estimate:start (written by `paperlib index --readme` from results/dryrun_gpu.json; "
                      "do not edit) -->")
GPU_ESTIMATE_END = "<!-- dryrun-gpu-estimate:end -->"


def fitting_counts(path: Path, measurement: dict[str, Any]) -> dict[str, Any] | None:
    """The dry run at ``path`` (``results/dryrun.json``) when its counts can stand for ``measurement``'s workloads:
    the same profile, every sequence at full length; None otherwise (or without the file), and the measurement's own
    recorded counts are fitted on."""
    if not path.is_file():
        return None
    counts = json.loads(path.read_text())
    made = counts["assumptions"]
    return counts if made.get("profile") == measurement.get("profile") and made.get("max_length") is None else None


def recalibrated(result: dict[str, Any], measurement: dict[str, Any], source: str,
                 counts: dict[str, Any] | None = None) -> dict[str, Any]:
    """The dry run ``result`` estimated again with constants fitted to a GPU ``measurement``
    (:func:`paperlib.experiments.dryrun.gpu_time.calibrate`, on the measured workloads' current counts in ``counts``,
    the dry run of the measured profile, where given): the same counts (FLOPs and kernels per step or pass, steps
    and passes), the card's measured peaks, and the MFU and time per counted kernel that bring the time model closest
    to every step and pass measured. Returns ``{"card", "source", "mfu", "kernel_latency_us", "fit" (calibrate's
    agreement), "kernels" ({"stage workload": (launched, counted)} per measured step), "bounds" (what bounds each
    measured step by the counts), "stages": {stage:
    {"training_hours", "evaluation_hours", "gpu_hours"}}}``."""
    from paperlib.experiments.dryrun.evaluation import evaluation_precision
    from paperlib.experiments.dryrun.gpu_time import calibrate, reestimate

    constants, fit = calibrate(measurement, source, counts)
    current = {(stage, name): w for stage, entry in (counts or {}).get("stages", {}).items()
               for name, w in entry["workloads"].items()}
    kernels, bounds = {}, {}
    for r in measurement["workloads"]:
        if r.get("status") != "timed" or not r.get("kernels_per_step"):
            continue
        key, now = f"{r['stage']} {r['workload']}", current.get((r["stage"], r["workload"]), {})
        bounds[key] = now.get("bound", r.get("predicted_bound"))
        if now or r.get("predicted_kernels"):
            kernels[key] = (r["kernels_per_step"], now.get("kernels_per_step", r.get("predicted_kernels")))
    return {"card": constants.gpu, "source": source, "mfu": constants.mfu,
            "kernel_latency_us": constants.kernel_latency_s * 1e6, "fit": fit, "kernels": kernels, "bounds": bounds,
            "stages": reestimate(result, constants, evaluation_precision(result["assumptions"]["precision"]))}


def replayed(result: dict[str, Any], measurement: dict[str, Any], source: str, calibrated: dict[str, Any],
             counts: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The dry run ``result`` estimated with every training step of some stages replayed as one CUDA graph: the
    stages of which ``measurement`` also timed a step that way (``graph_step_s``, ``benchmarks/gpu.py --graphs``:
    the first workload of each language-model stage). Their training is priced at the two constants of the time
    model fitted to those replays (:func:`~paperlib.experiments.dryrun.gpu_time.calibrate` on the dry run's
    current ``counts`` where given; the "MFU" there is a fitted rate, not a measured efficiency: a graph changes
    no arithmetic); their evaluation and every other stage stay as in ``calibrated`` (:func:`recalibrated`).
    Returns ``{"mfu", "kernel_latency_us", "fit", "graphed" (the stages), "stages": {stage: {"training_hours",
    "evaluation_hours", "gpu_hours"}}}``, or None when the measurement replayed nothing."""
    from paperlib.experiments.dryrun.evaluation import evaluation_precision
    from paperlib.experiments.dryrun.gpu_time import calibrate, reestimate

    rows = [{**r, "step_s": r["graph_step_s"]} for r in measurement["workloads"]
            if r.get("status") == "timed" and r.get("graph_step_s")]
    graphed = sorted({r["stage"] for r in rows} & set(result["stages"]))
    if not graphed:
        return None
    constants, fit = calibrate({**measurement, "workloads": rows, "evaluations": []}, source, counts)
    training = reestimate(result, constants, evaluation_precision(result["assumptions"]["precision"]))
    stages = {}
    for stage, hours in calibrated["stages"].items():
        if stage in graphed:
            hours = {**hours, "training_hours": training[stage]["training_hours"],
                     "gpu_hours": training[stage]["training_hours"] + hours["evaluation_hours"]}
        stages[stage] = dict(hours)
    return {"mfu": constants.mfu, "kernel_latency_us": constants.kernel_latency_s * 1e6, "fit": fit,
            "graphed": graphed, "stages": stages}


def _replayed_sentence(replay: dict[str, Any], calibrated: dict[str, Any]) -> str:
    fit = replay["fit"]
    before = sum(calibrated["stages"][s]["gpu_hours"] for s in replay["graphed"])
    after = sum(replay["stages"][s]["gpu_hours"] for s in replay["graphed"])
    return (f" The column after it assumes that every training step of {', '.join(replay['graphed'])} is replayed "
            "as one CUDA graph, as `benchmarks/gpu.py --graphs` replayed the first step of each on the card "
            "(`paperlib.graphed_train.GraphedTrainer` trains that way; it has not been timed on a card yet): "
            f"their training at the time model's two constants fitted to those {fit['workloads']} replays (within "
            f"{fit['max_ratio']:.3g}× of each; {replay['kernel_latency_us']:.3g} µs per counted kernel and a fitted "
            f"rate of {replay['mfu']:.3g} of the peak, a parameter of the model since a graph changes no "
            f"arithmetic), their evaluation and every other stage as before: "
            f"{before:,.{1 if before < 100 else 0}f} → {after:,.{1 if before < 100 else 0}f} GPU-hours for those "
            "stages. An estimate for a lever the stages do not use yet.")


def same_work_spread(measurement: dict[str, Any], tolerance: float = 0.01) -> dict[str, Any] | None:
    """How far apart the measurement timed steps that its counts cannot tell apart: among the timed training steps
    of one workload timed twice (``step_s_again``: the run's repeatability), or with kernels launched and FLOPs
    counted equal within ``tolerance`` (such as one model shape trained by several stages), the two step times
    farthest apart. A time model of those counts gives both one time, so it comes no closer than the square root of
    their ratio to both: a floor under its fit.
    Returns ``{"ratio", "floor", "fast": (name, seconds), "slow": (name, seconds), "steps"}`` (``steps``: how many
    timed steps share their work with another or were timed twice), or None when no two timings did the same
    work."""
    rows = [r for r in measurement.get("workloads", []) if r.get("status") == "timed" and r.get("step_s")
            and r.get("kernels_per_step") and r.get("flops_per_step")]

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= tolerance * max(a, b)

    def name(r: dict[str, Any]) -> str:
        return f"{r['stage']} {r['workload']}"

    pairs = [((name(r), r["step_s"]), (name(r), r["step_s_again"]), id(r), id(r)) for r in rows if r.get("step_s_again")]
    pairs += [((name(a), a["step_s"]), (name(b), b["step_s"]), id(a), id(b)) for i, a in enumerate(rows)
              for b in rows[i + 1:]
              if close(a["kernels_per_step"], b["kernels_per_step"]) and close(a["flops_per_step"], b["flops_per_step"])]
    if not pairs:
        return None
    fast, slow = max((sorted(p[:2], key=lambda t: t[1]) for p in pairs), key=lambda p: p[1][1] / p[0][1])
    ratio = slow[1] / fast[1]
    return {"ratio": ratio, "floor": ratio ** 0.5, "steps": len({i for p in pairs for i in p[2:]}),
            "fast": fast, "slow": slow}


def _fit_sentence(calibrated: dict[str, Any], measurement: dict[str, Any]) -> str:
    """How the calibrated column was made and how well its model fits the measured steps, with what the misses come
    from: the spread of the measured time per launched kernel over the launch-bound steps, and the measured steps
    whose kernels the dry run counts farthest from what the card launched."""
    fit = calibrated["fit"]
    bounds = calibrated.get("bounds", {})  # by the current counts where there are any
    launch = [r for r in measurement["workloads"] if r.get("status") == "timed" and r.get("kernels_per_step")
              and bounds.get(f"{r['stage']} {r['workload']}", r.get("predicted_bound")) == "launch"]
    text = (f"The calibrated column estimates the same counts on the {calibrated['card']} measured below "
            f"([`{calibrated['source']}`]({calibrated['source']})): its measured matmul peaks, with the MFU "
            f"({calibrated['mfu']:.3g}) and the time per counted kernel ({calibrated['kernel_latency_us']:.3g} µs) "
            f"that bring the model closest to all {fit['workloads']} steps and evaluation passes timed there "
            f"(`paperlib dryrun --calibration`), for eager steps, as every stage trains today. The model comes within "
            f"{fit['max_ratio']:.3g}× of every one of them ({_parts(fit)}; the goal is {GOAL:g}×)")
    if len(launch) > 1 and fit["max_ratio"] > GOAL:
        per_kernel = {f"{r['stage']} {r['workload']}": r["step_s"] / r["kernels_per_step"] * 1e6 for r in launch}
        low, high = min(per_kernel, key=per_kernel.get), max(per_kernel, key=per_kernel.get)
        counted = calibrated.get("kernels") or {}
        off = {k: max(a / b, b / a) for k, (a, b) in counted.items()}
        worst = max(off, key=off.get) if off else None
        text += (f": one time per kernel cannot fit them all, since a launch-bound step measured "
                 f"{per_kernel[low]:.3g} µs per launched kernel ({low}) to {per_kernel[high]:.3g} µs ({high})"
                 + (f", and the dry run's kernel counts are off by up to {off[worst]:.3g}× ({worst}: "
                    f"{counted[worst][0]:,} launched, {counted[worst][1]:,} counted)." if worst and off[worst] > GOAL
                    else "."))
        spread = same_work_spread(measurement)
        if spread and spread["ratio"] > SAME_WORK_NOTED:
            (fast, fast_s), (slow, slow_s) = spread["fast"], spread["slow"]
            if fast == slow:
                text += (f" One step timed twice in the same run ({fast}) took {fast_s * 1e3:.3g} and "
                         f"{slow_s * 1e3:.3g} ms, {spread['ratio']:.3g}× apart: no model of the counts comes closer "
                         f"than {spread['floor']:.3g}× to both.")
            else:
                text += (f" Steps the counts cannot tell apart (the same kernels launched, the same FLOPs) took "
                         f"{fast_s * 1e3:.3g} ms ({fast}) and {slow_s * 1e3:.3g} ms ({slow}) in one run, "
                         f"{spread['ratio']:.3g}× apart: no model of these counts comes closer than "
                         f"{spread['floor']:.3g}× to both.")
    else:
        text += "."
    return text


def _parts(fit: dict[str, Any]) -> str:
    parts = [f"{name} {fit[key]:.3g}×" for name, key in (("training steps", "training_max_ratio"),
                                                        ("evaluation passes", "evaluation_max_ratio"))
             if fit.get(key) is not None]
    return ", ".join(parts)


def render_estimate(result: dict[str, Any], calibrated: dict[str, Any] | None = None,
                    measurement: dict[str, Any] | None = None, replay: dict[str, Any] | None = None) -> str:
    """The dry run's table per stage (models, parameters per model, peak memory, the largest step's FLOPs and
    kernels, optimizer steps (a stacked step counts once), what bounds training, GPU-hours of training, of evaluation
    and both) with the totals and the largest peak memory. A stage without counted evaluation shows "not counted".
    With ``calibrated`` (:func:`recalibrated`, from ``measurement``) a column gives each stage's GPU-hours on the
    measured card, and a paragraph says how they were fitted and how well; with ``replay`` (:func:`replayed`) one
    more gives them with the language-model stages' training steps replayed as CUDA graphs."""
    from paperlib.experiments.dryrun.gpu_time import si_number as _si

    replay = replay if calibrated else None
    card = f" | GPU-hours on the {calibrated['card']}, calibrated" if calibrated else ""
    card += f" | GPU-hours on the {calibrated['card']}, language-model training steps as CUDA graphs (estimate)" \
        if replay else ""
    lines = ["| stage | models | parameters | peak memory | FLOPs / step (largest) | kernels / step (largest) | "
             f"optimizer steps | bound | training GPU-hours | evaluation GPU-hours | GPU-hours{card} |",
             "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if calibrated else "")
             + ("---|" if replay else "")]
    for stage, entry in result["stages"].items():
        rows = list(entry["workloads"].values())
        sizes = [_si(min(r["parameters"] for r in rows)), _si(max(r["parameters"] for r in rows))]
        params = sizes[0] if sizes[0] == sizes[1] else "–".join(sizes)
        peak = entry["peak_memory_bytes"] / 2**30
        steps = sum(r["steps_per_run"] * r["runs"] for r in rows)
        evaluation = f"{entry['evaluation_hours']:,.1f}" if entry["evaluations"] else "not counted"
        extra = f" {calibrated['stages'][stage]['gpu_hours']:,.1f} |" if calibrated else ""
        extra += f" {replay['stages'][stage]['gpu_hours']:,.1f} |" if replay else ""
        lines.append(f"| {stage} | {len(rows)} | {params} | {peak:.{1 if peak >= 1 else 2}f} GiB | "
                     f"{_si(max(r['flops_per_step'] for r in rows))} | {max(r['kernels_per_step'] for r in rows):,} | "
                     f"{steps / 1e6:.3g}M | {', '.join(sorted({r['bound'] for r in rows}))} | "
                     f"{entry['training_hours']:,.1f} | {evaluation} | {entry['gpu_hours']:,.1f} |{extra}")
    totals = [sum(entry[k] for entry in result["stages"].values())
              for k in ("training_hours", "evaluation_hours", "gpu_hours")]
    digits = 1 if totals[2] < 100 else 0
    cells = [f"**{t:,.{digits}f}**" for t in totals]
    for column in (calibrated, replay):
        if column:
            total = sum(entry["gpu_hours"] for entry in column["stages"].values())
            cells.append(f"**{total:,.{1 if total < 100 else 0}f}**")
    lines.append("| **total** | | | | | | | | " + " | ".join(cells) + " |")
    stage, entry = max(result["stages"].items(), key=lambda item: item[1]["peak_memory_bytes"])
    lines += ["", f"The largest step needs {entry['peak_memory_bytes'] / 2**30:.1f} GiB ({stage})."]
    if calibrated:
        lines[-1] += " " + _fit_sentence(calibrated, measurement or {"workloads": []})
    if replay:
        lines[-1] += _replayed_sentence(replay, calibrated)
    return "\n".join(lines)


def readme_with_measurements(readme: str, root: str | Path) -> str:
    """``readme`` (the text of :data:`PAGE`) with the text between :data:`START` and :data:`END` replaced by
    :func:`block`, that between :data:`ESTIMATE_START` and :data:`ESTIMATE_END` by the dry run's table of the
    ``paper`` profile (:func:`render_estimate` of ``results/dryrun.json``) and that between
    :data:`GPU_ESTIMATE_START` and :data:`GPU_ESTIMATE_END` by the ``gpu`` profile's (``results/dryrun_gpu.json``);
    each table also recalibrated on the newest GPU measurement when one is committed (:func:`recalibrated`)."""
    from paperlib.compendium.results_index.render import replace_between

    path = newest(root)
    measurement = json.loads(path.read_text()) if path is not None else None

    counts = fitting_counts(Path(root) / DRYRUN, measurement) if measurement is not None else None

    def estimate_table(dry: Path) -> str:
        result = json.loads((Path(root) / dry).read_text())
        if measurement is None:
            return render_estimate(result)
        source = "../" + path.relative_to(root).as_posix()
        try:
            calibrated = recalibrated(result, measurement, source, counts)
        except ValueError:  # nothing timed there that the dry run predicts: no constants to fit
            return (render_estimate(result) + f" The newest measurement ([`{source}`]({source})) timed no step with a "
                    "dry-run prediction, so nothing recalibrates these estimates.")
        return render_estimate(result, calibrated, measurement, replayed(result, measurement, source, calibrated, counts))

    text = replace_between(readme, START, END, lambda: block(root), "gpu-measurements", str(PAGE))
    text = replace_between(text, ESTIMATE_START, ESTIMATE_END, lambda: estimate_table(DRYRUN), "dryrun-estimate",
                           str(PAGE))
    return replace_between(text, GPU_ESTIMATE_START, GPU_ESTIMATE_END, lambda: estimate_table(DRYRUN_GPU),
                           "dryrun-gpu-estimate", str(PAGE))


__all__ = ["DRYRUN", "DRYRUN_GPU", "END", "ESTIMATE_END", "ESTIMATE_START", "GPU_ESTIMATE_END", "GPU_ESTIMATE_START",
           "PAGE", "START", "block", "earlier", "fitting_counts", "newest", "readme_with_measurements", "recalibrated",
           "render", "render_estimate", "repeatability", "same_work_spread"]
