"""Parameter schemas of the experiments in `params.yaml` (one dataclass per experiment).

Each schema lists the settings one profile of an experiment must give; `paperlib.config`
validates every profile against it, so a typo is caught before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from paperlib.config import register_experiment, register_section
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
