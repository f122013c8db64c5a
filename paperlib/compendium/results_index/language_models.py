"""Index rows of the language-model experiments: Melis chs. 2 and 4 (PTB words and characters, the
Mogrifier ablation), reverse copy, the tuning studies and Krause's byte-level WikiText-2 table."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from paperlib.experiments.language_models.claims import (
    CHAPTER_4_ITEMS, CHAPTER_4_PAIR, TABLE_PAIRS, TABLE_STAGES, ablation_claim, against, byte_claim,
    compare_seed_means, ordering_claim, ordering_pairs,
)
from paperlib.reference.byte_lm import BYTE_MLSTM, BYTE_MLSTM_SETUP, TABLE_3_3, TEST_BITS_PER_BYTE
from paperlib.reference.language_models import CHAPTER_4_MOGRIFIER, CHAPTER_4_SUFFIX
from paperlib.experiments.common.claims import Unjudged
from paperlib.experiments.reverse_copy.claims import claim as reverse_copy_claim, thesis_lengths
from paperlib.experiments.language_models.claims import neighbourhood_claim, neighbourhood_numbers
from paperlib.reference.tuning import TUNING

from paperlib.compendium.results_index.text import (
    Results, _claim_verdict, _clip, _f, _profile_note, model_name,
)


# -- language models (Melis ch. 2 and 4) ---------------------------------------------------


def _lm_summary(results: Results, name: str) -> dict[str, Any]:
    return results[name]["summary"]


_LM_ORDER = ("lstm", "mogrifier_lstm", CHAPTER_4_MOGRIFIER, "mogrifier_rlstm")


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
        return f"{sizes}; each {budget}; {'/'.join(map(str, seeds))} seed(s) per model{_test_prefix(results, name)}"
    return scale


def _test_prefix(results: Results, name: str) -> str:
    """"; tested on the first N of M test <units>" when the stage evaluated a prefix of the test split (its size from
    ``data_summary`` when at hand), else nothing."""
    r = results[name]
    tested = r.get("eval_tokens", {}).get("test")
    unit = "characters" if r.get("level") == "char" else "tokens"
    whole = results.get("data_summary", {}).get(r.get("corpus"), {}).get("splits", {}).get("test", {}).get("tokens")
    if tested is None or (whole is not None and tested >= whole):
        return ""
    return f"; tested on the first {tested:,}" + (f" of the {whole:,}" if whole else "") + f" test {unit}"


def _pair_phrase(pair: Mapping[str, Any], word: str, unit: str, digits: int) -> str:
    """One judged pair for a reason: who is ahead, by how much, and whether the gap clears the tie margin (``word``:
    the part's verdict)."""
    better, worse = model_name(pair["paper: better"]), model_name(pair["than"])
    gap, margin = pair["our gap"], pair["tie margin"]
    if word == "reproduced":
        return f"{better} ahead of {worse} by {gap:.{digits}f} {unit}"
    if word == "within noise":
        return f"{better} ahead of {worse} by only {gap:.{digits}f} {unit}" + (
            " (one seed)" if margin is None else f" (margin {margin:.{digits}f})")
    return f"{worse} ahead of {better} by {-gap:.{digits}f} {unit}" + ("" if against(pair) else " (inside the margin)")


def _ordering_verdict(item: str) -> Callable[[Results], tuple[str, str]]:
    """Row ``item``'s claim (:func:`paperlib.experiments.language_models.claims.ordering_claim`); the reason names who is ahead
    of whom by how much."""
    def verdict(results: Results) -> tuple[str, str]:
        r = results[TABLE_STAGES[item]]
        judged = ordering_claim(r, item)
        unit, digits = ("bpc", 3) if r["level"] == "char" else ("ppl", 1)
        pairs = [p for p in ordering_pairs(r)
                 if (p["than"].removesuffix(CHAPTER_4_SUFFIX), p["paper: better"]) in TABLE_PAIRS[item]]
        if item in CHAPTER_4_ITEMS and all(m in r["summary"] for m in CHAPTER_4_PAIR):
            pairs.append(compare_seed_means(r["summary"], *CHAPTER_4_PAIR, f"test_{unit}"))
        words = [p.verdict for p in judged.parts]  # the parts follow TABLE_PAIRS' order, as the pairs do
        reason = "; ".join(_pair_phrase(p, w, unit, digits) for p, w in zip(pairs, words))
        if all(w == "reproduced" for w in words):
            reason += ", each beyond seed noise" if len(words) > 1 else ", beyond seed noise"
        elif all(w == "not reproduced" for w in words):
            reason = ("the opposite order: " if len(words) > 1 else "the opposite: ") + reason
        return judged.text(), _clip(reason + (f"; {judged.note}" if judged.note else ""))
    return verdict


def _ablation_ours(results: Results) -> str:
    s = _lm_summary(results, "lm_ptb_ablation")
    return "valid ppl " + ", ".join(f"{model_name(k)} {_f(v['valid_ppl'], 0)}" for k, v in s.items()) + _profile_note(
        results, "lm_ptb_ablation")


def _ablation_verdict(item: str) -> Callable[[Results], tuple[str, str]]:
    """The ablation findings of Table 2.3, or the rounds alone (Fig. 2.3)."""
    def verdict(results: Results) -> tuple[str, str]:
        return _claim_verdict(ablation_claim(results["lm_ptb_ablation"], item))
    return verdict


# -- reverse copy ------------------------------------------------------------------------------


def _reverse_copy_paper() -> str:
    """M-F2.4: the lengths both models solve and those the Mogrifier is better at (Fig. 2.4a)."""
    solved, better = (thesis_lengths(k) for k in ("solved_by_both", "mogrifier_better"))
    return f"both solve lengths {solved}; Mogrifier clearly better at {better}"


def _reverse_copy_ours(results: Results) -> str:
    r = results["reverse_copy"]
    ce = r["cross_entropy"]
    lengths = " / ".join(str(n) for n in r["lengths"])
    return (f"lengths {lengths}: LSTM {' / '.join(_f(x) for x in ce['lstm'])}, Mogrifier "
            f"{' / '.join(_f(x) for x in ce['mogrifier'])} nats" + _profile_note(results, "reverse_copy"))


def _reverse_copy_seeds(settings: Results) -> str:
    """M-F2.4's seeds per model and length (results without ``seeds`` name their one ``seed``)."""
    seeds = settings.get("seeds", [settings.get("seed")])
    if len(seeds) == 1:
        return f"one seed ({seeds[0]}) per model and length, so no seed spread is measured"
    return f"{len(seeds)} seeds ({', '.join(map(str, seeds))}) per model and length, the tie margin their spread"


def _reverse_copy_verdict(results: Results) -> tuple[str, str]:
    return _claim_verdict(reverse_copy_claim(results["reverse_copy"]))


# -- tuning studies (Melis §2.A/2.B) -----------------------------------------------------------------

def _tuning_paper(model: str) -> str:
    """§2.B on Figs. 2.5/2.6: the trials near the best, from :data:`paperlib.reference.tuning.TUNING`."""
    name = {"lstm": "the LSTM's", "mogrifier": "the Mogrifier's (r, k included)"}[model]
    return (f"parallel coordinates of {name} tuning trials; those within "
            f"{TUNING['neighbourhood_fraction']:.0%} of each range around the best (valid ppl "
            f"{TUNING['best_valid_ppl'][model]}) are at most {TUNING['neighbourhood_max_gap_ppl']} ppl off it")


def _tuning_ours(model: str) -> Callable[[Results], str]:
    def ours(results: Results) -> str:
        rec = results["tuning_ptb"]["models"][model]
        sampled = [t for t in rec["trials"] if "probe" not in t]
        done = sum(1 for t in sampled if t["state"] == "COMPLETE")
        found = neighbourhood_numbers(rec)
        probes = (f"; {len(found['excess'])} trial(s) in its {TUNING['neighbourhood_fraction']:.0%} neighbourhood, "
                  f"the worst {_f(max(found['excess']), 1)} ppl off those seeds' mean" if found["excess"] else
                  f"; no other trial in its {TUNING['neighbourhood_fraction']:.0%} neighbourhood")
        return (f"{done} of {len(sampled)} sampled trials complete; best valid ppl {_f(found['best'], 1)} "
                f"({_f(found['reference'], 1)} over {len(found['reruns'])} seeds)" + probes
                + _profile_note(results, "tuning_ptb"))
    return ours


def _tuning_scale(results: Results) -> str:
    st = results["tuning_ptb"]["settings"]
    m = next(iter(st["models"].values()))
    train = st["train"]
    return (f"2-layer H={m['hidden_size']} models, {train['max_steps']:,} steps of "
            f"{train['batch_size']}×{train['bptt']} tokens per trial, {st['trials']} trials + {st.get('neighbours', 0)} neighbours + {st.get('reruns', 0)} "
            f"reruns per model (thesis: {TUNING['parameters'] / 1e6:.0f}M params, full runs, hundreds of trials)")


def _tuning_verdict(item: str) -> Callable[[Results], tuple[str, str]]:
    def verdict(results: Results) -> tuple[str, str]:
        """The claim as :func:`paperlib.experiments.language_models.claims.neighbourhood_claim` judges it."""
        try:
            return _claim_verdict(neighbourhood_claim(results["tuning_ptb"], item))
        except Unjudged:
            return ("not attempted: plots drawn; no trial but the best lies in its "
                    f"{TUNING['neighbourhood_fraction']:.0%} neighbourhood (the stage ran no probes)",
                    "no neighbour of the best to compare")
    return verdict

# -- the rows --------------------------------------------------------------------------------


# -- byte-level WikiText-2 (Krause Table 3.3) -------------------------------------------------------


# Table 3.3's rows that K-T3.3's paper text names, by what it calls them.
_TABLE_3_3_ROWS = {"VD tied": "LSTM + VD (tied) (Inan et al., 2017)",
                   "VD untied": "LSTM + VD (untied) (Inan et al., 2017)", "no VD": "LSTM (Grave et al., 2017b)",
                   "tuned": "LSTM (tied) + VD + BB tuning (Melis et al., 2018)",
                   "AWD": "AWD-LSTM (tied) (Merity et al., 2018b)"}


def _byte_lm_paper() -> str:
    """K-T3.3: Table 3.3's test perplexities, the byte mLSTM's against the word-level LSTMs."""
    test = {name: TABLE_3_3[row][1] for name, row in _TABLE_3_3_ROWS.items()}
    return (f"word-level test ppl: {BYTE_MLSTM} {TABLE_3_3[BYTE_MLSTM][1]:.1f} ({TEST_BITS_PER_BYTE:.4f} bits/byte, "
            f"{BYTE_MLSTM_SETUP['parameters'] / 1e6:.0f}M params); word-level LSTMs with VD {test['VD tied']:.1f} / {test['VD untied']:.1f} (Inan et al. tied "
            f"/ untied), without {test['no VD']:.1f}; tuned LSTM / AWD-LSTM {test['tuned']:.1f} / {test['AWD']:.1f}")


def _byte_lm_ours(results: Results) -> str:
    r = results["lm_wt2_bytes"]
    label = {"mlstm": "byte mLSTM", "lstm": "byte LSTM"}
    parts = [f"{label.get(m, m)} test ppl {_f(s['test_word_ppl'], 0)} ({_f(s['test_bpb'], 3)} bits/byte)"
             for m, s in r["summary"].items()]
    check = r["conversion_check"]
    return "; ".join(parts) + (f"; eq. 3.15 on our test file maps the thesis' {check['bits_per_byte']:.4f} bits/byte "
                               f"to {_f(check['perplexity'], 1)}" + _profile_note(results, "lm_wt2_bytes"))


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


def _byte_lm_verdict(results: Results) -> tuple[str, str]:
    return _claim_verdict(byte_claim(results["lm_wt2_bytes"]))
