"""The claims of Krause ch. 4-5 judged on ``results/dyneval.json``: one :class:`~paperlib.experiments.common.claims.Claim`
per seed item (Tables 4.1/4.2, in :mod:`~paperlib.experiments.dynamic_evaluation.table_claims`; Fig. 5.1, Tables
5.1-5.7), read by the results index and the notebook alike.

Tie rules. Every number compared here comes from one trained model evaluated deterministically (no dropout, no
sampling), so no seed spread is measured. The test text is itself a sample: Tables 4.1/4.2's comparisons take
their margin from it, twice the standard error of the mean per-token loss difference under a paired bootstrap over
blocks of the test prefix (:func:`~paperlib.experiments.common.claims.paired_bootstrap`; the stage stores each row's loss
per block of ``test_block`` tokens). The chapter-5 studies compare validation numbers; their rows keep the same
per-block losses on the validation prefix, and the studies' comparisons of two settings (Tables 5.3-5.7) are judged
by that bootstrap's margin, one comparison per pair of settings a sentence names (the learning rate of each row is
chosen on the same text, as in the thesis, and the bootstrap does not count that choice). Fig. 5.1 and Table 5.1
are read on independent test sequences and take their margin from a bootstrap of the sequences (each one's curve, and
its loss on seen and unseen words weighted by their count). Results without the blocks or sequences are judged
strictly (:func:`~paperlib.experiments.common.claims.strict_word`), as is the related-words probe (one update). The
comparisons themselves are in :mod:`paperlib.experiments.dynamic_evaluation.comparisons`.
Where the thesis' own wording is "negligible", "on par" or "identically", the part uses a threshold stated next to it
(:data:`STATISTICS_SPREAD`, :data:`ON_PAR`, :data:`IDENTICAL`), a few times the thesis' own effect so that a small
model's noisier numbers can pass it.

Fig. 5.1 is judged on dynamic evaluation's gain alone: §5.1 says it examined the time-scales of that gain, and no
sentence of the seed compares the neural cache's gain over time with it, so the cache's curve is shown, not judged.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping

from paperlib.experiments.common.claims import Claim, Part, direction_word, paired_bootstrap, part_word
from paperlib.experiments.dynamic_evaluation.comparisons import (SEQUENCES, STRICT, fmt, over_sequences, strict_part,
                                                                 study_part, within_allowance)
from paperlib.experiments.dynamic_evaluation.table_claims import TABLE_ITEMS, table_claim
from paperlib.reference.dynamic_evaluation import (DYNEVAL_EPSILON, DYNEVAL_EPSILON_BASELINES, DYNEVAL_MOMENTUM, DYNEVAL_SEEN_UNSEEN,
                                        DYNEVAL_RELATED_WORDS_MEDIAN, DYNEVAL_STATISTICS_AMOUNT, DYNEVAL_STATISTICS_LOCALITY,
                                        DYNEVAL_UNSEEN_SHARE)

Results = Mapping[str, Any]

# Thresholds for the thesis' "negligible" and "on par", each a few times the thesis' own effect.
STATISTICS_SPREAD = 0.01  # Table 5.6: "negligible" effect of the amount of data (thesis: 0.4% spread)
ON_PAR = 0.01  # Table 5.7: non-local RMSprop "on par" with global RMS (thesis: 0.2% apart)
# Table 5.5: RMSprop at a very large ε "behaved identically to SGD" (thesis: 54.7 and 54.7); in nats per token, about
# 1% perplexity, the same size as ON_PAR
IDENTICAL = 0.01

def _thirds(static: list[float], other: list[float]) -> tuple[float, float, float]:
    """The mean gain (static − other, per bin) over the first third of the bins, the bins between the first and the
    last third, and the last third (at least three bins)."""
    gain = [s - v for s, v in zip(static, other)]
    if len(gain) < 3:
        raise ValueError(f"a curve needs at least 3 bins for its thirds, got {len(gain)}")
    t = len(gain) // 3
    middle = gain[t:len(gain) - t]
    return sum(gain[:t]) / t, sum(middle) / len(middle), sum(gain[-t:]) / t


def timescale_claim(results: Results) -> Claim:
    """Fig. 5.1 read on the binned loss curves: dynamic evaluation's gain over static grows along the sequence (§5.1
    examines "the timescales at which dynamic evaluation gains an advantage over static evaluation"), from the first
    third of the positions to the last and, since the first bins gain little by construction (nothing has been
    adapted yet), also from the middle third to the last; both must hold. With each sequence's curve
    (``sequence_curves``) each is judged by the bootstrap over the sequences, else strictly. The neural cache's curve
    is not judged: no sentence of the seed says how its gain evolves against dynamic evaluation's."""
    ts = results["timescale"]
    early, middle, late = _thirds(ts["curves"]["static"], ts["curves"]["dynamic"])
    label, claim = "dynamic gain grows", "the gain of dynamic evaluation over static grows along the sequence"
    evidence = f"{early:.2f} → {middle:.2f} → {late:.2f} nats/word over the first, middle and last thirds"
    if "sequence_curves" not in ts:
        judged = [strict_part(label, claim, late - before, evidence) for before in (early, middle)]
        return Claim("K-F5.1", (Part(label, claim, part_word([p.verdict for p in judged]), evidence, rule=STRICT,
                                     kind="strict"),))
    per = ts["sequence_curves"]
    thirds = [_thirds(s, d) for s, d in zip(per["static"], per["dynamic"])]
    ones = [1.0] * len(thirds)
    judged = [over_sequences(label, claim, [t[2] for t in thirds], [t[i] for t in thirds], ones, f"{name} vs last")
              for i, name in ((0, "first"), (1, "middle"))]
    return Claim("K-F5.1", (Part(label, claim, part_word([p.verdict for p in judged]),
                                 f"{evidence}; " + "; ".join(p.evidence for p in judged), rule=SEQUENCES,
                                 kind="bootstrap margin"),))


