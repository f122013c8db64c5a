"""The dry run's measurement: a :class:`Workload` (a model shape of a stage and its training step) and one
steady-state step of it on fake tensors, counted by :class:`StepCounter` (parameters, peak memory, FLOPs, kernels);
:func:`measure` extrapolates in the sequence length where a workload says so. The assumptions are
:mod:`paperlib.experiments.dryrun.dryrun`'s."""

from __future__ import annotations

import contextlib
import gc
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

FAKE_DEVICE = "cpu"  # see the dry run's docstring
NO_KERNEL = ("empty", "new_empty", "detach", "_unsafe_view", "lift_fresh")  # allocations and aliases
# fused RNN layers (nn.LSTM as one oneDNN call, as cuDNN on a GPU) have no FLOP formula in torch: x forward FLOPs
FUSED_RNN = {torch.ops.aten.mkldnn_rnn_layer: 1, torch.ops.aten.mkldnn_rnn_layer_backward: 2}
# ... and are one operator here but not one kernel there: cuDNN steps through time on the device, launching per time
# step and layer a recurrent matmul and a pointwise kernel forward, and about three kernels backward. Measured on an
# H200 (benchmarks/results/gpu-nvidia-h200-2026-11-30.json): the music stage's LSTM-NADE (2 layers) launched 1,456
# and 2,166 kernels a step at 129 and 200 frames, these counts 1,416 and 2,126.
FUSED_RNN_KERNELS_PER_STEP = {torch.ops.aten.mkldnn_rnn_layer: 2, torch.ops.aten.mkldnn_rnn_layer_backward: 3}


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


def clip_gradients(workload: Workload, model: nn.Module) -> None:
    """Gradient-norm clipping as the stage does it, where it clips: over the model's parameters, or per model when
    the workload is a stack (``models`` > 1: ``model`` is the stack's ``nn.ModuleList``, each model clipped by its
    own norm as :func:`~paperlib.experiments.reverse_copy.training.train_stacked` does)."""
    if not workload.clip_norm:
        return
    if workload.models > 1 and not (isinstance(model, nn.ModuleList) and len(model) == workload.models):
        raise ValueError(f"a stacked workload of {workload.models} models needs an nn.ModuleList of them")
    for part in (model if workload.models > 1 else [model]):
        nn.utils.clip_grad_norm_(part.parameters(), workload.clip_norm)


class StepCounter(TorchDispatchMode):
    """Counts one training step: kernels (ATen operators on device tensors but views and allocations; a fused RNN
    layer as the kernels cuDNN launches over its time steps, :data:`FUSED_RNN_KERNELS_PER_STEP`), FLOPs (the
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
            self.kernels += FUSED_RNN_KERNELS_PER_STEP[func._overloadpacket] * args[0].shape[0] \
                if func._overloadpacket in FUSED_RNN_KERNELS_PER_STEP else 1  # inputs [T, B, I] in either layout
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
            target = args[0]  # every place selected: values [N, *trailing], or ones that broadcast to it (a scalar)
            values = torch.broadcast_to(args[2], (masks[0].numel(), *target.shape[masks[0].dim():])).reshape(target.shape)
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


def build_model(build: Callable[[], nn.Module]) -> tuple[nn.Module, bool]:
    """``build()`` on the meta device, or for real when the builder reads values (a flow's ``.item()``); and whether
    it is on the meta device (its buffers are then empty too)."""
    try:
        with torch.device("meta"):
            return build(), True
    except (RuntimeError, NotImplementedError):
        return build(), False


@contextlib.contextmanager
def on_fake_tensors(model: nn.Module, on_meta: bool) -> Iterator[None]:
    """The block runs in fake mode (:class:`FullLengths` answering data-dependent shapes) with ``model``
    materialised as fake tensors (see :func:`build_model` for ``on_meta``), and with the garbage collector off:
    storages are freed by reference counting only, so the peak is the same on every run."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        with FakeTensorMode(allow_non_fake_inputs=True), FullLengths():
            materialise(model, FAKE_DEVICE, buffers=on_meta)
            yield
    finally:
        if collecting:
            gc.enable()


def measure_step(workload: Workload, length: int) -> dict[str, int]:
    """Parameters, peak memory, parameter + optimizer-state bytes, FLOPs and kernels of one steady-state training
    step of ``workload`` on sequences of ``length``."""
    model, on_meta = build_model(workload.build)
    with on_fake_tensors(model, on_meta):
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
            clip_gradients(workload, model)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    return {"parameters": num_parameters(model), "peak_memory_bytes": counter.peak,
            "weights_and_optimizer_bytes": counter.static, "flops_per_step": counter.flops,
            "kernels_per_step": counter.kernels}


def cached(cache: dict | None, key: tuple | None, size: int, count: Callable[[], dict[str, int]]) -> dict[str, int]:
    """``count()``, kept in ``cache`` under (``key``, ``size``) when there is a key (and a cache)."""
    if key is None or cache is None:
        return count()
    if (key, size) not in cache:
        cache[key, size] = count()
    return cache[key, size]


def measure(workload: Workload, cache: dict | None = None) -> dict[str, int]:
    """:func:`measure_step` at the workload's length, or extrapolated linearly in the length from its two
    ``probes`` (measurements of one ``key`` are shared through ``cache``)."""
    def at(length: int) -> dict[str, int]:
        return cached(cache, workload.key, length, lambda: measure_step(workload, length))

    if workload.probes is None or workload.length in workload.probes or len(set(workload.probes)) < 2:
        return at(workload.length)
    (low, high), (a, b) = workload.probes, (at(workload.probes[0]), at(workload.probes[1]))
    return {k: round(a[k] + (b[k] - a[k]) * (workload.length - low) / (high - low)) for k in a}


__all__ = ["FAKE_DEVICE", "NO_KERNEL", "Workload", "StepCounter", "build_model", "cached", "clip_gradients", "on_fake_tensors", "FullLengths", "materialise", "measure", "measure_step", "num_parameters"]
