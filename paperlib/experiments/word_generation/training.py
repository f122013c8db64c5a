"""Building, training (resumable; one run, or the seeds of one spec as a stack) and evaluating DSSM and GRU runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch import Tensor, nn

from paperlib.atomic_files import save_torch_atomic
from paperlib.device import load_checkpoint
from paperlib.flows import CouplingFlow
from paperlib.models.dssm import (CharVocab, DeepStateSpaceModel, DSSMConfig, GRUWordModel, TrajectoryNoise,
                                  check_tokens, force_end_of_word)
from paperlib.stacked import StackedModels, pad_to
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


class _Run:
    """One run's training state, the contents of its checkpoint: model, Adam, the word-batch and noise generators
    (seeded ``seed`` and ``seed + 1``), the step, whether it diverged, the history and the running mean loss."""

    def __init__(self, model: nn.Module, settings: WordGenerationParams, seed: int) -> None:
        self.model, self.settings, self.seed = model, settings, seed
        device = next(model.parameters()).device
        self.optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
        self.batch_gen = torch.Generator().manual_seed(seed)
        self.noise_gen = torch.Generator(device=device).manual_seed(seed + 1)
        self.step, self.diverged, self.history, self.running = 0, False, [], [0.0, 0]

    def state(self) -> dict[str, Any]:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "batch_gen": self.batch_gen.get_state(), "noise_gen": self.noise_gen.get_state(), "step": self.step,
                "diverged": self.diverged, "history": self.history, "running": self.running}

    def load(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.batch_gen.set_state(state["batch_gen"])
        self.noise_gen.set_state(state["noise_gen"])
        self.step, self.diverged, self.history, self.running = (state["step"], state["diverged"], state["history"],
                                                                state["running"])

    def save(self, checkpoint: Path | None) -> None:
        if checkpoint is not None:
            save_torch_atomic(self.state(), checkpoint)

    def begin(self) -> None:
        """The history's first point (before any step), unless resumed."""
        if self.step == 0 and not self.history:
            self.history.append({"step": 0, **_history_point(self.model, self.settings, self.seed)})

    def diverge(self) -> None:
        """A non-finite loss: the run stops before this step's update."""
        self.diverged = True
        self.history.append({"step": self.step, "diverged": True})

    def update(self, loss: float, progress: Callable[[str], None] | None, prefix: str = "") -> None:
        """Clip (if set), take the optimizer step on the gradients in place, and record the step's loss."""
        if self.settings.clip_norm is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.settings.clip_norm)
        self.optimizer.step()
        self.step += 1
        self.running = [self.running[0] + loss, self.running[1] + 1]
        if self.step % self.settings.history_every == 0 or self.step == self.settings.steps:
            point = {"step": self.step, "loss": self.running[0] / self.running[1],
                     **_history_point(self.model, self.settings, self.seed)}
            self.history.append(point)
            self.running = [0.0, 0]
            if progress is not None:
                progress("  " + prefix + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                                   for k, v in point.items()))

    def result(self) -> TrainResult:
        return TrainResult(self.step, self.diverged, self.history)


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
    run = _Run(model, settings, seed)
    if checkpoint is not None and checkpoint.is_file():
        run.load(load_checkpoint(checkpoint, device, cpu_keys=GENERATOR_KEYS))  # generator states stay CPU tensors
    run.begin()
    model.train()
    last = settings.steps if stop_at is None else min(stop_at, settings.steps)
    while run.step < last and not run.diverged:
        tokens, lengths = split.batch(settings.batch_size, run.batch_gen)
        loss = model_loss(model, tokens.to(device), lengths.to(device), samples, run.noise_gen)
        if not torch.isfinite(loss):
            run.diverge()
            break
        run.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        run.update(float(loss.detach()), progress)
        if run.step % settings.checkpoint_every == 0:
            run.save(checkpoint)
    run.save(checkpoint)
    return run.result()


def stackable(model: nn.Module) -> bool:
    """Whether :func:`train_stacked` can train copies of ``model`` together: every model here but a DSSM with Real NVP
    couplings (zuko's coupling indexes by a boolean mask, which ``torch.func.vmap`` cannot batch)."""
    return not any(isinstance(module, CouplingFlow) for module in model.modules())


