"""Index rows of the word-generation study (Schmidt & Hofmann): tables 1-3, mutual information, entropy."""

from __future__ import annotations

import math
from typing import Any, Mapping

from paperlib.experiments.word_generation.budget_notes import MODEL_NAMES, TABLE2_NAMES, i_bar_growth
from paperlib.experiments.word_generation.noise_claims import (figure1_claim, noise_gains, paper_i_bar_range,
                                                                trained_dssms)
from paperlib.reference.word_generation import (PAPER_NGRAM_ORDERS, PAPER_TABLE1, PAPER_TABLE2, PAPER_TABLE3,
                                                PAPER_TABLE3_FLOWS)

from paperlib.compendium.results_index.text import MissingResult, Results, _claim_verdict, _f


# -- word generation (Schmidt & Hofmann) -------------------------------------------------------


def _wg(results: Results) -> dict[str, Any]:
    return results["word_generation"]


# -- the paper's numbers as the rows' paper texts (read from paperlib.reference.word_generation) ------------------

def _wg_name(model: str) -> str:
    return MODEL_NAMES.get(model, model)


_WG_T1_MODELS = ("TRIL", "2xTRIL", "2xTRIL, K=10", "d=16, 2xTRIL, K=10", "BASELINE-8D", "BASELINE-16D")


def _wg_t1_paper() -> str:
    """S-T1: Table 1's test cross-entropy of the rows we run, then the training-set oracle, and the data-space share
    of generated words in the vocabulary (w ∈ V)."""
    return ("H[P_test, P̂]: " + ", ".join(f"{_wg_name(m)} {_f(PAPER_TABLE1[m]['H_test'][0])}" for m in _WG_T1_MODELS)
            + f"; {_wg_name('ORACLE-TRAIN')} {_f(PAPER_TABLE1['ORACLE-TRAIN']['H_test'][0])}; w ∈ V: "
            + ", ".join(f"{_wg_name(m)} {_f(PAPER_TABLE1[m]['in_vocab'][0])}" for m in _WG_T1_MODELS))


_NGRAM_MODELS = (("full", "train+test"), ("test", "test-only"))


def _wg_t2_paper() -> str:
    """S-T2: Table 2 in full: per row its cross-entropies and its perplexities P2-P5 under the train+test and the
    test-only n-gram models."""
    orders = "–".join(f"P{n}" for n in (PAPER_NGRAM_ORDERS[0], PAPER_NGRAM_ORDERS[-1]))
    out = []
    for model, row in PAPER_TABLE2.items():
        cross = [f"{name} {_f(row[key])}" for key, name in (("H_train", "H_train"), ("H_test", "H_test"))
                 if row[key] is not None]
        ngram = [f"{text} {orders} " + " / ".join(_f(v, 1) for v in row[source]) for source, text in _NGRAM_MODELS]
        out.append(f"{TABLE2_NAMES.get(model, model)}: " + ", ".join(cross + ngram))
    return "; ".join(out)


def _wg_t3_paper() -> str:
    """S-T3: Table 3 as legible in our copy of the paper: (a) the cells' H_test, (b) their Ī, the combinations the
    paper's bar marks as unstable (read from the table, not from one flow), and §5.3's reading of the table."""
    def legible(table: str) -> str:
        return ", ".join(f"{g}×{q} {_f(PAPER_TABLE3[table][g][q][0])}" for g in PAPER_TABLE3_FLOWS
                         for q in PAPER_TABLE3_FLOWS if isinstance(PAPER_TABLE3[table][g][q], list))

    unstable = [f"{g}×{q}" for g in PAPER_TABLE3_FLOWS for q in PAPER_TABLE3_FLOWS
                if PAPER_TABLE3["H_test"][g][q] == "unstable"]
    return (f"H_test (F_g×F_q): {legible('H_test')}; Ī: {legible('I_bar')}; unstable (the paper's bar): "
            f"{', '.join(unstable)}; §5.3: a powerful F_g is essential, simplistic F_q such as ID degrade performance")


WG_I_BAR_RANGE = paper_i_bar_range()


