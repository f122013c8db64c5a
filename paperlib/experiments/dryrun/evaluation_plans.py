"""Which evaluation passes each stage makes, and how many, from its settings of a profile: one function per stage
(:data:`EVALUATIONS`), each yielding :class:`~paperlib.experiments.dryrun.evaluation.Evaluation` s. Counts follow the
stage's code: validation every ``eval_every`` training steps (:class:`paperlib.train.Trainer`, one pass per model the
averager scores), the final evaluations of a language model (:func:`paperlib.experiments.language_models.lm_ptb.
evaluate_run`), and the tables and studies of dynamic evaluation (:mod:`paperlib.experiments.dynamic_evaluation`).
A grid search makes the product of its lists' lengths, a coordinate search (:func:`paperlib.dyneval.
tune_dynamic_evaluation`) the first list's length plus one less than each later list's, a learning-rate sweep
(:func:`paperlib.dyneval.learning_rate_sweep`) at most ``max_evals`` (counted so, ``upto``).

Counted: the language-model stages, the dynamic-evaluation stages and the PTB MICMCO stages (importance-weighted
bounds with hundreds of samples). Not counted: the synthetic MICMCO, word-generation, reverse-copy and music stages'
evaluations (small models, or short test sets); the neural cache's arithmetic on its stored features and the softmax temperature's fit on stored
logits (the forward passes that make them are counted; neither is in the peak memory); the host-side parts of every
pass.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator
from typing import Any

from torch import nn

from paperlib.data.corpora import CORPORA
from paperlib.experiments.dryrun.split_sizes import SPLIT_LINES, SPLIT_TOKENS
from paperlib.experiments.dryrun.evaluation import (Evaluation, dynamic_segments, forward_windows, gradient_batches,
                                                    mc_dropout_windows, sentence_chunks, windows)

Cap = Callable[[int], int]

# the passes the Trainer makes at each evaluation, per averaging (paperlib.averaging): 2TA scores its short and long
# averages and, with Algorithm 2's extensions (the default), the raw weights; the others one set of weights
VALIDATIONS = {"2ta": 3}


def _lm(spec: dict[str, Any], vocab: int) -> Callable[[], nn.Module]:
    from paperlib.models import build_lm

    return lambda: build_lm(spec["cell"], vocab, spec["hidden_size"], spec["num_layers"], **spec.get("options", {}))


def _spec_key(spec: dict[str, Any], vocab: int) -> tuple:
    return (repr(sorted(spec.items())), vocab)


def _prefix(corpus: str, split: str, tokens: int | None, scored: bool = True) -> int:
    """Token ids of a split's prefix (None: the whole split): ``tokens`` scored ones, the ids ``[:tokens + 1]`` (the
    dynamic-evaluation stages), or with ``scored`` False the ids ``[:tokens]`` (the language-model stages)."""
    full = SPLIT_TOKENS[corpus][split]
    return full if tokens is None else min(tokens + scored, full)


def _probes(spec: dict[str, Any], length: int) -> tuple[int, int]:
    """The units a pass is counted at: a Transformer's once its memory is full (its attention then spans the whole
    memory, the steady state), other models' the first two."""
    memory = spec.get("options", {}).get("memory_length") if spec["cell"] == "transformer" else None
    first = 1 if not memory else math.ceil(memory / length) + 1
    return first, first + 1


def _forward(name: str, spec: dict[str, Any], vocab: int, batch: int, length: int, units: int, passes: int = 1,
             upto: bool = False, shown: int | None = None) -> Evaluation:
    """``passes`` passes of ``units`` windows of [batch, length] of the model ``spec`` without gradients (``shown``:
    the uncapped length, for the table)."""
    return Evaluation(name, _lm(spec, vocab), forward_windows(vocab, batch, length), units, passes,
                      f"window {batch}x{shown or length}", key=("forward", *_spec_key(spec, vocab), batch, length),
                      upto=upto, probes=_probes(spec, length))