def seen_claim(results: Results) -> Claim:
    """Table 5.1 and its text (§5.2): dynamic evaluation and the cache help on words seen earlier in the sequence;
    dynamic evaluation beats the cache on seen words and, a part of its own, on unseen words ("gains its advantage
    over the neural cache on both seen and unseen words"); static evaluation beats both on unseen words, yet dynamic
    evaluation beats static on some unseen words (thesis 42.6%), the cache on none."""
    su = results["timescale"]["seen_unseen"]
    static, dyn, cache = su["static"], su["dynamic"], su["neural_cache"]
    dyn_share, cache_share = su["dynamic_better_than_static_on_unseen"], su["cache_better_than_static_on_unseen"]

    def nats(split: str) -> str:
        return (f"{split}: static {static[split]:.2f}, dynamic {dyn[split]:.2f}, cache {cache[split]:.2f} nats; "
                "thesis " + " / ".join(f"{DYNEVAL_SEEN_UNSEEN[k][split == 'unseen']:.2f}"
                                       for k in ("static", "dynamic", "neural_cache")))

    pooled = {"static": static, "dynamic": dyn, "neural_cache": cache}
    per = results["timescale"].get("seen_unseen_sequences")

    def lower(label: str, claim: str, pairs: list[tuple[str, str, str]], evidence: str) -> Part:
        """(better, worse, split) comparisons of the mean loss: by the bootstrap over the sequences (each weighted
        by its count of such words) with per-sequence losses, else strictly."""
        if per is None:
            return strict_part(label, claim, min(pooled[w][sp] - pooled[b][sp] for b, w, sp in pairs), evidence)
        judged = [paired_bootstrap(per[w][sp], per[b][sp], per["words"][sp]) for b, w, sp in pairs]
        short = {"static": "static", "dynamic": "dynamic", "neural_cache": "cache"}
        margins = "; ".join(f"{sp} {short[b]} vs {short[w]} {gap:+.3f}, margin {2 * se:.3f}"
                            for (b, w, sp), (gap, se) in zip(pairs, judged))
        return Part(label, claim, part_word([direction_word(gap, 2 * se) for gap, se in judged]),
                    f"{evidence} ({margins}; {len(per['words']['seen'])} sequences)", rule=SEQUENCES,
                    kind="bootstrap margin")

    return Claim("K-T5.1", (
        lower("dynamic helps on seen words", "dynamic evaluation lowers the loss on seen words",
              [("dynamic", "static", "seen")], nats("seen")),
        lower("cache helps on seen words", "the neural cache lowers the loss on seen words",
              [("neural_cache", "static", "seen")], nats("seen")),
        lower("dynamic beats the cache on seen words", "dynamic evaluation has a lower loss than the cache on seen "
              "words", [("dynamic", "neural_cache", "seen")],
              f"seen: dynamic {dyn['seen']:.2f} vs cache {cache['seen']:.2f} nats; thesis "
              f"{DYNEVAL_SEEN_UNSEEN['dynamic'][0]:.2f} vs {DYNEVAL_SEEN_UNSEEN['neural_cache'][0]:.2f}"),
        lower("dynamic beats the cache on unseen words", "dynamic evaluation has a lower loss than the cache on unseen "
              "words", [("dynamic", "neural_cache", "unseen")],
              f"unseen: dynamic {dyn['unseen']:.2f} vs cache {cache['unseen']:.2f} nats; thesis "
              f"{DYNEVAL_SEEN_UNSEEN['dynamic'][1]:.2f} vs {DYNEVAL_SEEN_UNSEEN['neural_cache'][1]:.2f}"),
        lower("static is best on unseen words", "static evaluation beats both on unseen words",
              [("static", "dynamic", "unseen"), ("static", "neural_cache", "unseen")],
              nats("unseen") + "; against the cache by construction: its mixture scales an unseen word's probability "
              "by 1 − λ"),
        strict_part("some unseen words gain", "dynamic evaluation beats static on some unseen words", dyn_share,
                f"{100 * dyn_share:.1f}% of unseen words; thesis {100 * DYNEVAL_UNSEEN_SHARE:.1f}%"),
        Part("cache gains on no unseen word", "the neural cache beats static on no unseen word (it only "
             "re-weights words it has seen)", "reproduced" if cache_share == 0 else "not reproduced",
             f"{100 * cache_share:.1f}% of unseen words (the cache mixture can only lower an unseen word's "
             "probability: a check of our implementation, not a finding)", "exactly none", kind="count"),
    ))


