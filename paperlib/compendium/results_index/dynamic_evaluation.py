"""Index rows of word-level dynamic evaluation (Krause chs. 4-6): Tables 4.1/4.2, the chapter-5 studies and the
word-level Transformer (Table 6.3's analogue). The character-level rows live in :mod:`.dynamic_evaluation_char`."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from paperlib.reference import dynamic_evaluation as reference_dyneval
from paperlib.reference.setups import KRAUSE_FIG_5_1, KRAUSE_WORD_MODELS
from paperlib.experiments.common.grid_ends import not_bracketed
from paperlib.experiments.dynamic_evaluation.claims import (
    claim as judge, further_distinct, momentum_best, momentum_steps, statistics_share,
)
from paperlib.experiments.dynamic_evaluation.transformer_claims import CLAIMS as TRANSFORMER_CLAIMS, improvement

from paperlib.compendium.results_index.text import (
    Results, _claim_verdict, _f, _profile_note, grouped_reason, index_text,
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


def _momentum_paper() -> str:
    """K-T5.3: Table 5.3's validation perplexity per momentum μ, and static."""
    table = reference_dyneval.DYNEVAL_MOMENTUM
    return (f"PTB valid ppl with momentum {' / '.join(f'{mu:g}' for mu in table)}: "
            + " / ".join(_f(ppl, 1) for ppl in table.values())
            + f"; static {_f(reference_dyneval.DYNEVAL_STATIC_VALID_PTB, 1)}")


def _adaptive_paper() -> str:
    """K-T5.4: Table 5.4's rows (RMSprop per α, Adam with α 0.999 per μ, SGD), and static."""
    table = reference_dyneval.DYNEVAL_ADAPTIVE

    def group(prefix: str) -> tuple[str, str]:
        keys = [k for k in table if k.startswith(prefix)]
        return (" / ".join(f"{float(k.rsplit('_', 1)[1]):g}" for k in keys),
                " / ".join(_f(table[k], 1) for k in keys))

    (alphas, rmsprop), (mus, adam) = group("rmsprop_alpha_"), group("adam_mu_")
    return (f"PTB valid ppl: RMSprop α {alphas} {rmsprop}, Adam (α 0.999) μ {mus} {adam}, SGD {_f(table['sgd'], 1)}; "
            f"static {_f(reference_dyneval.DYNEVAL_STATIC_VALID_PTB, 1)}")


def _epsilon_paper(short: bool = False) -> str:
    """K-T5.5: Table 5.5's RMSprop perplexity at every ε (``short``: at the smallest, best and largest ε), its best
    ε, and the SGD and global RMS rows (and static)."""
    table, baselines = reference_dyneval.DYNEVAL_EPSILON, reference_dyneval.DYNEVAL_EPSILON_BASELINES
    first, last, best = min(table), max(table), min(table, key=table.get)
    rows = f"SGD {_f(baselines['sgd'], 1)}, global RMS {_f(baselines['global_rms'], 1)}"
    if short:
        return (f"RMSprop ε {_eps(first)} … {_eps(last)}: {_f(table[first], 1)} → best {_f(table[best], 1)} at "
                f"{_eps(best)} → {_f(table[last], 1)}; {rows}")
    return (f"PTB valid ppl: RMSprop ε {' / '.join(_eps(e) for e in table)}: "
            + " / ".join(_f(v, 1) for v in table.values())
            + f" (best {_f(table[best], 1)} at {_eps(best)}); {rows}; static "
            f"{_f(reference_dyneval.DYNEVAL_STATIC_VALID_PTB, 1)}")


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


def _passes(results: Results, corpus: str, tokens: int, whose: str = "its") -> str:
    """``tokens`` training tokens as passes over ``corpus``' training split: "1.34 passes over its 929,589 training
    tokens" (from the data summary; empty without it)."""
    split = results.get("data_summary", {}).get(corpus, {}).get("splits", {}).get("train", {}).get("tokens")
    if not split:
        return ""
    share = tokens / split
    return f"{share:.2f} {'passes' if share >= 1 else 'of a pass'} over {whose} {split:,} training tokens"


def _static_test(results: Results, corpus: str) -> float:
    return _dyn_rows(results, corpus)["static"]["test_ppl"]


