"""Index rows of the word-generation study (Schmidt & Hofmann): tables 1-3, mutual information, entropy."""

from __future__ import annotations

from typing import Any, Mapping

from paperlib.experiments.word_generation.claims import NOISE_USED as WG_NOISE_USED, figure1_claim, paper_i_bar_range
from paperlib.reference.word_generation import PAPER_TABLE1, PAPER_TABLE2, PAPER_TABLE3, PAPER_TABLE3_FLOWS

from paperlib.compendium.results_index.text import MissingResult, Results, _claim_verdict, _f


# -- word generation (Schmidt & Hofmann) -------------------------------------------------------


def _wg(results: Results) -> dict[str, Any]:
    return results["word_generation"]


# -- the paper's numbers as the rows' paper texts (read from paperlib.reference.word_generation) ------------------

# What the rows call the paper's models.
_WG_NAMES = {"2xTRIL, K=10": "2xTRIL K=10", "BASELINE-8D": "GRU 8D", "BASELINE-16D": "GRU 16D",
             "ORACLE-TRAIN": "oracle"}


def _wg_name(model: str) -> str:
    return _WG_NAMES.get(model, model)


def _wg_t1_paper() -> str:
    """S-T1: Table 1's test cross-entropy of the rows we run, then the training-set oracle."""
    models = ("TRIL", "2xTRIL", "2xTRIL, K=10", "BASELINE-8D", "BASELINE-16D")
    return ("H[P_test, P̂]: " + ", ".join(f"{_wg_name(m)} {_f(PAPER_TABLE1[m]['H_test'][0])}" for m in models)
            + f"; {_wg_name('ORACLE-TRAIN')} {_f(PAPER_TABLE1['ORACLE-TRAIN']['H_test'][0])}")


def _wg_t2_paper() -> str:
    """S-T2: Table 2's test cross-entropy of the DSSM and the GRU."""
    dssm, gru = "2xTRIL, K=10", "BASELINE-8D"
    return (f"{_wg_name(dssm)}: H_test {_f(PAPER_TABLE2[dssm]['H_test'])}; {_wg_name(gru)} "
            f"{_f(PAPER_TABLE2[gru]['H_test'])}; n-gram perplexities per order")


def _wg_t3_paper() -> str:
    """S-T3: Table 3a's legible, stable cells with a learned generative flow (the paper calls ID unsuited for F_g)
    and §5.3's reading of the table."""
    table = PAPER_TABLE3["H_test"]
    cells = [f"{g}×{q} {_f(table[g][q][0])}" for g in PAPER_TABLE3_FLOWS[1:] for q in PAPER_TABLE3_FLOWS
             if isinstance(table[g][q], list)]
    return (f"H_test: {', '.join(cells)}; combinations with TRIL inference unstable; §5.3: a powerful F_g is essential, "
            "simplistic F_q such as ID degrade performance")


WG_I_BAR_RANGE = paper_i_bar_range()


def _wg_mi_paper() -> str:
    """S-F1: the paper's range of Ī (:data:`WG_I_BAR_RANGE`)."""
    return "Ī between {} and {} for the trained DSSMs".format(*map(_f, WG_I_BAR_RANGE))


def _wg_scale(results: Results) -> str:
    s = _wg(results)["scale"]
    return (f"wordfreq list ({s['top_n']:,} words; stand-in for BooksCorpus), {s['steps']:,} steps per model, "
            f"{len(s['seeds'])} seed(s)")


def _pm(row: Mapping[str, Any], key: str, digits: int = 2) -> str:
    """``value ± std`` over seeds where the run had several, else the value."""
    std = row.get(f"{key}_std")
    return _f(row.get(key), digits) + (f" ± {_f(std, digits)}" if std is not None else "")


def _wg_t1_ours(results: Results) -> str:
    rows = {r["model"]: r for r in _wg(results)["table1"]}
    return "H[P_test, P̂] nats: " + ", ".join(f"{k} {_pm(v, 'H_test')}" for k, v in rows.items())