def further_distinct(extra: Results) -> str:
    """The further targets of Table 5.2's probe counted as distinct words, e.g. " (16 distinct words)", where some
    word is a target more than once; empty where each is distinct or the results do not list them."""
    words = extra.get("words")
    if not words or len(set(words)) == len(words):
        return ""
    return f" ({len(set(words))} distinct words)"


def related_claim(results: Results) -> Claim:
    """Table 5.2 and §5.3's sentence on it, "Updating on the observation of the word “production” also increases the
    log probability of words with similar word embeddings": one update on the target word raises its probability,
    raises the mean probability of the words whose embeddings are nearest to it (the sentence) and raises it more
    than the vocabulary's median word's (Table 5.2's bottom row; the sign of the median word's own change is shown
    beside the table's, not judged: no sentence of §5.3 speaks of it). For the further targets (``extra_targets``), averaged over them: their nearest
    words gain (the sentence again, on the mean of each target's nearest words' mean Δ log p), and for most of them
    the nearest words' mean lies above the median word's. All strict: one update, no spread to tie within."""
    rw = results["related_words"]
    ex = rw["extra_targets"]
    median = rw["median"]["delta"]
    top = f"top-{rw['top']}"
    parts = [
        strict_part("the updated word gains", f"the updated word {rw['word']!r} gains probability", rw["rows"][0]["delta"],
                f"Δ log p {rw['rows'][0]['delta']:+.2f}"),
        strict_part("related words gain", f"the {top} related words (nearest embeddings) gain probability on average",
                rw["top_mean_delta"], f"{top} mean Δ log p {rw['top_mean_delta']:+.2f}"),
        strict_part("related words above the median", f"the {top} related words gain more than the vocabulary's median "
                "word (Table 5.2's bottom row)", rw["top_mean_delta"] - median,
                f"{top} mean {rw['top_mean_delta']:+.2f} vs median {median:+.2f} (Table 5.2's median "
                f"{DYNEVAL_RELATED_WORDS_MEDIAN[1]:+.2f}: no sentence of §5.3 says whether the median word gains or "
                "loses, so its sign is shown, not judged)"),
    ]
    not_run = []
    means = ("mean_top_delta", "mean_target_delta", "mean_median_delta")
    targets = f"{ex['count']} further targets{further_distinct(ex)}"
    if all(k in ex for k in means):
        parts.append(strict_part(
            "related words gain for further targets", f"averaged over the further targets, each target's {top} "
            "related words gain probability", ex["mean_top_delta"],
            f"mean over {targets}: {top} related words {ex['mean_top_delta']:+.2f}, the target "
            f"{ex['mean_target_delta']:+.2f}, the median word {ex['mean_median_delta']:+.2f} Δ log p"))
    else:
        not_run.append("related words gain for further targets")
    parts.append(strict_part(
        "related words above the median for further targets", f"for most further targets the {top} related words' "
        "mean Δ log p lies above the vocabulary median's", ex["top_mean_above_median"] - ex["count"] / 2,
        f"{ex['top_mean_above_median']} of {targets}"
        + (f"; means {ex['mean_top_delta']:+.2f} vs {ex['mean_median_delta']:+.2f}" if all(k in ex for k in means)
           else "")))
    return Claim("K-T5.2", tuple(parts), tuple(not_run))


def momentum_steps(results: Results) -> list[dict[str, Any]]:
    """Table 5.3's steps between successive momenta of our sweep: per step, ``mu`` (before, after), ``ppl`` (the
    validation perplexity change, positive the thesis' way: the larger μ worse) and, with per-block validation
    losses, ``gap`` and ``margin`` (the paired bootstrap's, in nats per token, positive the thesis' way)."""
    o = results["optimizers"]
    rows = o["momentum"]
    steps = []
    for a, b in zip(rows, rows[1:]):
        step = {"mu": (a["settings"]["momentum"], b["settings"]["momentum"]), "ppl": b["valid_ppl"] - a["valid_ppl"]}
        if "valid_block_tokens" in o and "valid_blocks" in a and "valid_blocks" in b:
            gap, se = paired_bootstrap(b["valid_blocks"], a["valid_blocks"], o["valid_block_tokens"])
            step.update(gap=gap, margin=2 * se)
        steps.append(step)
    return steps


def momentum_best(results: Results) -> dict[str, Any] | None:
    """Table 5.3's lowest validation perplexity when a μ > 0 has it: ``mu``, ``ppl``, ``below`` (how far below μ = 0,
    in perplexity) and, with per-block validation losses, the paired bootstrap's ``gap`` and ``margin`` against
    μ = 0 (nats per token, positive the thesis' way); None when μ = 0 is lowest or was not run."""
    o = results["optimizers"]
    rows = o["momentum"]
    plain = next((r for r in rows if r["settings"]["momentum"] == 0), None)
    best = min(rows, key=lambda r: r["valid_ppl"])
    if plain is None or best is plain or best["valid_ppl"] >= plain["valid_ppl"]:
        return None
    out = {"mu": best["settings"]["momentum"], "ppl": best["valid_ppl"],
           "below": plain["valid_ppl"] - best["valid_ppl"]}
    if "valid_block_tokens" in o and "valid_blocks" in best and "valid_blocks" in plain:
        gap, se = paired_bootstrap(best["valid_blocks"], plain["valid_blocks"], o["valid_block_tokens"])
        out.update(gap=gap, margin=2 * se)
    return out


