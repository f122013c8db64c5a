"""The dynamic-evaluation experiment (stage ``dyneval``): Krause Tables 4.1/4.2, 5.1-5.7 and Figure 5.1 at small scale.

Trains (or loads) a word-level LM per corpus, then compares static evaluation, the update rules of
:mod:`paperlib.dyneval` with their hyperparameters tuned on validation data, sparse dynamic evaluation and the
neural cache (:mod:`paperlib.dyneval.cache`), and runs the chapter-5 studies (momentum, adaptive rules, epsilon, seen and
unseen words, related words, amount and locality of the gradient statistics;
:mod:`paperlib.experiments.dynamic_evaluation.studies`). The methods live in
:mod:`paperlib.dyneval`; this module only turns ``params.yaml`` settings into ``results/dyneval.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch
from torch import Tensor, nn

from paperlib.device import load_checkpoint
from paperlib.dyneval import (Params, block_means, dynamic_evaluate, mean_squared_gradients, static_evaluate,
                              tune_dynamic_evaluation)
from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.runs import json_safe
from paperlib.experiments.common.config import register_experiment, require_keys
from paperlib.experiments.dynamic_evaluation.studies import (RELATED_WORDS_DEFAULTS, STATISTICS_STUDY_DEFAULTS, _optimizer_study,
                                                  _ppl, _prefix, _related_words, _statistics_amount,
                                                  _statistics_locality, _timescale, related_words_settings,
                                                  statistics_study_settings)
from paperlib.experiments.common.stage import begin_stage, results_path, setup_stage
from paperlib.reference.dynamic_evaluation import DYNEVAL_TABLES


# The rows of Tables 4.1/4.2 in order: (key, label, fixed settings, grid name).
TABLE_ROWS: tuple[tuple[str, str, dict[str, Any], str | None], ...] = (
    ("static", "static evaluation", {}, None),
    ("traditional_sgd", "traditional dynamic eval (sgd, bptt=1)", {"rule": "sgd", "segment_len": 1}, "sgd"),
    ("sgd", "dynamic eval (sgd, bptt=n)", {"rule": "sgd"}, "sgd"),
    ("sgd_decay", "dynamic eval (sgd, bptt=n, decay)", {"rule": "sgd"}, "sgd_decay"),
    ("global_rms_decay", "dynamic eval (global RMS, bptt=n, decay)", {"rule": "global_rms", "rms_decay": False}, "global_rms"),
    ("global_rms_rms_decay", "dynamic eval (global RMS, bptt=n, RMS decay)", {"rule": "global_rms"}, "global_rms"),
    ("sparse", "sparse dynamic eval (global RMS, RMS decay)", {"rule": "global_rms"}, "sparse"),
    ("neural_cache", "neural cache", {}, None),
)
GRID_NAMES = ("sgd", "sgd_decay", "global_rms", "sparse")


@register_experiment("dyneval")
@dataclass(frozen=True)
class DynEvalParams:
    """Dynamic evaluation vs static evaluation and the neural cache (Krause ch. 4-5) at small scale.

    ``model``/``train``: the LSTM trained per corpus with ``paperlib.train.Trainer`` (``checkpoints``
    maps a corpus to an existing Trainer checkpoint of the same architecture to skip training).
    ``valid_tokens``/``test_tokens``: prefixes of the splits used for tuning/reporting (None: all).
    ``grids``: per row family (``sgd``, ``sgd_decay``, ``global_rms``, ``sparse``) the values of
    lr/decay/eps searched by ``search`` ("grid" or "coordinate"). ``cache``: lists of cache_length,
    theta, lam. ``sparse_units``: H of the ``sparse`` row, eq. (4.8) on the first H units of the last LSTM
    layer. ``optimizers``: the §5.4 study (Tables 5.3-5.5) on ``corpus``. ``timescale``: Fig. 5.1
    and Table 5.1 on ``sequences`` test sequences of ``length`` tokens.

    Optional blocks (every key optional, defaults in :data:`RELATED_WORDS_DEFAULTS` and
    :data:`STATISTICS_STUDY_DEFAULTS`; None means "derive from the settings above"):
    ``related_words`` (Table 5.2, §5.3) and ``statistics_study`` (Tables 5.6-5.7, §5.4.4, on the
    ``optimizers`` corpus).
    """

    corpora: list[str]
    model: dict
    train: dict
    valid_tokens: int | None
    test_tokens: int | None
    segment_len: int
    gradient_stats: dict
    grids: dict
    cache: dict
    sparse_units: int
    optimizers: dict
    timescale: dict
    search: str = "coordinate"
    checkpoints: dict = field(default_factory=dict)
    seed: int = 0
    threads: int = 2
    related_words: dict = field(default_factory=dict)
    statistics_study: dict = field(default_factory=dict)
    test_block: int = 100  # tokens per block: the paired bootstrap of Tables 4.1/4.2 (test) and 5.3-5.7 (validation)

    def __post_init__(self) -> None:
        from paperlib.data.corpora import CORPORA
        from paperlib.models import CELL_OPTIONS, VALID_CELLS
        from paperlib.train import TrainConfig

        bad = [c for c in self.corpora if c not in DYNEVAL_TABLES]
        if not self.corpora or bad:
            raise ValueError(f"corpora must be among {', '.join(DYNEVAL_TABLES)} (word level); got {self.corpora}")
        require_keys("model", self.model, ("cell", "hidden_size", "num_layers"), ("options",))
        if self.model["cell"] not in VALID_CELLS:
            raise ValueError(f"model.cell must be one of {', '.join(VALID_CELLS)}, got {self.model['cell']!r}")
        unknown = sorted(set(self.model.get("options", {})) - set(CELL_OPTIONS[self.model["cell"]]))
        if unknown:
            raise ValueError(f"model.options: unknown {unknown}; valid: {', '.join(sorted(CELL_OPTIONS[self.model['cell']]))}")
        try:
            TrainConfig(**self.train)
        except TypeError as err:
            raise ValueError(f"train: {err}") from None
        for name in ("valid_tokens", "test_tokens"):
            value = getattr(self, name)
            if value is not None and value < 2:
                raise ValueError(f"{name} must be >= 2 or null, got {value}")
        if self.segment_len < 1 or self.sparse_units < 1 or self.threads < 1 or self.test_block < 1:
            raise ValueError("segment_len, sparse_units, threads and test_block must be >= 1")
        require_keys("gradient_stats", self.gradient_stats, ("batch_size", "bptt", "max_batches"))
        require_keys("grids", self.grids, GRID_NAMES)
        for family, grid in self.grids.items():
            unknown = sorted(set(grid) - {"lr", "decay", "eps"})
            if unknown or "lr" not in grid or not all(isinstance(v, list) and v for v in grid.values()):
                raise ValueError(f"grids.{family}: needs non-empty lists for 'lr' (and optionally 'decay', 'eps'); got {grid}")
        if self.search not in ("grid", "coordinate"):
            raise ValueError(f"search must be 'grid' or 'coordinate', got {self.search!r}")
        require_keys("cache", self.cache, ("cache_length", "theta", "lam"))
        require_keys("optimizers", self.optimizers,
                      ("corpus", "valid_tokens", "momentum", "rmsprop_alpha", "adam_momentum", "rmsprop_eps",
                       "lr_start", "lr_factor", "max_evals"))
        if self.optimizers["corpus"] not in self.corpora:
            raise ValueError(f"optimizers.corpus must be one of corpora {self.corpora}")
        require_keys("optimizers.lr_start", self.optimizers["lr_start"], ("sgd", "rmsprop", "adam", "global_rms"))
        require_keys("timescale", self.timescale, ("corpus", "sequences", "length", "bin", "stream_batch"))
        if self.timescale["corpus"] not in self.corpora:
            raise ValueError(f"timescale.corpus must be one of corpora {self.corpora}")
        bad = sorted(set(self.checkpoints) - set(self.corpora))
        if bad or any(c not in CORPORA for c in self.checkpoints):
            raise ValueError(f"checkpoints may only name corpora of this experiment {self.corpora}; got {bad}")
        require_keys("related_words", self.related_words, (), tuple(RELATED_WORDS_DEFAULTS))
        rw = related_words_settings(self)
        if rw["corpus"] not in self.corpora:
            raise ValueError(f"related_words.corpus must be one of corpora {self.corpora}, got {rw['corpus']!r}")
        rows = [key for key, _, fixed, _ in TABLE_ROWS if "rule" in fixed and key != "sparse"]
        if rw["row"] not in rows:
            raise ValueError(f"related_words.row must name a full dynamic-evaluation row of Tables 4.1/4.2 ({', '.join(rows)}); "
                             f"got {rw['row']!r}")
        if min(rw["top"], rw["min_count"], rw["min_length"], rw["min_context"]) < 1 or rw["extra_targets"] < 0:
            raise ValueError("related_words: top, min_count, min_length and min_context must be >= 1, extra_targets >= 0")
        require_keys("statistics_study", self.statistics_study, (), tuple(STATISTICS_STUDY_DEFAULTS))
        st = statistics_study_settings(self)
        if not st["fractions"] or any(not 0.0 < f <= 1.0 for f in st["fractions"]) or 1.0 not in st["fractions"]:
            raise ValueError(f"statistics_study.fractions must lie in (0, 1] and include 1.0, got {st['fractions']}")
        if st["source"] not in ("train", "test"):
            raise ValueError(f"statistics_study.source must be 'train' or 'test' (not the evaluated split), "
                             f"got {st['source']!r}")
        if (st["batches"] is not None and st["batches"] < 1) or st["offset"] < 0 or st["max_evals"] < 2:
            raise ValueError("statistics_study: batches must be >= 1 or null, offset >= 0 and max_evals >= 2")
        require_keys("statistics_study.lr_start", self.statistics_study.get("lr_start") or {}, (),
                      ("rmsprop", "global_rms", "nonlocal_rmsprop"))
        if not all(v > 0 for v in st["lr_start"].values()):
            raise ValueError(f"statistics_study.lr_start values must be positive, got {st['lr_start']}")
        eps = st["rmsprop_eps"]
        if not st["lr_factor"] > 1 or not isinstance(eps, list) or not eps or not all(e > 0 for e in eps):
            raise ValueError(f"statistics_study: lr_factor must be > 1 and rmsprop_eps a non-empty list of positive ε; "
                             f"got {st['lr_factor']}, {eps}")






def _load_or_train(settings, corpus_name: str, corpus, root, device, progress: bool) -> tuple[nn.Module, dict[str, Any]]:
    """The LM for one corpus: an existing checkpoint from params, else trained here (resumably) under runs/dyneval."""
    from paperlib.models import build_lm
    from paperlib.train import Trainer, TrainConfig

    torch.manual_seed(settings.seed)
    spec = settings.model
    model = build_lm(spec["cell"], len(corpus.vocab), spec["hidden_size"], spec["num_layers"], **spec.get("options", {}))
    info: dict[str, Any] = {"parameters": sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())}
    if corpus_name in settings.checkpoints:
        path = root / settings.checkpoints[corpus_name]
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint {path} (params: experiments.dyneval.checkpoints.{corpus_name}) does not exist")
        model.load_state_dict(load_checkpoint(path, device)["model"])
        info["checkpoint"] = str(settings.checkpoints[corpus_name])
        return model.to(device).eval(), info
    from paperlib.train import forget_stale_run

    run_dir = root / "runs" / "dyneval" / corpus_name
    # a folder trained with other settings or by other training code is retrained rather than reused
    forget_stale_run(run_dir, {"model": json_safe(spec), "train": json_safe(settings.train),
                                "vocab_size": len(corpus.vocab), "seed": settings.seed,
                                "code": code_hash("paperlib.train", "paperlib.models")})
    trainer = Trainer(model, corpus.train, corpus.valid, TrainConfig(**{**settings.train, "seed": settings.seed}),
                      run_dir, device=device, progress=progress)
    result = trainer.fit(resume=True)
    trainer.load(trainer.best_path, restore_position=False)
    info.update({"train_steps": result.steps, "train_tokens": result.tokens, "train_valid_nll": result.best_valid_nll,
                 "train_seconds": round(trainer.train_seconds, 1)})
    return trainer.model.eval(), info


def _row_settings(key: str, fixed: dict[str, Any], settings) -> dict[str, Any]:
    out = {"segment_len": settings.segment_len, **fixed}
    if key == "sparse":
        out["sparse_units"] = settings.sparse_units
    return out


def _corpus_table(settings, model: nn.Module, valid: Tensor, test: Tensor, ms: dict[str, Params], log) -> dict[str, Any]:
    """Tables 4.1/4.2: every row tuned on the validation prefix, then evaluated on the test prefix; each row keeps its
    test loss per block of ``settings.test_block`` tokens (``test_blocks``; the block sizes once, ``test_block_tokens``)
    for the claims' paired bootstrap."""
    rows = []
    sizes: list[int] = []
    for key, label, fixed, grid_name in TABLE_ROWS:
        if key == "static":
            best: dict[str, Any] = {}
            valid_nll = static_evaluate(model, valid).mean_nll()
            test_losses = static_evaluate(model, test).losses
            trials: list[dict[str, Any]] = []
        elif key == "neural_cache":
            from paperlib.dyneval.cache import neural_cache_losses, tune_neural_cache

            tuned = tune_neural_cache(model, valid, cache_lengths=settings.cache["cache_length"],
                                      thetas=settings.cache["theta"], lams=settings.cache["lam"])
            best = {"cache_length": tuned.cache_length, "theta": tuned.theta, "lam": tuned.lam}
            valid_nll, trials = tuned.nll, tuned.trials
            test_losses = neural_cache_losses(model, test, **best).reshape(-1)
        else:
            base = _row_settings(key, fixed, settings)
            needs_ms = base["rule"] == "global_rms"
            if needs_ms:
                base["ms_g"] = ms["sparse" if key == "sparse" else "full"]
            tuned = tune_dynamic_evaluation(model, valid, grid=settings.grids[grid_name], search=settings.search, **base)
            best, valid_nll, trials = tuned.best, tuned.nll, tuned.trials
            test_losses = dynamic_evaluate(model, test, **{**base, **best}).losses
            base.pop("ms_g", None)
            best = {**base, **best}
        test_nll = float(test_losses.double().mean())
        blocks, sizes = block_means(test_losses, settings.test_block)
        rows.append({"key": key, "label": label, "settings": best, "valid_nll": valid_nll, "test_nll": test_nll,
                     "valid_ppl": _ppl(valid_nll), "test_ppl": _ppl(test_nll), "trials": trials,
                     "test_blocks": blocks})
        log(f"  {label:48s} valid ppl {_ppl(valid_nll):8.2f}  test ppl {_ppl(test_nll):8.2f}")
    return {"rows": rows, "test_block_tokens": sizes}




