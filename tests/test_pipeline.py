"""End to end, in the smoke profile: `dvc repro` on a scratch clone, a second `dvc repro` that does
nothing, and nbval over every notebook against the results it produced."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow


def _tracked_files(repo: Path) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=repo, capture_output=True,
                         text=True, check=True).stdout
    return [line for line in out.splitlines() if (repo / line).is_file()]


@pytest.fixture(scope="module")
def scratch(mirror, tmp_path_factory):
    """A copy of the repository's files set to the smoke profile, with no results yet."""
    if shutil.which("git") is None:
        pytest.skip("git is needed to list the repository's files")
    root = tmp_path_factory.mktemp("compendium")
    for rel in _tracked_files(REPO):
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target)
    params = root / "params.yaml"
    params.write_text(re.sub(r"^profile: \w+", "profile: smoke", params.read_text(), count=1, flags=re.M))
    (root / "dvc.lock").unlink(missing_ok=True)
    # Start from no outputs; the seed-items table under results/ is an input of the results index.
    shutil.rmtree(root / "figures", ignore_errors=True)
    for path in (root / "results").iterdir():
        if path.name != "seed_items.csv":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@localhost", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "scratch"], cwd=root, check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PAPERLIB_PROFILE", "PAPERLIB_ROOT")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               PAPERLIB_DATA_MIRROR=str(mirror), DVC_NO_ANALYTICS="1")
    return root, env


def _run(cmd, root, env, timeout=1200):
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout + proc.stderr


def _json(cmd, root, env):
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout)


def test_dvc_repro_builds_everything_and_a_second_run_does_nothing(scratch):
    root, env = scratch
    first = _run([sys.executable, "-m", "dvc", "repro"], root, env)
    assert "Running stage 'notebook_dataset_summary'" in first
    assert (root / "figures" / "dataset_summary.png").stat().st_size > 10_000
    assert '"ptb"' in (root / "results" / "data_summary.json").read_text()
    index = (root / "results" / "README.md").read_text()
    ids = [line.split(",", 1)[0] for line in (root / "results" / "seed_items.csv").read_text().splitlines()[1:]]
    assert all(f"| {item} |" in index for item in ids)
    assert "[profile smoke]" in index  # smoke numbers are labelled as such, never passed off as cpu ones
    metrics = _json([sys.executable, "-m", "dvc", "metrics", "show", "--json"], root, env)
    assert "results/metrics.json" in json.dumps(metrics), "dvc metrics show found no metrics"
    plots = _json([sys.executable, "-m", "dvc", "plots", "show", "--json", "-o", str(root / "dvc_plots")], root, env)
    assert "results/plots/averaging_valid.csv" in json.dumps(plots)
    second = _run([sys.executable, "-m", "dvc", "repro"], root, env)
    assert "Running stage" not in second
    assert "up to date" in second


def test_nbval_executes_every_notebook_in_the_smoke_profile(scratch):
    root, env = scratch
    if not (root / "results" / "data_summary.json").exists():
        _run([sys.executable, "-m", "dvc", "repro"], root, env)
    out = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                "--nbval-current-env", "notebooks"], root, dict(env, PAPERLIB_PROFILE="smoke"))
    assert re.search(r"\b\d+ passed\b", out) and "failed" not in out
