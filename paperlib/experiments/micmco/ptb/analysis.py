"""Frontiers and hypervolume comparisons per figure, the compute each figure adds, and Table 5.1 (the best
shared-mask trials evaluated on the test set)."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from paperlib.experiments.common.runs import TimeLimitReached
from paperlib.experiments.common.stage import stage_device
from paperlib.experiments.micmco.synthetic.micmco_synthetic import hypervolume, nll_at_mi, pareto_front
from paperlib.models.sentence_vae import SentenceVAE
from paperlib.experiments.micmco.ptb.design import (
    CURVES, EXPERIMENT, FIGURES, MicmcoPtbParams, TABLE_5_1_COLUMNS, TABLE_5_1_VARIANTS, THESIS_TABLE_5_1, VARIANTS,
)
from paperlib.experiments.micmco.ptb.data import SentenceData
from paperlib.experiments.micmco.ptb.studies import (
    _checkpoint_path, _save_checkpoint, study_name, test_scores, test_scores_path,
)
from paperlib.experiments.micmco.ptb.trials import build_model, run_trial


def _points(records: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    nll = np.array([np.nan if r.get("nll") is None else r["nll"] for r in records], dtype=float)
    kl = np.array([np.nan if r.get("kl") is None else r["kl"] for r in records], dtype=float)
    return nll, kl


def frontier(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The non-dominated trials (minimise NLL, maximise KL), by increasing KL."""
    nll, kl = _points(records)
    return [{"trial": int(records[i]["number"]), "nll": float(nll[i]), "kl": float(kl[i])}
            for i in pareto_front(nll, kl)]


def compare_hypervolumes(curves: Mapping[str, Mapping[str, Any]], names: Sequence[str], margin: float,
                         kl_cap: float) -> dict[str, Any]:
    """Normalised hypervolumes of ``names`` against a common reference (best NLL among them + ``margin``, KL 0)."""
    present = [n for n in names if n in curves]
    nlls = [_points(curves[n]["trials"])[0] for n in present]
    best = [v[np.isfinite(v)].min() for v in nlls if np.isfinite(v).any()]
    if not best:
        return {"reference_nll": None, "hypervolume": {n: None for n in present}}
    reference = (float(min(best)) + margin, 0.0)
    volumes = {}
    for n in present:
        nll, kl = _points(curves[n]["trials"])
        volumes[n] = hypervolume(nll, kl, reference, mi_cap=kl_cap) / (margin * kl_cap)
    return {"reference_nll": reference[0], "hypervolume": volumes}


def summarise_figures(curves: Mapping[str, Mapping[str, Any]], settings: MicmcoPtbParams) -> dict[str, Any]:
    """Per selected figure: the curves run, their normalised hypervolumes on the figure's common reference and
    their NLL at the KL levels (interpolated along the frontier; None where a frontier does not reach a level)."""
    out = {}
    for fig_id in settings.selected_figures:
        figure = FIGURES[fig_id]
        names = [n for n in figure.configurations if n in curves]
        hv = compare_hypervolumes(curves, names, settings.hv_margin, settings.kl_cap)
        at_levels = {}
        for n in names:
            front = curves[n]["frontier"]
            values = nll_at_mi([p["kl"] for p in front], [p["nll"] for p in front], settings.kl_levels)
            at_levels[n] = [float(v) if math.isfinite(v) else None for v in values]
        out[fig_id] = {"title": figure.title, "curves": figure.configurations, "thesis_says": figure.thesis_says,
                       "regime": sorted({CURVES[n].regime for n in figure.configurations}),
                       "reference_nll": hv["reference_nll"], "normalised_hypervolume": hv["hypervolume"],
                       "nll_at_kl": at_levels}
    return out


def hidden_sizes(result: Mapping[str, Any]) -> list[int]:
    """The decoder hidden sizes the curves of ``result`` (:func:`run_micmco_ptb`'s JSON) ran at, smallest first;
    the profile's base size when no curve records one (2 sizes when Figs. 5.18 / 5.21 ran: base and x2)."""
    sizes = {int(c["hidden_size"]) for c in result["curves"].values() if c.get("hidden_size")}
    return sorted(sizes) or [int(result["settings"]["hidden_size"])]


def extra_minutes(result: Mapping[str, Any], fig: str) -> float | None:
    """Minutes figure ``fig`` would add to this stage at the profile of ``result`` (:func:`run_micmco_ptb`'s JSON):
    per curve not yet run, its cost units (:attr:`Curve.cost`) times the measured seconds per unit of the run curves
    with the same estimator (of all run curves when none has it), over the parallel workers. None without timed
    trials."""
    curves = {n: c for n, c in result["curves"].items() if n in CURVES}

    def rate(names: list[str]) -> float | None:
        seconds = sum(float(t.get("train_seconds") or 0.0) + float(t.get("eval_seconds") or 0.0)
                      for n in names for t in curves[n].get("trials", []))
        units = sum(CURVES[n].cost * len(curves[n].get("trials", [])) for n in names)
        return seconds / units if seconds and units else None

    pooled = rate(list(curves))
    if pooled is None:
        return None
    missing = [n for n in FIGURES[fig].configurations if n not in curves]
    total = 0.0
    for name in missing:
        same = [n for n in curves if n.split(".")[0] == name.split(".")[0]]
        total += CURVES[name].cost * (rate(same) or pooled)
    workers = max(1, int(result["settings"].get("workers") or 1))
    return total * result["settings"]["trials"] / workers / 60


