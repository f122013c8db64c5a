"""Dry run of the ``paper`` profile: does one training step of every stage fit on a GPU, and how long would the
stage take there?

For every experiment stage (``data_summary`` trains nothing) the stage's own builders make the models of its
``paper`` profile, and ONE training step (forward, backward, clipping where the stage clips, optimizer step) runs on
fake tensors (``torch._subclasses.fake_tensor.FakeTensorMode``): shapes propagate, nothing is computed or allocated.
Per workload (a model, or the runs of a stage that share one shape), :class:`StepCounter` records the parameters,
the peak of live memory in a steady-state step (parameters, gradients, the optimizer state of one warm-up update,
activations, temporaries), FLOPs (``torch.utils.flop_counter``'s formulas: matmuls, convolutions, attention) and
kernels (ATen operators other than views and allocations, each one eager CUDA launch); the stage's adapter says how
many steps each run takes and how many runs (seeds, trials, grid points) there are. The GPU time of a workload is
the larger of compute-bound time, FLOPs / (MFU x peak at the profile's ``compute.precision``), and launch-bound
time, kernels x the time per kernel (:func:`paperlib.experiments.dryrun.gpu_time.estimate`, with a datasheet's constants or
ones fitted to a GPU measurement): recurrent models loop over time steps in Python with small matmuls, so on a GPU
they mostly wait for kernel launches. ``profile`` picks the settings (``paper`` by default).

Assumptions and departures (also in the JSON):

- Fake tensors live on the CPU device: autograd on fake ``cuda`` tensors aborts the process in a CPU-only torch
  build (``getDeviceGuardImpl``), and the CPU keeps the numbers the same on every machine. Optimizers use their
  ``foreach`` kernels, as on CUDA. ``nn.LSTM`` runs as one fused oneDNN layer on a CPU as cuDNN's does on a GPU;
  ``nn.GRU`` and LSTMs on packed sequences (the word-generation GRUs, micmco_ptb's encoder) run per time step on a
  CPU, so their kernel counts are upper bounds. The CUDA context (~0.5 GB), allocator rounding and library
  workspaces are not in the peak.
- Training only: evaluation (validation, MC dropout, dynamic-evaluation grids, IWAE with hundreds of samples) and
  weight averaging are not counted; one GPU, steps back to back, no data loading or host synchronisation.
- Every sequence has the profile's full length (BPTT; sentences of ``max_len`` tokens, whose masks then select
  everything, :class:`FullLengths`; words of ``max_len`` letters); hyperparameters tuned per trial that change
  shapes (ranks, rounds, embedding ratio, dropout on or off) sit at the centre of their search range; every trial
  runs to the end (tuning_ptb's pruning would shorten it). A reverse-copy model runs at four lengths: it is
  measured at the two shortest and extrapolated linearly (exact for FLOPs and kernels, one recurrent step per
  position; memory too once activations dominate, checked in the tests).
"""

from __future__ import annotations

import gc
import math
import string
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from paperlib.experiments.common.config import experiment_params, load_params, section_params
from paperlib.experiments.dryrun.gpu_time import DATASHEET, Constants, estimate
from paperlib.data.corpora import CORPORA

FAKE_DEVICE = "cpu"  # see the module docstring
NO_KERNEL = ("empty", "new_empty", "detach", "_unsafe_view", "lift_fresh")  # allocations and aliases
# fused RNN layers (nn.LSTM as one oneDNN call, as cuDNN on a GPU) have no FLOP formula in torch: x forward FLOPs
FUSED_RNN = {torch.ops.aten.mkldnn_rnn_layer: 1, torch.ops.aten.mkldnn_rnn_layer_backward: 2}


@dataclass(frozen=True)
class Workload:
    """One model shape of a stage: ``build`` it (on the meta device), run ``backward(model, length, device)`` (a
    batch of sequences of ``length`` made on ``device``: forward pass, gradients; fake inside the dry run, real when
    ``benchmarks/gpu.py`` times the step) and the stage's ``optimizer``; ``steps`` per run. Workloads
    of one ``key`` are one model at several lengths, measured at the ``probes`` lengths (see :func:`measure`)."""

    name: str
    build: Callable[[], nn.Module]
    backward: Callable[[nn.Module, int, torch.device], None]
    optimizer: Callable[[nn.Module], torch.optim.Optimizer]
    steps: int
    length: int
    runs: int = 1
    clip_norm: float | None = None
    batch: str = ""  # [samples x] batch size, for the table
    key: tuple | None = None
    probes: tuple[int, int] | None = None
    models: int = 1  # models trained together in one (stacked) step; parameters are reported per model


