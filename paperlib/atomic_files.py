"""Files written whole or not at all: a temp file beside the target, then a rename (atomic on POSIX file systems).

A run killed mid-write leaves the previous file (or none), never half of one, so a resumed run and DVC only ever
read complete results and checkpoints.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json_atomic(path: str | os.PathLike, payload: Any) -> Path:
    """Write ``payload`` as JSON (indent 1, sorted keys, final newline) to ``path`` atomically; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def save_torch_atomic(payload: Any, path: str | os.PathLike) -> Path:
    """``torch.save`` ``payload`` to ``path`` atomically (a checkpoint: whole or absent); returns the path."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)
    return path
