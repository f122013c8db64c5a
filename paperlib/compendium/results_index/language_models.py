"""Index rows of the language-model experiments: Melis chs. 2 and 4 (PTB words and characters, the
Mogrifier ablation), the tuning studies and Krause's byte-level WikiText-2 table (reverse copy:
:mod:`paperlib.compendium.results_index.reverse_copy`)."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from paperlib.experiments.language_models.claims import (
    TABLE_STAGES, ablation_claim, against, byte_comparison, compare_seed_means, on_par, ordering_claim, recipe_options,
    table_3_3_claim, table_comparisons,
)
from paperlib.reference.byte_lm import BYTE_MLSTM, BYTE_MLSTM_SETUP, TABLE_3_3, TEST_BITS_PER_BYTE
from paperlib.reference.language_models import CHAPTER_4_MOGRIFIER
from paperlib.experiments.common.claims import Unjudged
from paperlib.experiments.language_models.tuning_claims import neighbourhood_claim, neighbourhood_numbers
from paperlib.reference.tuning import TUNING
from paperlib.search_spaces import get_space

from paperlib.compendium.results_index.text import (
    Results, _claim_verdict, _clip, _f, _profile_note, index_text, model_name,
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


def _lm_paper(rows: list[dict[str, Any]], unit: str, short: bool = False, baseline: str | None = None) -> str:
    """The thesis' test numbers; short: one entry per model, its tables' numbers joined by " / ". ``baseline``: the
    table (e.g. "Table 4.1") whose baseline row a chapter-2 row is (Tables 4.1 / 4.2 reprint ch. 2's Mogrifier)."""
    def source(r: dict[str, Any]) -> str:
        return r["source"] + (f", {baseline}'s baseline row" if baseline and r["source"].startswith("Melis T2")
                              else "")

    if not short:
        return f"test {unit} " + "; ".join(f"{model_name(r['model'])} {r['test']} ({source(r)})" for r in rows)
    by_model: dict[str, list[str]] = {}
    for r in rows:
        by_model.setdefault(r["model"], []).append(f"{r['test']}")
    return f"test {unit} " + ", ".join(f"{model_name(m)} {' / '.join(v)}" for m, v in by_model.items())


# The thesis' training length of each table's models, in epochs (§2.3.1: the ablation's shortened schedule of 145
# epochs instead of 964; §4.6: about 400 epochs for PTB words, 100 for PTB characters, which §4.7 calls half the
# epochs of ch. 2's baseline).
THESIS_EPOCHS = {"M-T2.1": "964 epochs (§2.3.1)", "M-T4.1": "about 400 epochs (§4.6)",
                 "M-T2.2": "about 200 epochs (twice Table 4.2's, §4.7)", "M-T4.2": "100 epochs (§4.6)",
                 "M-T2.3": "145 epochs (§2.3.1)", "M-F2.3": "145 epochs (§2.3.1)"}
# §4.6's training of ch. 4's PTB models: (batch size, BPTT window, dropout samples in the objective); §4.7 credits
# the multiple dropout samples with most of ch. 4's gain over ch. 2's baseline.
THESIS_CH4_TRAINING = {"M-T4.1": (128, 70, 8), "M-T4.2": (128, 200, 4)}
THESIS_MC_MASKS = 200  # §2.3: Monte Carlo dropout averages 200 masks


def _lm_paper_mc(rows: list[dict[str, Any]], digits: int) -> str:
    """The thesis' test numbers with Monte Carlo dropout (the rows that have them, ``digits`` decimals as printed),
    "with MC dropout LSTM 54.1, Mogrifier 50.1 (Melis T2.1)"."""
    rows = [r for r in rows if r.get("test_mc") is not None]
    sources = sorted({r["source"] for r in rows})
    return ("with MC dropout " + ", ".join(f"{model_name(r['model'])} {r['test_mc']:.{digits}f}" for r in rows)
            + f" ({', '.join(sources)})")


def _lm_scale(name: str, item: str | None = None, shared_recipe: bool = False) -> Callable[[Results], str]:
    """Per model its hidden size and parameters, then the training budget every model got (runs of one experiment
    train on equal tokens) in tokens, steps and epochs (beside the thesis' epochs for ``item``), whether the
    validation loss was still falling at the end, each model's learning rate where they differ, the number of
    seeds, the evaluated prefixes of the validation and test splits and, with ``shared_recipe`` (a stage that
    trains every model with the LSTM's recipe, the ablation), that the models share it when they do."""
    def scale(results: Results) -> str:
        r = results[name]
        sizes = ", ".join(f"{model_name(m)} H={r['models'][m]['hidden_size']} {s['parameters'] / 1e6:.2f}M"
                          for m, s in r["summary"].items())
        whole = _split_tokens(results, name, "train")
        budgets = sorted({(x["steps"], x["train_tokens"]) for x in r["runs"]})
        budget = "; ".join(f"{tokens / 1e6:.2f}M training tokens ({steps:,} steps"
                           + (f", {tokens / whole:.2f} epochs" if whole else "") + ")" for steps, tokens in budgets)
        thesis = f" (thesis: {THESIS_EPOCHS[item]})" if item in THESIS_EPOCHS else ""
        seeds = sorted({s["seeds"] for s in r["summary"].values()})
        return (f"{sizes}; each {budget}{thesis}{_still_falling(r)}{_learning_rates(r)}{_chrono(r, item)}"
                f"{_training_setup(r, item)}{_baseline_behind(r, item)}{_rlstm_recipe(r, item)}; "
                f"{'/'.join(map(str, seeds))} seed(s) per model" + _eval_prefix(results, name, "valid")
                + _test_prefix(results, name) + (_one_recipe(r) if shared_recipe else ""))
    return scale


def _split_tokens(results: Results, name: str, split: str) -> int | None:
    """The tokens of ``split`` of stage ``name``'s corpus (from ``data_summary``), or None."""
    corpus = results[name].get("corpus")
    return results.get("data_summary", {}).get(corpus, {}).get("splits", {}).get(split, {}).get("tokens")


def _still_falling(r: Results) -> str:
    """"; validation loss lowest at the last evaluation in 9 of 9 runs (still falling)": how many runs had not
    stopped improving when training ended (each run's history of validation losses)."""
    histories = [[h["valid_nll"] for h in run.get("history", []) if "valid_nll" in h] for run in r["runs"]]
    histories = [h for h in histories if len(h) >= 2]
    if not histories:
        return ""
    last = sum(1 for h in histories if h[-1] <= min(h))
    return (f"; validation loss lowest at the last evaluation in {last} of {len(histories)} runs"
            + (" (still falling)" if last == len(histories) else ""))


def _training_setup(r: Results, item: str | None) -> str:
    """Our batch, BPTT window and dropout samples beside §4.6's for a ch. 4 table, and our Monte Carlo dropout masks
    beside §2.3's 200 for a ch. 2 table that evaluates with them; "" elsewhere."""
    train = r.get("train", {})
    if item in THESIS_CH4_TRAINING and {"batch_size", "bptt"} <= train.keys():
        batch, bptt, samples = THESIS_CH4_TRAINING[item]
        ours = train.get("num_samples", 1)
        return (f"; batch {train['batch_size']} × BPTT {train['bptt']} with {ours} dropout sample{'s' * (ours > 1)} "
                f"(thesis: {batch} × {bptt} with {samples}, §4.6; §4.7 credits the multiple samples with most of "
                "ch. 4's gain)")
    if item in ("M-T2.1", "M-T2.2") and r.get("mc_samples"):
        return f"; Monte Carlo dropout averages {r['mc_samples']} masks (thesis: {THESIS_MC_MASKS})"
    return ""


def _rlstm_recipe(r: Results, item: str | None) -> str:
    """For a ch. 4 table: "; the Mogrifier RLSTM trains with the Mogrifier's recipe unchanged ..." where its training
    settings and options (but the cell's own) are the Mogrifier's: the thesis tunes each of its models (§4.6), so our
    RLSTM row is not set against a tuned Mogrifier on equal terms; "" elsewhere."""
    models = r.get("models", {})
    if item not in THESIS_CH4_TRAINING or not {"mogrifier_lstm", "mogrifier_rlstm"} <= models.keys():
        return ""
    mog, rlstm = models["mogrifier_lstm"], models["mogrifier_rlstm"]
    if recipe_options(mog) != recipe_options(rlstm) or mog.get("train") != rlstm.get("train"):
        return ""
    return ("; the Mogrifier RLSTM trains with the Mogrifier's recipe unchanged (learning rate, schedule, dropouts; "
            "the thesis tunes each model, §4.6)")


# The thesis' ch. 2 table each ch. 4 table's Mogrifier baseline comes from.
CH2_TABLE = {"M-T4.1": "Table 2.1", "M-T4.2": "Table 2.2"}


def _baseline_behind(r: Results, item: str | None) -> str:
    """For a ch. 4 table, whose RLSTM row improves on the Mogrifier: "; here the Mogrifier itself is behind the LSTM
    ..." where its seed mean of the test metric is behind the LSTM's beyond their seed margin (the RLSTM is then set
    against a baseline that has not reached the thesis' ch. 2 ordering at this budget); else ""."""
    summary = r.get("summary", {})
    if item not in CH2_TABLE or not {"lstm", "mogrifier_lstm"} <= summary.keys():
        return ""
    key = next((k for k in ("test_bpc", "test_ppl") if k in summary["lstm"]), None)
    if key is None:
        return ""
    pair = compare_seed_means(summary, "lstm", "mogrifier_lstm", key)  # positive: the Mogrifier ahead
    if pair["tie margin"] is None or pair["our gap"] >= -pair["tie margin"]:
        return ""
    unit, digits = ("bpc", 3) if key == "test_bpc" else ("ppl", 1)
    return (f"; here the Mogrifier itself is behind the LSTM ({summary['mogrifier_lstm'][key]:.{digits}f} vs "
            f"{summary['lstm'][key]:.{digits}f} test {unit}, beyond their seed margin {pair['tie margin']:.{digits}f}; "
            f"the thesis has it ahead, {CH2_TABLE[item]}): the RLSTM is set against a baseline that has not reached "
            "the thesis' ordering at this budget")


def _chrono(r: Results, item: str | None) -> str:
    """"; Chrono initialisation (T_max 70) in every model, a ch. 4 setting: Table 2.1's models have none" for a
    chapter-2 table or figure (the ablation's too) whose models were trained with Chrono's forget-gate
    initialisation (§4.2), else ""."""
    names = {"M-T2.1": "Table 2.1", "M-T2.2": "Table 2.2", "M-T2.3": "Table 2.3", "M-F2.3": "Fig. 2.3"}
    if item not in names:
        return ""
    maxima = {spec.get("options", {}).get("chrono_t_max") for spec in r["models"].values()}
    if maxima == {None}:
        return ""
    which = "every model" if None not in maxima else "some models"
    shown = "/".join(f"{m:g}" for m in sorted(m for m in maxima if m is not None))
    return f"; Chrono initialisation (T_max {shown}) in {which}, a ch. 4 setting: {names[item]}'s models have none"


def _learning_rates(r: Results) -> str:
    """"; learning rate LSTM 0.008, Mogrifier 0.004" when models override the stage's learning rate, else ""."""
    base = r.get("train", {}).get("lr")
    rates = {m: spec.get("train", {}).get("lr", base) for m, spec in r["models"].items() if m in r["summary"]}
    if base is None or len(set(rates.values())) < 2:
        return ""
    return "; learning rate " + ", ".join(f"{model_name(m)} {lr:g}" for m, lr in rates.items())


def _one_recipe(r: Results) -> str:
    """"; every model trains with one recipe ..." when every model trains with the stage's settings and the LSTM's
    dropouts (none has settings of its own; the thesis tunes each), else ""."""
    models = r["models"]
    if "lstm" not in models or len(models) < 2 or any("train" in spec for spec in models.values()):
        return ""
    if any(recipe_options(spec) != recipe_options(models["lstm"]) for spec in models.values()):
        return ""
    return ("; every model trains with one recipe, the LSTM's (learning rate, schedule, dropouts), none tuned for "
            "itself (the thesis tunes each)")


def _eval_prefix(results: Results, name: str, split: str) -> str:
    """"; validated on the first N of M validation <units>" (``split`` "valid") or "; tested on ..." ("test") when
    the stage evaluated a prefix of the split (its size from ``data_summary`` when at hand), else nothing."""
    r = results[name]
    used = r.get("eval_tokens", {}).get(split)
    unit = "characters" if r.get("level") == "char" else "tokens"
    whole = _split_tokens(results, name, split)
    if used is None or (whole is not None and used >= whole):
        return ""
    verb, noun = ("validated", "validation") if split == "valid" else ("tested", "test")
    return f"; {verb} on the first {used:,}" + (f" of the {whole:,}" if whole else "") + f" {noun} {unit}"


def _test_prefix(results: Results, name: str) -> str:
    """"; tested on the first N of M test <units>" when the stage evaluated a prefix of the test split (its size from
    ``data_summary`` when at hand), else nothing."""
    return _eval_prefix(results, name, "test")


def _pair_phrase(pair: Mapping[str, Any], word: str, unit: str, digits: int, column: str = "") -> str:
    """One judged pair for a reason: who is ahead, by how much (``column``: e.g. " with MC dropout"), and whether the
    gap clears the tie margin (``word``: the part's verdict)."""
    better, worse = model_name(pair["paper: better"]), model_name(pair["than"])
    gap, margin = pair["our gap"], pair["tie margin"]
    if word == "reproduced":
        return f"{better} ahead of {worse} by {gap:.{digits}f} {unit}{column}"
    if word == "within noise":
        return f"{better} ahead of {worse} by only {gap:.{digits}f} {unit}{column}" + (
            " (one seed)" if margin is None else f" (margin {margin:.{digits}f})")
    return (f"{worse} ahead of {better} by {-gap:.{digits}f} {unit}{column}"
            + ("" if against(pair) else " (inside the margin)"))


def _ordering_verdict(item: str) -> Callable[[Results], tuple[str, str]]:
    """Row ``item``'s claim (:func:`paperlib.experiments.language_models.claims.ordering_claim`); the reason names who is ahead
    of whom by how much, per comparison (:func:`~paperlib.experiments.language_models.claims.table_comparisons`, whose
    order the claim's parts follow)."""
    def verdict(results: Results) -> tuple[str, str]:
        r = results[TABLE_STAGES[item]]
        judged = ordering_claim(r, item)
        unit, digits = ("bpc", 3) if r["level"] == "char" else ("ppl", 1)
        found, _ = table_comparisons(r, item)
        words = [p.verdict for p in judged.parts]
        reason = "; ".join(_pair_phrase(c["pair"], w, unit, digits, " with MC dropout" if c["column"] == "MC" else "")
                           for c, w in zip(found, words))
        if all(w == "reproduced" for w in words):
            reason += ", each beyond seed noise" if len(words) > 1 else ", beyond seed noise"
        elif all(w == "not reproduced" for w in words) and all(against(c["pair"]) for c in found):
            reason = "the opposite: " + reason
        elif all(w == "not reproduced" for w in words):
            reason = "no lead beyond seed noise: " + reason
        return index_text(judged), _clip(reason + (f"; {judged.note}" if judged.note else ""))
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
                f"({_f(found['reference'], 1)} over {len(found['reruns'])} seeds)" + _mogrifier_shape(rec) + probes
                + _profile_note(results, "tuning_ptb"))
    return ours


