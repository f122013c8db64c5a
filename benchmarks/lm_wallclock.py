"""PTB perplexity at equal wall-clock: our recipes against the pytorch/examples tutorial.

Trains, each for the same budget of training seconds (``--seconds``, default 300; evaluation time
is not counted, for any recipe), on PTB through paperlib's own data pipeline and trainer:

- ``baseline``: pytorch/examples' word_language_model with its defaults, re-implemented on
  ``torch.nn.LSTM`` (``paperlib.models.torch_lstm``): 2 x 200 LSTM, embedding 200, untied,
  dropout 0.2, plain SGD at lr 20, gradient clipping at 0.25, batch 20, BPTT 35, validation once an
  epoch and lr / 4 after an epoch without a new best;
- ``lstm``, ``mogrifier_lstm``, ...: the models of ``params.yaml``'s ``lm_ptb`` experiment in the
  chosen profile (default ``cpu``) with that profile's training recipe, their step budget replaced by
  the seconds (a schedule that decays over the budget then follows the clock);
- ``--recipe MODEL=SUMMARY``: one of those models with the best recipe of a recipe study instead
  (``paperlib recipes search``'s summary JSON, e.g. a study at a budget of seconds rather than of the
  ``lm_ptb`` comparison's training tokens), named ``MODEL (study)``.

Each model's best weights on validation (the averaged weights where the recipe averages) are
scored on the whole test set with batch 10 and the recipe's BPTT, as the tutorial does; the last
column is each test perplexity as a ratio to the baseline's.

    python benchmarks/lm_wallclock.py [--seconds 300] [--models baseline lstm mogrifier_lstm] [--threads 2]
                                      [--recipe mogrifier_lstm=results/recipes/lm_ptb-mogrifier_lstm-240s.json]
                                      [--eval-tokens N]   # a quick check: validate and test on N tokens only
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import torch

from paperlib.experiments.common.config import experiment_params, load_params, repo_root, section_params
from paperlib.data import batchify, bptt_windows, load_corpus, num_windows
from paperlib.experiments.language_models.recipe_search import apply_recipe
from paperlib.models import build_lm, evaluate_nll
from paperlib.train import Trainer, TrainConfig

# pytorch/examples word_language_model, main.py defaults (model LSTM, emsize 200, nhid 200, nlayers 2, lr 20,
# clip 0.25, batch_size 20, bptt 35, dropout 0.2, untied; eval batch 10; lr / 4 when an epoch does not improve)
BASELINE_MODEL = {"cell": "torch_lstm", "hidden_size": 200, "num_layers": 2,
                  "options": {"embedding_size": 200, "dropout": 0.2, "tie_embeddings": False}}
BASELINE_TRAIN = {"optimizer": "sgd", "lr": 20.0, "clip_norm": 0.25, "batch_size": 20, "bptt": 35,
                  "schedule": "plateau", "plateau_factor": 0.25, "eval_batch_size": 10}
TEST_BATCH = 10


def recipes(profile: str, names: list[str]) -> dict[str, tuple[dict, dict]]:
    """name -> (model spec, train settings) for ``baseline`` and the ``lm_ptb`` models of ``profile``."""
    settings = experiment_params("lm_ptb", profile, load_params())
    chosen = {}
    for name in names:
        if name == "baseline":
            chosen[name] = (BASELINE_MODEL, dict(BASELINE_TRAIN))
        elif name in settings.models:
            spec = settings.models[name]
            chosen[name] = (spec, {**settings.train, **spec.get("train", {})})
        else:
            raise SystemExit(f"unknown model {name!r}; choose baseline or one of {', '.join(settings.models)}")
    return chosen


def study_recipes(profile: str, pairs: list[str]) -> dict[str, tuple[dict, dict]]:
    """``MODEL=SUMMARY`` pairs -> {"MODEL (study)": (model spec, train settings)}: the ``lm_ptb`` model of ``profile``
    with the best recipe of the recipe study summarised in SUMMARY applied to it."""
    settings = experiment_params("lm_ptb", profile, load_params())
    chosen = {}
    for pair in pairs:
        model, sep, path = pair.partition("=")
        if not sep or model not in settings.models:
            raise SystemExit(f"--recipe wants MODEL=SUMMARY_JSON with MODEL one of {', '.join(settings.models)}; "
                             f"got {pair!r}")
        summary = json.loads(Path(path).read_text())
        if summary.get("experiment") != "lm_ptb" or summary.get("model") != model or not summary.get("best"):
            raise SystemExit(f"{path} is not a finished recipe study of lm_ptb's {model}")
        spec = settings.models[model]
        chosen[f"{model} (study)"] = apply_recipe(spec, {**settings.train, **spec.get("train", {})},
                                                  summary["best"]["recipe"])
    return chosen


def run(name: str, spec: dict, train: dict, corpus, seconds: float, seed: int, out_dir: Path,
        eval_tokens: int | None = None) -> dict:
    torch.manual_seed(seed)
    model = build_lm(spec["cell"], len(corpus.vocab), spec["hidden_size"], spec["num_layers"],
                     **spec.get("options", {}))
    epoch = num_windows(batchify(corpus.train, train["batch_size"]), train["bptt"])
    if name == "baseline":
        train = {**train, "eval_every": epoch}  # the tutorial validates once an epoch
    config = TrainConfig(**{**train, "max_steps": 10**9, "max_seconds": seconds, "seed": seed})
    started = time.perf_counter()
    valid_ids, test_ids = (corpus.valid, corpus.test) if eval_tokens is None else (corpus.valid[:eval_tokens],
                                                                                   corpus.test[:eval_tokens])
    trainer = Trainer(model, corpus.train, valid_ids, config, out_dir / name, device="cpu", progress=False)
    result = trainer.fit()
    trainer.load(trainer.best_path, restore_position=False)
    with trainer.recommended_weights():
        test = evaluate_nll(trainer.model, bptt_windows(batchify(test_ids, TEST_BATCH), config.bptt))
    parameters = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    return {"model": name, "parameters": parameters, "steps": result.steps, "epochs": result.steps / epoch,
            "train_seconds": trainer.train_seconds, "wall_seconds": time.perf_counter() - started,
            "valid_ppl": math.exp(result.best_valid_nll), "test_ppl": math.exp(test)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="training seconds per model (default 300)")
    parser.add_argument("--models", nargs="+", default=["baseline", "lstm", "mogrifier_lstm"])
    parser.add_argument("--recipe", action="append", default=[], metavar="MODEL=SUMMARY",
                        help="also run lm_ptb's MODEL with the best recipe of a recipe study's summary JSON")
    parser.add_argument("--profile", default="cpu", help="the lm_ptb profile whose recipes run (default cpu)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=None, help="data root (default: params.yaml's data.root)")
    parser.add_argument("--eval-tokens", type=int, default=None,
                        help="validate and test on the first N tokens of the validation and test splits (a quick "
                             "check; default: all)")
    args = parser.parse_args()
    if args.eval_tokens is not None and args.eval_tokens < 2000:
        parser.error(f"--eval-tokens must be at least 2000 (a few windows of every recipe's evaluation batch), "
                     f"got {args.eval_tokens}")
    torch.set_num_threads(args.threads)
    root = args.data if args.data is not None else repo_root() / section_params("data", load_params()).root
    corpus = load_corpus("ptb", root)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        chosen = {**recipes(args.profile, args.models), **study_recipes(args.profile, args.recipe)}
        for name, (spec, train) in chosen.items():
            rows.append(run(name, spec, train, corpus, args.seconds, args.seed, Path(scratch), args.eval_tokens))
            print(f"  {name}: test ppl {rows[-1]['test_ppl']:.1f} after {rows[-1]['steps']} steps", flush=True)
    reference = next((r["test_ppl"] for r in rows if r["model"] == "baseline"), None)
    scored = "" if args.eval_tokens is None else (f", validated and tested on the first {args.eval_tokens:,} tokens "
                                                  "of those splits")
    print(f"\nPTB, {args.seconds:g} s of training each, {args.threads} thread(s), seed {args.seed}{scored}")
    print(f"{'model':22s} {'params':>9s} {'steps':>6s} {'epochs':>6s} {'train s':>8s} {'wall s':>7s} "
          f"{'valid ppl':>9s} {'test ppl':>8s} {'/ baseline':>10s}")
    for r in rows:
        ratio = f"{r['test_ppl'] / reference:.2f}x" if reference else "-"
        print(f"{r['model']:22s} {r['parameters']:9,d} {r['steps']:6d} {r['epochs']:6.2f} {r['train_seconds']:8.1f} "
              f"{r['wall_seconds']:7.1f} {r['valid_ppl']:9.1f} {r['test_ppl']:8.1f} {ratio:>10s}")


if __name__ == "__main__":
    main()
