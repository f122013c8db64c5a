"""Stacked PTB sentence-VAE trials against separate runs on this machine (micmco/ptb/stacked_trials.py).

Trains the same M trials (a Halton design of one curve, seeds s x 1000 + i as the ladder's) for the same steps twice:
as one :class:`~paperlib.experiments.micmco.ptb.stacked_trials.StackedTrials` and one after another with
:func:`~paperlib.experiments.micmco.ptb.trials.train`, on random sentences of 5-35 tokens at the ``cpu`` profile's
shapes by default (vocabulary 500, hidden 32, batch 16), and prints both wall times and their ratio. On a CPU the
stack is expected to be slower (vmap and the step-by-step decoder against fused recurrences); the stack is a GPU
lever, timed there by ``benchmarks/gpu.py``.
Run: ``python benchmarks/stacked_trials.py [--curve dreg16_renyi.shared --seeds 3 --trials 4 --steps 20]``.
"""

from __future__ import annotations

import argparse
import time

import torch

from paperlib.experiments.micmco.ptb.data import SentenceData
from paperlib.experiments.micmco.ptb.design import MicmcoPtbParams, curve_of
from paperlib.experiments.micmco.ptb.stacked_trials import StackedTrials, TrialSpec
from paperlib.experiments.micmco.ptb.trials import build_model, train
from paperlib.experiments.micmco.synthetic.micmco_synthetic import halton_design


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--curve", default="dreg16_renyi.shared")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--vocab", type=int, default=500)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    sentences = [torch.cat([torch.randint(1, args.vocab, (int(n),), generator=generator), torch.tensor([0])])
                 for n in torch.randint(5, 35, (2000,), generator=generator)]
    data = SentenceData(sentences, sentences[:10], sentences[10:20], sentences[20:30], args.vocab, 0)
    settings = MicmcoPtbParams(figures=["5.12"], trials=args.trials, startup_trials=args.trials, steps=args.steps,
                               batch_size=args.batch, hidden_size=args.hidden)
    curve = curve_of(args.curve)
    specs = [TrialSpec(point, seed * 1000 + i) for seed in range(args.seeds)
             for i, point in enumerate(halton_design(curve.space, args.trials, seed))]
    started = time.perf_counter()
    StackedTrials(curve, specs, settings, data, "cpu").run()
    stacked = time.perf_counter() - started
    started = time.perf_counter()
    for spec in specs:
        torch.manual_seed(spec.seed)
        model = build_model(curve, spec.params, settings, args.vocab)
        train(model, curve, spec.params, data.train, 0, args.steps, args.batch, spec.seed)
    separate = time.perf_counter() - started
    print(f"{args.curve}: {len(specs)} trials x {args.steps} steps (vocabulary {args.vocab}, hidden {args.hidden}, "
          f"batch {args.batch}, {args.threads} thread(s)): stacked {stacked:.1f} s, separate {separate:.1f} s, "
          f"stacked / separate {stacked / separate:.2f}")


if __name__ == "__main__":
    main()
