"""Index rows of dynamic evaluation (Krause chs. 3-6): the word-level tables and studies, and the
character-level analogues (recovery, scaling, out-of-domain text)."""

from __future__ import annotations

from typing import Any, Callable

from paperlib.reference import dynamic_evaluation as reference_dyneval
from paperlib.experiments.dynamic_evaluation.char_claims import CLAIMS as CHAR_CLAIMS
from paperlib.experiments.dynamic_evaluation.claims import statistics_share
from paperlib.experiments.dynamic_evaluation.transformer_claims import CLAIMS as TRANSFORMER_CLAIMS, improvement

from paperlib.compendium.results_index.text import (
    Results, _claim_verdict, _f, _profile_note, model_name,
)


# -- dynamic evaluation (Krause ch. 4-5) -----------------------------------------------------


def _dyn_rows(results: Results, corpus: str) -> dict[str, dict[str, Any]]:
    return {row["key"]: row for row in results["dyneval"]["corpora"][corpus]["rows"]}


_DYN_ORDER = ("static", "traditional_sgd", "sgd", "sgd_decay", "global_rms_decay", "global_rms_rms_decay",
              "neural_cache")


def _dyn_table_ours(corpus: str) -> Callable[[Results], str]:
    def ours(results: Results) -> str:
        rows = _dyn_rows(results, corpus)
        chain = " → ".join(_f(rows[k]["test_ppl"], 0) for k in _DYN_ORDER[:-1] if k in rows)
        return (f"test ppl {chain}; cache {_f(rows['neural_cache']['test_ppl'], 0)}"
                + _profile_note(results, "dyneval"))
    return ours


def _dyn_paper(corpus: str) -> str:
    rows = reference_dyneval.DYNEVAL_TABLES[corpus]
    chain = " → ".join(_f(rows[k][1], 1) for k in _DYN_ORDER[:-1] if rows.get(k))
    return f"test ppl {chain}; cache {_f(rows['neural_cache'][1], 1)} (AWD-LSTM)"


# -- the thesis' numbers as the rows' paper texts (read from paperlib.reference.dynamic_evaluation) ---------------


def _signed(x: float) -> str:
    """``x`` with its sign, two decimals and a typographic minus: +1.25, −0.50."""
    return f"{x:+.2f}".replace("-", "−")


def _eps(x: float) -> str:
    """An RMSprop ε as the thesis writes it: 1e-5 rather than 1e-05, 10 rather than 10.0."""
    return f"{x:g}" if x >= 1 else f"{x:.0e}".replace("e-0", "e-")


def _seen_paper() -> str:
    """K-T5.1: Table 5.1's seen / unseen losses."""
    names = {"static": "static", "dynamic": "dynamic", "neural_cache": "cache"}
    return "seen / unseen nats: " + ", ".join(
        f"{names[k]} {_f(seen)} / {_f(unseen)}" for k, (seen, unseen) in reference_dyneval.DYNEVAL_SEEN_UNSEEN.items())


def _related_paper() -> str:
    """K-T5.2: Table 5.2's Δ log p of the updated word (its first row), the range over its nearest words and the
    vocabulary median."""
    (word, (_, target)), *near = reference_dyneval.DYNEVAL_RELATED_WORDS.items()
    deltas = [delta for _, (_, delta) in near]
    return (f"'{word}' {_signed(target)}; its {len(near)} nearest words {_signed(min(deltas))} … "
            f"{_signed(max(deltas))}; vocabulary median {_signed(reference_dyneval.DYNEVAL_RELATED_WORDS_MEDIAN[1])}")


_MOMENTA_SHOWN = 4  # Table 5.3's four smallest μ, the ones the cpu profile's sweep runs


def _momentum_paper() -> str:
    """K-T5.3: Table 5.3's validation perplexity per momentum μ."""
    shown = list(reference_dyneval.DYNEVAL_MOMENTUM.items())[:_MOMENTA_SHOWN]
    return (f"PTB valid ppl with momentum {' / '.join(f'{mu:g}' for mu, _ in shown)}: "
            + " / ".join(_f(ppl, 1) for _, ppl in shown))


