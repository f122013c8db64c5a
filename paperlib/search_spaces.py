"""The thesis' hyperparameter tuning ranges, encoded once: Melis thesis Tables 2.4, 2.5, 2.6 and 5.2.

Each table is a tuple of :class:`Hyperparameter` (range and spacing as printed); :data:`SPACES` names the search
spaces built from them, and :func:`sample` asks an Optuna trial for every hyperparameter of a space and returns a
settings dict keyed by the names below. Where a name differs from the thesis', ``label`` keeps the printed one.

Readings of the tables (the thesis leaves them open):

- Table 2.4 lists ``mogrifier_rounds`` and ``mogrifier_rank`` for every model, but they are "tuned only for the
  Mogrifier" (§2.A), so the LSTM spaces (``lstm``, ``enwik8_lstm``) leave them out.
- ``input_embedding_ratio`` has no spacing in Table 2.4 and is taken as linear; §2.A: a ratio >= 1 means embedding
  size = hidden size without the projection, and ``mogrifier_rank`` <= 0 means full rank. The ratio 0.0 at the low
  end would give an empty embedding; :func:`paperlib.tuning.lm_hyperparameters` rounds up to one unit.
- Table 2.6's ``max_time_steps`` goes up to 20 for word and 50 for character-level tasks (§2.A), hence the two
  spaces ``dyneval_word`` and ``dyneval_char``. Their keys are the keyword arguments of
  :func:`paperlib.dyneval.dynamic_evaluate` (``segment_len``, ``lr``, ``decay``, ``eps``).
- Table 5.2's "VQ decay 0.9 ... 0.99999, log" is read as log-uniform in 1 - decay in [1e-5, 0.1]
  (``vq_one_minus_decay``), as :mod:`paperlib.experiments.micmco.synthetic.micmco_synthetic` does; its keys are those of :mod:`paperlib.experiments.micmco.synthetic.micmco_synthetic`.
- Integer hyperparameters (rounds, rank, window, counts) are sampled uniformly over the integers in the range.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Hyperparameter:
    """One tuned hyperparameter: its range [low, high], log or linear spacing, integer or real."""

    name: str
    low: float
    high: float
    log: bool = False
    integer: bool = False
    label: str | None = None  # the thesis' name where it differs from ``name``

    def __post_init__(self) -> None:
        if not self.low < self.high:
            raise ValueError(f"{self.name}: need low < high, got [{self.low}, {self.high}]")
        if self.log and self.low <= 0:
            raise ValueError(f"{self.name}: a log-spaced range must be positive, got low = {self.low}")

    def suggest(self, trial: Any) -> float | int:
        """Ask an Optuna trial (or ``optuna.trial.FixedTrial``) for this hyperparameter."""
        if self.integer:
            return trial.suggest_int(self.name, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(self.name, self.low, self.high, log=self.log)

    def to_unit(self, value: float) -> float:
        """Position of ``value`` in the range on the sampling scale: 0 at ``low``, 1 at ``high``."""
        if self.log:
            return (math.log(value) - math.log(self.low)) / (math.log(self.high) - math.log(self.low))
        return (value - self.low) / (self.high - self.low)

    def from_unit(self, unit: float) -> float | int:
        """The value at position ``unit`` (clipped to [0, 1]) on the sampling scale; integers round to the nearest."""
        unit = min(1.0, max(0.0, unit))
        if unit in (0.0, 1.0):
            return (int if self.integer else float)(self.high if unit else self.low)
        if self.log:
            value = math.exp(math.log(self.low) + unit * (math.log(self.high) - math.log(self.low)))
        else:
            value = self.low + unit * (self.high - self.low)
        if self.integer:
            return min(int(self.high), max(int(self.low), round(value)))
        return min(self.high, max(self.low, value))

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high and (not self.integer or float(value).is_integer())


def _hp(name: str, low: float, high: float, log: bool = False, integer: bool = False,
        label: str | None = None) -> Hyperparameter:
    return Hyperparameter(name, low, high, log, integer, label)


_MOGRIFIER = (
    _hp("mogrifier_rounds", 0, 6, integer=True, label="mogrifier_rounds (r)"),
    _hp("mogrifier_rank", -20, 100, integer=True, label="mogrifier_rank (k)"),  # <= 0: full rank
)

# Melis thesis Table 2.4: all tasks except Enwik8.
TABLE_2_4: tuple[Hyperparameter, ...] = (
    _hp("learning_rate", 0.001, 0.004, log=True),
    _hp("input_embedding_ratio", 0.0, 2.0),
    _hp("l2_penalty", 5e-6, 1e-3, log=True),
    _hp("input_dropout", 0.0, 0.9),
    _hp("inter_layer_dropout", 0.0, 0.95),
    _hp("state_dropout", 0.0, 0.8),
    _hp("output_dropout", 0.0, 0.95),
    *_MOGRIFIER,
)

# Melis thesis Table 2.5: Enwik8 (no input_embedding_ratio, tighter dropout).
TABLE_2_5: tuple[Hyperparameter, ...] = (
    _hp("learning_rate", 0.001, 0.004, log=True),
    _hp("l2_penalty", 5e-6, 1e-3, log=True),
    _hp("input_dropout", 0.0, 0.2),
    _hp("inter_layer_dropout", 0.0, 0.2),
    _hp("state_dropout", 0.0, 0.25),
    _hp("output_dropout", 0.0, 0.25),
    *_MOGRIFIER,
)


def _table_2_6(max_time_steps: int) -> tuple[Hyperparameter, ...]:
    """Melis thesis Table 2.6: dynamic evaluation (``max_time_steps`` <= 20 for words, 50 for characters)."""
    return (
        _hp("segment_len", 1, max_time_steps, integer=True, label="max_time_steps"),
        _hp("lr", 1e-6, 1e-3, log=True, label="dyneval_learning_rate"),
        _hp("decay", 1e-6, 1e-2, log=True, label="dyneval_decay_rate"),
        _hp("eps", 1e-8, 1e-2, log=True, label="dyneval_epsilon"),
    )


TABLE_2_6_WORD = _table_2_6(20)
TABLE_2_6_CHAR = _table_2_6(50)

# Melis thesis Table 5.2: MICMCO (each configuration tunes the subset that applies to it).
TABLE_5_2: tuple[Hyperparameter, ...] = (
    _hp("learning_rate", 1e-4, 1e-2, log=True),
    _hp("lam", -0.05, 0.9999, label="λ"),  # KL and Rényi only
    _hp("alpha", 0.86, 16.0, log=True, label="α"),  # power objective only
    _hp("input_dropout", 0.0, 0.9),  # PTB validation only
    _hp("state_dropout", 0.0, 0.8),
    _hp("output_dropout", 0.0, 0.95),
    _hp("l2_penalty", 5e-6, 1e-3, log=True, label="L2 penalty coefficient"),
    _hp("num_latents", 1, 8, integer=True, label="number of latents"),  # VQ-VAE only
    _hp("categories", 2, 20, integer=True, label="number of categories"),
    _hp("vq_beta", 0.01, 20.0, log=True, label="VQ β"),
    _hp("vq_one_minus_decay", 1e-5, 0.1, log=True, label="VQ decay (as 1 - decay)"),
)


@dataclass(frozen=True)
class SearchSpace:
    """A named set of hyperparameters with the table it comes from."""

    name: str
    source: str
    hyperparameters: tuple[Hyperparameter, ...]

    def __post_init__(self) -> None:
        names = [h.name for h in self.hyperparameters]
        if len(set(names)) != len(names):
            raise ValueError(f"search space {self.name!r} repeats a hyperparameter: {names}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(h.name for h in self.hyperparameters)

    def __getitem__(self, name: str) -> Hyperparameter:
        for h in self.hyperparameters:
            if h.name == name:
                return h
        raise ValueError(f"search space {self.name!r} has no hyperparameter {name!r}; it has: {', '.join(self.names)}")

    def subset(self, names: Iterable[str]) -> SearchSpace:
        """The same ranges for ``names`` only (e.g. the MICMCO hyperparameters one configuration tunes)."""
        chosen = tuple(self[n] for n in names)
        return SearchSpace(f"{self.name}[{','.join(h.name for h in chosen)}]", self.source, chosen)

    def sample(self, trial: Any) -> dict[str, float | int]:
        """Ask ``trial`` for every hyperparameter, in table order."""
        return {h.name: h.suggest(trial) for h in self.hyperparameters}

    def to_unit(self, params: Mapping[str, float]) -> dict[str, float]:
        """Every hyperparameter's position in its range on its sampling scale (0 = low, 1 = high)."""
        return {h.name: h.to_unit(params[h.name]) for h in self.hyperparameters}