def validation(name: str, spec: dict[str, Any], train: dict[str, Any], vocab: int, valid_tokens: int, runs: int,
               cap: Cap, per_evaluation: float | None = None) -> Evaluation:
    """The Trainer's validation over ``runs`` trainings: after every ``eval_every`` steps and the last one, the
    averager's passes (``per_evaluation``, default by averaging) over the validation stream cut into
    ``eval_batch_size`` rows, in windows of ``bptt`` (at most ``eval_max_windows``)."""
    from paperlib.train import TrainConfig

    config = TrainConfig(**train)
    count = windows(valid_tokens, config.eval_batch_size, config.bptt)
    if config.eval_max_windows is not None:
        count = min(count, config.eval_max_windows)
    evaluations = math.ceil(config.max_steps / config.eval_every)
    per = per_evaluation if per_evaluation is not None else VALIDATIONS.get(config.averaging, 1)
    return _forward(f"{name}: validation", spec, vocab, config.eval_batch_size, cap(config.bptt), count,
                    math.ceil(runs * evaluations * per), shown=config.bptt)


def final_evaluation(name: str, spec: dict[str, Any], train: dict[str, Any], vocab: int, valid_tokens: int,
                     test_tokens: int, mc_samples: int, runs: int, cap: Cap) -> Iterator[Evaluation]:
    """A language model's scores after training (:func:`~paperlib.experiments.language_models.lm_ptb.evaluate_run`):
    the logits of the first 20,000 validation tokens (the temperature's fit), validation and test deterministic and at
    that temperature, and Monte Carlo dropout over ``mc_samples`` masks, 8 at a time as one batch."""
    from paperlib.experiments.language_models.lm_ptb import evaluate_run
    from paperlib.models.evaluation import mc_dropout_nll
    from paperlib.train import TrainConfig

    config = TrainConfig(**train)
    batch, length = config.eval_batch_size, cap(config.bptt)
    temperature = inspect.signature(evaluate_run).parameters["temperature_tokens"].default
    chunk = inspect.signature(mc_dropout_nll).parameters["chunk_size"].default
    deterministic = windows(min(temperature, valid_tokens), batch, config.bptt) + \
        2 * (windows(valid_tokens, batch, config.bptt) + windows(test_tokens, batch, config.bptt))
    yield _forward(f"{name}: test and validation", spec, vocab, batch, length, deterministic, runs, shown=config.bptt)
    mc = windows(valid_tokens, batch, config.bptt) + windows(test_tokens, batch, config.bptt)
    size = min(chunk, mc_samples)
    yield Evaluation(f"{name}: MC dropout, {mc_samples} masks", _lm(spec, vocab),
                     mc_dropout_windows(vocab, batch, length, size), mc * math.ceil(mc_samples / chunk), runs,
                     f"window {size}x{batch}x{config.bptt}",
                     key=("mc", *_spec_key(spec, vocab), batch, length, size), probes=_probes(spec, length))


# ---------------------------------------------------------------------------------------------------
# one function per stage

def _lm_comparison(stage: str, settings: Any, precision: str, cap: Cap, profile: str = "paper") -> Iterator[Evaluation]:
    """lm_ptb, lm_ptb_char, lm_ptb_ablation, lm_wt2_bytes: every model x seed validates as it trains and is scored
    after (on the ``eval_tokens`` prefixes)."""
    from paperlib.experiments.language_models.lm_wt2_bytes import ByteCorpus

    corpus = settings.corpus
    vocab = ByteCorpus(corpus, {}).vocab_size if stage == "lm_wt2_bytes" else CORPORA[corpus].vocab_size
    source = f"{corpus}_bytes" if stage == "lm_wt2_bytes" else corpus
    valid = _prefix(source, "valid", settings.eval_tokens, scored=False)
    test = _prefix(source, "test", settings.eval_tokens, scored=False)
    for name, spec in settings.models.items():
        train = {**settings.train, **spec.get("train", {})}
        runs = len(settings.seeds)
        yield validation(name, spec, train, vocab, valid, runs, cap)
        yield from final_evaluation(name, spec, train, vocab, valid, test, settings.mc_samples, runs, cap)


def optimal_tail_passes(train: dict[str, Any]) -> float:
    """The passes :class:`~paperlib.experiments.averaging.tail_lengths.TailLengths` makes per evaluation of a run of T
    evaluations, on average: t at the t-th (every tail of whole periods), (T + 1) / 2."""
    return (math.ceil(train["max_steps"] / train["eval_every"]) + 1) / 2