def _swept(row: Results) -> tuple[list[dict[str, float]], int | None]:
    """``row``'s learning-rate sweep sorted by rate, and where in it the chosen rate is (None when absent)."""
    sweep = sorted(row.get("sweep", []), key=lambda p: p["lr"])
    return sweep, next((i for i, p in enumerate(sweep) if math.isclose(p["lr"], row["lr"], rel_tol=1e-9)), None)


def lr_grid_tie(row: Results, within: float) -> tuple[float, float, float, float] | None:
    """Where ``row``'s learning-rate sweep (``sweep``: lr, nll) scores a grid point next to the chosen learning rate
    within ``within`` perplexity of it: (chosen lr, its perplexity, that neighbour's lr, its perplexity), the nearer
    neighbour; None otherwise. The row's best learning rate then likely lies between the two grid points, and its
    perplexity is known only to the grid's resolution, coarser than a gap of ``within``."""
    sweep, at = _swept(row)
    if at is None:
        return None
    ppl = [math.exp(min(p["nll"], 700.0)) for p in sweep]  # a diverged point's loss is astronomically large
    near = [i for i in (at - 1, at + 1) if 0 <= i < len(sweep) and abs(ppl[i] - ppl[at]) < within]
    if not near:
        return None
    i = min(near, key=lambda i: abs(ppl[i] - ppl[at]))
    return sweep[at]["lr"], ppl[at], sweep[i]["lr"], ppl[i]


def interpolated_best(row: Results) -> float | None:
    """``row``'s validation perplexity at the learning rate its sweep points to between grid points: the minimum of
    the parabola in log η through the chosen grid point and its two neighbours (its loss in nats, then
    exponentiated). None where the chosen rate is an end of the sweep or the three points do not curve upwards. A
    coarse grid (ours steps by ×3, the thesis' by ×1.2) scores a row only to its resolution; this says how much of a
    small gap between two rows that resolution could hold."""
    sweep, at = _swept(row)
    if at is None or at == 0 or at == len(sweep) - 1:
        return None
    (x0, y0), (x1, y1), (x2, y2) = [(math.log(sweep[i]["lr"]), sweep[i]["nll"]) for i in (at - 1, at, at + 1)]
    d01, d12 = (y1 - y0) / (x1 - x0), (y2 - y1) / (x2 - x1)
    curvature = (d12 - d01) / (x2 - x0)  # the parabola's leading coefficient
    if not curvature > 0:
        return None
    slope_at_x1 = d01 + curvature * (x1 - x0)  # its derivative at the middle point
    return math.exp(y1 - slope_at_x1 ** 2 / (4 * curvature))


def _interpolated(better: Results, worse: Results) -> tuple[str, bool]:
    """Evidence comparing two rows at their interpolated best learning rates (:func:`interpolated_best`), and
    whether that comparison still goes the claim's way (True without both interpolations)."""
    a, b = interpolated_best(better), interpolated_best(worse)
    if a is None or b is None:
        return "", True
    return (f"; with each η interpolated between grid points (a parabola in log η through the best and its "
            f"neighbours): {fmt(b, 2)} vs {fmt(a, 2)}, " + ("still the thesis' way" if b > a else
                                                             "the other way: the gap is within the grid's resolution"),
            b > a)


def momentum_claim(results: Results) -> Claim:
    """Table 5.3: momentum always hurts dynamic evaluation; μ = 0 (plain SGD) has the best validation perplexity and
    perplexity rises with μ (needs three μ values; the first is μ = 0), each step between successive μ its own
    comparison (a step the other way fails the part at any size, as every comparison does). Where a μ > 0 is lowest,
    the evidence names it (:func:`momentum_best`) and whether μ = 0's learning-rate sweep is flatter than that gap
    (:func:`lr_grid_tie`). The thesis' larger μ that our sweep leaves out are named as not run."""
    rows = results["optimizers"]["momentum"]
    ppl = [r["valid_ppl"] for r in rows]
    ran = [r["settings"]["momentum"] for r in rows]
    mus = ", ".join(f"μ {m:g}" for m in ran)
    thesis = " / ".join(fmt(DYNEVAL_MOMENTUM[m]) if m in DYNEVAL_MOMENTUM else "—" for m in ran)
    evidence = f"{mus}: " + " / ".join(fmt(v) for v in ppl) + f"; thesis {thesis}"
    parts, not_run = [], []
    study = results["optimizers"]
    if len(rows) >= 2 and rows[0]["settings"]["momentum"] == 0:
        best = momentum_best(results)
        if best:
            evidence += f"; lowest: μ {best['mu']:g}, {best['below']:.2f} ppl below μ 0"
            tie = lr_grid_tie(rows[0], best["below"])
            if tie:
                evidence += (f"; μ 0's sweep scores {tie[1]:.2f} at lr {tie[0]:.3g} and {tie[3]:.2f} at lr "
                             f"{tie[2]:.3g}, closer than that gap: its best lr likely lies between these grid points, "
                             f"so its {tie[1]:.2f} is an upper bound")
        parts.append(study_part("plain SGD is best", "no momentum μ > 0 beats μ = 0", study,
                                 [(rows[0], r) for r in rows[1:]], evidence))
    else:
        not_run.append("plain SGD is best")
    if len(rows) >= 3:
        steps = momentum_steps(results)
        against = [s for s in steps if s["ppl"] <= 0]
        parts.append(study_part(
            "perplexity rises with μ", "each larger μ is worse", study, list(zip(rows, rows[1:])),
            "steps between successive μ: " + " / ".join(f"{s['ppl']:+.2f}" for s in steps) + " ppl; "
            f"{len(steps) - len(against)} of {len(steps)} the thesis' way"
            + "".join(f"; μ {s['mu'][0]:g} → {s['mu'][1]:g} the other way by {-s['ppl']:.2f} ppl" for s in against)))
    else:
        not_run.append("perplexity rises with μ")
    larger = [m for m in DYNEVAL_MOMENTUM if m > max(ran)]
    if larger:
        not_run.append(f"the thesis' larger μ {', '.join(f'{m:g}' for m in larger)}")
    return Claim("K-T5.3", tuple(parts), tuple(not_run))


