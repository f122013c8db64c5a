"""Headline numbers and curves in the shapes `dvc metrics show` and `dvc plots show` read.

The experiment stages write rich nested JSON (``results/<name>.json``); DVC's metrics want a flat
file of numbers and its plots want one table of points per curve. This module derives both from
the results, so they can never disagree with them: ``results/metrics.json`` (one number per
experiment and headline quantity) and ``results/plots/<name>.csv`` (long format: x, y, series; the template ``.dvc/plots/series.json``
colours by ``series`` so that ``dvc plots show`` draws every curve of a file in one panel).
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

Results = Mapping[str, Any]

METRICS = "results/metrics.json"
PLOTS = "results/plots"


def _lm_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    unit = "bpc" if result.get("level") == "char" else "ppl"
    return {f"{model}.test_{unit}": row[f"test_{unit}"] for model, row in result["summary"].items()}


def _byte_lm_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    return {f"{model}.{key}": row[key] for model, row in result["summary"].items()
            for key in ("test_bpb", "test_word_ppl")}


def _averaging_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    return {f"{name}.best_valid_nll": row["best"] for name, row in result["summary"]["methods"].items()}


def _dyneval_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    return {f"{corpus}.{row['key']}.test_ppl": row["test_ppl"]
            for corpus, table in result["corpora"].items() for row in table["rows"]}


def _micmco_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    return {f"{name}.normalised_hypervolume": conf["normalised_hypervolume"]
            for name, conf in result["configurations"].items()}


def _word_generation_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    return {f"{row['model']}.H_test": row["H_test"] for row in result["table1"]}


def _reverse_copy_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    return {f"{model}.length_{length}.test_cross_entropy": value
            for model, values in result["cross_entropy"].items() for length, value in zip(result["lengths"], values)}


def _dyneval_char_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    return {f"{model}.{row['key']}.test_bpc": row["test_bpc"]
            for model, table in result["tables"].items() for row in table["rows"]}


def _micmco_ptb_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for row in result["table_5_1"]:
        if row.get("curve"):
            key = f"table_5_1.hs{row['hidden_size']}.{row['column'].replace(' ', '_').replace('/', '')}"
            out[f"{key}.test_ppl"] = row["test_perplexity"]
            out[f"{key}.test_kl"] = row["test_kl"]
    return out


def _tuning_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    return {f"{model}.best_valid_nll": rec["best"]["value"] for model, rec in result["models"].items() if rec["best"]}


# results name -> headline numbers; experiments not listed here have no flat headline yet.
HEADLINES: dict[str, Callable[[Mapping[str, Any]], dict[str, float]]] = {
    "lm_ptb": _lm_metrics,
    "lm_ptb_char": _lm_metrics,
    "lm_ptb_ablation": _lm_metrics,
    "averaging_ptb": _averaging_metrics,
    "dyneval": _dyneval_metrics,
    "micmco_synthetic": _micmco_metrics,
    "word_generation": _word_generation_metrics,
    "reverse_copy": _reverse_copy_metrics,
    "dyneval_char": _dyneval_char_metrics,
    "tuning_ptb": _tuning_metrics,
    "lm_wt2_bytes": _byte_lm_metrics,
    "micmco_ptb": _micmco_ptb_metrics,
}


def headline_metrics(results: Results) -> dict[str, dict[str, float]]:
    """``{experiment: {quantity: number}}`` for every experiment whose results are present."""
    return {name: {key: float(value) for key, value in fn(results[name]).items() if value is not None}
            for name, fn in HEADLINES.items() if name in results}


def _lm_curves(result: Mapping[str, Any]) -> Iterable[tuple[float, float, str]]:
    for run in result["runs"]:
        for point in run["history"]:
            yield point["step"], point["valid_nll"], f"{run['model']} seed {run['seed']}"


def _averaging_curves(result: Mapping[str, Any]) -> Iterable[tuple[float, float, str]]:
    for name, curve in result["main"]["curves"].items():
        for step, loss in zip(curve["step"], curve["valid_nll"]):
            yield step, loss, name


def _timescale_curves(result: Mapping[str, Any]) -> Iterable[tuple[float, float, str]]:
    t = result["timescale"]
    for name, values in t["curves"].items():
        for i, loss in enumerate(values):
            yield (i + 1) * t["bin"], loss, name


def _reverse_copy_curves(result: Mapping[str, Any]) -> Iterable[tuple[float, float, str]]:
    for model, values in result["cross_entropy"].items():
        for length, value in zip(result["lengths"], values):
            yield length, value, model


def _micmco_ptb_frontiers(result: Mapping[str, Any]) -> Iterable[tuple[float, float, str]]:
    """The Pareto frontiers of Fig. 5.12 (validation, shared dropout masks), the thesis' main PTB figure."""
    figure = result["figures"].get("5.12", {})
    for name in figure.get("curves", []):
        curve = result["curves"].get(name)
        for point in (curve or {}).get("frontier", []):
            yield point["kl"], point["nll"], curve["label"]


# plot name -> (results name, x label, y label, points)
CURVES: dict[str, tuple[str, str, str, Callable[[Mapping[str, Any]], Iterable[tuple[float, float, str]]]]] = {
    "lm_ptb_valid": ("lm_ptb", "step", "valid_nll", _lm_curves),
    "lm_ptb_char_valid": ("lm_ptb_char", "step", "valid_nll", _lm_curves),
    "averaging_valid": ("averaging_ptb", "step", "valid_nll", _averaging_curves),
    "dyneval_timescale": ("dyneval", "words", "nll", _timescale_curves),
    "reverse_copy": ("reverse_copy", "length", "test_cross_entropy", _reverse_copy_curves),
    "micmco_ptb_fig_5_12": ("micmco_ptb", "kl", "nll", _micmco_ptb_frontiers),
}


def plot_tables(results: Results) -> dict[str, str]:
    """``{plot name: CSV text}`` with columns (x label, y label, series), for present results."""
    tables = {}
    for name, (source, x, y, points) in CURVES.items():
        if source not in results:
            continue
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([x, y, "series"])
        for x_value, y_value, series in points(results[source]):
            writer.writerow([x_value, f"{y_value:.6g}", series])
        tables[name] = buffer.getvalue()
    return tables


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_views(root: str | os.PathLike, results: Results) -> list[Path]:
    """Write ``results/metrics.json`` and one ``results/plots/<name>.csv`` per plot (every name in
    :data:`CURVES` gets a file, so DVC's declared outputs always exist; an experiment without
    results gives a header-only table)."""
    root = Path(root)
    written = [root / METRICS]
    _write(root / METRICS, json.dumps(headline_metrics(results), indent=1, sort_keys=True) + "\n")
    tables = plot_tables(results)
    for name, (_, x, y, _) in CURVES.items():
        path = root / PLOTS / f"{name}.csv"
        _write(path, tables.get(name, f"{x},{y},series\n"))
        written.append(path)
    return written
