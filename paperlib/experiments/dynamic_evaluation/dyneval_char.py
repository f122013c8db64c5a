"""Character-level dynamic evaluation and the mLSTM analyses of Krause's thesis, at small scale on PTB characters.

What this experiment reproduces (thesis chapters in brackets), all on Penn Treebank characters (vocab 50):

* Table 4.4 (§4.7.3): a one-layer mLSTM (the thesis' model for that table) with static evaluation, full
  dynamic evaluation (global RMS with an RMS decay prior, eq. 4.7, segments of n = 20 characters as in
  §4.5) and sparse dynamic evaluation (§4.6, eq. 4.8) that adapts only an H_s × H_s matrix M;
* Table 6.1 (§6.2.3): a small Transformer-XL-style LM (relative positions, eq. 6.2, and a segment memory)
  statically and dynamically evaluated (SGD and global RMS + RMS decay), segments aligned with the memory
  recurrence and backpropagation truncated to one segment;
* Table 6.4 (§6.3) and Fig. 5.2 right (§5.1): out-of-domain text - WikiText-2 mapped into the PTB character
  vocabulary (:func:`map_words_to_chars`) - with the dynamic-evaluation settings tuned in domain, as the
  thesis does (its GPT-2 settings were tuned on held-out web text, its Spanish run reused the enwik8 ones);
* Fig. 5.2 (§5.1): loss against the number of characters processed, static vs dynamic, averaged over
  independent test sequences (every sequence from the trained weights and a zero state);
* Fig. 3.3 (§3.5.2) and Melis §2.3.2: the recovery test of :mod:`paperlib.recovery` on a stacked LSTM, the
  mLSTM and the Mogrifier LSTM;
* Fig. 3.2 (§3.5.2), optionally: validation bits/char against parameter count for LSTM and mLSTM.

Dynamic evaluation itself is :mod:`paperlib.dyneval` (update rules, MS_g, tuning, sparse dynamic evaluation);
this module adds the character-level experiment and the out-of-domain text mapping. Sparse dynamic evaluation is
reported twice: ``sparse_recurrent`` is eq. (4.8) as the thesis writes it, h'_t = h_t + M h_t replacing h_t in
the recurrence and the output (:class:`paperlib.dyneval.RecurrentSparseAdaptation`, the default of
``dynamic_evaluate(sparse_units=...)``), and ``sparse_output`` the ablation with M on the output features only
(``sparse_mode="output"``, :class:`paperlib.dyneval.DecoderInputAdaptation`), which departs from eq. (4.8).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import Tensor, nn

from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.lm_runs import count_parameters, train_or_load as train_lm
from paperlib.experiments.common.runs import json_safe
from paperlib.experiments.common.config import register_experiment, require_keys
from paperlib.dyneval import (
    DynamicEvalResult,
    dynamic_evaluate,
    mean_squared_gradients,
    static_evaluate,
    tune_dynamic_evaluation,
)
from paperlib.experiments.dynamic_evaluation.out_of_domain_text import CharMapping, chars_to_lines, map_words_to_chars
from paperlib.experiments.common.stage import begin_stage, results_path
from paperlib.recovery import recovery_profile
from paperlib.reference.dynamic_evaluation import (DYNEVAL_CHAR_FIG_3_3, DYNEVAL_CHAR_FIG_5_2, DYNEVAL_CHAR_MELIS_RECOVERY,
                                        DYNEVAL_CHAR_TABLE_4_4, DYNEVAL_CHAR_TABLE_6_1, DYNEVAL_CHAR_TABLE_6_4)

EXPERIMENT = "dyneval_char"
LN2 = math.log(2.0)


# ---------------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------------

# Rows of the in-domain tables: key -> (label, fixed dynamic_evaluate settings, grid name).
ROWS: dict[str, tuple[str, dict[str, Any], str | None]] = {
    "static": ("static evaluation", {}, None),
    "sgd": ("dynamic eval (SGD)", {"rule": "sgd"}, "sgd"),
    "global_rms": ("dynamic eval (global RMS, RMS decay)", {"rule": "global_rms"}, "global_rms"),
    "sparse_recurrent": ("sparse dynamic eval (M in the recurrence, eq. 4.8)",
                         {"rule": "global_rms", "sparse_mode": "recurrent"}, "sparse"),
    "sparse_output": ("sparse dynamic eval (M on the output features)",
                      {"rule": "global_rms", "sparse_mode": "output"}, "sparse"),
}
GRIDS = ("sgd", "global_rms", "sparse")
# cells whose layers RecurrentSparseAdaptation wraps (eq. 4.8 inside the recurrence)
RECURRENT_SPARSE_CELLS = ("lstm", "mogrifier_lstm", "rlstm", "mogrifier_rlstm", "mlstm")


@register_experiment(EXPERIMENT)
@dataclass(frozen=True)
class DynEvalCharParams:
    """Character-level dynamic evaluation and the mLSTM analyses (Krause chs. 3-6) on PTB characters.

    ``models``: name -> {cell, hidden_size, num_layers, options, train (overrides of ``train``)}, each trained
    once with :class:`paperlib.train.Trainer` (resumable, under ``runs/dyneval_char/<name>``).
    ``rows``: model -> table rows among ``static``, ``sgd``, ``global_rms``, ``sparse_recurrent`` (cells of
    ``RECURRENT_SPARSE_CELLS``), ``sparse_output``; each dynamic row is tuned on ``valid_chars`` validation characters over its grid in
    ``grids`` (``sgd``: lr; ``global_rms``, ``sparse``: lr, decay, eps) and reported on ``test_chars``.
    ``ood_rows``: rows also evaluated on ``ood_chars`` characters of ``ood_corpus`` (with the in-domain settings).
    ``valid_chars``/``test_chars``/``ood_chars``: prefixes of the splits (null: all of it). ``test_block``: characters
    per block of the test and out-of-domain texts; every row keeps its loss per block, the units of the claims' paired
    bootstrap.
    ``timescale``: {model, sequences, length, bin, stream_batch} for Fig. 5.2. ``recovery``: {models, chars,
    fraction, horizon} for Fig. 3.3 (chars null: the whole test split). ``scaling``: {hidden_sizes: {model: [H, ...]},
    valid_chars, seeds} for Fig. 3.2 (models with an empty list are not swept; valid_chars null: the whole split;
    seeds, default 1: training seeds per model and size, ``seed`` and the ones after it, for a seed margin).
    """

    corpus: str
    ood_corpus: str
    models: dict
    train: dict
    rows: dict
    ood_rows: list[str]
    segment_len: int
    valid_chars: int | None
    test_chars: int | None
    ood_chars: int | None
    gradient_stats: dict
    grids: dict
    sparse_units: int
    timescale: dict
    recovery: dict
    scaling: dict
    test_block: int = 500
    search: str = "coordinate"
    seed: int = 0
    threads: int = 2

    def __post_init__(self) -> None:
        from paperlib.data.corpora import CORPORA
        from paperlib.models import CELL_OPTIONS, VALID_CELLS
        from paperlib.train import TrainConfig

        if self.corpus not in CORPORA or CORPORA[self.corpus].level != "char" or self.corpus in ("enwik8", "text8"):
            raise ValueError(f"corpus must be a line-based character corpus (ptb_char), got {self.corpus!r}")
        if self.ood_corpus not in CORPORA or self.ood_corpus in ("enwik8", "text8"):
            raise ValueError(f"ood_corpus must be a line-based corpus such as wikitext2, got {self.ood_corpus!r}")
        if not self.models:
            raise ValueError("models must name at least one model")
        for name, spec in self.models.items():
            require_keys(f"models.{name}", spec, ("cell", "hidden_size", "num_layers"), ("options", "train"))
            if spec["cell"] not in VALID_CELLS:
                raise ValueError(f"models.{name}.cell must be one of {', '.join(VALID_CELLS)}, got {spec['cell']!r}")
            unknown = sorted(set(spec.get("options", {})) - set(CELL_OPTIONS[spec["cell"]]))
            if unknown:
                raise ValueError(f"models.{name}.options: unknown {unknown}; valid: {', '.join(sorted(CELL_OPTIONS[spec['cell']]))}")
            try:
                TrainConfig(**{**self.train, **spec.get("train", {})})
            except TypeError as err:
                raise ValueError(f"train (with models.{name}.train): {err}") from None
        for name, keys in self.rows.items():
            if name not in self.models:
                raise ValueError(f"rows names model {name!r}; models: {', '.join(self.models)}")
            bad = [k for k in keys if k not in ROWS]
            if bad or not keys or keys[0] != "static":
                raise ValueError(f"rows.{name} must start with 'static' and use rows among {', '.join(ROWS)}; got {keys}")
            if "sparse_recurrent" in keys and self.models[name]["cell"] not in RECURRENT_SPARSE_CELLS:
                raise ValueError(f"rows.{name}: 'sparse_recurrent' needs a model among cells "
                                 f"{', '.join(RECURRENT_SPARSE_CELLS)}; {name} is {self.models[name]['cell']}")
        bad = [k for k in self.ood_rows if k not in ROWS]
        if bad or "static" not in self.ood_rows:
            raise ValueError(f"ood_rows must include 'static' and use rows among {', '.join(ROWS)}; got {self.ood_rows}")
        for name in ("segment_len", "sparse_units", "threads", "test_block"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("valid_chars", "test_chars", "ood_chars"):
            if getattr(self, name) is not None and getattr(self, name) < 2:
                raise ValueError(f"{name} must be >= 2 or null (the whole split), got {getattr(self, name)}")
        require_keys("gradient_stats", self.gradient_stats, ("batch_size", "bptt", "max_batches"))
        require_keys("grids", self.grids, GRIDS)
        for family, grid in self.grids.items():
            allowed = {"lr"} if family == "sgd" else {"lr", "decay", "eps"}
            if set(grid) - allowed or "lr" not in grid or not all(isinstance(v, list) and v for v in grid.values()):
                raise ValueError(f"grids.{family}: needs non-empty lists for {sorted(allowed)} ('lr' required); got {grid}")
        if self.search not in ("grid", "coordinate"):
            raise ValueError(f"search must be 'grid' or 'coordinate', got {self.search!r}")
        require_keys("timescale", self.timescale, ("model", "sequences", "length", "bin", "stream_batch"))
        if self.timescale["model"] not in self.rows or "global_rms" not in self.rows[self.timescale["model"]]:
            raise ValueError("timescale.model must be a model whose rows include 'global_rms'")
        if self.timescale["length"] % self.timescale["bin"] or self.timescale["length"] < 2:
            raise ValueError("timescale.length must be a multiple of timescale.bin")
        require_keys("recovery", self.recovery, ("models", "chars", "fraction", "horizon"))
        bad = [m for m in self.recovery["models"] if m not in self.models or self.models[m]["cell"] == "transformer"]
        if bad:
            raise ValueError(f"recovery.models must be recurrent models among {', '.join(self.models)}; got {bad}")
        if not 0 < self.recovery["fraction"] <= 1 or self.recovery["horizon"] < 1:
            raise ValueError("recovery.fraction must lie in (0, 1] and recovery.horizon be >= 1")
        chars = self.recovery["chars"]
        if chars is not None and chars <= self.recovery["horizon"] + 1:
            raise ValueError("recovery.chars must exceed recovery.horizon + 1, or be null (the whole test split)")
        require_keys("scaling", self.scaling, ("hidden_sizes", "valid_chars"), optional=("seeds",))
        for name, sizes in self.scaling["hidden_sizes"].items():
            if name not in self.models or not isinstance(sizes, list) or not all(isinstance(h, int) and h > 0 for h in sizes):
                raise ValueError(f"scaling.hidden_sizes.{name}: needs a model name and a list of positive hidden sizes")
        seeds = self.scaling.get("seeds", 1)
        if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
            raise ValueError(f"scaling.seeds must be a positive integer, got {seeds!r}")


# ---------------------------------------------------------------------------------------------
# The experiment
# ---------------------------------------------------------------------------------------------


def bits(result: DynamicEvalResult) -> float:
    """Mean loss in bits per character (inf for a diverged run)."""
    value = result.mean_nll()
    return value / LN2 if math.isfinite(value) else math.inf


def _build(spec: dict, vocab_size: int) -> nn.Module:
    from paperlib.models import build_lm

    return build_lm(spec["cell"], vocab_size, spec["hidden_size"], spec["num_layers"], **spec.get("options", {}))


def _train_or_load(name: str, spec: dict, settings: DynEvalCharParams, corpus, run_root: Path, device,
                   progress: bool, log, seed: int | None = None) -> tuple[nn.Module, dict[str, Any]]:
    """Train model ``name`` (resumably) or load it when its run folder already holds a finished run made with these
    settings by the current training and model code (:func:`paperlib.experiments.common.lm_runs.train_or_load`);
    ``seed`` (default: the stage's) seeds its initial weights and its batches."""
    from paperlib.train import TrainConfig

    seed = settings.seed if seed is None else seed
    config = TrainConfig(**{**settings.train, **spec.get("train", {}), "seed": seed})
    torch.manual_seed(seed)
    model = _build(spec, len(corpus.vocab))
    return train_lm(model, corpus, settings.corpus, spec, config, run_root / name, device, progress, log,
                    stage=EXPERIMENT, name=name,
                    summarize=lambda result: {"train_chars": result.tokens,
                                              "train_valid_bpc": result.best_valid_nll / LN2})


def _tuned_row(key: str, model: nn.Module, valid: Tensor, test: Tensor, settings: DynEvalCharParams,
               stats: dict[str, Any]) -> tuple[dict[str, Any], DynamicEvalResult, dict[str, Any]]:
    """One table row: tune on the validation prefix, evaluate on the test prefix. Returns (row, test result, call)."""
    label, fixed, grid_name = ROWS[key]
    n = settings.segment_len
    if key == "static":
        valid_res, test_res = static_evaluate(model, valid, segment_len=n), static_evaluate(model, test, segment_len=n)
        row = {"key": key, "label": label, "settings": {}, "adapted_parameters": 0, "valid_bpc": bits(valid_res),
               "test_bpc": bits(test_res), "trials": [], "test_blocks": test_res.block_means(settings.test_block)[0]}
        return row, test_res, {"model": model}
    call = {"segment_len": n, **fixed}
    if key in ("sgd", "global_rms"):
        adapted = count_parameters(model)
        if key == "global_rms":
            call["ms_g"] = stats["full"]()
    else:  # sparse_recurrent / sparse_output: only M of eq. (4.8) is adapted, one per stream
        call.update(sparse_units=settings.sparse_units, ms_g=stats[key]())
        adapted = settings.sparse_units**2
    grid = settings.grids[grid_name]
    grid = {"lr": grid["lr"], **grid}  # coordinate search tunes η first, the most important setting (§4.5)
    tuned = tune_dynamic_evaluation(model, valid, grid=grid, search=settings.search, **call)
    call.update(tuned.best)
    test_res = dynamic_evaluate(model, test, **call)
    shown = {k: v for k, v in call.items() if k != "ms_g"}
    trials = [{**t, "bpc": t["nll"] / LN2 if math.isfinite(t["nll"]) else None} for t in tuned.trials]
    row = {"key": key, "label": label, "settings": shown, "adapted_parameters": adapted,
           "valid_bpc": tuned.nll / LN2 if math.isfinite(tuned.nll) else math.inf, "test_bpc": bits(test_res),
           "trials": [{k: v for k, v in t.items() if k != "nll"} for t in trials],
           "test_blocks": test_res.block_means(settings.test_block)[0]}
    return row, test_res, {"model": model, **call}


def _gradient_stats(model: nn.Module, train: Tensor, settings: DynEvalCharParams) -> dict[str, Any]:
    """MS_g (eq. 4.4) for full, recurrent-sparse and output-sparse adaptation, each computed when first needed."""
    gs = settings.gradient_stats
    kwargs = {"batch_size": gs["batch_size"], "bptt": gs["bptt"], "max_batches": gs["max_batches"]}
    cache: dict[str, Any] = {}

    def once(key: str, make):
        def get():
            if key not in cache:
                cache[key] = make()
            return cache[key]
        return get

    sparse = {"sparse_units": settings.sparse_units, **kwargs}
    return {
        "full": once("full", lambda: mean_squared_gradients(model, train, **kwargs)),
        "sparse_recurrent": once("sparse_recurrent", lambda: mean_squared_gradients(model, train, **sparse)),
        "sparse_output": once("sparse_output", lambda: mean_squared_gradients(
            model, train, sparse_mode="output", **sparse)),
    }


def _curve(losses: Tensor, bin_size: int) -> list[float]:
    """Binned mean loss in bits against position (averaged over streams first)."""
    return (DynamicEvalResult(losses).curve(bin_size) / LN2).tolist()


def _sequence_curves(losses: Tensor, bin_size: int) -> list[list[float]]:
    """:func:`_curve` of each sequence ``[K, L-1]`` apart: the units of Fig. 5.2's bootstrap over sequences."""
    return [_curve(row, bin_size) for row in losses]


def _timescale(settings: DynEvalCharParams, model: nn.Module, call: dict[str, Any], streams: dict[str, Tensor],
               log) -> dict[str, Any]:
    """Fig. 5.2: static vs dynamic loss against characters processed, averaged over independent sequences."""
    ts = settings.timescale
    count, length = ts["sequences"], ts["length"]
    out: dict[str, Any] = {"model": ts["model"], "sequences": count, "length": length, "bin": ts["bin"], "curves": {}}
    dyn = {k: v for k, v in call.items() if k != "model"}
    for domain, ids in streams.items():
        if count * length > ids.numel():
            raise ValueError(f"timescale needs {count} x {length} characters of {domain} text, it has {ids.numel()}")
        sequences = ids[: count * length].view(count, length)  # [K, L], consecutive non-overlapping pieces
        static = static_evaluate(model, sequences, segment_len=settings.segment_len).losses
        parts = [dynamic_evaluate(model, sequences[b : b + ts["stream_batch"]], batched=True, **dyn).losses
                 for b in range(0, count, ts["stream_batch"])]
        dynamic = torch.cat(parts)  # [K, L-1]
        out["curves"][domain] = {"static": _curve(static, ts["bin"]), "dynamic": _curve(dynamic, ts["bin"]),
                                 "static_bpc": float(static.double().mean()) / LN2,
                                 "dynamic_bpc": float(dynamic.double().mean()) / LN2,
                                 "sequences": {"static": _sequence_curves(static, ts["bin"]),
                                               "dynamic": _sequence_curves(dynamic, ts["bin"])}}
        curves = out["curves"][domain]
        log(f"  time scales ({domain}): first bin static {curves['static'][0]:.3f} dynamic {curves['dynamic'][0]:.3f}, "
            f"last bin static {curves['static'][-1]:.3f} dynamic {curves['dynamic'][-1]:.3f} bits")
    return out


def _recovery_baseline(settings: DynEvalCharParams, models: Sequence[str]) -> str | None:
    """The model the recovery test compares the others with: the first plain LSTM, as Krause's Fig. 3.3."""
    return next((m for m in models if settings.models[m]["cell"] == "lstm"), None)


def run_dyneval_char(profile: str | None = None, progress: bool = True, out: str | None = None,
                     root: str | Path | None = None) -> Path:
    """Run experiment ``dyneval_char`` of ``params.yaml`` (profile ``profile``); returns the results path.

    Writes ``results/dyneval_char.json`` (or ``out``) and the provenance file beside it; trained models go to
    ``runs/dyneval_char/<model>/`` and are reused when their settings are unchanged.
    """
    from paperlib.data import DataError, get_corpus, is_fetched, load_corpus, pinned_checksums
    from paperlib.data.text import read_split_lines
    from paperlib.experiments.common.provenance import provenance
    from paperlib.atomic_files import write_json_atomic

    stage = begin_stage(EXPERIMENT, profile, root, progress)
    started, root, profile, device = stage.started, stage.root, stage.profile, stage.device
    settings: DynEvalCharParams = stage.settings
    data_root, log = stage.data_root, stage.log
    seconds: dict[str, float] = {}

    def tick(name: str, since: float) -> float:
        now = time.time()
        seconds[name] = round(now - since, 1)
        return now

    corpus = load_corpus(settings.corpus, data_root)
    vocab = corpus.vocab
    if not is_fetched(get_corpus(settings.ood_corpus), data_root):
        raise DataError(f"{settings.ood_corpus} is missing or fails its checksums under {data_root}; run "
                        f"`paperlib data fetch {settings.ood_corpus}`")
    mapped = map_words_to_chars(read_split_lines(settings.ood_corpus, data_root, "test"), vocab)

    def prefix(ids: Tensor, chars: int | None) -> Tensor:
        return (ids if chars is None else ids[: chars + 1]).to(device)

    valid, test = prefix(corpus.valid, settings.valid_chars), prefix(corpus.test, settings.test_chars)
    ood = prefix(mapped.ids, settings.ood_chars)
    results: dict[str, Any] = {
        "profile": profile, "corpus": settings.corpus, "ood_corpus": settings.ood_corpus, "vocab_size": len(vocab),
        "segment_len": settings.segment_len, "valid_chars": valid.numel() - 1, "test_chars": test.numel() - 1,
        "ood_chars": ood.numel() - 1, "sparse_units": settings.sparse_units, "models": {}, "tables": {},
        "ood": {"mapping": mapped.stats, "models": {}},
    }

    run_root = root / "runs" / EXPERIMENT
    models: dict[str, nn.Module] = {}
    clock = time.time()
    for name, spec in settings.models.items():
        model, info = _train_or_load(name, spec, settings, corpus, run_root, device, progress, log)
        models[name] = model
        results["models"][name] = {"cell": spec["cell"], "hidden_size": spec["hidden_size"],
                                   "num_layers": spec["num_layers"], "options": spec.get("options", {}), **info}
        seconds[f"train_{name}"] = info.get("train_seconds", 0.0)
    clock = tick("training", clock)

    train_stream = corpus.train.to(device)
    calls: dict[str, dict[str, dict[str, Any]]] = {}
    stream_curves: dict[str, dict[str, list[float]]] = {}
    bin_size = settings.timescale["bin"]
    for name, keys in settings.rows.items():
        model = models[name]
        log(f"dyneval_char: {name} ({results['models'][name]['parameters']:,} parameters)")
        stats = _gradient_stats(model, train_stream, settings)
        rows, calls[name], stream_curves[name], sizes = [], {}, {}, []
        for key in keys:
            row, test_res, call = _tuned_row(key, model, valid, test, settings, stats)
            rows.append(row)
            calls[name][key] = call
            stream_curves[name][key] = _curve(test_res.losses, bin_size)
            sizes = test_res.block_means(settings.test_block)[1]
            log(f"  {row['label']:52s} valid {row['valid_bpc']:.4f}  test {row['test_bpc']:.4f} bits/char")
        results["tables"][name] = {"rows": rows, "test_block_tokens": sizes}
        clock = tick(f"table_{name}", clock)

        ood_rows = {}
        for key in settings.ood_rows:
            if key not in calls[name]:
                continue
            call = calls[name][key]
            if key == "static":
                res = static_evaluate(model, ood, segment_len=settings.segment_len)
            else:
                res = dynamic_evaluate(call["model"], ood, **{k: v for k, v in call.items() if k != "model"})
            blocks, sizes = res.block_means(settings.test_block)
            ood_rows[key] = {"bpc": bits(res), "curve": _curve(res.losses, bin_size), "blocks": blocks}
            log(f"  out of domain: {ROWS[key][0]:37s} {ood_rows[key]['bpc']:.4f} bits/char")
        results["ood"]["models"][name] = ood_rows
        results["ood"]["block_tokens"] = sizes
        clock = tick(f"ood_{name}", clock)
    results["stream_curves"] = {"bin": bin_size, "test": stream_curves}

    ts_model = settings.timescale["model"]
    log(f"dyneval_char: time scales ({ts_model})")
    results["timescale"] = _timescale(settings, models[ts_model], calls[ts_model]["global_rms"],
                                      {"in_domain": corpus.test.to(device), "out_of_domain": mapped.ids.to(device)}, log)
    clock = tick("timescale", clock)

    rec = settings.recovery
    log(f"dyneval_char: recovery ({', '.join(rec['models'])}) on {rec['chars']:,} test characters")
    text = corpus.test if rec["chars"] is None else corpus.test[: rec["chars"] + 1]
    text = text.to(device)
    losses = {m: static_evaluate(models[m], text, segment_len=200).losses for m in rec["models"]}
    profile_ = recovery_profile(losses, fraction=rec["fraction"], horizon=rec["horizon"])
    results["recovery"] = {"models": list(rec["models"]), "chars": text.numel() - 1,
                           "parameters": {m: results["models"][m]["parameters"] for m in rec["models"]},
                           **profile_.as_dict()}
    baseline = _recovery_baseline(settings, rec["models"])
    if baseline is not None:  # Krause's criterion one step after a surprise, with its standard error
        gaps = {m: profile_.recovery_gap(m, baseline, step=1) for m in rec["models"] if m != baseline}
        results["recovery"]["gap_one_step"] = {m: {"against": baseline, "gap": g, "se": se, "margin": 2 * se}
                                               for m, (g, se) in gaps.items()}
    for m in rec["models"]:
        log(f"  {m:16s} surprise {profile_.after[m][0]:.3f}  after {[round(a, 3) for a in profile_.after[m][1:]]}  "
            f"overall {profile_.overall[m]:.3f} bits")
    clock = tick("recovery", clock)

    results["scaling"] = _scaling(settings, models, results["models"], corpus, run_root, device, progress, log)
    tick("scaling", clock)

    results["paper"] = {"table_4_4": DYNEVAL_CHAR_TABLE_4_4, "table_6_1": DYNEVAL_CHAR_TABLE_6_1, "table_6_4": DYNEVAL_CHAR_TABLE_6_4,
                        "fig_5_2": DYNEVAL_CHAR_FIG_5_2, "fig_3_3": DYNEVAL_CHAR_FIG_3_3, "melis_recovery": DYNEVAL_CHAR_MELIS_RECOVERY}
    path = Path(out) if out is not None else results_path(root, EXPERIMENT, profile)
    write_json_atomic(path, json_safe(results))
    record = provenance(root, profile, json_safe(vars(settings)),
                        pinned_checksums(*dict.fromkeys((settings.corpus, settings.ood_corpus))), started,
                        code=code_hash(__name__))
    write_json_atomic(path.with_name(path.stem + ".provenance.json"), {**record, "seconds": seconds})
    return path


def _scaling(settings: DynEvalCharParams, models: dict[str, nn.Module], infos: dict[str, dict], corpus,
             run_root: Path, device, progress: bool, log) -> dict[str, list[dict[str, Any]]]:
    """Fig. 3.2: validation bits/char against parameters, the mean over ``scaling.seeds`` training seeds (each seed's
    value kept in ``valid_bpc_seeds`` when there are several); the main models are reused at their own size as the
    stage's seed."""
    sc = settings.scaling
    seeds = [settings.seed + k for k in range(sc.get("seeds", 1))]
    valid = (corpus.valid if sc["valid_chars"] is None else corpus.valid[: sc["valid_chars"] + 1]).to(device)
    out: dict[str, list[dict[str, Any]]] = {}
    for name, sizes in sc["hidden_sizes"].items():
        base = settings.models[name]
        points = []
        for hidden in sizes:
            values = []
            for seed in seeds:
                if hidden == base["hidden_size"] and seed == settings.seed:
                    model, info = models[name], infos[name]
                else:
                    run = f"{name}_h{hidden}" + ("" if seed == settings.seed else f"_seed{seed}")
                    model, info = _train_or_load(run, {**base, "hidden_size": hidden}, settings, corpus, run_root,
                                                 device, progress, log, seed=seed)
                values.append(bits(static_evaluate(model, valid, segment_len=200)))
                log(f"  scaling {name} H={hidden} seed {seed}: {info['parameters']:,} parameters, valid "
                    f"{values[-1]:.4f} bits/char")
            point = {"hidden_size": hidden, "parameters": info["parameters"], "valid_bpc": sum(values) / len(values)}
            points.append({**point, "valid_bpc_seeds": values} if len(seeds) > 1 else point)
        out[name] = sorted(points, key=lambda p: p["parameters"])
    return out


__all__ = [
    "EXPERIMENT", "RECURRENT_SPARSE_CELLS", "ROWS", "CharMapping", "DynEvalCharParams", "bits", "chars_to_lines",
    "map_words_to_chars", "run_dyneval_char",
]
