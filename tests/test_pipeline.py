"""End to end, in the smoke profile: `dvc repro` on a scratch clone, a second `dvc repro` that does
nothing, and nbval over every executed notebook against the outputs the pipeline stored."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, SMOKE_BUILD
from tests.smoke_chain import BUILD_FAILED, chain_files, figure_hashes, nbval_command

pytestmark = pytest.mark.slow


def _tracked_files(repo: Path) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=repo, capture_output=True,
                         text=True, check=True).stdout
    return [line for line in out.splitlines() if (repo / line).is_file()]


def _make_scratch(root: Path, mirror: Path) -> dict[str, str]:
    """Fill ``root`` with a copy of the repository's files set to the smoke profile, with no results yet; return
    the environment to run it in."""
    for rel in _tracked_files(REPO):
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target)
    params = root / "params.yaml"
    params.write_text(re.sub(r"^profile: \w+", "profile: smoke", params.read_text(), count=1, flags=re.M))
    (root / "dvc.lock").unlink(missing_ok=True)
    # Start from no outputs; the seed-items table and results/gpu/ (results made elsewhere, committed) under results/
    # are inputs of the results index.
    shutil.rmtree(root / "figures", ignore_errors=True)
    for path in (root / "results").iterdir():
        if path.name not in ("seed_items.csv", "gpu"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    git = ["git", "-c", "user.name=ci", "-c", "user.email=ci@localhost", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "scratch"], cwd=root, check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PAPERLIB_PROFILE", "PAPERLIB_ROOT")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               PAPERLIB_DATA_MIRROR=str(mirror), DVC_NO_ANALYTICS="1")
    return env


@dataclass
class SmokeBuild:
    """The smoke profile's first `dvc repro` in a scratch copy, then nbval over what it wrote (tests/smoke_chain.py),
    running in the background (its own process group, its output to files)."""
    root: Path
    env: dict[str, str]
    proc: subprocess.Popen

    def output(self, timeout: int = 1800) -> str:
        """Wait for the build and the nbval run after it; the build's output, or a failed assertion with its end."""
        try:
            self.proc.wait(timeout=timeout)
        finally:
            _stop(self.proc)
        out = chain_files(self.root)["repro"].read_text()
        assert self.proc.returncode != BUILD_FAILED, f"dvc repro failed:\n{out[-8000:]}"
        assert self.proc.returncode == 0, f"the smoke chain failed ({self.proc.returncode}) after the build"
        return out


def start_smoke_build(tmp_path_factory, mirror: Path) -> SmokeBuild:
    """Start the smoke build and the nbval run after it. tests/conftest.py calls this when the session's tests are
    collected, so the pipeline (one process at a time) builds, and nbval re-runs its notebooks, on one core while
    the unit tests run on the other; this module's tests run last and wait for it."""
    root = tmp_path_factory.mktemp("compendium")
    env = _make_scratch(root, mirror)
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "smoke_chain.py"), str(root)], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    return SmokeBuild(root, env, proc)


@pytest.fixture(scope="module")
def scratch(mirror, request, tmp_path_factory) -> SmokeBuild:
    """The smoke build, finished (started at collection when this module's tests were selected, else now)."""
    if shutil.which("git") is None:
        pytest.skip("git is needed to list the repository's files")
    build = request.config.stash.get(SMOKE_BUILD, None) or start_smoke_build(tmp_path_factory, mirror)
    build.output()
    return build


def _run(cmd, root, env, timeout=1200):
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout + proc.stderr


def _json(cmd, root, env):
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout)


def test_dvc_repro_builds_everything_and_a_second_run_does_nothing(committed_nbval, scratch):
    root, env = scratch.root, scratch.env  # committed_nbval: started first, to run beside the build's end
    first = scratch.output()
    assert "Running stage 'notebook_dataset_summary'" in first
    assert (root / "figures" / "dataset_summary.png").stat().st_size > 10_000
    assert '"ptb"' in (root / "results" / "data_summary.json").read_text()
    index = (root / "results" / "README.md").read_text()
    ids = [line.split(",", 1)[0] for line in (root / "results" / "seed_items.csv").read_text().splitlines()[1:]]
    assert all(f"| {item} |" in index for item in ids)
    assert "[profile smoke]" in index  # smoke numbers are labelled as such, never passed off as cpu ones
    metrics = _json([sys.executable, "-m", "dvc", "metrics", "show", "--json"], root, env)
    assert "results/metrics/lm_ptb.json" in json.dumps(metrics), "dvc metrics show found no metrics"
    plots = _json([sys.executable, "-m", "dvc", "plots", "show", "--json", "-o", str(root / "dvc_plots")], root, env)
    assert "results/plots/averaging_valid.csv" in json.dumps(plots)
    second = _run([sys.executable, "-m", "dvc", "repro"], root, env)
    assert "Running stage" not in second
    assert "up to date" in second