def _best_trial(records: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    finite = [r for r in records if r.get("nll") is not None and math.isfinite(r["nll"])]
    return min(finite, key=lambda r: r["nll"]) if finite else None


def best_model(name: str, record: Mapping[str, Any], settings: MicmcoPtbParams, data: SentenceData,
               runs_dir: Path, profile: str, *, index: int) -> SentenceVAE:
    """The model of trial ``record`` of curve ``name``: from its checkpoint, or retrained with the trial's seed
    (``index``: its place among the curve's records, see :func:`paperlib.experiments.micmco.synthetic.micmco_synthetic.trial_index`)."""
    curve = CURVES[name]
    path = _checkpoint_path(runs_dir, study_name(name, profile, settings))
    if path.is_file():
        saved = torch.load(path, map_location="cpu", weights_only=True)
        if saved["trial"] == record["number"]:
            model = build_model(curve, record["params"], settings, data.vocab_size)
            model.load_state_dict(saved["state"])
            return model.to(stage_device()).eval()
    _, model = run_trial(curve, record["params"], data, settings, settings.seed + 1000 * index)
    _save_checkpoint(path, int(record["number"]), model)
    return model.eval()


def _table_seconds(record: Mapping[str, Any], settings: MicmcoPtbParams, checkpointed: bool) -> float:
    """A cautious guess of the time a Table 5.1 cell takes from its trial's record: retraining it when its model is
    not at hand (as long as its whole stack took: a trial alone is no faster on a launch-bound GPU), then the test
    evaluation (its validation evaluation's time scaled by the samples)."""
    train = 0.0 if checkpointed else (record.get("train_seconds") or 0.0) * (settings.stack_size or 1)
    return train + (record.get("eval_seconds") or 0.0) * settings.test_samples / settings.eval_samples


def table_5_1(curves: Mapping[str, Mapping[str, Any]], settings: MicmcoPtbParams, data: SentenceData,
              runs_dir: str | os.PathLike, profile: str, progress: bool = False,
              deadline: float | None = None) -> list[dict[str, Any]]:
    """Rows of Table 5.1: per hidden size and column, the best-validation trial of the column's shared-mask
    curves, evaluated on the test set with ``test_samples`` samples (cached; a stacked study caches its best
    trial's scores as it goes, so those need no retraining), beside the thesis' numbers. A
    ``deadline`` (``time.time()``) that a cell would pass, by :func:`_table_seconds`, stops the table before it with
    :class:`~paperlib.experiments.common.runs.TimeLimitReached`; the cells done are cached and the same call
    continues."""
    runs_dir = Path(runs_dir)
    rows = []
    for thesis_hs, variants in TABLE_5_1_VARIANTS.items():
        factor = VARIANTS[variants[0]][2]
        for column, stem in TABLE_5_1_COLUMNS.items():
            row: dict[str, Any] = {"thesis_hidden": thesis_hs, "hidden_size": settings.hidden_size * factor,
                                   "column": column, "thesis": THESIS_TABLE_5_1[thesis_hs][column]}
            candidates = [(n, _best_trial(curves[n]["trials"])) for n in (f"{stem}.shared{v}" for v in variants)
                          if n in curves]
            candidates = [(n, r) for n, r in candidates if r is not None]
            if not candidates:
                rows.append({**row, "curve": None})
                continue
            name, record = min(candidates, key=lambda c: c[1]["nll"])
            cache = test_scores_path(runs_dir, study_name(name, profile, settings), record["number"], settings)
            if cache.is_file():
                scores = json.loads(cache.read_text())
            else:
                if deadline is not None:
                    saved = _checkpoint_path(runs_dir, study_name(name, profile, settings))
                    held = saved.is_file() and torch.load(saved, map_location="cpu", weights_only=True)["trial"] \
                        == record["number"]
                    if time.time() + _table_seconds(record, settings, held) > deadline:
                        raise TimeLimitReached(f"{EXPERIMENT} stopped at its time limit before Table 5.1's {column} "
                                               f"(hs {row['hidden_size']}); the same command continues")
                if progress:
                    print(f"{EXPERIMENT}: Table 5.1 {column} (hs {row['hidden_size']}): test evaluation of {name} "
                          f"trial {record['number']}", flush=True)
                model = best_model(name, record, settings, data, runs_dir, profile,
                                   index=curves[name]["trials"].index(record))
                scores = test_scores(model, data, settings)
                cache.write_text(json.dumps(scores))
            rows.append({**row, "curve": name, "trial": record["number"], "params": record["params"],
                         "valid_nll": record["nll"], "valid_kl": record["kl"], "test_nll": scores["nll"],
                         "test_perplexity": math.exp(scores["nll"]), "test_kl": scores["kl"],
                         "test_elbo_nll": scores["elbo_nll"], "test_q_kl": scores["q_kl"],
                         "test_sentences": scores["sentences"], "test_tokens": scores["tokens"]})
    return rows