def _adaptive_paper() -> str:
    """K-T5.4: Table 5.4's ranges for RMSprop and Adam, and plain SGD."""
    table = reference_dyneval.DYNEVAL_ADAPTIVE
    spans = []
    for rule, name in (("rmsprop", "RMSprop"), ("adam", "Adam")):
        ppl = [v for k, v in table.items() if k.startswith(f"{rule}_")]
        spans.append(f"{name} {_f(min(ppl), 1)}–{_f(max(ppl), 1)}")
    return f"PTB valid ppl: {', '.join(spans)}, SGD {_f(table['sgd'], 1)}"


def _epsilon_paper() -> str:
    """K-T5.5: Table 5.5's RMSprop perplexity at the smallest ε, at the best ε and at the largest."""
    table = reference_dyneval.DYNEVAL_EPSILON
    first, last, best = min(table), max(table), min(table, key=table.get)
    return (f"RMSprop ε {_eps(first)} … {_eps(last)}: {_f(table[first], 1)} → best {_f(table[best], 1)} at "
            f"{_eps(best)} → {_f(table[last], 1)}")


def _stats_amount_paper() -> str:
    """K-T5.6: Table 5.6's perplexity per fraction of the data for global RMS's statistics."""
    table = reference_dyneval.DYNEVAL_STATISTICS_AMOUNT
    fractions = [k for k in table if not isinstance(k, str)]
    return (f"PTB valid ppl: static {_f(table['static'], 1)}, RMSprop {_f(table['rmsprop'], 1)}, global RMS with "
            f"{' / '.join(f'{100 * k:g}%' for k in fractions)} of the statistics "
            + " / ".join(_f(table[k], 1) for k in fractions))


def _stats_local_paper() -> str:
    """K-T5.7: Table 5.7's perplexities."""
    table = reference_dyneval.DYNEVAL_STATISTICS_LOCALITY
    return (f"PTB valid ppl: RMSprop {_f(table['rmsprop'], 1)}, global RMS {_f(table['global_rms'], 1)}, non-local "
            f"RMSprop {_f(table['nonlocal_rmsprop'], 1)}")


def _dyn_scale(results: Results) -> str:
    d = results["dyneval"]
    m = d["model"]
    c = d["corpora"]["ptb"]
    return (f"{m['num_layers']}-layer {m['cell'].upper()} H={m['hidden_size']} trained on {c['train_tokens']:,} tokens; "
            f"{c['test_tokens']:,} test tokens per corpus; sparse: M acts inside the recurrence (eq. 4.8); RMS_norm "
            "averaged over parameter tensors as in the author's code (eq. 4.6)")


def _dyn_table_scale(results: Results) -> str:
    """K-T4.1 / K-T4.2: :func:`_dyn_scale` and how many training batches the global-RMS rules' MS_g (eq. 4.4) was
    collected from, from the stage's recorded settings."""
    gs = results.get("dyneval.params", {}).get("gradient_stats")
    if not gs:
        return _dyn_scale(results)
    batches = "every training batch" if gs["max_batches"] is None else f"{gs['max_batches']:,} training batches"
    return (f"{_dyn_scale(results)}; global-RMS statistics MS_g from {batches} of {gs['batch_size']}×{gs['bptt']} "
            "tokens per corpus (eq. 4.4: every training batch)")


def _char_timescale_scale(results: Results) -> str:
    """K-F5.2: the character-level scale and Fig. 5.2's sequences, bins and out-of-domain text."""
    r, paper = _char(results), reference_dyneval.DYNEVAL_CHAR_FIG_5_2
    t = r["timescale"]
    ood = {"wikitext2": "WikiText-2 mapped to PTB characters"}.get(r.get("ood_corpus"), r.get("ood_corpus", "?"))
    return (f"{_char_scale(results)}; Fig. 5.2: {t['sequences']:,} sequences × {t['length']:,} characters in bins of "
            f"{t['bin']} (thesis: {paper['sequences']:,} × {paper['length']:,} in bins of {paper['bin']}); out of "
            f"domain: {ood} (thesis: Spanish text)")


