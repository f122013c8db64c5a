"""The cross-path numerics tests also pass with PyTorch's most portable CPU kernels (see tests/numerics.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

NESTED = "PAPERLIB_NUMERICS_PORTABILITY_RUN"  # set in the subprocess: never start another one from inside it


def _run(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", NESTED: "1"}
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(os.environ.get(NESTED) == "1", reason="already inside the portability run")
def test_numerics_subset_passes_with_the_portable_default_kernels():
    """Run the tests marked ``numerics`` again in a subprocess with ``ATEN_CPU_CAPABILITY=default``.

    PyTorch picks its CPU kernels by the CPU's capability (AVX512, AVX2, ...), so two code paths computing the same
    floats round differently on another CPU: a bitwise comparison of them, or a tolerance fitted to this CPU, passes
    here and fails there. ``default`` forces the most portable kernels, other ones than this machine picks by itself,
    so the comparisons that only hold for one set of kernels fail here too. This test is not marked ``numerics``
    (and skips itself inside the subprocess), so the run cannot recurse.
    """
    probe = _run(["-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"])
    assert probe.stdout.strip() == "DEFAULT", f"ATEN_CPU_CAPABILITY=default is ignored:\n{probe.stdout}{probe.stderr}"
    # only the modules that mention the mark: collecting all of them would import every module of the suite again
    marked = sorted(f"tests/{path.name}" for path in (REPO / "tests").glob("test_*.py")
                    if path.name != Path(__file__).name and "numerics" in path.read_text())
    assert marked, "no test module is marked numerics"
    run = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "numerics and not slow", *marked])
    tail = "\n".join((run.stdout + run.stderr).splitlines()[-40:])
    assert run.returncode == 0, f"the numerics tests fail with ATEN_CPU_CAPABILITY=default:\n{tail}"
