"""Provenance: what produced a result file (commit, params, data checksums, versions, wall time)."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from importlib import metadata
from typing import Any

from paperlib.device import describe

_PACKAGES = ("torch", "numpy", "scipy", "pandas", "matplotlib", "optuna", "dvc", "papermill")


def git_commit(root: str | os.PathLike) -> str | None:
    """The checked-out commit (with '+dirty' if tracked files changed), or None outside git."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root, capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def provenance(root: str | os.PathLike, profile: str, params: Any, data_sha256: dict[str, str] | None = None,
               started: float | None = None, code: str | None = None) -> dict[str, Any]:
    """A JSON-able record of how a result was made; `started` is a `time.time()` stamp and ``code`` the stage's
    :func:`paperlib.experiments.common.code_hash.code_hash`, which names the code exactly where ``git_commit`` may only
    say "this commit, with uncommitted changes" (``+dirty``)."""
    record = {
        "git_commit": git_commit(root),
        "code_hash": code,
        "profile": profile,
        "params": params,
        "data_sha256": data_sha256 or {},
        "versions": library_versions(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "compute": describe(),  # precision and GPUs in force (paperlib.device)
    }
    if started is not None:
        record["wall_time_s"] = round(time.time() - started, 3)
    return record
