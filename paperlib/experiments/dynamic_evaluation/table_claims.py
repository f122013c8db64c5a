"""Krause ch. 4's Tables 4.1/4.2 judged on ``results/dyneval.json`` (the tie rules are
:mod:`paperlib.experiments.dynamic_evaluation.claims`'s): every rule beats static, each contribution improves on the
rule before it, the final rule beats the neural cache, and on WikiText-2 the final rule's lead over the cache is
larger than on PTB ("This improvement is especially pronounced on WikiText-2", §4.7.1)."""

from __future__ import annotations

import math
from typing import Any, Mapping

from paperlib.experiments.common.claims import Claim, Part, direction_word, paired_bootstrap
from paperlib.experiments.dynamic_evaluation.comparisons import compared, fmt, strict_part
from paperlib.reference.dynamic_evaluation import DYNEVAL_TABLES

Results = Mapping[str, Any]

# The dynamic-evaluation rules of Tables 4.1/4.2 (keys of the results' rows), in the tables' order.
DYNAMIC_RULES = ("traditional_sgd", "sgd", "sgd_decay", "global_rms_decay", "global_rms_rms_decay")
TABLE_ITEMS = {"ptb": "K-T4.1", "wikitext2": "K-T4.2"}


# Tables 4.1/4.2's chain of contributions after traditional dynamic evaluation: (label, rule before, rule after, what
# the step adds). Table 4.1's caption: "Each of our other contributions leads to further improvements."
CONTRIBUTIONS = (
    ("segments help", "traditional_sgd", "sgd", "SGD on segments of n tokens instead of one"),
    ("the decay prior helps", "sgd", "sgd_decay", "the decay prior (eq. 4.5)"),
    ("global RMS helps", "sgd_decay", "global_rms_decay", "global RMS instead of SGD"),
    ("RMS decay helps", "global_rms_decay", "global_rms_rms_decay", "RMS decay (eq. 4.7) instead of plain decay"),
)


def table_claim(results: Results, corpus: str) -> Claim:
    """Tables 4.1/4.2 (test perplexity): every rule beats static ("dynamic evaluation gives a large improvement over a
    state-of-the-art static model"); each contribution of :data:`CONTRIBUTIONS` improves on the rule before it,
    one part per step ("Each of our other contributions leads to further improvements", Table 4.1's caption); the
    final rule beats the neural cache. Our tables also hold a sparse row, but the thesis shows sparse dynamic
    evaluation on enwik8 only (Table 4.4, judged by :mod:`paperlib.experiments.dynamic_evaluation.char_claims`), so it is not
    part of these claims."""
    table = results["corpora"][corpus]
    rows = {r["key"]: r["test_ppl"] for r in table["rows"]}
    thesis = DYNEVAL_TABLES[corpus]
    static = rows["static"]
    worst = max(DYNAMIC_RULES, key=lambda k: rows[k])
    final, cache = rows["global_rms_rms_decay"], rows["neural_cache"]
    parts = [compared("every rule beats static", "every dynamic-evaluation rule has lower test perplexity than static "
                       "evaluation (judged on the worst rule)", table, worst, "static",
                       f"static {fmt(static)}, worst rule {fmt(rows[worst])}")]
    for label, before, after, adds in CONTRIBUTIONS:
        parts.append(compared(label, f"{adds} lowers test perplexity (thesis {thesis[before][1]} → "
                                      f"{thesis[after][1]})", table, after, before,
                               f"{fmt(rows[before])} → {fmt(rows[after])}"))
    parts.append(compared("beats the cache", "the final rule (global RMS + RMS decay) beats the neural cache "
                           f"(thesis {thesis['global_rms_rms_decay'][1]} vs {thesis['neural_cache'][1]})", table,
                           "global_rms_rms_decay", "neural_cache", f"{fmt(final)} vs cache {fmt(cache)}"))
    if corpus == "wikitext2" and "ptb" in results["corpora"]:
        parts.append(_pronounced(results))
    return Claim(TABLE_ITEMS[corpus], tuple(parts))


def _lead_over_cache(table: Results) -> tuple[float, float] | None:
    """The final rule's lead over the neural cache on one corpus' test text (nats per token, positive: the rule's
    loss lower) and its standard error over blocks; None without per-block losses."""
    rows = {r["key"]: r for r in table["rows"]}
    final, cache = rows["global_rms_rms_decay"], rows["neural_cache"]
    if "test_blocks" not in final or "test_blocks" not in cache:
        return None
    return paired_bootstrap(cache["test_blocks"], final["test_blocks"], table["test_block_tokens"])


def _pronounced(results: Results) -> Part:
    """§4.7.1's "This improvement is especially pronounced on WikiText-2": the final rule's lead over the neural cache
    larger on WikiText-2 than on PTB, the difference of the two leads against twice its standard error (the two test
    texts are independent, so their standard errors add in quadrature); strictly on the relative leads without
    per-block losses."""
    leads = {c: _lead_over_cache(results["corpora"][c]) for c in ("wikitext2", "ptb")}
    thesis = {c: DYNEVAL_TABLES[c]["neural_cache"][1] / DYNEVAL_TABLES[c]["global_rms_rms_decay"][1] - 1
              for c in leads}
    label = "larger lead on WikiText-2"
    claim = ("the final rule's lead over the neural cache is larger on WikiText-2 than on PTB ('This improvement is "
             f"especially pronounced on WikiText-2'; thesis {thesis['wikitext2']:.1%} vs {thesis['ptb']:.1%} in "
             "perplexity)")
    if any(v is None for v in leads.values()):
        rel = {c: (lambda rows: rows["neural_cache"] / rows["global_rms_rms_decay"] - 1)(
            {r["key"]: r["test_ppl"] for r in results["corpora"][c]["rows"]}) for c in leads}
        return strict_part(label, claim, rel["wikitext2"] - rel["ptb"],
                           f"lead over the cache WikiText-2 {rel['wikitext2']:+.1%} vs PTB {rel['ptb']:+.1%}")
    (wt2, se_w), (ptb, se_p) = leads["wikitext2"], leads["ptb"]
    gap, margin = wt2 - ptb, 2 * math.hypot(se_w, se_p)
    return Part(label, claim, direction_word(gap, margin),
                f"lead over the cache WikiText-2 {wt2:+.4f} vs PTB {ptb:+.4f} nats per token (difference {gap:+.4f}, "
                f"margin {margin:.4f}: twice the two leads' standard errors over blocks, added in quadrature)",
                "larger lead beyond the margin; the thesis' way inside it is within noise", kind="bootstrap margin")
