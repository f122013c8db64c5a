"""How the dynamic-evaluation claims compare two numbers (:mod:`paperlib.experiments.dynamic_evaluation.claims`, where
the tie rules are explained): strictly, by a paired bootstrap over blocks of the test or validation text, or by a
bootstrap over independent test sequences; each returns a :class:`~paperlib.experiments.common.claims.Part`."""

from __future__ import annotations

from typing import Any, Mapping

from paperlib.experiments.common.claims import Part, direction_word, paired_bootstrap, part_word, strict_word

Results = Mapping[str, Any]

STRICT = "lower perplexity (or loss) wins by any amount: one model, deterministic evaluation, no spread to tie within"


def fmt(x: float, digits: int = 1) -> str:
    return f"{x:,.{digits}f}"


def strict_part(label: str, claim: str, gap: float, evidence: str, corpus: str | None = None) -> Part:
    """A part judged by strict inequality; ``gap`` > 0 is the thesis' direction."""
    return Part(label=label, claim=claim, verdict=strict_word(gap), evidence=evidence, rule=STRICT, corpus=corpus,
                kind="strict")


def within_allowance(gap: float, two_se: float, allowed: float) -> tuple[str, str]:
    """A "no difference" reading against an allowance (RMSprop identical to SGD, on par, no noticeable advantage):
    the word, and a note where the margin alone is as large as the allowance (no difference could then be shown
    within it: "within noise" is the most the part can read with this many blocks). Reproduced: ``|gap|`` plus the
    margin (``two_se``) within ``allowed``; not reproduced: beyond both; else within noise."""
    if abs(gap) + two_se <= allowed:
        word = "reproduced"
    elif abs(gap) > two_se and abs(gap) > allowed:
        word = "not reproduced"
    else:
        word = "within noise"
    note = (f"; the margin alone ({two_se:.4f}) is not below the {allowed:.4f}-nat allowance: with these blocks no "
            "difference, however small, can be shown to lie within it, so this part cannot hold at this scale"
            if two_se >= allowed else "")
    return word, note


BOOTSTRAP = ("lower test loss beyond the margin: twice the standard error of the mean per-token loss difference under "
             "a paired bootstrap over blocks of the test text (2,000 resamples); the paper's way inside it is within "
             "noise")


def compared(label: str, claim: str, table: Results, better: str, worse: str, evidence: str) -> Part:
    """``better`` beats ``worse`` on the test text: with per-block losses, by the paired bootstrap's margin (in
    nats per token; the evidence adds the gap and margin); without them, strictly on the perplexities."""
    rows = {r["key"]: r for r in table["rows"]}
    if "test_blocks" not in rows[better] or "test_blocks" not in rows[worse]:
        return strict_part(label, claim, rows[worse]["test_ppl"] - rows[better]["test_ppl"], evidence)
    gap, se = paired_bootstrap(rows[worse]["test_blocks"], rows[better]["test_blocks"], table["test_block_tokens"])
    return Part(label=label, claim=claim, verdict=direction_word(gap, 2 * se),
                evidence=f"{evidence} (gap {gap:+.4f} nats per token, margin {2 * se:.4f} over "
                         f"{len(table['test_block_tokens'])} blocks)", rule=BOOTSTRAP, kind="bootstrap margin")


VALID_BOOTSTRAP = ("lower validation loss beyond the margin: twice the standard error of the mean per-token loss "
                   "difference under a paired bootstrap over blocks of the validation prefix (2,000 resamples; η is "
                   "chosen on the same text, as in the thesis); the paper's way inside it is within noise")


def study_part(label: str, claim: str, study: Results, pairs: list[tuple[Results, Results]], evidence: str) -> Part:
    """A chapter-5 study's part made of (better row, worse row) comparisons of validation perplexity: with per-block
    validation losses, each by the paired bootstrap's margin and the part's word from theirs
    (:func:`~paperlib.experiments.common.claims.part_word`); without them, strictly on the smallest gap."""
    if "valid_block_tokens" not in study or not all("valid_blocks" in r for pair in pairs for r in pair):
        return strict_part(label, claim, min(w["valid_ppl"] - b["valid_ppl"] for b, w in pairs), evidence)
    judged = [paired_bootstrap(w["valid_blocks"], b["valid_blocks"], study["valid_block_tokens"]) for b, w in pairs]
    words = [direction_word(gap, 2 * se) for gap, se in judged]
    gap, se = min(judged, key=lambda g: g[0] - 2 * g[1])  # the comparison closest to failing
    held = sum(w == "reproduced" for w in words)
    return Part(label, claim, part_word(words),
                f"{evidence} ({held} of {len(words)} comparison{'s' if len(words) > 1 else ''} beyond the margin; "
                f"closest: gap {gap:+.4f} nats per token, margin {2 * se:.4f}; {len(study['valid_block_tokens'])} "
                "blocks)", rule=VALID_BOOTSTRAP, kind="bootstrap margin")


SEQUENCES = ("beyond the margin: twice the standard error of the mean over the independent test sequences under a "
             "bootstrap of the sequences (2,000 resamples; each sequence's own curve, or its words weighted by their "
             "count); the paper's way inside it is within noise")


def over_sequences(label: str, claim: str, after: list[float], before: list[float], weights: list[float],
                   evidence: str) -> Part:
    """``after`` above ``before`` (per sequence) by the bootstrap over the sequences' margin."""
    gap, se = paired_bootstrap(after, before, weights)
    return Part(label, claim, direction_word(gap, 2 * se),
                f"{evidence} ({gap:+.4f} nats, margin {2 * se:.4f} over {len(weights)} sequences)", rule=SEQUENCES,
                kind="bootstrap margin")


__all__ = ["BOOTSTRAP", "SEQUENCES", "STRICT", "VALID_BOOTSTRAP", "compared", "fmt", "over_sequences", "strict_part",
           "study_part"]