def _dyn_model(results: Results, corpus: str) -> str:
    """The word-level model: how much of ``corpus`` it was trained on, from one training seed, and its static test
    perplexity beside the thesis' AWD-LSTM's."""
    m = results["dyneval"]["model"]
    c = results["dyneval"]["corpora"][corpus]
    passes = _passes(results, corpus, c["train_tokens"])
    return (f"{m['num_layers']}-layer {m['cell'].upper()} H={m['hidden_size']} trained on {c['train_tokens']:,} "
            f"{_CORPUS.get(corpus, corpus)} tokens" + (f" ({passes})" if passes else "") + _budget(c)
            + ", one training seed; "
            f"static test ppl {_f(_static_test(results, corpus), 1)} on {_TABLE.get(corpus, 'its table')}'s test "
            f"prefix (thesis {_f(reference_dyneval.DYNEVAL_TABLES[corpus]['static'][1], 1)})")


def _budget(trained: Mapping[str, Any]) -> str:
    """" in 2,224 steps (the step budget, not to convergence)" for a model trained to a fixed number of steps."""
    steps = trained.get("train_steps")
    return f" in {steps:,} steps (the step budget, not to convergence)" if steps else ""


_CORPUS = {"ptb": "PTB", "wikitext2": "WikiText-2"}
_TABLE = {"ptb": "Table 4.1", "wikitext2": "Table 4.2"}
_RMS_NORM = "RMS_norm averaged over parameter tensors as in the author's code (eq. 4.6)"


def _millions(count: int) -> str:
    """24000000 as "24M"."""
    return f"{count / 1e6:.0f}M"


def _per_corpus(values: dict[str, str]) -> str:
    return ", ".join(f"{_CORPUS.get(k, k)} {v}" for k, v in values.items())


def _dyn_scale(results: Results) -> str:
    """K-T4.1 / K-T4.2: the model per corpus (training tokens as passes, one seed, static test perplexity beside the
    thesis'), the validation prefix the settings were tuned on, the test prefix and its blocks, sparse dynamic
    evaluation's form."""
    d = results["dyneval"]
    corpora = d["corpora"]
    c = corpora["ptb"]
    blocks = c.get("test_block_tokens", [])
    m, trained = d["model"], {k: v["train_tokens"] for k, v in corpora.items()}
    passes = [_passes(results, k, n, f"{_CORPUS.get(k, k)}'s") for k, n in trained.items()]
    model = (f"{m['num_layers']}-layer {m['cell'].upper()} H={m['hidden_size']}, one training seed, trained on "
             + (f"{c['train_tokens']:,} tokens of each corpus" if len(set(trained.values())) == 1 else
                ", ".join(f"{n:,} {_CORPUS.get(k, k)} tokens" for k, n in trained.items()))
             + (f" ({', '.join(passes)})" if all(passes) else "")
             + (_budget(c) if len({v.get("train_steps") for v in corpora.values()}) == 1 else ""))
    sizes = {k: v["parameters"] for k, v in corpora.items() if "parameters" in v}
    if sizes:
        theirs = {k: _millions(KRAUSE_WORD_MODELS[k]["parameters"]) for k in sizes if k in KRAUSE_WORD_MODELS}
        model += (f"; {_per_corpus({k: f'{n / 1e6:.2f}M' for k, n in sizes.items()})} parameters (the embedding and "
                  f"output layers sized by each vocabulary; thesis AWD-LSTM {_per_corpus(theirs)})")
    static = _per_corpus({k: _f(_static_test(results, k), 1) for k in corpora})
    thesis = ", ".join(_f(reference_dyneval.DYNEVAL_TABLES[k]["static"][1], 1) for k in corpora)
    valid = {k: v["valid_tokens"] for k, v in corpora.items()}
    prefix = (f"the first {c['valid_tokens']:,} validation tokens of each corpus" if len(set(valid.values())) == 1
              else "the first " + _per_corpus({k: f"{n:,}" for k, n in valid.items()}) + " validation tokens")
    static_valid = _per_corpus({k: _f(_dyn_rows(results, k)["static"]["valid_ppl"], 1) for k in corpora})
    thesis_valid = ", ".join(_f(reference_dyneval.DYNEVAL_TABLES[k]["static"][0], 1) for k in corpora)
    return (f"{model}; static test ppl {static} (thesis {thesis}); dynamic-evaluation and cache settings tuned on "
            f"{prefix} (static valid ppl {static_valid} on them; thesis: the whole split, {thesis_valid}); "
            f"{c['test_tokens']:,} test tokens per corpus"
            + (f" ({len(blocks)} blocks of {max(blocks)}, the bootstrap's units)" if blocks else "")
            + f"; sparse: M acts inside the recurrence (eq. 4.8); {_RMS_NORM}")


