"""Index rows of character-level dynamic evaluation (Krause chs. 3-6 analogues on PTB characters): Tables 4.4 and
6.1, recovery after a surprise (Fig. 3.3), scaling (Fig. 3.2), time scales (Fig. 5.2) and out-of-domain text
(Table 6.4). The word-level rows live in :mod:`.dynamic_evaluation`."""

from __future__ import annotations

from typing import Any, Callable

from paperlib.compendium.figure_style import NAMES
from paperlib.reference import dynamic_evaluation as reference_dyneval
from paperlib.reference.setups import KRAUSE_FIG_3_2
from paperlib.experiments.dynamic_evaluation.char_claims import CLAIMS as CHAR_CLAIMS

from paperlib.compendium.results_index.text import Results, _claim_verdict, _f, _profile_note, model_name


def _char(results: Results) -> dict[str, Any]:
    return results["dyneval_char"]


def _on(results: Results) -> str:
    """The corpus the character models ran on, said first in a row's ours (the thesis' rows are on enwik8 or text8,
    which no profile runs: a reader of the index table alone must see the stand-in)."""
    corpus = _char(results).get("corpus", "ptb_char")
    return f"{NAMES.get(corpus, corpus)}: "


def _char_claim(item: str) -> Callable[[Results], tuple[str, str]]:
    """A character-level row's verdict: the claim :data:`paperlib.experiments.dynamic_evaluation.char_claims.CLAIMS` judges on
    ``results/dyneval_char.json`` (the notebook shows the same claims)."""
    def verdict(results: Results) -> tuple[str, str]:
        return _claim_verdict(CHAR_CLAIMS[item](_char(results)))
    return verdict


def _char_table_ours(model: str) -> Callable[[Results], str]:
    """A character-level table's test bpc per row; with a sparse row, how many parameters it adapts against full
    dynamic evaluation (Table 4.4's 250k of 46M)."""
    def ours(results: Results) -> str:
        r = _char(results)
        table = r["tables"][model]
        rows = ", ".join(f"{row['key']} {_f(row['test_bpc'], 3)}" for row in table["rows"])
        adapted = {row["key"]: row.get("adapted_parameters") for row in table["rows"]}
        sparse = adapted.get("sparse_recurrent")
        full = adapted.get("global_rms")
        share = (f"; sparse adapts M of {r['sparse_units']} units, {sparse:,} parameters, {sparse / full:.2%} of "
                 f"the {full / 1e3:,.0f}k full dynamic evaluation adapts" if sparse and full and "sparse_units" in r
                 else "")
        return f"{_on(results)}test bpc ({model}): {rows}{share}" + _profile_note(results, "dyneval_char")
    return ours


def _char_training(results: Results) -> str:
    """The character models' sizes and training: steps, characters and their share of one pass over the training
    split (from the data summary when present), training that diverged and rolled back, the tuning prefix."""
    r = _char(results)
    m = r["models"]
    sizes = ", ".join(f"{k} {v['parameters'] / 1e3:,.0f}k" for k, v in m.items())
    steps, chars = {v.get("train_steps") for v in m.values()}, {v["train_chars"] for v in m.values()}
    split = results.get("data_summary", {}).get(r.get("corpus", "ptb_char"), {}).get("splits", {}).get(
        "train", {}).get("tokens")
    if len(steps) == 1 and len(chars) == 1:
        (step,), (char,) = steps, chars
        pass_share = (f", {char / split:.0%} of one pass over the {split / 1e6:.2f}M training characters" if split
                      else "")
        trained = (f"each trained {step:,} steps on {char / 1e6:.2f}M characters{pass_share}, the step budget, not to "
                   "convergence")
    else:
        trained = "trained " + ", ".join(f"{k} {v.get('train_steps', '?')} steps on {v['train_chars'] / 1e6:.2f}M"
                                         for k, v in m.items()) + " characters"
    rolled = [f"{k} {v['rollbacks']}" for k, v in m.items() if v.get("rollbacks")]
    diverged = (f"; training diverged and restarted from the best checkpoint (rollbacks): {', '.join(rolled)}"
                if rolled else "")
    tuned = f"; settings tuned on {r['valid_chars']:,} validation characters" if "valid_chars" in r else ""
    return (f"PTB characters; {sizes} params, {trained}, one training seed each{_char_optimizer(results, m)}{diverged}"
            f"{tuned}")


