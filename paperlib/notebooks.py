"""Running the compendium's notebooks with papermill, and the helpers the notebooks share."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paperlib.config import active_profile, repo_root

if TYPE_CHECKING:
    import pandas

NOTEBOOK_DIR = "notebooks"
EXECUTED_DIR = "results/notebooks"
FIGURE_DIR = "figures"
TABLE_DIR = "results"
TABLE_NAME = re.compile(r"[a-z0-9_]+")
RESERVED_TABLES = frozenset({"seed_items"})  # results/seed_items.csv is an input of the results index


class NotebookError(RuntimeError):
    """A notebook could not be found or failed while running."""


def available_notebooks(root: str | os.PathLike | None = None) -> list[str]:
    root = Path(root) if root is not None else repo_root()
    return sorted(p.stem for p in (root / NOTEBOOK_DIR).glob("*.ipynb"))


def run_notebook(name: str, parameters: dict[str, Any] | None = None, profile: str | None = None,
                 root: str | os.PathLike | None = None, progress: bool = False) -> Path:
    """Execute `notebooks/<name>.ipynb` with papermill at the repository root; returns the executed copy.

    The active profile is passed as the `profile` parameter unless `parameters` sets it.
    """
    import papermill

    root = Path(root) if root is not None else repo_root()
    source = root / NOTEBOOK_DIR / f"{name}.ipynb"
    if not source.is_file():
        choices = ", ".join(available_notebooks(root)) or "none"
        raise NotebookError(f"no notebook {name!r} in {root / NOTEBOOK_DIR}; available: {choices}")
    parameters = dict(parameters or {})
    parameters.setdefault("profile", active_profile(profile))
    target = root / EXECUTED_DIR / f"{name}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    env_root = os.environ.get("PAPERLIB_ROOT")
    os.environ["PAPERLIB_ROOT"] = str(root)  # the kernel inherits it, so the notebook finds this compendium
    try:
        papermill.execute_notebook(
            str(source), str(target), parameters=parameters, cwd=str(root), kernel_name="python3",
            progress_bar=progress, log_output=False,
        )
    except papermill.PapermillExecutionError as err:
        raise NotebookError(f"notebook {name} failed in cell {err.exec_count}: {err.ename}: {err.evalue}") from None
    finally:
        if env_root is None:
            os.environ.pop("PAPERLIB_ROOT", None)
        else:
            os.environ["PAPERLIB_ROOT"] = env_root
    return target


def save_figure(fig, name: str, root: str | os.PathLike | None = None) -> list[Path]:
    """Save a matplotlib figure as `figures/<name>.png` and `.pdf` (PDF without a creation date, so
    that identical figures give identical files)."""
    root = Path(root) if root is not None else repo_root()
    folder = root / FIGURE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.png", folder / f"{name}.pdf"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(paths[1], bbox_inches="tight", metadata={"CreationDate": None, "Producer": None})
    return paths


def save_table(table: pandas.DataFrame, name: str, root: str | os.PathLike | None = None) -> Path:
    """Save a pandas DataFrame as `results/<name>.csv`, index included, so that every table of the compendium
    can be read without opening a notebook. Written to a temp file beside the target, then renamed, so readers
    never see half a file; no timestamps, so identical tables give identical files."""
    if not isinstance(name, str) or not TABLE_NAME.fullmatch(name):
        raise ValueError(f"table name {name!r}: use only lowercase letters, digits and underscores ([a-z0-9_]+)")
    if name in RESERVED_TABLES:
        raise ValueError(f"table name {name!r} is reserved: {TABLE_DIR}/{name}.csv is an input, not a notebook output")
    root = Path(root) if root is not None else repo_root()
    folder = root / TABLE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.csv"
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        table.to_csv(tmp, lineterminator="\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
