"""Optimisation entering a new basin, and 2TA's reset heuristic: a synthetic example (Melis thesis §3.5.1, §3.6,
Fig. 3.6; stage ``averaging_basin``).

Fig. 3.6 shows a language-model run in which optimisation entered a new basin: the averaged loss bottoms out and
worsens slightly (the long average holds iterates from both basins, so it climbs toward the ridge between them), the
reset heuristic of Algorithm 2 detects it three evaluations later and resets both averages, and with the averages now
far too short the loss spikes, then recovers. (Alg. 2 as printed empties the short average at a reset and hands the
long one its contents; when those are stale too, the next evaluation resets again, so here both averages are empty
one evaluation after the first reset.) Nothing in our language-model runs tells when a run changes basin, so this
stage builds the situation on purpose (the seed item's fallback, "else synthetic") and runs the library's
:class:`~paperlib.averaging.TwoTailedAverage` on it unchanged.

The landscape. Parameters theta = (u, v) with u a scalar and v in R^d; the generalisation loss (§3.3's f, here
known exactly, so the "validation loss" is f itself, with no sampling) is

    f(u, v) = V(u) - V(u_B) + (lambda / 2) ||v||^2,    V(u) = a (u^2 - 1)^2 - b u.

Along u, a tilted double well: the start basin A near u = -1, a deeper basin B near u = +1 (lower by about 2b),
separated by a ridge near u = 0 (:func:`stationary_points`); subtracting V(u_B) puts the global minimum at 0. Along v,
d directions of curvature lambda in which stochastic gradient noise keeps the iterates from the bottom: the regime
where averaging pays (§3.5), and what a reset gives up. Plain SGD (``torch.optim.SGD``) follows stochastic gradients
grad f + xi, xi ~ N(0, sigma_u^2) along u and N(0, sigma_v^2) along each v; it starts at u = -1 with v drawn
N(0, init_scale^2) per coordinate, so the loss first falls as in training. Leaving A is a noise-driven (Kramers)
event whose time varies with the seed; B's barrier is higher (about a + b against a - b), so a run that enters B
stays there (the stage records whether it did, and when: :func:`entry_step`). Every E steps 2TA is evaluated (Alg. 2
with the library's default patience, the thesis' three evaluations) and the run records the raw iterate's loss, the
loss 2TA reports (its long average's, or the raw weights' where Alg. 2 falls back to them), its two lengths and
what it did.

Departures: the thesis' example is one language-model run; here the landscape is chosen, and several seeds (each its
own noise and entry time) show how often the pattern recurs. The stage runs on the CPU in float64 whatever the
``compute`` settings: a vector of a few thousand numbers gains nothing from a GPU.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from paperlib.atomic_files import write_json_atomic
from paperlib.averaging import DEFAULT_PATIENCE, TwoTailedAverage
from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.config import register_experiment
from paperlib.experiments.common.provenance import provenance
from paperlib.experiments.common.stage import results_path


@register_experiment("averaging_basin")
@dataclass(frozen=True)
class BasinParams:
    """The synthetic landscape (``dims`` = d, ``curvature`` = lambda, ``well`` = a, ``tilt`` = b), SGD's learning
    rate and gradient noise (``noise`` = sigma_v along v, ``basin_noise`` = sigma_u along u), the start's spread
    ``init_scale``, ``steps`` per run, the evaluation period ``eval_every`` (E), 2TA's ``patience`` and one run per
    seed of ``seeds``."""

    dims: int
    curvature: float
    well: float
    tilt: float
    lr: float
    noise: float
    basin_noise: float
    init_scale: float
    steps: int
    eval_every: int
    seeds: list[int]
    patience: int = DEFAULT_PATIENCE
    threads: int = 1

    def __post_init__(self) -> None:
        positive = {name: getattr(self, name) for name in ("dims", "curvature", "well", "lr", "noise", "basin_noise",
                                                             "steps", "eval_every", "patience", "threads")}
        bad = [name for name, value in positive.items() if not value > 0]
        if bad:
            raise ValueError(f"{', '.join(bad)} must be positive; got "
                             + ", ".join(f"{name} = {positive[name]}" for name in bad))
        if self.init_scale < 0:
            raise ValueError(f"init_scale must be >= 0, got {self.init_scale}")
        critical = 8 * self.well / (3 * math.sqrt(3))  # beyond this tilt basin A vanishes
        if not 0 < self.tilt < critical:
            raise ValueError(f"tilt must lie in (0, {critical:.4g}) for well = {self.well:g}, or there is no second "
                             f"basin; got {self.tilt}")
        points = stationary_points(self.well, self.tilt)
        steepest = max(self.curvature, *(4 * self.well * (3 * points[b] ** 2 - 1) for b in ("basin_a", "basin_b")))
        if self.lr * steepest >= 1:
            raise ValueError(f"lr = {self.lr} is too large for the landscape's curvature (lr x the largest curvature "
                             f"at a basin's bottom, {steepest:.3g}, must stay below 1): SGD would not settle there")
        if self.steps < 2 * self.eval_every:
            raise ValueError(f"steps ({self.steps}) must cover at least two evaluation periods ({self.eval_every})")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be a non-empty list of distinct seeds, got {self.seeds}")


def stationary_points(well: float, tilt: float) -> dict[str, float]:
    """Where V(u) = a (u^2 - 1)^2 - b u is flat (V'(u) = 4a u (u^2 - 1) - b = 0): basin A's bottom (left), the ridge,
    basin B's bottom (right), and the barriers V(ridge) - V(bottom) seen from each basin and the depth gap
    V(u_A) - V(u_B)."""
    roots = np.sort(np.roots([4 * well, 0.0, -4 * well, -tilt]).real)

    def v(u: float) -> float:
        return float(well * (u * u - 1) ** 2 - tilt * u)

    basin_a, ridge, basin_b = (float(r) for r in roots)
    return {"basin_a": basin_a, "ridge": ridge, "basin_b": basin_b, "barrier_a": v(ridge) - v(basin_a),
            "barrier_b": v(ridge) - v(basin_b), "depth_gap": v(basin_a) - v(basin_b)}


class Landscape:
    """The loss f of the module docstring, on flat vectors theta = (u, v)."""

    def __init__(self, settings: BasinParams) -> None:
        self.well, self.tilt, self.curvature = settings.well, settings.tilt, settings.curvature
        self.points = stationary_points(settings.well, settings.tilt)
        u = self.points["basin_b"]
        self.floor = self.well * (u * u - 1) ** 2 - self.tilt * u  # V(u_B), so that min f = 0

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        u, v = theta[0], theta[1:]
        return self.well * (u * u - 1) ** 2 - self.tilt * u - self.floor + 0.5 * self.curvature * (v * v).sum()

    def in_basin_b(self, theta: torch.Tensor) -> bool:
        return float(theta[0]) > self.points["ridge"]


def run_seed(settings: BasinParams, seed: int) -> dict[str, Any]:
    """One SGD run of ``settings.steps`` steps with 2TA watching (module docstring); every evaluation's record."""
    landscape = Landscape(settings)
    generator = torch.Generator().manual_seed(seed)
    start = torch.empty(settings.dims + 1, dtype=torch.float64)
    start[0] = -1.0
    start[1:] = settings.init_scale * torch.randn(settings.dims, generator=generator, dtype=torch.float64)
    theta = torch.nn.Parameter(start)
    scales = torch.full_like(start, settings.noise)
    scales[0] = settings.basin_noise
    optimizer = torch.optim.SGD([theta], lr=settings.lr)
    averager = TwoTailedAverage(extensions=True, patience=settings.patience)

    def f(vector: torch.Tensor) -> float:
        return float(landscape.loss(vector))

    record: dict[str, list] = {key: [] for key in ("step", "raw", "loss", "long_len", "short_len", "action",
                                                   "using_raw", "u", "u_reported")}
    for step in range(1, settings.steps + 1):
        optimizer.zero_grad(set_to_none=True)
        landscape.loss(theta).backward()
        theta.grad.add_(scales * torch.randn(start.shape, generator=generator, dtype=torch.float64))
        optimizer.step()
        averager.add(theta)
        if step % settings.eval_every == 0:
            with torch.no_grad():
                loss, reported, _ = averager.evaluate(f)
                record["step"].append(step)
                record["raw"].append(f(theta))
                record["loss"].append(loss)
                record["long_len"].append(averager.long_len)
                record["short_len"].append(averager.short_len)
                record["action"].append(averager.last_action)
                record["using_raw"].append(averager.using_raw)
                record["u"].append(float(theta[0]))
                record["u_reported"].append(float(reported[0]))
    return {"seed": seed, "entry": entry_step(record["step"], record["u"], landscape.points["ridge"]),
            "evaluations": record}


def entry_step(steps: list[int], u: list[float], ridge: float) -> int | None:
    """The first evaluation step from which the raw iterate lies in basin B (u beyond the ridge) at every later
    evaluation, or None if the run ends elsewhere (it never entered, or it left again)."""
    entry = None
    for step, position in zip(steps, u):
        if position > ridge:
            entry = step if entry is None else entry
        else:
            entry = None
    return entry


def run_averaging_basin(profile: str | None = None, progress: bool = True) -> Path:
    """Run every seed of experiment ``averaging_basin`` and write ``results/averaging_basin.json``."""
    from paperlib.experiments.common.config import active_profile, experiment_params, load_params, repo_root

    started = time.time()
    root = repo_root()
    params = load_params(root / "params.yaml")
    profile = active_profile(profile, params)
    settings: BasinParams = experiment_params("averaging_basin", profile, params)
    torch.set_num_threads(settings.threads)
    runs = []
    for seed in settings.seeds:
        runs.append(run_seed(settings, seed))
        if progress:
            entry = runs[-1]["entry"]
            print(f"seed {seed}: " + (f"entered basin B by step {entry}" if entry is not None
                                      else "did not settle in basin B"), flush=True)
    spec = dataclasses.asdict(settings)
    results = {"profile": profile, "settings": spec, "landscape": stationary_points(settings.well, settings.tilt),
               "runs": runs}
    out = results_path(root, "averaging_basin", profile)
    write_json_atomic(out, results)
    write_json_atomic(out.with_suffix(".provenance.json"),
                      provenance(root, profile, spec, None, started, code=code_hash(__name__)))
    return out


__all__ = ["BasinParams", "Landscape", "entry_step", "run_averaging_basin", "run_seed", "stationary_points"]
