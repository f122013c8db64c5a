"""The trainer with its whole training step captured as one CUDA graph and replayed (beyond the seeds).

A BPTT window of the seeds' recurrent models is thousands of small kernels (per time step and layer, the LSTM's
gates, the Mogrifier's rounds, their backward passes), and on a GPU the host that launches them one by one sets
the pace, not the GPU. Captured once as a CUDA graph, the same step (forward, backward, gradient clipping, the
optimizer's update, the hidden state handed to the next window) is replayed by one call: the kernels stay, the
launches go. ``benchmarks/gpu.py --graphs`` measures that on the ``paper`` workloads (docs/gpu.md).

:class:`GraphedTrainer` is :class:`paperlib.train.Trainer` with that step: the same settings, checkpoints,
rollbacks, averaging and evaluation, and on a CPU (where there are no CUDA graphs) the same numbers bit for bit,
because a replay there is a call of the captured function. A step is replayed when its window has the captured
one's :func:`signature` (the same input shape and a hidden state of the same structure, shapes and other values)
and the precision in force (:func:`paperlib.device.configure`) is the capture's.
Any other window runs eagerly through ``Trainer``'s own step: the first windows (``eager_steps`` steps with one
signature come before the capture), the shorter last window of an epoch, the first window of an epoch (no state
yet), and every window of a model whose state keeps changing (a Transformer with learned absolute positions and a
memory: the position its next window starts at grows with every window). After a rollback the graph
is captured again, since the optimizer's state was replaced.

Departures from ``Trainer``, all from what a graph can hold:

- The optimizer runs in its graph-safe form on CUDA: Adam and RAdam ``capturable`` (step counts on the GPU), SGD
  ``fused``; the learning rate is a tensor on the GPU that the schedule refills before each step. Their arithmetic
  differs from the default implementations by float rounding. Checkpoints store the learning rate as a number and
  the default flags, so either trainer resumes the other's runs.
- A replayed step checks the training loss for non-finite values after its update, which is part of the graph
  (``Trainer`` checks before it when ``sync_every`` is 1); the rollback that follows discards that update with the
  weights, so the outcome is the same.
- Under ``bf16`` the captured forward pass runs under autocast without its cast cache (a graph must not keep
  casts from capture time).
- Not for data-parallel runs under ``torchrun`` (the gradient all-reduce is not captured) nor together with
  ``compute.compile`` modes other than ``eager`` (this is the compilation): both are a ValueError.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from paperlib.averaging import WeightAverager
from paperlib.device import autocast, current
from paperlib.models.objective import multi_sample_loss
from paperlib.train import Trainer, TrainConfig


def map_state(fn: Callable[[Tensor], Tensor], state: Any) -> Any:
    """``state`` (tensors nested in lists, tuples, NamedTuples, dicts and dataclasses) with ``fn`` applied to every
    tensor; other leaves (ints, None) as they are."""
    if isinstance(state, Tensor):
        return fn(state)
    if isinstance(state, list):
        return [map_state(fn, s) for s in state]
    if isinstance(state, tuple):
        items = [map_state(fn, s) for s in state]
        return type(state)(*items) if hasattr(state, "_fields") else tuple(items)
    if isinstance(state, dict):
        return {k: map_state(fn, v) for k, v in state.items()}
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return dataclasses.replace(state, **{f.name: map_state(fn, getattr(state, f.name))
                                             for f in dataclasses.fields(state)})
    return state


def state_tensors(state: Any) -> list[Tensor]:
    """The tensors of ``state`` in a fixed order (that of :func:`map_state`)."""
    found: list[Tensor] = []
    map_state(found.append, state)
    return found


def signature(inputs: Tensor, state: Any) -> tuple:
    """What a captured step fixes: the input's shape, dtype and device, and the state's structure with each
    tensor's shape and dtype and every other leaf's value (None for no state)."""

    def describe(s: Any) -> Any:
        if isinstance(s, Tensor):
            return ("tensor", tuple(s.shape), s.dtype, s.device)
        if isinstance(s, (list, tuple)):
            return (type(s).__name__, tuple(describe(x) for x in s))
        if isinstance(s, dict):
            return ("dict", tuple((k, describe(v)) for k, v in s.items()))
        if dataclasses.is_dataclass(s) and not isinstance(s, type):
            return (type(s).__name__, tuple((f.name, describe(getattr(s, f.name))) for f in dataclasses.fields(s)))
        return ("value", s)

    return tuple(inputs.shape), inputs.dtype, inputs.device, describe(state)


_SIDE_STREAMS: dict[torch.device, Any] = {}


def _side(device: torch.device) -> Any:
    """The one side stream of a CUDA ``device``: eager warm-up steps and captures run on it, so that what is set up
    lazily per stream (cuBLAS workspaces) is set up by a warm-up step, not inside a capture."""
    if device not in _SIDE_STREAMS:
        _SIDE_STREAMS[device] = torch.cuda.Stream(device)
    return _SIDE_STREAMS[device]


@contextlib.contextmanager
def side_stream(device: torch.device) -> Iterator[None]:
    """On CUDA, the enclosed work on the device's side stream (:func:`_side`), which waits for the current stream
    and which the current stream then waits for: where eager steps run before a capture (lazy initialisations, e.g.
    cuBLAS workspaces, must not happen inside one). Elsewhere nothing."""
    if device.type != "cuda":
        yield
        return
    side = _side(device)
    side.wait_stream(torch.cuda.current_stream(device))
    try:
        with torch.cuda.stream(side):
            yield
    finally:  # also when the step raises: whatever follows (a checkpoint on the way out) sees its work done
        torch.cuda.current_stream(device).wait_stream(side)


def graph_safe(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """``optimizer`` in the form a CUDA graph can hold, on a CUDA ``device``: Adam and RAdam ``capturable``, SGD
    ``fused`` (no host reads of their step counts or learning rates), step counts moved to the device with their
    dtype kept. Again after every ``load_state_dict``, which restores a checkpoint's flags and CPU step counts.
    Elsewhere nothing (capturable optimizers need a GPU)."""
    if torch.device(device).type != "cuda":
        return
    flag = "fused" if isinstance(optimizer, torch.optim.SGD) else "capturable"
    for group in optimizer.param_groups:
        group[flag] = True
    for state in optimizer.state.values():
        if "step" in state:
            state["step"] = state["step"].to(device=device)


class CapturedStep:
    """``fn`` (no arguments; reads and writes tensors it holds) captured as a CUDA graph on a CUDA ``device``:
    :meth:`replay` runs the captured kernels again on whatever those tensors hold then. On other devices nothing is
    captured and :meth:`replay` calls ``fn``: the same semantics for a function that is safe to capture (no host
    reads, no new shapes, random draws from the default generator or from ``generators``, which the graph registers
    so that every replay draws the next numbers of each), without the speed.

    Capturing does not run the step: the first :meth:`replay` does. Warm the function up eagerly first (under
    :func:`side_stream`), as CUDA graph capture requires. A graph reads and writes the memory its tensors had at
    capture: :meth:`stale` says whether any of ``watch`` (the weights) has moved since (``.to()``, an LSTM's weights
    flattened again) or another precision is in force (:func:`paperlib.device.configure`; a graph keeps the TF32
    and autocast settings of its capture), after which it must be captured again.
    """

    def __init__(self, fn: Callable[[], None], device: torch.device,
                 generators: Sequence[torch.Generator] = (), watch: Sequence[Tensor] = ()) -> None:
        self.fn, self.device = fn, torch.device(device)
        self.watch = list(watch)
        self._pointers = [t.data_ptr() for t in self.watch]
        self._precision = current().precision
        self.graph = None
        if self.device.type == "cuda":
            self.graph = torch.cuda.CUDAGraph()
            for generator in generators:
                self.graph.register_generator_state(generator)
            with torch.cuda.device(self.device):  # the capture stream and the kernels on the step's own device
                previous = torch.cuda.current_stream(self.device)
                capture(fn, torch.cuda.graph(self.graph, stream=_side(self.device)),  # the warm-up's stream
                        lambda: torch.cuda.set_stream(previous))

    def stale(self) -> bool:
        return [t.data_ptr() for t in self.watch] != self._pointers or current().precision != self._precision

    def replay(self) -> None:
        if self.graph is None:
            self.fn()
        else:
            with torch.cuda.device(self.device):  # launched on the current stream of the graph's device
                self.graph.replay()


class CaptureError(RuntimeError):
    """Capturing a step as a CUDA graph failed; ``__cause__`` is what the step raised during the capture."""


def capture(fn: Callable[[], None], context: Any, restore: Callable[[], None]) -> None:
    """Run ``fn`` inside ``context`` (a ``torch.cuda.graph`` capture), then ``restore`` the stream that was current
    before it, whatever happened. When ``fn`` raises, ending the capture raises as well (the capture is then
    invalid) and, left alone, that second error would hide the first and leave the capture stream current: here the
    step's own error is what is raised, as the cause of a :class:`CaptureError` (an interrupt as it is)."""
    failure: BaseException | None = None
    entered = False
    try:
        context.__enter__()  # (switches to the capture stream, then begins the capture: either can fail)
        entered = True
        fn()
    except BaseException as err:  # noqa: BLE001 - re-raised below, after the capture has ended
        failure = err
    try:
        if entered:
            context.__exit__(None, None, None)
    except BaseException as err:  # noqa: BLE001 - only when the step itself did not fail
        if failure is None:
            failure = err
    finally:
        restore()
    if isinstance(failure, Exception):
        raise CaptureError(f"capturing the step as a CUDA graph failed: {type(failure).__name__}: "
                           f"{str(failure).splitlines()[0] if str(failure) else ''}") from failure
    if failure is not None:  # an interrupt stays one
        raise failure


