"""Reading results, building the table, and writing ``results/README.md`` and the README's summary and budget."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from paperlib.experiments.common.claims import VERDICTS
from paperlib.compendium.results_index.quotes import QUOTES, SEEDS

from paperlib.compendium.results_index.text import INDEX, Results, SEED_ITEMS, _PART, _top_level, plain, shorten
from paperlib.compendium.results_index.rows import ROWS


# -- I/O ---------------------------------------------------------------------------------------


def read_seed_items(path: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of ``seed_items.csv`` (id, seed, kind, title, scope: what the compendium does with the item)."""
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows or "id" not in rows[0]:
        raise ValueError(f"{path} is not a seed-items table (no 'id' column)")
    return rows


OTHER_PROFILES = ("gpu",)  # results/<profile>/: stages run at another profile on other machines (a DVC input)


def load_results(root: str | os.PathLike, profile: str | None = None) -> dict[str, Any]:
    """Every ``results/<name>.json`` keyed by name, and the settings each stage ran with (its provenance record's
    ``params``) keyed by ``<name>.params``, for the scale facts a result does not repeat. With ``profile``: those
    of ``results/<profile>/``, the stages run at that profile elsewhere (empty when there are none)."""
    out = {}
    folder = Path(root, "results") if profile is None else Path(root, "results", profile)
    for path in sorted(folder.glob("*.json")):
        if path.name.endswith(".provenance.json"):
            params = json.loads(path.read_text()).get("params")
            if isinstance(params, dict):
                out[path.name.removesuffix(".provenance.json") + ".params"] = params
            continue
        out[path.stem] = json.loads(path.read_text())
    return out


def recorded_work(record: Mapping[str, Any], result: Mapping[str, Any] | None) -> float | None:
    """Seconds of work a stage's records account for, parts reused from ``runs/`` included.

    Optuna studies (MICMCO): the sum of every trial's training and evaluation seconds; LM comparisons and other
    per-run stages: the sum of the provenance's per-run seconds; either over the parallel ``workers`` of the
    results' settings, else of the provenance's params (1 when absent); stages that time their parts: the last
    run's wall time plus the training of the models it read back (:func:`unclocked_training`). It leaves
    out what the records do not time (e.g. final evaluations), so it is a lower bound on a run from scratch;
    None when the records hold no per-unit times.
    """
    trials = []
    curves = (result or {}).get("curves") or (result or {}).get("configurations")
    if isinstance(curves, Mapping):
        for curve in curves.values():
            for trial in curve.get("trials", []) if isinstance(curve, Mapping) else []:
                trials.append(float(trial.get("train_seconds") or 0.0) + float(trial.get("eval_seconds") or 0.0))
    settings = (result or {}).get("settings") or record.get("params") or {}  # LM comparisons: the provenance's
    workers = max(1, int(settings.get("workers") or 1))
    if any(trials):
        return sum(trials) / workers

    def total(value: Any) -> float:  # per-run times, possibly nested (e.g. per model, then per seed)
        if isinstance(value, Mapping):
            return sum(total(v) for v in value.values())
        return float(value) if isinstance(value, (int, float)) else 0.0

    for key in ("train_seconds", "run_seconds"):
        if isinstance(record.get(key), Mapping) and record[key]:
            return total(record[key]) / workers
    parts = record.get("seconds")
    unclocked = unclocked_training(parts) if isinstance(parts, Mapping) else 0.0
    if unclocked and record.get("wall_time_s") is not None:
        return float(record["wall_time_s"]) + unclocked
    return None


def unclocked_training(parts: Mapping[str, Any]) -> float:
    """Seconds of training a stage's per-part times record but its wall clock did not contain: models read back
    from ``runs/`` keep their recorded training time. Two shapes record it: a ``training`` part beside the models'
    ``train_<model>`` times (what ``training`` took is what ran now), or, per corpus, ``<corpus>_train`` inside the
    ``<corpus>`` part beside its ``<corpus>_table`` (the corpus part minus its table is the most training that ran
    now). 0 for any other shape."""
    def number(key: str) -> float:
        value = parts.get(key)
        return float(value) if isinstance(value, (int, float)) else 0.0

    models = [k for k in parts if k.startswith("train_")]
    if models and "training" in parts:
        return max(0.0, sum(number(k) for k in models) - number("training"))
    missing = 0.0
    for key in parts:
        corpus = key.removesuffix("_train")
        if key.endswith("_train") and corpus in parts and f"{corpus}_table" in parts:
            missing += max(0.0, number(key) - (number(corpus) - number(f"{corpus}_table")))
    return missing