def _dyn_table_scale(results: Results) -> str:
    """K-T4.1 / K-T4.2: :func:`_dyn_scale`, how the final rule and the neural cache were tuned
    (:func:`_final_and_cache_tuning`), and how many training batches the global-RMS rules' MS_g (eq. 4.4) was
    collected from, from the stage's recorded settings."""
    gs = results.get("dyneval.params", {}).get("gradient_stats")
    scale = _dyn_scale(results) + _final_and_cache_tuning(results)
    return f"{scale}; {_gradient_stats(gs, ' per corpus')}" if gs else scale


def _grid_ends(row: dict[str, Any]) -> list[str]:
    """The settings of a table row picked at an end of the values its trials tried (an optimum not bracketed)."""
    ends = []
    for setting, value in row["settings"].items():
        tried = [t[setting] for t in row.get("trials", ()) if isinstance(t.get(setting), (int, float))]
        note = not_bracketed(value, tried) if isinstance(value, (int, float)) else ""
        if note:
            ends.append(f"{setting.replace('_', ' ')} {note}")
    return ends


_TUNED_ALIKE = (("global_rms_rms_decay", "final rule"), ("neural_cache", "cache"))


def _final_and_cache_tuning(results: Results) -> str:
    """How many trials the final rule (global RMS + RMS decay) and the neural cache each had per corpus (the two
    compared by 'beats the cache' were not tuned alike), and which settings of every row, those two and the other
    dynamic-evaluation rules, lie at an end of the values tried (an optimum not bracketed)."""
    out = []
    for corpus in results["dyneval"]["corpora"]:
        rows, shown = _dyn_rows(results, corpus), []
        for key, name in _TUNED_ALIKE:
            row = rows.get(key)
            if row and row.get("trials"):
                shown.append(f"{name} {len(row['trials'])} trials" + "".join(f", {e}" for e in _grid_ends(row)))
        for key in _DYN_ORDER:
            row = rows.get(key)
            if row and row.get("trials") and key not in dict(_TUNED_ALIKE):
                shown += [f"{row.get('label', key)}: {e}" for e in _grid_ends(row)]
        if shown:
            out.append(f"{_CORPUS.get(corpus, corpus)}: {', '.join(shown)}")
    return "; tuning: " + "; ".join(out) if out else ""


def _gradient_stats(gs: dict[str, Any], per: str = "") -> str:
    """Where the global-RMS rules' MS_g (eq. 4.4) comes from, from the stage's ``gradient_stats`` settings."""
    batches = "every training batch" if gs["max_batches"] is None else f"{gs['max_batches']:,} training batches"
    return (f"global-RMS statistics MS_g from {batches} of {gs['batch_size']}×{gs['bptt']} tokens{per} (eq. 4.4: every "
            "training batch)")


def _timescale_scale(results: Results) -> str:
    """K-F5.1 / K-T5.1: the independent test sequences of Fig. 5.1 and Table 5.1."""
    t, theirs = results["dyneval"]["timescale"], KRAUSE_FIG_5_1
    name = _CORPUS.get(t["corpus"], t["corpus"])
    return (f"{_dyn_model(results, t['corpus'])}; the first {t['sequences'] * t['length']:,} {name} test tokens cut "
            f"into {t['sequences']} independent sequences of {t['length']} words, each evaluated from the trained "
            f"weights and a zero state, curves in bins of {t['bin']} words; seen / unseen words counted over each "
            f"sequence's second half; the bootstrap margin rests on the {t['sequences']} sequences; global RMS + RMS "
            f"decay and the neural cache with the settings tuned for {_TABLE.get(t['corpus'], 'their table')}; "
            f"thesis: the {_CORPUS.get(theirs['corpus'], theirs['corpus'])} test set as {theirs['sequences']} "
            f"sequences of {theirs['length']:,} words, seen / unseen words counted over the second "
            f"{theirs['length'] // 2:,} of each")


def _related_scale(results: Results) -> str:
    """K-T5.2: the one update the probe makes, and the further targets."""
    rw = results["dyneval"]["related_words"]
    u = rw["update"]
    rule = {"global_rms": "global RMS", "sgd": "SGD"}.get(u["rule"], u["rule"])
    settings = ", ".join(f"{k} {v:g}" for k, v in u.items() if k not in ("rule", "segment_len"))
    return (f"{_dyn_model(results, rw['corpus'])}; one {rule} update ({settings}) on the segment of "
            f"{u['segment_len']} words ending in the target, at {_CORPUS.get(rw['corpus'], rw['corpus'])} test "
            f"position {rw['position']:,}; the {rw['extra_targets']['count']} further targets"
            f"{further_distinct(rw['extra_targets'])} are the next test words that are alphabetic, long and frequent "
            "in training; "
            f"embeddings {rw['embedding']}; nearest words by cosine of the output embedding")


