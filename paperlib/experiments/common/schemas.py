"""Parameter schemas of the experiments in `params.yaml` (one dataclass per experiment).

Each schema lists the settings one profile of an experiment must give; `paperlib.experiments.config`
validates every profile against it, so a typo is caught before anything runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from paperlib.experiments.config import register_experiment, register_section
from paperlib.data.corpora import CORPORA


def _check_corpora(corpora: list[str]) -> None:
    unknown = [c for c in corpora if c not in CORPORA]
    if unknown:
        raise ValueError(f"unknown corpora {unknown}; known corpora: {', '.join(CORPORA)}")


@register_section("data")
@dataclass(frozen=True)
class DataParams:
    """Where corpora live and which ones the `data` stage fetches."""

    root: str
    corpora: list[str]

    def __post_init__(self) -> None:
        _check_corpora(self.corpora)


@register_section("dryrun", optional=True)
@dataclass(frozen=True)
class DryRunParams:
    """``paperlib dryrun`` per profile: ``max_length`` caps every sequence (a quick check that the paper configs
    build and step, as the smoke pipeline needs); null: the paper's lengths, the numbers the index reports."""

    max_length: dict = dataclasses.field(default_factory=lambda: {"smoke": None, "cpu": None, "paper": None})

    def __post_init__(self) -> None:
        from paperlib.experiments.config import PROFILES

        if sorted(self.max_length) != sorted(PROFILES):
            raise ValueError(f"dryrun.max_length must give exactly the profiles {', '.join(PROFILES)}")
        for profile, value in self.max_length.items():
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"dryrun.max_length.{profile} must be a positive integer or null, got {value!r}")


@register_experiment("dataset_summary")
@dataclass(frozen=True)
class DatasetSummaryParams:
    """Which corpora the data-summary notebook describes, and how much of each curve it keeps."""

    corpora: list[str]
    max_rank: int
    sentence_max_len: int = 35

    def __post_init__(self) -> None:
        _check_corpora(self.corpora)
        if self.max_rank < 1 or self.sentence_max_len < 1:
            raise ValueError("max_rank and sentence_max_len must be >= 1")


MODEL_SPEC_KEYS = ("cell", "hidden_size", "num_layers", "options", "train")


@register_experiment("lm_ptb")
@register_experiment("lm_ptb_char")
@register_experiment("lm_ptb_ablation")
@dataclass(frozen=True)
class LanguageModelParams:
    """A comparison of language models trained alike on one corpus (Melis thesis Tables 2.1, 2.2, 4.1).

    `models` maps a display name to `{cell, hidden_size, num_layers, options}` for `build_lm`, plus an
    optional `train` mapping of `TrainConfig` fields that override the shared ones for that model;
    `train` holds `paperlib.train.TrainConfig` fields shared by all models; every model is
    trained once per seed. `mc_samples` dropout masks are averaged for the MC-dropout numbers.
    """

    corpus: str
    models: dict
    train: dict
    seeds: list[int]
    mc_samples: int
    threads: int = 2
    eval_tokens: int | None = None  # evaluate on the first N validation/test tokens only (None: all)
    workers: int = 1  # runs trained at once, in processes of `threads` threads each (CPU only)

    def __post_init__(self) -> None:
        from paperlib.models import CELL_OPTIONS, VALID_CELLS
        from paperlib.train import TrainConfig

        _check_corpora([self.corpus])
        try:
            TrainConfig(**self.train)
        except TypeError as err:
            raise ValueError(f"train: {err}") from None
        if not self.models:
            raise ValueError("models must name at least one model")
        for name, spec in self.models.items():
            unknown = sorted(set(spec) - set(MODEL_SPEC_KEYS))
            if unknown or "cell" not in spec:
                raise ValueError(f"models.{name}: needs 'cell'; valid keys: {', '.join(MODEL_SPEC_KEYS)}; got {sorted(spec)}")
            if spec["cell"] not in VALID_CELLS:
                raise ValueError(f"models.{name}: unknown cell {spec['cell']!r}; valid cells: {', '.join(VALID_CELLS)}")
            bad = sorted(set(spec.get("options", {})) - set(CELL_OPTIONS[spec["cell"]]))
            if bad:
                raise ValueError(f"models.{name}: unknown option(s) {bad}; valid: {', '.join(sorted(CELL_OPTIONS[spec['cell']]))}")
            if "train" in spec:
                valid = [f.name for f in dataclasses.fields(TrainConfig)]
                if not isinstance(spec["train"], dict):
                    raise ValueError(f"models.{name}.train must map TrainConfig fields to values; valid keys: {', '.join(valid)}")
                bad = sorted(set(spec["train"]) - set(valid))
                if bad:
                    raise ValueError(f"models.{name}.train: unknown key(s) {bad}; valid keys: {', '.join(valid)}")
                try:
                    TrainConfig(**{**self.train, **spec["train"]})
                except ValueError as err:
                    raise ValueError(f"models.{name}.train: {err}") from None
        if not self.seeds or self.mc_samples < 1 or self.threads < 1 or self.workers < 1:
            raise ValueError("seeds must be non-empty and mc_samples, threads, workers >= 1")
