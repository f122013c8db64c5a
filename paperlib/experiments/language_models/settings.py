"""Parameter schema of the language-model comparisons in `params.yaml`: stages ``lm_ptb``, ``lm_ptb_char`` and
``lm_ptb_ablation`` (:mod:`~paperlib.experiments.language_models.lm_ptb`) and, with ``corpus: wikitext2``,
``lm_wt2_bytes`` (:mod:`~paperlib.experiments.language_models.lm_wt2_bytes`).

:mod:`paperlib.experiments.common.config` validates every profile against it, so a typo is caught before anything runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from paperlib.experiments.common.config import register_experiment
from paperlib.experiments.common.schemas import check_corpora


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

        check_corpora([self.corpus])
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
