"""Melis thesis ch. 3's numbers for Two-Tailed Averaging (§3.6, Fig. 3.3), for display beside ours (data; imports
nothing). Best validation loss in nats per token of the thesis' PTB model; of tuned TA and EMA the thesis says only
that they come very close to 2TA."""

from __future__ import annotations

AVERAGING_BEST_LOSS: dict[str, float] = {"2ta": 3.92, "2ta_training_loss_switching": 3.93, "raw": 4.02}
