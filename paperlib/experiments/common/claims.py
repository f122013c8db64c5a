"""Claims: what a seed says, judged on our results, in one verdict vocabulary.

An experiment declares each seed item's claim once, as a :class:`Claim` made of :class:`Part` s; each part
names the numbers it compares, the direction the seed expects and its tie rule (the margin and where it comes
from). The results index and the notebooks only display claims; neither judges.

Vocabulary. A part's verdict is one of :data:`PART_VERDICTS`; a claim's (and an index row's) word follows from its
parts by one rule, :func:`verdict_word`. One directional comparison is read by :func:`direction_word`. The index's
row words are :data:`VERDICTS`, which add the words for rows that judge nothing.

This module is pure Python (no torch), so the index can read the vocabulary without loading a model.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Any, Sequence

VERDICTS = ("reproduced", "partly", "within noise", "not reproduced", "not attempted", "diagram", "encoded",
            "pending")
PART_VERDICTS = ("reproduced", "partly reproduced", "within noise", "not reproduced")


def verdict_word(parts: Sequence[str | bool]) -> str:
    """A claim's one-word verdict from its parts' verdicts, the one rule: every part reproduced -> "reproduced";
    no part reproduced, even partly, and every part within noise -> "within noise"; no part reproduced, even
    partly, and some part not reproduced -> "not reproduced"; otherwise "partly".

    A part is a bool (held or not) or one of :data:`PART_VERDICTS` ("partly" is read as "partly reproduced").
    """
    words = []
    for part in parts:
        word = ("reproduced" if part else "not reproduced") if isinstance(part, bool) else part
        word = "partly reproduced" if word == "partly" else word
        if word not in PART_VERDICTS:
            raise ValueError(f"part verdict {part!r} must be a bool or one of {', '.join(PART_VERDICTS)}")
        words.append(word)
    if not words:
        raise ValueError("a verdict needs at least one judged part")
    if all(w == "reproduced" for w in words):
        return "reproduced"
    if not any(w in ("reproduced", "partly reproduced") for w in words):
        return "within noise" if all(w == "within noise" for w in words) else "not reproduced"
    return "partly"


def part_word(parts: Sequence[str | bool]) -> str:
    """:func:`verdict_word` as a part's verdict (one of :data:`PART_VERDICTS`): a claim judged over several
    comparisons."""
    word = verdict_word(parts)
    return "partly reproduced" if word == "partly" else word


def direction_word(gap: float | None, margin: float | None) -> str:
    """One directional comparison as a part verdict. ``gap`` is signed so that positive is the paper's direction;
    ``margin`` is its tie margin (None: not measurable, e.g. one seed). Beyond the margin the paper's way ->
    "reproduced"; the paper's way but inside the margin, or without one -> "within noise"; the other way (at any
    size) or no gap -> "not reproduced"."""
    if gap is None or not math.isfinite(gap) or gap <= 0:
        return "not reproduced"
    return "reproduced" if margin is not None and gap > margin else "within noise"


def strict_word(gap: float | None) -> str:
    """A comparison judged by strict inequality, for deterministic measurements with no noise to tie within (one
    trained model, evaluated without sampling): the paper's way by any amount -> "reproduced", else "not
    reproduced". ``gap`` is signed as in :func:`direction_word`."""
    return "reproduced" if gap is not None and math.isfinite(gap) and gap > 0 else "not reproduced"


LADDER_WORDS = ("reproduced", "trend toward the claim", "no trend", "trend against")


def ladder_word(rungs: Sequence[tuple[float, float]]) -> str:
    """A scale ladder's reading, from (gap, standard error) per rung in budget order, the gap signed
    positive in the paper's direction: the top rung beyond twice its standard error -> "reproduced"; else the
    change of the gap from the first rung to the top, against twice its standard error: toward the paper ->
    "trend toward the claim", away -> "trend against", inside -> "no trend"."""
    if len(rungs) < 2:
        raise ValueError(f"a ladder needs at least two rungs, got {len(rungs)}")
    (first, first_se), (top, top_se) = rungs[0], rungs[-1]
    if top > 2 * top_se:
        return "reproduced"
    change, noise = top - first, 2 * math.sqrt(first_se ** 2 + top_se ** 2)
    if change > noise:
        return "trend toward the claim"
    return "trend against" if change < -noise else "no trend"


