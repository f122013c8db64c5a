"""Index rows of the language-model experiments: Melis chs. 2 and 4 (PTB words and characters, the
Mogrifier ablation), reverse copy, the tuning studies and Krause's byte-level WikiText-2 table."""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Mapping

from paperlib import reference
from paperlib.experiments.claims import direction_word, verdict_word

from paperlib.compendium.results_index.text import (
    MissingResult, Results, _claim_verdict, _clip, _f, _profile_note, grouped_reason, model_name, plain,
)


# -- language models (Melis ch. 2 and 4) ---------------------------------------------------


def _lm_summary(results: Results, name: str) -> dict[str, Any]:
    return results[name]["summary"]


_LM_ORDER = ("lstm", "mogrifier_lstm", reference.CHAPTER_4_MOGRIFIER, "mogrifier_rlstm")


def _lm_ours(name: str, short: bool = False) -> Callable[[Results], str]:
    """Test perplexity (words) or bits per character (characters) per model, mean ± seed std, and with Monte Carlo
    dropout (the full text only)."""
    def ours(results: Results) -> str:
        r = results[name]
        unit = "bpc" if r.get("level") == "char" else "ppl"
        digits = 3 if unit == "bpc" else 0
        s = r["summary"]
        parts = []
        for model in [m for m in _LM_ORDER if m in s] + [m for m in s if m not in _LM_ORDER]:
            row = s[model]
            std = row.get(f"test_{unit}_std")
            spread = f" ± {std:.{digits}f}" if std else ""
            mc = "" if short else f" (MC dropout {_f(row.get(f'test_{unit}_mc'), digits)})"
            parts.append(f"{model_name(model)} {_f(row[f'test_{unit}'], digits)}{spread}{mc}")
        return f"test {unit} " + (", " if short else "; ").join(parts) + _profile_note(results, name)
    return ours


def _lm_paper(rows: list[dict[str, Any]], unit: str, short: bool = False) -> str:
    """The thesis' test numbers; short: one entry per model, its tables' numbers joined by " / "."""
    if not short:
        return f"test {unit} " + "; ".join(f"{model_name(r['model'])} {r['test']} ({r['source']})" for r in rows)
    by_model: dict[str, list[str]] = {}
    for r in rows:
        by_model.setdefault(r["model"], []).append(f"{r['test']}")
    return f"test {unit} " + ", ".join(f"{model_name(m)} {' / '.join(v)}" for m, v in by_model.items())


def _lm_scale(name: str) -> Callable[[Results], str]:
    """Per model its hidden size and parameters, then the training budget every model got (runs of one experiment
    train on equal tokens) and the number of seeds."""
    def scale(results: Results) -> str:
        r = results[name]
        sizes = ", ".join(f"{model_name(m)} H={r['models'][m]['hidden_size']} {s['parameters'] / 1e6:.2f}M"
                          for m, s in r["summary"].items())
        budgets = sorted({(x["steps"], x["train_tokens"]) for x in r["runs"]})
        budget = "; ".join(f"{tokens / 1e6:.2f}M training tokens ({steps:,} steps)" for steps, tokens in budgets)
        seeds = sorted({s["seeds"] for s in r["summary"].values()})
        return f"{sizes}; each {budget}; {'/'.join(map(str, seeds))} seed(s) per model"
    return scale


def _pair_word(pair: Mapping[str, Any]) -> tuple[str, str]:
    """A seed-mean comparison (:func:`paperlib.experiments.lm_ptb.compare_seed_means`: gap positive in the paper's
    direction, tie margin twice the standard error of the difference) as a part verdict (:func:`direction_word`)
    and what its evidence says besides the numbers."""
    gap, margin = pair["our gap"], pair["tie margin"]
    word = direction_word(gap, margin)
    if margin is None:
        why = "one seed, no tie margin: "
    elif word == "within noise":
        why = "the paper's direction, inside the tie margin: "
    elif word == "not reproduced":
        why = "the opposite holds: " if gap < -margin else "the other way, inside the tie margin: "
    else:
        why = ""
    return word, why