# §5.4.2, right after "RMSprop and Adam perform much worse than even vanilla SGD"; the optimizer is ch. 4's global RMS
GLOBAL_RMS_SENTENCE = ("the optimizer originally presented for dynamic evaluation that worked noticeably better than "
                       "SGD had an update rule similar to RMSprop")


def adaptive_claim(results: Results) -> Claim:
    """Table 5.4: RMSprop and Adam (PyTorch defaults but the learning rate) lose to plain SGD; momentum hurts Adam
    too; Adam without momentum (bias-corrected RMSprop) beats RMSprop (α = 0.999) slightly. Table 5.4 has no global
    RMS row: that they lose to global RMS too is judged from §5.4.2's next sentence (:data:`GLOBAL_RMS_SENTENCE`),
    against our global RMS without the decay prior (Table 5.5's row). The two single comparisons (momentum, bias
    correction) turn on gaps of a fraction of a perplexity point between rows tuned on a ×3 learning-rate grid, so
    each is also made at the rows' interpolated best rates (:func:`interpolated_best`); one that reverses there is
    within noise at most."""
    o = results["optimizers"]
    adaptive = o["adaptive"]
    best = min(r["valid_ppl"] for r in adaptive)
    adam = {r["settings"]["momentum"]: r for r in adaptive if r["settings"]["rule"] == "adam"}
    rmsprop = {r["settings"]["alpha"]: r for r in adaptive if r["settings"]["rule"] == "rmsprop"}
    parts = [
        study_part("lose to SGD", "every RMSprop/Adam setting is worse than plain SGD", o,
                    [(o["sgd"], r) for r in adaptive], f"best adaptive {fmt(best)} vs SGD {fmt(o['sgd']['valid_ppl'])}"),
        study_part("lose to global RMS", "every RMSprop/Adam setting is worse than global RMS", o,
                    [(o["global_rms"], r) for r in adaptive],
                    f"best adaptive {fmt(best)} vs global RMS without the decay prior "
                    f"{fmt(o['global_rms']['valid_ppl'])}; Table 5.4 has no global RMS row: judged from §5.4.2's "
                    f"'{GLOBAL_RMS_SENTENCE}'"),
    ]
    not_run = []
    for label, claim, pair, names in (("momentum hurts Adam", "Adam with μ = 0.9 is worse than without momentum",
                                       (adam.get(0.0), adam.get(0.9)), ("Adam μ 0", "Adam μ 0.9")),
                                      ("bias correction helps", "Adam without momentum beats RMSprop (α = 0.999)",
                                       (adam.get(0.0), rmsprop.get(0.999)), ("Adam μ 0", "RMSprop α 0.999"))):
        better, worse = pair
        if better is None or worse is None:
            not_run.append(label)
            continue
        note, holds = _interpolated(better, worse)
        part = study_part(label, claim, o, [pair], f"{names[1]} {fmt(worse['valid_ppl'])} vs {names[0]} "
                                                   f"{fmt(better['valid_ppl'])} at the grid's best rates")
        part = replace(part, evidence=part.evidence + note)
        if not holds and part.verdict == "reproduced":  # a gap the grid's resolution can hold is not a finding
            part = replace(part, verdict="within noise")
        parts.append(part)
    return Claim("K-T5.4", tuple(parts), tuple(not_run))


IDENTICAL_RULE = (f"identical: the validation loss difference plus its margin (twice the standard error of the mean "
                  "per-token loss difference under a paired bootstrap over blocks of the validation prefix, 2,000 "
                  f"resamples) at most {IDENTICAL} nats per token (about 1% perplexity); a difference beyond both the "
                  f"margin and {IDENTICAL} is not identical; anything between is within noise")
LARGE_EPS = 1.0  # Table 5.5's ε at and above which the thesis' RMSprop matches SGD (54.7 at ε = 1 and 10)