def _averaging(stage: str, settings: Any, precision: str, cap: Cap, profile: str = "paper") -> Iterator[Evaluation]:
    """averaging_ptb: the main run scores 2TA, the raw weights and every monitor (TA from each start and EMA of each
    decay once per period, 2TA at each other period factor f its passes every f periods, and the optimal tail
    (:class:`~paperlib.experiments.averaging.tail_lengths.TailLengths`) t passes at the t-th evaluation, (T + 1) / 2
    on average over T); the overfitting run its raw weights and a 2TA monitor."""
    vocab = CORPORA[settings.corpus].vocab_size
    valid = _prefix(settings.corpus, "valid", settings.valid_tokens, scored=False)
    per = VALIDATIONS["2ta"] + 1 + len(settings.ta_starts) + len(settings.ema_decays) + \
        sum(VALIDATIONS["2ta"] / f for f in settings.period_factors) + optimal_tail_passes(settings.train)
    yield validation("main", settings.model, {**settings.train, "averaging": "2ta"}, vocab, valid, 1, cap, per)
    options = {k: v for k, v in settings.model.get("options", {}).items() if "dropout" not in k}
    yield validation("overfit", {**settings.model, "options": options}, settings.overfit_train, vocab, valid, 1, cap,
                     1 + VALIDATIONS["2ta"])


def _tuning(stage: str, settings: Any, precision: str, cap: Cap, profile: str = "paper") -> Iterator[Evaluation]:
    """tuning_ptb: every trial and probe validates as it trains (2TA), at the trial shape of the training count."""
    from paperlib.experiments.dryrun.workloads import tuning_trial

    vocab = CORPORA[settings.corpus].vocab_size
    valid = _prefix(settings.corpus, "valid", settings.eval_tokens, scored=False)
    for space, spec in settings.models.items():
        model, train = tuning_trial(space, spec, settings.train)
        yield validation(space, model, train, vocab, valid, settings.trials + settings.neighbours + settings.reruns,
                         cap)


def _segments(tokens: int, segment: int) -> int:
    """Segments of a pass that predicts ``tokens`` - 1 tokens (:func:`paperlib.data.batching.bptt_windows`)."""
    return math.ceil((tokens - 1) / segment)


def coordinate_trials(grid: dict[str, list]) -> int:
    """Evaluations of a coordinate search over ``grid`` (:func:`paperlib.dyneval.tune_dynamic_evaluation`)."""
    lengths = [len(dict.fromkeys(v)) for v in grid.values()]
    return lengths[0] + sum(n - 1 for n in lengths[1:])


def search_trials(grid: dict[str, list], search: str) -> int:
    """Evaluations of a grid or coordinate search over ``grid``."""
    return math.prod(len(v) for v in grid.values()) if search == "grid" else coordinate_trials(grid)


def _dynamic(name: str, spec: dict[str, Any], vocab: int, segment: int, units: int, passes: int, upto: bool = False,
             streams: int = 1, **rule: Any) -> Evaluation:
    """``passes`` dynamic evaluations of ``units`` segments of the model ``spec`` with the ``rule`` settings."""
    return Evaluation(name, _lm(spec, vocab), dynamic_segments(vocab, segment, streams, **rule), units, passes,
                      f"segment {streams}x{segment}",
                      key=("dynamic", *_spec_key(spec, vocab), segment, streams, repr(sorted(rule.items()))),
                      upto=upto, probes=_probes(spec, segment))


def _fixed(grid: dict[str, list]) -> dict[str, Any]:
    """The settings of a grid other than the learning rate at their first values: a decay or an ε adds kernels to
    every update, the values do not."""
    return {k: v[0] for k, v in grid.items() if k != "lr"}


def _gradient_count(train_tokens: int, gs: dict[str, Any]) -> int:
    """Batches of :func:`paperlib.dyneval.mean_squared_gradients` over a training split."""
    available = windows(train_tokens, gs["batch_size"], gs["bptt"])
    return available if gs["max_batches"] is None else min(gs["max_batches"], available)


def _gradients(name: str, spec: dict[str, Any], vocab: int, gs: dict[str, Any], batches: int, cap: Cap,
               sparse_units: int | None = None, sparse_mode: str = "recurrent") -> Evaluation:
    """Gradient statistics of ``batches`` batches of the ``gradient_stats`` shape (of M with ``sparse_units``)."""
    length = cap(gs["bptt"])
    return Evaluation(name, _lm(spec, vocab), gradient_batches(vocab, gs["batch_size"], length, sparse_units,
                                                               sparse_mode),
                      batches, 1, f"batch {gs['batch_size']}x{gs['bptt']}",
                      key=("gradients", *_spec_key(spec, vocab), gs["batch_size"], length, sparse_units, sparse_mode),
                      probes=_probes(spec, length))


