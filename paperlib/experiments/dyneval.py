"""The dynamic-evaluation experiment (stage ``dyneval``): Krause Tables 4.1/4.2, 5.1-5.7 and Figure 5.1 at small scale.

Trains (or loads) a word-level LM per corpus, then compares static evaluation, the update rules of
:mod:`paperlib.dyneval` with their hyperparameters tuned on validation data, sparse dynamic evaluation and the
neural cache (:mod:`paperlib.cache`), and runs the chapter-5 studies (momentum, adaptive rules, epsilon, seen and
unseen words, related words, amount and locality of the gradient statistics). The methods live in
:mod:`paperlib.dyneval`; this module only turns ``params.yaml`` settings into ``results/dyneval.json``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch
from torch import Tensor, nn

from paperlib.data.batching import batchify, num_windows
from paperlib.device import load_checkpoint
from paperlib.dyneval import (DynamicEvalResult, Params, dynamic_evaluate, finite_nll, learning_rate_sweep,
                              mean_squared_gradients, probe_updates, related_words, static_evaluate,
                              tune_dynamic_evaluation)
from paperlib.experiments.code_hash import code_hash
from paperlib.experiments.config import register_experiment
from paperlib.experiments.stage import setup_stage

# Perplexities (valid, test) of the AWD-LSTM rows of Krause Table 4.1 (PTB, 24M) and Table 4.2
# (WikiText-2, 33M); the neural cache row is AWD-LSTM + neural cache (Merity et al., 2018b) from the
# same tables. Sparse dynamic evaluation has no word-level result in the thesis (Table 4.4: enwik8 test
# bits/char 1.24 static, 1.13 sparse with 250k adaptation parameters, 1.08 full).
PAPER_TABLES: dict[str, dict[str, tuple[float, float] | None]] = {
    "ptb": {
        "static": (59.8, 57.7),
        "traditional_sgd": (54.9, 53.5),
        "sgd": (54.7, 53.3),
        "sgd_decay": (54.0, 52.4),
        "global_rms_decay": (52.7, 52.0),
        "global_rms_rms_decay": (51.6, 51.1),
        "sparse": None,
        "neural_cache": (53.9, 52.8),
    },
    "wikitext2": {
        "static": (68.9, 66.1),
        "traditional_sgd": (51.6, 49.0),
        "sgd": (51.5, 48.8),
        "sgd_decay": (49.8, 47.4),
        "global_rms_decay": (46.9, 44.7),
        "global_rms_rms_decay": (46.4, 44.3),
        "sparse": None,
        "neural_cache": (53.8, 52.0),
    },
}
PAPER_ENWIK8_SPARSE = {"static": 1.24, "sparse": 1.13, "dynamic": 1.08}
# PTB validation perplexities of Krause §5.4 (static 59.7).
PAPER_STATIC_VALID_PTB = 59.7
PAPER_MOMENTUM = {0.0: 54.7, 0.5: 54.8, 0.75: 55.0, 0.875: 55.3, 0.9375: 55.7, 0.96875: 56.2, 0.984375: 56.7}  # Table 5.3
PAPER_ADAPTIVE = {  # Table 5.4
    "rmsprop_alpha_0.9": 59.1, "rmsprop_alpha_0.99": 58.6, "rmsprop_alpha_0.999": 58.1,
    "adam_mu_0.9": 58.1, "adam_mu_0.0": 58.0, "sgd": 54.7,
}
PAPER_EPSILON = {1e-6: 57.5, 1e-5: 56.3, 1e-4: 55.2, 1e-3: 54.6, 1e-2: 54.4, 1e-1: 54.6, 1.0: 54.7, 10.0: 54.7}  # Table 5.5
PAPER_EPSILON_BASELINES = {"sgd": 54.7, "global_rms": 52.7}
PAPER_SEEN_UNSEEN = {"static": (3.24, 6.92), "dynamic": (2.78, 6.99), "neural_cache": (2.91, 7.06)}  # Table 5.1, nats
PAPER_UNSEEN_SHARE = 0.426  # §5.2: share of unseen words on which dynamic evaluation beats static (the cache: none)
# Table 5.2 (WikiText-2 test, tied embeddings): an update on the segment containing "production" in the
# context below; word -> (embedding cosine with "production", Δ log p). The column is headed "cos distance"
# but holds cosine similarities (1.00 for the target); the median row is over the whole vocabulary.
PAPER_RELATED_WORDS = {
    "production": (1.00, 2.42), "development": (0.55, 1.14), "construction": (0.53, 1.29), "filming": (0.52, 0.80),
    "recording": (0.50, 1.27), "photography": (0.46, 0.15), "release": (0.45, 1.25), "performance": (0.45, 1.01),
    "design": (0.44, 0.90), "work": (0.44, 1.23), "productions": (0.44, 0.50),
}
PAPER_RELATED_WORDS_MEDIAN = (-0.02, -0.66)  # (cosine, Δ log p)
PAPER_RELATED_WORDS_CONTEXT = ("He appeared on a 2006 episode of the television series , Doctors, followed by a role "
                               "in the 2007 theatre production")
# Tables 5.6 and 5.7 (PTB validation perplexity; both captions in the thesis repeat Table 5.4's by mistake).
# Global RMS has no decay prior here (as in Table 5.5); RMSprop is the ε = 0.01 row of Table 5.5.
PAPER_STATISTICS_AMOUNT = {"static": 59.7, "rmsprop": 54.4, 0.01: 52.5, 0.1: 52.5, 1.0: 52.7}  # keys: data fraction
PAPER_STATISTICS_LOCALITY = {"static": 59.7, "rmsprop": 54.4, "global_rms": 52.7, "nonlocal_rmsprop": 52.6}

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


def _require_keys(where: str, block: Mapping[str, Any], required: Sequence[str], optional: Sequence[str] = ()) -> None:
    missing = [k for k in required if k not in block]
    unknown = sorted(set(block) - set(required) - set(optional))
    if missing or unknown:
        raise ValueError(f"{where}: needs keys {list(required)} (optional {list(optional)}); "
                         f"missing {missing}, unknown {unknown}")


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

    def __post_init__(self) -> None:
        from paperlib.data.corpora import CORPORA
        from paperlib.models import CELL_OPTIONS, VALID_CELLS
        from paperlib.train import TrainConfig

        bad = [c for c in self.corpora if c not in PAPER_TABLES]
        if not self.corpora or bad:
            raise ValueError(f"corpora must be among {', '.join(PAPER_TABLES)} (word level); got {self.corpora}")
        _require_keys("model", self.model, ("cell", "hidden_size", "num_layers"), ("options",))
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
        if self.segment_len < 1 or self.sparse_units < 1 or self.threads < 1:
            raise ValueError("segment_len, sparse_units and threads must be >= 1")
        _require_keys("gradient_stats", self.gradient_stats, ("batch_size", "bptt", "max_batches"))
        _require_keys("grids", self.grids, GRID_NAMES)
        for family, grid in self.grids.items():
            unknown = sorted(set(grid) - {"lr", "decay", "eps"})
            if unknown or "lr" not in grid or not all(isinstance(v, list) and v for v in grid.values()):
                raise ValueError(f"grids.{family}: needs non-empty lists for 'lr' (and optionally 'decay', 'eps'); got {grid}")
        if self.search not in ("grid", "coordinate"):
            raise ValueError(f"search must be 'grid' or 'coordinate', got {self.search!r}")
        _require_keys("cache", self.cache, ("cache_length", "theta", "lam"))
        _require_keys("optimizers", self.optimizers,
                      ("corpus", "valid_tokens", "momentum", "rmsprop_alpha", "adam_momentum", "rmsprop_eps",
                       "lr_start", "lr_factor", "max_evals"))
        if self.optimizers["corpus"] not in self.corpora:
            raise ValueError(f"optimizers.corpus must be one of corpora {self.corpora}")
        _require_keys("optimizers.lr_start", self.optimizers["lr_start"], ("sgd", "rmsprop", "adam", "global_rms"))
        _require_keys("timescale", self.timescale, ("corpus", "sequences", "length", "bin", "stream_batch"))
        if self.timescale["corpus"] not in self.corpora:
            raise ValueError(f"timescale.corpus must be one of corpora {self.corpora}")
        bad = sorted(set(self.checkpoints) - set(self.corpora))
        if bad or any(c not in CORPORA for c in self.checkpoints):
            raise ValueError(f"checkpoints may only name corpora of this experiment {self.corpora}; got {bad}")
        _require_keys("related_words", self.related_words, (), tuple(RELATED_WORDS_DEFAULTS))
        rw = related_words_settings(self)
        if rw["corpus"] not in self.corpora:
            raise ValueError(f"related_words.corpus must be one of corpora {self.corpora}, got {rw['corpus']!r}")
        rows = [key for key, _, fixed, _ in TABLE_ROWS if "rule" in fixed and key != "sparse"]
        if rw["row"] not in rows:
            raise ValueError(f"related_words.row must name a full dynamic-evaluation row of Tables 4.1/4.2 ({', '.join(rows)}); "
                             f"got {rw['row']!r}")
        if min(rw["top"], rw["min_count"], rw["min_length"], rw["min_context"]) < 1 or rw["extra_targets"] < 0:
            raise ValueError("related_words: top, min_count, min_length and min_context must be >= 1, extra_targets >= 0")
        _require_keys("statistics_study", self.statistics_study, (), tuple(STATISTICS_STUDY_DEFAULTS))
        st = statistics_study_settings(self)
        if not st["fractions"] or any(not 0.0 < f <= 1.0 for f in st["fractions"]) or 1.0 not in st["fractions"]:
            raise ValueError(f"statistics_study.fractions must lie in (0, 1] and include 1.0, got {st['fractions']}")
        if st["source"] not in ("train", "test"):
            raise ValueError(f"statistics_study.source must be 'train' or 'test' (not the evaluated split), "
                             f"got {st['source']!r}")
        if (st["batches"] is not None and st["batches"] < 1) or st["offset"] < 0 or st["max_evals"] < 2:
            raise ValueError("statistics_study: batches must be >= 1 or null, offset >= 0 and max_evals >= 2")
        _require_keys("statistics_study.lr_start", self.statistics_study.get("lr_start") or {}, (),
                      ("rmsprop", "global_rms", "nonlocal_rmsprop"))
        if not all(v > 0 for v in st["lr_start"].values()):
            raise ValueError(f"statistics_study.lr_start values must be positive, got {st['lr_start']}")
        eps = st["rmsprop_eps"]
        if not st["lr_factor"] > 1 or not isinstance(eps, list) or not eps or not all(e > 0 for e in eps):
            raise ValueError(f"statistics_study: lr_factor must be > 1 and rmsprop_eps a non-empty list of positive ε; "
                             f"got {st['lr_factor']}, {eps}")


# Defaults of the optional blocks; None: taken from the other settings (see the two functions below).
RELATED_WORDS_DEFAULTS: dict[str, Any] = {
    "corpus": None,  # the timescale corpus (WikiText-2, as in the thesis)
    "word": "production",  # the thesis' target: its first occurrence in the test prefix, if any
    "row": "global_rms_rms_decay",  # the Tables 4.1/4.2 row whose tuned settings make the update
    "top": 10,
    "min_count": 50,  # the fallback target rule (also picks the extra targets): training count,
    "min_length": 6,  # letters only and at least this long,
    "min_context": 20,  # and at least this many test tokens before it
    "extra_targets": 30,
}
STATISTICS_STUDY_DEFAULTS: dict[str, Any] = {
    "fractions": [0.01, 0.1, 1.0],
    "batches": None,  # 100% of the training batches: gradient_stats.max_batches (all batches if that is null)
    "rmsprop_eps": [0.01],  # RMSprop's ε for the baselines and non-local RMSprop (the thesis: 0.01)
    "source": "train",  # non-local RMSprop's statistics stream: a piece of this split ...
    "offset": 0,  # ... starting at this token
    "valid_tokens": None,  # None: the optimizers' value
    "lr_factor": None,
    "max_evals": None,
    "lr_start": None,  # {rmsprop, global_rms, nonlocal_rmsprop}: None or missing keys from optimizers.lr_start
}


def related_words_settings(settings) -> dict[str, Any]:
    """The ``related_words`` block with defaults filled in."""
    out = {**RELATED_WORDS_DEFAULTS, **settings.related_words}
    if out["corpus"] is None:
        out["corpus"] = settings.timescale["corpus"]
    return out


def statistics_study_settings(settings) -> dict[str, Any]:
    """The ``statistics_study`` block with defaults filled in (from ``optimizers`` and ``gradient_stats``)."""
    out = {**STATISTICS_STUDY_DEFAULTS, **settings.statistics_study}
    if out["batches"] is None:
        out["batches"] = settings.gradient_stats["max_batches"]
    for key in ("valid_tokens", "lr_factor", "max_evals"):
        if out[key] is None:
            out[key] = settings.optimizers[key]
    # non-local RMSprop's statistics never contain the current gradient, so its steps are unbounded like
    # global RMS's rather than at most η/√(1-α) like RMSprop's: its sweep starts where global RMS's does
    starts = settings.optimizers["lr_start"]
    defaults = {"rmsprop": starts["rmsprop"], "global_rms": starts["global_rms"], "nonlocal_rmsprop": starts["global_rms"]}
    out["lr_start"] = {**defaults, **(out["lr_start"] or {})}
    return out




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
    forget_stale_run(run_dir, {"model": _jsonable(spec), "train": _jsonable(settings.train),
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
    """Tables 4.1/4.2: every row tuned on the validation prefix, then evaluated on the test prefix."""
    rows = []
    for key, label, fixed, grid_name in TABLE_ROWS:
        if key == "static":
            best: dict[str, Any] = {}
            valid_nll = static_evaluate(model, valid).mean_nll()
            test_nll = static_evaluate(model, test).mean_nll()
            trials: list[dict[str, Any]] = []
        elif key == "neural_cache":
            from paperlib.cache import neural_cache_losses, tune_neural_cache

            tuned = tune_neural_cache(model, valid, cache_lengths=settings.cache["cache_length"],
                                      thetas=settings.cache["theta"], lams=settings.cache["lam"])
            best = {"cache_length": tuned.cache_length, "theta": tuned.theta, "lam": tuned.lam}
            valid_nll, trials = tuned.nll, tuned.trials
            test_nll = float(neural_cache_losses(model, test, **best).mean())
        else:
            base = _row_settings(key, fixed, settings)
            needs_ms = base["rule"] == "global_rms"
            if needs_ms:
                base["ms_g"] = ms["sparse" if key == "sparse" else "full"]
            tuned = tune_dynamic_evaluation(model, valid, grid=settings.grids[grid_name], search=settings.search, **base)
            best, valid_nll, trials = tuned.best, tuned.nll, tuned.trials
            test_nll = dynamic_evaluate(model, test, **{**base, **best}).mean_nll()
            base.pop("ms_g", None)
            best = {**base, **best}
        rows.append({"key": key, "label": label, "settings": best, "valid_nll": valid_nll, "test_nll": test_nll,
                     "valid_ppl": _ppl(valid_nll), "test_ppl": _ppl(test_nll), "trials": trials})
        log(f"  {label:48s} valid ppl {_ppl(valid_nll):8.2f}  test ppl {_ppl(test_nll):8.2f}")
    return {"rows": rows}


def _lr_sweep(model: nn.Module, valid: Tensor, segment_len: int, label: str, start: float, factor: float,
              max_evals: int, log, **kwargs: Any) -> dict[str, Any]:
    """One row of the §5.4 studies: dynamic evaluation on ``valid`` with the learning rate swept (§5.4.1)."""

    def evaluate(lr: float) -> float:
        return finite_nll(dynamic_evaluate(model, valid, lr=lr, segment_len=segment_len, **kwargs))

    lr, nll, trials = learning_rate_sweep(evaluate, start, factor, max_evals)
    log(f"  {label:40s} lr {lr:9.3g}  valid ppl {_ppl(nll):8.2f}  ({len(trials)} evaluations)")
    settings_out = {k: v for k, v in kwargs.items() if k not in ("ms_g", "statistics_tokens")}
    return {"label": label, "settings": settings_out, "lr": lr, "valid_nll": nll, "valid_ppl": _ppl(nll),
            "sweep": trials}


def _rmsprop_start(start: float, eps: float) -> float:
    """For ε well above √MS, RMSprop is SGD with learning rate η/ε (§5.4.3): start the sweep proportionally higher."""
    return start * max(1.0, eps / 1e-3)


def _optimizer_study(settings, model: nn.Module, valid: Tensor, ms_full: Params, log) -> dict[str, Any]:
    """Krause §5.4 at small scale: each optimizer setting with its own learning-rate sweep (Tables 5.3-5.5)."""
    opt = settings.optimizers

    def sweep(label: str, start: float, **kwargs: Any) -> dict[str, Any]:
        return _lr_sweep(model, valid, settings.segment_len, label, start, opt["lr_factor"], opt["max_evals"], log,
                         **kwargs)

    starts = opt["lr_start"]
    static = static_evaluate(model, valid).mean_nll()
    momentum = [sweep(f"SGD, momentum {mu}", starts["sgd"], rule="sgd", momentum=mu) for mu in opt["momentum"]]
    sgd = next((r for r, mu in zip(momentum, opt["momentum"]) if mu == 0.0), None) or sweep("SGD", starts["sgd"], rule="sgd")
    adaptive = [sweep(f"RMSprop, alpha {a}", starts["rmsprop"], rule="rmsprop", alpha=a) for a in opt["rmsprop_alpha"]]
    adaptive += [sweep(f"Adam, alpha 0.999, mu {mu}", starts["adam"], rule="adam", alpha=0.999, momentum=mu)
                 for mu in opt["adam_momentum"]]
    epsilon = [sweep(f"RMSprop, eps {eps:g}", _rmsprop_start(starts["rmsprop"], eps), rule="rmsprop", eps=eps)
               for eps in opt["rmsprop_eps"]]
    global_rms = sweep("global RMS (no decay)", starts["global_rms"], rule="global_rms", ms_g=ms_full)
    return {"corpus": opt["corpus"], "valid_tokens": valid.numel() - 1, "static_valid_nll": static,
            "static_valid_ppl": _ppl(static), "momentum": momentum, "adaptive": adaptive, "sgd": sgd,
            "epsilon": epsilon, "global_rms": global_rms}


def _timescale(settings, model: nn.Module, test: Tensor, table: dict[str, Any], ms: dict[str, Params], log) -> dict[str, Any]:
    """Figure 5.1 and Table 5.1: loss against position on independent test sequences, and seen/unseen words."""
    from paperlib.cache import neural_cache_losses

    ts = settings.timescale
    count, length = ts["sequences"], ts["length"]
    if count * length > test.numel():
        raise ValueError(f"timescale needs {count} x {length} test tokens, the split has {test.numel()}")
    sequences = test[: count * length].view(count, length)  # [K, L], consecutive non-overlapping pieces
    rows = {r["key"]: r for r in table["rows"]}
    dyn_settings = {k: v for k, v in rows["global_rms_rms_decay"]["settings"].items()}
    cache_settings = rows["neural_cache"]["settings"]
    static = static_evaluate(model, sequences).losses
    parts = []
    for begin in range(0, count, ts["stream_batch"]):
        chunk = sequences[begin : begin + ts["stream_batch"]]
        parts.append(dynamic_evaluate(model, chunk, ms_g=ms["full"], batched=True, **dyn_settings).losses)
    dynamic = torch.cat(parts)
    cache = neural_cache_losses(model, sequences, **cache_settings).float()
    curves = {name: DynamicEvalResult(losses).curve(ts["bin"]).tolist()
              for name, losses in (("static", static), ("dynamic", dynamic), ("neural_cache", cache))}
    # Table 5.1: second half of each sequence, words seen before in the sequence vs first occurrences
    targets = sequences[:, 1:]
    seen = torch.zeros_like(targets, dtype=torch.bool)
    for k in range(count):
        first: dict[int, int] = {}
        for t, w in enumerate(targets[k].tolist()):
            seen[k, t] = w in first or w == int(sequences[k, 0])
            first.setdefault(w, t)
    half = torch.zeros_like(seen)
    half[:, (length - 1) // 2 :] = True
    split = {}
    for name, losses in (("static", static), ("dynamic", dynamic), ("neural_cache", cache)):
        losses = losses.double()
        split[name] = {"seen": float(losses[half & seen].mean()), "unseen": float(losses[half & ~seen].mean())}
    unseen = half & ~seen
    split["dynamic_better_than_static_on_unseen"] = float((dynamic.double()[unseen] < static.double()[unseen]).double().mean())
    split["cache_better_than_static_on_unseen"] = float((cache.double()[unseen] < static.double()[unseen]).double().mean())
    log(f"  time scales on {count} sequences of {length}: final-bin loss static {curves['static'][-1]:.3f}, "
        f"dynamic {curves['dynamic'][-1]:.3f}, cache {curves['neural_cache'][-1]:.3f}")
    return {"corpus": ts["corpus"], "sequences": count, "length": length, "bin": ts["bin"], "curves": curves,
            "seen_unseen": split, "seen_share": float(seen[half].double().mean())}


def choose_targets(test: Tensor, vocab, train_counts: Tensor, *, word: str | None, min_count: int, min_length: int,
                   min_context: int, extra: int) -> tuple[int, list[int]]:
    """The Table 5.2 target position in ``test`` and up to ``extra`` further probe positions.

    The target is the first occurrence of ``word`` (the thesis' "production") after at least one token of
    context; otherwise (word absent from the vocabulary or the test prefix) the first position with at least
    ``min_context`` tokens before it whose word is alphabetic, ``min_length`` letters or longer and seen
    ``min_count`` times in training, a crude stand-in for "a frequent content word". The extra positions are
    the next positions after the target satisfying the same rule.
    """

    def qualifies(i: int) -> bool:
        token = vocab.itos[i]
        return token.isalpha() and len(token) >= min_length and int(train_counts[i]) >= min_count

    ids = test.tolist()
    target = None
    if word is not None and word in vocab:
        target = next((t for t in range(1, len(ids)) if ids[t] == vocab.stoi[word]), None)
    if target is None:
        target = next((t for t in range(min_context, len(ids)) if qualifies(ids[t])), None)
    if target is None:
        raise ValueError(f"no test position qualifies as a Table 5.2 target (word {word!r}, min_count {min_count}, "
                         f"min_length {min_length}, min_context {min_context}) in {len(ids)} tokens")
    others = [t for t in range(target + 1, len(ids)) if qualifies(ids[t]) and ids[t] != ids[target]][:extra]
    return target, others


def _related_words(settings, model: nn.Module, corpus, test: Tensor, table: dict[str, Any], ms: dict[str, Params],
                   log) -> dict[str, Any]:
    """Table 5.2: the change of every word's log-probability after the update on a target's segment (§5.3)."""
    rw = related_words_settings(settings)
    counts = torch.bincount(corpus.train.cpu(), minlength=len(corpus.vocab))
    target, extra = choose_targets(test.cpu(), corpus.vocab, counts, word=rw["word"], min_count=rw["min_count"],
                                   min_length=rw["min_length"], min_context=rw["min_context"],
                                   extra=rw["extra_targets"])
    row = next(r for r in table["rows"] if r["key"] == rw["row"])
    update = dict(row["settings"])
    if update["rule"] == "global_rms":
        update["ms_g"] = ms["full"]
    probe = probe_updates(model, test, [target, *extra], **update)
    embedding = model.decoder.weight
    tied = embedding is getattr(getattr(model, "embedding", None), "weight", None)
    summaries = []
    for index, position in enumerate(probe.positions):
        word_id = int(test[position])
        summary = related_words(embedding, word_id, probe.delta[index], rw["top"])
        summary.update(position=position, word=corpus.vocab.itos[word_id])
        summaries.append(summary)
    main = summaries[probe.positions.index(target)]
    for r in main["rows"]:
        r["word"] = corpus.vocab.itos[r["id"]]
        r["log_prob_before"] = float(probe.before[probe.positions.index(target), r["id"]])
    context = corpus.vocab.decode(test[max(0, target - 20) : target + 1].tolist())
    others = [s for s in summaries if s is not main]
    log(f"  target {main['word']!r} at test position {target}: Δ log p {main['rows'][0]['delta']:+.3f}, top-{rw['top']} "
        f"mean {main['top_mean_delta']:+.3f}, vocabulary median {main['median']['delta']:+.3f}")
    return {
        "corpus": rw["corpus"], "position": target, "word": main["word"], "context": " ".join(context),
        "thesis_word": rw["word"] == main["word"], "embedding": "tied input/output" if tied else "output (untied)",
        "update": {k: v for k, v in update.items() if k != "ms_g"}, "top": rw["top"],
        "rows": main["rows"], "median": main["median"], "top_mean_delta": main["top_mean_delta"],
        "top_above_median": main["top_above_median"], "spearman": main["spearman"],
        "extra_targets": {
            "count": len(others),
            "top_mean_above_median": sum(s["top_mean_delta"] > s["median"]["delta"] for s in others),
            "mean_target_delta": _mean([s["rows"][0]["delta"] for s in others]),
            "mean_top_delta": _mean([s["top_mean_delta"] for s in others]),
            "mean_median_delta": _mean([s["median"]["delta"] for s in others]),
            "mean_spearman": _mean([s["spearman"] for s in others]),
            "words": [s["word"] for s in others],
        },
    }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _statistics_amount(settings, model: nn.Module, corpus, device, log) -> dict[str, Any]:
    """Table 5.6: global RMS (no decay prior) with MS_g from 1%, 10% and 100% of the training batches (§5.4.4.1).

    100% is the profile's number of gradient-statistics batches (``statistics_study.batches``; all
    training batches when null, as in the thesis); a fraction f uses the first max(1, round(f N)) of them.
    Every row has its own learning-rate sweep; static and RMSprop (each ε of ``rmsprop_eps``; the thesis
    used 0.01, its best ε in Table 5.5) are the baselines.
    """
    st, gs = statistics_study_settings(settings), settings.gradient_stats
    valid = _prefix(corpus.valid, st["valid_tokens"]).to(device)
    train = corpus.train.to(device)
    available = num_windows(batchify(train, gs["batch_size"]), gs["bptt"])
    full = available if st["batches"] is None else min(st["batches"], available)

    def sweep(label: str, start: float, **kwargs: Any) -> dict[str, Any]:
        return _lr_sweep(model, valid, settings.segment_len, label, start, st["lr_factor"], st["max_evals"], log, **kwargs)

    static = static_evaluate(model, valid).mean_nll()
    rmsprop = [sweep(f"RMSprop, eps {eps:g}", _rmsprop_start(st["lr_start"]["rmsprop"], eps), rule="rmsprop", eps=eps)
               for eps in st["rmsprop_eps"]]
    rows = []
    for fraction in sorted(st["fractions"]):
        batches = gradient_batches(fraction, full)
        ms = mean_squared_gradients(model, train, batch_size=gs["batch_size"], bptt=gs["bptt"], max_batches=batches)
        row = sweep(f"global RMS ({100 * fraction:g}% of the statistics)", st["lr_start"]["global_rms"],
                    rule="global_rms", ms_g=ms)
        row.update(fraction=fraction, batches=batches, tokens=batches * gs["batch_size"] * gs["bptt"])
        rows.append(row)
    return {"corpus": settings.optimizers["corpus"], "valid_tokens": valid.numel() - 1, "static_valid_nll": static,
            "static_valid_ppl": _ppl(static), "rmsprop": rmsprop, "global_rms": rows, "full_batches": full,
            "training_batches": available, "batch_size": gs["batch_size"], "bptt": gs["bptt"]}


def gradient_batches(fraction: float, full: int) -> int:
    """Number of batches for a fraction of ``full`` gradient-statistics batches: max(1, round(f N))."""
    if not 0.0 < fraction <= 1.0 or full < 1:
        raise ValueError(f"need 0 < fraction <= 1 and full >= 1, got {fraction}, {full}")
    return max(1, round(fraction * full))


def _statistics_locality(settings, model: nn.Module, corpus, device, amount: dict[str, Any], log) -> dict[str, Any]:
    """Table 5.7: non-local RMSprop (statistics from an independent stream) vs RMSprop and global RMS (§5.4.4.2).

    The statistics stream is the piece of ``statistics_study.source`` starting at ``offset`` with the length of
    the validation prefix; one row per RMSprop ε (α = 0.99), each beside the RMSprop row of the same ε.
    Static, RMSprop and global RMS (100% of the statistics, no decay prior) are shared with Table 5.6.
    """
    st = statistics_study_settings(settings)
    valid = _prefix(corpus.valid, st["valid_tokens"]).to(device)
    split = getattr(corpus, st["source"])
    if st["offset"] + valid.numel() > split.numel():
        raise ValueError(f"statistics_study: the {st['source']} split has {split.numel()} tokens, fewer than "
                         f"offset {st['offset']} + {valid.numel()}")
    other = split[st["offset"] : st["offset"] + valid.numel()].to(device)
    nonlocal_rows = []
    for eps in st["rmsprop_eps"]:
        start = _rmsprop_start(st["lr_start"]["nonlocal_rmsprop"], eps)
        nonlocal_rows.append(_lr_sweep(model, valid, settings.segment_len, f"non-local RMSprop, eps {eps:g}", start,
                                       st["lr_factor"], st["max_evals"], log, rule="nonlocal_rmsprop", eps=eps,
                                       statistics_tokens=other))
    global_rms = next(r for r in amount["global_rms"] if r["fraction"] == 1.0)
    return {"corpus": amount["corpus"], "valid_tokens": amount["valid_tokens"], "static_valid_nll": amount["static_valid_nll"],
            "static_valid_ppl": amount["static_valid_ppl"], "rmsprop": amount["rmsprop"], "global_rms": global_rms,
            "nonlocal_rmsprop": nonlocal_rows, "statistics_source": {"split": st["source"], "offset": st["offset"],
                                                                     "tokens": other.numel()}}


def _prefix(split: Tensor, tokens: int | None) -> Tensor:
    return split if tokens is None else split[: tokens + 1]


def run_dyneval(profile: str | None = None, progress: bool = True, out: str | None = None) -> Any:
    """Run the dynamic-evaluation experiment of ``params.yaml`` (profile ``profile``); returns the results path.

    Writes ``results/dyneval.json`` (numbers only; keys ``corpora``, ``optimizers``, ``timescale``,
    ``related_words``, ``statistics_amount``, ``statistics_locality``) and ``results/dyneval.provenance.json``
    (settings, versions, wall time per part). Trained models go to ``runs/dyneval/<corpus>/`` (resumable).
    """
    import time
    from pathlib import Path

    from paperlib.experiments.config import active_profile, experiment_params, load_params, repo_root, section_params
    from paperlib.data import load_corpus, pinned_checksums
    from paperlib.experiments.provenance import provenance
    from paperlib.atomic_files import write_json_atomic

    started = time.time()
    root = repo_root()
    params = load_params()
    profile = active_profile(profile, params)
    settings = experiment_params("dyneval", profile, params)
    torch.set_num_threads(settings.threads)
    device = setup_stage(profile, params)
    data_root = root / section_params("data", params).root
    seconds: dict[str, float] = {}

    def log(message: str) -> None:
        if progress:
            print(message, flush=True)

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

    path = Path(out) if out is not None else root / "results" / "dyneval.json"
    write_json_atomic(path, _jsonable(results))
    record = provenance(root, profile, _jsonable(vars(settings)), pinned_checksums(*settings.corpora), started,
                        code=code_hash(__name__))
    write_json_atomic(path.with_name(path.stem + ".provenance.json"), {**record, "seconds": seconds})
    return path


def _ppl(nll: float) -> float:
    """exp(nll), inf for a diverged (or overflowing) run."""
    return math.exp(nll) if nll < 700 else math.inf


def _jsonable(value: Any) -> Any:
    """Plain JSON: tuples to lists, non-finite floats (diverged runs) to null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


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

    from paperlib.experiments.config import active_profile, experiment_params, load_params, repo_root, section_params
    from paperlib.data import load_corpus, pinned_checksums
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
