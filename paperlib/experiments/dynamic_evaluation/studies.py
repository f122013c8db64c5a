"""The chapter-5 studies of the dynamic-evaluation experiment (Krause §5.2-5.4, Tables 5.1-5.7, Fig. 5.1): learning-
rate sweeps for momentum, the adaptive rules and ε, the timescale of adaptation, the related-words probe and the
amount and locality of the gradient statistics, each on the stage's trained model. Run by
:func:`paperlib.experiments.dynamic_evaluation.dyneval.run_dyneval`; the methods are :mod:`paperlib.dyneval`'s."""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch
from torch import Tensor, nn

from paperlib.data.batching import batchify, num_windows
from paperlib.dyneval import (DynamicEvalResult, Params, dynamic_evaluate, finite_nll, learning_rate_sweep,
                              mean_squared_gradients, probe_updates, related_words, static_evaluate)


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


def _lr_sweep(model: nn.Module, valid: Tensor, segment_len: int, label: str, start: float, factor: float,
              max_evals: int, log, block: int, **kwargs: Any) -> dict[str, Any]:
    """One row of the §5.4 studies: dynamic evaluation on ``valid`` with the learning rate swept (§5.4.1). The row
    keeps the validation loss per block of ``block`` tokens at the chosen η (``valid_blocks``), the units of the
    claims' paired bootstrap; as in the thesis, η is chosen on the same text the row reports, and the bootstrap does
    not count that choice."""
    blocks: dict[float, list[float]] = {}

    def evaluate(lr: float) -> float:
        result = dynamic_evaluate(model, valid, lr=lr, segment_len=segment_len, **kwargs)
        blocks[lr] = result.block_means(block)[0]
        return finite_nll(result)

    lr, nll, trials = learning_rate_sweep(evaluate, start, factor, max_evals)
    log(f"  {label:40s} lr {lr:9.3g}  valid ppl {_ppl(nll):8.2f}  ({len(trials)} evaluations)")
    settings_out = {k: v for k, v in kwargs.items() if k not in ("ms_g", "statistics_tokens")}
    return {"label": label, "settings": settings_out, "lr": lr, "valid_nll": nll, "valid_ppl": _ppl(nll),
            "sweep": trials, "valid_blocks": blocks[lr]}



def _momentum_start(start: float, mu: float, factor: float) -> float:
    """Eqs. 5.10-5.11 move the weights by about η/(1-μ) per step once the velocity settles, and §5.4.1 notes that
    larger μ need smaller learning rates: each μ's sweep starts near the step that plain SGD's start takes,
    ``start``·(1-μ), rounded to the sweep's own grid ``start``·``factor``^k so that every μ is scored on the same
    learning rates. The thesis starts every μ "sufficiently low" and raises η by 20%; our sweep also moves down
    (:func:`~paperlib.dyneval.tune.learning_rate_sweep`), and with its coarse grid and few evaluations a start shared
    by every μ left the largest μ's optimum unbracketed."""
    if not 0.0 <= mu < 1.0 or not factor > 1.0:
        raise ValueError(f"need 0 <= μ < 1 and factor > 1, got {mu}, {factor}")
    return start * factor ** round(math.log(1.0 - mu) / math.log(factor))


def _rmsprop_start(start: float, eps: float) -> float:
    """For ε well above √MS, RMSprop is SGD with learning rate η/ε (§5.4.3): start the sweep proportionally higher."""
    return start * max(1.0, eps / 1e-3)


def _optimizer_study(settings, model: nn.Module, valid: Tensor, ms_full: Params, log) -> dict[str, Any]:
    """Krause §5.4 at small scale: each optimizer setting with its own learning-rate sweep (Tables 5.3-5.5)."""
    opt = settings.optimizers

    def sweep(label: str, start: float, **kwargs: Any) -> dict[str, Any]:
        return _lr_sweep(model, valid, settings.segment_len, label, start, opt["lr_factor"], opt["max_evals"], log,
                         settings.test_block, **kwargs)

    starts = opt["lr_start"]
    static_res = static_evaluate(model, valid)
    static, block_tokens = static_res.mean_nll(), static_res.block_means(settings.test_block)[1]
    momentum = [sweep(f"SGD, momentum {mu}", _momentum_start(starts["sgd"], mu, opt["lr_factor"]), rule="sgd",
                      momentum=mu) for mu in opt["momentum"]]
    sgd = next((r for r, mu in zip(momentum, opt["momentum"]) if mu == 0.0), None) or sweep("SGD", starts["sgd"], rule="sgd")
    adaptive = [sweep(f"RMSprop, alpha {a}", starts["rmsprop"], rule="rmsprop", alpha=a) for a in opt["rmsprop_alpha"]]
    adaptive += [sweep(f"Adam, alpha 0.999, mu {mu}", starts["adam"], rule="adam", alpha=0.999, momentum=mu)
                 for mu in opt["adam_momentum"]]
    epsilon = [sweep(f"RMSprop, eps {eps:g}", _rmsprop_start(starts["rmsprop"], eps), rule="rmsprop", eps=eps)
               for eps in opt["rmsprop_eps"]]
    global_rms = sweep("global RMS (no decay)", starts["global_rms"], rule="global_rms", ms_g=ms_full)
    return {"corpus": opt["corpus"], "valid_tokens": valid.numel() - 1, "static_valid_nll": static,
            "static_valid_ppl": _ppl(static), "valid_block_tokens": block_tokens,
            "momentum": momentum, "adaptive": adaptive, "sgd": sgd,
            "epsilon": epsilon, "global_rms": global_rms}