def _like_sgd(study: Results, row: Results, sgd: Results) -> Part:
    """RMSprop at the largest ε against SGD: the same validation loss within :data:`IDENTICAL` (with per-block
    losses, difference plus margin; without them, the difference alone)."""
    label = "RMSprop like SGD at large ε"
    claim = (f"RMSprop at the largest ε ({row['settings']['eps']:g}) scores as plain SGD does ('RMSprop behaved "
             "identically to SGD as the value of  $\\epsilon$  become very large', §5.4.3; thesis "
             f"{DYNEVAL_EPSILON[max(DYNEVAL_EPSILON)]} vs {DYNEVAL_EPSILON_BASELINES['sgd']})")
    shown = f"ε {row['settings']['eps']:g} {fmt(row['valid_ppl'])} vs SGD {fmt(sgd['valid_ppl'])}"
    if "valid_block_tokens" not in study or "valid_blocks" not in row or "valid_blocks" not in sgd:
        diff = abs(math.log(row["valid_ppl"] / sgd["valid_ppl"]))
        return Part(label, claim, "reproduced" if diff <= IDENTICAL else "not reproduced",
                    f"{shown} ({diff:.4f} nats per token apart)", f"|difference| at most {IDENTICAL} nats per token "
                    "(about 1% perplexity)", kind="threshold")
    gap, se = paired_bootstrap(row["valid_blocks"], sgd["valid_blocks"], study["valid_block_tokens"])
    word, note = within_allowance(gap, 2 * se, IDENTICAL)
    return Part(label, claim, word, f"{shown} (difference {gap:+.4f} nats per token, margin {2 * se:.4f}; "
                f"{len(study['valid_block_tokens'])} blocks{note}; as ε grows RMSprop's update tends to SGD's with a rescaled "
                "learning rate, which the thesis calls expected: a check of our implementation)", IDENTICAL_RULE,
                kind="bootstrap margin + threshold")


def epsilon_claim(results: Results) -> Claim:
    """Table 5.5: RMSprop is very sensitive to ε and peaks at an ε above the smallest: the best of the larger ε
    beats the smallest (needs two ε values); tuned ε gains slightly over SGD; at a very large ε (at least
    :data:`LARGE_EPS`) RMSprop scores as SGD does (:data:`IDENTICAL`); global RMS (no decay prior) beats RMSprop at
    every ε. The thesis' ε that our sweep leaves out are named as not run."""
    o = results["optimizers"]
    rows = o["epsilon"]
    ppl = [r["valid_ppl"] for r in rows]
    best_eps = rows[ppl.index(min(ppl))]["settings"]["eps"]
    thesis_best = min(DYNEVAL_EPSILON, key=DYNEVAL_EPSILON.get)
    glob, sgd = o["global_rms"]["valid_ppl"], o["sgd"]["valid_ppl"]
    tuned = rows[ppl.index(min(ppl))]
    parts = [
        study_part("tuned ε beats SGD", "RMSprop with its best ε gains slightly over plain SGD", o,
                    [(tuned, o["sgd"])], f"{fmt(min(ppl))} vs SGD {fmt(sgd)}; thesis {DYNEVAL_EPSILON[thesis_best]} vs "
                    f"{DYNEVAL_EPSILON_BASELINES['sgd']}"),
        study_part("global RMS beats every ε", "global RMS (without the decay prior) beats RMSprop at every ε", o,
                    [(o["global_rms"], r) for r in rows], f"global RMS {fmt(glob)}, best RMSprop {fmt(min(ppl))}"),
    ]
    not_run = []
    largest = max(rows, key=lambda r: r["settings"]["eps"])
    if largest["settings"]["eps"] >= LARGE_EPS:
        parts.append(_like_sgd(o, largest, o["sgd"]))
    else:
        not_run.append("RMSprop like SGD at large ε")
    ran = [r["settings"]["eps"] for r in rows]
    unrun = [e for e in DYNEVAL_EPSILON if not any(math.isclose(e, x, rel_tol=1e-6) for x in ran)]
    if unrun:
        not_run.append(f"the thesis' ε {', '.join(f'{e:g}' for e in unrun)}")
    if len(rows) < 2:
        return Claim("K-T5.5", tuple(parts), ("smallest ε not the best", *not_run))
    smallest = min(rows, key=lambda r: r["settings"]["eps"])
    larger = [r for r in rows if r is not smallest]
    runner = min(larger, key=lambda r: r["valid_ppl"])  # the best of the larger ε, against the smallest
    near = sorted(r["settings"]["eps"] for r in rows if r["valid_ppl"] <= runner["valid_ppl"] * (1 + ON_PAR))
    plateau = (f"; ε {near[0]:g} to {near[-1]:g} all within {ON_PAR:.0%} of the best: a plateau rather than a peak "
               "(its far side, large ε against SGD, is the part 'tuned ε beats SGD')"
               if len(near) > 2 and near[-1] == max(r["settings"]["eps"] for r in rows) else "")
    first = study_part("smallest ε not the best", "the best of the larger ε gives lower perplexity than the "
                        "smallest ε (RMSprop 'peaked' at an ε above the smallest, §5.4.3)", o,
                        [(runner, smallest)],
                        f"smallest ε {smallest['settings']['eps']:g} {fmt(smallest['valid_ppl'])} vs the best larger ε "
                        f"{runner['settings']['eps']:g} {fmt(runner['valid_ppl'])}; best ε {best_eps:g}; thesis best ε "
                        f"{thesis_best:g}, smallest ε {min(DYNEVAL_EPSILON):g} "
                        f"{DYNEVAL_EPSILON[min(DYNEVAL_EPSILON)]}{plateau}")
    return Claim("K-T5.5", (first, *parts), tuple(not_run))


