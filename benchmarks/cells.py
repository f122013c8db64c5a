"""Training throughput of the recurrent cells, side by side with ``torch.nn.LSTM``.

Measures tokens/s of full training steps (forward, backward, Adam step, state
carried across BPTT windows and detached) on random tokens, for a reference LM
built directly on ``torch.nn.LSTM`` and for paperlib's LSTM (capped input gate,
i.e. the fused recurrence), plain LSTM with state dropout, Mogrifier LSTM and
RLSTM, and prints each as a ratio to the reference at the same hidden size.

The models of one hidden size take their training steps in turn (round robin),
so a burst of load from other processes hits all of them alike; tokens/s is
computed from the median step time, and the ratio from the fastest step time
is printed as well.

    python benchmarks/cells.py [--hidden 256 512] [--warmup 2] [--steps 5] [--compile]

``--compile`` adds each paperlib model again under ``torch.compile`` (inductor; on a CPU it needs a C++
compiler) and prints how long its first step took, compilation included: whether compiling the per-time-step
recurrence pays, measured rather than assumed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from paperlib.models import build_lm, detach_state


class ReferenceLSTMLM(nn.Module):
    """Embedding -> torch.nn.LSTM -> tied softmax: the speed yardstick."""

    def __init__(self, vocab_size: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, hidden_size)
        self.rnn = nn.LSTM(hidden_size, hidden_size, num_layers, batch_first=True)
        self.decoder = nn.Linear(hidden_size, vocab_size)
        self.decoder.weight = self.embedding.weight

    def forward(self, tokens: Tensor, state: Any = None) -> tuple[Tensor, Any]:
        out, state = self.rnn(self.embedding(tokens), state)
        return self.decoder(out), state


class Trainer:
    """One model with its optimizer and carried state; ``step`` returns the wall time of one training step."""

    def __init__(self, model: nn.Module, vocab: int):
        self.model = model.train()
        self.vocab = vocab
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.state: Any = None

    def step(self, window: Tensor) -> float:
        start = time.perf_counter()
        logits, state = self.model(window[:, :-1], self.state)
        self.state = detach_state(state)
        loss = F.cross_entropy(logits.reshape(-1, self.vocab), window[:, 1:].reshape(-1))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 512])
    parser.add_argument("--vocab", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--bptt", type=int, default=70)
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--compile", action="store_true", help="also time each paperlib model under torch.compile")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    configs: list[tuple[str, Callable[[int], nn.Module]]] = [
        ("torch.nn.LSTM", lambda h: ReferenceLSTMLM(args.vocab, h, args.layers)),
        ("lstm (capped gate, fused)", lambda h: build_lm("lstm", args.vocab, h, args.layers)),
        ("lstm (plain, state dropout 0.1)", lambda h: build_lm(
            "lstm", args.vocab, h, args.layers, capped_input_gate=False, state_dropout=0.1)),
        ("mogrifier_lstm r=5 k=40", lambda h: build_lm(
            "mogrifier_lstm", args.vocab, h, args.layers, mogrifier_rounds=5, mogrifier_rank=40)),
        ("rlstm", lambda h: build_lm("rlstm", args.vocab, h, args.layers)),
    ]
    if args.compile:
        configs += [(f"{name} + torch.compile", lambda h, make=make: torch.compile(make(h)))
                    for name, make in configs[1:]]
    print(
        f"vocab {args.vocab}, batch {args.batch}, BPTT {args.bptt}, layers {args.layers}, threads {args.threads}, "
        f"{args.warmup} warm-up + {args.steps} timed steps per model (round robin)"
    )
    print(f"{'model':46s} {'H':>5s} {'tok/s (median)':>15s} {'ratio (median)':>15s} {'ratio (best)':>13s} "
          f"{'first step (s)':>15s}")
    tokens = args.batch * args.bptt
    generator = torch.Generator().manual_seed(0)
    for hidden in args.hidden:
        trainers = []
        for _, make in configs:
            torch.manual_seed(0)
            trainers.append(Trainer(make(hidden), args.vocab))
        times: list[list[float]] = [[] for _ in trainers]
        first: list[float] = []
        for index in range(args.warmup + args.steps):
            window = torch.randint(0, args.vocab, (args.batch, args.bptt + 1), generator=generator)
            for trainer, record in zip(trainers, times):
                elapsed = trainer.step(window)
                if index == 0:
                    first.append(elapsed)
                if index >= args.warmup:
                    record.append(elapsed)
        medians = [statistics.median(t) for t in times]
        bests = [min(t) for t in times]
        for (name, _), median, best, start in zip(configs, medians, bests, first):
            print(
                f"{name:46s} {hidden:5d} {tokens / median:15.0f} {medians[0] / median:14.2f}x "
                f"{bests[0] / best:12.2f}x {start:15.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