def load_wall_times(root: str | os.PathLike) -> dict[str, tuple[str, float | None, float | None]]:
    """``{experiment: (profile, wall seconds, recorded work seconds)}`` from ``results/*.provenance.json`` and
    the results beside them (:func:`recorded_work`)."""
    out = {}
    for path in sorted(Path(root, "results").glob("*.provenance.json")):
        record = json.loads(path.read_text())
        name = path.name.removesuffix(".provenance.json")
        result_path = path.with_name(f"{name}.json")
        result = json.loads(result_path.read_text()) if result_path.is_file() else None
        out[name] = (record.get("profile", "?"), record.get("wall_time_s"), recorded_work(record, result))
    return out


def scratch_estimate(entry: tuple) -> float | None:
    """Seconds a stage would take from scratch: the larger of its last run's wall time and its recorded work."""
    seconds = entry[1]
    work = entry[2] if len(entry) > 2 else None
    if seconds is None and work is None:
        return None
    return max(seconds or 0.0, work or 0.0)


def _estimates(dryrun: Mapping[str, Any] | None, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A dry run's assumptions and its stages (none for a capped quick run): ``dryrun`` as given, or read from
    ``results/<name>`` when None (nothing when the file or the repository is missing)."""
    if dryrun is None:
        from paperlib.experiments.common.config import ParamsError, repo_root

        try:
            path = repo_root() / "results" / name
        except ParamsError:
            path = None
        dryrun = json.loads(path.read_text()) if path is not None and path.is_file() else {}
    made = dryrun.get("assumptions", {})
    return made, ({} if made.get("max_length") is not None else dict(dryrun.get("stages", {})))


def render_compute(wall_times: Mapping[str, tuple], dryrun: Mapping[str, Any] | None = None,
                   dryrun_gpu: Mapping[str, Any] | None = None) -> str:
    """The compute section: per stage, the wall time of its last run as its provenance records it, and the work
    its records account for including parts reused from earlier runs; totals of both and of their maximum. Beside
    them, joined by stage name, the ``gpu`` and ``paper`` profiles' GPU-hours estimated by ``paperlib dryrun``
    (``dryrun_gpu`` and ``dryrun``: the content of ``results/dryrun_gpu.json`` and ``results/dryrun.json``, read from
    the repository when None; a capped quick run is not shown)."""
    if not wall_times:
        return ""
    made, paper = _estimates(dryrun, "dryrun.json")
    made_gpu, gpu = _estimates(dryrun_gpu, "dryrun_gpu.json")
    lines = ["", "## Compute", "",
             "Per experiment stage (2-core CPU machine): the wall time of its last run, from its `*.provenance.json`",
             "(a stage that resumed from its checkpoints in `runs/` records only the remainder), and the work its",
             "records account for including reused parts (per-trial or per-run times summed, over the stage's",
             "parallel workers, or the last run's wall time plus the recorded training of the models it read back",
             "from `runs/`; a lower bound on a run from scratch, as final evaluations are left out: untimed,",
             "or timed apart). The fifth column, the larger of the two, estimates a run from scratch.", ""]
    if paper or gpu:
        made = made if paper else made_gpu
        lines += [f"The last two columns are the `gpu` and `paper` profiles' time on one {made['gpu']} at "
                  f"{made['precision']} (MFU {made['mfu']:g}, or {made['kernel_latency_us']:g} µs per kernel launch "
                  "when that is slower),",
                  "estimated without a GPU by `paperlib dryrun` (`results/dryrun_gpu.json`, `results/dryrun.json`; "
                  "training, and the evaluation", "of the language-model, dynamic-evaluation and PTB MICMCO stages, "
                  "see `paperlib/experiments/dryrun/dryrun.py`).", ""]
    lines += ["| stage | profile | last run | recorded work | estimate from scratch "
              "| gpu profile (estimated GPU-hours) | paper profile (estimated GPU-hours) |",
              "|---|---|---|---|---|---|---|"]
    totals = [0.0, 0.0, 0.0, 0.0, 0.0]

    def minutes(seconds: float | None) -> str:
        return "n/a" if seconds is None else f"{seconds / 60:.1f} min"

    def hours(value: float | None) -> str:
        return "n/a" if value is None else f"{value:,.1f}"

    for name, entry in wall_times.items():
        profile, seconds = entry[0], entry[1]
        work = entry[2] if len(entry) > 2 else None
        scratch = scratch_estimate(entry)
        at_gpu, at_paper = gpu.get(name, {}).get("gpu_hours"), paper.get(name, {}).get("gpu_hours")
        for i, value in enumerate((seconds, work, scratch, at_gpu, at_paper)):
            totals[i] += value or 0.0
        lines.append(f"| {name} | {profile} | {minutes(seconds)} | {minutes(work)} | {minutes(scratch)} | "
                     f"{hours(at_gpu)} | {hours(at_paper)} |")
    lines.append(f"| **total** | | **{totals[0] / 60:.1f} min** | **{totals[1] / 60:.1f} min** | "
                 f"**{totals[2] / 60:.1f} min** | **{f'{totals[3]:,.1f}' if gpu else 'n/a'}** | "
                 f"**{f'{totals[4]:,.0f}' if paper else 'n/a'}** |")
    return "\n".join(lines) + "\n"


def build_index(items: list[dict[str, str]], results: Results,
                others: Mapping[str, Results] | None = None) -> list[dict[str, Any]]:
    """One rendered row per seed item, in the seed table's order; unknown ids are an error. Each row: the seed
    item's id, seed, kind and title, our file, the paper's text, ours, scale, the verdict text, its word
    (``status``), the one-line ``reason`` and the short cells of the table (``paper_short``, ``ours_short``), in
    plain names (:func:`plain`), and ``quotes``, the seed sentences the row judges (``(seed, section, text)``,
    verbatim, from :data:`.quotes.QUOTES`). ``others``: results of other profiles (:data:`OTHER_PROFILES`, by
    profile); a row whose stages all ran at one of them is judged on those too, by the same rules, under
    ``profiles`` (profile -> ours, scale, verdict, status, reason), unless that judgement is "not attempted" (e.g. a
    figure the profile does not run) or still pending."""
    unknown = [item["id"] for item in items if item["id"] not in ROWS]
    if unknown:
        raise ValueError(f"no index row for seed item(s) {', '.join(unknown)}; add them to ROWS")
    table = []
    for item in items:
        row = ROWS[item["id"]]
        rendered = {k: v if k == "status" else plain(v) for k, v in row.render(results).items()}
        elsewhere = {}
        for profile, found in (others or {}).items():
            if row.needs and all(name in found for name in row.needs):
                judged = row.render(found)
                if judged["status"] not in ("not attempted", "pending"):
                    elsewhere[profile] = {k: v if k == "status" else plain(v) for k, v in judged.items()}
        table.append({"id": item["id"], "seed": item["seed"], "kind": item["kind"], "title": item["title"],
                      "file": row.file, "paper": plain(row.paper), **rendered,
                      "quotes": QUOTES.get(item["id"], []), "profiles": elsewhere})
    return table


def anchor(item_id: str) -> str:
    """The id of an item's detail section: "M-F5.8" -> "m-f5-8"."""
    return item_id.lower().replace(".", "-")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_definitions() -> list[str]:
    """The index's header: what each verdict word means and how it is decided, the tie margins and thresholds the
    verdicts use, and what a normalised hypervolume is (values read from the modules that apply them)."""
    from paperlib.experiments.micmco.synthetic.micmco_synthetic import HIGH_MI_FRACTION, HV_TIE, NEAR_OPTIMAL_NATS, MicmcoSyntheticParams
    from paperlib.experiments.micmco.ptb.micmco_ptb import LOW_KL, PPL_TOLERANCE, MicmcoPtbParams
    from paperlib.experiments.dynamic_evaluation.claims import IDENTICAL, ON_PAR, STATISTICS_SPREAD
    from paperlib.experiments.dynamic_evaluation.transformer_claims import NOTICEABLE
    from paperlib.experiments.micmco.ptb.claims import ON_PAR_KL, SMALLER_SHARE, frontier_tie
    from paperlib.experiments.reverse_copy.claims import SOLVED_NATS
    from paperlib.experiments.averaging.claims import ON_PAR_NATS as AVERAGING_NATS
    from paperlib.experiments.common.claims import RULE_KINDS

    syn_margin = MicmcoSyntheticParams.__dataclass_fields__["hypervolume_margin"].default
    ptb_margin = MicmcoPtbParams.__dataclass_fields__["hv_margin"].default
    kl_cap = MicmcoPtbParams.__dataclass_fields__["kl_cap"].default
    return [
        "## How to read this index",
        "",
        "The table gives per item the paper's result, ours, a one-word verdict and its reason in one line; the",
        "link in the last column leads to the item's details below it: our files, the paper's full numbers, ours",
        "in full, the scale we ran at and the evidence for every part of the verdict.",
        "",
        "### Verdict words",
        "",
        "An item's claim is split into parts, and a part may rest on several comparisons (e.g. \"16 samples beat",
        "1\", once per estimator and objective). One comparison of a claimed direction (A better than B) reads",
        "",
        "- *reproduced* when A leads B by more than the comparison's tie margin (below);",
        "- *within noise* when A leads B by no more than the margin, or when no margin can be measured (one",
        "  seed): the paper's direction, not shown to exceed the noise;",
        "- *not reproduced* when B leads A, by any amount, or when the result is absent: a gap inside the margin",
        "  that points against the paper is not counted in its favour.",
        "",
        "A comparison without a direction (a threshold, a spread) is reproduced or not. One rule",
        "(`verdict_word` in `paperlib/experiments/common/claims.py`) turns the comparisons of a part into the part's verdict",
        "and the parts of an item into the item's word:",
        "",
        "| verdict | when |",
        "|---|---|",
        "| **reproduced** | every part holds beyond its margin |",
        "| **partly** | at least one part holds (fully or partly) and at least one does not |",
        "| **within noise** | no part holds, and every part goes the paper's way inside its margin |",
        "| **not reproduced** | no part holds, and at least one goes the other way, fails its threshold or is "
        "absent |",
        "| **not attempted** | we did not run it, or ran it only at a scale where its claim cannot be tested; the reason says which |",
        "| **diagram** | a schematic with nothing to measure; the details name the code that implements it |",
        "| **encoded** | a search space or setting, carried over as data and checked by a test |",
        "| **pending** | its results file is missing; the reason names the `dvc repro` stage that makes it |",
        "",
        "An item whose judged parts all hold but some of whose curves or cells we did not run reads **partly**.",
        "",
        "### How a part is judged",
        "",
        "Every judged part names one of these rules (`RULE_KINDS` in `paperlib/experiments/common/claims.py`), or several",
        "when it combines comparisons judged differently; its details name each part's rule beside its numbers",
        "(the rule's full statement, part by part, is in the family's notebook and its claims table).",
        "",
        "| rule | how a part is judged |",
        "|---|---|",
        *(f"| {kind} | {text} |" for kind, text in RULE_KINDS.items()),
        "",
        "### Tie margins and thresholds",
        "",
        "- **Seed-noise margin** (language models: M-T2.1-M-T4.2, C-T1, C-T2, M-F2.3, M-T2.3): two models differ",
        "  only when the gap between their seed means exceeds 2·√(s₁²/n₁ + s₂²/n₂), twice the standard error of",
        "  that difference, with s the standard deviation over the n seeds we ran",
        "  (`paperlib.experiments.language_models.claims.compare_seed_means`). With one seed there is no margin.",
        "- **Hypervolume tie** (Melis ch. 5, M-F5.2-M-F5.29): two curves differ only when their normalised",
        f"  hypervolumes (below) differ by more than {HV_TIE} (`paperlib.experiments.micmco.synthetic.verdicts.HV_TIE`, {HV_TIE:.0%} of the ideal",
        "  area); \"A beats B\" means HV(A) > HV(B) + the tie. Where a budget ladder measured the seed spread of",
        "  the same two curves' gap at the stage's own budget (synthetic: M-F5.2, M-F5.3; PTB: M-F5.8-M-F5.12, 16 vs 1",
        "  sample and shared vs naive masks), the comparison's evidence shows twice the standard deviation of one",
        "  seed's gap (the stage ran one seed); it replaces the tie, never falling below it, where the ladder's rung",
        "  repeated the stage's run: the same settings, and the same trials or a start design shared trial for trial",
        "  (the stage's first trials are the rung's seed 0 with the same results, its last ones GP draws), and stands",
        "  beside the tie elsewhere (`paperlib.experiments.micmco.seed_spread`).",
        "- **One averaged trajectory** (Melis ch. 3, M-F3.3-M-F3.5): every averager watches the same run, so no seed",
        "  spread is measured; the run's own noise stands in for one: 2TA is \"better\" than the raw weights (and",
        "  \"much better\" early) only by more than twice the raw loss's change from one evaluation to the next, and",
        f"  at least {AVERAGING_NATS} nats (0.5% perplexity), since Alg. 2 never lets it be worse; \"on par\" (the thesis'",
        f"  \"very close\") is within {AVERAGING_NATS} nats; the overfitting run's loss \"rises\" by more than twice its",
        "  own evaluation-to-evaluation noise (`paperlib.experiments.averaging.claims`).",
        "- **Thresholds that define a claim** (not noise margins): the amount of data is \"negligible\" (K-T5.6) within "
        f"{STATISTICS_SPREAD:.0%}; \"on par\" with global RMS (K-T5.7) within {ON_PAR:.0%}; RMSprop with a large ε",
        f"  \"identical\" to SGD (K-T5.5) when their gap plus its margin is within {IDENTICAL} nats per token",
        "  (`paperlib.experiments.dynamic_evaluation.claims`; the dynamic-evaluation comparisons take a bootstrap margin over",
        "  blocks of the text or over independent sequences, except the related-words probe's, one update, which are strict);",
        "  a decay rate's validation advantage to the Transformer (K-T6.3) is \"no noticeable\" one when its gain plus its",
        f"  margin is within {NOTICEABLE} nats per token, noticeable beyond both, within noise between",
        "  (`paperlib.experiments.dynamic_evaluation.transformer_claims`);",
        "  full rank \"close behind\" low rank (M-T2.3) within half low rank's gain over the LSTM; a reverse-copy length is solved below "
        f"{SOLVED_NATS} nats (M-F2.4);",
        f"  \"near-optimal\" (M-F5.6) is within {NEAR_OPTIMAL_NATS} nats of ln V at MI = {HIGH_MI_FRACTION:g} ln V; "
        f"Table 5.1's \"barely",
        f"  changes\" is within {PPL_TOLERANCE:.0%} perplexity and its \"low latent usage\" at most {LOW_KL} nats "
        f"of KL per token, judged only in the cells whose curve has a trial above {LOW_KL}, and on its budget ladder only",
        f"  when a trial of the ladder's curves at some rung and seed is above {LOW_KL} (elsewhere the line cannot fail);",
        f"  single-sample runs \"similar\" at zero latent usage (M-F5.14, M-F5.25) within {PPL_TOLERANCE:.0%} perplexity;",
        f"  a gain \"not nearly\" the training fit's (M-F5.10) below {SMALLER_SHARE:.0%} of it, judged only where the training-fit gain",
        f"  clears the hypervolume tie; \"on par up to an average KL of about {ON_PAR_KL}\" (M-F5.12) within the tie, the",
        "  areas over the KL range both curves reach taken as shares of the whole box (whose share the tie is; how",
        "  little a narrow range can then hold, the evidence says); the three DReG estimators' \"very small\" differences",
        "  at twice the hidden size (M-F5.18) within the",
        "  tie and closer than at the base size; a \"no gain\", \"on par\" or \"very small\" whose hypervolumes (for M-F5.18, at",
        "  both sizes) all lie below the tie cannot fail and is named as not run;",
        "  16x compute losing its advantage \"at higher latent usage\" (M-F5.13, M-F5.24: at the highest KL both curves' trials",
        f"  reach) and 16 samples gaining \"only with the Rényi at high latent usage\" (M-F5.8: at a KL of {ON_PAR_KL}, the level of",
        "  Fig. 5.12's \"on par\") compare two frontier NLLs there (the lowest NLL among a curve's trials at that KL or above),",
        f"  apart by more than {frontier_tie():.4f} nats (ln(1 + {PPL_TOLERANCE:.0%})), and are named as not run where the trials do not",
        "  reach above the run's best fit (M-F5.13, M-F5.24) or up to that KL (M-F5.8); M-F5.13 and M-F5.24 show how far",
        "  each point compared lies above its curve's best, how many of the curve's trials reach it, and the share of one",
        "  pass over the training sentences the runs saw.",
        "- **Curves past word frequencies**: a PTB MICMCO comparison is judged only where every curve it compares (for",
        "  frontier points, every point compared; for Table 5.1, every cell's test NLL) lies below a unigram model of the",
        f"  same sentences (`paperlib levels micmco_ptb`) by more than {frontier_tie():.4f} nats; a curve at that level has",
        "  not learned what word frequencies do not give, and comparing it measures the budget: named as not run.",
        "- **Sentences that need runs able to overfit** are judged only where a compared run completed one pass over the",
        "  training sentences (before that, every sentence a run trains on is as new to it as a validation sentence): the",
        "  single-sample runs \"similar\" at zero latent usage (M-F5.14, M-F5.25: where the least-trained of them did), dropout's",
        "  best NLL below L2's and its budget ladder (M-F5.11), 16 samples performing (M-F5.14) or generalizing (M-F5.25)",
        "  \"better than either\" run with 16x compute, and discrete latents' validation NLL degrading faster with L2",
        "  \"unlike the training fit\" (M-F5.11), and Table 5.1's best perplexity barely changed by more samples",
        "  \"for this combination of a small model and strong regularization\" and its budget ladder (M-T5.1).",
        "- **Scale ladders** (S-T1, M-F5.2, M-F5.3, M-F5.6, M-F5.8, M-F5.9, M-F5.11, M-F5.12, M-T5.1): a",
        "  claim's gap measured at training budgets growing geometrically (×4 per rung; ×2 for the PTB MICMCO",
        "  ladder at `cpu`), with a margin at each rung: twice the standard error over seeds (for a MICMCO hypervolume",
        "  gap at least the hypervolume tie). The ladder reads \"reproduced\" when the top rung's gap is beyond its margin, else",
        "  \"trend toward the claim\" / \"trend against\" when the gap's change from the first rung to the top exceeds",
        "  the two margins combined, else \"no trend\" (`paperlib.experiments.common.claims.ladder_word`). As a part of the",
        "  row (`ladder_part`) a trend toward the claim counts as partly reproduced, a trend against as not reproduced,",
        "  and no trend as the top rung's comparison: within noise when its gap points the paper's way, else not",
        "  reproduced. A model has converged at a rung when its score",
        "  moved by no more than twice the standard error of its per-seed change over the rung's last quarter.",
        "  S-T1's trend is not read where the gap moved by no more than the upward bias of the DSSM's estimate",
        "  (eq. 12), which was measured at the top rung only: the ladder then reads no trend. The synthetic",
        "  MICMCO rows' scale gives the ladder's seed spread at the main run's budget, the margin of the gaps it",
        "  measured.",
        "",
        "### Normalised hypervolume",
        "",
        "Each MICMCO curve is the set of its tuned trials, one point per trial: NLL (lower is better) against",
        "latent usage (higher is better), the mutual information on synthetic data and KL per token on PTB. Its",
        "hypervolume is the area of the box below the reference point that the trials dominate (a point covers",
        "every point with a higher NLL and a lower latent usage); normalised, it is that area over the area an",
        "ideal curve would cover, so 1 is ideal and 0 means no trial lies inside the box.",
        "",
        "- **Synthetic** (Figs. 5.2-5.7, 5.15, 5.26, 5.27; `paperlib.frontiers.hypervolume`): box from NLL = ln V",
        f"  + {syn_margin:g} nat (the reference point, with MI = 0) down to the optimum NLL = ln V, and from MI = 0 to",
        "  MI = ln V (estimates above ln V are capped there); divided by its whole area, "
        f"{syn_margin:g} × ln V, which",
        "  an ideal model (NLL = ln V at every MI) covers. V is the vocabulary; ln V the best possible NLL.",
        "- **PTB** (Figs. 5.8-5.29; `paperlib.experiments.micmco.ptb.analysis.compare_hypervolumes`): per figure (or per",
        f"  claim), the reference NLL is the lowest NLL of any trial of the compared curves + {ptb_margin:g} nats,",
        f"  with KL = 0; KL per token is capped at {kl_cap:g} nats; divided by {ptb_margin:g} × {kl_cap:g}, the box's",
        "  area. A curve with no trial below the reference NLL scores 0.000: an empty area, not a failed",
        "  computation (the details say which trials lie above it). The same curve can score differently in",
        "  different figures, whose references differ.",
        "",
        "Curve names: K/R is a single-sample curve, where the KL and Rényi objectives coincide; 16/1 has 16 samples",
        "in the likelihood term and 1 in the divergence term, 1/16 the reverse; T×n trains n times longer, bs×n",
        "with n times larger batches, hs×2 with twice the hidden size.",
        "",
    ]


def render_markdown(table: list[dict[str, str]], wall_times: Mapping[str, tuple[str, float | None]] | None = None
                    ) -> str:
    counts: dict[str, int] = {}
    for row in table:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    lines = [
        "# Results index",
        "",
        "One row per table and figure of the seeds (`results/seed_items.csv`), in the seeds' order. Written by",
        "`paperlib index` (DVC stage `results_index`) from `results/*.json`; do not edit by hand.",
        "'Ours' numbers are measured at the `cpu` profile unless a row says otherwise; they are never the",
        "paper's scale (each row's details give the scale we ran at). Where a row's stages also ran at the `gpu`",
        "profile (`results/gpu/`), its verdict there stands beside the `cpu` one.",
        "",
        *render_definitions(),
        "## Table",
        "",
        "Verdicts: " + ", ".join(f"{word} {counts[word]}" for word in VERDICTS if word in counts) + ".",
        "",
        "| id | item | paper | ours | verdict | reason | details |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in table:
        verdict = f"**{row['status']}**" + "".join(f" ({profile}: **{other['status']}**)"
                                                   for profile, other in row.get("profiles", {}).items())
        cells = (row["id"], row["title"], shorten(row["paper_short"]), shorten(row["ours_short"]),
                 verdict, row["reason"], f"[details](#{anchor(row['id'])})")
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += ["", "## Details", ""]
    for row in table:
        lines += render_details(row)
    return "\n".join(lines) + "\n" + render_compute(wall_times or {})


def _evidence_lines(clause: str, indent: str = "  ") -> list[str]:
    """One part of a verdict as bullet lines: "<claim> <word> (<a>; <b>)" becomes the claim and its word, then
    <a> and <b> one level deeper."""
    if clause.endswith(")"):
        depth = 0
        for i in range(len(clause) - 1, -1, -1):
            depth += (clause[i] == ")") - (clause[i] == "(")
            if depth == 0:
                break
        inner = _top_level(clause[i + 1:-1])
        if i > 0 and len(inner) > 1:
            head = re.sub(r"\b(partly reproduced|within noise|not reproduced|reproduced)$", r"**\1**",
                          clause[:i].rstrip())
            return [f"{indent}- {head}"] + [f"{indent}  - {piece}" for piece in inner]
    depth = 0
    for i, char in enumerate(clause):  # the part's verdict word, outside its evidence, in bold
        depth += (char == "(") - (char == ")")
        found = _PART.match(clause, i) if depth == 0 and (i == 0 or not clause[i - 1].isalnum()) else None
        if found:
            return [f"{indent}- {clause[:i]}**{found[1]}**{clause[found.end():]}"]
    return [f"{indent}- {clause}"]


def render_quote(seed: str, section: str, text: str) -> str:
    """One seed quote as a line of the details: the verbatim text, then the seed's name and the section (the text
    itself finds the place in the seed: it is verbatim)."""
    name, _ = SEEDS[seed]
    return f"“{text}” — {name}, {section}"


def render_details(row: Mapping[str, Any]) -> list[str]:
    """One item's detail section: its anchor, heading, verdict and reason, files, the paper's text, the seed
    sentences the row judges, ours, the scale and the evidence, one line per part (a part's evidence one level
    deeper)."""
    body = row["verdict"].split(": ", 1)[1] if ": " in row["verdict"] else ""
    lines = [f'<a id="{anchor(row["id"])}"></a>', "", f"### {row['id']} — {row['title']}", "",
             f"**{row['status']}** — {row['reason']}", ""]
    for name, key in (("Files", "file"), ("Paper", "paper"), ("Seed text", "quotes"), ("Ours", "ours"),
                      ("Scale", "scale")):
        if key == "quotes":
            quotes = row.get("quotes") or []
            lines += [f"- **{name}:**"] * bool(quotes) + [f"  - {render_quote(*quote)}" for quote in quotes]
        elif row[key] not in ("", "—"):
            lines.append(f"- **{name}:** {row[key]}")
    parts = _top_level(body) if body and body != row["reason"] else []
    if parts:
        lines.append("- **Evidence:**")
        lines += [line for part in parts for line in _evidence_lines(part)]
    for profile, other in row.get("profiles", {}).items():
        lines.append(f"- **At the `{profile}` profile** (`results/{profile}/`): **{other['status']}** — "
                     f"{other['reason']}")
        lines += [f"  - {name}: {other[key]}" for name, key in (("Ours", "ours"), ("Scale", "scale"))
                  if other[key] not in ("", "—")]
        body = other["verdict"].split(": ", 1)[1] if ": " in other["verdict"] else ""
        parts = _top_level(body) if body and body != other["reason"] else []
        lines += [line for part in parts for line in _evidence_lines(part, indent="  ")]
    return lines + [""]


def write_index(root: str | os.PathLike) -> Path:
    """Render ``results/README.md`` from the seed table and the results present under ``root``."""
    root = Path(root)
    table = current_table(root)
    path = root / INDEX
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render_markdown(table, load_wall_times(root)))
    os.replace(tmp, path)
    return path


# -- the README's summary: a few headline rows of the index, kept current by a test ---------------

HEADLINE = ("M-T4.1", "M-T2.2", "M-T2.3", "M-F2.4", "M-F3.3", "K-T4.1", "K-T4.2", "M-F5.4", "M-F5.6",
            "M-F5.8", "M-T5.1", "K-T6.3", "S-T1")
README_START = "<!-- results-summary:start (written by `paperlib index --readme`; do not edit) -->"
README_END = "<!-- results-summary:end -->"


def render_summary(table: list[dict[str, str]]) -> str:
    """The README's results table: the headline rows with the index's short cells, verdict word and reason, each
    linked to its details in the index."""
    by_id = {row["id"]: row for row in table}
    lines = ["| item | paper | ours | verdict | reason |", "|---|---|---|---|---|"]
    for item in HEADLINE:
        row = by_id[item]
        title = f"[{item}]({INDEX}#{anchor(item)}) {row['title']}"
        cells = (title, shorten(row["paper_short"]), shorten(row["ours_short"]), f"**{row['status']}**", row["reason"])
        lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
    lines += ["", f"Verdict words, tie margins and the normalised hypervolume are defined in the "
                  f"[results index]({INDEX}#how-to-read-this-index)."]
    return "\n".join(lines)


BUDGET_START = "<!-- compute-budget:start (written by `paperlib index --readme`; do not edit) -->"
BUDGET_END = "<!-- compute-budget:end -->"
AIM_MINUTES = 90  # our aim for a `cpu` rebuild on 2 cores


def render_budget(wall_times: Mapping[str, tuple], largest: int = 3) -> str:
    """The README's time-budget sentence: the from-scratch estimates of the compute section, summed, with the
    ``largest`` stages named and the ratio to the 90-minute aim."""
    estimates = {name: scratch_estimate(entry) or 0.0 for name, entry in wall_times.items()}
    total = sum(estimates.values()) / 60
    top = sorted(estimates, key=lambda n: -estimates[n])[:largest]
    named = ", ".join(f"`{n}` ≈ {estimates[n] / 60:.0f}" for n in top)
    profiles = sorted({entry[0] for entry in wall_times.values()}) or ["cpu"]
    return (f"**Time budget:** rebuilding everything at `{'/'.join(profiles)}` takes about {total / 60:.1f} hours on a "
            "2-core machine "
            f"(≈ {total:.0f} min by the per-stage estimates in the [results index's Compute section]"
            f"(results/README.md#compute); the largest are {named} min), {total / AIM_MINUTES:.1f}× our "
            f"{AIM_MINUTES}-minute aim.")


def replace_between(text: str, start: str, end: str, body: Callable[[], str], what: str,
                    page: str = "README.md") -> str:
    """``text`` with what lies between the generated block's ``start`` and ``end`` markers replaced by ``body()``;
    a ValueError naming ``page`` and the block when the markers are missing."""
    if start not in text or end not in text:
        raise ValueError(f"{page} lacks the {what} markers; add them where the {what} belongs")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body()}\n{end}{tail}"


def readme_with_summary(readme: str, table: list[dict[str, str]],
                        wall_times: Mapping[str, tuple] | None = None) -> str:
    """``readme`` with the text between the summary markers replaced by :func:`render_summary` and, given
    ``wall_times``, the text between the budget markers by :func:`render_budget`."""
    text = replace_between(readme, README_START, README_END, lambda: render_summary(table), "results-summary")
    if wall_times is not None:
        text = replace_between(text, BUDGET_START, BUDGET_END, lambda: render_budget(wall_times), "compute-budget")
    return text


def current_table(root: str | os.PathLike) -> list[dict[str, str]]:
    root = Path(root)
    others = {p: found for p in OTHER_PROFILES if (found := load_results(root, p))}
    return build_index(read_seed_items(root / SEED_ITEMS), load_results(root), others)