def stacked_losses(stack: StackedModels, tokens: Tensor, lengths: Tensor, samples: int,
                   noise: TrajectoryNoise | None, members: Sequence[int] | None = None) -> Tensor:
    """Each stacked model's training loss on its own words, [M], in one vmapped pass: model m reads ``tokens[m]``
    [B, T], ``lengths[m]`` [B] and (a DSSM) its noise ``noise.xi[m]`` [T, K, B, d], ``noise.proposal[m]``,
    ``noise.uniform[m]`` [T, B]; the GRU baseline takes ``noise=None``. The tokens must have been checked
    (:func:`~paperlib.models.dssm.check_tokens`)."""
    if noise is None:
        return stack.call(lambda model, t, n: model.loss(t, n, check=False), tokens, lengths, members=members)

    def loss(model: nn.Module, t: Tensor, n: Tensor, xi: Tensor, proposal: Tensor | None, uniform: Tensor) -> Tensor:
        return model.loss(t, n, samples, noise=TrajectoryNoise(xi, proposal, uniform), check=False)

    return stack.call(loss, tokens, lengths, noise.xi, noise.proposal, noise.uniform,
                      in_dims=(0, 0, 0, None if noise.proposal is None else 0, 0), members=members)


def stacked_noise(models: Sequence[DeepStateSpaceModel], steps: Sequence[int], samples: int, batch: int,
                  generators: Sequence[torch.Generator], width: int) -> TrajectoryNoise:
    """Model m's noise for its words of ``steps[m]`` positions, drawn from ``generators[m]`` as :func:`train_model`
    draws it (:meth:`~paperlib.models.dssm.DeepStateSpaceModel.draw_noise`), padded with zeros to ``width``
    positions and stacked: ``xi`` [M, T, K, B, d], ``proposal`` likewise or None, ``uniform`` [M, T, B]."""
    drawn = [model.draw_noise(length, samples, batch, generator)
             for model, length, generator in zip(models, steps, generators)]
    proposal = None if drawn[0].proposal is None else torch.stack([pad_to(d.proposal, width, 0) for d in drawn])
    return TrajectoryNoise(torch.stack([pad_to(d.xi, width, 0) for d in drawn]), proposal,
                           torch.stack([pad_to(d.uniform, width, 0) for d in drawn]))


def _signature(model: nn.Module) -> tuple:
    """What must agree for models to share a stack: the stacked pass runs every model through model 0's modules and
    Python-side settings (sizes, flows, ``max_len``, the vocabulary)."""
    config = model.config if isinstance(model, DeepStateSpaceModel) else getattr(model, "max_len", None)
    vocab = getattr(model, "vocab", None)
    return type(model), repr(model), config, None if vocab is None else (vocab.letters, vocab.eow)


def checkpoint_step(checkpoint: Path, settings: WordGenerationParams) -> int | None:
    """The step a run's checkpoint (:func:`train_model`'s format) resumes from: 0 without one, None when the run is
    over (diverged or trained to ``settings.steps``)."""
    if not checkpoint.is_file():
        return 0
    state = load_checkpoint(checkpoint, "cpu", cpu_keys=GENERATOR_KEYS)
    return None if state["diverged"] or state["step"] >= settings.steps else state["step"]