def statistics_share(amount: Mapping[str, Any]) -> str:
    """What "100% of the statistics" is in our run (``results["statistics_amount"]``): the profile's number of
    gradient-statistics batches out of all training batches (the thesis' 100% is every training batch); empty when the
    results do not record it."""
    if "full_batches" not in amount:
        return ""
    full, available = amount["full_batches"], amount.get("training_batches")
    if available is None or full >= available:
        return f"100% = all {full:,} training batches"
    return (f"100% = {full:,} of the {available:,} training batches of {amount['batch_size']}×{amount['bptt']} "
            f"tokens, {full / available:.1%} of the training data")


def statistics_amount_claim(results: Results) -> Claim:
    """Table 5.6: the amount of training data for global RMS's statistics (1%, 10%, 100%) has a negligible effect,
    and global RMS with any amount beats RMSprop."""
    a = results["statistics_amount"]
    glob = [r["valid_ppl"] for r in a["global_rms"]]
    spread = (max(glob) - min(glob)) / min(glob)
    paper = [DYNEVAL_STATISTICS_AMOUNT[f] for f in (0.01, 0.1, 1.0)]
    thesis_spread = (max(paper) - min(paper)) / min(paper)
    local = min(r["valid_ppl"] for r in a["rmsprop"])
    fractions = ", ".join(f"{100 * r['fraction']:g}% {fmt(r['valid_ppl'])}" for r in a["global_rms"])
    outdo = study_part("global RMS beats RMSprop", "global RMS beats RMSprop whatever the amount of data", a,
                        [(g, r) for g in a["global_rms"] for r in a["rmsprop"]],
                        f"worst global RMS {fmt(max(glob))} vs best RMSprop {fmt(local)}")
    if len(glob) < 2:
        return Claim("K-T5.6", (outdo,), ("amount negligible",))
    return Claim("K-T5.6", (
        Part("amount negligible", "1%, 10% or 100% of the training data for the statistics changes "
             "perplexity negligibly", "reproduced" if spread <= STATISTICS_SPREAD else "not reproduced",
             f"spread {spread:.1%} ({'; '.join(filter(None, (fractions, statistics_share(a))))}); thesis "
             f"{thesis_spread:.1%}{_spread_noise(a)}{_fewest_best(a, local)}",
             f"spread (max - min) / min at most {STATISTICS_SPREAD:.0%} (about 2x the thesis' spread)", kind="threshold"),
        outdo,
    ))


def _spread_noise(amount: Results) -> str:
    """The spread set against the validation text's noise: the worst amount's per-block losses against the best's by
    the paired bootstrap over blocks (the margin the study's other parts use), shown beside the threshold; "" without
    per-block losses."""
    rows = amount["global_rms"]
    if "valid_block_tokens" not in amount or not all("valid_blocks" in r for r in rows):
        return ""
    best = min(rows, key=lambda r: r["valid_ppl"])
    worst = max(rows, key=lambda r: r["valid_ppl"])
    gap, se = paired_bootstrap(worst["valid_blocks"], best["valid_blocks"], amount["valid_block_tokens"])
    inside = "beyond" if gap > 2 * se else "inside"
    return (f"; worst ({100 * worst['fraction']:g}%) against best ({100 * best['fraction']:g}%) {gap:+.4f} nats per "
            f"token, {inside} the bootstrap margin {2 * se:.4f} ({len(amount['valid_block_tokens'])} blocks)")


def _fewest_best(amount: Results, rmsprop: float) -> str:
    """Where the smallest amount of data scored best: that it did, and whether it still beats the best RMSprop (the
    sentence's conclusion, that the amount does not explain the gap to RMSprop)."""
    rows = sorted(amount["global_rms"], key=lambda r: r["fraction"])
    if len(rows) < 2 or rows[0]["valid_ppl"] > min(r["valid_ppl"] for r in rows):
        return ""
    if rows[0]["valid_ppl"] >= rmsprop:
        return (f"; the least data scored best here, but global RMS with it does not beat the best RMSprop "
                f"({fmt(rmsprop)})")
    return (f"; the least data scored best here, and global RMS with it still beats the best RMSprop ({fmt(rmsprop)}), "
            "which the sentence concludes: the amount does not explain the gap")


