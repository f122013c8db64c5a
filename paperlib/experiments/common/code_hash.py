"""Which code made a run: the static import closure of a module, and a hash of those files' bytes.

Training stages keep runs under ``runs/`` so that an interrupted stage resumes, and read a finished run back
instead of training it again. A run is only the same run if the settings *and* the code are the same: every run
cache adds :func:`code_hash` of the modules its run executes to its key, so after an edit to, say,
``paperlib/models/lstm.py`` the stage trains again instead of returning the run the old code made.

The closure is read statically (``import`` statements anywhere in a module, including inside functions, and the
``__init__`` of every package on the way), from the package's own files, as ``tests/test_dvc_deps.py`` does for
DVC's deps with the same functions. Modules that are loaded by name at run time (``params.yaml``'s validation
imports every experiment's schema) are not followed: the validated settings are in the run key already. A file
is hashed by its bytes (line endings normalised), so a changed comment redoes the runs too: the safe side.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

import paperlib

PACKAGE_DIR = Path(paperlib.__file__).resolve().parent
# dispatch only (argument parsing, version): a change there cannot change a result
NOT_RESULT_CODE = frozenset({"paperlib", "paperlib.__main__", "paperlib.compendium.cli"})


def module_file(name: str, package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The file of module ``paperlib.x.y`` (a module or a package's ``__init__``), None if it is not one."""
    parts = name.split(".")
    if parts[0] != "paperlib":
        return None
    base = package_dir.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def module_name(path: Path, package_dir: Path = PACKAGE_DIR) -> str:
    """``paperlib.x.y`` for ``<package_dir>/x/y.py`` (``paperlib.x`` for ``x/__init__.py``)."""
    parts = path.resolve().relative_to(package_dir).with_suffix("").parts
    return ".".join(("paperlib", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def imported_modules(path: Path, package_dir: Path = PACKAGE_DIR) -> set[str]:
    """Names of the paperlib modules ``path`` imports anywhere (``from paperlib import x`` counts x if a module);
    importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` too, so those count."""
    tree = ast.parse(path.read_text())
    package = module_name(path, package_dir)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    found = set()
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            if module_file(".".join(parts[:i]), package_dir) is not None:
                found.add(".".join(parts[:i]))
    return found


def closure(modules: Iterable[str], package_dir: Path = PACKAGE_DIR) -> set[str]:
    """``modules`` and every paperlib module they import, transitively, less :data:`NOT_RESULT_CODE`."""
    todo, seen = list(modules), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = module_file(name, package_dir)
        if path is None:
            raise ValueError(f"{name!r} is not a module of paperlib")
        todo.extend(imported_modules(path, package_dir) - seen)
    return seen - NOT_RESULT_CODE


def code_manifest(modules: Iterable[str], package_dir: Path = PACKAGE_DIR) -> dict[str, str]:
    """``{"paperlib/x/y.py": sha256 of its bytes}`` over the closure of ``modules``, paths relative to the package's
    parent, so that a clone, a copy and an installed package give the same manifest."""
    manifest = {}
    for name in closure(modules, package_dir):
        path = module_file(name, package_dir)
        rel = "/".join(("paperlib", *path.relative_to(package_dir).parts))
        manifest[rel] = hashlib.sha256(path.read_bytes().replace(b"\r\n", b"\n")).hexdigest()
    return dict(sorted(manifest.items()))


@functools.cache
def _code_hash(modules: tuple[str, ...], package_dir: Path) -> str:
    text = json.dumps(code_manifest(modules, package_dir), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def code_hash(*modules: str, package_dir: Path = PACKAGE_DIR) -> str:
    """16 hex digits identifying the code of ``modules`` and everything they import (see :func:`code_manifest`);
    computed once per process for the same modules."""
    if not modules:
        raise ValueError("code_hash needs at least one module")
    return _code_hash(tuple(sorted(set(modules))), package_dir)