def _mogrifier_shape(record: Results) -> str:
    """"; the best: r = 1 round, full rank (k = -20)" for a Mogrifier study's best trial (k <= 0 is full rank,
    §2.A), else ""."""
    params = (record.get("best") or {}).get("params", {})
    if "mogrifier_rounds" not in params or "mogrifier_rank" not in params:
        return ""
    rounds, rank = params["mogrifier_rounds"], params["mogrifier_rank"]
    shape = f"full rank (k = {rank})" if rank <= 0 else f"rank k = {rank}"
    return f"; the best: r = {rounds} round{'s' if rounds != 1 else ''}, {shape}"


def _tuning_scale(results: Results) -> str:
    """Both studies' models (hidden size, the best trial's parameters), the training budget per trial (steps, tokens,
    epochs of the training split), what a trial's value is scored on (the validation windows the trainer reads from
    the stage's validation prefix), and the number of trials, against the thesis'."""
    r = results["tuning_ptb"]
    st, train = r["settings"], r["settings"]["train"]
    models = ", ".join(
        f"{model_name(spec['cell'])} H={spec['hidden_size']}"
        + (f" ({r['models'][m]['best']['parameters'] / 1e6:.2f}M params at the best trial)"
           if r["models"].get(m, {}).get("best", {}).get("parameters") else "")
        for m, spec in st["models"].items())
    tokens = train["max_steps"] * train["batch_size"] * train["bptt"]
    whole = results.get("data_summary", {}).get(st.get("corpus"), {}).get("splits", {})
    epochs = (f", {tokens / whole['train']['tokens']:.2f} epochs" if whole.get("train", {}).get("tokens") else "")
    return (f"2 layers: {models}; {train['max_steps']:,} steps of {train['batch_size']}×{train['bptt']} tokens per "
            f"trial ({tokens / 1e6:.2f}M tokens{epochs}){_trial_scoring(st, whole.get('valid', {}).get('tokens'))}"
            f"{_best_still_falling(r)}; "
            f"{st['trials']} trials + {st.get('neighbours', 0)} neighbours + {st.get('reruns', 0)} reruns per model "
            f"(thesis: {TUNING['parameters'] / 1e6:.0f}M params, full runs, hundreds of trials)")