def statistics_locality_claim(results: Results) -> Claim:
    """Table 5.7: non-local RMSprop (statistics from an independent stream) beats RMSprop at the same ε and is on
    par with global RMS."""
    loc = results["statistics_locality"]
    pairs = [(r["settings"]["eps"], r["valid_ppl"], nl["valid_ppl"])
             for r, nl in zip(loc["rmsprop"], loc["nonlocal_rmsprop"])]
    best_nl = min(p[2] for p in pairs)
    glob = loc["global_rms"]["valid_ppl"]
    apart = (best_nl - glob) / glob
    # Table 5.7's global RMS (52.7) is Table 5.6's 100% row; ours is too, and the other rows are disclosed beside it
    amount = results.get("statistics_amount", {})
    others = [r for r in amount.get("global_rms", []) if r.get("fraction") != loc["global_rms"].get("fraction")]
    other_rows = "".join(f"; against global RMS with {100 * r['fraction']:g}% of the statistics {fmt(r['valid_ppl'])}: "
                         f"{(best_nl - r['valid_ppl']) / r['valid_ppl']:+.1%}" for r in others)
    share = f" ({statistics_share(amount)})" if statistics_share(amount) else ""
    thesis = DYNEVAL_STATISTICS_LOCALITY
    thesis_apart = (thesis["nonlocal_rmsprop"] - thesis["global_rms"]) / thesis["global_rms"]
    word, margin, kind = "reproduced" if abs(apart) <= ON_PAR else "not reproduced", "", "threshold"
    best_row = min(loc["nonlocal_rmsprop"], key=lambda r: r["valid_ppl"])
    if "valid_block_tokens" in loc and "valid_blocks" in best_row and "valid_blocks" in loc["global_rms"]:
        # as RMSprop 'identical' to SGD: the difference plus its margin within the allowance holds, beyond both fails
        gap, se = paired_bootstrap(best_row["valid_blocks"], loc["global_rms"]["valid_blocks"],
                                   loc["valid_block_tokens"])
        allowed, kind = math.log1p(ON_PAR), "bootstrap margin + threshold"
        word, note = within_allowance(gap, 2 * se, allowed)
        margin = f" ({gap:+.4f} nats per token, margin {2 * se:.4f}; {len(loc['valid_block_tokens'])} blocks{note})"
    return Claim("K-T5.7", (
        study_part("non-local RMSprop beats RMSprop", "non-local RMSprop beats RMSprop at the same ε", loc,
                    [(nl, r) for r, nl in zip(loc["rmsprop"], loc["nonlocal_rmsprop"])],
                    "; ".join(f"ε {eps:g}: {fmt(nl)} vs {fmt(local)}" for eps, local, nl in pairs)),
        Part("on par with global RMS", "the best non-local RMSprop is on par with global RMS (Table 5.7's global "
             "RMS is Table 5.6's 100% row)", word,
             f"{fmt(best_nl)} vs global RMS with 100% of the statistics{share} {fmt(glob)}, {apart:+.1%}{margin}; "
             f"thesis {thesis_apart:+.1%}{other_rows}",
             f"|relative difference| at most {ON_PAR:.0%} (about 5x the thesis' difference), against the global-RMS "
             "row with 100% of the statistics, as in the thesis; with per-block losses, the difference plus its "
             "margin (twice the bootstrap standard error over blocks) within it, beyond both fails", kind=kind),
    ))


# the makers of the chapter-5 claims by the seed item each judges (Tables 4.1/4.2 by corpus: TABLE_ITEMS)
MAKERS = {"K-F5.1": timescale_claim, "K-T5.1": seen_claim, "K-T5.2": related_claim, "K-T5.3": momentum_claim,
          "K-T5.4": adaptive_claim, "K-T5.5": epsilon_claim, "K-T5.6": statistics_amount_claim,
          "K-T5.7": statistics_locality_claim}


def _makers(results: Results) -> dict[str, Any]:
    """Every claim these results may judge: seed item -> a function of the results making its claim."""
    tables = {TABLE_ITEMS[corpus]: (lambda r, c=corpus: table_claim(r, c))
              for corpus in results["corpora"] if corpus in TABLE_ITEMS}
    return {**tables, **MAKERS}


def claim(results: Results, item: str) -> Claim:
    """The one claim of seed item ``item`` judged on ``results`` (a row of the index needs no other); KeyError
    naming what is missing where these results cannot judge it: the key its numbers need, a table's corpus, or the
    item itself when it is not one of this stage's."""
    return _judged(results, item, _makers(results))


def _judged(results: Results, item: str, makers: Mapping[str, Any]) -> Claim:
    """:func:`claim` with the results' makers (:func:`_makers`) at hand."""
    make = makers.get(item)
    if make is None:
        corpus = next((c for c, table in TABLE_ITEMS.items() if table == item), None)
        raise KeyError(corpus if corpus is not None else item)
    try:
        made = make(results)
    except (IndexError, ValueError) as err:  # ValueError: min() of an empty sweep
        raise KeyError(f"numbers for {item} ({err})") from err
    if made.item != item:
        raise AssertionError(f"the maker of {item} made a claim of {made.item}")
    return made


def claims(results: Results) -> dict[str, Claim]:
    """Every dynamic-evaluation claim that these results can judge, keyed by seed item, from the contents of
    ``results/dyneval.json``; a claim whose numbers are missing (or whose every part the profile left unrun) is
    left out, and the index shows its row as pending."""
    out, makers = {}, _makers(results)
    for item in makers:
        try:
            out[item] = _judged(results, item, makers)
        except KeyError:
            continue
    return out