def _dyneval(stage: str, settings: Any, precision: str, cap: Cap, profile: str = "paper") -> Iterator[Evaluation]:
    """dyneval (Krause Tables 4.1/4.2 per corpus, then the ch. 5 studies): see
    :func:`paperlib.experiments.dynamic_evaluation.dyneval.run_dyneval`. Static evaluation scores windows of 70
    tokens, the neural cache reads features in windows of 256 (:mod:`paperlib.dyneval.cache`)."""
    from paperlib.experiments.dynamic_evaluation.dyneval import TABLE_ROWS

    spec, gs = settings.model, settings.gradient_stats
    for corpus in settings.corpora:
        vocab = CORPORA[corpus].vocab_size
        if corpus not in settings.checkpoints:
            yield validation(corpus, spec, settings.train, vocab, SPLIT_TOKENS[corpus]["valid"], 1, cap)
        valid = _prefix(corpus, "valid", settings.valid_tokens)
        test = _prefix(corpus, "test", settings.test_tokens)
        batches = _gradient_count(SPLIT_TOKENS[corpus]["train"], gs)
        yield _gradients(f"{corpus}: gradient statistics", spec, vocab, gs, batches, cap)
        yield _gradients(f"{corpus}: gradient statistics, sparse", spec, vocab, gs, batches, cap, settings.sparse_units)
        yield _forward(f"{corpus}: static", spec, vocab, 1, cap(70), windows(valid, 1, 70) + windows(test, 1, 70),
                       shown=70)
        yield _forward(f"{corpus}: neural cache features", spec, vocab, 1, cap(256),
                       windows(valid, 1, 256) + windows(test, 1, 256), shown=256)
        for row, _, fixed, grid_name in TABLE_ROWS:
            if grid_name is None:
                continue
            rule = {**_fixed(settings.grids[grid_name]), **{k: v for k, v in fixed.items() if k != "segment_len"}}
            if row == "sparse":
                rule["sparse_units"] = settings.sparse_units
            segment = fixed.get("segment_len", settings.segment_len)
            trials = search_trials(settings.grids[grid_name], settings.search)
            for split, tokens, passes in (("validation", valid, trials), ("test", test, 1)):
                yield _dynamic(f"{corpus}: {row}, {split}", spec, vocab, cap(segment), _segments(tokens, segment),
                               passes, **rule)
    yield from _dyneval_studies(settings, cap)


