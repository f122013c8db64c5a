"""Where the models run and at what precision: one policy for every stage (beyond the seeds).

**Device.** :func:`resolve_device` turns a request into a ``torch.device``: an explicit argument, else the
environment variable ``PAPERLIB_DEVICE`` (``cpu``, ``cuda``, ``cuda:1``, or ``meta`` for shape-only checks),
else ``params.yaml``'s ``compute.device``, where ``auto`` means CUDA when present and the CPU otherwise. Under
``torchrun`` a bare ``cuda`` becomes ``cuda:LOCAL_RANK``, and :func:`paperlib.experiments.common.stage.stage_device` joins the process group
*before* it answers, so that a stage which moves its corpus to the returned device puts it on the rank's own
GPU (moving it to bare ``"cuda"`` first puts every rank's copy on GPU 0).

**Precision.** ``compute.precision`` per profile, one of :data:`PRECISIONS`:

- ``fp32``: float32 throughout; what every ``smoke``/``cpu`` result was made with.
- ``tf32``: float32 tensors, but CUDA matmuls and cuDNN's convolutions and RNNs may use TF32 tensor cores (10-bit
  mantissa products, float32 accumulation; :func:`_set_fp32_precision`).
  No effect on a CPU. The ``paper`` profile's default: an H100's dense TF32 rate is ~7× its plain fp32 rate.
- ``bf16``: TF32 as above, plus :func:`autocast` runs the training forward pass under ``torch.autocast`` with
  bfloat16. Embedding-side and output matmuls run in bfloat16; losses (``cross_entropy``, ``log_softmax``) are on
  autocast's float32 list, so the loss and its reduction stay in float32; the hand-written recurrences (LSTM,
  Mogrifier, RLSTM scans) run in float32 (:func:`float32_recurrence`), so the cell state never accumulates in
  bfloat16. Evaluation runs without autocast. An approximation the seeds never made: use it for throughput and
  compare against ``tf32`` before trusting a number.

**Host round-trips.** ``compute.sync_every`` (per profile): :class:`paperlib.train.Trainer` reads the training
loss back to the host, and checks it for non-finite values, once every that many steps instead of every step.

**Compilation.** ``compute.compile`` (per profile, optional in ``params.yaml``), one of :data:`COMPILE_MODES`:
``eager`` (the default: no compilation; every number in this repository), or a ``torch.compile`` mode that
:class:`paperlib.train.Trainer` applies to the training forward pass (:func:`compiled`): ``default``,
``reduce-overhead`` (CUDA graphs on a GPU: the per-time-step recurrences launch thousands of small kernels per
step, which CUDA graphs replay without the host), or ``max-autotune``. Measured on a CPU it does not pay
(``benchmarks/cells.py --compile``; docs/speed.md); on a GPU it is unmeasured, so no profile turns it on. The
stages with their own loops (reverse copy, MICMCO, word generation) do not compile.

**Checkpoints.** :func:`load_checkpoint` loads everything on the CPU and moves tensors to the device, except
random-number-generator states, which ``torch.set_rng_state`` and ``Generator.set_state`` only accept as CPU
``ByteTensor``\\ s (``torch.load(map_location="cuda")`` would move them to the GPU, and resuming would fail).

What a stage ran with is recorded in its provenance (:func:`describe`).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

DEVICE_ENV = "PAPERLIB_DEVICE"
PRECISIONS = ("fp32", "tf32", "bf16")
COMPILE_MODES = ("eager", "default", "reduce-overhead", "max-autotune")  # eager: no torch.compile
RNG_KEYS = frozenset({"rng"})  # checkpoint keys whose values stay on the CPU (paperlib.train's RNG states)


@dataclass(frozen=True)
class Compute:
    """The settings in force in this process (see :func:`configure`)."""

    precision: str = "fp32"
    sync_every: int = 1
    compile: str = "eager"


_current = Compute()


def parse_device(text: str, where: str) -> torch.device:
    try:
        return torch.device(text)
    except RuntimeError:
        raise ValueError(f"{where}: {text!r} is not a device; use auto, cpu, cuda, cuda:N or meta") from None


def resolve_device(requested: str | torch.device | None = None, configured: str = "auto",
                   local_rank: int | None = None) -> torch.device:
    """The device a request names: ``requested``, else ``$PAPERLIB_DEVICE``, else ``configured``.

    ``auto`` is CUDA when available, else the CPU. A bare ``cuda`` is pinned to ``local_rank`` when given (the
    rank's GPU under torchrun). Asking for CUDA on a machine without it is an error, not a silent CPU run.
    """
    text = requested if requested is not None else (os.environ.get(DEVICE_ENV) or configured)
    if isinstance(text, torch.device):
        device = text
    elif text == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = parse_device(text, DEVICE_ENV if requested is None and os.environ.get(DEVICE_ENV) else "device")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device} requested but this torch build sees no CUDA device "
                         f"(torch {torch.__version__}); install the CUDA build or set {DEVICE_ENV}=cpu")
    if device.type == "cuda" and device.index is None and local_rank is not None:
        device = torch.device("cuda", local_rank)
    return device


def configure(precision: str = "fp32", sync_every: int = 1, compile: str = "eager") -> Compute:
    """Set this process's precision, sync period and compilation mode; returns the settings now in force."""
    global _current
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
    if sync_every < 1:
        raise ValueError(f"sync_every must be >= 1, got {sync_every}")
    if compile not in COMPILE_MODES:
        raise ValueError(f"unknown compile mode {compile!r}; valid: {', '.join(COMPILE_MODES)}")
    _set_fp32_precision(precision in ("tf32", "bf16"))
    _current = Compute(precision, sync_every, compile)
    return _current


def _set_fp32_precision(tf32: bool) -> None:
    """TF32 for CUDA matmuls and for every cuDNN operator (convolutions *and* RNNs) or for none of them; CPU
    matmuls always in IEEE float32.

    Through the APIs that ``torch.get_float32_matmul_precision`` (which inductor's ``max-autotune`` calls) and
    ``torch.backends.cudnn.allow_tf32`` can still read back: setting ``torch.backends.cuda.matmul.fp32_precision``
    directly makes both raise ("a mix of the legacy and new APIs"). ``set_float32_matmul_precision("high")`` also
    lets oneDNN's CPU matmuls use TF32, which is put back to IEEE. cuDNN's RNN kernels (``nn.LSTM``) default to
    TF32 in PyTorch; ``allow_tf32 = False`` turns that off too, so ``fp32`` means float32 arithmetic everywhere.
    """
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.mkldnn.matmul.fp32_precision = "ieee"
    torch.backends.cudnn.allow_tf32 = tf32


def current() -> Compute:
    return _current


def cache_key() -> dict[str, str]:
    """What run caches add to their keys so that a run made at another precision or compilation mode is not
    reused: nothing at ``fp32`` without compilation (every cached run so far), else the settings that differ."""
    key = {} if _current.precision == "fp32" else {"precision": _current.precision}
    return key if _current.compile == "eager" else {**key, "compile": _current.compile}


def compiled(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` under ``torch.compile`` with the configured mode, or ``module`` itself at ``eager``. The result
    shares ``module``'s parameters; save and load state through ``module`` (the compiled wrapper prefixes its
    keys)."""
    if _current.compile == "eager":
        return module
    return torch.compile(module, mode=_current.compile)


def autocast(device: torch.device | str):
    """``torch.autocast`` to bfloat16 on ``device`` when the precision is ``bf16``; otherwise a no-op context."""
    device = torch.device(device)
    if _current.precision != "bf16" or device.type not in ("cuda", "cpu"):
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def float32_recurrence(apply, *args):
    """``apply(*args)`` for a hand-written recurrence (a ``torch.autograd.Function`` whose kernels write into
    preallocated float32 buffers): under autocast its floating inputs are cast to float32 and autocast is off inside,
    so the scan runs in float32 like the seeds' models; outside autocast it is ``apply(*args)`` unchanged."""
    device = next(a.device for a in args if isinstance(a, torch.Tensor))
    if device.type not in ("cuda", "cpu") or not torch.is_autocast_enabled(device.type):
        return apply(*args)
    args = tuple(a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)
    with torch.autocast(device.type, enabled=False):
        return apply(*args)


def describe() -> dict[str, Any]:
    """What the provenance records: precision, sync period, compilation mode, and the GPUs this process sees (none
    on a CPU)."""
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return {"precision": _current.precision, "sync_every": _current.sync_every, "compile": _current.compile,
            "gpus": gpus}


def _map(obj: Any, device: torch.device, cpu_keys: frozenset[str], keep: bool = False) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj if keep else obj.to(device)
    if isinstance(obj, dict):
        return type(obj)((k, _map(v, device, cpu_keys, keep or k in cpu_keys)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        items = [_map(v, device, cpu_keys, keep) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)  # NamedTuple or sequence
    return obj


def load_checkpoint(path: str | os.PathLike, device: torch.device | str, cpu_keys: frozenset[str] = RNG_KEYS,
                    weights_only: bool = False) -> Any:
    """``torch.load`` onto ``device``, except the values under ``cpu_keys`` (at any depth; by default the
    random-number-generator states), which stay CPU tensors."""
    payload = torch.load(Path(path), map_location="cpu", weights_only=weights_only)
    return _map(payload, torch.device(device), frozenset(cpu_keys))


__all__ = ["DEVICE_ENV", "PRECISIONS", "Compute", "autocast", "configure", "current", "describe",
           "cache_key", "float32_recurrence", "load_checkpoint", "resolve_device"]