def _pair_phrase(pair: Mapping[str, Any], unit: str, digits: int) -> str:
    """One pair for a reason: who is ahead, by how much, and whether the gap clears the tie margin."""
    better, worse = model_name(pair["paper: better"]), model_name(pair["than"])
    gap, margin = pair["our gap"], pair["tie margin"]
    word = direction_word(gap, margin)
    if word == "reproduced":
        return f"{better} ahead of {worse} by {gap:.{digits}f} {unit}"
    if word == "within noise":
        return f"{better} ahead of {worse} by only {gap:.{digits}f} {unit}" + (
            " (one seed)" if margin is None else f" (margin {margin:.{digits}f})")
    inside = margin is None or -gap <= margin
    return f"{worse} ahead of {better} by {-gap:.{digits}f} {unit}" + (" (inside the margin)" if inside else "")


def _ordering_verdict(results: Results, name: str) -> tuple[str, str]:
    """The paper's ordering LSTM > Mogrifier > Mogrifier RLSTM, pair by pair, each gap against its tie margin
    (twice the standard error of the difference of seed means: :func:`paperlib.experiments.lm_ptb.compare_seed_means`)."""
    from paperlib.experiments.lm_ptb import ordering_verdict  # lazily: the index does not load torch at import time

    r = results[name]
    unit = "bpc" if r["level"] == "char" else "ppl"
    digits = 3 if unit == "bpc" else 1
    pairs = ordering_verdict(r)["pairs"]
    parts = []
    for p in pairs:
        margin = "one seed" if p["tie margin"] is None else f"tie margin {p['tie margin']:.{digits}f}"
        word, why = _pair_word(p)
        parts.append(f"{model_name(p['paper: better'])} better than {model_name(p['than'])}: {word} ({why}gap "
                     f"{p['our gap']:.{digits}f} {unit}, {margin})")
    words = [_pair_word(p)[0] for p in pairs]
    reason = "; ".join(_pair_phrase(p, unit, digits) for p in pairs)
    if all(w == "reproduced" for w in words):
        reason += ", each beyond seed noise"
    elif all(w == "not reproduced" for w in words):
        reason = "the opposite order: " + reason
    return f"{verdict_word(words)}: " + "; ".join(parts), _clip(reason)


def _lm_ptb_verdict(results: Results) -> tuple[str, str]:
    text, reason = _ordering_verdict(results, "lm_ptb")
    return text + "; absolute level: see the scale", reason


def _lm_char_verdict(results: Results) -> tuple[str, str]:
    s = _lm_summary(results, "lm_ptb_char")
    ratio = s["mogrifier_lstm"]["parameters"] / s["lstm"]["parameters"]
    size = "parameter-matched" if 0.95 <= ratio <= 1.05 else f"the Mogrifier has {ratio - 1:+.0%} parameters"
    text, reason = _ordering_verdict(results, "lm_ptb_char")
    return text + f" ({size}); enwik8 / MWC / text8 rows not attempted (GPU-scale corpora)", reason


def _ablation_ours(results: Results) -> str:
    s = _lm_summary(results, "lm_ptb_ablation")
    return "valid ppl " + ", ".join(f"{model_name(k)} {_f(v['valid_ppl'], 0)}" for k, v in s.items()) + _profile_note(
        results, "lm_ptb_ablation")


_ABLATION_LABELS = {  # the thesis' ablation findings (paperlib.experiments.lm_ptb.ablation_findings) in a few words
    "perplexity improves with the number of rounds r": "more rounds help",
    "full rank is close behind low rank (within 2%)": "full rank within 2% of low rank",
    "no-zigzag underperforms the Mogrifier with the same r": "zigzag helps",
    "the mLSTM does not improve on the LSTM": "mLSTM no better than LSTM",
}
_GAP = re.compile(r"\bgap (-?\d+(?:\.\d+)?)")


