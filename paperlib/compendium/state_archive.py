"""A stage's resumable state as one small archive, to continue its work on another machine.

Stages that train in chunks keep what they have done under ``runs/<stage>/``: SQLite studies, finished runs'
records and the points of a batch in progress (small files), and checkpoints of the work in progress (``*.pt``, tens
of MB per model at the seeds' sizes). :func:`pack` writes the small files into one gzip-compressed tar file and
leaves the checkpoints behind, so a stack that was part-way through starts again from its first step on the other
machine, with the same points and seeds (the studies ask an interrupted batch again; the ladders find its runs
unfinished). :func:`unpack` merges such an archive into another checkout's ``runs/``, replacing older copies of the
same files. Moving work between machines this way needs the same code and settings at both ends: a study or run
folder made by other code or settings is not reused (:mod:`paperlib.experiments.common.code_hash`).

The archive is byte-for-byte the same for the same files (sorted members, no times, owners or modes), and
:func:`pack` refuses to write one over ``limit`` bytes (a transfer's limit on a file).
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any

LEFT_BEHIND = (".pt",)  # checkpoints of work in progress: large, and redone from the batch's start
TRANSIENT = ("-journal", "-wal", "-shm", ".tmp", ".part")  # an open SQLite file's side files, unfinished writes


def portable_files(root: str | os.PathLike, stages: list[str]) -> list[Path]:
    """The files of ``runs/<stage>/`` (every stage of ``stages``, recursively) that travel: all but checkpoints,
    transient files and symbolic links, sorted; paths relative to ``root``. A ValueError for a stage with no
    folder there (a misspelt name, or nothing of it has run)."""
    root = Path(root)
    files = []
    for stage in stages:
        if not stage or "/" in stage or stage in (".", ".."):
            raise ValueError(f"not a stage name: {stage!r}")
        folder = root / "runs" / stage
        if not folder.is_dir() or folder.is_symlink():
            raise ValueError(f"no folder runs/{stage}/ under {root}: nothing of stage {stage!r} has run there")
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.is_symlink() and not path.name.endswith(LEFT_BEHIND + TRANSIENT):
                files.append(path.relative_to(root))
    return files


def pack(root: str | os.PathLike, stages: list[str], out: str | os.PathLike, limit: int | None = None
         ) -> dict[str, Any]:
    """Write the portable files of ``stages`` (:func:`portable_files`) under ``root`` into the archive ``out``;
    return its ``files``, ``bytes`` and the checkpoints ``left_behind``. A ValueError, and no file, when the
    archive would exceed ``limit`` bytes."""
    root, out = Path(root), Path(out)
    files = portable_files(root, stages)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as zipped, \
            tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in files:
            data = (root / rel).read_bytes()
            info = tarfile.TarInfo(rel.as_posix())
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    blob = buffer.getvalue()
    if limit is not None and len(blob) > limit:
        raise ValueError(f"the state of {', '.join(stages)} packs to {len(blob):,} bytes, over the limit of "
                         f"{limit:,}; {len(files)} files")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".part")
    partial.write_bytes(blob)
    os.replace(partial, out)
    left = [p for stage in stages for p in sorted((root / "runs" / stage).rglob(f"*{LEFT_BEHIND[0]}"))]
    return {"files": len(files), "bytes": len(blob), "left_behind": [str(p.relative_to(root)) for p in left]}


def unpack(archive: str | os.PathLike, root: str | os.PathLike) -> list[str]:
    """Merge the archive's files into ``root`` (its ``runs/``), replacing files of the same name; return their
    paths. A ValueError, before anything is written, for a member that is not a plain file under ``runs/``."""
    root = Path(root)
    with tarfile.open(archive, mode="r:gz") as tar:
        members = tar.getmembers()
        for member in members:
            parts = PurePosixPath(member.name).parts
            if not member.isfile() or len(parts) < 3 or parts[0] != "runs" or ".." in parts \
                    or PurePosixPath(member.name).is_absolute():
                raise ValueError(f"{archive}: {member.name!r} is not a file under runs/<stage>/; not unpacked")
        names = []
        for member in members:
            target = root / member.name
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".part")
            partial.write_bytes(tar.extractfile(member).read())
            os.replace(partial, target)
            names.append(member.name)
    return names


__all__ = ["LEFT_BEHIND", "TRANSIENT", "pack", "portable_files", "unpack"]