def test_the_dry_run_stage_builds_and_steps_every_stage_of_the_paper_profile(scratch):
    """The smoke pipeline's dry run (sequences cut to 2 positions) measured every stage with a dry run, and its
    tables print every one (tests/test_dryrun.py:check_dry_run)."""
    from paperlib.experiments.dryrun.dryrun import STAGES
    from paperlib.experiments.dryrun.gpu_time import render_tables
    from tests.test_dryrun import check_dry_run

    result = json.loads((scratch.root / "results" / "dryrun.json").read_text())
    check_dry_run(result, render_tables(result), STAGES)


def _start_nbval(root: Path, env: dict, notebooks: list[Path]) -> tuple[subprocess.Popen, Path]:
    """Strict nbval over executed notebooks under `root` (smoke_chain.nbval_command), started in the background (its
    own process group, its output to a file)."""
    log = root.parent / f"{root.name}-nbval.log"
    with log.open("w") as out:
        proc = subprocess.Popen(nbval_command(root, notebooks), cwd=root, env=env, stdout=out,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
    return proc, log


def _stop(proc: subprocess.Popen) -> None:
    """End a background run and the kernels it started."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _nbval_passed(started: tuple[subprocess.Popen, Path], timeout: int = 1200) -> str:
    proc, log = started
    try:
        proc.wait(timeout=timeout)
    finally:
        _stop(proc)
    out = log.read_text()
    assert proc.returncode == 0, f"nbval failed:\n{out[-6000:]}"
    assert re.search(r"\b\d+ passed\b", out) and "failed" not in out
    return out


def test_nbval_reruns_every_executed_notebook_to_the_same_outputs_and_figures(scratch):
    """nbval in its strict mode over the executed copies the pipeline wrote (run by tests/smoke_chain.py right after
    the build): every cell runs again without error and every text output (tables, printed numbers, claims) comes
    out exactly as stored, and the figures the notebooks save again are byte-identical to the pipeline's. Inline
    images are compared through the saved figures, which hold the same plots."""
    root = scratch.root
    executed = sorted((root / "results" / "notebooks").glob("*.ipynb"))
    assert {p.stem for p in executed} == {p.stem for p in (root / "notebooks").glob("*.ipynb")}
    files = chain_files(root)
    out = files["nbval"].read_text()
    assert files["nbval_status"].read_text() == "0", f"nbval failed:\n{out[-6000:]}"
    assert re.search(r"\b\d+ passed\b", out) and "failed" not in out, out[-6000:]
    built = json.loads(files["figures"].read_text())
    assert built and figure_hashes(root / "figures") == built, "figures not byte-deterministic"


@pytest.fixture(scope="module")
def committed_nbval(tmp_path_factory):
    """nbval over the committed executed notebooks, started in the background when first asked for: the first test
    asks, so it runs on the second core while the smoke pipeline (one process at a time) builds."""
    root = tmp_path_factory.mktemp("committed") / "clone"
    for rel in _tracked_files(REPO):
        if rel.startswith(("results/", "figures/", "notebooks/", "params.yaml", "dvc.yaml")):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, root / rel)
    figures = figure_hashes(root / "figures")
    env = {k: v for k, v in os.environ.items() if k not in ("PAPERLIB_PROFILE", "PAPERLIB_ROOT")}
    started = _start_nbval(root, env, sorted((root / "results" / "notebooks").glob("*.ipynb")))
    yield root, figures, started
    _stop(started[0])


def test_the_committed_executed_notebooks_are_what_the_committed_results_give(committed_nbval):
    """What a reader sees online: every committed executed notebook (the default profile's) re-runs from the
    committed results to exactly its stored text outputs, and re-draws the committed figures byte for byte."""
    root, figures, started = committed_nbval
    _nbval_passed(started)
    drawn = figure_hashes(root / "figures")
    changed = sorted(name for name in figures if drawn.get(name) != figures[name])
    assert not changed, f"committed figures differ from what the notebooks draw: {changed}"
