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