@dataclasses.dataclass
class _Captured:
    """A captured training step and the tensors it reads (inputs, targets, the state) and writes (loss, state)."""

    step: CapturedStep
    signature: tuple
    inputs: Tensor
    targets: Tensor
    state: Any
    loss: Tensor


def _capture_autocast(device: torch.device):
    """The trainer's autocast (:func:`paperlib.device.autocast`) for a captured forward pass: on CUDA without its
    cast cache, which a graph must not keep from capture time."""
    if current().precision == "bf16" and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)
    return autocast(device)


class GraphedTrainer(Trainer):
    """:class:`~paperlib.train.Trainer` whose training steps replay one captured CUDA graph (module docstring).

    ``eager_steps``: steps run eagerly with one signature (:func:`signature`) before that signature's step is
    captured (warm-up, as capture requires; 3 as in PyTorch's whole-network capture example).
    :attr:`step_counts` says how the steps ran: ``eager``, ``replayed`` and ``captures``.
    """

    def __init__(self, model: nn.Module, train_ids: Tensor, valid_ids: Tensor, config: TrainConfig,
                 out_dir: str | os.PathLike, device: str | torch.device | None = None, progress: bool = True,
                 monitors: dict[str, WeightAverager] | None = None, eval_raw: bool = False,
                 sync_every: int | None = None, eager_steps: int = 3) -> None:
        if eager_steps < 1:
            raise ValueError(f"eager_steps must be >= 1 (warm-up before a capture), got {eager_steps}")
        if current().compile != "eager":
            raise ValueError(f"GraphedTrainer captures the whole step itself; compute.compile is "
                             f"{current().compile!r}, set it to 'eager'")
        super().__init__(model, train_ids, valid_ids, config, out_dir, device, progress, monitors, eval_raw,
                         sync_every)
        if self.dist.is_distributed:
            raise ValueError("GraphedTrainer does not capture the data-parallel gradient all-reduce; run "
                             "Trainer under torchrun")
        self.eager_steps = eager_steps
        self.step_counts = {"eager": 0, "replayed": 0, "captures": 0}
        self._captured: _Captured | None = None
        self._streak: tuple[tuple | None, int] = (None, 0)  # the last eager steps' signature and their number
        # what checkpoints record: the default implementation's flags, so that Trainer resumes them as its own
        self._default_flags = [{k: group[k] for k in ("capturable", "fused") if k in group}
                               for group in self.optimizer.param_groups]
        self._lr_tensors: list[Tensor] = []  # on CUDA, per parameter group: the learning rate a graph reads
        self._lr_values: list[float] = []  # ... and the same as the number the schedule set (no float32 rounding)
        self._make_graph_safe()

    # -- the optimizer in a form a graph can hold ----------------------------------------------------------------
    def _make_graph_safe(self) -> None:
        """On CUDA: capturable Adam / RAdam or fused SGD, the learning rate as a GPU tensor, step counts on the
        GPU. Again after every load, which restores the checkpoint's flags, numbers and CPU step counts."""
        if self.device.type != "cuda":
            return
        graph_safe(self.optimizer, self.device)
        self._lr_tensors, self._lr_values = [], []
        for group in self.optimizer.param_groups:
            self._lr_values.append(float(group["lr"]))
            group["lr"] = torch.tensor(self._lr_values[-1], device=self.device)
            self._lr_tensors.append(group["lr"])
        self._captured = None  # the optimizer's tensors may be new: capture again

    def _apply_lr(self) -> None:
        """Trainer's schedule, written into the learning-rate tensors a captured step reads (on CUDA)."""
        super()._apply_lr()
        for index, (group, tensor) in enumerate(zip(self.optimizer.param_groups, self._lr_tensors)):
            self._lr_values[index] = group["lr"]
            tensor.fill_(group["lr"])
            group["lr"] = tensor

    def _lr(self) -> float:
        return self._lr_values[0] if self._lr_tensors else self.optimizer.param_groups[0]["lr"]

    def _checkpoint(self) -> dict[str, Any]:
        ckpt = super()._checkpoint()
        for index, (saved, flags) in enumerate(zip(ckpt["optimizer"]["param_groups"], self._default_flags)):
            saved.update(flags, lr=self._lr_values[index] if self._lr_tensors else saved["lr"])
        return ckpt

    def load(self, path, restore_position: bool = True) -> None:
        super().load(path, restore_position)
        self._make_graph_safe()
        self._captured, self._streak = None, (None, 0)

    # -- the step ------------------------------------------------------------------------------------------------
    def _train_step(self, inputs: Tensor, targets: Tensor) -> float | None:
        key = signature(inputs, self.state)
        if self._captured is not None and self._captured.step.stale():
            # the weights moved or another precision is in force since: warm up, capture again
            self._captured, self._streak = None, (None, 0)
        if self._captured is not None and key == self._captured.signature:
            return self._replayed_step(inputs, targets)
        last, count = self._streak
        if self._captured is None and key == last and count >= self.eager_steps and self.state is not None:
            self._capture(inputs, targets, key)
            return self._replayed_step(inputs, targets)
        self._streak = (key, count + 1 if key == last else 1)
        self.step_counts["eager"] += 1
        with side_stream(self.device):
            return super()._train_step(inputs, targets)

    def _capture(self, inputs: Tensor, targets: Tensor, key: tuple) -> None:
        """Capture the step of windows with this one's signature ``key`` (their tensors are copied in before each
        replay)."""
        self.model.train()
        self._apply_lr()  # the learning-rate tensors exist before the graph reads them
        static_inputs, static_targets = inputs.clone(), targets.clone()
        static_state = map_state(lambda t: t.detach().clone(), self.state)
        static_loss = torch.zeros((), device=self.device)
        # the step holds what it uses, not the trainer: no cycle keeps a dropped graph's memory alive
        net, optimizer, samples, device = self.net, self.optimizer, self.config.num_samples, self.device
        clip_norm, params = self.config.clip_norm, list(self.model.parameters())

        def step() -> None:
            optimizer.zero_grad(set_to_none=True)  # at capture: the backward writes fresh gradients
            with _capture_autocast(device):
                loss, state = multi_sample_loss(net, static_inputs, static_targets, samples, static_state)
            loss.backward()
            if clip_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, clip_norm)
            optimizer.step()
            for kept, new in zip(state_tensors(static_state), state_tensors(state)):  # after the backward pass,
                kept.copy_(new.detach())  # which may still read the old state
            static_loss.copy_(loss.detach())

        self.step_counts["captures"] += 1
        self._captured = _Captured(CapturedStep(step, self.device, watch=params), key, static_inputs,
                                   static_targets, static_state, static_loss)

    def _replayed_step(self, inputs: Tensor, targets: Tensor) -> float | None:
        """Trainer's step, replayed: the same return values; the loss is checked after the update (see above)."""
        captured = self._captured
        self.model.train()
        self._apply_lr()
        captured.inputs.copy_(inputs)
        captured.targets.copy_(targets)
        if self.state is not captured.state:  # an eager step or a load put the state elsewhere
            for kept, new in zip(state_tensors(captured.state), state_tensors(self.state)):
                kept.copy_(new)
        captured.step.replay()
        self.state = captured.state
        self.step_counts["replayed"] += 1
        self._unread.append(captured.loss.clone())
        if len(self._unread) < self.sync_every:
            return None
        losses, self._unread = torch.stack(self._unread), []
        finite = torch.isfinite(losses)
        if not finite.all():
            self._rollback(f"non-finite training loss {losses[~finite][0].item()}")
            return float("nan")
        return losses[-1].item()


__all__ = ["CaptureError", "CapturedStep", "GraphedTrainer", "capture", "graph_safe", "map_state", "side_stream",
           "signature", "state_tensors"]
