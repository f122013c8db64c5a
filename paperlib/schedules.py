"""Learning-rate schedules that know the budget (beyond the seeds, whose runs keep a constant rate).

For runs of minutes the schedule matters as much as the peak rate: a linear warm-up, then a decay to the end of
the budget (cosine or linear, as nanoGPT and most short-budget recipes do), or the plateau rule of pytorch/examples'
word_language_model (the rate divided after an evaluation without a new best, applied by the trainer).
"""

from __future__ import annotations

import math

SCHEDULES = ("constant", "cosine", "linear", "plateau")


def schedule_factor(schedule: str, progress: float, warmup: float = 0.0, final_lr: float = 0.0) -> float:
    """The learning-rate multiplier at ``progress`` (the fraction of the budget used, in [0, 1]).

    ``constant`` and ``plateau`` (whose drops the trainer applies at evaluations) give 1; ``cosine`` and
    ``linear`` rise linearly over the first ``warmup`` fraction, then fall from 1 to ``final_lr`` at the end.
    """
    if schedule in ("constant", "plateau"):
        return 1.0
    progress = min(max(progress, 0.0), 1.0)
    if progress < warmup:
        return progress / warmup
    decay = (progress - warmup) / (1.0 - warmup)  # 0 -> 1 over the rest of the budget
    shape = 0.5 * (1.0 + math.cos(math.pi * decay)) if schedule == "cosine" else 1.0 - decay
    return final_lr + (1.0 - final_lr) * shape
