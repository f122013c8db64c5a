"""Index rows of dynamic evaluation (Krause chs. 3-6): the word-level tables and studies, and the
character-level analogues (recovery, scaling, out-of-domain text)."""

from __future__ import annotations

from typing import Any, Callable

from paperlib.reference import dynamic_evaluation as reference_dyneval
from paperlib.experiments.dyneval_char_claims import CLAIMS as CHAR_CLAIMS

from paperlib.compendium.results_index.text import MissingResult, Results, _claim_verdict, _f, _profile_note


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


def _dyn_scale(results: Results) -> str:
    d = results["dyneval"]
    m = d["model"]
    c = d["corpora"]["ptb"]
    return (f"{m['num_layers']}-layer {m['cell'].upper()} H={m['hidden_size']} trained on {c['train_tokens']:,} tokens; "
            f"{c['test_tokens']:,} test tokens per corpus; sparse: M acts inside the recurrence (eq. 4.8); RMS_norm "
            "averaged over parameter tensors as in the author's code (eq. 4.6)")


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
    rows = ", ".join(f"{100 * r['fraction']:g}% {_f(r['valid_ppl'], 0)}" for r in a["global_rms"])
    rms = ", ".join(f"{r['label']} {_f(r['valid_ppl'], 0)}" for r in a["rmsprop"])
    return f"valid ppl: static {_f(a['static_valid_ppl'], 0)}; global RMS with {rows}; {rms}" + _profile_note(
        results, "dyneval")


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
    """A dynamic-evaluation row's verdict: the seed item's claim as :mod:`paperlib.experiments.dyneval_claims`
    judges it (the notebook shows the same claims)."""
    def verdict(results: Results) -> tuple[str, str]:
        from paperlib.experiments.dyneval_claims import claims  # lazily: it loads torch

        return _claim_verdict(claims(results["dyneval"])[item])
    return verdict

# -- character-level dynamic evaluation, recovery, scaling (Krause chs. 3-6 analogues) ------------------


def _char(results: Results) -> dict[str, Any]:
    return results["dyneval_char"]


def _char_claim(item: str) -> Callable[[Results], tuple[str, str]]:
    """A character-level row's verdict: the claim :data:`paperlib.experiments.dyneval_char_claims.CLAIMS` judges on
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


def _scaling_verdict(results: Results) -> str:
    sc = _char(results)["scaling"]
    if "mlstm" not in sc or "lstm" not in sc:
        raise MissingResult("scaling curves of lstm and mlstm")
    big_m, big_l = sc["mlstm"][-1], sc["lstm"][-1]
    better = big_m["valid_bpc"] < big_l["valid_bpc"]
    return (("partly" if better else "not reproduced") + f": at the largest size the mLSTM is "
            f"{'better' if better else 'not better'} than the LSTM ({_f(big_m['valid_bpc'], 3)} vs "
            f"{_f(big_l['valid_bpc'], 3)} bpc at {big_m['parameters'] / 1e3:.0f}k vs {big_l['parameters'] / 1e3:.0f}k "
            "params); two sizes only")