SPACES: dict[str, SearchSpace] = {
    "lstm": SearchSpace("lstm", "Melis thesis Table 2.4 (without r, k)",
                        tuple(h for h in TABLE_2_4 if not h.name.startswith("mogrifier_"))),
    "mogrifier": SearchSpace("mogrifier", "Melis thesis Table 2.4", TABLE_2_4),
    "enwik8_lstm": SearchSpace("enwik8_lstm", "Melis thesis Table 2.5 (without r, k)",
                               tuple(h for h in TABLE_2_5 if not h.name.startswith("mogrifier_"))),
    "enwik8_mogrifier": SearchSpace("enwik8_mogrifier", "Melis thesis Table 2.5", TABLE_2_5),
    "dyneval_word": SearchSpace("dyneval_word", "Melis thesis Table 2.6 (word level)", TABLE_2_6_WORD),
    "dyneval_char": SearchSpace("dyneval_char", "Melis thesis Table 2.6 (character level)", TABLE_2_6_CHAR),
    "micmco": SearchSpace("micmco", "Melis thesis Table 5.2", TABLE_5_2),
}


def get_space(name: str | SearchSpace) -> SearchSpace:
    """The search space called ``name`` (a :class:`SearchSpace` passes through)."""
    if isinstance(name, SearchSpace):
        return name
    if name not in SPACES:
        raise ValueError(f"unknown search space {name!r}; valid choices: {', '.join(SPACES)}")
    return SPACES[name]


def sample(trial: Any, space: str | SearchSpace) -> dict[str, float | int]:
    """Sample ``trial`` over the search space ``space`` into a settings dict ``{name: value}``."""
    return get_space(space).sample(trial)