def run_dyneval(profile: str | None = None, progress: bool = True, out: str | None = None) -> Any:
    """Run the dynamic-evaluation experiment of ``params.yaml`` (profile ``profile``); returns the results path.

    Writes ``results/dyneval.json`` (numbers only; keys ``corpora``, ``optimizers``, ``timescale``,
    ``related_words``, ``statistics_amount``, ``statistics_locality``) and ``results/dyneval.provenance.json``
    (settings, versions, wall time per part). Trained models go to ``runs/dyneval/<corpus>/`` (resumable).
    """
    import time
    from pathlib import Path

    from paperlib.data import load_corpus, pinned_checksums
    from paperlib.experiments.common.provenance import provenance
    from paperlib.atomic_files import write_json_atomic

    stage = begin_stage("dyneval", profile, progress=progress)
    started, root, profile, settings, device = stage.started, stage.root, stage.profile, stage.settings, stage.device
    data_root, log = stage.data_root, stage.log
    seconds: dict[str, float] = {}

    results: dict[str, Any] = {"profile": profile, "model": settings.model, "segment_len": settings.segment_len,
                               "search": settings.search, "corpora": {}}
    models, stats = {}, {}
    for name in settings.corpora:
        tick = time.time()
        corpus = load_corpus(name, data_root)
        log(f"dyneval: {name} ({len(corpus.vocab)} words)")
        model, info = _load_or_train(settings, name, corpus, root, device, progress)
        seconds[f"{name}_train"] = info.pop("train_seconds", 0.0)
        gs = settings.gradient_stats
        ms = {"full": mean_squared_gradients(model, corpus.train.to(device), batch_size=gs["batch_size"], bptt=gs["bptt"],
                                             max_batches=gs["max_batches"]),
              "sparse": mean_squared_gradients(model, corpus.train.to(device), batch_size=gs["batch_size"], bptt=gs["bptt"],
                                               max_batches=gs["max_batches"], sparse_units=settings.sparse_units)}
        valid = _prefix(corpus.valid, settings.valid_tokens).to(device)
        test = _prefix(corpus.test, settings.test_tokens).to(device)
        tick_eval = time.time()
        table = _corpus_table(settings, model, valid, test, ms, log)
        seconds[f"{name}_table"] = round(time.time() - tick_eval, 1)
        results["corpora"][name] = {"vocab_size": len(corpus.vocab), **info, "valid_tokens": valid.numel() - 1,
                                    "test_tokens": test.numel() - 1, **table}
        models[name], stats[name] = (model, corpus), ms
        seconds[name] = round(time.time() - tick, 1)

    tick = time.time()
    opt_name = settings.optimizers["corpus"]
    model, corpus = models[opt_name]
    log(f"dyneval: optimizer study on {opt_name}")
    valid = _prefix(corpus.valid, settings.optimizers["valid_tokens"]).to(device)
    results["optimizers"] = _optimizer_study(settings, model, valid, stats[opt_name]["full"], log)
    seconds["optimizers"] = round(time.time() - tick, 1)

    tick = time.time()
    ts_name = settings.timescale["corpus"]
    model, corpus = models[ts_name]
    log(f"dyneval: time scales on {ts_name}")
    results["timescale"] = _timescale(settings, model, corpus.test.to(device), results["corpora"][ts_name],
                                      stats[ts_name], log)
    seconds["timescale"] = round(time.time() - tick, 1)

    tick = time.time()
    rw_name = related_words_settings(settings)["corpus"]
    model, corpus = models[rw_name]
    log(f"dyneval: related words on {rw_name}")
    results["related_words"] = _related_words(settings, model, corpus, _prefix(corpus.test, settings.test_tokens).to(device),
                                              results["corpora"][rw_name], stats[rw_name], log)
    seconds["related_words"] = round(time.time() - tick, 1)

    tick = time.time()
    model, corpus = models[opt_name]
    log(f"dyneval: amount and locality of gradient statistics on {opt_name}")
    results["statistics_amount"] = _statistics_amount(settings, model, corpus, device, log)
    seconds["statistics_amount"] = round(time.time() - tick, 1)
    tick = time.time()
    results["statistics_locality"] = _statistics_locality(settings, model, corpus, device, results["statistics_amount"], log)
    seconds["statistics_locality"] = round(time.time() - tick, 1)

    path = Path(out) if out is not None else results_path(root, "dyneval", profile)
    write_json_atomic(path, json_safe(results))
    record = provenance(root, profile, json_safe(vars(settings)), pinned_checksums(*settings.corpora), started,
                        code=code_hash(__name__))
    write_json_atomic(path.with_name(path.stem + ".provenance.json"), {**record, "seconds": seconds})
    return path


