"""The compendium's set-up files agree with each other and with the README."""

import configparser
import re
import tomllib

import yaml

from tests.conftest import REPO


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower()


def test_environment_yml_lists_the_same_requirements_as_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = set(project["dependencies"]) | set(project["optional-dependencies"]["dev"])
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    listed = {r for r in pip if not r.startswith("-e")}
    assert listed == wanted, f"only in pyproject: {wanted - listed}; only in environment.yml: {listed - wanted}"
    assert "-e .[dev]" in pip
    assert any(str(d).startswith("python") for d in env["dependencies"] if isinstance(d, str))


def test_torch_is_never_left_unbounded_by_the_installer():
    make = (REPO / "Makefile").read_text()
    assert re.search(r"^TORCH_SPEC \?= torch==\d", make, re.M), "the Makefile must pin torch (CPU wheel on disk)"
    assert make.index('"$(TORCH_SPEC)"') < make.index('-e ".[dev]"'), "torch must be installed before the package"


def test_dvc_analytics_is_off_in_the_repository_config():
    config = configparser.ConfigParser()
    config.read_string((REPO / ".dvc" / "config").read_text())
    assert config["core"]["analytics"].strip() == "false"


def test_ci_runs_the_readme_test_command_and_readme_gives_two_commands():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    commands = re.findall(r"^\$ (.+)$", readme, re.M)  # the fresh-machine commands are shown as `$ ...`
    assert commands == ["make reproduce", "make test"]
    assert re.search(r"^make test$", ci, re.M)


def test_every_notebook_has_a_parameters_cell():
    import nbformat

    notebooks = sorted((REPO / "notebooks").glob("*.ipynb"))
    assert notebooks
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, path.name
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"{path.name}: strip outputs"


def test_a_missing_compendium_package_skips_only_where_that_is_allowed(tmp_path):
    """On a GPU image (PAPERLIB_ALLOW_MISSING set by benchmarks/gpu.sh) a test that fails only because wordfreq, DVC,
    papermill or the like is not installed is a skip naming it; anywhere else, and for any other package, a failure."""
    import os
    import subprocess
    import sys

    (tmp_path / "test_needs.py").write_text(
        "def test_word_list():\n    raise ModuleNotFoundError(\"No module named 'wordfreq'\", name='wordfreq')\n\n"
        "def test_library():\n    raise ModuleNotFoundError(\"No module named 'zuko'\", name='zuko')\n")
    env = {k: v for k, v in os.environ.items() if k != "PAPERLIB_ALLOW_MISSING"}
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "tests.conftest",
               "--rootdir", str(tmp_path), str(tmp_path / "test_needs.py")]
    strict = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert "2 failed" in strict.stdout, strict.stdout[-1500:]
    allowed = subprocess.run(command, cwd=REPO, env={**env, "PAPERLIB_ALLOW_MISSING": "1"}, capture_output=True,
                             text=True, timeout=120)
    assert "1 failed, 1 skipped" in allowed.stdout and "needs wordfreq, not installed here" in allowed.stdout, \
        allowed.stdout[-1500:]
