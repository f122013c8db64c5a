"""The level of a model that ignores context: a unigram model of the PTB sentence VAEs' sentences.

A sentence VAE that has learned nothing about word order still scores as well as the word frequencies of its training
sentences allow. Its NLL per token beside the curves' says how far a profile's models got past that: at the thesis'
scale the best curves lie far below it, and where a profile's budget leaves a curve at or near it, the curve has not
yet learned what the figure compares. The unigram model is fitted on the stage's own training sentences (truncated,
with its vocabulary cut and ``<unk>``) with add-one smoothing over the vocabulary, and scored per token, ``<eos>``
included, on the same sentences the stage scores: the training-fit subset, the validation and the test sentences.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SPLITS = ("train", "valid", "test")  # the stage's names: "train" is the training-fit subset the curves are scored on


def unigram_nll(train: Sequence[Any], scored: Mapping[str, Sequence[Any]], vocab_size: int,
                smoothing: float = 1.0) -> dict[str, float]:
    """NLL per token (nats) of each list of sentences in ``scored`` (token-id tensors) under the unigram model of the
    ``train`` sentences: p(w) = (count(w) + ``smoothing``) / (tokens + ``smoothing`` x ``vocab_size``)."""
    import torch

    if smoothing <= 0:
        raise ValueError(f"smoothing must be positive (an unseen word would get no probability), got {smoothing}")
    counts = torch.bincount(torch.cat(list(train)).long(), minlength=vocab_size).double()
    if counts.numel() != vocab_size:
        raise ValueError(f"the training sentences hold ids up to {counts.numel() - 1}, beyond the vocabulary of "
                         f"{vocab_size}")
    log_p = (counts + smoothing).log() - (counts.sum() + smoothing * vocab_size).log()
    return {name: float(-log_p[torch.cat(list(sentences)).long()].mean()) for name, sentences in scored.items()}


def unigram_levels(results: Mapping[str, Any], data_root: str | os.PathLike) -> dict[str, Any]:
    """The unigram level of a ``micmco_ptb`` results file's sentences: the data rebuilt from its settings (the
    stage's own :func:`~paperlib.experiments.micmco.ptb.data.load_data`) and checked against the counts the stage
    recorded, then :func:`unigram_nll` per split. Returns ``{"profile", "nll": {split: nats per token},
    "perplexity": {split: exp(nll)}, "tokens": {split: count}, "smoothing"}``."""
    import math

    from paperlib.experiments.micmco.ptb.data import load_data
    from paperlib.experiments.micmco.ptb.design import MicmcoPtbParams

    data = load_data(MicmcoPtbParams(**results["settings"]), data_root)
    recorded, rebuilt = results.get("data", {}), data.summary()
    differ = sorted(k for k, v in recorded.items() if rebuilt.get(k) != v)
    if differ:
        raise ValueError("the sentences rebuilt from the results' settings are not the ones the stage scored ("
                         + ", ".join(f"{k}: {recorded[k]} recorded, {rebuilt.get(k)} now" for k in differ) + ")")
    scored = {split: data.split(split) for split in SPLITS}
    nll = unigram_nll(data.train, scored, data.vocab_size)
    return {"profile": results.get("profile"), "smoothing": 1.0, "nll": nll,
            "perplexity": {split: math.exp(v) for split, v in nll.items()},
            "tokens": {split: int(sum(len(s) for s in scored[split])) for split in SPLITS}}


def matching_levels(results: Mapping[str, Any], levels: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``levels`` (a ``micmco_ptb_unigram.json``) when they were made at the profile of ``results`` (a
    ``micmco_ptb.json``) on the sentences it scored (the same token counts per split), else None: levels of other
    sentences say nothing about these curves."""
    if not levels or levels.get("profile") != results.get("profile"):
        return None
    data = results.get("data", {})
    recorded = {"train": data.get("train_eval_tokens"), "valid": data.get("valid_tokens"),
                "test": data.get("test_tokens")}
    return levels if all(levels.get("tokens", {}).get(k) == v for k, v in recorded.items() if v is not None) else None


def write_levels(profile: str | None = None) -> Path:
    """``paperlib levels micmco_ptb``: the unigram levels of the stage's results at ``profile`` (default: the
    active one), written beside them as ``micmco_ptb_unigram.json`` (the DVC stage ``micmco_ptb_unigram``; the
    notebook draws and the results index quotes them)."""
    from paperlib.atomic_files import write_json_atomic
    from paperlib.experiments.common.config import active_profile, load_params, repo_root, section_params
    from paperlib.experiments.common.stage import results_path

    root = repo_root()
    params = load_params(root / "params.yaml")
    profile = active_profile(profile, params)
    results = json.loads(results_path(root, "micmco_ptb", profile).read_text())
    out = results_path(root, "micmco_ptb_unigram", profile)
    write_json_atomic(out, unigram_levels(results, root / section_params("data", params).root))
    return out


__all__ = ["SPLITS", "matching_levels", "unigram_levels", "unigram_nll", "write_levels"]