def _timescale_ours(results: Results) -> str:
    t = results["dyneval"]["timescale"]
    mean = {k: sum(v) / len(v) for k, v in t["curves"].items()}
    return (f"mean loss over {t['sequences']} sequences × {t['length']} words: "
            + ", ".join(f"{k} {_f(v, 3)}" for k, v in mean.items()) + " nats")


def _seen_ours(results: Results) -> str:
    su = results["dyneval"]["timescale"]["seen_unseen"]
    return "seen / unseen nats: " + ", ".join(
        f"{k} {_f(su[k]['seen'])} / {_f(su[k]['unseen'])}" for k in ("static", "dynamic", "neural_cache"))


def _related_ours(results: Results) -> str:
    rw = results["dyneval"]["related_words"]
    ex = rw["extra_targets"]
    return (f"'{rw['word']}' ({rw['corpus']}): Δ log p {rw['rows'][0]['delta']:+.2f}; top-{rw['top']} related mean "
            f"{rw['top_mean_delta']:+.2f} vs vocabulary median {rw['median']['delta']:+.2f}; {ex['top_mean_above_median']} "
            f"of {ex['count']} further targets show the same" + _profile_note(results, "dyneval"))


def _stats_amount_ours(results: Results) -> str:
    a = results["dyneval"]["statistics_amount"]
    full = (f" ({a['full_batches']:,} of {a['training_batches']:,} training batches)"
            if a.get("training_batches", 0) > a["full_batches"] else "")
    rows = ", ".join(f"{100 * r['fraction']:g}%{full if r['fraction'] == 1.0 else ''} {_f(r['valid_ppl'], 0)}"
                     for r in a["global_rms"])
    rms = ", ".join(f"{r['label']} {_f(r['valid_ppl'], 0)}" for r in a["rmsprop"])
    return (f"valid ppl: static {_f(a['static_valid_ppl'], 0)}; global RMS with {rows}; {rms}; "
            f"{statistics_share(a)}" + _profile_note(results, "dyneval"))


def _stats_local_ours(results: Results) -> str:
    loc = results["dyneval"]["statistics_locality"]
    nl = ", ".join(f"{r['label']} {_f(r['valid_ppl'], 0)}" for r in loc["nonlocal_rmsprop"])
    rms = ", ".join(f"{r['label']} {_f(r['valid_ppl'], 0)}" for r in loc["rmsprop"])
    return f"valid ppl: {nl}; {rms}; global RMS {_f(loc['global_rms']['valid_ppl'], 0)}" + _profile_note(
        results, "dyneval")


def _opt_ours(key: str) -> Callable[[Results], str]:
    def ours(results: Results) -> str:
        o = results["dyneval"]["optimizers"]
        rows = o[key]
        open_ended = [r["label"] for r in rows if r.get("sweep") and r["sweep"][-1]["lr"] == r["lr"]
                      and r["sweep"][-1]["nll"] == r["valid_nll"] and len(r["sweep"]) > 1]
        return (f"valid ppl (static {_f(o['static_valid_ppl'], 0)}): "
                + "; ".join(f"{r['label']} {_f(r['valid_ppl'], 0)}" for r in rows)
                + (f"; learning-rate sweep stopped at its budget, optimum not bracketed: {', '.join(open_ended)}"
                   if open_ended else ""))
    return ours


def _dyn_claim(item: str) -> Callable[[Results], tuple[str, str]]:
    """A dynamic-evaluation row's verdict: the seed item's claim as :mod:`paperlib.experiments.dynamic_evaluation.claims`
    judges it (the notebook shows the same claims)."""
    def verdict(results: Results) -> tuple[str, str]:
        from paperlib.experiments.dynamic_evaluation.claims import claims  # lazily: it loads torch

        return _claim_verdict(claims(results["dyneval"])[item])
    return verdict

# -- character-level dynamic evaluation, recovery, scaling (Krause chs. 3-6 analogues) ------------------


def _char(results: Results) -> dict[str, Any]:
    return results["dyneval_char"]


