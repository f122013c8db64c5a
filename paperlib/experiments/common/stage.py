"""What every stage (and every worker process of one) does first: settle precision and device from ``params.yaml``.

:func:`begin_stage` is a stage's first line: it reads ``params.yaml`` and the experiment's settings, sets the torch
thread count and the device (:func:`setup_stage`), and returns them as a :class:`Stage`.

``params.yaml``'s ``compute`` section (:class:`ComputeParams`) names the device request and, per profile, the
precision and host-sync period; :func:`setup_stage` applies them with :func:`paperlib.device.configure` and
returns the device :func:`paperlib.device.resolve_device` picks, after joining torchrun's process group
(:func:`stage_device`). The policy itself, usable without a compendium, is :mod:`paperlib.device`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from paperlib.device import COMPILE_MODES, PRECISIONS, parse_device, configure, resolve_device
from paperlib.experiments.common.config import PROFILES, register_section


def seed_everything(seed: int) -> None:
    """Seed torch, NumPy and Python's ``random`` alike, so that a run's initialisation and batches repeat."""
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    import random

    random.seed(seed)


@register_section("compute", optional=True)
@dataclass(frozen=True)
class ComputeParams:
    """``params.yaml``'s ``compute`` section: the device request and, per profile, precision, sync period and
    ``torch.compile`` mode (``compile``, optional: ``eager`` for every profile unless given)."""

    device: str = "auto"
    precision: dict = field(default_factory=lambda: {p: "fp32" for p in PROFILES})
    sync_every: dict = field(default_factory=lambda: {p: 1 for p in PROFILES})
    compile: dict = field(default_factory=lambda: {p: "eager" for p in PROFILES})

    def __post_init__(self) -> None:
        if self.device != "auto":
            parse_device(self.device, "compute.device")
        for name, valid in (("precision", PRECISIONS), ("sync_every", None), ("compile", COMPILE_MODES)):
            table = getattr(self, name)
            missing = [p for p in PROFILES if p not in table]
            unknown = sorted(set(table) - set(PROFILES))
            if missing or unknown:
                raise ValueError(f"{name} must give exactly the profiles {', '.join(PROFILES)}; "
                                 f"missing {missing}, unknown {unknown}")
            for profile, value in table.items():
                if valid is not None and value not in valid:
                    raise ValueError(f"{name}.{profile}: unknown {'precision' if name == 'precision' else 'mode'} "
                                     f"{value!r}; valid: {', '.join(valid)}")
                if valid is None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                    raise ValueError(f"{name}.{profile} must be an integer >= 1, got {value!r}")


def stage_device(requested: str | torch.device | None = None, params: dict[str, Any] | None = None) -> torch.device:
    """The device a stage puts its model and data on: joins torchrun's process group first (which selects the
    rank's GPU), then resolves the request with the rank's local index."""
    from paperlib.distributed import init_from_env

    context = init_from_env()
    configured = _compute_params(params).device if requested is None else "auto"
    local_rank = context.local_rank if context.is_distributed else None
    return resolve_device(requested, configured, local_rank)


def _compute_params(params: dict[str, Any] | None) -> ComputeParams:
    from paperlib.experiments.common.config import ParamsError, load_params, section_params

    try:
        params = params if params is not None else load_params()
    except ParamsError:  # outside a compendium (a user's own script): the defaults
        return ComputeParams()
    return section_params("compute", params)


def setup_stage(profile: str | None = None, params: dict[str, Any] | None = None,
                requested: str | torch.device | None = None) -> torch.device:
    """What every stage (and every worker process of one) calls first: set the precision, sync period and
    compilation mode of ``profile`` (default: the active one) and return the stage's device."""
    from paperlib.experiments.common.config import ParamsError, active_profile, load_params

    if params is None:
        try:
            params = load_params()
        except ParamsError:  # outside a compendium (a user's own script): the defaults
            params = None
    if profile is None:
        profile = active_profile(None, params) if params is not None else "cpu"
    settings = _compute_params(params) if params is not None else ComputeParams()
    configure(settings.precision[profile], settings.sync_every[profile], settings.compile[profile])
    return stage_device(requested, params)


def results_path(root: str | Path, name: str, profile: str) -> Path:
    """Where stage ``name`` writes its results when run at ``profile``: ``results/<name>.json`` for the pipeline's
    profile (``params.yaml``'s ``profile``, the one ``dvc repro`` runs and the results index reads), and
    ``results/<profile>/<name>.json`` for any other (e.g. ``PAPERLIB_PROFILE=paper`` on a GPU), so that a run at
    another profile never overwrites what DVC tracks; its provenance goes beside it."""
    from paperlib.experiments.common.config import load_params

    pipeline = load_params(Path(root) / "params.yaml").get("profile", "cpu")
    folder = Path(root) / "results"
    return folder / f"{name}.json" if profile == pipeline else folder / profile / f"{name}.json"


@dataclass(frozen=True)
class Stage:
    """A started stage: when it started (for provenance's wall time), the repository root, ``params.yaml``, the
    profile, the experiment's validated settings and the device; :meth:`log` prints when ``progress``."""

    started: float
    root: Path
    params: dict[str, Any]
    profile: str
    settings: Any
    device: torch.device
    progress: bool = True

    @property
    def data_root(self) -> Path:
        """Where the stage's corpora are (``params.yaml``'s ``data.root`` under the repository)."""
        from paperlib.experiments.common.config import section_params

        return self.root / section_params("data", self.params).root

    def log(self, message: str) -> None:
        if self.progress:
            print(message, flush=True)


def begin_stage(experiment: str, profile: str | None = None, root: str | Path | None = None,
                progress: bool = True) -> Stage:
    """Start stage ``experiment``: load ``params.yaml`` (from ``root``, default the repository), resolve ``profile``
    (default the active one), validate the experiment's settings, set torch's thread count to their ``threads``
    and set up precision and device (:func:`setup_stage`, which joins torchrun first, so data moved to the device
    afterwards lands on the rank's own GPU)."""
    from paperlib.experiments.common.config import active_profile, experiment_params, load_params, repo_root

    started = time.time()
    root = Path(root) if root is not None else repo_root()
    params = load_params(root / "params.yaml")
    profile = active_profile(profile, params)
    settings = experiment_params(experiment, profile, params)
    torch.set_num_threads(settings.threads)
    return Stage(started, root, params, profile, settings, setup_stage(profile, params), progress)