def tune_table_row(corpus_name: str, row: str = "global_rms_rms_decay", *, profile: str | None = None,
                   grid: Mapping[str, Sequence[float]] | None = None,
                   ranges: Mapping[str, tuple[float, float]] | None = None, search: str = "grid", trials: int = 20,
                   seed: int = 0, valid_tokens: int | None = None, checkpoint: str | None = None,
                   data_root: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Tune one row of Krause Tables 4.1/4.2 (``TABLE_ROWS``) on a validation prefix; returns the trials and best.

    The model is the ``dyneval`` experiment's LM for the corpus under ``profile``: ``checkpoint`` (a Trainer
    checkpoint of that architecture), else the experiment's own checkpoint or trained run under
    ``runs/dyneval/<corpus>``. ``grid`` defaults to the profile's grid for the row; ``search="optuna"`` samples
    ``ranges``, by default Melis Table 2.6 (global RMS rows) or the grid's span widened 10x each way. Bad rows,
    corpora and grids are rejected before any data is loaded.
    """
    import dataclasses
    from pathlib import Path

    from paperlib.experiments.common.config import active_profile, experiment_params, load_params, repo_root, section_params
    from paperlib.data import load_corpus
    from paperlib.search_spaces import get_space

    rows = {key: (label, fixed, grid_name) for key, label, fixed, grid_name in TABLE_ROWS if grid_name is not None}
    if row not in rows:
        raise ValueError(f"unknown row {row!r}; tunable rows: {', '.join(rows)}")
    label, fixed, grid_name = rows[row]
    params = load_params()
    profile = active_profile(profile, params)
    settings = experiment_params("dyneval", profile, params)
    if corpus_name not in settings.corpora:
        raise ValueError(f"corpus {corpus_name!r} is not in experiments.dyneval.{profile}.corpora {settings.corpora}")
    grid = dict(grid) if grid else dict(settings.grids[grid_name])
    ranges = dict(ranges or {})
    if checkpoint:
        settings = dataclasses.replace(settings, checkpoints={**settings.checkpoints,
                                                              corpus_name: str(Path(checkpoint).resolve())})
    root = repo_root()
    device = setup_stage(profile, params)
    corpus = load_corpus(corpus_name, Path(data_root) if data_root else root / section_params("data", params).root)
    model, _ = _load_or_train(settings, corpus_name, corpus, root, device, progress)

    fixed = _row_settings(row, fixed, settings)
    if fixed["rule"] == "global_rms":
        gs = settings.gradient_stats
        fixed["ms_g"] = mean_squared_gradients(
            model, corpus.train.to(device), batch_size=gs["batch_size"], bptt=gs["bptt"],
            max_batches=gs["max_batches"], sparse_units=fixed.get("sparse_units"))
    if search == "optuna" and not ranges:
        if fixed["rule"] == "global_rms":
            table = get_space("dyneval_word")
            ranges = {h.name: (h.low, h.high) for h in table.hyperparameters if h.name in grid}
        else:
            ranges = {k: (min(v) / 10, max(v) * 10) for k, v in grid.items()}
    valid = _prefix(corpus.valid, settings.valid_tokens if valid_tokens is None else valid_tokens).to(device)
    tuned = tune_dynamic_evaluation(model, valid, grid=grid, ranges=ranges, search=search, n_trials=trials, seed=seed,
                                    **fixed)
    fixed.pop("ms_g", None)
    return {"row": row, "label": label, "corpus": corpus_name, "profile": profile, "fixed": fixed, "search": search,
            "best": tuned.best, "valid_nll": tuned.nll, "valid_tokens": valid.numel() - 1, "trials": tuned.trials}
