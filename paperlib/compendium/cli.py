"""The `paperlib` command line: data, parameters, training, tuning, evaluation, stages, notebooks, results index."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from paperlib.experiments.common.config import PROFILES, ParamsError


def _data_root(args) -> Path:
    if args.root:
        return Path(args.root)
    from paperlib.experiments.common.config import repo_root, section_params

    try:
        root = repo_root()
    except ParamsError:
        return Path("data/raw")
    return root / section_params("data").root


def cmd_data_list(args) -> int:
    from paperlib.data.corpora import CORPORA, is_fetched

    root = _data_root(args)
    for corpus in CORPORA.values():
        state = "fetched" if is_fetched(corpus, root) else "missing"
        pinned = "" if all(f.sha256 for f in corpus.files) else " (no pinned sha256)"
        print(f"{corpus.name:12s} {state:8s} {corpus.description}{pinned}")
    return 0


def cmd_data_fetch(args) -> int:
    from paperlib.data.corpora import fetch_corpus

    root = _data_root(args)
    for name in args.names:
        folder = fetch_corpus(name, root, mirror=args.mirror, allow_unpinned=args.allow_unpinned)
        print(f"{name}: verified in {folder}")
    return 0


def cmd_data_summary(args) -> int:
    from paperlib.experiments.common.config import (
        active_profile, experiment_params, load_params, repo_root, section_params,
    )
    from paperlib.data.corpora import get_corpus, sha256_of
    from paperlib.data.summary import dataset_summary
    from paperlib.experiments.common.code_hash import code_hash
    from paperlib.experiments.common.provenance import provenance
    from paperlib.atomic_files import write_json_atomic

    started = time.time()
    params = load_params()
    profile = active_profile(args.profile, params)
    settings = experiment_params("dataset_summary", profile, params)
    root = repo_root()
    data_root = root / section_params("data", params).root
    summary = dataset_summary(settings.corpora, data_root, settings.max_rank, settings.sentence_max_len)
    out = root / args.out
    write_json_atomic(out, summary)
    checksums = {f"{c}/{f.name}": f.sha256 for c in settings.corpora for f in get_corpus(c).files}
    checksums.update({f"{c}/{d.name}": d.listing_sha256 for c in settings.corpora for d in get_corpus(c).folders})
    for key, sha in checksums.items():
        if sha is None:
            checksums[key] = sha256_of(data_root / key)
    write_json_atomic(out.with_suffix(".provenance.json"),
                      provenance(root, profile, vars(settings), checksums, started,
                                 code=code_hash("paperlib.data.summary")))
    print(f"wrote {out.relative_to(root)} ({', '.join(settings.corpora)}; profile {profile})")
    return 0


def cmd_params_show(args) -> int:
    from paperlib.experiments.common.config import active_profile, experiment_params, load_params

    params = load_params()
    profile = active_profile(args.profile, params)
    names = [args.experiment] if args.experiment else sorted(params.get("experiments", {}))
    resolved = {name: vars(experiment_params(name, profile, params)) for name in names}
    print(json.dumps({"profile": profile, "experiments": resolved}, indent=2))
    return 0


def cmd_run_notebook(args) -> int:
    from paperlib.compendium.notebooks import run_notebook

    parameters = {}
    for key, value in args.param or []:
        try:
            parameters[key] = json.loads(value)
        except json.JSONDecodeError:
            parameters[key] = value
    target = run_notebook(args.name, parameters, profile=args.profile, progress=not args.quiet)
    print(f"executed {args.name} -> {target}")
    return 0


# Experiments other than the LM comparisons: name -> "module:function(profile, progress) -> results path".
RUNNERS = {
    "averaging_ptb": "paperlib.experiments.averaging.averaging_ptb:run_averaging_experiment",
    "averaging_basin": "paperlib.experiments.averaging.averaging_basin:run_averaging_basin",
    "micmco_synthetic": "paperlib.experiments.micmco.synthetic.micmco_synthetic:run_micmco_synthetic",
    "micmco_synthetic_ladder": "paperlib.experiments.micmco.synthetic.ladder:run_micmco_synthetic_ladder",
    "micmco_ptb_ladder": "paperlib.experiments.micmco.ptb.ladder:run_micmco_ptb_ladder",
    "word_generation": "paperlib.experiments.word_generation.word_generation:run_word_generation",
    "word_generation_ladder": "paperlib.experiments.word_generation.ladder:run_word_generation_ladder",
    "word_generation_ngram": "paperlib.experiments.word_generation.word_generation_ngram:run_word_generation_ngram",
    "dyneval": "paperlib.experiments.dynamic_evaluation.dyneval:run_dyneval",
    "reverse_copy": "paperlib.experiments.reverse_copy.reverse_copy:run_reverse_copy",
    "tuning_ptb": "paperlib.experiments.language_models.tuning_ptb:run_tuning",
    "dyneval_char": "paperlib.experiments.dynamic_evaluation.dyneval_char:run_dyneval_char",
    "dyneval_transformer": "paperlib.experiments.dynamic_evaluation.dyneval_transformer:run_dyneval_transformer",
    "micmco_ptb": "paperlib.experiments.micmco.ptb.micmco_ptb:run_micmco_ptb",
    "lm_wt2_bytes": "paperlib.experiments.language_models.lm_wt2_bytes:run_byte_lm",
    "music": "paperlib.experiments.music.music:run_music",
}


# Levels of models without context beside a stage's results: stage -> "module:function(profile) -> path".
LEVELS = {
    "micmco_ptb": "paperlib.experiments.micmco.ptb.unigram:write_levels",
    "word_generation": "paperlib.experiments.word_generation.char_levels:write_levels",
}


def cmd_levels(args) -> int:
    import importlib

    module, function = LEVELS[args.stage].split(":")
    out = getattr(importlib.import_module(module), function)(args.profile)
    print(f"wrote {out}")
    return 0


def cmd_run(args) -> int:
    import importlib

    if args.experiment not in RUNNERS:
        raise ParamsError(f"unknown experiment {args.experiment!r}; runnable experiments: {', '.join(sorted(RUNNERS))} "
                          "(language-model comparisons: `paperlib train`)")
    from paperlib.experiments.common.runs import TimeLimitReached

    module, function = RUNNERS[args.experiment].split(":")
    try:
        out = getattr(importlib.import_module(module), function)(args.profile, not args.quiet)
    except TimeLimitReached as stopped:
        print(stopped)
        return 3
    print(f"wrote {out}")
    return 0


def cmd_train(args) -> int:
    from paperlib.experiments.language_models.lm_ptb import run_lm_experiment

    out = run_lm_experiment(args.experiment, profile=args.profile, progress=not args.quiet, averaging=args.averaging)
    print(f"wrote {out}")
    return 0


def cmd_tune(args) -> int:
    from paperlib.tuning import trial_counts
    from paperlib.experiments.language_models.tuning_ptb import tune

    study = tune(args.space, study_name=args.study, storage=args.storage, trials=args.trials, metrics=args.objective,
                 profile=args.profile, sampler=args.sampler, seed=args.seed, progress=not args.quiet)
    counts = ", ".join(f"{n} {state.lower()}" for state, n in sorted(trial_counts(study).items()))
    print(f"study {study.study_name}: {counts}")
    for trial in study.best_trials:  # the best trial, or the Pareto front of several objectives
        values = ", ".join(f"{m} {v:.4g}" for m, v in zip(args.objective, trial.values))
        print(f"  trial {trial.number}: {values}; {json.dumps(trial.params)}")
    return 0


def cmd_recipes_search(args) -> int:
    """Search a cpu training recipe for one model at a budget of training seconds (`paperlib.experiments.language_models.recipe_search`)."""
    from paperlib.experiments.common.config import experiment_params, repo_root
    from paperlib.atomic_files import write_json_atomic
    from paperlib.experiments.language_models.recipe_search import level_of, search, summarise
    from paperlib.tuning import FINISHED

    settings = experiment_params(args.experiment, args.profile or "cpu")
    level = level_of(args.experiment, settings.corpus)
    out = Path(args.out) if args.out else repo_root() / "results" / "recipes" / f"{args.experiment}-{args.model}.json"
    enqueue = [json.loads(text) for text in args.enqueue or []]
    timing = json.loads(Path(args.timing).read_text())["step_seconds"] if args.timing else None
    for _ in range(3 * args.trials):  # one trial per call, so that the summary is current after each trial;
        # other workers may run trials of the same study meanwhile (a failed trial is replaced by another)
        study = search(args.experiment, args.model, args.seconds, args.trials, profile=args.profile or "cpu",
                       tokens=args.tokens, threads=args.threads, hidden_sizes=tuple(args.hidden or ()),
                       enqueue=enqueue, seed=args.seed, one_more=True,
                       study_name=args.study, progress=not args.quiet, step_seconds=timing,
                       **_recipe_shapes(args))
        summary = summarise(study, args.experiment, args.model, level)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out, summary)
        if sum(summary["counts"].get(state.name, 0) for state in FINISHED) >= args.trials:
            break
    best = summary["best"]
    print(f"study {study.study_name}: {len(summary['trials'])} trials; best {summary['unit']} "
          f"{best[summary['unit']]:.3f} with {json.dumps(best['recipe'])}; wrote {out}" if best else "no trial finished")
    return 0


def _recipe_shapes(args) -> dict:
    from paperlib.experiments.language_models.recipe_search import BATCH_SIZES, BPTTS

    return {"batch_sizes": tuple(args.batch or BATCH_SIZES), "bptts": tuple(args.bptt or BPTTS)}


def cmd_recipes_time(args) -> int:
    """Time every shape of the recipe search space once (`paperlib.experiments.language_models.recipe_search.timing_table`)."""
    from paperlib.experiments.common.config import repo_root
    from paperlib.atomic_files import write_json_atomic
    from paperlib.experiments.language_models.recipe_search import timing_table

    table = timing_table(args.experiment, args.model, args.profile or "cpu", tuple(args.hidden or ()),
                         threads=args.threads, **_recipe_shapes(args))
    if table["load_average_before"] > 0.5:
        print(f"warning: the load average was {table['load_average_before']} before timing; other processes make "
              "steps look slower than on an idle machine", file=sys.stderr)
    out = Path(args.out) if args.out else repo_root() / "results" / "recipes" / f"timing-{args.experiment}-{args.model}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out, table)
    for key, seconds in table["step_seconds"].items():
        hidden, batch, bptt = map(int, key.split("/"))
        print(f"H {hidden:4d}  batch {batch:3d} x BPTT {bptt:3d}: {seconds * 1e3:7.1f} ms/step  "
              f"{batch * bptt / seconds:8.0f} tok/s")
    print(f"wrote {out}")
    return 0


def _key_values(pairs: list[str] | None, what: str) -> dict[str, list[float]]:
    """``["lr=1e-4,3e-4", "decay=0.01"]`` -> ``{"lr": [1e-4, 3e-4], "decay": [0.01]}`` (a clear error otherwise)."""
    out: dict[str, list[float]] = {}
    for pair in pairs or []:
        key, sep, values = pair.partition("=")
        try:
            if not sep or not key:
                raise ValueError
            out[key] = [int(v) if key == "segment_len" else float(v) for v in values.split(",")]
        except ValueError:
            raise ValueError(f"bad {what} {pair!r}: want KEY=V1,V2,... e.g. lr=0.0001,0.0003") from None
    return out


def cmd_dyneval_tune(args) -> int:
    """Tune one row of Krause Tables 4.1/4.2 on a validation prefix (`paperlib.experiments.dynamic_evaluation.dyneval.tune_table_row`)."""
    import math

    from paperlib.experiments.dynamic_evaluation.dyneval import tune_table_row

    grid = _key_values(args.grid, "--grid")  # bad input fails before any work
    ranges = {k: (v[0], v[-1]) for k, v in _key_values(args.range, "--range").items()}
    tuned = tune_table_row(args.corpus, args.row, profile=args.profile, grid=grid, ranges=ranges, search=args.search,
                           trials=args.trials, seed=args.seed, valid_tokens=args.valid_tokens,
                           checkpoint=args.checkpoint, data_root=args.data_root, progress=not args.quiet)
    ppl = math.exp(tuned["valid_nll"]) if tuned["valid_nll"] < 700 else math.inf
    print(f"{tuned['label']} on {args.corpus} ({tuned['valid_tokens']} validation tokens, {len(tuned['trials'])} "
          f"trials, {args.search} search): best {json.dumps(tuned['best'])} valid nll {tuned['valid_nll']:.4f} "
          f"(ppl {ppl:.2f})")
    if args.out:
        from paperlib.atomic_files import write_json_atomic

        write_json_atomic(Path(args.out), tuned)
        print(f"wrote {args.out}")
    return 0


def cmd_dryrun(args) -> int:
    """Dry-run one training step of every paper-profile model on fake tensors; print GPU-hour estimates
    (`paperlib.experiments.dryrun.dryrun`)."""
    from paperlib.experiments.dryrun.dryrun import check_stages, dry_run
    from paperlib.experiments.dryrun.gpu_time import render_tables

    check_stages(args.stages)  # bad input fails before any work
    progress = None if args.quiet else (lambda message: print(f"  {message}", file=sys.stderr, flush=True))
    max_length = args.max_length
    if max_length is None and not args.stages:  # the whole dry run: the active profile's cap (params.yaml)
        from paperlib.experiments.common.config import ParamsError, active_profile, load_params, section_params

        try:
            params = load_params()
            max_length = section_params("dryrun", params).max_length[active_profile(None, params)]
        except ParamsError:
            pass
    constants = calibration = None
    if args.calibration:
        import json

        from paperlib.experiments.dryrun.gpu_time import calibrate

        from paperlib.compendium.gpu_measurements import DRYRUN, fitting_counts

        measurement = json.loads(Path(args.calibration).read_text())
        counted = DRYRUN  # the measured profile's current counts, where the pipeline made them
        counts = fitting_counts(counted, measurement)
        constants, calibration = calibrate(measurement, args.calibration, counts)
        parts = [f"{name} {calibration[key]:g}x" for name, key in (("training steps", "training_max_ratio"),
                                                                    ("evaluation passes", "evaluation_max_ratio"))
                 if calibration[key] is not None]
        print(f"calibrated on {calibration['workloads']} measured workloads"
              + (f" with the kernel and FLOP counts of {counted}" if counts is not None else "")
              + f": MFU {constants.mfu:.3g}, "
              f"{constants.kernel_latency_s * 1e6:.3g} us per kernel, model within {calibration['max_ratio']:g}x of "
              f"every measured step ({', '.join(parts)})")
    result = dry_run(args.stages, max_length=max_length, progress=progress, profile=args.profile,
                     **({"constants": constants} if constants else {}))
    if calibration:
        result["calibration"] = calibration
    print(render_tables(result), end="")
    if args.json:
        from paperlib.atomic_files import write_json_atomic

        write_json_atomic(Path(args.json), result)
        print(f"wrote {args.json}")
    return 0


def cmd_index(args) -> int:
    from paperlib.compendium import results_index
    from paperlib.experiments.common.config import repo_root

    root = repo_root()
    table = results_index.current_table(root)
    if args.readme or args.check:
        readme = root / "README.md"
        text = results_index.readme_with_summary(readme.read_text(), table, results_index.load_wall_times(root))
        from paperlib.compendium.gpu_measurements import PAGE, readme_with_measurements

        gpu_page = root / PAGE
        gpu_text = readme_with_measurements(gpu_page.read_text(), root)
        if args.check:
            stale = [name for name, new, path in (
                ("README.md", text, readme), (str(PAGE), gpu_text, gpu_page),
                (results_index.INDEX, results_index.render_markdown(table, results_index.load_wall_times(root)),
                 root / results_index.INDEX),
            ) if not path.exists() or path.read_text() != new]
            if stale:
                raise ValueError(f"out of date: {', '.join(stale)}; run `paperlib index --readme`")
            print("results index, README summary and GPU measurements are current")
            return 0
        readme.write_text(text)
        gpu_page.write_text(gpu_text)
    out = results_index.write_index(root)
    from paperlib.compendium.dvc_views import write_views

    write_views(root, results_index.load_results(root))
    counts = {}
    for row in table:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    print(f"wrote {out} ({len(table)} seed items: {', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})")
    print(results_index.render_budget(results_index.load_wall_times(root)).replace("**", ""))
    return 0


def cmd_state(args) -> int:
    """Pack a stage's resumable state (its runs/ folder without checkpoints) into one archive, or merge one in
    (`paperlib.compendium.state_archive`)."""
    from paperlib.compendium.state_archive import pack, unpack
    from paperlib.experiments.common.config import repo_root

    root = repo_root()
    if args.action == "pack":
        made = pack(root, args.stages, args.out, None if args.limit_mb is None else int(args.limit_mb * 2**20))
        print(f"wrote {args.out}: {made['files']} files, {made['bytes']:,} bytes; left behind "
              f"{len(made['left_behind'])} checkpoints (work in progress restarts from its batch's start)")
    else:
        names = unpack(args.archive, root)
        print(f"unpacked {len(names)} files from {args.archive} into {root / 'runs'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="paperlib", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    data = sub.add_parser("data", help="fetch, list and summarise corpora")
    data_sub = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    p = data_sub.add_parser("list", help="list the registered corpora and whether they are fetched")
    p.add_argument("--root", help="data folder (default: params.yaml data.root)")
    p.set_defaults(func=cmd_data_list)
    p = data_sub.add_parser("fetch", help="download (or copy from a mirror) and verify corpora")
    p.add_argument("names", nargs="+", metavar="NAME", help="corpus names, see `paperlib data list`")
    p.add_argument("--root", help="data folder (default: params.yaml data.root)")
    p.add_argument("--mirror", help="local folder laid out like shared/data (default: $PAPERLIB_DATA_MIRROR)")
    p.add_argument("--allow-unpinned", action="store_true",
                   help="accept corpora without a pinned sha256 and record the checksum seen")
    p.set_defaults(func=cmd_data_fetch)
    p = data_sub.add_parser("summary", help="write the dataset summary the data notebook plots")
    p.add_argument("--profile", help="smoke, cpu, gpu or paper (default: $PAPERLIB_PROFILE, then params.yaml)")
    p.add_argument("--out", default="results/data_summary.json", help="output JSON, relative to the repo root")
    p.set_defaults(func=cmd_data_summary)

    prm = sub.add_parser("params", help="inspect params.yaml")
    prm_sub = prm.add_subparsers(dest="params_command", required=True, metavar="ACTION")
    p = prm_sub.add_parser("show", help="print the validated settings of the active profile")
    p.add_argument("experiment", nargs="?", help="one experiment (default: all)")
    p.add_argument("--profile", help="smoke, cpu, gpu or paper")
    p.set_defaults(func=cmd_params_show)

    p = sub.add_parser("train", help="train and evaluate the models of a language-model experiment")
    p.add_argument("experiment", help="experiment in params.yaml, e.g. lm_ptb or lm_ptb_char")
    p.add_argument("--profile", help="smoke, cpu, gpu or paper")
    p.add_argument("--averaging", choices=("none", "2ta", "ta", "ema", "swa", "polyak"),
                   help="override train.averaging (results go to results/<experiment>.<kind>.json)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("run", help="run an experiment (averaging_ptb, ...) and write results/<name>.json")
    p.add_argument("experiment", help=f"one of: {', '.join(sorted(RUNNERS))}")
    p.add_argument("--profile", help="smoke, cpu, gpu or paper")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("levels", help="write the levels of models without context beside a stage's results (a "
                                      "unigram of the PTB sentence VAEs' sentences, character n-grams of the words)")
    p.add_argument("stage", choices=sorted(LEVELS))
    p.add_argument("--profile", help="smoke, cpu, gpu or paper")
    p.set_defaults(func=cmd_levels)

    p = sub.add_parser("tune", help="run trials of an Optuna study over a thesis search space (join it from any machine)")
    p.add_argument("space", help="search space with a model in params.yaml tuning_ptb: lstm, mogrifier, enwik8_lstm, "
                                 "enwik8_mogrifier")
    p.add_argument("--study", help="study name (default: tuning_ptb-<space>-<profile>)")
    p.add_argument("--storage", help="Optuna storage URL shared by all workers, e.g. "
                                     "postgresql://user:password@host:5432/db (default: sqlite:///runs/tuning/<study>.db)")
    p.add_argument("--trials", type=int, help="finished trials the study should reach over all workers "
                                              "(default: params.yaml)")
    p.add_argument("--objective", nargs="+", default=["valid_nll"], choices=("valid_nll", "parameters", "train_seconds"),
                   help="metric(s) to minimise; several make a Pareto study (default: valid_nll)")
    p.add_argument("--sampler", choices=("auto", "gp", "tpe", "random"),
                   help="default: params.yaml (auto: Optuna's GP sampler if installed, else TPE)")
    p.add_argument("--seed", type=int, help="sampler seed (default: fresh; workers of one study need different seeds)")
    p.add_argument("--profile", help="smoke, cpu, gpu or paper (model and training sizes)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=cmd_tune)

    rec = sub.add_parser("recipes", help="training recipes for a budget of minutes")
    rec_sub = rec.add_subparsers(dest="recipes_command", required=True, metavar="ACTION")
    p = rec_sub.add_parser("search", help="search batch, BPTT, optimizer, lr, schedule and dropout of one model "
                                          "for a budget of training seconds (run it on an idle machine)")
    p.add_argument("experiment", help="a language-model experiment, e.g. lm_ptb or lm_ptb_char")
    p.add_argument("model", help="one of its models, e.g. lstm")
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--seconds", type=float, help="training seconds per trial (turned into steps by timing)")
    budget.add_argument("--tokens", type=int, help="training tokens per trial (a comparison at equal tokens)")
    p.add_argument("--trials", type=int, default=16, help="finished trials the study should hold (default 16)")
    p.add_argument("--hidden", type=int, nargs="+", help="also search the hidden size among these")
    p.add_argument("--batch", type=int, nargs="+", help="batch sizes to choose from (default 16 20 32 64)")
    p.add_argument("--bptt", type=int, nargs="+", help="BPTT lengths to choose from (default 35 70)")
    p.add_argument("--enqueue", action="append", metavar="JSON",
                   help="Optuna parameters to try first, e.g. '{\"batch_size\": 20, ...}'; repeatable")
    p.add_argument("--threads", type=int, help="torch threads (default: the experiment's; trials do not depend on it)")
    p.add_argument("--timing", help="a timing table from `paperlib recipes time` (default: time the shapes first)")
    p.add_argument("--study", help="study name (default: recipes-<experiment>-<model>-<profile>-<seconds>s)")
    p.add_argument("--seed", type=int, default=0, help="sampler seed")
    p.add_argument("--out", help="summary JSON (default: results/recipes/<experiment>-<model>.json)")
    p.add_argument("--profile", help="the profile whose model and evaluation settings are searched (default cpu)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=cmd_recipes_search)

    p = rec_sub.add_parser("time", help="time one training step of every shape the recipe search can pick "
                                        "(run it on an idle machine)")
    p.add_argument("experiment")
    p.add_argument("model")
    p.add_argument("--hidden", type=int, nargs="+", help="hidden sizes to time (default: the model's)")
    p.add_argument("--batch", type=int, nargs="+", help="batch sizes (default 16 20 32 64)")
    p.add_argument("--bptt", type=int, nargs="+", help="BPTT lengths (default 35 70)")
    p.add_argument("--threads", type=int, help="torch threads (default: the experiment's)")
    p.add_argument("--out", help="JSON (default: results/recipes/timing-<experiment>-<model>.json)")
    p.add_argument("--profile", help="default cpu")
    p.set_defaults(func=cmd_recipes_time)

    dyn = sub.add_parser("dyneval", help="dynamic evaluation: tune an update rule on validation data")
    dyn_sub = dyn.add_subparsers(dest="dyneval_command", required=True, metavar="ACTION")
    p = dyn_sub.add_parser("tune", help="tune one row of Krause Tables 4.1/4.2 on the validation set and print the best")
    p.add_argument("corpus", help="a corpus of experiments.dyneval (e.g. ptb, wikitext2)")
    p.add_argument("--row", default="global_rms_rms_decay",
                   help="traditional_sgd, sgd, sgd_decay, global_rms_decay, global_rms_rms_decay (default) or sparse")
    p.add_argument("--search", choices=("grid", "coordinate", "optuna"), default="grid")
    p.add_argument("--grid", action="append", metavar="KEY=V1,V2",
                   help="values to search, repeatable (default: the profile's grid for the row)")
    p.add_argument("--range", action="append", metavar="KEY=LOW,HIGH",
                   help="optuna ranges, repeatable (default: Melis Table 2.6 for global RMS rows)")
    p.add_argument("--trials", type=int, default=20, help="optuna trials (default 20)")
    p.add_argument("--seed", type=int, default=0, help="optuna sampler seed")
    p.add_argument("--valid-tokens", type=int, help="validation prefix (default: the profile's valid_tokens)")
    p.add_argument("--checkpoint", help="Trainer checkpoint of the profile's architecture (default: the experiment's)")
    p.add_argument("--data-root", help="folder with the fetched corpora (default: params.yaml data.root)")
    p.add_argument("--out", help="also write the trials and the best setting as JSON here")
    p.add_argument("--profile", help="smoke, cpu, gpu or paper")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=cmd_dyneval_tune)

    p = sub.add_parser("dryrun", help="one training step of every paper-profile model on fake tensors: parameters, "
                       "peak memory, FLOPs, kernels and estimated GPU-hours per stage (no GPU needed)")
    p.add_argument("stages", nargs="*", metavar="STAGE", help="experiment stages (default: all)")
    p.add_argument("--json", help="also write the numbers here, e.g. results/dryrun.json")
    p.add_argument("--profile", default="paper", choices=PROFILES,
                   help="whose settings to count (default: paper)")
    p.add_argument("--calibration", metavar="GPU_JSON",
                   help="estimate with the MFU and time per kernel fitted to a benchmarks/gpu.py measurement")
    p.add_argument("--max-length", type=int, help="cap every sequence length (a quick check, not the paper's numbers)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=cmd_dryrun)

    state = sub.add_parser("state", help="carry a stage's resumable state (studies, finished runs) between machines")
    state_sub = state.add_subparsers(dest="action", required=True)
    p = state_sub.add_parser("pack", help="runs/<stage>/ without its checkpoints -> one .tar.gz")
    p.add_argument("stages", nargs="+", metavar="STAGE")
    p.add_argument("--out", required=True, help="the archive to write, e.g. results/gpu/micmco_ptb.state.tar.gz")
    p.add_argument("--limit-mb", type=float, help="refuse to write an archive larger than this (MiB)")
    p.set_defaults(func=cmd_state)
    p = state_sub.add_parser("unpack", help="merge an archive made by `state pack` into runs/")
    p.add_argument("archive")
    p.set_defaults(func=cmd_state)

    p = sub.add_parser("index", help="write results/README.md (one row per table/figure of the seeds), "
                       "results/metrics/<experiment>.json and results/plots/*.csv for `dvc metrics/plots show`")
    p.add_argument("--readme", action="store_true", help="also rewrite the summary table in README.md")
    p.add_argument("--check", action="store_true", help="only check that both are current (exit 2 if not)")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("run-notebook", help="execute a notebook with papermill into results/notebooks/")
    p.add_argument("name", help="notebook name without .ipynb")
    p.add_argument("-p", "--param", nargs=2, action="append", metavar=("KEY", "VALUE"),
                   help="notebook parameter (VALUE parsed as JSON when possible); repeatable")
    p.add_argument("--profile", help="smoke, cpu, gpu or paper")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_run_notebook)
    return parser


def _user_errors() -> tuple[type[Exception], ...]:
    """The errors that are the user's to fix, reported as a message rather than a traceback. Imported only once
    one is raised, so a command that needs no torch (``run-notebook``: its kernel imports what it needs) starts
    without loading it."""
    from paperlib.data.corpora import DataError
    from paperlib.compendium.notebooks import NotebookError
    from paperlib.train import CheckpointMismatch, TrainingDiverged

    return DataError, ParamsError, NotebookError, TrainingDiverged, CheckpointMismatch, ValueError


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "command", None) == "run-notebook" and args.param:
        # `-p profile X` (papermill's habit) is the same as `--profile X`
        given = [value for key, value in args.param if key == "profile"]
        if given:
            if args.profile or len(given) > 1:
                parser.error("give the profile once, either as --profile or as -p profile")
            args.profile = given[0]
            args.param = [kv for kv in args.param if kv[0] != "profile"]
    try:
        return args.func(args)
    except Exception as err:
        if os.environ.get("PAPERLIB_DEBUG") or not isinstance(err, _user_errors()):
            raise
        print(f"paperlib: error: {err} (set PAPERLIB_DEBUG=1 for the traceback)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