def _char_optimizer(results: Results, models: dict[str, Any]) -> str:
    """The optimiser the character models trained with (from the stage's settings): its learning rate, the models
    that used another, and where the schedule ends; empty when the settings are not recorded."""
    params = results.get("dyneval_char.params", {})
    train, specs = params.get("train"), params.get("models", {})
    if not train or "lr" not in train:
        return ""
    rates = {k: {**train, **specs.get(k, {}).get("train", {})}["lr"] for k in models}
    others = ", ".join(f"{k} {v:g}" for k, v in rates.items() if v != train["lr"])
    decay = {"linear": "decayed linearly", "cosine": "cosine-decayed"}.get(train.get("schedule", "constant"))
    name = {"adam": "Adam", "sgd": "SGD", "radam": "RAdam"}.get(train.get("optimizer", "adam"), train.get("optimizer"))
    end = (f", {decay} to {train.get('final_lr', 0.0):g}× by the last step" if decay else
           f", × {train.get('plateau_factor', 0.25):g} after each evaluation without a new best"
           if train.get("schedule") == "plateau" else "")
    return f"; {name}, lr {train['lr']:g}" + (f" ({others})" if others else "") + ", set by hand, not searched" + end


def _char_scale(results: Results) -> str:
    """K-T4.4 / K-T6.1: the models, and the test prefix the tables are scored on with its blocks."""
    r = _char(results)
    blocks = next((t.get("test_block_tokens") for t in r["tables"].values() if t.get("test_block_tokens")), None)
    return (f"{_char_training(results)}; scored on {r.get('test_chars', 0):,} test characters"
            + (f" ({len(blocks)} blocks of {max(blocks)}, the bootstrap's units)" if blocks else ""))


def _char_ood_scale(results: Results) -> str:
    """K-T6.4: the models, and the out-of-domain text with its blocks, the settings tuned in domain."""
    r = _char(results)
    blocks = r["ood"].get("block_tokens")
    return (f"{_char_training(results)}; out of domain: {r.get('ood_chars', 0):,} characters of WikiText-2 test "
            "mapped to PTB characters" + (f" ({len(blocks)} blocks of {max(blocks)})" if blocks else "")
            + ", with the settings tuned in domain")


def _recovery_scale(results: Results) -> str:
    """K-F3.3: the models, the test characters of the recovery test and how its surprising set is chosen."""
    r = _char(results)
    rec = r["recovery"]
    paper = reference_dyneval.DYNEVAL_CHAR_FIG_3_3
    over = ", ".join(model_name(m) for m in rec["models"])
    return (f"{_char_training(results)}; recovery on the first {rec['chars']:,} test characters: the surprising set is "
            f"the {rec['fraction']:.0%} ({rec['surprising']:,}) with the largest loss averaged over the "
            f"{len(rec['models'])} models ({over}; thesis: the {paper['fraction']:.0%} averaged over the mLSTM and the "
            f"stacked LSTM), losses above {rec['threshold_bits']:.2f} bits")


def _scaling_scale(results: Results) -> str:
    """K-F3.2: the sizes of the sweep and the validation text their bits per character are measured on."""
    r = _char(results)
    sizes = "; ".join(f"{model_name(cell)} " + ", ".join(f"{p['parameters'] / 1e3:,.0f}k" for p in points)
                      for cell, points in r["scaling"].items())
    valid = results.get("dyneval_char.params", {}).get("scaling", {}).get("valid_chars")
    seeds = _sweep_seeds(r["scaling"])
    paper = KRAUSE_FIG_3_2
    low, high = (p / 1e6 for p in paper["parameters"])
    return (f"{_char_training(results)}; the sweep's sizes {sizes}, trained alike"
            + (f" from {seeds} training seeds each (the main models are the first)" if seeds > 1 else "")
            + (f", validation bpc on {valid:,} characters" if valid else "")
            + f" (thesis: about {low:g}–{high:g}M parameters, {paper['epochs']} epochs over the first "
            f"{paper['characters'] / 1e6:g}M characters of {paper['corpus']}, which no profile runs)")


def _sweep_seeds(scaling: dict[str, Any]) -> int:
    """The most training seeds any point of the Fig. 3.2 sweep averages (1 when none keeps its seeds)."""
    return max((len(p.get("valid_bpc_seeds", [0])) for points in scaling.values() for p in points), default=1)


def _char_timescale_scale(results: Results) -> str:
    """K-F5.2: the character-level scale and Fig. 5.2's sequences, bins and out-of-domain text."""
    r, paper = _char(results), reference_dyneval.DYNEVAL_CHAR_FIG_5_2
    t = r["timescale"]
    ood = {"wikitext2": "WikiText-2 mapped to PTB characters"}.get(r.get("ood_corpus"), r.get("ood_corpus", "?"))
    return (f"{_char_training(results)}; Fig. 5.2: {t['sequences']:,} sequences × {t['length']:,} characters in bins of "
            f"{t['bin']} (thesis: {paper['sequences']:,} × {paper['length']:,} in bins of {paper['bin']}); out of "
            f"domain: {ood} (thesis: Spanish text)")



