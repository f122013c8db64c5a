"""Schemas of the shared parts of `params.yaml`: the ``data`` and ``dryrun`` sections and the corpus summary.

Each schema lists the settings a section (or one profile of the ``dataset_summary`` block, which describes the
corpora every family trains on) must give; :mod:`paperlib.experiments.common.config` validates them, so a typo is
caught before anything runs. Each family's schemas live in its own folder (``config.EXPERIMENT_HOMES``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from paperlib.experiments.common.config import register_experiment, register_section
from paperlib.data.corpora import CORPORA


def check_corpora(corpora: list[str]) -> None:
    """Every name in ``corpora`` is a corpus of :data:`paperlib.data.corpora.CORPORA`, else a ValueError naming them."""
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
        check_corpora(self.corpora)


@register_section("dryrun", optional=True)
@dataclass(frozen=True)
class DryRunParams:
    """``paperlib dryrun`` per profile: ``max_length`` caps every sequence (a quick check that the paper configs
    build and step, as the smoke pipeline needs); null: the paper's lengths, the numbers the index reports."""

    max_length: dict = dataclasses.field(default_factory=lambda: {"smoke": None, "cpu": None, "gpu": None, "paper": None})

    def __post_init__(self) -> None:
        from paperlib.experiments.common.config import PROFILES

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
        check_corpora(self.corpora)
        if self.max_rank < 1 or self.sentence_max_len < 1:
            raise ValueError("max_rank and sentence_max_len must be >= 1")
