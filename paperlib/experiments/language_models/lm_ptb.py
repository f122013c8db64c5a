"""Comparing language models trained alike (Melis thesis Tables 2.1, 2.2, 4.1 at our scale).

`run_lm_experiment` trains every model of an experiment once per seed (each run resumable from
its own checkpoint folder), then evaluates its best weights on validation and test with
deterministic dropout, with the validation-optimal softmax temperature, and with Monte Carlo
dropout, and writes one JSON of results (plus provenance) for the notebook.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.config import active_profile, experiment_params, load_params, repo_root, section_params
from paperlib.data import batchify, bptt_windows, get_corpus, load_corpus, pinned_checksums
from paperlib.experiments.common.stage import results_path, seed_everything, setup_stage
from paperlib.distributed import is_main_process
from paperlib.models import build_lm, collect_logits, evaluate_nll, mc_dropout_nll, optimal_temperature
from paperlib.experiments.common.provenance import provenance
from paperlib.atomic_files import write_json_atomic
from paperlib.train import Trainer, TrainConfig, forget_stale_run

LN2 = math.log(2.0)


def num_parameters(model: torch.nn.Module) -> int:
    """Distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def evaluate_run(model: torch.nn.Module, valid: torch.Tensor, test: torch.Tensor, config: TrainConfig,
                 mc_samples: int, seed: int, temperature_tokens: int = 20_000) -> dict[str, float]:
    """Validation/test NLL (nats/token): deterministic, at the validation-optimal temperature, and MC dropout."""
    def windows(stream):
        return bptt_windows(stream, config.bptt)

    valid_stream = batchify(valid, config.eval_batch_size)
    test_stream = batchify(test, config.eval_batch_size)
    # The temperature is fitted on cached logits of the first `temperature_tokens` validation tokens:
    # caching all of them would take V * 4 bytes per token (40 kB at V = 10k).
    logits, targets = collect_logits(model, windows(batchify(valid[:temperature_tokens], config.eval_batch_size)))
    temperature = optimal_temperature(logits, targets)
    del logits, targets
    gen = torch.Generator(device=valid.device).manual_seed(seed)
    return {
        "valid_nll": evaluate_nll(model, windows(valid_stream)),
        "test_nll": evaluate_nll(model, windows(test_stream)),
        "temperature": temperature,
        "valid_nll_temp": evaluate_nll(model, windows(valid_stream), temperature),
        "test_nll_temp": evaluate_nll(model, windows(test_stream), temperature),
        "valid_nll_mc": mc_dropout_nll(model, windows(valid_stream), mc_samples, generator=gen),
        "test_nll_mc": mc_dropout_nll(model, windows(test_stream), mc_samples, generator=gen),
    }


def train_and_evaluate(name: str, settings: Any, vocab_size: int, train_ids: torch.Tensor, valid_ids: torch.Tensor,
                       test_ids: torch.Tensor, runs_dir: Path, device: torch.device, progress: bool = True,
                       spec_extra: dict[str, Any] | None = None, record_extra: dict[str, Any] | None = None,
                       code_modules: tuple[str, ...] = (__name__,)) -> list[dict[str, Any]]:
    """Train every model x seed of ``settings`` (a
    :class:`~paperlib.experiments.language_models.settings.LanguageModelParams`) on the id streams, evaluate its
    best weights with :func:`evaluate_run`, and return one record per run. A model's ``train`` overrides (if any)
    replace the shared ``train`` fields for that model.

    Each run lives in ``runs_dir/<model>-seed<seed>`` and resumes from its checkpoint; a finished run is read back
    from its ``done.json``, and a run folder made with other settings (``spec_extra`` joins them) or by other code
    (:func:`paperlib.experiments.common.code_hash.code_hash` of ``code_modules``, the modules the run executes) is redone.
    ``record_extra`` is stored in every new record. With ``settings.workers`` > 1 the runs train in that many
    processes at once, ``settings.threads`` threads each (on two cores, two one-thread runs finish sooner than two
    two-thread runs in turn); a run's numbers do not depend on which process trained it.
    """
    jobs = [(model_name, spec, seed) for model_name, spec in settings.models.items() for seed in settings.seeds]
    workers = getattr(settings, "workers", 1)
    spec_extra = {**(spec_extra or {}), "code": code_hash(*code_modules)}  # hashed once, here: workers get it
    args = (name, settings, vocab_size, train_ids, valid_ids, test_ids, runs_dir, device, spec_extra, record_extra)
    if workers == 1:
        return [_train_one(*job, *args, progress) for job in jobs]
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    if device.type != "cpu":
        raise ValueError(f"workers > 1 trains runs in CPU processes; this stage's device is {device}: set workers: 1")
    from paperlib.device import current

    # the slowest runs first, so that the workers finish together; spawn: forking a running OpenMP pool can hang
    order = sorted(range(len(jobs)), key=lambda i: -_relative_cost(jobs[i][1]))
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        futures = {i: pool.submit(_train_in_worker, jobs[i], args, current().precision, progress) for i in order}
        return [futures[i].result() for i in range(len(jobs))]


