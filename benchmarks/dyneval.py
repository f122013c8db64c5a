"""Throughput of dynamic evaluation beside the same model's static evaluation and training step.

For a word-level model (vocabulary 10,000, as PTB) and a character-level one (vocabulary 50), on
random tokens, measures tokens/s of

* static evaluation (one stream, the state carried across segments);
* dynamic evaluation of one stream: global RMS + RMS decay (eq. 4.7, segments of 5), traditional SGD
  (segments of 1) and sparse dynamic evaluation (§4.6, H = hidden/2);
* a training step (forward, backward, Adam) at batch 1 with the segment length as BPTT window (the same
  computation dynamic evaluation does per segment, Krause §4.3) and at a usual training batch (32 × 35);
* 8 independent streams, each with its own fast weights, evaluated batched (vmap; sparse: native
  batch) and one after the other.

Each measurement is the median of ``--repeats`` runs. Ratios are printed relative to static evaluation
and to the batch-1 training step.

    python benchmarks/dyneval.py [--tokens 300] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch
import torch.nn.functional as F

from paperlib.dyneval import dynamic_evaluate, mean_squared_gradients, static_evaluate
from paperlib.models import build_lm, detach_state


def timed(fn: Callable[[], None], repeats: int) -> float:
    """Median wall time of ``fn`` over ``repeats`` runs (after one warm-up run)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def train_throughput(model: torch.nn.Module, vocab: int, batch: int, bptt: int, steps: int, repeats: int) -> float:
    """Tokens/s of training steps (forward, backward, Adam) with the state carried across windows."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    data = torch.randint(0, vocab, (batch, steps * bptt + 1))

    def run() -> None:
        model.train()
        state = None
        for s in range(steps):
            window = data[:, s * bptt : (s + 1) * bptt + 1]
            logits, state = model(window[:, :-1], state)
            state = detach_state(state)
            loss = F.cross_entropy(logits.reshape(-1, vocab), window[:, 1:].reshape(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        model.eval()

    return batch * bptt * steps / timed(run, repeats)


def benchmark(name: str, vocab: int, hidden: int, tokens: int, streams: int, repeats: int) -> None:
    torch.manual_seed(0)
    model = build_lm("lstm", vocab, hidden, 1, capped_input_gate=False).eval()
    ms_g = mean_squared_gradients(model, torch.randint(0, vocab, (20 * 32 * 10,)), batch_size=32, bptt=20, max_batches=5)
    ms_sparse = mean_squared_gradients(model, torch.randint(0, vocab, (20 * 32 * 10,)), batch_size=32, bptt=20,
                                       max_batches=5, sparse_units=hidden // 2)
    one = torch.randint(0, vocab, (tokens + 1,))
    many = torch.randint(0, vocab, (streams, tokens // 2 + 1))
    rms = dict(rule="global_rms", lr=1e-4, decay=1e-3, ms_g=ms_g, segment_len=5)
    sparse = dict(rule="global_rms", lr=1e-3, decay=1e-3, ms_g=ms_sparse, segment_len=5, sparse_units=hidden // 2)

    rows: list[tuple[str, float]] = []

    def measure(label: str, count: int, fn: Callable[[], object]) -> None:
        rows.append((label, count / timed(fn, repeats)))

    measure("static evaluation (segments of 5)", tokens, lambda: static_evaluate(model, one, segment_len=5))
    measure("dynamic: global RMS + RMS decay (n=5)", tokens, lambda: dynamic_evaluate(model, one, **rms))
    measure("dynamic: traditional SGD (n=1)", tokens // 5,
            lambda: dynamic_evaluate(model, one[: tokens // 5 + 1], rule="sgd", lr=0.1, segment_len=1))
    measure("dynamic: sparse, global RMS (n=5)", tokens, lambda: dynamic_evaluate(model, one, **sparse))
    rows.append(("training step, batch 1 x 5", train_throughput(model, vocab, 1, 5, tokens // 5, repeats)))
    rows.append(("training step, batch 32 x 35", train_throughput(model, vocab, 32, 35, 2, repeats)))
    count = many.numel() - streams
    measure(f"dynamic, {streams} streams batched (vmap)", count, lambda: dynamic_evaluate(model, many, batched=True, **rms))
    measure(f"dynamic, {streams} streams one by one", count, lambda: dynamic_evaluate(model, many, batched=False, **rms))
    measure(f"sparse, {streams} streams batched", count, lambda: dynamic_evaluate(model, many, batched=True, **sparse))
    measure(f"sparse, {streams} streams one by one", count, lambda: dynamic_evaluate(model, many, batched=False, **sparse))

    static = rows[0][1]
    train1 = rows[4][1]
    print(f"\n{name}: vocabulary {vocab}, LSTM hidden {hidden} (tied embeddings), {torch.get_num_threads()} thread(s)")
    print(f"{'':44s} {'tokens/s':>10s} {'/ static':>9s} {'/ train b1':>10s}")
    for label, rate in rows:
        print(f"{label:44s} {rate:10.0f} {rate / static:9.3f} {rate / train1:10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    benchmark("word level (PTB-sized vocabulary)", 10_000, 128, args.tokens, args.streams, args.repeats)
    benchmark("character level", 50, 256, args.tokens, args.streams, args.repeats)


if __name__ == "__main__":
    main()