def _best_still_falling(r: Results) -> str:
    """"; the best LSTM trial's validation loss still falling at its last evaluation (5.266 -> 5.139 nats)": for each
    study whose best trial had not stopped improving when its budget ended (its intermediate validation losses), so
    a reader knows the landscape around it is one of unconverged models, not the thesis' converged ones."""
    falling = []
    for m, rec in r["models"].items():
        history = [value for _, value in (rec.get("best") or {}).get("intermediate", [])]
        if len(history) >= 2 and history[-1] < history[-2]:
            falling.append(f"{model_name(r['settings']['models'][m]['cell'])} {history[-2]:.3f} -> {history[-1]:.3f}")
    if not falling:
        return ""
    return ("; the best trial's validation loss still falling at its last evaluation (" + ", ".join(falling)
            + " nats): not converged")


def _trial_scoring(settings: Results, valid_tokens: int | None) -> str:
    """"; each trial scored on 14,000 validation tokens (...)": the trainer's evaluation reads the validation prefix
    in ``eval_batch_size`` rows and at most ``eval_max_windows`` windows of ``bptt`` per row."""
    train, prefix = settings["train"], settings.get("eval_tokens") or valid_tokens
    if not prefix:
        return ""
    rows, bptt, cap = train.get("eval_batch_size", 10), train["bptt"], train.get("eval_max_windows")
    per_row = prefix // rows
    read = per_row - 1 if cap is None else min(per_row - 1, cap * bptt)
    scored = rows * read
    share = f", {scored / valid_tokens:.0%} of the {valid_tokens:,}" if valid_tokens else ""
    windows = "" if cap is None else f" × {min(cap, -(-(per_row - 1) // bptt))} windows of {bptt}"
    return (f"; each trial's value scored on {scored:,} validation tokens ({rows} rows{windows} from the first "
            f"{prefix:,}{share})")