class StepCounter(TorchDispatchMode):
    """Counts one training step: kernels (ATen operators on device tensors but views and allocations), FLOPs (the
    formulas ``FlopCounterMode`` uses, plus fused RNN layers: 2 per weight per position) and the peak of live
    storage bytes, starting from the ``existing`` tensors (parameters, buffers, optimizer state)."""

    def __init__(self, existing: Sequence[Tensor]) -> None:
        super().__init__()
        storages = {t.untyped_storage()._cdata: t.untyped_storage().nbytes() for t in existing}
        self._alive: dict[int, weakref.finalize | None] = dict.fromkeys(storages)
        self.kernels, self.flops, self.live = 0, 0, sum(storages.values())
        self.static = self.peak = self.live

    def _free(self, key: int, nbytes: int) -> None:
        self.live -= nbytes
        self._alive.pop(key, None)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        on_host = any(isinstance(a, Tensor) for a in args) and not any(isinstance(a, FakeTensor) for a in args)
        if func.namespace == "aten" and not func.is_view and not func.__name__.startswith(NO_KERNEL) \
                and not on_host:  # prim ops are fake-tensor bookkeeping; real tensors are host-side values
            self.kernels += 1
        if func._overloadpacket in flop_registry:
            self.flops += flop_registry[func._overloadpacket](*args, **kwargs, out_val=out)
        elif func._overloadpacket in FUSED_RNN:  # inputs [T, B, I] (either layout), weights [G*H, I], [G*H, H]
            inputs, weight_ih, weight_hh = args[:3]
            self.flops += FUSED_RNN[func._overloadpacket] * 2 * inputs.shape[0] * inputs.shape[1] * (
                weight_ih.numel() + weight_hh.numel())
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, Tensor):  # new storages count; views and in-place results are known ones
                storage = tensor.untyped_storage()
                if storage._cdata not in self._alive:
                    self._alive[storage._cdata] = weakref.finalize(storage, self._free, storage._cdata,
                                                                   storage.nbytes())
                    self.live += storage.nbytes()
        self.peak = max(self.peak, self.live)
        return out