def _dyneval_studies(settings: Any, cap: Cap) -> Iterator[Evaluation]:
    """The ch. 5 studies of :mod:`paperlib.experiments.dynamic_evaluation.studies`: the optimizer sweeps (Tables
    5.3-5.5), the time scales (Fig. 5.1, Table 5.1), the related-words probe (Table 5.2), the amount and locality of
    the gradient statistics (Tables 5.6, 5.7)."""
    from paperlib.experiments.dynamic_evaluation.studies import related_words_settings, statistics_study_settings

    opt, spec, gs = settings.optimizers, settings.model, settings.gradient_stats
    n, segment = cap(settings.segment_len), settings.segment_len
    corpus = opt["corpus"]
    vocab = CORPORA[corpus].vocab_size
    valid = _prefix(corpus, "valid", opt["valid_tokens"])
    units, most = _segments(valid, segment), opt["max_evals"]
    momenta = [m for m in opt["momentum"] if m]
    plain = len(opt["momentum"]) - len(momenta) + (0.0 not in opt["momentum"])  # SGD without momentum, once at least
    yield _forward("optimizers: static", spec, vocab, 1, cap(70), windows(valid, 1, 70), shown=70)
    for label, rule, sweeps in (("SGD", {"rule": "sgd"}, plain),
                                ("SGD with momentum", {"rule": "sgd", "momentum": 0.5}, len(momenta)),
                                ("RMSprop", {"rule": "rmsprop"}, len(opt["rmsprop_alpha"]) + len(opt["rmsprop_eps"])),
                                ("Adam", {"rule": "adam"}, len(opt["adam_momentum"])),
                                ("global RMS", {"rule": "global_rms"}, 1)):
        if sweeps:
            yield _dynamic(f"optimizers: {label} sweeps", spec, vocab, n, units, sweeps * most, upto=True, **rule)

    ts = settings.timescale
    ts_vocab, tuned = CORPORA[ts["corpus"]].vocab_size, {"rule": "global_rms", **_fixed(settings.grids["global_rms"])}
    yield _forward("time scales: static", spec, ts_vocab, ts["sequences"], cap(70),
                   math.ceil((ts["length"] - 1) / 70), shown=70)
    yield _forward("time scales: neural cache features", spec, ts_vocab, ts["sequences"], cap(256),
                   math.ceil((ts["length"] - 1) / 256), shown=256)
    yield _dynamic("time scales: dynamic", spec, ts_vocab, n, _segments(ts["length"], segment),
                   math.ceil(ts["sequences"] / ts["stream_batch"]), streams=ts["stream_batch"], **tuned)

    words = related_words_settings(settings)
    rw_vocab = CORPORA[words["corpus"]].vocab_size
    # the probe (paperlib.dyneval.probes.probe_updates) adapts up to its last target, which the text decides: counted to the end of
    # the test prefix it reads; each probed segment (the target's and the extra targets') is scored before and after
    # its update
    probe = _segments(_prefix(words["corpus"], "test", settings.test_tokens), segment)
    yield _dynamic("related words: probe", spec, rw_vocab, n, probe, 1, upto=True, **tuned)
    yield _forward("related words: probe scores", spec, rw_vocab, 1, n, 2 * (1 + words["extra_targets"]), upto=True,
                   shown=segment)

    statistics = statistics_study_settings(settings)
    st_valid = _prefix(corpus, "valid", statistics["valid_tokens"])
    st_units, st_most = _segments(st_valid, segment), statistics["max_evals"]
    full = _gradient_count(SPLIT_TOKENS[corpus]["train"], {**gs, "max_batches": statistics["batches"]})
    eps = len(statistics["rmsprop_eps"])
    yield _forward("statistics amount: static", spec, vocab, 1, cap(70), windows(st_valid, 1, 70), shown=70)
    yield _gradients("statistics amount: gradient statistics", spec, vocab, gs,
                     sum(max(1, round(f * full)) for f in statistics["fractions"]), cap)
    yield _dynamic("statistics amount: RMSprop sweeps", spec, vocab, n, st_units, eps * st_most, upto=True,
                   rule="rmsprop")
    yield _dynamic("statistics amount: global RMS sweeps", spec, vocab, n, st_units,
                   len(statistics["fractions"]) * st_most, upto=True, rule="global_rms")
    yield _dynamic("statistics locality: non-local RMSprop sweeps", spec, vocab, n, st_units, eps * st_most,
                   upto=True, rule="nonlocal_rmsprop")