def _char_claim(item: str) -> Callable[[Results], tuple[str, str]]:
    """A character-level row's verdict: the claim :data:`paperlib.experiments.dynamic_evaluation.char_claims.CLAIMS` judges on
    ``results/dyneval_char.json`` (the notebook shows the same claims)."""
    def verdict(results: Results) -> tuple[str, str]:
        return _claim_verdict(CHAR_CLAIMS[item](_char(results)))
    return verdict


def _char_table_ours(model: str) -> Callable[[Results], str]:
    def ours(results: Results) -> str:
        table = _char(results)["tables"][model]
        rows = ", ".join(f"{r['key']} {_f(r['test_bpc'], 3)}" for r in table["rows"])
        return f"test bpc ({model}): {rows}" + _profile_note(results, "dyneval_char")
    return ours


def _char_scale(results: Results) -> str:
    m = _char(results)["models"]
    sizes = ", ".join(f"{k} {v['parameters'] / 1e3:,.0f}k" for k, v in m.items())
    first = next(iter(m.values()))
    return (f"PTB characters; {sizes} params; {first['train_chars'] / 1e6:.1f}M training characters each; "
            f"{_char(results).get('test_chars', '?')} test characters")


def _char_ood_ours(results: Results) -> str:
    ood = _char(results)["ood"]
    parts = []
    for model, rows in ood["models"].items():
        order = [k for k in ("static", "sgd", "global_rms") if k in rows] + sorted(set(rows) - {"static", "sgd", "global_rms"})
        parts.append(f"{model}: " + " → ".join(f"{k} {_f(rows[k]['bpc'], 3)}" for k in order))
    return (f"WikiText-2 mapped to PTB characters ({ood['mapping']['dropped_fraction']:.1%} of characters dropped), "
            "bpc " + "; ".join(parts) + _profile_note(results, "dyneval_char"))


def _char_timescale_ours(results: Results) -> str:
    out = []
    for domain, curves in _char(results)["timescale"]["curves"].items():
        gaps = [a - b for a, b in zip(curves["static"], curves["dynamic"])]
        out.append(f"{domain.replace('_', ' ')}: static − dynamic from {_f(gaps[0], 3)} to {_f(gaps[-1], 3)}")
    return "per-bin advantage (bpc) " + "; ".join(out) + _profile_note(results, "dyneval_char")


# -- the thesis' character-level numbers as the rows' paper texts --------------------------------------------------

_DYN_CHAIN = {"static": "static", "sgd": "SGD", "global_rms": "global RMS"}  # a table's columns, in order


def _recovery_paper() -> str:
    """K-F3.3: Fig. 3.3's bits right after a surprise, mLSTM and LSTM."""
    after = reference_dyneval.DYNEVAL_CHAR_FIG_3_3["after_bits"]
    curves = ", ".join(f"{model_name(m)} {' / '.join(_f(x) for x in after[m])}" for m in ("mlstm", "lstm"))
    return (f"bits at k = 0..{len(after['mlstm']) - 1} after a surprise: {curves} (mLSTM recovers faster); Melis "
            "§2.3.2: the Mogrifier does not")


def _sparse_table_paper() -> str:
    """K-T4.4: Table 4.4's enwik8 test bpc."""
    t = reference_dyneval.DYNEVAL_CHAR_TABLE_4_4
    return (f"enwik8 test bpc (mLSTM, {t['parameters'] / 1e6:.0f}M): static {_f(t['static'])}, sparse "
            f"{_f(t['sparse_recurrent'])} ({t['sparse_parameters'] / 1e3:.0f}k adapted), full {_f(t['global_rms'])}")


def _chain(row: dict[str, float | None], digits: int) -> str:
    return " → ".join(f"{name} {_f(row[k], digits)}" for k, name in _DYN_CHAIN.items() if row.get(k) is not None)


def _transformer_table_paper() -> str:
    """K-T6.1: Table 6.1's Transformer-XL rows, per size."""
    return "Transformer-XL enwik8 test bpc: " + "; ".join(
        f"{size} {_chain(row, 3)}" for size, row in reference_dyneval.DYNEVAL_CHAR_TABLE_6_1.items())