def _relative_cost(spec: dict[str, Any]) -> float:
    """A rough cost of one training step, only to order the jobs: H^2, plus 10% per Mogrifier round."""
    rounds = spec.get("options", {}).get("mogrifier_rounds", 5) if spec["cell"].startswith("mogrifier") else 0
    return spec["hidden_size"] ** 2 * (1 + 0.1 * rounds)


def _train_in_worker(job: tuple, args: tuple, precision: str, progress: bool) -> dict[str, Any]:
    from paperlib.device import configure

    torch.set_num_threads(args[1].threads)
    configure(precision)
    return _train_one(*job, *args, progress=False)


def _train_one(model_name: str, spec: dict[str, Any], seed: int, name: str, settings: Any, vocab_size: int,
               train_ids: torch.Tensor, valid_ids: torch.Tensor, test_ids: torch.Tensor, runs_dir: Path,
               device: torch.device, spec_extra: dict[str, Any] | None, record_extra: dict[str, Any] | None,
               progress: bool = True) -> dict[str, Any]:
    """One model x seed of :func:`train_and_evaluate`: trained (or resumed, or read back when done) and evaluated."""
    train = {**settings.train, **spec.get("train", {})}  # the model's own overrides win
    config = TrainConfig(**train)
    run_dir = runs_dir / f"{model_name}-seed{seed}"
    done = run_dir / "done.json"
    forget_stale_run(run_dir, {"model": spec, "train": train, "seed": seed, "eval_tokens": settings.eval_tokens,
                               "mc_samples": settings.mc_samples, **(spec_extra or {})})
    if done.exists():
        return json.loads(done.read_text())
    seed_everything(seed)
    model = build_lm(spec["cell"], vocab_size, spec["hidden_size"], spec["num_layers"], **spec.get("options", {}))
    run_config = TrainConfig(**{**train, "seed": seed})
    if progress:
        print(f"{name}: training {model_name} (seed {seed}, {num_parameters(model):,} parameters)", flush=True)
    trainer = Trainer(model, train_ids, valid_ids, run_config, run_dir, device=device, progress=progress)
    result = trainer.fit(resume=True)
    trainer.write_metrics()
    trainer.load(trainer.best_path, restore_position=False)
    started = time.perf_counter()
    with trainer.recommended_weights():
        scores = evaluate_run(trainer.model, valid_ids, test_ids, config, settings.mc_samples, seed)
    record = {
        "model": model_name, "seed": seed, "cell": spec["cell"], "parameters": num_parameters(model),
        "steps": result.steps, "train_tokens": result.tokens, "rollbacks": result.rollbacks,
        "train_seconds": round(trainer.train_seconds, 1), "eval_seconds": round(time.perf_counter() - started, 1),
        **(record_extra or {}), "history": [h for h in result.history if "valid_nll" in h], **scores,
    }
    if is_main_process():  # under torchrun every rank has the same record; one writes it
        write_json_atomic(done, record)
    return record