def _dyneval_char(stage: str, settings: Any, precision: str, cap: Cap, profile: str = "paper") -> Iterator[Evaluation]:
    """dyneval_char (Krause Tables 4.4 / 6.1 / 6.4, Figs. 3.2, 3.3, 5.2): see
    :mod:`paperlib.experiments.dynamic_evaluation.dyneval_char`. Static evaluation scores windows of
    ``segment_len``; recovery and the scaling models' scores windows of 200."""
    from paperlib.experiments.dynamic_evaluation.dyneval_char import ROWS

    corpus, vocab = settings.corpus, CORPORA[settings.corpus].vocab_size
    n, segment, gs = cap(settings.segment_len), settings.segment_len, settings.gradient_stats
    full_valid = SPLIT_TOKENS[corpus]["valid"]
    valid = _prefix(corpus, "valid", settings.valid_chars)
    test = _prefix(corpus, "test", settings.test_chars)
    ood = _prefix(f"{settings.ood_corpus}_as_{corpus}", "test", settings.ood_chars)
    batches = _gradient_count(SPLIT_TOKENS[corpus]["train"], gs)
    for name, spec in settings.models.items():
        yield validation(name, spec, {**settings.train, **spec.get("train", {})}, vocab, full_valid, 1, cap)
        rows = settings.rows.get(name, [])
        if not rows:
            continue
        static = windows(valid, 1, segment) + windows(test, 1, segment)
        static += windows(ood, 1, segment) if "static" in settings.ood_rows else 0
        yield _forward(f"{name}: static", spec, vocab, 1, n, static, shown=segment)
        for row in rows:
            if row == "static":
                continue
            _, fixed, grid_name = ROWS[row]
            rule = {**_fixed(settings.grids[grid_name]), **fixed}
            if grid_name == "sparse":
                rule["sparse_units"] = settings.sparse_units
            if row != "sgd":  # MS_g of the rule's parameters, once per kind (full, each sparse mode)
                yield _gradients(f"{name}: gradient statistics, {row}", spec, vocab, gs, batches, cap,
                                 rule.get("sparse_units"), rule.get("sparse_mode", "recurrent"))
            trials = search_trials(settings.grids[grid_name], settings.search)
            yield _dynamic(f"{name}: {row}, validation", spec, vocab, n, _segments(valid, segment), trials, **rule)
            yield _dynamic(f"{name}: {row}, test", spec, vocab, n, _segments(test, segment), 1, **rule)
            if row in settings.ood_rows:
                yield _dynamic(f"{name}: {row}, out of domain", spec, vocab, n, _segments(ood, segment), 1, **rule)
    ts = settings.timescale
    spec = settings.models[ts["model"]]
    yield _forward("time scales: static", spec, vocab, ts["sequences"], n, 2 * math.ceil((ts["length"] - 1) / segment),
                   shown=segment)
    yield _dynamic("time scales: dynamic", spec, vocab, n, _segments(ts["length"], segment),
                   2 * math.ceil(ts["sequences"] / ts["stream_batch"]), streams=ts["stream_batch"],
                   rule="global_rms", **_fixed(settings.grids["global_rms"]))
    rec = settings.recovery
    chars = _prefix(corpus, "test", rec["chars"])
    for name in rec["models"]:
        yield _forward(f"recovery: {name}", settings.models[name], vocab, 1, cap(200), windows(chars, 1, 200), shown=200)
    scaled = _prefix(corpus, "valid", settings.scaling["valid_chars"])
    seeds = settings.scaling.get("seeds", 1)
    for name, sizes in settings.scaling["hidden_sizes"].items():
        base = settings.models[name]
        for hidden in sizes:
            spec = {**base, "hidden_size": hidden}
            label = name if hidden == base["hidden_size"] else f"{name}_h{hidden}"
            trained = seeds - 1 if hidden == base["hidden_size"] else seeds  # the main model's validation is its own
            if trained:
                yield validation(f"{name}_h{hidden}", spec, {**settings.train, **base.get("train", {})}, vocab,
                                 full_valid, trained, cap)
            yield _forward(f"scaling: {label}", spec, vocab, 1, cap(200), windows(scaled, 1, 200), passes=seeds,
                           shown=200)