def _ood_paper() -> str:
    """K-T6.4: Table 6.4's GPT-2 rows on enwik8 (bpc) and WikiText-103 (perplexity), and its claim (§6.3)."""
    t = reference_dyneval.DYNEVAL_CHAR_TABLE_6_4
    chains = "; ".join(f"{name} " + " → ".join(_f(t[key][k], digits) for k in _DYN_CHAIN) + f" {unit}"
                       for key, name, unit, digits in (("enwik8", "enwik8", "bpc", 3),
                                                       ("wikitext103_ppl", "WikiText-103", "ppl", 1)))
    return (f"GPT-2 out of domain, {' → '.join(_DYN_CHAIN.values())}: {chains}; 'improves GPT-2 by a significant "
            "margin on all tasks'")


def _char_timescale_paper() -> str:
    """K-F5.2: where Fig. 5.2's in-domain advantage stops growing."""
    low, high = reference_dyneval.DYNEVAL_CHAR_FIG_5_2["in_domain_peak_chars"]
    return (f"dynamic evaluation's advantage grows over the first {low // 1000}-{high // 1000}k characters (enwik8; "
            "larger on Spanish)")


def _recovery_ours(results: Results) -> str:
    rec = _char(results)["recovery"]
    return "bits at k = 0..4 after a surprising character: " + "; ".join(
        f"{m} {' / '.join(_f(x) for x in rec['after_bits'][m])} (overall {_f(rec['overall_bits'][m])})"
        for m in rec["models"]) + _profile_note(results, "dyneval_char")


def _scaling_ours(results: Results) -> str:
    sc = _char(results)["scaling"]
    return "valid bpc vs params: " + "; ".join(
        f"{cell} " + ", ".join(f"{p['parameters'] / 1e3:.0f}k {_f(p['valid_bpc'], 3)}" for p in points)
        for cell, points in sc.items()) + _profile_note(results, "dyneval_char")




# -- K-T6.3: the word-level Transformer on WikiText-2 (Table 6.3's analogue) -------------------------------------


def _word_transformer_paper() -> str:
    """K-T6.3: Table 6.3's Transformer-XL rows on WikiText-103 and the thesis' 9%."""
    t = reference_dyneval.DYNEVAL_TRANSFORMER_TABLE_6_3
    return (f"Transformer-XL (257M) WikiText-103 test ppl: static {_f(t['static']['test'], 1)} → SGD "
            f"{_f(t['sgd']['test'], 1)} → global RMS {_f(t['global_rms']['test'], 1)} "
            f"({improvement(t['static']['test'], t['global_rms']['test']):.0%} lower); no validation advantage from "
            "a decay rate")


def _word_transformer_ours(results: Results) -> str:
    r = results["dyneval_transformer"]
    ppl = {row["key"]: row["test_ppl"] for row in r["rows"]}
    gain = improvement(ppl["static"], ppl["global_rms"])
    return (f"WikiText-2 test ppl: static {_f(ppl['static'], 1)} → SGD {_f(ppl['sgd'], 1)} → global RMS "
            f"{_f(ppl['global_rms'], 1)}" + ("" if gain is None else f" ({gain:.1%} lower)") + "; global RMS with a "
            f"tuned RMS decay {_f(ppl['global_rms_decay'], 1)}")


def _word_transformer_scale(results: Results) -> str:
    r = results["dyneval_transformer"]
    m = r["model"]
    opts = m.get("options", {})
    return (f"{m['num_layers']}-layer Transformer-XL-style word model, d = {m['hidden_size']}, memory "
            f"{opts.get('memory_length', 0)}, {m['parameters'] / 1e6:.1f}M parameters, trained {m['train_steps']:,} "
            f"steps ({m['train_tokens'] / 1e6:.1f}M tokens) on WikiText-2 (the seed item's analogue of WikiText-103); "
            f"rules tuned on {r['valid_tokens']:,} validation tokens, scored on {r['test_tokens']:,} test tokens in "
            f"segments of {r['segment_len']}")


def _word_transformer_verdict(results: Results) -> tuple[str, str]:
    return _claim_verdict(TRANSFORMER_CLAIMS["K-T6.3"](results["dyneval_transformer"]))
