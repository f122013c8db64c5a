"""The shape of ``paperlib/experiments/``: one folder per experiment family, plus ``common/`` and ``dryrun/``.

The rule (``paperlib/experiments/__init__.py``, docs/layout.md): a family folder (or, in a family split in two,
each of its sub-packages) has an ``__init__.py`` that only documents it and a ``claims.py`` that the results index
reads; each stage's entry module is named after its stage (a scale ladder's is ``ladder.py``); a family imports
``common/``, the library and ``paperlib.reference``, never another family.
"""
from __future__ import annotations

import ast
from pathlib import Path

from paperlib.compendium.cli import RUNNERS
from paperlib.experiments.common.config import EXPERIMENT_HOMES
from tests.test_dvc_deps import REPO, imported_modules
from tests.test_layers import modules

EXPERIMENTS = REPO / "paperlib" / "experiments"
SHARED = ("common", "dryrun")
# dryrun/ builds every stage's paper workload on fake tensors to count its parameters, memory and work (and so its
# GPU time): it has to import each family's model-building code, so it alone may import every family. Nothing but
# the compendium imports it.
IMPORTS_EVERY_FAMILY = "dryrun"
# Experiments whose schema is shared machinery rather than a family's: the corpus summary describes the corpora
# every family trains on, is computed by the library (paperlib.data.summary) and judges no claim.
SHARED_SCHEMAS = {"dataset_summary": "paperlib.experiments.common.schemas"}
# `paperlib train <stage>` runs the language-model comparisons, the other stages run through RUNNERS.
TRAIN_STAGES = {"lm_ptb": "paperlib.experiments.language_models.lm_ptb",
                "lm_ptb_char": "paperlib.experiments.language_models.lm_ptb",
                "lm_ptb_ablation": "paperlib.experiments.language_models.lm_ptb"}


def families() -> list[str]:
    return sorted(p.name for p in EXPERIMENTS.iterdir() if p.is_dir() and p.name not in (*SHARED, "__pycache__"))


def units() -> list[Path]:
    """The folders the naming rule applies to: each family, or each sub-package of a family split in two."""
    found = []
    for family in families():
        halves = sorted(p for p in (EXPERIMENTS / family).iterdir() if p.is_dir() and (p / "__init__.py").is_file())
        found.extend(halves or [EXPERIMENTS / family])
    return found


def dotted(folder: Path) -> str:
    return ".".join(folder.relative_to(REPO).parts)


def documents_only(path: Path) -> bool:
    """The module is a docstring and nothing else (importing it runs no code)."""
    body = ast.parse(path.read_text()).body
    return len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)


def family_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["paperlib", "experiments"] else None


def cross_family_imports(name: str, imported: set[str]) -> list[str]:
    """Imports of experiments module ``name`` that reach into a family other than its own (``common/`` is shared;
    ``common/`` itself may import no family, and no one but the compendium may import ``dryrun/``)."""
    own = family_of(name)
    bad = []
    for module in sorted(imported):
        other = family_of(module)
        if other is None or other == own or own == IMPORTS_EVERY_FAMILY:
            continue
        if other == "common" and own != IMPORTS_EVERY_FAMILY:
            continue
        bad.append(f"{name} imports {module}")
    return bad


def test_the_experiments_package_holds_only_its_map_and_folders():
    files = sorted(p.name for p in EXPERIMENTS.iterdir() if p.is_file())
    assert files == ["__init__.py"], f"loose modules in paperlib/experiments/: move them into a folder: {files}"
    assert documents_only(EXPERIMENTS / "__init__.py")
    assert all((EXPERIMENTS / name / "__init__.py").is_file() for name in SHARED)
    text = ast.get_docstring(ast.parse((EXPERIMENTS / "__init__.py").read_text()))
    folders = [*SHARED, *(str(u.relative_to(EXPERIMENTS)) for u in units())]
    unmapped = [f for f in folders if f"``{f}/``" not in text]
    assert not unmapped, f"paperlib/experiments/__init__.py's map lacks {unmapped}"


def test_every_family_has_a_documenting_init_and_the_claims_the_index_reads():
    index = set()
    for path in sorted((REPO / "paperlib" / "compendium" / "results_index").glob("*.py")):
        index |= imported_modules(path)
    for unit in units():
        name = unit.relative_to(EXPERIMENTS)
        assert documents_only(unit / "__init__.py"), f"{name}/__init__.py should only document the family"
        if unit.parent != EXPERIMENTS:
            assert documents_only(unit.parent / "__init__.py")
        assert (unit / "claims.py").is_file(), f"{name}/ has no claims.py"
        assert f"{dotted(unit)}.claims" in index, f"the results index does not read {name}/claims.py"


def test_every_stage_lives_in_a_family_folder_in_a_module_named_after_it():
    for stage, home in EXPERIMENT_HOMES.items():
        if stage in SHARED_SCHEMAS:
            assert home == SHARED_SCHEMAS[stage]
            continue
        assert family_of(home) in families(), f"{stage}'s schema lives in {home}, outside the family folders"
    entries = {**{stage: target.split(":")[0] for stage, target in RUNNERS.items()}, **TRAIN_STAGES}
    assert set(entries) == set(EXPERIMENT_HOMES) - set(SHARED_SCHEMAS)
    for stage, module in entries.items():
        assert family_of(module) in families(), f"stage {stage} runs {module}, outside the family folders"
        last = module.rsplit(".", 1)[1]
        expected = "ladder" if stage.endswith("_ladder") else ("lm_ptb" if stage in TRAIN_STAGES else stage)
        assert last == expected, f"stage {stage}'s entry module is {module}; name it {expected}.py"


def test_no_family_imports_another_family():
    bad = []
    for name, path in modules():
        if family_of(name) is not None:
            bad += cross_family_imports(name, imported_modules(path))
    assert not bad, bad


def test_the_family_rule_flags_each_crossing_and_excepts_only_the_dry_run():
    e = "paperlib.experiments."
    assert cross_family_imports(e + "averaging.averaging_ptb", {e + "language_models.lm_ptb"})
    assert cross_family_imports(e + "common.config", {e + "music.music"})  # shared machinery owns no family
    assert cross_family_imports(e + "music.music", {e + "dryrun.gpu_time"})
    assert not cross_family_imports(e + "micmco.ptb.micmco_ptb", {e + "micmco.synthetic.micmco_synthetic"})
    assert not cross_family_imports(e + "music.music", {e + "common.stage", "paperlib.dyneval", "paperlib.reference"})
    assert not cross_family_imports(e + "dryrun.dryrun", {e + "music.music", e + "micmco.ptb.micmco_ptb"})
