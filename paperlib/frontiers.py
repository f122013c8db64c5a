"""Rate vs data-fit frontiers (Melis thesis §5.7): :func:`pareto_front` (non-dominated points, minimise NLL,
maximise MI), :func:`hypervolume` (the area a frontier dominates within a reference box) and :func:`nll_at_mi`
(the frontier's NLL at given MI levels, by linear interpolation)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def _as_points(nll: Sequence[float] | np.ndarray, mi: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    nll_a, mi_a = np.asarray(nll, dtype=float), np.asarray(mi, dtype=float)
    if nll_a.shape != mi_a.shape or nll_a.ndim != 1:
        raise ValueError(f"nll and mi must be 1-d arrays of the same length; got {nll_a.shape} and {mi_a.shape}")
    return nll_a, mi_a


def pareto_front(nll: Sequence[float] | np.ndarray, mi: Sequence[float] | np.ndarray) -> np.ndarray:
    """Indices of the non-dominated points (minimise NLL, maximise MI), ordered by increasing MI.

    A point is dominated if another has NLL <= and MI >= with one of them strict; of exact duplicates the first is
    kept. Non-finite points are ignored. Sorting by MI (descending) and sweeping keeps each point whose NLL is below
    every point of larger-or-equal MI seen so far: O(n log n).
    """
    nll_a, mi_a = _as_points(nll, mi)
    finite = np.flatnonzero(np.isfinite(nll_a) & np.isfinite(mi_a))
    order = finite[np.lexsort((finite, nll_a[finite], -mi_a[finite]))]  # MI desc, then NLL asc, then index
    keep: list[int] = []
    best = math.inf
    for i in order:
        if nll_a[i] < best:
            keep.append(int(i))
            best = nll_a[i]
    return np.array(keep[::-1], dtype=int)


def hypervolume(nll: Sequence[float] | np.ndarray, mi: Sequence[float] | np.ndarray,
                reference: tuple[float, float], mi_cap: float = math.inf) -> float:
    """Area of {(n, m): n <= ref_nll, ref_mi <= m <= mi_cap, dominated by some point}, reference = (ref_nll, ref_mi).

    The 2-D hypervolume indicator of the points (minimise NLL, maximise MI); points outside the box add nothing.
    ``mi_cap`` clips MI estimates from above: the true I(X, Z) cannot exceed H(X) = ln V, and estimates beyond it
    only arise from loose bounds (U^K - S^K grows with the gap of S^K). With the cap at ln V an ideal model
    (NLL = ln V at every MI) scores (ref_nll - ln V) * (ln V - ref_mi). Larger is better.
    """
    nll_a, mi_a = _as_points(nll, mi)
    ref_nll, ref_mi = reference
    if not mi_cap > ref_mi:
        raise ValueError(f"mi_cap must exceed the reference MI {ref_mi}; got {mi_cap}")
    mi_a = np.minimum(mi_a, mi_cap)
    front = pareto_front(nll_a, mi_a)
    area, covered_mi = 0.0, ref_mi
    for i in front:  # increasing MI, hence increasing NLL
        width = ref_nll - nll_a[i]
        if width <= 0.0 or mi_a[i] <= covered_mi:
            continue
        area += width * (mi_a[i] - covered_mi)
        covered_mi = mi_a[i]
    return float(area)


def nll_at_mi(front_mi: Sequence[float] | np.ndarray, front_nll: Sequence[float] | np.ndarray,
              levels: Sequence[float] | np.ndarray) -> np.ndarray:
    """NLL of a frontier at MI ``levels``, linearly interpolated between its points (sorted by MI).

    Below the frontier's smallest MI the NLL of that point applies (it reaches that level too); above its largest MI
    the level is not reached and the result is NaN.
    """
    nll_a, mi_a = _as_points(front_nll, front_mi)
    levels_a = np.asarray(levels, dtype=float)
    if mi_a.size == 0:
        return np.full(levels_a.shape, np.nan)
    order = np.argsort(mi_a, kind="stable")
    mi_s, nll_s = mi_a[order], nll_a[order]
    if np.any(np.diff(mi_s) <= 0) or np.any(np.diff(nll_s) < 0):
        raise ValueError("front_mi/front_nll must be a Pareto frontier: distinct MI values, NLL non-decreasing in MI")
    return np.interp(levels_a, mi_s, nll_s, left=nll_s[0], right=np.nan)