def _char_ood_ours(results: Results) -> str:
    ood = _char(results)["ood"]
    parts = []
    for model, rows in ood["models"].items():
        order = [k for k in ("static", "sgd", "global_rms") if k in rows] + sorted(set(rows) - {"static", "sgd", "global_rms"})
        parts.append(f"{model}: " + " → ".join(f"{k} {_f(rows[k]['bpc'], 3)}" for k in order))
    return (f"WikiText-2 mapped to PTB characters ({ood['mapping']['dropped_fraction']:.1%} of characters dropped), "
            "bpc " + "; ".join(parts) + _profile_note(results, "dyneval_char"))


def _char_timescale_ours(results: Results) -> str:
    ts = _char(results)["timescale"]
    out = []
    for domain, curves in ts["curves"].items():
        gaps = [a - b for a, b in zip(curves["static"], curves["dynamic"])]
        top = max(range(len(gaps)), key=lambda i: (gaps[i], i))  # a tie with the last bin is no peak
        peak = (f", largest {_f(gaps[top], 3)} in the bin ending at character {(top + 1) * ts['bin']:,}"
                if top < len(gaps) - 1 else "")
        out.append(f"{domain.replace('_', ' ')}: static − dynamic from {_f(gaps[0], 3)} to {_f(gaps[-1], 3)}{peak}")
    return _on(results) + "per-bin advantage (bpc) " + "; ".join(out) + _profile_note(results, "dyneval_char")


# -- the thesis' character-level numbers as the rows' paper texts --------------------------------------------------

_DYN_CHAIN = {"static": "static", "sgd": "SGD", "global_rms": "global RMS"}  # a table's columns, in order


def _recovery_paper() -> str:
    """K-F3.3: Fig. 3.3's bits right after a surprise, mLSTM and LSTM."""
    fig = reference_dyneval.DYNEVAL_CHAR_FIG_3_3
    after, overall = fig["after_bits"], fig["overall_bits"]
    curves = ", ".join(f"{model_name(m)} {' / '.join(_f(x) for x in after[m])}" for m in ("mlstm", "lstm"))
    return (f"bits at k = 0..{len(after['mlstm']) - 1} after a surprise: {curves}; overall mLSTM "
            f"{_f(overall['mlstm'])} vs LSTM {_f(overall['lstm'])} (mLSTM recovers faster); Melis §2.3.2: the "
            "Mogrifier does not")


def _sparse_table_paper() -> str:
    """K-T4.4: Table 4.4's enwik8 test bpc."""
    t = reference_dyneval.DYNEVAL_CHAR_TABLE_4_4
    return (f"enwik8 test bpc (mLSTM, {t['parameters'] / 1e6:.0f}M): static {_f(t['static'])}, sparse "
            f"{_f(t['sparse_recurrent'])} ({t['sparse_units']} units, {t['sparse_parameters'] / 1e3:.0f}k adapted, "
            f"{t['sparse_parameters'] / t['parameters']:.1%}), full {_f(t['global_rms'])}")


def _chain(row: dict[str, float | None], digits: int) -> str:
    return " → ".join(f"{name} {_f(row[k], digits)}" for k, name in _DYN_CHAIN.items() if row.get(k) is not None)


def _transformer_table_paper() -> str:
    """K-T6.1: Table 6.1's Transformer-XL rows, per size."""
    return "Transformer-XL enwik8 test bpc: " + "; ".join(
        f"{size} {_chain(row, 3)}" for size, row in reference_dyneval.DYNEVAL_CHAR_TABLE_6_1.items())


def _ood_paper() -> str:
    """K-T6.4: Table 6.4's GPT-2 rows on enwik8 and text8 (bpc) and WikiText-103 (perplexity), and its claim
    (§6.3)."""
    t = reference_dyneval.DYNEVAL_CHAR_TABLE_6_4
    chains = "; ".join(f"{name} " + " → ".join(_f(t[key][k], digits) for k in _DYN_CHAIN) + f" {unit}"
                       for key, name, unit, digits in (("enwik8", "enwik8", "bpc", 3), ("text8", "text8", "bpc", 3),
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
    return _on(results) + "bits at k = 0..4 after a surprising character: " + "; ".join(
        f"{m} {' / '.join(_f(x) for x in rec['after_bits'][m])} (overall {_f(rec['overall_bits'][m])})"
        for m in rec["models"]) + _profile_note(results, "dyneval_char")


def _scaling_ours(results: Results) -> str:
    sc = _char(results)["scaling"]
    seeds = _sweep_seeds(sc)
    return _on(results) + "valid bpc vs params" + (f" (mean of {seeds} seeds)" if seeds > 1 else "") + ": " + "; ".join(
        f"{cell} " + ", ".join(f"{p['parameters'] / 1e3:.0f}k {_f(p['valid_bpc'], 3)}" for p in points)
        for cell, points in sc.items()) + _profile_note(results, "dyneval_char")