def _wg_mi_paper() -> str:
    """S-F1: the paper's range of Ī (:data:`WG_I_BAR_RANGE`), over the DSSMs without an ID flow, and the Ī of the
    Table 3b cells with one, which the range leaves out."""
    with_id = [f"{g}×{q} {_f(cell[0])}" for g, row in PAPER_TABLE3["I_bar"].items() for q, cell in row.items()
               if "ID" in (g, q) and isinstance(cell, list)]
    return ("Ī between {} and {} for the trained DSSMs of Tables 1 and 3b without an ID flow".format(
        *map(_f, WG_I_BAR_RANGE)) + f" (with one, Table 3b: {', '.join(with_id)})")


def _wg_mi_paper_short() -> str:
    """S-F1's table cell: the range and what it leaves out."""
    return "Ī between {} and {} for the trained DSSMs without an ID flow".format(*map(_f, WG_I_BAR_RANGE))


def _wg_scale(results: Results) -> str:
    s = _wg(results)["scale"]
    steps = (f"{s['steps']:,} steps of {s['batch_size']} words per model ({s['steps'] * s['batch_size']:,} words "
             "drawn)" if s.get("batch_size") else f"{s['steps']:,} steps per model")
    return (f"wordfreq list ({s['top_n']:,} words; stand-in for BooksCorpus), {steps}, {len(s['seeds'])} seed(s)"
            + _wg_training_note(results) + _wg_uniform_note(results) + _wg_char_level_note(results)
            + _wg_forced_end_note(results))


def _wg_forced_end_note(results: Results) -> str:
    """Ī averages I(t) over every position the stage runs, the last one too, where the model can only end the word
    (:func:`~paperlib.experiments.word_generation.claims.free_positions`) and the estimator reads the emission without
    that limit: how far that moves Ī on Fig. 2's model, per seed, against the positions the model chooses at."""
    from paperlib.experiments.word_generation.claims import free_positions

    main = _wg(results)
    runs = main.get("figure2", {}).get("runs", [])
    if not runs or not runs[0]["I_t"]:
        return ""
    free = free_positions(main)
    shifts = []
    for run in runs:
        per_t = [sum(column) / len(column) for column in zip(*run["I_t"])]
        shifts.append(abs(sum(per_t) / len(per_t) - sum(per_t[:free]) / free))
    return (f"; Ī averages I(t) over all {free + 1} positions the stage runs, the last of them read without the end "
            f"of word the model must emit there (I = 0): on Fig. 2's {main['figure2']['model']} that moves Ī by at "
            f"most {max(shifts):.3f} nats per seed against its mean over the {free} positions the model chooses at")


AT_LEVEL = 0.01  # a row within this share of the character unigram's H_test (or above it) is named as at its level


def _wg_char_level_note(results: Results) -> str:
    """Where the trained rows' H_test stands against models that keep no state: the character unigram and bigram of
    each split's training words (``results/word_generation_char_levels.json``, by ``paperlib levels word_generation``;
    :mod:`paperlib.experiments.word_generation.char_levels`), the DSSMs and GRUs of Table 1 (standard split), Table
    3's cells (naming those at the unigram's level) and Table 2 (type split) beside them. Empty without those levels
    for the same profile and word list."""
    main, levels = _wg(results), results.get("word_generation_char_levels")
    if not levels or levels.get("profile") != main.get("profile") or levels.get("top_n") != main["data"]["top_n"]:
        return ""
    recorded = main["data"].get("splits", {})
    if any(recorded.get(split, {}).get(k) != v for split, sizes in levels.get("split_sizes", {}).items()
           for k, v in sizes.items()):
        return ""  # levels of another word list
    names = levels["orders"]
    texts = []
    for split, table, words in (("standard", "table1", "the standard split"), ("types", "table2", "the type split")):
        rows = [r for r in main[table] if r.get("H_test") is not None and "ORACLE" not in r["model"]]
        by_order = levels["splits"].get(split)
        if not rows or not by_order:
            continue
        unigram, bigram = by_order["1"]["H_test"], by_order["2"]["H_test"]
        if not (math.isfinite(unigram) and math.isfinite(bigram)):
            continue  # a test letter the training words never show: no level to place the rows against

        def where(value: float) -> str:
            return ("above both" if value > unigram else "between them" if value > bigram else "below both")

        groups = [(name, [r["H_test"] for r in rows if ("BASELINE" in r["model"]) == gru])
                  for name, gru in (("DSSMs", False), ("GRUs", True))]
        cells = {f"{g} × {q}": cell["H_test"] for g, by_q in (main.get("table3", {}).get("cells", {}).items()
                                                               if split == "standard" else ())
                 for q, cell in by_q.items() if cell.get("H_test") is not None}
        if cells:
            groups.append(("Table 3's cells", list(cells.values())))
        placed = "; ".join(f"{name} {_f(min(v))}–{_f(max(v))}" + (f" {where(min(v))}" if where(min(v)) ==
                                                                  where(max(v)) else "")
                           if len(v) > 1 else f"{name[:-1]} {_f(v[0])} {where(v[0])}" for name, v in groups if v)
        level = [f"{name} ({_f(v)})" for name, v in cells.items() if v >= unigram * (1 - AT_LEVEL)]
        texts.append(f"on {words} a {names['1']} of the training words scores H_test {_f(unigram)} and a "
                     f"{names['2']} {_f(bigram)} ({placed}"
                     + (f"; within {AT_LEVEL:.0%} of the unigram or above it: F_g × F_q {', '.join(level)}"
                        if level else "") + ")")
    if not texts:
        return ""
    return ("; against models that keep no state (Witten–Bell, fitted as Table 2's n-grams): " + "; ".join(texts)
            + ": a row above the bigram scores worse than a model of which letter follows which")


