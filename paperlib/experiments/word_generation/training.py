"""Building, training (resumable) and evaluating one DSSM or GRU run."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch import Tensor, nn

from paperlib.device import load_checkpoint
from paperlib.models.dssm import CharVocab, DeepStateSpaceModel, DSSMConfig, GRUWordModel, force_end_of_word
from paperlib.word_metrics import noise_mutual_information, train_test_cross_entropy, vocabulary_coverage
from paperlib.experiments.word_generation.settings import (
    WordGenerationParams, _DSSM_FIELDS, _TUPLE_FIELDS, complete_spec,
)
from paperlib.experiments.word_generation.data import SplitData, finite_or_none, ngram_row


def build_model(spec: dict[str, Any], vocab: CharVocab, max_len: int) -> nn.Module:
    """DSSM or GRU baseline from a spec (see :func:`complete_spec`)."""
    spec = complete_spec(spec)
    if spec["kind"] == "gru":
        return GRUWordModel(vocab, spec["state_size"], max_len)
    options = {k: tuple(v) if k in _TUPLE_FIELDS else v for k, v in spec.items() if k in _DSSM_FIELDS}
    options["max_len"] = max_len  # the data's limit
    return DeepStateSpaceModel(vocab, DSSMConfig(**options))


def model_loss(model: nn.Module, tokens: Tensor, lengths: Tensor, samples: int,
               generator: torch.Generator) -> Tensor:
    """Negative bound (DSSM: ELBO, eq. 9, or the weighted bound of Algorithm 1) or teacher-forced NLL."""
    if isinstance(model, DeepStateSpaceModel):
        return model.loss(tokens, lengths, samples, generator)
    return model.loss(tokens, lengths)


@torch.no_grad()
def gru_symbol_entropy(model: GRUWordModel, n: int, generator: torch.Generator) -> float:
    """Mean entropy of ``P(w_t | w_<t)`` per symbol along ``n`` ancestral samples, up to end-of-word."""
    device = model.output.weight.device
    eow = model.vocab.eow_index
    symbol = torch.full((n, 1), eow, dtype=torch.long, device=device)
    alive = torch.ones(n, dtype=torch.bool, device=device)
    state, total, count = None, 0.0, 0
    for t in range(model.max_len + 1):
        logits, state = model(symbol, state)
        log_p = force_end_of_word(logits[:, 0], torch.tensor(t, device=device), model.max_len, eow).log_softmax(-1)
        ent = -(log_p.exp() * log_p).sum(-1)  # [n]
        total += float(ent[alive].sum())
        count += int(alive.sum())
        symbol = torch.multinomial(log_p.exp(), 1, generator=generator)
        alive &= symbol[:, 0] != eow
        if not bool(alive.any()):
            break
    return total / count


def noise_information_trajectories(model: DeepStateSpaceModel, steps: int, trajectories: int, n_noise: int,
                                   generator: torch.Generator) -> Tensor:
    """``I(t)`` [trajectories, steps] of single prior prefixes (eq. 13 without the outer mean; Fig. 2)."""
    return torch.stack([noise_mutual_information(model, steps, 1, n_noise, generator).per_step
                        for _ in range(trajectories)])


# -- training -------------------------------------------------------------------------------


@dataclass
class TrainResult:
    steps: int
    diverged: bool
    history: list[dict[str, float]]


def _history_point(model: nn.Module, settings: WordGenerationParams, seed: int) -> dict[str, float]:
    """Fig. 3 quantities of a DSSM: ``I_bar`` and mean ``H[w_t | h_t]`` with common random numbers."""
    if not isinstance(model, DeepStateSpaceModel):
        return {}
    gen = torch.Generator(device=model.h0.device).manual_seed(seed + 7919)
    info = noise_mutual_information(model, model.config.max_len + 1, settings.history_prefixes,
                                    settings.mi_noise, gen)
    return {"I_bar": info.mean, "emission_entropy": float(info.emission_entropy.mean())}


GENERATOR_KEYS = frozenset({"batch_gen", "noise_gen"})  # checkpoint entries that must stay CPU ByteTensors


def train_model(model: nn.Module, split: SplitData, settings: WordGenerationParams, samples: int, seed: int,
                checkpoint: Path | None = None, progress: Callable[[str], None] | None = None,
                stop_at: int | None = None) -> TrainResult:
    """Adam on the negative bound with words drawn by frequency (§2.6, §5.1), resumable.

    Every ``history_every`` steps the mean training loss (and for the DSSM ``I_bar`` and the mean
    symbolic entropy, Fig. 3) is recorded. The checkpoint holds model, optimizer, both random
    generators and the history, so a resumed run continues bit-for-bit. ``stop_at`` ends this call
    early (with a checkpoint), as an interruption would. A non-finite loss stops the run
    (``diverged``) — the paper's "did not allow for stable training".
    """
    device = next(model.parameters()).device
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
    batch_gen = torch.Generator().manual_seed(seed)
    noise_gen = torch.Generator(device=device).manual_seed(seed + 1)
    step, diverged, history, running = 0, False, [], [0.0, 0]
    if checkpoint is not None and checkpoint.is_file():
        state = load_checkpoint(checkpoint, device, cpu_keys=GENERATOR_KEYS)  # generator states stay CPU tensors
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        batch_gen.set_state(state["batch_gen"])
        noise_gen.set_state(state["noise_gen"])
        step, diverged, history, running = state["step"], state["diverged"], state["history"], state["running"]

    def save() -> None:
        if checkpoint is None:
            return
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        tmp = checkpoint.with_name(f".{checkpoint.name}.tmp")
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "batch_gen": batch_gen.get_state(), "noise_gen": noise_gen.get_state(), "step": step,
                    "diverged": diverged, "history": history, "running": running}, tmp)
        os.replace(tmp, checkpoint)

    if step == 0 and not history:
        history.append({"step": 0, **_history_point(model, settings, seed)})
    model.train()
    last = settings.steps if stop_at is None else min(stop_at, settings.steps)
    while step < last and not diverged:
        tokens, lengths = split.batch(settings.batch_size, batch_gen)
        loss = model_loss(model, tokens.to(device), lengths.to(device), samples, noise_gen)
        if not torch.isfinite(loss):
            diverged = True
            history.append({"step": step, "diverged": True})
            break
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if settings.clip_norm is not None:
            nn.utils.clip_grad_norm_(model.parameters(), settings.clip_norm)
        optimizer.step()
        step += 1
        running = [running[0] + float(loss.detach()), running[1] + 1]
        if step % settings.history_every == 0 or step == settings.steps:
            point = {"step": step, "loss": running[0] / running[1], **_history_point(model, settings, seed)}
            history.append(point)
            running = [0.0, 0]
            if progress is not None:
                progress("  " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                          for k, v in point.items()))
        if step % settings.checkpoint_every == 0:
            save()
    save()
    return TrainResult(step, diverged, history)


# -- evaluation -----------------------------------------------------------------------------


def _log_prob_fn(model: nn.Module, settings: WordGenerationParams, seed: int) -> Callable[[list[str]], Tensor]:
    if isinstance(model, DeepStateSpaceModel):
        gen = torch.Generator(device=model.h0.device).manual_seed(seed + 11)
        return lambda words: model.log_prob_words(words, settings.eval_samples, gen)
    return model.log_prob_words


def evaluate_model(model: nn.Module, split: SplitData, settings: WordGenerationParams, seed: int,
                   ngram: dict[str, dict[int, Any]] | None = None) -> dict[str, Any]:
    """The metrics of §4 for one trained run.

    Cross-entropies use the union of train and test types in one call, so the DSSM's Monte Carlo
    ``P_hat`` (eq. 12) shares its ``eval_samples`` trajectories across all words. Words for the
    data-space metrics are sampled; with ``ngram`` models (Table 2) a second set is generated with
    the DSSM emitting the argmax of the observation model (the GRU keeps sampling).
    """
    model.eval()
    device = next(model.parameters()).device
    gen = torch.Generator(device=device).manual_seed(seed + 13)
    h_train, h_test = train_test_cross_entropy(_log_prob_fn(model, settings, seed), split.train.words,
                                               split.train.counts, split.test.words, split.test.counts)
    generated = model.sample_words(settings.generated_words, generator=gen)
    coverage = vocabulary_coverage(generated, split.train.words)
    row: dict[str, Any] = {"H_train": finite_or_none(h_train), "H_test": finite_or_none(h_test),
                           "in_vocab": coverage.in_vocabulary, "in_vocab_unique": coverage.unique_in_vocabulary,
                           "unique": coverage.unique, "samples": generated[: settings.samples_shown]}
    if isinstance(model, DeepStateSpaceModel):
        info = noise_mutual_information(model, model.config.max_len + 1, settings.mi_prefixes, settings.mi_noise,
                                        torch.Generator(device=device).manual_seed(seed + 17))
        row.update(I_bar=info.mean, I_t=info.per_step.tolist(), emission_entropy=info.emission_entropy.tolist())
    else:
        row.update(symbol_entropy=gru_symbol_entropy(model, settings.generated_words, gen))
    if ngram is not None:
        emission = "argmax" if isinstance(model, DeepStateSpaceModel) else "sample"
        words = model.sample_words(settings.ngram_words, generator=gen, emission=emission)
        row.update(ngram_row(words, ngram), ngram_emission=emission, ngram_samples=words[: settings.samples_shown])
    return row
