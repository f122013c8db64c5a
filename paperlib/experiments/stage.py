"""What every stage (and every worker process of one) does first: settle precision and device from ``params.yaml``.

``params.yaml``'s ``compute`` section (:class:`ComputeParams`) names the device request and, per profile, the
precision and host-sync period; :func:`setup_stage` applies them with :func:`paperlib.device.configure` and
returns the device :func:`paperlib.device.resolve_device` picks, after joining torchrun's process group
(:func:`stage_device`). The policy itself, usable without a compendium, is :mod:`paperlib.device`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from paperlib.device import COMPILE_MODES, PRECISIONS, parse_device, configure, resolve_device
from paperlib.experiments.config import PROFILES, register_section


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
    from paperlib.experiments.config import ParamsError, load_params, section_params

    try:
        params = params if params is not None else load_params()
    except ParamsError:  # outside a compendium (a user's own script): the defaults
        return ComputeParams()
    return section_params("compute", params)


def setup_stage(profile: str | None = None, params: dict[str, Any] | None = None,
                requested: str | torch.device | None = None) -> torch.device:
    """What every stage (and every worker process of one) calls first: set the precision, sync period and
    compilation mode of ``profile`` (default: the active one) and return the stage's device."""
    from paperlib.experiments.config import ParamsError, active_profile, load_params

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