def _wg_uniform_note(results: Results) -> str:
    """Where the trained rows' H_test stands against ln V, the test cross-entropy of a uniform distribution over the V
    words of the vocabulary: ours against our V, the paper's Table 1 (the same DSSM rows) against its V."""
    main = _wg(results)
    rows = [r for r in main["table1"] if r.get("H_test") is not None and "ORACLE" not in r["model"]]
    if not rows:
        return ""
    ours, paper = main["data"]["types"], main["data"]["paper"]["types"]
    dssms = [r for r in rows if "BASELINE" not in r["model"]]
    grus = [r for r in rows if "BASELINE" in r["model"]]

    def span(values: list[float]) -> str:
        return f"{_f(min(values))}–{_f(max(values))}" if len(values) > 1 else _f(values[0])

    def count(values: list[float], side: str, level: float) -> str:
        n = sum(v > level if side == "above" else v < level for v in values)
        return f"{'every one' if n == len(values) else f'{n} of {len(values)}'} {side} it"

    trained = "; ".join(f"{name} {span([r['H_test'] for r in group])}" for name, group in (("DSSMs", dssms),
                                                                                          ("GRUs", grus)) if group)
    paper_dssms = [PAPER_TABLE1[r["model"]]["H_test"][0] for r in dssms if r["model"] in PAPER_TABLE1]
    theirs = (f"; the paper's ln {paper:,} = {_f(math.log(paper))}, its same DSSM rows {span(paper_dssms)}, "
              f"{count(paper_dssms, 'below', math.log(paper))}" if paper_dssms else "")
    return (f"; H_test against ln V, the cross-entropy of a uniform distribution over the vocabulary's V words: ours "
            f"ln {ours:,} = {_f(math.log(ours))} nats, the trained rows ({trained}) "
            f"{count([r['H_test'] for r in rows], 'above', math.log(ours))}{theirs}")


def _wg_training_note(results: Results) -> str:
    """How far from convergence the stage's budget is, as the budget ladder measured it at the rung of the same
    number of steps (same settings and profile): each model's H_test over the rung's last quarter
    (:func:`~paperlib.experiments.word_generation.claims.last_quarter_trend`) and the DSSM's Ī from that rung to the
    top one (per seed; rising beyond twice the standard error over seeds)."""
    from paperlib.experiments.word_generation.claims import last_quarter_trend

    main, ladder = _wg(results), results.get("word_generation_ladder")
    steps = main["scale"]["steps"]
    rung = next((r for r in ladder["rungs"] if r["steps"] == steps), None) if ladder else None
    if rung is None or ladder.get("profile") != main.get("profile"):
        return ""
    trends = {m["row"]: (last_quarter_trend(m), m) for m in rung["models"].values()}
    falling = [f"{row} (by {m['fall']:.2f} nats, 2 SE {m['margin']:.2f})" for row, (trend, m) in trends.items()
               if trend == "falling"]
    growth = i_bar_growth(main, ladder)
    rising = (f"; {growth['model']}'s Ī still rising, {growth['start']:.2f} at {steps:,} steps to {growth['end']:.2f} "
              f"at {growth['top']:,}") if growth else ""
    if not falling and not rising:
        return f"; the budget ladder finds H_test flat over the last quarter of its {steps:,}-step rung"
    return ("; not trained to convergence: on the budget ladder's " + f"{steps:,}-step rung H_test was "
            + (f"still falling over the last quarter for {' and '.join(falling)}" if falling else
               "flat over the last quarter") + rising)


