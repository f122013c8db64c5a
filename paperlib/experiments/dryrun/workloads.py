"""One adapter per stage: the stage's settings of a profile -> the :class:`~paperlib.experiments.dryrun.measure.
Workload` s the dry run measures (its own builders, its training step, its steps and runs); :data:`ADAPTERS`,
:data:`STAGES`."""

from __future__ import annotations

import math
import string
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch._subclasses.fake_tensor import unset_fake_temporarily

from paperlib.experiments.common.config import experiment_params
from paperlib.data.corpora import CORPORA
from paperlib.experiments.dryrun.measure import Workload

# ---------------------------------------------------------------------------------------------------
# one adapter per stage: the paper profile's settings -> workloads; ``cap`` shortens sequences (quick checks)

Cap = Callable[[int], int]


def _tokens(vocab: int, *shape: int, device: torch.device) -> Tensor:
    return torch.randint(vocab, shape, device=device)


def _centre(low: float, high: float, log: bool, integer: bool) -> float:
    """The middle of a search range on its sampling scale."""
    value = math.sqrt(low * high) if log else (low + high) / 2
    return round(value) if integer else value


def centre(space: dict[str, Any]) -> dict[str, float]:
    """Every range of a search space ``{name: range}`` (``low``, ``high``, ``log``, ``integer``) at its middle."""
    return {k: _centre(r.low, r.high, r.log, r.integer) for k, r in space.items()}