def _wg_t1_verdict(results: Results) -> tuple[str, str]:
    """S&H Table 1 as :func:`paperlib.experiments.word_generation.claims.table1_claim` judges it (the notebook shows
    the same claim): the main stage's comparisons and the DSSM-vs-GRU budget ladder."""
    from paperlib.experiments.word_generation.claims import table1_claim

    return _claim_verdict(table1_claim(_wg(results), results["word_generation_ladder"]))


def _wg_t2_verdict(results: Results) -> tuple[str, str]:
    """S&H Table 2 as :func:`paperlib.experiments.word_generation.claims.table2_claim` judges it."""
    from paperlib.experiments.word_generation.claims import table2_claim

    return _claim_verdict(table2_claim(_wg(results)))


def _wg_t3_verdict(results: Results) -> tuple[str, str]:
    """S&H Table 3 as :func:`paperlib.experiments.word_generation.claims.table3_claim` judges it."""
    from paperlib.experiments.word_generation.claims import table3_claim

    return _claim_verdict(table3_claim(_wg(results)))


def _wg_t2_ours(results: Results) -> str:
    rows = _wg(results)["table2"]
    return "; ".join(f"{r['model']}: H_test {_f(r.get('H_test'))}, 2-gram ppl {_f(r.get('ppl_full_2'), 1)}"
                     for r in rows)


def _wg_t3_ours(results: Results) -> str:
    cells = _wg(results)["table3"]["cells"]
    out = []
    for g, row in cells.items():
        for q, cell in row.items():
            if isinstance(cell, Mapping) and "H_test" in cell:
                out.append(f"{g}×{q} {_f(cell['H_test'])}")
    return "H_test (F_g×F_q): " + ", ".join(out)


def _wg_mi_ours(results: Results) -> str:
    rows = {r["model"]: r for r in _wg(results)["table1"]}
    return "Ī: " + ", ".join(f"{k} {_f(v.get('I_bar'))}" for k, v in rows.items() if v.get("I_bar") is not None)


def _wg_mi_verdict(results: Results) -> tuple[str, str]:
    """S&H Fig. 1 as :func:`paperlib.experiments.word_generation.claims.figure1_claim` judges it."""
    return _claim_verdict(figure1_claim(_wg(results)))


def _wg_fig2_ours(results: Results) -> str:
    from paperlib.experiments.word_generation.claims import end_means, position_ends

    f2 = _wg(results)["figure2"]
    run = f2["runs"][0]["I_t"]
    first, last = end_means(position_ends(_wg(results)))
    return (f"I(t) over {len(run[0])} positions ({len(run)} noise trajectories, {len(f2['runs'])} seed(s)) for "
            f"{f2['model']}: I(1..3) {_f(first)} vs I(T-2..T) {_f(last)}")


def _wg_fig2_verdict(results: Results) -> tuple[str, str]:
    """S&H Fig. 2 as :func:`paperlib.experiments.word_generation.claims.figure2_claim` judges it."""
    from paperlib.experiments.word_generation.claims import figure2_claim

    return _claim_verdict(figure2_claim(_wg(results)))


def _wg_fig3_verdict(results: Results) -> tuple[str, str]:
    """S&H Fig. 3 as :func:`paperlib.experiments.word_generation.claims.figure3_claim` judges it."""
    from paperlib.experiments.word_generation.claims import figure3_claim

    return _claim_verdict(figure3_claim(_wg(results)))


def _wg_entropy_ours(results: Results) -> str:
    f3 = _wg(results)["figure3"]
    hist = f3["histories"][0]
    return (f"emission entropy of {f3['model']} from {_f(hist[0]['emission_entropy'])} to "
            f"{_f(hist[-1]['emission_entropy'])} nats over training; baseline symbol entropy "
            f"{_f(f3['baseline_symbol_entropy'])}")