def _finding_word(finding: Mapping[str, Any]) -> tuple[str, str]:
    """An ablation finding's verdict (:func:`paperlib.experiments.lm_ptb.ablation_findings`) as a part verdict: a gap
    inside the tie margin (or with one seed) keeps its direction, read from the evidence's "gap <x>" (positive: the
    thesis' way)."""
    verdict = finding["verdict"]
    if verdict in ("reproduced", "opposite", "not reproduced"):
        return ("reproduced", "") if verdict == "reproduced" else (
            "not reproduced", "the opposite holds: " if verdict == "opposite" else "")
    gap = _GAP.search(finding["evidence"])
    word = direction_word(float(gap[1]) if gap else None, None)
    why = "one seed, no tie margin: " if verdict == "one seed" else "inside the tie margin, " + (
        "the paper's direction: " if word == "within noise" else "the other way: ")
    return word, why


def _ablation_verdict(results: Results, only: str | None = None) -> tuple[str, str]:
    """The ablation findings (Table 2.3), or the one finding ``only`` (Fig. 2.3: the rounds)."""
    from paperlib.experiments.lm_ptb import ablation_findings

    found = {k: v for k, v in ablation_findings(results["lm_ptb_ablation"]).items()
             if v is not None and only in (None, k)}
    if not found:
        raise MissingResult(f"ablation finding {only or 'any'}")
    words = {k: _finding_word(v) for k, v in found.items()}
    text = f"{verdict_word([w for w, _ in words.values()])}: " + "; ".join(
        f"{k}: {words[k][0]} ({words[k][1]}{plain(v['evidence'])})" for k, v in found.items())
    return text, grouped_reason([(_ABLATION_LABELS.get(k, k), w) for k, (w, _) in words.items()])


# -- reverse copy ------------------------------------------------------------------------------


def _reverse_copy_ours(results: Results) -> str:
    r = results["reverse_copy"]
    ce = r["cross_entropy"]
    lengths = " / ".join(str(n) for n in r["lengths"])
    return (f"lengths {lengths}: LSTM {' / '.join(_f(x) for x in ce['lstm'])}, Mogrifier "
            f"{' / '.join(_f(x) for x in ce['mogrifier'])} nats" + _profile_note(results, "reverse_copy"))


def _reverse_copy_verdict(results: Results) -> tuple[str, str]:
    from paperlib.experiments.reverse_copy_claims import claim

    return _claim_verdict(claim(results["reverse_copy"]))


# -- tuning studies (Melis §2.A/2.B) -----------------------------------------------------------------


def _tuning_ours(model: str) -> Callable[[Results], str]:
    def ours(results: Results) -> str:
        rec = results["tuning_ptb"]["models"][model]
        best = rec["best"]
        done = sum(1 for t in rec["trials"] if t["state"] == "COMPLETE")
        return (f"{done} complete trials; best valid ppl {_f(math.exp(best['value']), 0)}; neighbourhood of the best "
                f"holds {len(rec['neighbourhood']['trials'])} trial(s)" + _profile_note(results, "tuning_ptb"))
    return ours


def _tuning_scale(results: Results) -> str:
    st = results["tuning_ptb"]["settings"]
    m = next(iter(st["models"].values()))
    return (f"2-layer H={m['hidden_size']} models, {st['train']['max_steps']} steps per trial, {st['trials']} trials "
            "per model (thesis: 24M params, full runs, hundreds of trials)")


def _tuning_verdict(results: Results) -> tuple[str, str]:
    near = [len(r["neighbourhood"]["trials"]) for r in results["tuning_ptb"]["models"].values()]
    if max(near) > 1:
        return ("partly: sensitivity plots drawn; the best trial has neighbours within 15% of each range",
                "plots drawn; the best trial has neighbours within 15% of each range, not judged further")
    return ("partly: parallel coordinates and loss-vs-hyperparameter panels drawn; the thesis' '15% neighbourhood' "
            "finding is not testable with this few trials (no other trial falls in it)",
            "plots drawn; too few trials to test the thesis' '15% neighbourhood' finding")