def _timescale(settings, model: nn.Module, test: Tensor, table: dict[str, Any], ms: dict[str, Params], log) -> dict[str, Any]:
    """Figure 5.1 and Table 5.1: loss against position on independent test sequences, and seen/unseen words."""
    from paperlib.dyneval.cache import neural_cache_losses

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
    methods = (("static", static), ("dynamic", dynamic), ("neural_cache", cache))
    curves = {name: DynamicEvalResult(losses).curve(ts["bin"]).tolist() for name, losses in methods}
    # each sequence's own curve: the units of the claims' bootstrap over the independent sequences
    sequence_curves = {name: [DynamicEvalResult(row).curve(ts["bin"]).tolist() for row in losses]
                       for name, losses in methods}
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
    split, per_sequence = {}, {}
    masks = {"seen": half & seen, "unseen": half & ~seen}
    for name, losses in methods:
        losses = losses.double()
        split[name] = {key: float(losses[mask].mean()) for key, mask in masks.items()}
        # per sequence: the mean loss over its seen (unseen) words, 0 where it has none (its count is then 0)
        per_sequence[name] = {key: ((losses * mask).sum(1) / mask.sum(1).clamp(min=1)).tolist()
                              for key, mask in masks.items()}
    per_sequence["words"] = {key: mask.sum(1).tolist() for key, mask in masks.items()}
    unseen = half & ~seen
    split["dynamic_better_than_static_on_unseen"] = float((dynamic.double()[unseen] < static.double()[unseen]).double().mean())
    split["cache_better_than_static_on_unseen"] = float((cache.double()[unseen] < static.double()[unseen]).double().mean())
    log(f"  time scales on {count} sequences of {length}: final-bin loss static {curves['static'][-1]:.3f}, "
        f"dynamic {curves['dynamic'][-1]:.3f}, cache {curves['neural_cache'][-1]:.3f}")
    return {"corpus": ts["corpus"], "sequences": count, "length": length, "bin": ts["bin"], "curves": curves,
            "sequence_curves": sequence_curves, "seen_unseen": split, "seen_unseen_sequences": per_sequence,
            "seen_share": float(seen[half].double().mean())}


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
        return _lr_sweep(model, valid, settings.segment_len, label, start, st["lr_factor"], st["max_evals"], log,
                         settings.test_block, **kwargs)

    static_res = static_evaluate(model, valid)
    static, block_tokens = static_res.mean_nll(), static_res.block_means(settings.test_block)[1]
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
            "static_valid_ppl": _ppl(static), "valid_block_tokens": block_tokens,
            "rmsprop": rmsprop, "global_rms": rows, "full_batches": full,
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
                                       st["lr_factor"], st["max_evals"], log, settings.test_block,
                                       rule="nonlocal_rmsprop", eps=eps, statistics_tokens=other))
    global_rms = next(r for r in amount["global_rms"] if r["fraction"] == 1.0)
    return {"corpus": amount["corpus"], "valid_tokens": amount["valid_tokens"], "static_valid_nll": amount["static_valid_nll"],
            "static_valid_ppl": amount["static_valid_ppl"], "valid_block_tokens": amount["valid_block_tokens"],
            "rmsprop": amount["rmsprop"], "global_rms": global_rms,
            "nonlocal_rmsprop": nonlocal_rows, "statistics_source": {"split": st["source"], "offset": st["offset"],
                                                                     "tokens": other.numel()}}


def _prefix(split: Tensor, tokens: int | None) -> Tensor:
    return split if tokens is None else split[: tokens + 1]


def _ppl(nll: float) -> float:
    """exp(nll), inf for a diverged (or overflowing) run."""
    return math.exp(nll) if nll < 700 else math.inf