def _wg_t2_scale(results: Results) -> str:
    """S-T2's scale: :func:`_wg_scale` and the n-gram models' setup, which puts absolute perplexities far from the
    paper's."""
    main = _wg(results)
    s, split = main["scale"], main["data"]["splits"]["types"]
    return (_wg_scale(results) + f"; n-gram perplexities of {s['ngram_words']:,} generated words per run (the DSSM "
            f"emitting its argmax) under Witten–Bell character models fitted on the alternative split's train+test "
            f"({split['train_types'] + split['test_types']:,} types) or on its {split['test_types']:,} test-only "
            f"types (the paper's: a tenth of {main['data']['paper']['types']:,}), each type weighted by its token "
            f"count in the virtual corpus ({split['train_tokens'] + split['test_tokens']:,} and "
            f"{split['test_tokens']:,} tokens). Witten–Bell gives a context's unseen continuations the share "
            "T / (N + T) of its probability, T the context's distinct continuations and N its count, so with counts "
            "in the millions a letter sequence the fitted types do not continue gets almost none, and words unlike "
            "the fitted types get perplexities far above the paper's, most under the test-only models at the higher "
            f"orders{_wg_oracle_note(main)}; the paper does not say how it weighted the words it fitted"
            + _wg_ngram_calibration(results))


def _wg_ngram_calibration(results: Results) -> str:
    """What the ``word_generation_ngram`` stage measured on the oracle rows (no trained model): per word list and
    weighting, the oracle cells near the paper's (:func:`~paperlib.experiments.word_generation.word_generation_ngram.
    calibration_summary`) and the farthest one; empty without that stage's results or when they were made at another
    profile or word list."""
    from paperlib.experiments.word_generation.claims import NEAR, calibration_summary

    ref, main = results.get("word_generation_ngram"), _wg(results)
    if not ref or ref.get("profile") != main.get("profile") or ref["main"]["top_n"] != main["data"]["top_n"]:
        return ""
    names = {"tokens": "weighted by token counts", "types": "each type counted once"}
    oracles = {"ORACLE-TRAIN": "training oracle's", "ORACLE-TEST": "test oracle's"}

    def one(s: Mapping[str, Any]) -> str:
        far = s["farthest"]
        return (f"{s['types']:,} types {names[s['weighting']]}: {s['near']} of {s['cells']} within ×{NEAR:g} of the "
                f"paper's, farthest the {oracles[far['oracle']]} {far['fitted on']} P{far['order']} "
                f"{'∞' if far['ours'] is None else _f(far['ours'], 1)} "
                f"(paper {_f(far['paper'], 1)})")

    summary = calibration_summary(ref)
    ours = {s["weighting"]: s["near"] for s in summary if s["top_n"] == main["data"]["top_n"]}
    reading = ""
    if len(ours) > 1 and ours.get("tokens", -1) != max(ours.values()):
        reading = "; counting each type once puts more oracle cells near the paper's than the token weights we use"
    elif len(ours) > 1 and sorted(ours.values())[-1] > sorted(ours.values())[-2]:
        reading = "; the token weights we use put more oracle cells near the paper's than counting each type once"
    return (f". On the oracle rows, which need no trained model, the same n-gram models fitted on our list and on "
            f"lists of other sizes: " + "; ".join(one(s) for s in summary)
            + reading)