# -- the rows --------------------------------------------------------------------------------


# -- byte-level WikiText-2 (Krause Table 3.3) -------------------------------------------------------


def _byte_lm_ours(results: Results) -> str:
    r = results["lm_wt2_bytes"]
    label = {"mlstm": "byte mLSTM", "lstm": "byte LSTM"}
    parts = [f"{label.get(m, m)} test ppl {_f(s['test_word_ppl'], 0)} ({_f(s['test_bpb'], 3)} bits/byte)"
             for m, s in r["summary"].items()]
    check = r["conversion_check"]
    return "; ".join(parts) + (f"; eq. 3.15 on our test file maps the thesis' 1.2649 bits/byte to "
                               f"{_f(check['perplexity'], 1)}" + _profile_note(results, "lm_wt2_bytes"))


def _byte_lm_scale(results: Results) -> str:
    r = results["lm_wt2_bytes"]
    runs, train = r["runs"], r["train"]
    params = sorted({s["parameters"] for s in r["summary"].values()})
    seen = max(run["train_tokens"] for run in runs) if runs else 0
    low, high = (f"{p / 1e6:.2f}" for p in (params[0], params[-1]))
    size = low if low == high else f"{low}–{high}"
    return (f"1 layer, {size}M params each, {seen / 1e6:.1f}M of "
            f"{r['train_bytes'] / 1e6:.1f}M training bytes ({train['max_steps']:,} steps), "
            f"{r['eval_bytes']['test']:,} test bytes, {max(s['seeds'] for s in r['summary'].values())} seed(s)")


def _byte_word(verdict: str) -> tuple[str, str]:
    """A ``paperlib.experiments.lm_wt2_bytes.claim_verdicts`` verdict as a part verdict and its qualifier: "partly reproduced (within
    seed noise or one seed)" is the paper's direction without a resolved gap."""
    for upstream, word in (("partly reproduced (within seed noise", "within noise"),
                           ("not reproduced", "not reproduced"), ("reproduced", "reproduced")):
        if verdict.startswith(upstream):
            qualifier = verdict.removeprefix("partly reproduced" if word == "within noise" else upstream).strip()
            return word, qualifier.strip("()").replace("within seed noise or one seed",
                                                      "the gap is inside twice the larger seed std, or one seed")
    return "not reproduced", verdict


_BYTE_LABELS = {"the mLSTM beats the LSTM": "mLSTM beats LSTM",
                "the byte mLSTM is on par": "byte mLSTM on par with word-level VD LSTMs",
                "eq. 3.15": "eq. 3.15 conversion checks out"}


def _byte_lm_verdict(results: Results) -> tuple[str, str]:
    """The status counts the model claims only; the eq. 3.15 check (data and arithmetic) is reported beside."""
    claims = results["lm_wt2_bytes"]["claims"]
    models = [c for c in claims if not c["claim"].startswith("eq. 3.15")]
    if not models:
        raise MissingResult("the byte models' claims")
    words = {c["claim"]: _byte_word(c["verdict"]) for c in claims}
    head = verdict_word([words[c["claim"]][0] for c in models])

    def part(c: Mapping[str, Any]) -> str:
        word, qualifier = words[c["claim"]]
        if c not in models:  # a check of our data and arithmetic, not a part of the verdict
            word = "checks out" if word == "reproduced" else "does not check out"
        return f"{c['claim']}: {word} ({c['evidence']}{'; ' + qualifier if qualifier else ''})"

    text = f"{head}: " + "; ".join(part(c) for c in claims)

    def label(claim: str) -> str:
        return next((v for k, v in _BYTE_LABELS.items() if claim.startswith(k)), claim)

    return text, grouped_reason([(label(c["claim"]), words[c["claim"]][0]) for c in models])
