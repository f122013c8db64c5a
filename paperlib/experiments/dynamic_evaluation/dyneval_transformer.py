"""Dynamic evaluation of a word-level Transformer on WikiText-2 (stage ``dyneval_transformer``): Krause Table 6.3 at
small scale.

Krause §6.2.4 dynamically evaluates the pretrained Transformer-XL of Dai et al. (2019) on WikiText-103 (257M
parameters, an adaptive softmax): static evaluation 18.1 test perplexity, SGD dynamic evaluation 17.0, global RMS
dynamic evaluation 16.4, "a 9% perplexity improvement"; the global RMS rule runs without a decay rate because "there
was no noticeable validation advantage to using a decay rate". The seed item asks for a CPU analogue on WikiText-2
(the same Wikipedia source, 2M training tokens and a 33k vocabulary): a small Transformer-XL-style word model
(relative positions, eq. 6.2, and a segment memory; :mod:`paperlib.models.transformer`) trained here with
:class:`paperlib.train.Trainer`, then evaluated on a prefix of the test split (:mod:`paperlib.dyneval`), every
dynamic rule tuned on a prefix of the validation split:

- ``static``: the trained weights;
- ``sgd``: eq. (4.3), the learning rate tuned;
- ``global_rms``: eq. (4.7) with MS_g of eq. (4.4) and no decay, Table 6.3's setting (learning rate and epsilon tuned);
- ``global_rms_decay``: the same with the RMS decay prior of eq. (4.7) tuned as well, the thesis' remark on the decay
  rate put to the test (its validation loss against ``global_rms``'s).

Every row keeps its per-token loss averaged over blocks of ``test_block`` tokens of the test and validation texts
(on validation, the best trial's own evaluation), the units of the claims' paired bootstrap; the validation prefix
must hold at least ten blocks, or the margin of the remark on the decay rate is too wide to say anything.

Departures: WikiText-2 for WikiText-103; a model of a few million parameters trained on a CPU for the pretrained 257M
Transformer-XL, a full softmax for its adaptive one; segments of ``segment_len`` tokens aligned with the memory
recurrence, backpropagation truncated to one segment (as in ``dyneval_char``).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from paperlib.dyneval import dynamic_evaluate, mean_squared_gradients, static_evaluate, tune_dynamic_evaluation
from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.config import register_experiment, require_keys
from paperlib.experiments.common.lm_runs import train_or_load as train_lm
from paperlib.experiments.common.runs import json_safe
from paperlib.experiments.common.stage import begin_stage, results_path
from paperlib.reference.dynamic_evaluation import DYNEVAL_TRANSFORMER_TABLE_6_3

EXPERIMENT = "dyneval_transformer"

# Table 6.3's rows and the decay check: key -> (label, fixed dynamic_evaluate settings, grid name)
ROWS: dict[str, tuple[str, dict[str, Any], str | None]] = {
    "static": ("static evaluation", {}, None),
    "sgd": ("dynamic eval (SGD)", {"rule": "sgd"}, "sgd"),
    "global_rms": ("dynamic eval (global RMS)", {"rule": "global_rms", "decay": 0.0}, "global_rms"),
    "global_rms_decay": ("dynamic eval (global RMS, RMS decay)", {"rule": "global_rms"}, "global_rms_decay"),
}
GRID_KEYS = {"sgd": {"lr"}, "global_rms": {"lr", "eps"}, "global_rms_decay": {"lr", "decay", "eps"}}


@register_experiment(EXPERIMENT)
@dataclass(frozen=True)
class DynEvalTransformerParams:
    """A word-level Transformer on ``corpus`` (``model``: {cell: transformer, hidden_size, num_layers, options};
    ``train``: :class:`~paperlib.train.TrainConfig` fields), trained once under ``runs/dyneval_transformer/`` and
    reused while its settings and the training code are unchanged; then every row of :data:`ROWS`, tuned on
    ``valid_tokens`` validation tokens over ``grids`` (``sgd``: lr; ``global_rms``: lr, eps; ``global_rms_decay``:
    lr, decay, eps) by ``search`` and reported on ``test_tokens`` test tokens (null: the whole split), in segments of
    ``segment_len``; MS_g from ``gradient_stats`` ({batch_size, bptt, max_batches}) of training batches."""

    corpus: str
    model: dict
    train: dict
    segment_len: int
    valid_tokens: int | None
    test_tokens: int | None
    gradient_stats: dict
    grids: dict
    test_block: int = 500
    search: str = "coordinate"
    seed: int = 0
    threads: int = 2

    def __post_init__(self) -> None:
        from paperlib.data.corpora import CORPORA
        from paperlib.models import CELL_OPTIONS
        from paperlib.train import TrainConfig

        if self.corpus not in CORPORA or CORPORA[self.corpus].level != "word":
            raise ValueError(f"corpus must be a word-level corpus (wikitext2, ptb), got {self.corpus!r}")
        require_keys("model", self.model, ("cell", "hidden_size", "num_layers"), ("options",))
        if self.model["cell"] != "transformer":
            raise ValueError(f"model.cell must be 'transformer' (Table 6.3 is about Transformer-XL), got "
                             f"{self.model['cell']!r}")
        unknown = sorted(set(self.model.get("options", {})) - set(CELL_OPTIONS["transformer"]))
        if unknown:
            raise ValueError(f"model.options: unknown {unknown}; valid: {', '.join(sorted(CELL_OPTIONS['transformer']))}")
        try:
            TrainConfig(**self.train)
        except TypeError as err:
            raise ValueError(f"train: {err}") from None
        for name in ("segment_len", "test_block", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("valid_tokens", "test_tokens"):
            if getattr(self, name) is not None and getattr(self, name) < 10 * self.test_block:
                raise ValueError(f"{name} must hold at least 10 blocks of test_block = {self.test_block} tokens (the "
                                 f"claims' bootstrap units), or be null (the whole split); got {getattr(self, name)}")
        require_keys("gradient_stats", self.gradient_stats, ("batch_size", "bptt", "max_batches"))
        require_keys("grids", self.grids, tuple(GRID_KEYS))
        for family, grid in self.grids.items():
            allowed = GRID_KEYS[family]
            if set(grid) != allowed or not all(isinstance(v, list) and v for v in grid.values()):
                raise ValueError(f"grids.{family}: needs non-empty lists for exactly {sorted(allowed)}; got {grid}")
        if 0.0 in self.grids["global_rms_decay"]["decay"]:
            raise ValueError("grids.global_rms_decay.decay: leave out 0 (the global_rms row is the rule without decay)")
        if self.search not in ("grid", "coordinate"):
            raise ValueError(f"search must be 'grid' or 'coordinate', got {self.search!r}")


def perplexity(nll: float) -> float:
    """exp(nll); inf for a diverged evaluation (beyond what a float holds)."""
    return math.exp(nll) if math.isfinite(nll) and nll < 700 else math.inf


def train_or_load(settings: DynEvalTransformerParams, corpus, run_dir: Path, device, progress: bool,
                  log) -> tuple[nn.Module, dict[str, Any]]:
    """Train the model (resumably) or load it when ``run_dir`` holds a finished run made with these settings by the
    current training and model code (:func:`paperlib.experiments.common.lm_runs.train_or_load`)."""
    from paperlib.models import build_lm
    from paperlib.train import TrainConfig

    config = TrainConfig(**{**settings.train, "seed": settings.seed})
    torch.manual_seed(settings.seed)
    spec = settings.model
    model = build_lm(spec["cell"], len(corpus.vocab), spec["hidden_size"], spec["num_layers"], **spec.get("options", {}))
    return train_lm(model, corpus, settings.corpus, spec, config, run_dir, device, progress, log,
                    stage=EXPERIMENT, name="the Transformer",
                    summarize=lambda result: {"train_tokens": result.tokens,
                                              "train_valid_ppl": perplexity(result.best_valid_nll)})


def evaluate_row(key: str, model: nn.Module, valid: Tensor, test: Tensor, settings: DynEvalTransformerParams,
                 ms_g) -> dict[str, Any]:
    """One row: tuned on ``valid`` (a dynamic rule) and scored on ``test``, with per-block losses."""
    label, fixed, grid_name = ROWS[key]
    n = settings.segment_len
    if grid_name is None:
        valid_res, test_res = static_evaluate(model, valid, segment_len=n), static_evaluate(model, test, segment_len=n)
        call, trials = {}, []
    else:
        call = {"segment_len": n, **fixed, **({"ms_g": ms_g()} if fixed["rule"] == "global_rms" else {})}
        grid = settings.grids[grid_name]
        tuned = tune_dynamic_evaluation(model, valid, grid={"lr": grid["lr"], **grid}, search=settings.search, **call)
        call.update(tuned.best)
        valid_res, test_res = tuned.result, dynamic_evaluate(model, test, **call)
        trials = [{**{k: v for k, v in t.items() if k != "nll"},
                   "ppl": perplexity(t["nll"])} for t in tuned.trials]
    valid_blocks, valid_sizes = valid_res.block_means(settings.test_block)
    test_blocks, test_sizes = test_res.block_means(settings.test_block)
    return {"key": key, "label": label, "settings": {k: v for k, v in call.items() if k != "ms_g"},
            "valid_nll": valid_res.mean_nll(), "valid_ppl": perplexity(valid_res.mean_nll()),
            "test_nll": test_res.mean_nll(), "test_ppl": perplexity(test_res.mean_nll()), "trials": trials,
            "valid_blocks": valid_blocks, "test_blocks": test_blocks,
            "block_tokens": {"valid": valid_sizes, "test": test_sizes}}


def run_dyneval_transformer(profile: str | None = None, progress: bool = True, root: str | Path | None = None) -> Path:
    """Run experiment ``dyneval_transformer``; write ``results/dyneval_transformer.json`` and its provenance."""
    from paperlib.atomic_files import write_json_atomic
    from paperlib.data import load_corpus, pinned_checksums
    from paperlib.experiments.common.provenance import provenance

    stage = begin_stage(EXPERIMENT, profile, root, progress)
    settings: DynEvalTransformerParams = stage.settings
    device, log = stage.device, stage.log
    corpus = load_corpus(settings.corpus, stage.data_root)
    model, info = train_or_load(settings, corpus, stage.root / "runs" / EXPERIMENT / "transformer", device,
                                progress, log)

    def prefix(ids: Tensor, tokens: int | None) -> Tensor:
        return (ids if tokens is None else ids[: tokens + 1]).to(device)

    valid, test = prefix(corpus.valid, settings.valid_tokens), prefix(corpus.test, settings.test_tokens)
    gs = settings.gradient_stats
    cache: dict[str, Any] = {}

    def ms_g():
        if "full" not in cache:
            cache["full"] = mean_squared_gradients(model, corpus.train.to(device), batch_size=gs["batch_size"],
                                                   bptt=gs["bptt"], max_batches=gs["max_batches"])
        return cache["full"]

    clock = time.time()
    rows = []
    for key in ROWS:
        rows.append(evaluate_row(key, model, valid, test, settings, ms_g))
        log(f"  {rows[-1]['label']:40s} valid {rows[-1]['valid_ppl']:8.2f}  test {rows[-1]['test_ppl']:8.2f} ppl")
    results = {"profile": stage.profile, "corpus": settings.corpus, "vocab_size": len(corpus.vocab),
               "segment_len": settings.segment_len, "valid_tokens": valid.numel() - 1,
               "test_tokens": test.numel() - 1, "test_block": settings.test_block,
               "model": {**settings.model, **info}, "rows": [{k: v for k, v in r.items() if k != "block_tokens"}
                                                             for r in rows],
               "valid_block_tokens": rows[0]["block_tokens"]["valid"],
               "test_block_tokens": rows[0]["block_tokens"]["test"], "paper": DYNEVAL_TRANSFORMER_TABLE_6_3}
    out = results_path(stage.root, EXPERIMENT, stage.profile)
    write_json_atomic(out, json_safe(results))
    params = asdict(settings)
    write_json_atomic(out.with_suffix(".provenance.json"),
                      {**provenance(stage.root, stage.profile, params, pinned_checksums(settings.corpus), stage.started,
                                    code=code_hash(__name__)),
                       # the results index's compute table reads per-part seconds here (a loaded model's training too)
                       "run_seconds": {"train": info.get("train_seconds", 0.0),
                                       "evaluate": round(time.time() - clock, 1)}})
    return out


__all__ = ["DynEvalTransformerParams", "ROWS", "evaluate_row", "perplexity", "run_dyneval_transformer",
           "train_or_load"]