def _wg_oracle_note(main: Mapping[str, Any]) -> str:
    """ORACLE-TRAIN's test-only perplexity at the highest order beside the paper's: training words, none of them a
    test type, under the test-only n-gram model."""
    orders = main["scale"].get("ngram_orders") or list(PAPER_NGRAM_ORDERS)
    row = next((r for r in main["table2"] if r["model"] == "ORACLE-TRAIN"), None)
    top = orders[-1]
    if row is None or row.get(f"ppl_test_{top}") is None or top not in PAPER_NGRAM_ORDERS:
        return ""
    paper = PAPER_TABLE2["ORACLE-TRAIN"]["test"][PAPER_NGRAM_ORDERS.index(top)]
    return (f" (the training oracle, whose words are no test type, has test-only P{top} "
            f"{_f(row[f'ppl_test_{top}'], 1)} against the paper's {_f(paper, 1)})")


def _pm(row: Mapping[str, Any], key: str, digits: int = 2) -> str:
    """``value ± std`` over seeds where the run had several, else the value."""
    std = row.get(f"{key}_std")
    return _f(row.get(key), digits) + (f" ± {_f(std, digits)}" if std is not None else "")


def _wg_t1_ours(results: Results) -> str:
    rows = {r["model"]: r for r in _wg(results)["table1"]}
    in_vocab = ", ".join(f"{k} {_f(v['in_vocab'])}" for k, v in rows.items()
                         if v.get("in_vocab") is not None and k != "ORACLE-TRAIN")
    return ("H[P_test, P̂] nats: " + ", ".join(f"{k} {_pm(v, 'H_test')}" for k, v in rows.items())
            + (f"; w ∈ V (share of generated words in the vocabulary): {in_vocab}" if in_vocab else ""))


def _wg_t1_scale(results: Results) -> str:
    """S-T1's scale: :func:`_wg_scale` and how our standard split differs from the paper's: train and test tokens drawn
    from one frequency list, so each row's H_train and H_test agree where the paper's differ."""
    rows = [r for r in _wg(results)["table1"] if r.get("H_train") is not None and r.get("H_test") is not None]
    if not rows:
        return _wg_scale(results)
    ours = max(abs(r["H_train"] - r["H_test"]) for r in rows)
    paper = max(abs(v["H_train"][0] - v["H_test"][0]) for v in PAPER_TABLE1.values())
    return (_wg_scale(results) + f"; our standard split draws its training and test tokens from one word-frequency "
            f"list, so every row's H_train and H_test agree within {ours:.3f} nats (the paper's differ by up to "
            f"{paper:.2f})")


def _wg_t1_verdict(results: Results) -> tuple[str, str]:
    """S&H Table 1 as :func:`paperlib.experiments.word_generation.claims.table1_claim` judges it (the notebook shows
    the same claim): the main stage's comparisons and the DSSM-vs-GRU budget ladder."""
    from paperlib.experiments.word_generation.claims import table1_claim

    return _claim_verdict(table1_claim(_wg(results), results["word_generation_ladder"]))


def _wg_t2_verdict(results: Results) -> tuple[str, str]:
    """S&H Table 2 as :func:`paperlib.experiments.word_generation.claims.table2_claim` judges it (the notebook shows
    the same claim), the n-gram parts with how far the generated words still are from the data at this budget."""
    from paperlib.experiments.word_generation.claims import table2_claim

    return _claim_verdict(table2_claim(_wg(results)))


def _wg_t3_verdict(results: Results) -> tuple[str, str]:
    """S&H Table 3 as :func:`paperlib.experiments.word_generation.claims.table3_claim` judges it."""
    from paperlib.experiments.word_generation.claims import table3_claim

    return _claim_verdict(table3_claim(_wg(results)))


def _wg_cell(row: Mapping[str, Any], key: str, digits: int = 2) -> str:
    """A Table 2 cell of ours: ``value ± std``, "∞" where a word or letter had probability zero."""
    return "∞" if key in row.get("infinite", ()) else _pm(row, key, digits)


def _wg_t2_ours(results: Results) -> str:
    """S-T2: our Table 2 in full, as :func:`_wg_t2_paper` prints the paper's."""
    main = _wg(results)
    orders = main["scale"].get("ngram_orders") or list(PAPER_NGRAM_ORDERS)
    span = "–".join(f"P{n}" for n in (orders[0], orders[-1]))
    out = []
    for row in main["table2"]:
        cross = [f"{key} {_wg_cell(row, key)}" for key in ("H_train", "H_test")
                 if row.get(key) is not None or key in row.get("infinite", ())]
        ngram = [f"{text} {span} " + " / ".join(_wg_cell(row, f"ppl_{source}_{n}", 1) for n in orders)
                 for source, text in _NGRAM_MODELS]
        out.append(f"{row['model']}: " + ", ".join(cross + ngram))
    return "; ".join(out)


