"""A setting picked at an end of the values it was tuned over: the optimum then lies at or beyond the end, not
bracketed, and a verdict resting on that setting says so.

One test and one phrase for every place the evidence reports it (the music and dynamic-evaluation learning-rate
grids, the averaging baselines' grids, the tuning studies' ranges). Pure Python, like the claims.
"""

from __future__ import annotations

from collections.abc import Iterable


def grid_end(value: float, tried: Iterable[float]) -> str | None:
    """``"largest"`` or ``"smallest"`` when ``value`` is at (or past) that end of ``tried``, the values it was picked
    from (a grid, or a range's two ends); None inside them, or when fewer than two distinct values were tried
    (nothing to bracket)."""
    values = sorted(set(tried))
    if len(values) < 2:
        return None
    if value >= values[-1]:
        return "largest"
    if value <= values[0]:
        return "smallest"
    return None


def not_bracketed(value: float, tried: Iterable[float], what: str = "tried") -> str:
    """``"0.1 (the largest of 0.01–0.1 tried: optimum not bracketed)"`` for a ``value`` at an end of ``tried``
    (:func:`grid_end`; ``"above the largest"`` / ``"below the smallest"`` past it); ``""`` otherwise. ``what`` says
    what the values were (``"tried"``, ``"allowed"``)."""
    values = sorted(set(tried))
    end = grid_end(value, values)
    if end is None:
        return ""
    past = value > values[-1] or value < values[0]
    place = ("above the " if end == "largest" else "below the ") if past else "the "
    span = f"{values[0]:g} to {values[-1]:g}" if values[0] < 0 else f"{values[0]:g}–{values[-1]:g}"
    return f"{value:g} ({place}{end} of {span} {what}: optimum not bracketed)"


__all__ = ["grid_end", "not_bracketed"]
