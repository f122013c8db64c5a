"""Running the compendium's notebooks with papermill, and the helpers the notebooks share."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paperlib.experiments.common.config import PROFILE_ENV, active_profile, load_params, repo_root

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
    import sys

    # jsonschema, which papermill's nbformat imports, compiles ~40 Lark grammars at import when rfc3987_syntax is
    # installed (it is, through JupyterLab): 2 seconds of every notebook stage, for an IRI format check nbformat's
    # schema never asks for. This process imports jsonschema without it (the kernel is another process).
    blocked = "rfc3987_syntax" not in sys.modules
    if blocked:
        sys.modules["rfc3987_syntax"] = None  # an import of it raises ImportError, which jsonschema skips
    try:
        import papermill
    finally:
        if blocked:
            del sys.modules["rfc3987_syntax"]

    root = Path(root) if root is not None else repo_root()
    source = root / NOTEBOOK_DIR / f"{name}.ipynb"
    if not source.is_file():
        choices = ", ".join(available_notebooks(root)) or "none"
        raise NotebookError(f"no notebook {name!r} in {root / NOTEBOOK_DIR}; available: {choices}")
    parameters = dict(parameters or {})
    # only the profile's name is needed here (checked by active_profile); a notebook that reads its settings
    # validates params.yaml in its kernel
    raw = None if profile or os.environ.get(PROFILE_ENV) else load_params(root / "params.yaml", validate=False)
    parameters.setdefault("profile", active_profile(profile, raw))
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
    write_stable_notebook(target, root)
    return target


# Metadata that says when, where and with which software versions a notebook ran rather than what it
# computed: papermill's timings and absolute paths, Jupyter's execution timestamps, the Python version.
_VOLATILE_NOTEBOOK_KEYS = {"papermill": ("start_time", "end_time", "duration", "input_path", "output_path",
                                         "version", "exception", "environment_variables")}
_VOLATILE_CELL_KEYS = ("execution", "papermill")
_TEXT_MIMES = ("text/plain", "text/html", "text/markdown")
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_TEXT_CHUNKS = (b"tEXt", b"iTXt", b"zTXt", b"tIME")  # matplotlib writes its version into tEXt


def strip_volatile_metadata(notebook: dict, root: str | os.PathLike | None = None) -> dict:
    """Make an executed notebook depend only on what it computed, in place: remove what changes from run to
    run (timestamps, durations, absolute paths, papermill's and Python's versions, kernel-side execution
    records, the random id of the cell papermill injects, the text chunks of inline PNG figures that name the
    plotting library's version) and, when `root` is given, write paths under the
    repository relative to it in text outputs (a displayed `PosixPath('/home/you/paperlib/results/x.csv')`
    becomes `PosixPath('results/x.csv')`). The same inputs then give a byte-identical executed copy wherever
    the clone sits, which can be committed and which DVC sees as up to date. Outputs, execution counts,
    tags and the parameters papermill injected are kept."""
    meta = notebook.setdefault("metadata", {})
    for section, keys in _VOLATILE_NOTEBOOK_KEYS.items():
        for key in keys:
            meta.get(section, {}).pop(key, None)
    meta.get("language_info", {}).pop("version", None)
    relative = _relative_paths(Path(root).resolve()) if root is not None else (lambda text: text)
    for cell in notebook.get("cells", []):
        for key in _VOLATILE_CELL_KEYS:
            cell.get("metadata", {}).pop(key, None)
        if "injected-parameters" in cell.get("metadata", {}).get("tags", ()):
            cell["id"] = "injected-parameters"  # papermill gives the cell it adds a random id
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = relative(output["text"])
            for mime in _TEXT_MIMES:
                if mime in output.get("data", {}):
                    output["data"][mime] = relative(output["data"][mime])
            if "image/png" in output.get("data", {}):
                output["data"]["image/png"] = _inline_png_without_text(output["data"]["image/png"])
    return notebook


def png_without_text(data: bytes) -> bytes:
    """A PNG file without its text and time chunks (e.g. matplotlib's 'Software: Matplotlib version …'), pixels
    untouched: every chunk carries its own CRC, so dropping whole chunks leaves a valid file."""
    if not data.startswith(_PNG_SIGNATURE):
        raise ValueError("not a PNG file")
    kept, i = [_PNG_SIGNATURE], len(_PNG_SIGNATURE)
    while i < len(data):
        length = int.from_bytes(data[i : i + 4], "big")
        chunk = data[i : i + 12 + length]  # length, type, data, CRC
        if chunk[4:8] not in _PNG_TEXT_CHUNKS:
            kept.append(chunk)
        i += 12 + length
    return b"".join(kept)


def _inline_png_without_text(encoded: str | list[str]) -> str:
    import base64

    encoded = "".join(encoded) if isinstance(encoded, list) else encoded
    return base64.b64encode(png_without_text(base64.b64decode(encoded))).decode("ascii") + "\n"


def _relative_paths(root: Path):
    prefix = str(root) + os.sep

    def relative(text: str | list[str]) -> str | list[str]:
        if isinstance(text, list):
            return [relative(part) for part in text]
        return text.replace(prefix, "").replace(str(root), ".")

    return relative


def write_stable_notebook(path: str | os.PathLike, root: str | os.PathLike | None = None) -> Path:
    """Rewrite an executed notebook without its volatile metadata (see `strip_volatile_metadata`), in
    nbformat's own layout, atomically."""
    import nbformat

    path = Path(path)
    notebook = strip_volatile_metadata(nbformat.read(path, as_version=nbformat.NO_CONVERT), root)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        nbformat.write(notebook, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def save_figure(fig, name: str, root: str | os.PathLike | None = None) -> list[Path]:
    """Save a matplotlib figure as `figures/<name>.png` and `.pdf` with no creation date and no software
    names or versions in either file, so that identical figures give identical files."""
    root = Path(root) if root is not None else repo_root()
    folder = root / FIGURE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.png", folder / f"{name}.pdf"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(paths[1], bbox_inches="tight", metadata={"CreationDate": None, "Producer": None,
                                                              "Creator": None})
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