def _wg_t3_ours(results: Results) -> str:
    """S-T3: our Table 3, (a) H_test and (b) Ī per cell F_g×F_q, in the paper's order of flows."""
    cells = _wg(results)["table3"]["cells"]
    order = list(PAPER_TABLE3_FLOWS) + [f for f in cells if f not in PAPER_TABLE3_FLOWS]

    def table(key: str) -> str:
        return ", ".join(f"{g}×{q} {_f(cells[g][q][key])}" for g in order for q in order
                         if isinstance(cells.get(g, {}).get(q), Mapping) and cells[g][q].get(key) is not None)

    return f"H_test (F_g×F_q): {table('H_test')}; Ī: {table('I_bar')}"


def _wg_mi_ours(results: Results) -> str:
    """S-F1: the trained DSSMs' Ī (Table 1's, and Table 3's without an ID flow) and each one's before training (step
    0), which the row measures it against."""
    gains = noise_gains(_wg(results))
    starts = ", ".join(f"{k} {_f(g['start'])}" for k, g in gains.items())
    starts = f"; before training (step 0) {starts}" if starts else ""
    shown = ", ".join(f"{m['model']} {_pm(m, 'I_bar')}" for m in trained_dssms(_wg(results)))
    return f"Ī: {shown}{starts}"


def _wg_mi_verdict(results: Results) -> tuple[str, str]:
    """S&H Fig. 1 as :func:`paperlib.experiments.word_generation.noise_claims.figure1_claim` judges it with the budget
    ladder (the notebook shows the same claim): where the ladder finds Ī still rising, the range part says its
    shortfall is the budget's."""
    return _claim_verdict(figure1_claim(_wg(results), results.get("word_generation_ladder")))


def _wg_fig2_ours(results: Results) -> str:
    from paperlib.experiments.word_generation.claims import end_means, free_positions, position_ends, position_spreads

    f2 = _wg(results)["figure2"]
    run, free = f2["runs"][0]["I_t"], free_positions(_wg(results))
    first, last = end_means(position_ends(_wg(results)))
    spreads = position_spreads(_wg(results))
    spread = ""
    if spreads:
        low, high = end_means(spreads)
        spread = f"; its standard deviation over the trajectories {_f(low, 3)} vs {_f(high, 3)}"
    return (f"I(t) over the {free} positions the model chooses a symbol at ({len(run)} noise trajectories, "
            f"{len(f2['runs'])} seed(s)) for {f2['model']}: I(1..3) {_f(first)} vs I({free - 2}..{free}) {_f(last)}"
            f"{spread} (means over seeds)")


def _wg_fig2_verdict(results: Results) -> tuple[str, str]:
    """S&H Fig. 2 as :func:`paperlib.experiments.word_generation.claims.figure2_claim` judges it."""
    from paperlib.experiments.word_generation.claims import figure2_claim

    return _claim_verdict(figure2_claim(_wg(results)))


def _wg_fig3_verdict(results: Results) -> tuple[str, str]:
    """S&H Fig. 3 as :func:`paperlib.experiments.word_generation.claims.figure3_claim` judges it."""
    from paperlib.experiments.word_generation.claims import figure3_claim

    return _claim_verdict(figure3_claim(_wg(results)))


def _wg_entropy_ours(results: Results) -> str:
    from paperlib.experiments.word_generation.claims import history_ends

    f3 = _wg(results)["figure3"]
    start, end, seeds = history_ends(_wg(results), "emission_entropy")
    i_start, i_end, _ = history_ends(_wg(results), "I_bar")
    return (f"emission entropy of {f3['model']} from {_f(start)} to {_f(end)} nats over training and Ī from "
            f"{_f(i_start)} to {_f(i_end)} (means over {seeds} seed(s)); baseline symbol entropy "
            f"{_f(f3['baseline_symbol_entropy'])}")