def train_stacked(models: Sequence[nn.Module], split: SplitData, settings: WordGenerationParams, samples: int,
                  seeds: Sequence[int], checkpoints: Sequence[Path] | None = None,
                  progress: Callable[[str], None] | None = None, stop_at: int | None = None) -> list[TrainResult]:
    """:func:`train_model` of each of ``models`` (one spec, run m with ``seeds[m]``), trained together as one stack.

    Each step draws every run's words and noise from its own generators, as :func:`train_model` does, pads the
    words (with end-of-word) and the noise (with zeros) to the step's longest word, masked where a separate run
    would have stopped, and computes all losses in one vmapped pass (:func:`stacked_losses`); each run keeps its
    own Adam and clipping norm. Every step is thus the separate run's step up to float rounding (over a long
    float32 run the two trajectories can drift apart, as any two runs on different kernels do). A run whose loss
    becomes non-finite stops there (``diverged``) and the others go on. ``checkpoints[m]`` is run m's own checkpoint
    in :func:`train_model`'s format, written every ``checkpoint_every`` steps and at the end, and read back at the
    start: the runs that go on must then be at one step (group them by :func:`checkpoint_step`).
    """
    if not models or len(seeds) != len(models) or (checkpoints is not None and len(checkpoints) != len(models)):
        raise ValueError(f"train_stacked needs one seed (and checkpoint) per model: {len(models)} models, "
                         f"{len(seeds)} seeds, {len(checkpoints) if checkpoints is not None else 0} checkpoints")
    for index, model in enumerate(models):
        if _signature(model) != _signature(models[0]) or not stackable(model):
            raise ValueError(f"model {index} cannot join the stack: the models must share one stackable spec "
                             "(not Real NVP) and vocabulary")
    device = next(models[0].parameters()).device
    runs = [_Run(model, settings, seed) for model, seed in zip(models, seeds)]
    for run, path in zip(runs, checkpoints or []):
        if path.is_file():
            run.load(load_checkpoint(path, device, cpu_keys=GENERATOR_KEYS))
    last = settings.steps if stop_at is None else min(stop_at, settings.steps)
    if len({run.step for run in runs if not run.diverged and run.step < last}) > 1:
        raise ValueError("the runs' checkpoints are at different steps; train each step's runs as their own stack")

    def save() -> None:
        for run, path in zip(runs, checkpoints or []):
            run.save(path)

    for run in runs:
        run.begin()
        run.model.train()
    stack = StackedModels(models)
    dssm = isinstance(models[0], DeepStateSpaceModel)
    eow = split.vocab.eow_index
    max_len = models[0].config.max_len if dssm else models[0].max_len  # the check each model's own loss makes
    while True:
        live = [i for i, run in enumerate(runs) if not run.diverged and run.step < last]
        if not live:
            break
        words = [split.batch(settings.batch_size, runs[i].batch_gen) for i in live]
        for tokens, lengths in words:
            check_tokens(tokens, lengths, max_len)  # on the host: vmap cannot read values back
        width = max(tokens.shape[1] for tokens, _ in words)
        tokens = torch.stack([pad_to(t, width, 1, eow) for t, _ in words]).to(device)  # [M, B, T]
        lengths = torch.stack([n for _, n in words]).to(device)  # [M, B]
        noise = None
        if dssm:
            noise = stacked_noise([models[i] for i in live], [t.shape[1] for t, _ in words], samples,
                                  settings.batch_size, [runs[i].noise_gen for i in live], width)
        losses = stacked_losses(stack, tokens, lengths, samples, noise, members=live)  # [M]
        values = losses.detach().tolist()
        keep = [j for j, value in enumerate(values) if math.isfinite(value)]
        for j, i in enumerate(live):
            if j not in keep:
                runs[i].diverge()
            else:
                runs[i].optimizer.zero_grad(set_to_none=True)
        if keep:
            losses[keep].sum().backward()  # run m's loss reaches run m's parameters only
        for j in keep:
            runs[live[j]].update(values[j], progress, f"seed {runs[live[j]].seed}: ")
        if keep and runs[live[keep[0]]].step % settings.checkpoint_every == 0:
            save()
    save()
    return [run.result() for run in runs]


def train_runs(models: Sequence[nn.Module], split: SplitData, settings: WordGenerationParams, samples: int,
               seeds: Sequence[int], checkpoints: Sequence[Path], progress: Callable[[str], None] | None = None,
               stop_at: int | None = None) -> list[TrainResult]:
    """Train the runs of one spec (run m: ``models[m]``, ``seeds[m]``, its checkpoint ``checkpoints[m]``) to
    ``stop_at`` (default: the end): as one stack (:func:`train_stacked`) where there are several and the model
    stacks, else one by one (:func:`train_model`). Runs resumed at different steps (an interruption between two of a
    stack's checkpoint writes, or runs added since) first catch up with the ones furthest on, then go on together."""
    if len(models) > 1 and stackable(models[0]):
        last = settings.steps if stop_at is None else min(stop_at, settings.steps)
        steps = [checkpoint_step(path, settings) for path in checkpoints]  # None: over
        going_on = sorted({step for step in steps if step is not None and step < last})
        for step in going_on[:-1]:
            behind = [m for m, s in enumerate(steps) if s == step]
            train_runs([models[m] for m in behind], split, settings, samples, [seeds[m] for m in behind],
                       [checkpoints[m] for m in behind], progress, going_on[-1])
        return train_stacked(models, split, settings, samples, seeds, checkpoints, progress, stop_at)
    return [train_model(model, split, settings, samples, seed, checkpoint, progress, stop_at)
            for model, seed, checkpoint in zip(models, seeds, checkpoints)]


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
