"""A pytest plugin that writes every failing test to a file the moment it fails, for test runs that may be cut off.

``benchmarks/gpu.py`` runs the unit suite on a GPU inside a time limit; a run killed at its limit never writes its
JUnit report, so the failures would be known only as ``F`` marks. Loaded with ``-p benchmarks.failure_log`` and
pointed at a file by the environment variable :data:`VARIABLE`, this plugin appends one JSON line per failed test
phase (setup, call or teardown): the test's id, the phase, its seconds and the end of its traceback. Under
pytest-xdist only the controlling process writes (the workers' reports reach it), so each failure appears once.
"""

from __future__ import annotations

import json
import os
from typing import Any

VARIABLE = "PAPERLIB_FAILURE_LOG"
MESSAGE_CHARS = 2000  # the end of the traceback, where the assertion and its values are


_PATH: dict[str, str | None] = {"path": None}


def pytest_configure(config: Any) -> None:
    """Log to the file the environment names, in the controlling process only (not in an xdist worker)."""
    _PATH["path"] = None if hasattr(config, "workerinput") else os.environ.get(VARIABLE)


def pytest_runtest_logreport(report: Any) -> None:
    path = _PATH["path"]
    if not path or not report.failed:
        return
    line = {"test": report.nodeid, "when": report.when, "seconds": round(report.duration, 2),
            "message": str(report.longreprtext)[-MESSAGE_CHARS:]}
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def read(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The failures a run logged at ``path`` (none when it never wrote the file), in the order they happened."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]