class FullLengths(TorchDispatchMode):
    """Answers the operators whose output shape depends on data, for batches whose every position is real (the
    dry run's full-length sequences): packing padded sequences of equal length, boolean masks that select all
    (``x[mask]`` and the ``index_put`` of its backward). Operators on real tensors only run for real (the host-side
    batch sizes of a packed sequence, lengths a model checks on the host)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if any(isinstance(a, Tensor) for a in args) and not any(isinstance(a, FakeTensor) for a in args):
            with unset_fake_temporarily():
                return func(*args, **kwargs)
        if func is torch.ops.aten._pack_padded_sequence.default:
            inputs, _, batch_first = args
            time_major = inputs.transpose(0, 1) if batch_first else inputs  # [T, B, ...]
            with unset_fake_temporarily():  # the packed LSTM reads the batch sizes on the host
                batch_sizes = torch.full(time_major.shape[:1], time_major.shape[1], dtype=torch.long)
            return time_major.reshape(-1, *time_major.shape[2:]).clone(), batch_sizes
        masks = [i for i in (args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else ())
                 if isinstance(i, Tensor) and i.dtype == torch.bool]
        if func is torch.ops.aten.index.Tensor and masks:
            return args[0].reshape(-1, *args[0].shape[masks[0].dim():]).clone()  # [N = mask.numel(), ...]
        if masks and func in (torch.ops.aten.index_put.default, torch.ops.aten.index_put_.default,
                              torch.ops.aten._index_put_impl_.default):
            target, values = args[0], args[2].reshape(args[0].shape)
            accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
            if func is torch.ops.aten.index_put.default:
                return target + values if accumulate else values.clone()
            return target.add_(values) if accumulate else target.copy_(values)
        return func(*args, **kwargs)


def materialise(model: nn.Module, device: str | torch.device, buffers: bool = True) -> nn.Module:
    """Replace a (meta) model's parameters, and its buffers unless ``buffers`` is False (values a model reads, such
    as coupling masks), by empty tensors on ``device`` (fake inside :class:`FakeTensorMode`); ties stay tied."""
    made: dict[int, Tensor] = {}
    for module in model.modules():
        for store in (module._parameters, module._buffers) if buffers else (module._parameters,):
            for name, tensor in store.items():
                if tensor is not None and id(tensor) not in made:
                    new = torch.empty(tensor.shape, dtype=tensor.dtype, device=device)
                    made[id(tensor)] = nn.Parameter(new, tensor.requires_grad) \
                        if isinstance(tensor, nn.Parameter) else new
                if tensor is not None:
                    store[name] = made[id(tensor)]
    return model


def num_parameters(model: nn.Module) -> int:
    """Distinct parameter elements (tied weights once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def measure_step(workload: Workload, length: int) -> dict[str, int]:
    """Parameters, peak memory, parameter + optimizer-state bytes, FLOPs and kernels of one steady-state training
    step of ``workload`` on sequences of ``length``."""
    try:
        with torch.device("meta"):
            model, on_meta = workload.build(), True
    except (RuntimeError, NotImplementedError):  # a builder that reads values (a flow's .item()): build for real
        model, on_meta = workload.build(), False
    collecting = gc.isenabled()
    gc.disable()  # frees by reference counting only: the same peak on every run
    try:
        with FakeTensorMode(allow_non_fake_inputs=True), FullLengths():
            materialise(model, FAKE_DEVICE, buffers=on_meta)
            optimizer = workload.optimizer(model)
            for group in optimizer.param_groups:
                group["foreach"] = True  # the default on CUDA
            for p in model.parameters():  # warm-up: the optimizer state exists from the second step on
                p.grad = torch.zeros_like(p)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            state = [v for s in optimizer.state.values() for v in s.values() if isinstance(v, Tensor)]
            with StepCounter([*model.parameters(), *model.buffers(), *state]) as counter:
                workload.backward(model, length, torch.device(FAKE_DEVICE))
                if workload.clip_norm:
                    nn.utils.clip_grad_norm_(model.parameters(), workload.clip_norm)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    finally:
        if collecting:
            gc.enable()
    return {"parameters": num_parameters(model), "peak_memory_bytes": counter.peak,
            "weights_and_optimizer_bytes": counter.static, "flops_per_step": counter.flops,
            "kernels_per_step": counter.kernels}


def measure(workload: Workload, cache: dict | None = None) -> dict[str, int]:
    """:func:`measure_step` at the workload's length, or extrapolated linearly in the length from its two
    ``probes`` (measurements of one ``key`` are shared through ``cache``)."""
    cache = {} if cache is None else cache

    def at(length: int) -> dict[str, int]:
        if workload.key is None:
            return measure_step(workload, length)
        if (workload.key, length) not in cache:
            cache[workload.key, length] = measure_step(workload, length)
        return cache[workload.key, length]

    if workload.probes is None or workload.length in workload.probes or len(set(workload.probes)) < 2:
        return at(workload.length)
    (low, high), (a, b) = workload.probes, (at(workload.probes[0]), at(workload.probes[1]))
    return {k: round(a[k] + (b[k] - a[k]) * (workload.length - low) / (high - low)) for k in a}


# ---------------------------------------------------------------------------------------------------
# one adapter per stage: the paper profile's settings -> workloads; ``cap`` shortens sequences (quick checks)

Cap = Callable[[int], int]


def _tokens(vocab: int, *shape: int, device: torch.device) -> Tensor:
    return torch.randint(vocab, shape, device=device)


def _centre(low: float, high: float, log: bool, integer: bool) -> float:
    """The middle of a search range on its sampling scale."""
    value = math.sqrt(low * high) if log else (low + high) / 2
    return round(value) if integer else value


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
    from paperlib.search_spaces import get_space
    from paperlib.tuning import lm_hyperparameters

    for space, spec in settings.models.items():
        sampled = {h.name: _centre(h.low, h.high, h.log, h.integer) for h in get_space(space).hyperparameters}
        options, train = lm_hyperparameters(sampled, spec["hidden_size"])
        model = {**spec, "options": {**spec.get("options", {}), **options}}
        yield _language_model(space, model, {**settings.train, **train}, CORPORA[settings.corpus].vocab_size,
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
    """dyneval_char (:mod:`paperlib.experiments.dynamic_evaluation.dyneval_char`): every model, then the Fig. 3.2 scaling models it trains."""
    vocab = CORPORA[settings.corpus].vocab_size
    for name, spec in settings.models.items():
        yield _language_model(name, spec, {**settings.train, **spec.get("train", {})}, vocab, 1, precision, cap)
    for name, sizes in settings.scaling["hidden_sizes"].items():
        base = settings.models[name]
        for hidden in sizes:
            if hidden != base["hidden_size"]:
                yield _language_model(f"{name}_h{hidden}", {**base, "hidden_size": hidden},
                                      {**settings.train, **base.get("train", {})}, vocab, 1, precision, cap)


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
    params = {k: _centre(r.low, r.high, r.log, r.integer) for k, r in search_space(config).items()}

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
            yield _stacked_sentence_workload(name, settings, steps, -(-settings.trials // settings.stack_size),
                                             settings.stack_size, cap)


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
            yield _stacked_sentence_workload(name, main, settings.rungs[-1], -(-runs // settings.stack_size),
                                             settings.stack_size, cap)


def _sentence_workload(name: str, settings: Any, steps: int, runs: int, cap: Cap) -> Workload:
    """``runs`` trainings of one PTB MICMCO curve for ``steps`` steps, at its search space's centre."""
    from paperlib.data import SentenceBatch
    from paperlib.experiments.micmco.synthetic.micmco_synthetic import step_surrogates
    from paperlib.experiments.micmco.ptb.micmco_ptb import CURVES, build_model, per_token

    vocab = settings.vocab_size or CORPORA[settings.corpus].vocab_size
    curve = CURVES[name]
    params = {k: _centre(r.low, r.high, r.log, r.integer) for k, r in curve.space.items()}
    batch_size = settings.batch_size * curve.batch_factor

    def backward(model: nn.Module, length: int, device: torch.device) -> None:
        tokens = _tokens(vocab, batch_size, length, device=device)  # [B, T]: every sentence at the truncation length
        batch = SentenceBatch(tokens, tokens, torch.ones_like(tokens, dtype=torch.bool),
                              torch.full((batch_size,), length, device=device))
        surrogates = step_surrogates(model, batch, curve.estimator, params)
        per_token(surrogates, batch_size * length).backward(model.model_parameters(), model.encoder_parameters())

    return Workload(name, lambda: build_model(curve, params, settings, vocab), backward,
                    _adam(params["learning_rate"], 2.0 * params.get("l2_penalty", 0.0)), steps,
                    cap(settings.max_len), runs, batch=f"{curve.estimator.num_samples}x{batch_size}")


def _stacked_sentence_workload(name: str, settings: Any, steps: int, stacks: int, size: int, cap: Cap) -> Workload:
    """``stacks`` stacked trainings of ``size`` models of one PTB MICMCO curve (:mod:`paperlib.experiments.micmco.ptb.
    stacked_trials`: encoders per model, decoders with state dropout as one vmapped pass, an Adam group per model),
    at the space's centre."""
    from paperlib.data import SentenceBatch
    from paperlib.experiments.micmco.ptb.micmco_ptb import CURVES, build_model
    from paperlib.experiments.micmco.ptb.stacked_trials import backward_all, stacked_surrogates
    from paperlib.stacked import StackedModels

    vocab = settings.vocab_size or CORPORA[settings.corpus].vocab_size
    curve = CURVES[name]
    params = {k: _centre(r.low, r.high, r.log, r.integer) for k, r in curve.space.items()}
    batch_size = settings.batch_size * curve.batch_factor

    def backward(models: nn.Module, length: int, device: torch.device) -> None:
        tokens = _tokens(vocab, batch_size, length, device=device)  # [B, T]: every sentence at the truncation length
        batch = SentenceBatch(tokens, tokens, torch.ones_like(tokens, dtype=torch.bool),
                              torch.full((batch_size,), length, device=device))
        stack = StackedModels(list(models))
        surrogates = stacked_surrogates(stack, range(size), curve, [params] * size, [batch] * size,
                                        [batch_size * length] * size, [None] * size)
        backward_all(surrogates, list(models))

    def optimizer(models: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam([{"params": list(m.parameters())} for m in models], lr=params["learning_rate"],
                                betas=(0.0, 0.999), eps=1e-8, weight_decay=2.0 * params.get("l2_penalty", 0.0))

    return Workload(f"{name} (stacks of {size})",
                    lambda: nn.ModuleList(build_model(curve, params, settings, vocab) for _ in range(size)), backward,
                    optimizer, steps, cap(settings.max_len), stacks,
                    batch=f"{size}x{curve.estimator.num_samples}x{batch_size}", models=size)


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


def _word_generation(stage: str, settings: Any, precision: str, cap: Cap,
                     profile: str = "paper") -> Iterator[Workload]:
    """word_generation (:mod:`paperlib.experiments.word_generation.word_generation`): every planned run (model spec x split x
    seed)."""
    from paperlib.experiments.word_generation.word_generation import complete_spec, plan_runs

    planned = plan_runs(settings)
    runs = Counter(run.labels for run in planned)
    for labels, count in runs.items():
        spec = complete_spec(next(run.spec for run in planned if run.labels == labels))
        yield _word_workload(", ".join(labels), spec, settings, settings.steps, count, cap)


def _word_generation_ladder(stage: str, settings: Any, precision: str, cap: Cap,
                            profile: str = "paper") -> Iterator[Workload]:
    """word_generation_ladder (:mod:`paperlib.experiments.word_generation.ladder`): its two rows, one run per seed
    to the top rung, with the ``word_generation`` settings of the paper profile (read from ``params.yaml``)."""
    from paperlib.experiments.word_generation.word_generation import NAME, complete_spec
    from paperlib.experiments.word_generation.ladder import main_settings

    main = main_settings(settings, experiment_params(NAME, profile))
    for row in (settings.dssm, settings.baseline):
        yield _word_workload(row, complete_spec(main.table1[row]), main, settings.rungs[-1], len(settings.seeds), cap)


def _reverse_copy(stage: str, settings: Any, precision: str, cap: Cap,
                  profile: str = "paper") -> Iterator[Workload]:
    """reverse_copy (:mod:`paperlib.experiments.reverse_copy.reverse_copy`): every grid point of Melis §2.3.3 (points that differ only in
    learning rate and L2 are one workload), teacher-forced on [B, L] examples. One model runs at every length of the
    grid: it is measured at the two shortest and extrapolated to the others."""
    from paperlib.experiments.reverse_copy.reverse_copy import build_model, grid_points, token_cross_entropy

    points = grid_points(settings)
    shapes = Counter((p.model, p.length, p.embedding_size, p.hidden_size, p.mogrifier_rounds, p.mogrifier_rank,
                      p.mogrifier_zigzag, p.capped_input_gate) for p in points)
    probes = tuple(cap(length) for length in sorted(settings.lengths)[:2])
    optimizer = torch.optim.RAdam if settings.optimizer == "radam" else torch.optim.Adam
    vocab, batch = settings.vocab_size, settings.batch_size

    def backward(model: nn.Module, length: int, device: torch.device) -> None:
        source = _tokens(vocab, batch, length, device=device)  # [B, L]
        targets = _tokens(vocab, batch, length, device=device)
        logits = model(source, _tokens(vocab + 1, batch, length, device=device))  # [B, L, V]
        token_cross_entropy(logits, targets).backward()

    for (name, length, *shape), count in shapes.items():
        emb, hidden, rounds, rank = shape[:4]
        label = f"{name} L={length} E={emb}" + (f" r={rounds} k={rank}" if rounds is not None else "")
        yield Workload(label, lambda shape=shape: build_model(vocab, shape[0], shape[1], settings.num_layers,
                                                              *shape[2:]),
                       backward, lambda model: optimizer(model.parameters(), betas=(settings.beta1, 0.999)),
                       settings.steps, cap(length), count, settings.clip_norm if settings.clip_norm > 0 else None,
                       str(batch), key=(name, *shape), probes=probes)


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
    "dyneval_char": _dyneval_char, "micmco_synthetic": _micmco_synthetic,
    "micmco_synthetic_ladder": _micmco_synthetic_ladder, "micmco_ptb": _micmco_ptb,
    "micmco_ptb_ladder": _micmco_ptb_ladder,
    "word_generation": _word_generation, "word_generation_ladder": _word_generation_ladder,
    "reverse_copy": _reverse_copy, "music": _music,
}
STAGES = tuple(ADAPTERS)


# ---------------------------------------------------------------------------------------------------
# the dry run, its table and the CLI's entry point

def check_stages(stages: Sequence[str] | None) -> list[str]:
    """The stages asked for (all of them for None or empty), or a ValueError naming the valid ones."""
    unknown = [s for s in stages or () if s not in ADAPTERS]
    if unknown:
        raise ValueError(f"unknown stage(s) {', '.join(unknown)}; stages with a dry run: {', '.join(STAGES)} "
                         "(data_summary trains nothing)")
    return list(dict.fromkeys(stages)) if stages else list(STAGES)


def assumptions(precision: str, max_length: int | None = None, constants: Constants = DATASHEET,
                profile: str = "paper") -> dict[str, Any]:
    """The constants and choices every estimate rests on (written into the JSON)."""
    extra = {} if constants is DATASHEET else {"profile": profile, "constants": constants.source}
    return {"gpu": constants.gpu, "precision": precision, "peak_tflops": constants.peak_flops[precision] / 1e12,
            "mfu": constants.mfu, "kernel_latency_us": constants.kernel_latency_s * 1e6, "fake_device": FAKE_DEVICE,
            "torch": torch.__version__, "max_length": max_length, **extra,
            "counts": "training steps only (no evaluation, no weight averaging); every sequence at full length; "
                      "tuned shape hyperparameters at the centre of their ranges; every trial run to the end"}


def dry_run(stages: Sequence[str] | None = None, params: dict[str, Any] | None = None,
            max_length: int | None = None, progress: Callable[[str], None] | None = None, profile: str = "paper",
            constants: Constants = DATASHEET) -> dict[str, Any]:
    """Measure every workload of ``stages`` (default: all) in ``profile`` and estimate its GPU time with
    ``constants`` (the datasheet's, or fitted to a GPU measurement).

    ``max_length`` caps every sequence length (a quick check that the configs build and step; the numbers are then
    not the paper's). Returns ``{"assumptions": ..., "stages": {stage: {"gpu_hours", "peak_memory_bytes",
    "workloads": {name: {...}}}}}``, keys in a fixed order.
    """
    chosen = check_stages(stages)
    params = params if params is not None else load_params()
    precision = section_params("compute", params).precision[profile]
    cap: Cap = (lambda length: length) if max_length is None else (lambda length: min(length, max_length))
    out: dict[str, Any] = {"assumptions": assumptions(precision, max_length, constants, profile), "stages": {}}
    for stage in chosen:
        settings = experiment_params(stage, profile, params)
        cache: dict = {}
        workloads: dict[str, dict[str, Any]] = {}
        for workload in ADAPTERS[stage](stage, settings, precision, cap, profile):
            if progress is not None:
                progress(f"{stage}: {workload.name}")
            step = measure(workload, cache)
            steps = workload.steps * workload.runs
            workloads[workload.name] = {
                **step, "parameters": step["parameters"] // workload.models, "models_per_step": workload.models,
                "batch": workload.batch, "length": workload.length, "steps_per_run": workload.steps,
                "runs": workload.runs, "total_flops": step["flops_per_step"] * steps,
                **{k: round(v, 4) if isinstance(v, float) else v
                   for k, v in estimate(step["flops_per_step"], step["kernels_per_step"], steps, precision,
                                        constants).items()}}
        out["stages"][stage] = {"gpu_hours": round(sum(w["gpu_hours"] for w in workloads.values()), 4),
                                "peak_memory_bytes": max(w["peak_memory_bytes"] for w in workloads.values()),
                                "workloads": workloads}
    return out


__all__ = ["ADAPTERS", "FAKE_DEVICE", "STAGES", "Workload", "assumptions", "check_stages", "dry_run", "materialise",
           "measure", "measure_step", "num_parameters"]
