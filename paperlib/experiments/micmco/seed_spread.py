"""The seed spread a MICMCO budget ladder measured for a hypervolume gap at the main stage's own budget, and whether
it may stand in for the fixed hypervolume tie when the stage's comparison of the same two curves is judged.

The stage trains one seed, so its gap is one draw: the noise it carries is the spread of one seed's gap, the
standard deviation of the ladder's per-seed gaps, not the standard error of their mean (which is √seeds smaller and
is what the ladder's own rungs are judged by). Twice that deviation, and never less than the tie, is the margin, and
only where the ladder's rung repeated the stage's run: the same training settings, the same number of trials, all
from the same start design. Where it did not (at ``cpu`` the stage adds trials from the GP sampler that the ladder
does not run), the spread is shown beside the tie and the tie decides.

Pure Python: read by the synthetic and the PTB claims alike.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Spread:
    """The seed spread of one gap at the main stage's budget, as the budget ladder measured it."""

    two_sd: float  # twice the standard deviation of one seed's gap over the ladder's seeds
    margin: float  # the larger of two_sd and the tie: what the stage's one-seed gap must exceed, where it applies
    seeds: int
    steps: int
    differs: str  # how the ladder's rung differs from the stage's run ("" when it repeated it exactly)

    @property
    def applies(self) -> bool:
        """The spread replaces the tie: the rung repeated the stage's run."""
        return not self.differs

    def shown(self, tie: float) -> str:
        """"twice the spread (sd) of one seed's gap over 3 seeds at 150 steps in the budget ladder: 0.0220, <use>"
        (the seeds counted are those with a finite gap)."""
        use = (f"the margin here{'' if self.margin == self.two_sd else f' (raised to the {tie} tie)'}"
               if self.applies else f"shown beside the {tie} tie, not in its place: {self.differs}")
        return (f"twice the spread (sd) of one seed's gap over {self.seeds} seeds at {self.steps:,} steps in the "
                f"budget ladder: {self.two_sd:.4f}, {use}")


def standing_in(spread: Spread | None) -> float | None:
    """The margin a comparison is judged against in place of the tie: the spread's, where it applies; else None (the
    tie decides)."""
    return spread.margin if spread is not None and spread.applies else None


def differences(results: Mapping[str, Any], ladder: Mapping[str, Any]) -> list[str]:
    """How the ladder's rungs differ from the stage's run, besides their budget: the number of trials per curve,
    the stage's trials from the GP sampler (the ladder's all come from the Halton start design), and any training
    setting the ladder records with another value than the stage's settings."""
    st, out = results.get("settings", {}), []
    trials, startup = st.get("trials"), st.get("startup_trials")
    theirs = ladder.get("settings", {}).get("trials")
    if theirs != trials:
        out.append(f"the ladder tunes {theirs if theirs is not None else 'an unrecorded number of'} trials per "
                   f"curve, the stage {trials if trials is not None else 'an unrecorded number'}")
    if trials is not None and startup is None:
        out.append("the stage's trial design is not recorded")
    elif trials is not None and startup < trials:
        out.append(f"the ladder's trials all come from the Halton start design, the stage's last {trials - startup} "
                   f"of {trials} from the GP sampler")
    out += [f"its {k} is {v}, the stage's {st.get(k)}" for k, v in ladder.get("training", {}).items()
            if st.get(k) != v]
    return out


def ladder_spreads(results: Mapping[str, Any], ladder: Mapping[str, Any] | None, tie: float
                   ) -> dict[tuple[str, str], Spread]:
    """(better curve, worse curve) -> the spread the budget ladder (same profile) measured for the gap between those
    two curves at the stage's budget, for each of its "better" ladders with a rung there whose gap at least two seeds
    measured. A caller whose gap is taken on another reference than the ladder's adds that to ``differs``."""
    st = results.get("settings", {})
    if not ladder or ladder.get("profile") != results.get("profile") or "steps" not in st:
        return {}
    steps, differs, out = st["steps"], "; ".join(differences(results, ladder)), {}
    for entry in ladder.get("ladders", {}).values():
        if entry.get("kind") != "better":
            continue
        rung = next((r for r in entry.get("rungs", []) if r.get("steps") == steps), None)
        gaps = [g for g in (rung or {}).get("per_seed", []) if isinstance(g, (int, float)) and math.isfinite(g)]
        if len(gaps) < 2:
            continue
        two_sd = 2 * statistics.stdev(gaps)
        out[tuple(entry["curves"][:2])] = Spread(two_sd, max(two_sd, tie), len(gaps), steps, differs)
    return out
