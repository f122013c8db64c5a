"""Headline numbers and curves in the shapes `dvc metrics show` and `dvc plots show` read.

The experiment stages write rich nested JSON (``results/<name>.json``); DVC's metrics want small flat files of
numbers and its plots want one table of points per curve. This module derives both from the results, so they can
never disagree with them: ``results/metrics/<name>.json`` (per experiment, at most :data:`MAX_HEADLINES` numbers,
the ones its claims are about, so that ``dvc metrics show`` / ``dvc metrics diff`` give one short row or block per
experiment) and ``results/plots/<name>.csv`` (long format: x, y, series; the template ``.dvc/plots/series.json``
colours by ``series`` so that ``dvc plots show`` draws every curve of a file in one panel). Values are copied from
the results unrounded (``json.dumps`` writes a float's shortest exact form), so the files are byte-deterministic.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

Results = Mapping[str, Any]

METRICS = "results/metrics"  # one <experiment>.json per experiment with results; the folder is this module's own
PLOTS = "results/plots"
MAX_HEADLINES = 8  # numbers per metrics file: what a reader scans in one row of `dvc metrics show`


def metrics_path(experiment: str) -> str:
    """The repository-relative metrics file of one experiment, as dvc.yaml declares it."""
    return f"{METRICS}/{experiment}.json"


def _key(label: str) -> str:
    """A metric key from a label: ``"2xTRIL, K=10"`` -> ``2xTRIL_K10``, ``"ema (tuned)"`` -> ``ema_tuned``."""
    return re.sub(r"[^0-9A-Za-z_-]+", "_", label.replace("=", "")).strip("_")


def _lm_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """Test perplexity (words) or bits per character (characters) per model: seed mean and seed std."""
    unit = "bpc" if result.get("level") == "char" else "ppl"
    return {f"{model}.test_{unit}{stat}": row.get(f"test_{unit}{stat}")
            for model, row in result["summary"].items() for stat in ("", "_std")}


def _ablation_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """Validation perplexity per variant (seed mean), the quantity of Melis et al. (2020) Table 3 and our findings."""
    return {f"{model}.valid_ppl": row["valid_ppl"] for model, row in result["summary"].items()}


def _byte_lm_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """Test bits per byte and the word perplexity they convert to (Melis thesis eq. 3.15), per model."""
    return {f"{model}.{key}": row[key] for model, row in result["summary"].items()
            for key in ("test_bpb", "test_word_ppl")}


def _averaging_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """Best and early (mean over the first third) validation loss per averaging method, as the claims compare them."""
    return {f"{_key(name)}.{key}_valid_nll": row[field] for name, row in result["summary"]["methods"].items()
            for key, field in (("best", "best"), ("early", "early_mean"))}


# Krause Tables 4.1/4.2: the baselines (static, traditional dynamic evaluation, neural cache) and the final method.
DYNEVAL_HEADLINE_ROWS = ("static", "traditional_sgd", "neural_cache", "global_rms_rms_decay")


def _dyneval_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """Test perplexity per corpus of the rows in :data:`DYNEVAL_HEADLINE_ROWS`."""
    return {f"{corpus}.{row['key']}.test_ppl": row["test_ppl"] for corpus, table in result["corpora"].items()
            for row in table["rows"] if row["key"] in DYNEVAL_HEADLINE_ROWS}


# The 16-sample estimators under each objective (Figs. 5.26/5.27 and the Rényi-vs-KL claim) and the ELBO baseline.
MICMCO_SYNTHETIC_HEADLINES = ("elbo", "dreg16_kl", "dreg16_renyi", "dreg16_power",
                              "vimco16_kl", "vimco16_renyi", "vimco16_power")


def _micmco_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """Normalised hypervolume (NLL vs MI frontier) of the configurations in :data:`MICMCO_SYNTHETIC_HEADLINES`."""
    return {f"{name}.normalised_hypervolume": conf["normalised_hypervolume"]
            for name, conf in result["configurations"].items() if name in MICMCO_SYNTHETIC_HEADLINES}


def _word_generation_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """Test cross-entropy per model of Table 1."""
    return {f"{_key(row['model'])}.H_test": row["H_test"] for row in result["table1"]}


def _reverse_copy_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """Test cross-entropy per model and sequence length."""
    return {f"{model}.length_{length}.test_cross_entropy": value
            for model, values in result["cross_entropy"].items() for length, value in zip(result["lengths"], values)}


def _dyneval_char_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """Test bits per character per model and dynamic-evaluation row."""
    return {f"{model}.{row['key']}.test_bpc": row["test_bpc"]
            for model, table in result["tables"].items() for row in table["rows"]}


def _micmco_ptb_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """Table 5.1's test perplexity per hidden size and base estimator: one sample against the better of the two
    16-sample columns (K, R), the comparison of the claim that latents barely change the best perplexity."""
    out: dict[str, float] = {}
    for row in result["table_5_1"]:
        if not row.get("curve"):
            continue
        base, samples = row["column"].split()[:2]  # "DReG 16 K" -> DReG, 16
        key = f"hs{row['hidden_size']}.{base.lower()}{samples}{'' if samples == '1' else '_best'}.test_ppl"
        out[key] = min(out.get(key, float("inf")), row["test_perplexity"])
    return out


def _tuning_metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """Best validation loss found per model."""
    return {f"{model}.best_valid_nll": rec["best"]["value"] for model, rec in result["models"].items() if rec["best"]}


# results name -> headline numbers; experiments not listed here have no metrics file.
HEADLINES: dict[str, Callable[[Mapping[str, Any]], dict[str, float]]] = {
    "lm_ptb": _lm_metrics,
    "lm_ptb_char": _lm_metrics,
    "lm_ptb_ablation": _ablation_metrics,
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
    """Write ``results/metrics/<name>.json`` per experiment with results, and one ``results/plots/<name>.csv`` per
    plot (every name in :data:`CURVES` gets a file, so DVC's declared outputs always exist; an experiment without
    results gives a header-only table). A metrics file whose experiment has no results any more is deleted rather
    than left stale; in the pipeline every experiment's results are a dependency of the stage, so each file that
    dvc.yaml declares is written."""
    root = Path(root)
    metrics = headline_metrics(results)
    written = []
    for name, values in metrics.items():
        path = root / metrics_path(name)
        _write(path, json.dumps(values, indent=1, sort_keys=True) + "\n")
        written.append(path)
    for stale in sorted((root / METRICS).glob("*.json")):
        if stale.stem not in metrics:
            stale.unlink()
    tables = plot_tables(results)
    for name, (_, x, y, _) in CURVES.items():
        path = root / PLOTS / f"{name}.csv"
        _write(path, tables.get(name, f"{x},{y},series\n"))
        written.append(path)
    return written