def sentence_evaluation(name: str, curve_name: str, settings: Any, split: str, samples: int, passes: int, cap: Cap,
                        upto: bool = False) -> Evaluation:
    """``passes`` evaluations of one PTB MICMCO curve's model (at its search space's centre) on ``split`` with
    ``samples`` samples: chunks of at most :data:`~paperlib.experiments.micmco.ptb.trials.EVAL_TOKEN_SAMPLES`
    sample x token pairs, counted as sentences of ``max_len`` tokens (the truncation of training and validation
    sentences; the chunks are sorted by length, so most run fewer recurrence steps, and the kernels are an upper
    bound)."""
    from paperlib.experiments.dryrun.workloads import centre
    from paperlib.experiments.micmco.ptb.micmco_ptb import CURVES, build_model
    from paperlib.experiments.micmco.ptb.trials import EVAL_TOKEN_SAMPLES

    vocab = settings.vocab_size or CORPORA[settings.corpus].vocab_size
    curve = CURVES[curve_name]
    params = centre(curve.space)
    chosen = {"train": settings.train_eval_sentences, "valid": settings.valid_sentences,
              "test": settings.test_sentences}[split]
    lines = SPLIT_LINES[settings.corpus][split]
    tokens = SPLIT_TOKENS[settings.corpus][split] * min(chosen or lines, lines) / lines  # truncation only shortens
    length = settings.max_len
    sentences = max(1, EVAL_TOKEN_SAMPLES // (samples * length))
    return Evaluation(name, lambda: build_model(curve, params, settings, vocab),
                      sentence_chunks(vocab, sentences, cap(length), samples), math.ceil(tokens / (sentences * length)),
                      passes, f"chunk {samples}x{sentences}x{length}",
                      key=("sentences", curve_name, repr(settings), sentences, cap(length), samples), upto=upto)


def _micmco_ptb(stage: str, settings: Any, precision: str, cap: Cap, profile: str = "paper") -> Iterator[Evaluation]:
    """micmco_ptb: every trial is scored on its curve's split with ``eval_samples`` samples; a Table 5.1 curve's best
    trial on the test set with ``test_samples``: trained in stacks, the best so far of each batch that holds it (at
    most one a stack); alone, the better candidate of each table cell (:mod:`paperlib.experiments.micmco.ptb.
    analysis`: at most once a curve)."""
    from paperlib.experiments.micmco.ptb.design import CURVES, TABLE_5_1_CURVES

    for name in settings.selected:
        yield sentence_evaluation(f"{name}: trials", name, settings, CURVES[name].split, settings.eval_samples,
                                  settings.trials, cap)
        if settings.table_5_1 and name in TABLE_5_1_CURVES:
            batches = 1 if settings.stack_size is None else -(-settings.trials // settings.stack_size)
            yield sentence_evaluation(f"{name}: Table 5.1 test", name, settings, "test", settings.test_samples,
                                      batches, cap, upto=True)


def _micmco_ptb_ladder(stage: str, settings: Any, precision: str, cap: Cap, profile: str = "paper"
                       ) -> Iterator[Evaluation]:
    """micmco_ptb_ladder: every run (seed x trial) of every curve scored at each rung and three quarters into it
    (:func:`paperlib.experiments.common.claims.scoring_steps`), with the ``micmco_ptb`` settings of the profile."""
    from paperlib.experiments.common.claims import scoring_steps
    from paperlib.experiments.common.config import experiment_params
    from paperlib.experiments.micmco.ptb.micmco_ptb import CURVES, EXPERIMENT

    main = experiment_params(EXPERIMENT, profile)
    runs = len(settings.seeds) * settings.trials * len(scoring_steps(settings.rungs))
    for name in settings.curves:
        yield sentence_evaluation(f"{name}: runs", name, main, CURVES[name].split, main.eval_samples, runs, cap)


def _dyneval_transformer(stage: str, settings: Any, precision: str, cap: Cap,
                         profile: str = "paper") -> Iterator[Evaluation]:
    """dyneval_transformer (Krause Table 6.3's analogue): see
    :mod:`paperlib.experiments.dynamic_evaluation.dyneval_transformer`. Every dynamic row scores the validation
    prefix once per trial (its per-block losses come from the best trial's evaluation) and the test prefix once."""
    from paperlib.experiments.dynamic_evaluation.dyneval_transformer import ROWS

    corpus, spec, gs = settings.corpus, settings.model, settings.gradient_stats
    vocab, n, segment = CORPORA[corpus].vocab_size, cap(settings.segment_len), settings.segment_len
    yield validation("transformer", spec, settings.train, vocab, SPLIT_TOKENS[corpus]["valid"], 1, cap)
    valid, test = _prefix(corpus, "valid", settings.valid_tokens), _prefix(corpus, "test", settings.test_tokens)
    yield _forward("static", spec, vocab, 1, n, windows(valid, 1, segment) + windows(test, 1, segment), shown=segment)
    yield _gradients("gradient statistics", spec, vocab, gs, _gradient_count(SPLIT_TOKENS[corpus]["train"], gs), cap)
    for row, (_, fixed, grid_name) in ROWS.items():
        if grid_name is None:
            continue
        rule = {**_fixed(settings.grids[grid_name]), **fixed}
        trials = search_trials(settings.grids[grid_name], settings.search)
        yield _dynamic(f"{row}, validation", spec, vocab, n, _segments(valid, segment), trials, **rule)
        yield _dynamic(f"{row}, test", spec, vocab, n, _segments(test, segment), 1, **rule)


EVALUATIONS: dict[str, Callable[[str, Any, str, Cap, str], Iterator[Evaluation]]] = {
    "lm_ptb": _lm_comparison, "lm_ptb_char": _lm_comparison, "lm_ptb_ablation": _lm_comparison,
    "lm_wt2_bytes": _lm_comparison, "averaging_ptb": _averaging, "tuning_ptb": _tuning, "dyneval": _dyneval,
    "dyneval_char": _dyneval_char, "dyneval_transformer": _dyneval_transformer, "micmco_ptb": _micmco_ptb,
    "micmco_ptb_ladder": _micmco_ptb_ladder,
}

__all__ = ["EVALUATIONS", "VALIDATIONS", "coordinate_trials", "final_evaluation", "optimal_tail_passes",
           "search_trials", "sentence_evaluation", "validation"]
