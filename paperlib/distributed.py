"""Data-parallel training over several processes (torchrun), beyond the seeds.

The seeds' models were trained on accelerators for GPU-weeks; this module lets :class:`paperlib.train.Trainer`
run unchanged under ``torchrun`` (one process per GPU, on one or several machines):

- :func:`init_from_env` reads torchrun's environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``,
  ``MASTER_PORT``) and joins the process group, ``nccl`` when training on CUDA and ``gloo`` otherwise. Without
  ``WORLD_SIZE`` > 1 it returns :data:`SINGLE`, whose every method is the identity, so single-process runs are
  untouched.
- The global batch is that of single-process training: the ``[B, N]`` training stream is split by rows, rank r
  taking rows r·B/W ... (r+1)·B/W - 1, and ``DistributedDataParallel`` averages the gradients. Since every rank
  holds the same number of rows, the average of the ranks' mean losses is the mean loss over the whole batch, so
  the gradient equals the single-process one (up to floating-point summation order); only the dropout masks
  differ, because each rank draws its own.
- Validation is split by rows too and the per-rank means are combined weighted by their token counts, so that
  every rank gets the same number (and takes the same rollback / early-stopping / averaging decisions).
- Checkpoints: rank 0 writes, the others wait at a barrier; the per-rank parts (RNG state, the hidden state of
  the rank's rows) are gathered into the checkpoint so that every rank resumes exactly. Resuming needs the same
  number of processes and a checkpoint folder every rank can read (local disk on one machine; shared storage
  across machines).
"""

from __future__ import annotations

import atexit
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

REQUIRED_ENV = ("RANK", "MASTER_ADDR", "MASTER_PORT")
BACKENDS = ("gloo", "nccl")


@dataclass(frozen=True)
class DistContext:
    """This process's place in the process group (rank 0 of 1 when not distributed)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.is_distributed:
            dist.barrier()

    def device(self, requested: str | torch.device | None) -> torch.device:
        """The device of this rank by :func:`paperlib.device.resolve_device` (``requested``, else
        ``$PAPERLIB_DEVICE``, else CUDA if available), a bare ``cuda`` pinned to ``LOCAL_RANK``."""
        from paperlib.device import resolve_device

        return resolve_device(requested, local_rank=self.local_rank if self.is_distributed else None)

    def shard_rows(self, stream: torch.Tensor, even: bool = True) -> torch.Tensor:
        """This rank's rows of a ``[B, N]`` stream; ``even`` requires B to be a multiple of the world size."""
        if not self.is_distributed:
            return stream
        rows = stream.size(0)
        if even and rows % self.world_size:
            raise ValueError(f"batch size {rows} must be a multiple of the number of processes ({self.world_size}) "
                             "so that every rank gets the same share of the global batch")
        if rows < self.world_size:
            raise ValueError(f"{rows} rows cannot be split over {self.world_size} processes; "
                             f"use a batch size of at least {self.world_size}")
        return torch.tensor_split(stream, self.world_size, dim=0)[self.rank].contiguous()  # [B/W, N]

    def wrap(self, model: nn.Module, device: torch.device) -> nn.Module:
        """``DistributedDataParallel(model)`` when distributed, else ``model`` itself."""
        if not self.is_distributed:
            return model
        device_ids = [device.index] if device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)

    def mean(self, value: torch.Tensor) -> torch.Tensor:
        """Average of a tensor over ranks (the tensor itself when not distributed)."""
        if not self.is_distributed:
            return value
        total = value.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total / self.world_size

    def weighted_mean(self, value: float, weight: float) -> float:
        """Σ_r w_r v_r / Σ_r w_r over ranks (``value`` itself when not distributed)."""
        if not self.is_distributed:
            return value
        both = torch.tensor([value * weight, weight], dtype=torch.float64, device=self._collective_device())
        dist.all_reduce(both, op=dist.ReduceOp.SUM)
        return float(both[0] / both[1])

    def gather_object(self, obj: Any) -> list[Any] | None:
        """Every rank's ``obj`` on rank 0 (in rank order); ``None`` on the other ranks."""
        if not self.is_distributed:
            return [obj]
        gathered: list[Any] = [None] * self.world_size if self.is_main else None
        dist.gather_object(obj, gathered, dst=0)
        return gathered

    def broadcast_object(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank."""
        if not self.is_distributed:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def _collective_device(self) -> torch.device:
        if dist.get_backend() == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")


SINGLE = DistContext()


def default_backend() -> str:
    """``nccl`` when the device policy (:func:`paperlib.device.resolve_device`: ``$PAPERLIB_DEVICE``, else CUDA when
    available) trains on CUDA, ``gloo`` otherwise (a CPU run on a GPU machine too)."""
    from paperlib.device import resolve_device

    return "nccl" if resolve_device().type == "cuda" else "gloo"


def init_from_env(backend: str | None = None) -> DistContext:
    """Join the process group described by torchrun's environment variables, once; :data:`SINGLE` without one.

    Safe to call repeatedly (later calls return the group already joined).
    """
    if dist.is_available() and dist.is_initialized():
        rank = dist.get_rank()
        return DistContext(rank, dist.get_world_size(), int(os.environ.get("LOCAL_RANK", rank)))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return SINGLE
    missing = [name for name in REQUIRED_ENV if name not in os.environ]
    if missing:
        raise ValueError(f"WORLD_SIZE={world_size} but {', '.join(missing)} not set; start the processes with "
                         "torchrun (e.g. `torchrun --nproc_per_node=2 -m paperlib train lm_ptb`)")
    backend = backend or default_backend()
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid choices: {', '.join(BACKENDS)}")
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if backend == "nccl":
        if local_rank >= torch.cuda.device_count():
            raise ValueError(f"LOCAL_RANK {local_rank} needs GPU {local_rank} but this machine has "
                             f"{torch.cuda.device_count()}: start at most that many processes per machine, or "
                             "train on the CPU (PAPERLIB_DEVICE=cpu, backend gloo)")
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend, rank=rank, world_size=world_size)
    atexit.register(_shutdown)
    return DistContext(rank, world_size, local_rank)


def _shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def is_main_process() -> bool:
    """True on rank 0 (and when not distributed): the process that writes files."""
    return init_from_env().is_main
