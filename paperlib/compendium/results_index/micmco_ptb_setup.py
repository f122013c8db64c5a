"""What the PTB MICMCO rows ran that the thesis leaves open, for their scale: what each objective's curves search
with the same number of trials, and which split (and batch variant) the robustness and power-objective figures show,
read from the curves the results record (the choices themselves: :mod:`paperlib.experiments.micmco.ptb.micmco_ptb`)."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from paperlib.compendium.results_index.micmco_synthetic import search_dimensions
from paperlib.compendium.results_index.text import Results

# The figures whose split the thesis does not state (§5.B.1 robustness, §5.B.3 power objective).
UNSTATED_SPLIT = ("5.16", "5.17", "5.18", "5.19", "5.20", "5.21", "5.28", "5.29")
_SPLITS = {("valid", "shared"): "validation NLL with shared dropout masks", ("train", "train"): "the training fit"}


def training_fit_search(r: Results) -> str:
    """What each objective's training-fit curves search (:func:`search_dimensions`)."""
    spaces = {}
    for name, curve in r["curves"].items():
        stem, _, regime = name.partition(".")
        if regime == "train" and "_" in stem:
            spaces.setdefault(stem.rsplit("_", 1)[1], curve.get("search_space"))
    text = search_dimensions(spaces)
    return text and f"{text} (the regularised curves search their regulariser's too)"


def split_choice(r: Results, fig: str) -> str:
    """"the thesis does not say which split Fig. 5.17 shows; ours: ..." for a figure of :data:`UNSTATED_SPLIT`, with
    the batch-size factor where the figure varies it (the thesis gives no batch size); empty elsewhere."""
    curves = [r["curves"][n] for n in r.get("figures", {}).get(fig, {}).get("curves", ()) if n in r["curves"]]
    if fig not in UNSTATED_SPLIT or not curves:
        return ""
    shown = sorted({_SPLITS.get((c.get("split"), c.get("regime")), f"{c.get('split')} ({c.get('regime')})")
                    for c in curves})
    factors = sorted({c.get("batch_factor", 1) for c in curves} - {1})
    batch = f", and its larger batch ×{'/'.join(map(str, factors))} ours too" if factors else ""
    return f"the thesis does not say which split Fig. {fig} shows; ours: {' and '.join(shown)}{batch}"


def trials_past(curves: Mapping[str, Mapping[str, Any]], names: Sequence[str], level: float, tie: float) -> str:
    """"; fewer than half of some curves' trials lie below it ...: VIMCO 16 KL 1 of 6" where some of the curves
    ``names`` have fewer than half their trials below a model without context (NLL ``level``) by more than the
    ``tie``: what such a curve's hypervolume credits beyond word frequencies stands on that handful of trials. Curves
    with none are named elsewhere (no better than word frequencies alone); empty where every curve has at least half
    its trials past the level."""
    counts = []
    for name in names:
        trials = curves[name].get("trials", ())
        past = sum(isinstance(t.get("nll"), (int, float)) and math.isfinite(t["nll"]) and t["nll"] <= level - tie
                   for t in trials)
        if 0 < past < len(trials) / 2:
            counts.append(f"{curves[name]['label']} {past} of {len(trials)}")
    return ("; fewer than half of some curves' trials lie below it by more than the tie (the rest of their frontier "
            "is no better a fit than word frequencies): " + ", ".join(counts)) if counts else ""