def run_lm_experiment(name: str, profile: str | None = None, runs_dir: str | os.PathLike | None = None,
                      out: str | os.PathLike | None = None, progress: bool = True,
                      averaging: str | None = None) -> Path:
    """Train and evaluate every model × seed of experiment `name`; returns the results JSON path.

    `averaging` overrides the experiment's `train.averaging` for an ad-hoc run; its runs and results
    then go to `runs/<name>.<averaging>/` and `results/<name>.<averaging>.json`, away from the
    pipeline's own outputs.
    """
    started = time.time()
    root = repo_root()
    params = load_params()
    profile = active_profile(profile, params)
    settings = experiment_params(name, profile, params)
    if averaging is not None:
        def with_kind(train: dict[str, Any]) -> dict[str, Any]:  # options belong to the kind they were set for
            return {**{k: v for k, v in train.items() if k != "averaging_options"}, "averaging": averaging}

        TrainConfig(**with_kind(settings.train))  # validates the kind
        models = {model: {**spec, "train": with_kind(spec["train"])} if "train" in spec else spec
                  for model, spec in settings.models.items()}  # the kind replaces the models' own averaging too
        settings = dataclasses.replace(settings, train=with_kind(settings.train), models=models)
        runs_dir = runs_dir if runs_dir is not None else root / "runs" / f"{name}.{averaging}"
        out = out if out is not None else results_path(root, f"{name}.{averaging}", profile)
    torch.set_num_threads(settings.threads)
    device = setup_stage(profile, params)  # joins torchrun first: the corpus goes to the rank's own GPU
    corpus = load_corpus(settings.corpus, root / section_params("data", params).root)
    valid_ids, test_ids = (s[: settings.eval_tokens] for s in (corpus.valid, corpus.test))
    train_ids, valid_ids, test_ids = (s.to(device) for s in (corpus.train, valid_ids, test_ids))
    runs_dir = Path(runs_dir) if runs_dir is not None else root / "runs" / name
    runs = train_and_evaluate(name, settings, len(corpus.vocab), train_ids, valid_ids, test_ids, runs_dir, device,
                              progress)
    level = get_corpus(settings.corpus).level
    results = {"experiment": name, "corpus": settings.corpus, "level": level, "profile": profile,
               "vocab_size": len(corpus.vocab), "train": settings.train, "mc_samples": settings.mc_samples,
               "models": settings.models, "eval_tokens": {"valid": int(valid_ids.numel()), "test": int(test_ids.numel())},
               "runs": [{k: v for k, v in r.items() if k not in ("train_seconds", "eval_seconds")} for r in runs],
               "summary": summarise(runs, level)}
    out = Path(out) if out is not None else results_path(root, name, profile)
    if is_main_process():
        write_json_atomic(out, results)
        timing = {r["model"] + f"-seed{r['seed']}": r["train_seconds"] for r in runs}
        evaluation = {r["model"] + f"-seed{r['seed']}": r.get("eval_seconds") for r in runs}
        write_json_atomic(out.with_suffix(".provenance.json"),
                          {**provenance(root, profile, vars(settings), pinned_checksums(settings.corpus), started,
                                        code=code_hash(__name__)),
                           "train_seconds": timing, "eval_seconds": evaluation})
    return out


def summarise(runs: list[dict[str, Any]], level: str) -> dict[str, dict[str, float]]:
    """Per model: mean and standard deviation over seeds of perplexity (word) or bits per char (char)."""
    convert = (lambda nll: nll / LN2) if level == "char" else math.exp
    summary: dict[str, dict[str, float]] = {}
    for model in dict.fromkeys(r["model"] for r in runs):
        mine = [r for r in runs if r["model"] == model]
        entry: dict[str, float] = {"seeds": len(mine), "parameters": mine[0]["parameters"]}
        for key in ("valid_nll", "test_nll", "valid_nll_temp", "test_nll_temp", "valid_nll_mc", "test_nll_mc"):
            values = np.array([convert(r[key]) for r in mine])
            metric = key.replace("_nll", "_bpc" if level == "char" else "_ppl")
            entry[metric] = float(values.mean())
            entry[metric + "_std"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        summary[model] = entry
    return summary


def comparison_table(results: dict[str, Any]):
    """Ours (mean ± std over seeds) beside the paper's rows, one row per (model, source), as a DataFrame."""
    import pandas as pd

    from paperlib.reference.language_models import paper_rows, reference_model

    unit = "bpc" if results["level"] == "char" else "ppl"
    rows = []
    for model, s in results["summary"].items():
        def fmt(key):
            name = key.replace("valid", f"valid_{unit}").replace("test", f"test_{unit}")
            mean, std = s[name], s[name + "_std"]
            return f"{mean:.3f} ± {std:.3f}" if unit == "bpc" else f"{mean:.1f} ± {std:.1f}"

        rows.append({"model": model, "source": f"ours ({results['profile']}, {s['parameters'] / 1e6:.2f}M params, "
                                                f"{s['seeds']} seed(s))",
                     "valid": fmt("valid"), "test": fmt("test"), "valid (T*)": fmt("valid_temp"),
                     "test (T*)": fmt("test_temp"), "valid MC": fmt("valid_mc"), "test MC": fmt("test_mc")})
    for ref in paper_rows(results["experiment"]):
        rows.append({"model": reference_model(ref, results["summary"]), "source": f"paper ({ref['source']}, 24M params)",
                     "valid": ref["valid"], "test": ref["test"], "valid (T*)": "", "test (T*)": "",
                     "valid MC": ref["valid_mc"] or "", "test MC": ref["test_mc"] or ""})
    return pd.DataFrame(rows).sort_values(["model", "source"], kind="stable").set_index(["model", "source"])