def _valid_prefix(results: Results, tokens: int, blocks: list[int], corpus: str = "ptb") -> str:
    """A study's validation prefix: its size, blocks and share of the split (from the data summary when present)."""
    split = results.get("data_summary", {}).get(corpus, {}).get("splits", {}).get("valid", {}).get("tokens")
    share = f"; {tokens / split:.1%} of its {split:,} tokens" if split else ""
    return (f"every row tuned and scored on the first {tokens:,} tokens of {_CORPUS.get(corpus, corpus)} validation "
            f"({len(blocks)} blocks of {max(blocks)}{share}; thesis: all of it), so the bootstrap margin rests on "
            f"{len(blocks)} blocks")


def _lr_grid(settings: dict[str, Any]) -> str:
    return (f"learning rate per row on a ×{settings['lr_factor']:g} grid of at most {settings['max_evals']} points "
            "(thesis: ×1.2 until the validation loss peaks)")


def _optimizer_scale(item: str) -> Callable[[Results], str]:
    """K-T5.3 / K-T5.4 / K-T5.5: the optimizer studies' validation prefix, learning-rate grid and (where a global
    RMS row is compared) its gradient statistics."""
    def scale(results: Results) -> str:
        o = results["dyneval"]["optimizers"]
        params = results.get("dyneval.params", {})
        text = (f"{_dyn_model(results, o['corpus'])}; "
                f"{_valid_prefix(results, o['valid_tokens'], o['valid_block_tokens'], o['corpus'])}")
        if "optimizers" in params:
            text += f"; {_lr_grid(params['optimizers'])}"
            firsts = [row["sweep"][0]["lr"] for row in o["momentum"] if row.get("sweep")] if item == "K-T5.3" else []
            if len(set(firsts)) > 1:  # the sweeps start lower for larger μ (eqs. 5.10-5.11)
                text += (f"; each μ's sweep starts at the grid point nearest "
                         f"{params['optimizers']['lr_start']['sgd']:g}·(1-μ), "
                         f"lr {' / '.join(f'{lr:.2g}' for lr in firsts)}")
        if item != "K-T5.3" and params.get("gradient_stats"):
            text += f"; {_gradient_stats(params['gradient_stats'])}; {_RMS_NORM}"
        return text
    return scale


def _statistics_scale(item: str) -> Callable[[Results], str]:
    """K-T5.6 / K-T5.7: the statistics studies' validation prefix, learning-rate grid, what 100% of the statistics
    is and (K-T5.7) the independent stream of non-local RMSprop."""
    def scale(results: Results) -> str:
        d = results["dyneval"]
        a = d["statistics_amount"]
        params = results.get("dyneval.params", {}).get("statistics_study")
        text = (f"{_dyn_model(results, a['corpus'])}; "
                f"{_valid_prefix(results, a['valid_tokens'], a['valid_block_tokens'], a['corpus'])}")
        if params:
            text += f"; {_lr_grid(params)}"
        if statistics_share(a):
            text += f"; {statistics_share(a)} (thesis: 100% = every training batch)"
        source = d.get("statistics_locality", {}).get("statistics_source")
        if item == "K-T5.7" and source:
            text += (f"; non-local RMSprop's statistics from an independent stream of {source['tokens']:,} tokens of "
                     f"the {source['split']} split from offset {source['offset']:,}")
        return text
    return scale


def _timescale_ours(results: Results) -> str:
    """K-F5.1: the mean of each curve over the positions its full bins cover, and which of dynamic evaluation and
    the cache is lower (shown, not judged: no sentence of §5.1 orders them; Table 5.1 has dynamic evaluation below
    the cache on seen and on unseen words)."""
    t = results["dyneval"]["timescale"]
    curves = t["curves"]
    mean = {k: sum(v) / len(v) for k, v in curves.items()}
    bins = len(curves["static"])
    text = (f"mean loss over {t['sequences']} sequences, the first {bins * t['bin']} predicted words of each "
            f"{t['length']}-word sequence ({bins} full bins of {t['bin']}): "
            + ", ".join(f"{k.replace('_', ' ')} {_f(v, 3)}" for k, v in mean.items()) + " nats")
    dyn, cache = mean["dynamic"], mean["neural_cache"]
    if cache < dyn:
        text += ("; the cache below dynamic evaluation, the reverse of the thesis' order (Table 5.1: dynamic "
                 "evaluation below the cache on seen and on unseen words)")
    return text


