"""The stage's settings: model specs (DSSM flow configurations, the GRU baseline) and the profile's tables."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import torch

from paperlib.experiments.common.config import register_experiment
from paperlib.flows import build_flow
from paperlib.models.dssm import DSSMConfig
from paperlib.reference.word_generation import PAPER_NGRAM_ORDERS


NAME = "word_generation"
SPLITS = ("standard", "types")
MODEL_KINDS = ("dssm", "gru")
_DSSM_FIELDS = tuple(f.name for f in dataclasses.fields(DSSMConfig))
_DSSM_SPEC_KEYS = ("kind", "samples", *_DSSM_FIELDS)
_GRU_SPEC_KEYS = ("kind", "state_size")
_TUPLE_FIELDS = ("flow_hidden", "coupling_hidden", "q_hidden")
def complete_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A model spec with every default filled in, so that equal models compare equal.

    DSSM: ``{kind: dssm, samples: K, <DSSMConfig fields>}``; ``embedding_size`` and
    ``inference_hidden`` default to ``state_size``, ``q_uses_proposal`` to ``K > 1`` (Algorithm 1).
    GRU baseline: ``{kind: gru, state_size: d}`` (embedding size = state size, §5.1).
    """
    if not isinstance(spec, dict) or spec.get("kind") not in MODEL_KINDS:
        raise ValueError(f"a model spec needs 'kind', one of {MODEL_KINDS}; got {spec!r}")
    valid = _DSSM_SPEC_KEYS if spec["kind"] == "dssm" else _GRU_SPEC_KEYS
    unknown = sorted(set(spec) - set(valid))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in a {spec['kind']} spec; valid keys: {', '.join(valid)}")
    if spec["kind"] == "gru":
        d = int(spec.get("state_size", 8))
        if d < 1:
            raise ValueError("state_size must be a positive integer")
        return {"kind": "gru", "state_size": d}
    samples = int(spec.get("samples", 1))
    if samples < 1:
        raise ValueError("samples (K) must be at least 1")
    options = {k: v for k, v in spec.items() if k not in ("kind", "samples")}
    d = int(options.get("state_size", 8))
    options.setdefault("embedding_size", d)
    options.setdefault("inference_hidden", d)
    options.setdefault("q_uses_proposal", samples > 1)
    for name in _TUPLE_FIELDS:
        if name in options:
            options[name] = tuple(options[name])
    config = DSSMConfig(**options)
    build_flow(config.generative_flow, config.state_size)
    build_flow(config.inference_flow, config.state_size)
    full = {"kind": "dssm", "samples": samples, **dataclasses.asdict(config)}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in full.items()}


def spec_key(spec: dict[str, Any]) -> str:
    """Short stable hash of a completed spec (run folders, de-duplication across tables)."""
    return hashlib.sha1(json.dumps(complete_spec(spec), sort_keys=True).encode()).hexdigest()[:10]


