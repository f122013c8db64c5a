"""The smoke pipeline's background work for tests/test_pipeline.py, in one process: `dvc repro` in a scratch copy,
then the figures it drew (SHA-256 by path), then strict nbval over the executed notebooks it wrote, each step's
output in a file beside the copy (:func:`chain_files`). tests/conftest.py starts it when the tests are collected, so
it runs on one core while the unit tests run on the other, nbval included once the build is done.

Run as ``python tests/smoke_chain.py ROOT``; exits 3 if the build failed (nbval's status is written to its file).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

BUILD_FAILED = 3


def chain_files(root: Path) -> dict[str, Path]:
    """Where the chain for the scratch copy ``root`` writes: the build's output, the figures' hashes, nbval's output
    and its exit status."""
    base = root.parent / root.name
    return {"repro": Path(f"{base}-repro.log"), "figures": Path(f"{base}-figures.json"),
            "nbval": Path(f"{base}-nbval.log"), "nbval_status": Path(f"{base}-nbval.status")}


def figure_hashes(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (subfolders too, e.g. figures/gpu/) by its path relative to it: its SHA-256."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def nbval_command(root: Path, notebooks: list[Path]) -> list[str]:
    """Strict nbval over executed notebooks under ``root``; stored outputs show paths relative to the clone
    (paperlib.compendium.notebooks.strip_volatile_metadata), so the clone's own path is sanitised away."""
    sanitize = root.parent / f"{root.name}-nbval-sanitize.cfg"
    sanitize.write_text(f"[clone]\nregex: {re.escape(str(root.resolve()) + os.sep)}\nreplace: \n")
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
            "--nbval-sanitize-with", str(sanitize), *map(str, notebooks)]


def _timed(log: Path, cmd: list[str], root: Path, env: dict[str, str]) -> int:
    """Run ``cmd`` in ``root``, its output (stderr too) to ``log``, each line after the seconds since it started
    (where the suite's time goes, e.g. per stage of the build); its exit status."""
    start = time.monotonic()
    with log.open("w") as out, subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE,
                                                stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            out.write(f"[{time.monotonic() - start:7.1f}s] {line}")
            out.flush()
    return proc.returncode


def main(root: Path) -> int:
    files = chain_files(root)
    if _timed(files["repro"], [sys.executable, "-m", "dvc", "repro"], root, dict(os.environ)):
        return BUILD_FAILED
    files["figures"].write_text(json.dumps(figure_hashes(root / "figures"), indent=1))
    notebooks = sorted((root / "results" / "notebooks").glob("*.ipynb"))
    status = _timed(files["nbval"], nbval_command(root, notebooks), root, {**os.environ, "PAPERLIB_PROFILE": "smoke"})
    files["nbval_status"].write_text(str(status))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