def _tuning_verdict(item: str) -> Callable[[Results], tuple[str, str]]:
    def verdict(results: Results) -> tuple[str, str]:
        """The claim as :func:`paperlib.experiments.language_models.tuning_claims.neighbourhood_claim` judges it."""
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
    scored = (f" (on the {r['eval_bytes']['test']:,} test bytes scored, {r['eval_words']['test']:,} words: "
              f"{r['eval_bytes']['test'] / r['eval_words']['test']:.2f} bytes a word)" if "eval_words" in r else "")
    return "; ".join(parts) + scored + (
        f"; eq. 3.15 on the whole test file ({check['bytes'] / check['words']:.2f} bytes a word) maps the thesis' "
        f"{check['bits_per_byte']:.4f} bits/byte to {_f(check['perplexity'], 1)}" + _profile_note(results, "lm_wt2_bytes"))


def _byte_lm_scale(results: Results) -> str:
    r = results["lm_wt2_bytes"]
    runs, train = r["runs"], r["train"]
    params = sorted({s["parameters"] for s in r["summary"].values()})
    seen = max(run["train_tokens"] for run in runs) if runs else 0
    low, high = (f"{p / 1e6:.2f}" for p in (params[0], params[-1]))
    size = low if low == high else f"{low}–{high}"
    return (f"1 layer, {size}M params each, {seen / 1e6:.1f}M training bytes ({seen / r['train_bytes']:.2f} passes "
            f"over the {r['train_bytes'] / 1e6:.1f}M of the training split; {train['max_steps']:,} steps), "
            f"{r['eval_bytes']['test']:,} test bytes, {max(s['seeds'] for s in r['summary'].values())} seed(s)"
            + (f"; a {train['schedule']} learning rate" if train.get("schedule") else "") + _still_falling(r))


