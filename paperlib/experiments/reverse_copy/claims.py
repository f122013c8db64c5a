"""The thesis' claims about the reverse-copy task (Melis §2.3.3, Fig. 2.4a; index row M-F2.4), judged on the stage's
results (``results/reverse_copy.json``) as one :class:`~paperlib.experiments.common.claims.Claim`; the stage, the results
index and the notebook all take the verdict from :func:`claim`. Pure Python (no torch).

Our lengths are shorter than the thesis' 50-200: the shorter half of ours stands for its 50 and 100, the longer
half for its 150 and 200 (with an odd count the middle length belongs to neither). Each part is judged per length
and the lengths' verdicts are combined by :func:`~paperlib.experiments.common.claims.part_word`:

- "both models solve the shortest lengths": both mean test cross-entropies (over the seeds) below
  :data:`SOLVED_NATS` at a length;
- "the Mogrifier is better at the longest lengths": the LSTM's mean test cross-entropy minus the Mogrifier's, beyond
  the seed margin, twice the standard error of that difference over the seeds of each model's validation-best grid
  point (:func:`~paperlib.experiments.common.claims.difference_margin`, :func:`~paperlib.experiments.common.claims.direction_word`;
  with one seed there is no margin and the Mogrifier's way is within noise);
- "the Mogrifier picks a smaller embedding at the longest lengths": judged only where both models' embedding sizes
  were tuned (more than one in the grid), else listed as not run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from paperlib.experiments.common.claims import Claim, Part, difference_margin, direction_word, part_word, strict_word
from paperlib.reference.reverse_copy import REVERSE_COPY

ITEM = "M-F2.4"
MODELS = ("lstm", "mogrifier")
SOLVED_NATS = 0.05  # per-token cross-entropy (nats) below which a length counts as solved ("solve the task perfectly")

SOLVED = "both models solve the shortest lengths"
BETTER = "the Mogrifier is better at the longest lengths"
EMBEDDING = "the Mogrifier picks a smaller embedding at the longest lengths"


def thesis_lengths(key: str) -> str:
    """The thesis' lengths under ``key`` of :data:`~paperlib.reference.reverse_copy.REVERSE_COPY`, "a and b"."""
    return " and ".join(map(str, REVERSE_COPY[key]))


def _embeddings() -> str:
    """The thesis' tuned embedding sizes of the Mogrifier and the LSTM at the shorter of its long lengths."""
    length = str(REVERSE_COPY["mogrifier_better"][0])
    best = REVERSE_COPY["best_embedding_hidden"]
    return f"{best['mogrifier'][length][0]} vs {best['lstm'][length][0]} at {length} steps"


def halves(lengths: Sequence[int]) -> tuple[list[int], list[int]]:
    """The shorter and the longer half of ``lengths`` (sorted; an odd count leaves the middle one out)."""
    ordered, half = sorted(lengths), len(lengths) // 2
    return ordered[:half], ordered[len(ordered) - half:]


def _seed_values(results: Mapping[str, Any]) -> dict[str, dict[int, list[float]]]:
    """Per model and length, the test cross-entropy of every seed of the validation-best grid point (one value, the
    reported one, for results without ``cross_entropy_seeds``)."""
    seeds = results.get("cross_entropy_seeds") or {m: [[x] for x in results["cross_entropy"][m]] for m in MODELS}
    return {m: dict(zip(results["lengths"], seeds[m])) for m in MODELS}


def _values(values: Sequence[float]) -> str:
    """One seed's value, or the seeds' mean with their range."""
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{sum(values) / len(values):.3f} ({min(values):.3f}–{max(values):.3f})"


def claim(results: Mapping[str, Any]) -> Claim:
    """M-F2.4 judged on a reverse-copy results dictionary (``lengths``, ``cross_entropy`` and
    ``cross_entropy_seeds``, ``best``, ``settings``)."""
    short, long = halves(results["lengths"])
    ce = {m: dict(zip(results["lengths"], results["cross_entropy"][m])) for m in MODELS}
    seeds = _seed_values(results)
    count = min(len(v) for m in MODELS for v in seeds[m].values())
    parts, not_run = [], []
    if short:
        parts.append(Part(
            label=SOLVED, claim=f"both models solve lengths {thesis_lengths('solved_by_both')} (our shorter half)",
            verdict=part_word([all(ce[m][n] < SOLVED_NATS for m in MODELS) for n in short]),
            evidence="; ".join(f"{n}: LSTM {_values(seeds['lstm'][n])}, Mogrifier {_values(seeds['mogrifier'][n])} nats"
                               for n in short),
            rule=f"solved: both mean test cross-entropies over the seeds below {SOLVED_NATS} nats per token; judged "
                 "per length",
            kind="threshold"))
    if long:
        gaps = {n: difference_margin(seeds["lstm"][n], seeds["mogrifier"][n]) for n in long}
        parts.append(Part(
            label=BETTER, claim=f"the Mogrifier is considerably better at lengths {thesis_lengths('mogrifier_better')} (our "
                               "longer half)",
            verdict=part_word([direction_word(g, m) for g, m in gaps.values()]),
            evidence="; ".join(f"{n}: LSTM {_values(seeds['lstm'][n])} vs Mogrifier {_values(seeds['mogrifier'][n])} "
                               f"nats (LSTM − Mogrifier {g:+.3f}" + (f", margin {m:.3f})" if m is not None else ")")
                               for n, (g, m) in gaps.items()) + f"; {count} seed{'s' if count > 1 else ''} per model",
            rule="per length, LSTM minus Mogrifier mean test cross-entropy beyond the seed margin, twice the standard "
                 "error of the difference over seeds; one seed: no margin, the Mogrifier's way is within noise",
            kind="seed margin"))
        tuned = all(len(results["settings"]["models"][m]["embedding_sizes"]) > 1 for m in MODELS)
        if tuned:
            sizes = {n: {m: results["best"][m][str(n)]["embedding_size"] for m in MODELS} for n in long}
            parts.append(Part(
                label=EMBEDDING, claim=f"the Mogrifier's tuned embedding is much smaller ({_embeddings()})",
                verdict=part_word([strict_word(s["lstm"] - s["mogrifier"]) for s in sizes.values()]),
                evidence="; ".join(f"{n}: Mogrifier {s['mogrifier']} vs LSTM {s['lstm']}" for n, s in sizes.items()),
                rule="per length, the validation-best Mogrifier's embedding size below the LSTM's", kind="strict"))
        else:
            not_run.append("embedding sizes not tuned")
    return Claim(ITEM, tuple(parts), tuple(not_run))


def record(results: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`claim` as the stage writes it into its results (``claims``): the verdict and one row per part."""
    judged = claim(results)
    return {"item": judged.item, "verdict": judged.verdict, "parts": judged.rows(), "not_run": list(judged.not_run)}


__all__ = ["ITEM", "SOLVED_NATS", "claim", "halves", "record", "thesis_lengths"]