def _seen_ours(results: Results) -> str:
    su = results["dyneval"]["timescale"]["seen_unseen"]
    return "seen / unseen nats: " + ", ".join(
        f"{k} {_f(su[k]['seen'])} / {_f(su[k]['unseen'])}" for k in ("static", "dynamic", "neural_cache"))


def _related_ours(results: Results) -> str:
    rw = results["dyneval"]["related_words"]
    ex = rw["extra_targets"]
    means = (f"; over them, mean Δ log p of the related words {ex['mean_top_delta']:+.2f}, the target "
             f"{ex['mean_target_delta']:+.2f}, the median word {ex['mean_median_delta']:+.2f}"
             if all(k in ex for k in ("mean_top_delta", "mean_target_delta", "mean_median_delta")) else "")
    return (f"'{rw['word']}' ({rw['corpus']}): Δ log p {rw['rows'][0]['delta']:+.2f}; top-{rw['top']} related mean "
            f"{rw['top_mean_delta']:+.2f} vs vocabulary median {rw['median']['delta']:+.2f}; related words above the "
            f"median for {ex['top_mean_above_median']} of {ex['count']} further targets{means}"
            + _profile_note(results, "dyneval"))


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
        return _claim_verdict(judge(results["dyneval"], item))
    return verdict


def _momentum_verdict(results: Results) -> tuple[str, str]:
    """K-T5.3's verdict as its claim judges it; the reason names the μ with the lowest perplexity where it is not
    μ = 0 (by how much, and whether inside the margin); where "perplexity rises with μ" fails only on steps the other
    way inside their margins, it says so (how many steps, by how much), and it names the thesis' μ not run."""
    claim = judge(results["dyneval"], "K-T5.3")
    steps = momentum_steps(results["dyneval"])
    best = momentum_best(results["dyneval"])
    against = [s for s in steps if s.get("gap", s["ppl"]) <= 0]
    labels = []
    for part in claim.parts:
        label = part.label
        if part.label == "plain SGD is best" and best:
            inside = ", in the margin" if "margin" in best and -best["gap"] <= best["margin"] else ""
            label += f" (μ {best['mu']:g} lowest by {best['below']:.2f} ppl{inside})"
        if part.label == "perplexity rises with μ" and part.verdict == "not reproduced" and against \
                and all("margin" in s and -s["gap"] <= s["margin"] for s in against):
            down = " / ".join(f"{-step['ppl']:.2f}" for step in against)
            label += f" ({len(against)} of {len(steps)} steps down {down} ppl in the margin)"
        labels.append((label, part.verdict))
    unrun = ["larger μ" if n.startswith("the thesis' larger μ") else n for n in claim.not_run]
    return index_text(claim), grouped_reason(labels, f"not run: {', '.join(unrun)}" if unrun else "")


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
    """K-T6.3: the Transformer, its training (tokens as passes over WikiText-2, one seed), its static test perplexity
    beside the thesis', and the validation and test prefixes."""
    r = results["dyneval_transformer"]
    m = r["model"]
    opts = m.get("options", {})
    passes = _passes(results, r.get("corpus", "wikitext2"), m["train_tokens"], "WikiText-2's")
    static = {row["key"]: row["test_ppl"] for row in r["rows"]}["static"]
    return (f"{m['num_layers']}-layer Transformer-XL-style word model, d = {m['hidden_size']}, memory "
            f"{opts.get('memory_length', 0)}, {m['parameters'] / 1e6:.1f}M parameters, trained {m['train_steps']:,} "
            f"steps ({m['train_tokens'] / 1e6:.1f}M tokens" + (f", {passes}" if passes else "") + "; the step budget, "
            "not to convergence) on WikiText-2 "
            "(the seed item's analogue of WikiText-103), one training seed; static test ppl "
            f"{_f(static, 1)} (thesis {_f(reference_dyneval.DYNEVAL_TRANSFORMER_TABLE_6_3['static']['test'], 1)} on "
            f"WikiText-103); rules tuned on {r['valid_tokens']:,} validation tokens, scored on "
            f"{r['test_tokens']:,} test tokens in segments of {r['segment_len']}")


def _word_transformer_verdict(results: Results) -> tuple[str, str]:
    return _claim_verdict(TRANSFORMER_CLAIMS["K-T6.3"](results["dyneval_transformer"]))
