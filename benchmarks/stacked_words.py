"""Stacked word-generation runs against separate runs on this machine (word_generation/training.py).

Trains the same seeds of one spec (S&H Table 1's rows: a DSSM flow configuration, or the GRU baseline) for the same
steps twice: as one :func:`~paperlib.experiments.word_generation.training.train_stacked` and one after another with
:func:`~paperlib.experiments.word_generation.training.train_model`, on random words of 2-12 letters over 26 letters
at the paper's batch of 128 by default, and prints both wall times and their ratio. The stack is a GPU lever (one
sequence of kernels for all seeds, where a separate run is launch-bound); on a CPU, which pays for every
multiply-add, it gains little or loses (the vmapped GRU runs step by step, the padding adds work); the device
script times the stacked workloads on a card (``benchmarks/gpu.sh``).
Run: ``python benchmarks/stacked_words.py [--flow 2xTRIL --samples 10 --seeds 5 --steps 20]``.
"""

from __future__ import annotations

import argparse
import string
import time

import numpy as np
import torch

from paperlib.data.wordlist import WordList
from paperlib.experiments.word_generation.training import build_model, train_model, train_stacked
from paperlib.experiments.word_generation.word_generation import WordGenerationParams, complete_spec, make_splits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flow", default="TRIL", help="the generative flow (DSSM), or 'GRU' for the baseline")
    parser.add_argument("--samples", type=int, default=1, help="K (importance samples) of a DSSM")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--words", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    words = sorted({"".join(rng.choice(list(string.ascii_lowercase), size=int(n)))
                    for n in rng.integers(2, 13, args.words)})
    split = make_splits(WordList(words, rng.integers(10, 10_000, len(words))))["standard"]
    spec = ({"kind": "gru", "state_size": 8} if args.flow.upper() == "GRU" else
            {"kind": "dssm", "generative_flow": args.flow, "samples": args.samples})
    settings = _settings(spec, args)
    spec = complete_spec(spec)
    samples = spec.get("samples", 1)

    def models() -> list[torch.nn.Module]:
        built = []
        for seed in range(args.seeds):
            torch.manual_seed(seed)
            built.append(build_model(spec, split.vocab, settings.max_len))
        return built

    stacked_models = models()
    started = time.perf_counter()
    train_stacked(stacked_models, split, settings, samples, list(range(args.seeds)))
    stacked = time.perf_counter() - started
    started = time.perf_counter()
    for seed, model in enumerate(models()):
        train_model(model, split, settings, samples, seed)
    separate = time.perf_counter() - started
    name = "GRU baseline" if spec["kind"] == "gru" else f"{args.flow}, K={samples}"
    print(f"{name}: {args.seeds} seeds x {args.steps} steps (batch {args.batch}, {args.threads} thread(s)): "
          f"stacked {stacked:.1f} s, separate {separate:.1f} s, stacked / separate {stacked / separate:.2f}")


def _settings(spec: dict, args: argparse.Namespace) -> WordGenerationParams:
    """The stage's settings around one spec (its table rows and evaluation sizes unused here)."""
    dssm = spec if spec["kind"] == "dssm" else {"kind": "dssm"}
    return WordGenerationParams(
        table1={"dssm": dssm, "gru": {"kind": "gru", "state_size": 8}}, table2={}, table3_generative=[],
        table3_inference=[], figure_model="dssm", baseline_reference="gru", steps=args.steps, batch_size=args.batch,
        lr=1e-3, seeds=list(range(args.seeds)), seeds_weighted=list(range(args.seeds)), eval_samples=1,
        generated_words=1, ngram_words=1, mi_prefixes=1, fig2_trajectories=1, history_every=args.steps,
        history_prefixes=1)


if __name__ == "__main__":
    main()
