"""Every DVC stage declares, as deps, each paperlib module its command can import (transitively).

A stage that misses a module it runs would not re-run when that module changes, so `dvc repro` could leave
results made by old code. The imports are read statically (``import`` statements anywhere in a module, including
inside functions), starting from the module the stage's command dispatches to. Modules loaded by name at run time
(``paperlib.experiments.common.config`` imports the params schemas of every experiment through ``importlib`` to validate
``params.yaml``) are not followed; they validate settings and do not compute results.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml

from paperlib.compendium.cli import LEVELS, RUNNERS
from paperlib.experiments.common import code_hash

REPO = Path(__file__).resolve().parents[1]


def module_file(name: str) -> Path | None:
    """The file of module ``paperlib.x.y`` in this repository, None if it is not one."""
    return code_hash.module_file(name, REPO / "paperlib")


def imported_modules(path: Path) -> set[str]:
    return code_hash.imported_modules(path, REPO / "paperlib")


def closure(modules: set[str]) -> set[str]:
    """Repository-relative files of ``modules`` and everything they import from paperlib, transitively: the same
    closure that keys the run caches (:mod:`paperlib.experiments.common.code_hash`), less the dispatch-only modules."""
    return {str(module_file(n).relative_to(REPO)) for n in code_hash.closure(modules, REPO / "paperlib")}


def notebook_tree(name: str) -> ast.Module:
    """The notebook's code cells as one parsed module (IPython magics and shell lines left out)."""
    nb = json.loads((REPO / "notebooks" / f"{name}.ipynb").read_text())
    source = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    return ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))


def notebook_modules(name: str) -> set[str]:
    names = set()
    for node in ast.walk(notebook_tree(name)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return {n for n in names if module_file(n) is not None}


def entry_modules(cmd: str) -> set[str]:
    """The paperlib modules a stage's ``paperlib ...`` command dispatches to (see ``paperlib.compendium.cli``)."""
    words = cmd.split()
    assert words[0] == "paperlib", cmd
    if words[1] == "run":
        return {RUNNERS[words[2]].split(":")[0]}
    if words[1] == "train":
        return {"paperlib.experiments.language_models.lm_ptb"}
    if words[1] == "run-notebook":
        return {"paperlib.compendium.notebooks"} | notebook_modules(words[2])
    if words[1:3] == ["data", "fetch"]:
        return {"paperlib.data.corpora"}
    if words[1:3] == ["data", "summary"]:
        return {"paperlib.experiments.common.config", "paperlib.data.corpora", "paperlib.data.summary", "paperlib.experiments.common.provenance",
                "paperlib.experiments.common.code_hash"}
    if words[1] == "levels":
        return {LEVELS[words[2]].split(":")[0]}
    if words[1] == "dryrun":
        return {"paperlib.experiments.dryrun.dryrun", "paperlib.experiments.common.provenance"}
    if words[1] == "index":
        return {"paperlib.compendium.results_index", "paperlib.compendium.dvc_views"}
    raise AssertionError(f"unknown command {cmd!r}: teach entry_modules about it")


def covered(file: str, deps: list[str]) -> bool:
    return any(file == d or file.startswith(d.rstrip("/") + "/") for d in deps)


STAGES = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_stage_declares_every_paperlib_module_it_runs(stage):
    spec = STAGES[stage]
    needed = closure(entry_modules(spec["cmd"]))
    missing = sorted(f for f in needed if not covered(f, spec.get("deps", [])))
    assert not missing, f"stage {stage}: add to deps {missing}"


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_stage_declares_no_paperlib_module_it_does_not_run(stage):
    """The other way round: every ``paperlib/`` dep holds a module of the closure, so moving or dropping an import
    does not leave a stage re-running for code it no longer uses."""
    spec = STAGES[stage]
    needed = closure(entry_modules(spec["cmd"]))
    extra = sorted(d for d in spec.get("deps", []) if d.startswith("paperlib/") and not any(covered(f, [d]) for f in needed))
    assert not extra, f"stage {stage}: remove from deps {extra}"


def test_the_import_reader_follows_relative_function_level_and_package_imports():
    files = closure({"paperlib.experiments.micmco.ptb.micmco_ptb"})
    assert "paperlib/experiments/micmco/ptb/micmco_ptb.py" in files and "paperlib/models/sentence_vae.py" in files
    assert "paperlib/experiments/micmco/ptb/verdicts.py" in files  # a module of the same sub-package
    assert {"paperlib/experiments/micmco/__init__.py", "paperlib/experiments/micmco/ptb/__init__.py"} <= files
    assert "paperlib/experiments/micmco/synthetic/micmco_synthetic.py" in files  # the family's other half
    assert "paperlib/models/__init__.py" in files and "paperlib/experiments/common/config.py" in files
    assert "paperlib/compendium/cli.py" not in files
    assert not covered("paperlib/models/lstm.py", ["paperlib/model"]) and covered("paperlib/models/lstm.py",
                                                                                  ["paperlib/models"])


@pytest.mark.parametrize("stage", sorted(s for s in STAGES if STAGES[s]["cmd"].split()[1] == "run-notebook"))
def test_notebook_stage_declares_every_result_file_its_notebook_reads(stage):
    import re

    name = STAGES[stage]["cmd"].split()[2]
    text = (REPO / "notebooks" / f"{name}.ipynb").read_text()
    read = set(re.findall(r"results/[A-Za-z0-9_]+\.(?:provenance\.)?json", text))
    missing = sorted(read - set(STAGES[stage].get("deps", [])))
    assert not missing, f"stage {stage}: add to deps {missing}"


def saved_tables(name: str) -> list[str]:
    """The table names a notebook passes to ``save_table`` (a literal, so DVC can declare the file)."""
    names = []
    for node in ast.walk(notebook_tree(name)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "save_table":
            assert isinstance(node.args[1], ast.Constant), f"{name}: save_table needs a literal name"
            names.append(node.args[1].value)
    return names


@pytest.mark.parametrize("stage", sorted(s for s in STAGES if STAGES[s]["cmd"].split()[1] == "run-notebook"))
def test_notebook_stage_declares_every_table_its_notebook_writes(stage):
    name = STAGES[stage]["cmd"].split()[2]
    outs = {next(iter(o)) if isinstance(o, dict) else o for o in STAGES[stage]["outs"]}
    tables = saved_tables(name)
    assert tables, f"{name} writes no table to results/"
    declared = {o for o in outs if o.startswith("results/") and o.endswith(".csv")}
    assert {f"results/{t}.csv" for t in tables} == declared
    assert len(tables) == len(set(tables))


def test_the_dry_run_stage_declares_the_paper_settings_of_every_stage_it_runs():
    """`paperlib dryrun` builds every stage's paper profile (dryrun.ADAPTERS): a changed paper setting must re-run
    it, so its stage lists each experiment's paper params (the PTB MICMCO ladder's were missing once)."""
    from paperlib.experiments.dryrun.dryrun import ADAPTERS

    declared = set(STAGES["dryrun"]["params"])
    missing = sorted(f"experiments.{name}.paper" for name in ADAPTERS if f"experiments.{name}.paper" not in declared)
    assert not missing, f"stage dryrun: add to params {missing}"
