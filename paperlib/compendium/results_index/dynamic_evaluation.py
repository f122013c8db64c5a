"""Index rows of dynamic evaluation (Krause chs. 3-6): the word-level tables and studies, and the
character-level analogues (recovery, scaling, out-of-domain text)."""

from __future__ import annotations

from typing import Any, Callable

from paperlib.reference import dynamic_evaluation as reference_dyneval
from paperlib.experiments.dynamic_evaluation.char_claims import CLAIMS as CHAR_CLAIMS
from paperlib.experiments.dynamic_evaluation.claims import momentum_steps, statistics_share
from paperlib.experiments.dynamic_evaluation.transformer_claims import CLAIMS as TRANSFORMER_CLAIMS, improvement

from paperlib.compendium.results_index.text import (
    Results, _claim_verdict, _f, _profile_note, grouped_reason, index_text, model_name,
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


def _dyn_model(results: Results, corpus: str) -> str:
    """The word-level model and how much of ``corpus`` it was trained on."""
    m = results["dyneval"]["model"]
    c = results["dyneval"]["corpora"][corpus]
    return (f"{m['num_layers']}-layer {m['cell'].upper()} H={m['hidden_size']} trained on {c['train_tokens']:,} "
            f"{_CORPUS.get(corpus, corpus)} tokens")


_CORPUS = {"ptb": "PTB", "wikitext2": "WikiText-2"}
_TABLE = {"ptb": "Table 4.1", "wikitext2": "Table 4.2"}
_RMS_NORM = "RMS_norm averaged over parameter tensors as in the author's code (eq. 4.6)"


def _dyn_scale(results: Results) -> str:
    """K-T4.1 / K-T4.2: the model per corpus, the test prefix and its blocks, sparse dynamic evaluation's form."""
    d = results["dyneval"]
    c = d["corpora"]["ptb"]
    blocks = c.get("test_block_tokens", [])
    m, trained = d["model"], {k: v["train_tokens"] for k, v in d["corpora"].items()}
    model = (f"{m['num_layers']}-layer {m['cell'].upper()} H={m['hidden_size']} trained on "
             + (f"{c['train_tokens']:,} tokens of each corpus" if len(set(trained.values())) == 1 else
                ", ".join(f"{n:,} {_CORPUS.get(k, k)} tokens" for k, n in trained.items())))
    return (f"{model}; {c['test_tokens']:,} test tokens per corpus"
            + (f" ({len(blocks)} blocks of {max(blocks)}, the bootstrap's units)" if blocks else "")
            + f"; sparse: M acts inside the recurrence (eq. 4.8); {_RMS_NORM}")


def _dyn_table_scale(results: Results) -> str:
    """K-T4.1 / K-T4.2: :func:`_dyn_scale` and how many training batches the global-RMS rules' MS_g (eq. 4.4) was
    collected from, from the stage's recorded settings."""
    gs = results.get("dyneval.params", {}).get("gradient_stats")
    if not gs:
        return _dyn_scale(results)
    return f"{_dyn_scale(results)}; {_gradient_stats(gs, ' per corpus')}"


def _gradient_stats(gs: dict[str, Any], per: str = "") -> str:
    """Where the global-RMS rules' MS_g (eq. 4.4) comes from, from the stage's ``gradient_stats`` settings."""
    batches = "every training batch" if gs["max_batches"] is None else f"{gs['max_batches']:,} training batches"
    return (f"global-RMS statistics MS_g from {batches} of {gs['batch_size']}×{gs['bptt']} tokens{per} (eq. 4.4: every "
            "training batch)")


def _timescale_scale(results: Results) -> str:
    """K-F5.1 / K-T5.1: the independent test sequences of Fig. 5.1 and Table 5.1."""
    t = results["dyneval"]["timescale"]
    name = _CORPUS.get(t["corpus"], t["corpus"])
    return (f"{_dyn_model(results, t['corpus'])}; the first {t['sequences'] * t['length']:,} {name} test tokens cut "
            f"into {t['sequences']} independent sequences of {t['length']} words, each evaluated from the trained "
            f"weights and a zero state, curves in bins of {t['bin']} words; seen / unseen words counted over each "
            f"sequence's second half; the bootstrap margin rests on the {t['sequences']} sequences; global RMS + RMS "
            f"decay and the neural cache with the settings tuned for {_TABLE.get(t['corpus'], 'their table')}")


def _related_scale(results: Results) -> str:
    """K-T5.2: the one update the probe makes, and the further targets."""
    rw = results["dyneval"]["related_words"]
    u = rw["update"]
    rule = {"global_rms": "global RMS", "sgd": "SGD"}.get(u["rule"], u["rule"])
    settings = ", ".join(f"{k} {v:g}" for k, v in u.items() if k not in ("rule", "segment_len"))
    return (f"{_dyn_model(results, rw['corpus'])}; one {rule} update ({settings}) on the segment of "
            f"{u['segment_len']} words ending in the target, at {_CORPUS.get(rw['corpus'], rw['corpus'])} test "
            f"position {rw['position']:,}; the {rw['extra_targets']['count']} further targets are the next test words "
            "that are alphabetic, long and frequent in training; "
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


def _char_timescale_scale(results: Results) -> str:
    """K-F5.2: the character-level scale and Fig. 5.2's sequences, bins and out-of-domain text."""
    r, paper = _char(results), reference_dyneval.DYNEVAL_CHAR_FIG_5_2
    t = r["timescale"]
    ood = {"wikitext2": "WikiText-2 mapped to PTB characters"}.get(r.get("ood_corpus"), r.get("ood_corpus", "?"))
    return (f"{_char_training(results)}; Fig. 5.2: {t['sequences']:,} sequences × {t['length']:,} characters in bins of "
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
        from paperlib.experiments.dynamic_evaluation.claims import claims  # lazily: it loads torch

        return _claim_verdict(claims(results["dyneval"])[item])
    return verdict


def _momentum_verdict(results: Results) -> tuple[str, str]:
    """K-T5.3's verdict as its claim judges it; where "perplexity rises with μ" fails only on steps the other way
    inside their margins, the reason says so (how many steps, by how much), and it names the thesis' μ not run."""
    from paperlib.experiments.dynamic_evaluation.claims import claims  # lazily: it loads torch

    claim = claims(results["dyneval"])["K-T5.3"]
    steps = momentum_steps(results["dyneval"])
    against = [s for s in steps if s.get("gap", s["ppl"]) <= 0]
    labels = []
    for part in claim.parts:
        label = part.label
        if part.label == "perplexity rises with μ" and part.verdict == "not reproduced" and against \
                and all("margin" in s and -s["gap"] <= s["margin"] for s in against):
            down = " / ".join(f"{-step['ppl']:.2f}" for step in against)
            label += f" ({len(against)} of {len(steps)} steps down {down} ppl in the margin)"
        labels.append((label, part.verdict))
    unrun = ["larger μ" if n.startswith("the thesis' larger μ") else n for n in claim.not_run]
    return index_text(claim), grouped_reason(labels, f"not run: {', '.join(unrun)}" if unrun else "")


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
        return f"test bpc ({model}): {rows}{share}" + _profile_note(results, "dyneval_char")
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
    return (f"{_char_training(results)}; the sweep's sizes {sizes}, trained alike"
            + (f" from {seeds} training seeds each (the main models are the first)" if seeds > 1 else "")
            + (f", validation bpc on {valid:,} characters" if valid else ""))


def _sweep_seeds(scaling: dict[str, Any]) -> int:
    """The most training seeds any point of the Fig. 3.2 sweep averages (1 when none keeps its seeds)."""
    return max((len(p.get("valid_bpc_seeds", [0])) for points in scaling.values() for p in points), default=1)


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
    return "per-bin advantage (bpc) " + "; ".join(out) + _profile_note(results, "dyneval_char")


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
    return "bits at k = 0..4 after a surprising character: " + "; ".join(
        f"{m} {' / '.join(_f(x) for x in rec['after_bits'][m])} (overall {_f(rec['overall_bits'][m])})"
        for m in rec["models"]) + _profile_note(results, "dyneval_char")


def _scaling_ours(results: Results) -> str:
    sc = _char(results)["scaling"]
    seeds = _sweep_seeds(sc)
    return "valid bpc vs params" + (f" (mean of {seeds} seeds)" if seeds > 1 else "") + ": " + "; ".join(
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