def check_ladder(rungs: Sequence[int], seeds: Sequence[int], workers: int) -> None:
    """The settings every ladder shares: at least two increasing step budgets (at least 4 steps, so three quarters
    of a rung is a step of its own), at least two distinct seeds (the tie margin is their spread), a worker."""
    if len(rungs) < 2 or any(not isinstance(r, int) or r < 4 for r in rungs) \
            or any(b <= a for a, b in zip(rungs, rungs[1:])):
        raise ValueError(f"rungs must be at least two increasing step counts of at least 4, got {list(rungs)}")
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be at least two distinct seeds (the tie margin is their spread), "
                         f"got {list(seeds)}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")


def scoring_steps(rungs: Sequence[int]) -> list[int]:
    """Where a ladder's runs are scored: every rung and three quarters of the way into it (for :func:`convergence`)."""
    return sorted({s for r in rungs for s in (r - r // 4, r)})


def paired_bootstrap(after: Sequence[float], before: Sequence[float], weights: Sequence[float],
                     resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """(gap, standard error): the ``weights``-weighted mean of ``after − before`` over paired units (songs, blocks of
    a test text: each unit's mean loss or log-likelihood, weighted by its frames or tokens), and the standard
    deviation of that mean over ``resamples`` bootstrap resamples of the units, drawn with replacement by a seeded
    generator. One unit gives no spread: the standard error is infinite."""
    if not (len(after) == len(before) == len(weights)) or not weights:
        raise ValueError(f"need one value per unit in each list, got {len(after)}, {len(before)}, {len(weights)}")
    gaps = [a - b for a, b in zip(after, before)]
    gap = sum(g * w for g, w in zip(gaps, weights)) / sum(weights)
    if len(gaps) < 2:
        return gap, math.inf
    rng = random.Random(seed)
    units = range(len(gaps))
    means = []
    for _ in range(resamples):
        pick = rng.choices(units, k=len(gaps))
        means.append(sum(gaps[i] * weights[i] for i in pick) / sum(weights[i] for i in pick))
    return gap, statistics.stdev(means)


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error (sample standard deviation / sqrt(n)) of at least two values (seeds)."""
    return statistics.fmean(values), statistics.stdev(values) / math.sqrt(len(values))


def mean_margin(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean over seeds and its tie margin, twice its standard error (:func:`mean_se`); None with one seed."""
    if len(values) < 2:
        return statistics.fmean(values), None
    mean, se = mean_se(values)
    return mean, 2 * se


def difference_margin(worse: Sequence[float], better: Sequence[float]) -> tuple[float, float | None]:
    """(gap, margin) of two models' seed values: the mean of ``worse`` minus the mean of ``better`` (positive: the
    paper's direction when ``better`` should have the lower loss), and the seed margin, twice the standard error of
    that difference, 2·√(s₁²/n₁ + s₂²/n₂); None when either has one seed."""
    gap = statistics.fmean(worse) - statistics.fmean(better)
    if len(worse) < 2 or len(better) < 2:
        return gap, None
    return gap, 2 * math.hypot(mean_se(worse)[1], mean_se(better)[1])


def convergence(values_at_three_quarters: Sequence[float], values_at_rung: Sequence[float]) -> dict[str, Any]:
    """Whether a loss had stopped falling over a ladder rung's last quarter: per seed, the fall from three quarters
    into the rung to its end; converged when the mean fall is at most twice its standard error (a fall within the
    seeds' noise; a rise counts as converged). Pass a score that grows while learning negated."""
    falls = [a - b for a, b in zip(values_at_three_quarters, values_at_rung)]
    if len(falls) < 2:
        raise ValueError(f"convergence needs at least two seeds, got {len(falls)}")
    mean, margin = mean_margin(falls)
    return {"fall": mean, "margin": margin, "converged": mean <= margin}


def ladder_part(word: str, top_gap: float | None) -> str:
    """A ladder reading as a part verdict, the one rule for every ladder: "reproduced" stays so; a trend toward
    the claim is partly reproduced; a trend against it is not reproduced; with no trend the ladder reads as its top
    rung's comparison (:func:`direction_word` without a margin, since a top rung beyond its margin would have read
    "reproduced"): the paper's way -> "within noise", else "not reproduced". ``top_gap`` is the top rung's gap,
    signed positive in the paper's direction."""
    if word not in LADDER_WORDS:
        raise ValueError(f"ladder reading {word!r} must be one of {', '.join(LADDER_WORDS)}")
    if word == "no trend":
        return direction_word(top_gap, None)
    return {"reproduced": "reproduced", "trend toward the claim": "partly reproduced",
            "trend against": "not reproduced"}[word]


# Every way a part is judged, with what it means; a part names its rule's kind (or several joined by " + " when it
# combines comparisons judged differently), and the results index prints this table in its header.
RULE_KINDS = {
    "seed margin": "A beats B by more than twice the standard error over seeds: of the difference of two seed means, "
                   "2·√(s₁²/n₁ + s₂²/n₂), or of a per-seed difference; inside it the paper's way is within noise; with "
                   "one seed there is no margin and the paper's way is within noise",
    "sampling margin": "as a seed margin, with the standard error over evaluated positions of one model instead of "
                       "over seeds",
    "bootstrap margin": "A beats B by more than twice the standard error of the mean paired difference under a "
                        "bootstrap over the units both were evaluated on (blocks of a test or validation text, test songs, "
                        "independent test sequences); "
                        "inside it the paper's way is within noise",
    "hypervolume tie": "a normalised hypervolume beats another by more than the fixed tie; on PTB, the seed margin the "
                       "budget ladder measured for the same two curves at the stage's budget where it did",
    "fixed margin": "A beats B by more than a fixed margin that stands in for a spread one run cannot measure (one "
                    "trajectory, one seed per grid point)",
    "strict": "A beats B by any amount: one model evaluated deterministically, no spread to tie within",
    "threshold": "a number that gives the paper's words a meaning (solved, on par, negligible, close, near-optimal, "
                 "low, uses its noise), met or not",
    "count": "a property checked on every element, or a count of them (every evaluation, at least one, none, an "
             "order kept)",
    "ladder reading": "a budget ladder read by ladder_word and ladder_part: the top rung beyond its seed margin; else a "
                      "trend toward the claim (partly), a trend against (not), or no trend read as the top rung's "
                      "comparison",
}


def check_kind(kind: str) -> None:
    """``kind`` is one of :data:`RULE_KINDS`, or several joined by " + "."""
    unknown = [k for k in kind.split(" + ") if k not in RULE_KINDS]
    if not kind or unknown:
        raise ValueError(f"rule kind {kind!r} must be one of {', '.join(RULE_KINDS)} (or several joined by ' + ')")


@dataclass(frozen=True)
class Part:
    """One judged comparison of a claim.

    ``label`` is a few words for the index's reason column; ``claim`` says what the seed claims in a sentence;
    ``evidence`` gives our compared numbers (never a verdict word); ``rule`` states the comparison's direction and
    tie rule with the margin's source; ``verdict`` is one of :data:`PART_VERDICTS`; ``corpus`` names the data when
    a claim spans several; ``kind`` names the rule's kind in :data:`RULE_KINDS` (required).
    """

    label: str
    claim: str
    verdict: str
    evidence: str
    rule: str
    corpus: str | None = None
    kind: str = ""

    def __post_init__(self) -> None:
        check_kind(self.kind)
        if self.verdict not in PART_VERDICTS:
            raise ValueError(f"part verdict {self.verdict!r} must be one of {', '.join(PART_VERDICTS)}")
        if any(word in self.evidence for word in ("reproduced", "within noise")):
            raise ValueError(f"evidence must not repeat a verdict word: {self.evidence!r}")


class Unjudged(KeyError):
    """A claim none of whose parts can be judged on the results at hand (a KeyError, as for a missing result)."""


@dataclass(frozen=True)
class Claim:
    """A seed item's claim as judged parts; its verdict follows from theirs (:func:`verdict_word`)."""

    item: str
    parts: tuple[Part, ...]
    not_run: tuple[str, ...] = ()  # labels of parts the profile's settings leave unjudged (e.g. a sweep cut short)

    def __post_init__(self) -> None:
        if not self.parts:
            raise Unjudged(f"claim {self.item}: no part can be judged on these results"
                           + (f" (not run: {', '.join(self.not_run)})" if self.not_run else ""))

    @property
    def verdict(self) -> str:
        """:func:`verdict_word` over the parts; a claim whose judged parts all hold but that left some unrun is
        only "partly" reproduced."""
        word = verdict_word([p.verdict for p in self.parts])
        return "partly" if word == "reproduced" and self.not_run else word

    @property
    def note(self) -> str:
        return f"not run: {', '.join(self.not_run)}" if self.not_run else ""

    def text(self) -> str:
        """The index's verdict text: "<word>: <label>: <part verdict> (<evidence>); ..." (+ what was not run)."""
        parts = "; ".join(f"{p.label}{_corpus(p)}: {p.verdict} ({p.evidence})" for p in self.parts)
        return f"{self.verdict}: {parts}" + (f"; {self.note}" if self.note else "")

    def rows(self) -> list[dict[str, str]]:
        """One plain row per part, for a notebook's table."""
        return [{"item": self.item, "corpus": p.corpus or "", "claim": p.claim, "verdict": p.verdict,
                 "ours": p.evidence, "rule": p.rule} for p in self.parts]


def _corpus(part: Part) -> str:
    return f" ({part.corpus})" if part.corpus else ""
