"""The import graph points one way: library ← experiments ← compendium (docs/layout.md).

The library (``paperlib`` outside ``experiments/`` and ``compendium/``) is what a user imports for the methods; it
must not reach into the experiments (stages, ``params.yaml``) or the compendium (index, notebooks, CLI). The
experiments use the library, their own family and ``experiments/common/`` (``tests/test_layout.py``); the compendium
may use everything. ``paperlib.reference`` (the papers'
numbers) is data that the experiments and the compendium read and that imports nothing of paperlib but itself. Imports
anywhere in a module count, including those inside functions, as in ``tests/test_dvc_deps.py``.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_dvc_deps import REPO, imported_modules

ENTRY_POINTS = {"paperlib.__main__"}  # `python -m paperlib`: dispatches to the compendium's CLI


def layer(module: str) -> str:
    parts = module.split(".")
    if module in ENTRY_POINTS:
        return "entry"
    if len(parts) > 1 and parts[1] in ("experiments", "compendium", "reference"):
        return parts[1]
    return "library"


ALLOWED = {
    "library": {"library"},
    "reference": {"reference"},  # data: one table may be read to state another (reference.tuning: Table 2.1)
    "experiments": {"library", "reference", "experiments"},
    "compendium": {"library", "reference", "experiments", "compendium"},
    "entry": {"compendium", "library"},
}


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted((REPO / "paperlib").rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found.append((name, path))
    return found


def bad_imports(name: str, imported: set[str]) -> list[str]:
    """The imports of module ``name`` that point against the layers (the root package ``paperlib`` is harmless)."""
    return sorted(f"{name} ({layer(name)}) imports {m} ({layer(m)})" for m in imported - {"paperlib", name}
                  if layer(m) not in ALLOWED[layer(name)])


@pytest.mark.parametrize("name,path", modules(), ids=[n for n, _ in modules()])
def test_imports_point_from_compendium_to_experiments_to_library(name, path):
    assert not bad_imports(name, imported_modules(path))


def test_the_layer_rule_flags_each_backward_arrow():
    assert bad_imports("paperlib.train", {"paperlib.experiments.common.config"})  # library -> experiments
    assert bad_imports("paperlib.models.lstm", {"paperlib.compendium.figure_style"})  # library -> compendium
    assert bad_imports("paperlib.experiments.language_models.lm_ptb",
                       {"paperlib.compendium.results_index"})  # experiments -> compendium
    assert bad_imports("paperlib.reference.language_models", {"paperlib.models"})  # data imports nothing
    assert not bad_imports("paperlib.reference.tuning", {"paperlib.reference.language_models"})
    assert not bad_imports("paperlib.compendium.results_index", {"paperlib.experiments.language_models.lm_ptb",
                                                                 "paperlib.reference.language_models"})
    assert not bad_imports("paperlib.experiments.dynamic_evaluation.dyneval",
                           {"paperlib.dyneval", "paperlib.experiments.common.config"})
    assert not bad_imports("paperlib.train", {"paperlib", "paperlib.models.state"})


# No module over 600 lines, in any layer (long experiment drivers and the results index are split into one module
# per part: experiments/micmco/ptb/, experiments/micmco/synthetic/, experiments/word_generation/,
# compendium/results_index/, dyneval/).
MAX_MODULE_LINES = 600


def test_every_module_is_at_most_600_lines():
    long = {name: n for name, path in modules() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by idea): {long}"


# Words about how the product was built (ticket numbers, work sessions) belong to the history, not to the product.
PROCESS_WORDS = re.compile(r"""issue\s*#\s*\d+|(?<![\w&/"'])#\d{1,3}\b(?![0-9a-fA-F])|\bsession \d+\b|the issue hoped""",
                           re.IGNORECASE)


def test_the_product_speaks_of_itself_not_of_how_it_was_built():
    """No ticket numbers or work sessions in the package, the notebooks, the benchmarks, the configuration, the README
    and the results index (executed notebooks and figures are generated from these)."""
    root = Path(__file__).resolve().parents[1]
    files = [*root.joinpath("paperlib").rglob("*.py"), *root.joinpath("notebooks").glob("*.ipynb"),
             *root.joinpath("benchmarks").glob("*.py"), *root.joinpath("benchmarks").glob("*.sh"),
             *root.joinpath("docs").rglob("*.md"), root / "README.md", root / "results" / "README.md",
             root / "params.yaml", root / "dvc.yaml"]
    found = [f"{path.relative_to(root)}: {match.group(0)!r}" for path in files if path.is_file()
             for match in PROCESS_WORDS.finditer(path.read_text())]
    assert not found, found


def test_the_readme_is_an_entry_page_whose_links_resolve():
    """README.md stays an entry page (at most 200 lines; the long texts live in docs/), and every relative link of the
    README and of docs/*.md points to a file or folder of the repository."""
    root = Path(__file__).resolve().parents[1]
    readme = root / "README.md"
    assert len(readme.read_text().splitlines()) <= 200
    broken = []
    for page in [readme, *sorted(root.joinpath("docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if not target.startswith(("http://", "https://")) and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(root)} -> {target}")
    assert not broken, broken