def _byte_lm_verdict(results: Results) -> tuple[str, str]:
    """K-T3.3 reads from Table 3.3's own claim alone
    (:func:`~paperlib.experiments.language_models.claims.table_3_3_claim`: the byte mLSTM on par with word-level
    LSTMs); where the scale cannot judge it the row is not attempted, and the
    mLSTM-vs-LSTM comparison the stage measures (borrowed from the thesis' Tables 3.1-3.2) is shown as context,
    without a verdict of its own."""
    r = results["lm_wt2_bytes"]
    try:
        return _claim_verdict(table_3_3_claim(r))
    except Unjudged:
        _, why = on_par(r)
    comparison = byte_comparison(r)
    context = "" if comparison is None else (
        "; context, not judged: the mLSTM against an LSTM of the same size, the thesis' comparison on enwik8 and "
        f"text8 (Tables 3.1-3.2; Table 3.3 has no byte LSTM) ({comparison.evidence})")
    size = r["summary"].get("mlstm", {}).get("parameters")
    reason = (f"Table 3.3's claim needs a byte mLSTM near the thesis' {BYTE_MLSTM_SETUP['parameters'] / 1e6:.0f}M "
              f"params" + (f" (ours {size / 1e6:.2f}M)" if size else "") + "; mLSTM vs LSTM shown as context")
    return f"not attempted: {why}{context}", reason