def tuning_trial(space: str, spec: dict[str, Any], train: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A tuning_ptb trial at the centre of the Table 2.4 ranges of ``space`` (Melis §2.A): its model spec and
    training settings (``spec`` and ``train`` with the sampled ones over them, :func:`paperlib.tuning.
    lm_hyperparameters`)."""
    from paperlib.search_spaces import get_space
    from paperlib.tuning import lm_hyperparameters

    sampled = {h.name: _centre(h.low, h.high, h.log, h.integer) for h in get_space(space).hyperparameters}
    options, sampled_train = lm_hyperparameters(sampled, spec["hidden_size"])
    return {**spec, "options": {**spec.get("options", {}), **options}}, {**train, **sampled_train}


def _language_model(name: str, spec: dict[str, Any], train: dict[str, Any], vocab: int, runs: int,
                    precision: str, cap: Cap) -> Workload:
    """A ``build_lm`` model trained by :class:`paperlib.train.Trainer`, whose step is the multi-sample objective
    (Melis §4.3) on a [B, BPTT] window, clipping and the optimizer."""
    from paperlib.models import build_lm, multi_sample_loss
    from paperlib.train import TrainConfig, build_optimizer

    config = TrainConfig(**train)

    def backward(model: nn.Module, bptt: int, device: torch.device) -> None:
        inputs = _tokens(vocab, config.batch_size, bptt, device=device)
        targets = _tokens(vocab, config.batch_size, bptt, device=device)
        with torch.autocast(device.type, torch.bfloat16, enabled=precision == "bf16"):
            loss, _ = multi_sample_loss(model, inputs, targets, config.num_samples)  # logits [D*B, T, V]
        loss.backward()

    samples = f"{config.num_samples}x" if config.num_samples > 1 else ""
    return Workload(name, lambda: build_lm(spec["cell"], vocab, spec["hidden_size"], spec["num_layers"],
                                           **spec.get("options", {})),
                    backward, lambda model: build_optimizer(model, config), config.max_steps, cap(config.bptt), runs,
                    config.clip_norm if config.clip_norm > 0 else None, f"{samples}{config.batch_size}")


def _lm_comparison(stage: str, settings: Any, precision: str, cap: Cap,
                   profile: str = "paper") -> Iterator[Workload]:
    """lm_ptb, lm_ptb_char, lm_ptb_ablation (:mod:`paperlib.experiments.language_models.lm_ptb`), lm_wt2_bytes (:mod:`paperlib.experiments.language_models.lm_wt2_bytes`):
    every model x seed, each model with its own ``train`` overrides."""
    from paperlib.experiments.language_models.lm_wt2_bytes import ByteCorpus

    vocab = ByteCorpus(settings.corpus, {}).vocab_size if stage == "lm_wt2_bytes" \
        else CORPORA[settings.corpus].vocab_size
    for name, spec in settings.models.items():
        train = {**settings.train, **spec.get("train", {})}
        yield _language_model(name, spec, train, vocab, len(settings.seeds), precision, cap)


def _averaging(stage: str, settings: Any, precision: str, cap: Cap,
               profile: str = "paper") -> Iterator[Workload]:
    """averaging_ptb (:mod:`paperlib.experiments.averaging.averaging_ptb`): the main 2TA run and the dropout-free overfitting run."""
    vocab = CORPORA[settings.corpus].vocab_size
    yield _language_model("main", settings.model, {**settings.train, "averaging": "2ta"}, vocab, 1, precision, cap)
    options = {k: v for k, v in settings.model.get("options", {}).items() if "dropout" not in k}
    yield _language_model("overfit", {**settings.model, "options": options}, settings.overfit_train, vocab, 1,
                          precision, cap)


def _tuning(stage: str, settings: Any, precision: str, cap: Cap,
            profile: str = "paper") -> Iterator[Workload]:
    """tuning_ptb (:mod:`paperlib.tuning`): ``trials`` full trainings per search space and the probes of the best
    trial's neighbourhood (``neighbours`` + ``reruns``), a trial at the centre of the Table 2.4 ranges (Melis §2.A)."""
    for space, spec in settings.models.items():
        model, train = tuning_trial(space, spec, settings.train)
        yield _language_model(space, model, train, CORPORA[settings.corpus].vocab_size,
                              settings.trials + settings.neighbours + settings.reruns, precision, cap)


def _dyneval(stage: str, settings: Any, precision: str, cap: Cap,
             profile: str = "paper") -> Iterator[Workload]:
    """dyneval (:mod:`paperlib.dyneval`): the AWD-LSTM-sized model trained once per corpus (Krause §4.7.1)."""
    for corpus in settings.corpora:
        if corpus not in settings.checkpoints:
            yield _language_model(corpus, settings.model, settings.train, CORPORA[corpus].vocab_size, 1, precision,
                                  cap)


def _dyneval_char(stage: str, settings: Any, precision: str, cap: Cap,
                  profile: str = "paper") -> Iterator[Workload]:
    """dyneval_char (:mod:`paperlib.experiments.dynamic_evaluation.dyneval_char`): every model, then the Fig. 3.2 scaling
    models it trains, ``scaling.seeds`` of each size (at a main model's own size, the seeds after the one it is)."""
    vocab = CORPORA[settings.corpus].vocab_size
    seeds = settings.scaling.get("seeds", 1)
    for name, spec in settings.models.items():
        yield _language_model(name, spec, {**settings.train, **spec.get("train", {})}, vocab, 1, precision, cap)
    for name, sizes in settings.scaling["hidden_sizes"].items():
        base = settings.models[name]
        for hidden in sizes:
            runs = seeds - 1 if hidden == base["hidden_size"] else seeds
            if runs:
                yield _language_model(f"{name}_h{hidden}", {**base, "hidden_size": hidden},
                                      {**settings.train, **base.get("train", {})}, vocab, runs, precision, cap)


def _dyneval_transformer(stage: str, settings: Any, precision: str, cap: Cap,
                         profile: str = "paper") -> Iterator[Workload]:
    """dyneval_transformer (:mod:`paperlib.experiments.dynamic_evaluation.dyneval_transformer`): the word-level
    Transformer, trained once."""
    yield _language_model("transformer", settings.model, settings.train, CORPORA[settings.corpus].vocab_size, 1,
                          precision, cap)


def _adam(lr: float, weight_decay: float = 0.0) -> Callable[[nn.Module], torch.optim.Optimizer]:
    """Adam with beta1 = 0, beta2 = 0.999, eps = 1e-8, the MICMCO experiments' optimizer (Melis §5.C)."""
    return lambda model: torch.optim.Adam(model.parameters(), lr=lr, betas=(0.0, 0.999), eps=1e-8,
                                          weight_decay=weight_decay)


def _micmco_synthetic(stage: str, settings: Any, precision: str, cap: Cap,
                      profile: str = "paper") -> Iterator[Workload]:
    """micmco_synthetic (:mod:`paperlib.experiments.micmco.synthetic.micmco_synthetic`): ``trials`` trainings per configuration of
    Melis §5.7.1, each step one batch of symbols through
    :func:`paperlib.experiments.micmco.synthetic.micmco_synthetic.step_surrogates` (or the VQ-VAE loss)."""
    for name in settings.selected:
        yield _symbol_workload(name, settings, settings.steps, settings.trials)


def _micmco_synthetic_ladder(stage: str, settings: Any, precision: str, cap: Cap,
                             profile: str = "paper") -> Iterator[Workload]:
    """micmco_synthetic_ladder (:mod:`paperlib.experiments.micmco.synthetic.ladder`): its curves, one run per seed
    and trial to the top rung, with the ``micmco_synthetic`` settings of the paper profile."""
    from paperlib.experiments.micmco.synthetic.micmco_synthetic import EXPERIMENT

    main = experiment_params(EXPERIMENT, profile)
    for name in settings.curves:
        yield _symbol_workload(name, main, settings.rungs[-1], len(settings.seeds) * settings.trials)


def _symbol_workload(name: str, settings: Any, steps: int, runs: int) -> Workload:
    """``runs`` trainings of one synthetic MICMCO configuration for ``steps`` steps, at its search space's centre."""
    from paperlib.experiments.micmco.synthetic.micmco_synthetic import CONFIGURATIONS, VQVAE, build_model, search_space, step_surrogates

    config = CONFIGURATIONS[name]
    params = centre(search_space(config))

    def backward(model: nn.Module, length: int, device: torch.device) -> None:
        x = _tokens(settings.vocab_size, settings.batch_size, device=device)  # [B] symbols
        if isinstance(model, VQVAE):
            model.loss(x)[0].backward()
        else:
            step_surrogates(model, x, config, params).backward(model.model_parameters(), model.encoder_parameters())

    return Workload(name, lambda: build_model(config, settings.vocab_size, settings.hidden_size, settings.latent_dim,
                                              settings.num_categorical, settings.categories, params),
                    backward, _adam(params["learning_rate"]), steps, 1, runs,
                    batch=f"{config.num_samples}x{settings.batch_size}")


def _micmco_ptb(stage: str, settings: Any, precision: str, cap: Cap,
                profile: str = "paper") -> Iterator[Workload]:
    """micmco_ptb (:mod:`paperlib.experiments.micmco.ptb.micmco_ptb`): ``trials`` trainings per curve of Melis §5.7.2
    (in stacks of ``stack_size``), each step a batch of sentences of ``max_len`` tokens through the curve's
    estimator, per-token loss."""
    from paperlib.experiments.micmco.ptb.micmco_ptb import CURVES

    for name in settings.selected:
        steps = settings.steps * CURVES[name].steps_factor
        if settings.stack_size is None:
            yield _sentence_workload(name, settings, steps, settings.trials, cap)
        else:  # the studies ask stack_size trials at a time: ceil(trials / size) stacks, each counted as a full one
            yield _sentence_workload(name, settings, steps, -(-settings.trials // settings.stack_size), cap,
                                     settings.stack_size)


def _micmco_ptb_ladder(stage: str, settings: Any, precision: str, cap: Cap,
                       profile: str = "paper") -> Iterator[Workload]:
    """micmco_ptb_ladder (:mod:`paperlib.experiments.micmco.ptb.ladder`): its curves, one run per seed and trial to
    the top rung (or stacks of ``stack_size`` runs), with the ``micmco_ptb`` settings of the paper profile."""
    from paperlib.experiments.micmco.ptb.micmco_ptb import EXPERIMENT

    main = experiment_params(EXPERIMENT, profile)
    runs = len(settings.seeds) * settings.trials
    for name in settings.curves:
        if settings.stack_size is None:
            yield _sentence_workload(name, main, settings.rungs[-1], runs, cap)
        else:  # ceil(runs / size) stacks, each counted as a full one
            yield _sentence_workload(name, main, settings.rungs[-1], -(-runs // settings.stack_size), cap,
                                     settings.stack_size)


def _sentence_workload(name: str, settings: Any, steps: int, runs: int, cap: Cap, stack: int | None = None) -> Workload:
    """``runs`` trainings of one PTB MICMCO curve for ``steps`` steps, at its search space's centre; with ``stack``,
    ``runs`` stacked trainings of that many models (:mod:`paperlib.experiments.micmco.ptb.stacked_trials`: encoders
    per model, decoders with state dropout as one vmapped pass, an Adam group per model)."""
    from paperlib.data import SentenceBatch
    from paperlib.experiments.micmco.synthetic.micmco_synthetic import step_surrogates
    from paperlib.experiments.micmco.ptb.micmco_ptb import CURVES, build_model, per_token
    from paperlib.experiments.micmco.ptb.stacked_trials import backward_all, stacked_surrogates
    from paperlib.stacked import StackedModels

    vocab = settings.vocab_size or CORPORA[settings.corpus].vocab_size
    curve = CURVES[name]
    params = centre(curve.space)
    batch_size = settings.batch_size * curve.batch_factor
    lr, weight_decay = params["learning_rate"], 2.0 * params.get("l2_penalty", 0.0)

    def full_batch(length: int, device: torch.device) -> SentenceBatch:  # every sentence at the truncation length
        tokens = _tokens(vocab, batch_size, length, device=device)  # [B, T]
        return SentenceBatch(tokens, tokens, torch.ones_like(tokens, dtype=torch.bool),
                             torch.full((batch_size,), length, device=device))

    samples = f"{curve.estimator.num_samples}x{batch_size}"
    if stack is None:
        def backward(model: nn.Module, length: int, device: torch.device) -> None:
            surrogates = step_surrogates(model, full_batch(length, device), curve.estimator, params)
            per_token(surrogates, batch_size * length).backward(model.model_parameters(), model.encoder_parameters())

        return Workload(name, lambda: build_model(curve, params, settings, vocab), backward, _adam(lr, weight_decay),
                        steps, cap(settings.max_len), runs, batch=samples)

    def stacked_backward(models: nn.Module, length: int, device: torch.device) -> None:
        batch = full_batch(length, device)
        surrogates = stacked_surrogates(StackedModels(list(models)), range(stack), curve, [params] * stack,
                                        [batch] * stack, [batch_size * length] * stack, [None] * stack)
        backward_all(surrogates, list(models))

    def optimizer(models: nn.Module) -> torch.optim.Optimizer:  # one parameter group per model, as StackedTrials
        return torch.optim.Adam([{"params": list(m.parameters())} for m in models], lr=lr, betas=(0.0, 0.999),
                                eps=1e-8, weight_decay=weight_decay)

    return Workload(f"{name} (stacks of {stack})",
                    lambda: nn.ModuleList(build_model(curve, params, settings, vocab) for _ in range(stack)),
                    stacked_backward, optimizer, steps, cap(settings.max_len), runs, batch=f"{stack}x{samples}",
                    models=stack)


def _word_workload(name: str, spec: dict[str, Any], settings: Any, steps: int, runs: int, cap: Cap) -> Workload:
    """One word-generation model (S&H §2.6, §5.1): Adam on the negative bound of words of ``max_len`` letters."""
    from paperlib.models.dssm import CharVocab
    from paperlib.experiments.word_generation.word_generation import build_model, model_loss

    vocab = CharVocab(string.ascii_lowercase)  # the word list keeps words of a-z (paperlib.data.wordlist)
    samples = spec.get("samples", 1)

    def backward(model: nn.Module, length: int, device: torch.device) -> None:
        tokens = _tokens(vocab.size, settings.batch_size, length, device=device)  # [B, T] letters + end of word
        with unset_fake_temporarily():  # real: the models check the lengths on the host
            lengths = torch.full((settings.batch_size,), length)  # [B]
        model_loss(model, tokens, lengths, samples, torch.Generator(device)).backward()

    return Workload(name, lambda: build_model(spec, vocab, settings.max_len), backward,
                    lambda model: torch.optim.Adam(model.parameters(), lr=settings.lr), steps,
                    cap(settings.max_len + 1), runs, settings.clip_norm, f"{samples}x{settings.batch_size}")


def _stacked_word_workload(name: str, spec: dict[str, Any], settings: Any, steps: int, runs: int, size: int,
                           cap: Cap) -> Workload:
    """``runs`` stacks of ``size`` word-generation models of one spec
    (:func:`~paperlib.experiments.word_generation.training.train_stacked`): each model's words and noise drawn on
    its own, one vmapped loss, an Adam and a clipping norm per model."""
    from paperlib.models.dssm import CharVocab
    from paperlib.experiments.word_generation.training import stacked_losses, stacked_noise
    from paperlib.experiments.word_generation.word_generation import build_model
    from paperlib.stacked import StackedModels

    vocab = CharVocab(string.ascii_lowercase)
    samples, batch = spec.get("samples", 1), settings.batch_size

    def backward(models: nn.Module, length: int, device: torch.device) -> None:
        tokens = torch.stack([_tokens(vocab.size, batch, length, device=device) for _ in models])  # [M, B, T]
        lengths = torch.full((len(models), batch), length, device=device)  # [M, B]
        noise = None
        if spec["kind"] == "dssm":
            noise = stacked_noise(list(models), [length] * len(models), samples, batch,
                                  [torch.Generator(device) for _ in models], length)
        stacked_losses(StackedModels(list(models)), tokens, lengths, samples, noise).sum().backward()

    return Workload(f"{name} (stacks of {size})",
                    lambda: nn.ModuleList(build_model(spec, vocab, settings.max_len) for _ in range(size)), backward,
                    lambda models: torch.optim.Adam([{"params": list(m.parameters())} for m in models], lr=settings.lr),
                    steps, cap(settings.max_len + 1), runs, settings.clip_norm, f"{size}x{samples}x{batch}",
                    models=size)


def _word_runs(name: str, spec: dict[str, Any], settings: Any, steps: int, count: int, cap: Cap) -> Workload:
    """``count`` runs of one word-generation spec as the stages train them
    (:func:`~paperlib.experiments.word_generation.training.train_runs`): with ``stack_size``, ceil(count / size)
    stacks of ``size`` = min(stack_size, count) models, each counted as a full one; alone where the model does not
    stack (Real NVP), without ``stack_size``, or where a spec has one run."""
    from paperlib.models.dssm import CharVocab
    from paperlib.experiments.word_generation.word_generation import build_model, stackable

    with torch.random.fork_rng(devices=[]):  # a throwaway model, to ask whether it stacks
        stacks = settings.stack_size is not None and stackable(build_model(spec, CharVocab("ab"), settings.max_len))
    size = min(settings.stack_size, count) if stacks else 1
    if size > 1:
        return _stacked_word_workload(name, spec, settings, steps, -(-count // size), size, cap)
    return _word_workload(name, spec, settings, steps, count, cap)


def _word_generation(stage: str, settings: Any, precision: str, cap: Cap,
                     profile: str = "paper") -> Iterator[Workload]:
    """word_generation (:mod:`paperlib.experiments.word_generation.word_generation`): every planned run (model spec x
    split x seed), alone or in stacks of a spec's seeds (:func:`_word_runs`)."""
    from paperlib.experiments.word_generation.word_generation import complete_spec, plan_runs

    planned = plan_runs(settings)
    runs = Counter(run.labels for run in planned)
    for labels, count in runs.items():
        spec = complete_spec(next(run.spec for run in planned if run.labels == labels))
        yield _word_runs(", ".join(labels), spec, settings, settings.steps, count, cap)


def _word_generation_ladder(stage: str, settings: Any, precision: str, cap: Cap,
                            profile: str = "paper") -> Iterator[Workload]:
    """word_generation_ladder (:mod:`paperlib.experiments.word_generation.ladder`): its two rows, one run per seed
    to the top rung (alone or a row's seeds in stacks, :func:`_word_runs`), with the ``word_generation`` settings of
    the paper profile (read from ``params.yaml``)."""
    from paperlib.experiments.word_generation.word_generation import NAME, complete_spec
    from paperlib.experiments.word_generation.ladder import main_settings

    main = main_settings(settings, experiment_params(NAME, profile))
    for row in (settings.dssm, settings.baseline):
        yield _word_runs(row, complete_spec(main.table1[row]), main, settings.rungs[-1], len(settings.seeds), cap)


def _reverse_copy(stage: str, settings: Any, precision: str, cap: Cap,
                  profile: str = "paper") -> Iterator[Workload]:
    """reverse_copy (:mod:`paperlib.experiments.reverse_copy.reverse_copy`): every grid point of Melis §2.3.3 (points that differ only in
    learning rate, L2 and seed are one workload), teacher-forced on [B, L] examples. One model runs at every length of the
    grid: it is measured at the two shortest and extrapolated to the others. With a model's ``stack_size``, its runs of
    a shape train in stacks (:func:`~paperlib.experiments.reverse_copy.training.train_stacked`: one vmapped pass, an optimizer
    group and a clipping norm per model): ceil(runs / size) steps of that many models each (fewer when the shape has
    fewer runs), the last one counted as full."""
    from paperlib.experiments.reverse_copy.reverse_copy import build_model, grid_points, token_cross_entropy
    from paperlib.stacked import StackedModels

    points = grid_points(settings)
    shapes = Counter((p.model, p.length, p.embedding_size, p.hidden_size, p.mogrifier_rounds, p.mogrifier_rank,
                      p.mogrifier_zigzag, p.capped_input_gate) for p in points)
    probes = tuple(cap(length) for length in sorted(settings.lengths)[:2])
    kind = torch.optim.RAdam if settings.optimizer == "radam" else torch.optim.Adam
    vocab, batch = settings.vocab_size, settings.batch_size
    clip = settings.clip_norm if settings.clip_norm > 0 else None

    def backward(model: nn.Module, length: int, device: torch.device) -> None:
        source = _tokens(vocab, batch, length, device=device)  # [B, L]
        targets = _tokens(vocab, batch, length, device=device)
        logits = model(source, _tokens(vocab + 1, batch, length, device=device))  # [B, L, V]
        token_cross_entropy(logits, targets).backward()

    def stacked_backward(models: nn.Module, length: int, device: torch.device) -> None:
        size = len(models)
        source = _tokens(vocab, size, batch, length, device=device)  # [M, B, L]
        inputs = _tokens(vocab + 1, size, batch, length, device=device)
        targets = _tokens(vocab, size, batch, length, device=device)
        logits = StackedModels(list(models)).call(lambda model, s, d: model(s, d), source, inputs)  # [M, B, L, V]
        F.cross_entropy(logits.flatten(0, 2), targets.flatten(), reduction="none").view(size, -1).mean(1).sum().backward()

    for (name, length, *shape), count in shapes.items():
        emb, hidden, rounds, rank = shape[:4]
        label = f"{name} L={length} E={emb}" + (f" r={rounds} k={rank}" if rounds is not None else "")

        def build(shape: list = shape) -> nn.Module:
            return build_model(vocab, shape[0], shape[1], settings.num_layers, *shape[2:])

        stack_size = settings.models[name].get("stack_size")
        if stack_size is None:
            yield Workload(label, build, backward, lambda model: kind(model.parameters(), betas=(settings.beta1, 0.999)),
                           settings.steps, cap(length), count, clip, str(batch), key=(name, *shape), probes=probes)
            continue
        size = min(stack_size, count)
        yield Workload(f"{label} (stacks of {size})", lambda build=build, size=size: nn.ModuleList(
                           build() for _ in range(size)),
                       stacked_backward,
                       lambda models: kind([{"params": list(m.parameters())} for m in models],
                                           betas=(settings.beta1, 0.999)),
                       settings.steps, cap(length), -(-count // size), clip, f"{size}x{batch}",
                       key=(name, *shape, size), probes=probes, models=size)


def _music(stage: str, settings: Any, precision: str, cap: Cap,
           profile: str = "paper") -> Iterator[Workload]:
    """music (:mod:`paperlib.experiments.music.music`): per corpus, the LSTM-NADE per seed and the frame NADE, on batches
    of songs as long as the longest training song (or a ``bptt`` window), every window of every epoch
    (:data:`paperlib.data.music.TRAIN_SHAPES`); real frames of 4 sounding notes (JSB's most), since the NADE reads
    on the host which notes sound (:func:`paperlib.models.nade.sparse_nade_logits`)."""
    from paperlib.data.music import NOTES, TRAIN_SHAPES
    from paperlib.experiments.music.music import build_model
    from paperlib.models.nade import NADE
    from paperlib.song_training import SongTrainConfig, build_optimizer

    def workload(name: str, build: Callable[[], nn.Module], train: dict[str, Any], corpus: str, runs: int) -> Workload:
        config = SongTrainConfig(**train)
        songs, longest = TRAIN_SHAPES[corpus]
        length = cap(min(longest, config.bptt or longest))
        steps = config.max_epochs * math.ceil(songs / config.batch_size) * math.ceil(longest / (config.bptt or longest))

        def backward(model: nn.Module, length: int, device: torch.device) -> None:
            with unset_fake_temporarily():
                frames = torch.zeros(config.batch_size, length, NOTES, device=device)
                frames[..., 40:48:2] = 1.0  # [B, L, 88]: 4 sounding notes per frame
            log_probs, _ = model(frames)  # [B, L]
            (-log_probs.mean()).backward()

        return Workload(name, build, backward, lambda model: build_optimizer(model, config), steps, length, runs,
                        config.clip_norm if config.clip_norm > 0 else None, str(config.batch_size))

    for corpus in settings.corpora:
        yield workload(f"{corpus} LSTM-NADE", lambda corpus=corpus: build_model(settings.model[corpus]),
                       settings.train[corpus], corpus, len(settings.seeds))
        if corpus in settings.frame_nade:
            block = settings.frame_nade[corpus]
            yield workload(f"{corpus} NADE (1 frame)", lambda block=block: NADE(NOTES, block["hidden_size"]),
                           block["train"], corpus, 1)


ADAPTERS: dict[str, Callable[[str, Any, str, Cap, str], Iterator[Workload]]] = {
    "lm_ptb": _lm_comparison, "lm_ptb_char": _lm_comparison, "lm_ptb_ablation": _lm_comparison,
    "lm_wt2_bytes": _lm_comparison, "averaging_ptb": _averaging, "tuning_ptb": _tuning, "dyneval": _dyneval,
    "dyneval_char": _dyneval_char, "dyneval_transformer": _dyneval_transformer,
    "micmco_synthetic": _micmco_synthetic, "micmco_synthetic_ladder": _micmco_synthetic_ladder,
    "micmco_ptb": _micmco_ptb, "micmco_ptb_ladder": _micmco_ptb_ladder,
    "word_generation": _word_generation, "word_generation_ladder": _word_generation_ladder,
    "reverse_copy": _reverse_copy, "music": _music,
}
STAGES = tuple(ADAPTERS)


__all__ = ["ADAPTERS", "STAGES", "Cap", "centre", "tuning_trial"]