@register_experiment(NAME)
@dataclass(frozen=True)
class WordGenerationParams:
    """Settings of the word generation experiment (Schmidt & Hofmann §5).

    `table1`/`table2` map a row name (the paper's, where it has one) to a model spec (see
    :func:`complete_spec`); `table2` models are trained on the alternative (type) split.
    `table3_generative` x `table3_inference` are the flow grid of Table 3 (d = 8, K = 1 unless
    `table3_base` says otherwise). Runs with the same spec and split are trained once.
    `figure_model` (a `table1` row) gives Figs 2-3; `baseline_reference` (a `table1` GRU row) the
    dashed line of Fig. 3. Models with K > 1 use `seeds_weighted` (the paper: 10 runs instead of 5).
    `stack_size`: the seeds of one spec train as one stacked model, at most that many at a time
    (:func:`~paperlib.experiments.word_generation.training.train_stacked`; equal to separate runs up to float
    rounding; Real NVP models always train alone); null trains one run at a time.
    """

    table1: dict
    table2: dict
    table3_generative: list[str]
    table3_inference: list[str]
    figure_model: str
    baseline_reference: str
    steps: int
    batch_size: int
    lr: float
    seeds: list[int]
    seeds_weighted: list[int]
    eval_samples: int  # K of the Monte Carlo word probability, eq. (12)
    generated_words: int  # words generated per run for the data-space metrics
    ngram_words: int  # generated words scored by the n-gram models (Table 2)
    mi_prefixes: int  # prefixes h_{t-1} of the I(t) estimate, eq. (13)
    fig2_trajectories: int  # single prefixes whose I(t) make the box plot of Fig. 2
    history_every: int  # steps between points of Fig. 3
    history_prefixes: int
    top_n: int | None = None  # keep only the most frequent word types (None: the whole list)
    table3_base: dict = field(default_factory=dict)
    mi_noise: int = 20  # draws of xi_t per prefix (the paper: K = 20, §5.4)
    ngram_orders: list[int] = field(default_factory=lambda: list(PAPER_NGRAM_ORDERS))
    min_len: int = 2
    max_len: int = 12
    min_count: int = 10
    total_tokens: float = 1e9
    test_fraction: float = 0.1
    split_seed: int = 0
    clip_norm: float | None = None  # gradient-norm clipping (not in the paper; None = off)
    checkpoint_every: int = 1000
    samples_shown: int = 30
    threads: int = 1  # the models are many tiny ops: one intra-op thread is fastest (measured)
    stack_size: int | None = None  # the seeds of a spec trained together in stacks of at most this many (a GPU lever)

    def __post_init__(self) -> None:
        # complete_spec builds the flows to check them; validating params.yaml (which other stages do in the middle
        # of their runs, e.g. to find the device) must not draw from the global random generator
        with torch.random.fork_rng(devices=[]):
            self._check_specs()
        if self.figure_model not in self.table1 or self.table1[self.figure_model].get("kind") != "dssm":
            raise ValueError(f"figure_model must be a DSSM row of table1; choices: {self._rows('dssm')}")
        if self.baseline_reference not in self.table1 or self.table1[self.baseline_reference].get("kind") != "gru":
            raise ValueError(f"baseline_reference must be a GRU row of table1; choices: {self._rows('gru')}")
        positive = ("steps", "batch_size", "eval_samples", "generated_words", "ngram_words", "mi_prefixes",
                    "fig2_trajectories", "history_every", "history_prefixes", "mi_noise", "checkpoint_every",
                    "threads")
        bad = [n for n in positive if getattr(self, n) < 1]
        if bad:
            raise ValueError(f"{', '.join(bad)} must be positive integers")
        if self.lr <= 0 or not self.seeds or not self.seeds_weighted:
            raise ValueError("lr must be positive and seeds, seeds_weighted non-empty")
        if self.top_n is not None and self.top_n < 20:
            raise ValueError("top_n must be at least 20 (or null for the whole list)")
        if not self.ngram_orders or min(self.ngram_orders) < 1:
            raise ValueError("ngram_orders must be positive integers")
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError("test_fraction must lie in (0, 1)")
        if self.clip_norm is not None and self.clip_norm <= 0:
            raise ValueError("clip_norm must be positive or null")
        if self.stack_size is not None and (isinstance(self.stack_size, bool) or not isinstance(self.stack_size, int)
                                            or self.stack_size < 1):
            raise ValueError(f"stack_size must be null (one run at a time) or a positive integer, "
                             f"got {self.stack_size!r}")

    def _check_specs(self) -> None:
        for name in ("table1", "table2"):
            table = getattr(self, name)
            if not isinstance(table, dict):
                raise ValueError(f"{name} must map row names to model specs")
            for row, spec in table.items():
                try:
                    complete_spec(spec)
                except (ValueError, TypeError) as err:
                    raise ValueError(f"{name}.{row}: {err}") from None
        for spec in self.table3_specs().values():
            complete_spec(spec)

    def _rows(self, kind: str) -> list[str]:
        return [r for r, s in self.table1.items() if s.get("kind") == kind]

    def table3_specs(self) -> dict[tuple[str, str], dict[str, Any]]:
        """``(F_g, F_q) -> spec`` of the Table 3 grid."""
        base = {"kind": "dssm", "samples": 1, **self.table3_base}
        return {(g, q): {**base, "generative_flow": g, "inference_flow": q}
                for g in self.table3_generative for q in self.table3_inference}

    def seeds_for(self, spec: dict[str, Any]) -> list[int]:
        return list(self.seeds_weighted if complete_spec(spec).get("samples", 1) > 1 else self.seeds)