# -- Table 2.6: dynamic-evaluation tuning ranges ------------------------------------------------------

# The dynamic-evaluation stage's grids, by the Table 2.6 range each setting falls under (the stage's keys are
# dynamic_evaluate's: lr, decay, eps).
_GRID_NAMES = {"sgd": "SGD", "sgd_decay": "SGD with decay", "global_rms": "global RMS", "sparse": "sparse"}
_SETTING_NAMES = {"lr": "learning rate", "decay": "decay rate", "eps": "epsilon", "segment_len": "window"}


def _ranges(space: str) -> dict[str, tuple[float, float]]:
    """A search space's ranges by name (Table 2.6's are named after the stage's keys)."""
    return {h.name: (h.low, h.high) for h in get_space(space).hyperparameters}


TABLE_2_6_WORD, TABLE_2_6_CHAR = _ranges("dyneval_word"), _ranges("dyneval_char")


def _grid_values(key: str, grid: list[float], table: Mapping[str, tuple[float, float]]) -> str:
    """One setting's grid as its range, with the values outside Table 2.6's range of the same name named."""
    low, high = min(grid), max(grid)
    shown = f"{_SETTING_NAMES[key]} {low:g}" + ("" if low == high else f"–{high:g}")
    out = [v for v in grid if not table[key][0] <= v <= table[key][1]]
    return shown + ("" if not out else " (all outside)" if len(out) == len(grid) else
                    f" ({', '.join(f'{v:g}' for v in out)} outside)")


def _stage_grids(grids: Mapping[str, Mapping[str, list[float]]], table: Mapping[str, tuple[float, float]]) -> list[str]:
    return [f"{_GRID_NAMES.get(name, name)}: " + ", ".join(_grid_values(k, v, table) for k, v in grid.items()
                                                          if k in table)
            for name, grid in grids.items()]


def _dyneval_grids_ours(results: Results) -> str:
    """M-T2.6: what uses the encoded ranges (the word-level space is the default Optuna range of ``paperlib dyneval
    tune`` for global-RMS rows; no command searches the character-level one), and the grids the dynamic-evaluation
    stages search instead (``dyneval``, with the optimizer study's RMSprop epsilons, against the word-level ranges;
    ``dyneval_char`` against the character-level ones), each setting shown against Table 2.6's range of the same
    name, with the values outside it named."""
    base = ("the word-level ranges of the settings a row searches are the default Optuna ranges of `paperlib dyneval "
            "tune --search optuna` for global-RMS rows; no command searches the character-level ones")
    said = []
    word = results.get("dyneval.params", {})
    if word.get("grids"):
        described = _stage_grids(word["grids"], TABLE_2_6_WORD)
        eps = word.get("optimizers", {}).get("rmsprop_eps")
        if eps:
            described.append("the optimizer study's RMSprop " + _grid_values("eps", eps, TABLE_2_6_WORD))
        said.append("the word-level dynamic-evaluation stage searches grids of its own, partly outside them: "
                    + "; ".join(described))
    char = results.get("dyneval_char.params", {})
    if char.get("grids"):
        said.append("the character-level stage's: " + "; ".join(_stage_grids(char["grids"], TABLE_2_6_CHAR)))
    return "; ".join([base, *said])
