"""A stage's runs: running them in this process or in spawned workers (:func:`map_jobs`), training each once and
reading it back afterwards (:func:`run_once`), a time limit a stage can stop at with its work checkpointed
(:func:`stop_time`, :class:`TimeLimitReached`), and writing results as plain JSON (:func:`json_safe`)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from paperlib.atomic_files import write_json_atomic
from paperlib.device import Compute, configure


def map_jobs(fn: Callable[..., Any], args: Sequence[tuple], workers: int) -> list[Any]:
    """``fn(*a)`` for every ``a`` in ``args``, in order: in this process when ``workers`` is 1 (its torch thread
    count restored afterwards, since a job sets its own), else in ``workers`` spawned processes (forking a process
    whose OpenMP pool is running can deadlock)."""
    import torch

    if workers == 1:
        threads = torch.get_num_threads()
        try:
            return [fn(*a) for a in args]
        finally:
            torch.set_num_threads(threads)
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        return list(pool.map(fn, *zip(*args))) if args else []


def run_once(path: str | Path, threads: int, compute: Compute | None, body: Callable[[], dict[str, Any]],
             encode: Callable[[dict[str, Any]], Any] = lambda record: record) -> dict[str, Any]:
    """The record at ``path`` if a finished run left one there; else set up the process (``compute``: the parent's
    precision settings, for a worker; ``threads`` torch threads), run ``body`` (the run, returning its record),
    add its ``seconds`` and write ``encode(record)`` atomically."""
    import torch

    if compute is not None:
        configure(compute.precision, compute.sync_every, compute.compile)
    torch.set_num_threads(threads)
    done = Path(path)
    if done.is_file():
        return json.loads(done.read_text())
    started = time.time()
    record = body()
    record["seconds"] = round(time.time() - started, 1)
    write_json_atomic(done, encode(record))
    return record


TIME_LIMIT_ENV = "PAPERLIB_TIME_LIMIT"


class TimeLimitReached(RuntimeError):
    """A stage stopped at its time limit (:func:`stop_time`) with its work checkpointed; the same command continues."""


def stop_time() -> float | None:
    """The ``time.time()`` by which a stage that honours it stops: ``$PAPERLIB_TIME_LIMIT`` seconds from now (a
    scheduler's time slot per job or command; a positive number), None when unset."""
    import os

    raw = os.environ.get(TIME_LIMIT_ENV)
    if raw is None or raw == "":
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = float("nan")
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"${TIME_LIMIT_ENV} must be a positive number of seconds, got {raw!r}")
    return time.time() + seconds


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats (diverged runs) replaced by None (JSON has neither NaN nor infinity) and
    tuples as lists, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


__all__ = ["TIME_LIMIT_ENV", "TimeLimitReached", "stop_time", "json_safe", "map_jobs", "run_once"]
