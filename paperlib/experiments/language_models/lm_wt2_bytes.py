"""Byte-level language models of WikiText-2 scored as word-level perplexity (Krause thesis §3.5, Table 3.3).

Krause models the three WikiText-2 files as raw UTF-8 bytes with an mLSTM and converts its bits per byte to a
word-level perplexity by eq. (3.15): bits/word = bits/symbol x symbols/file / words/file, perplexity = 2^bits/word.
"Words" there are the word-level models' tokens: whitespace-split words plus one end-of-line token per line
(the test file has 1,256,449 bytes and 245,569 such tokens, 5.12 bytes per word). The thesis' byte mLSTM (46M
parameters: 2800 units, embedding layer 400, weight normalisation, variational dropout 0.5) reaches 1.2649 bits/byte
on test, a perplexity of 88.8, on par with the word-level LSTMs with variational dropout (Inan et al.: 87.0 tied,
93.1 untied) and behind the tuned ones (65.8-65.9).

This module holds:

- :func:`load_bytes`: the verified corpus files as byte-id streams (vocabulary: the 256 byte values), with each
  split's byte and word counts.
- :func:`count_words` and :func:`bits_per_word` / :func:`word_perplexity` (eq. 3.15).
- :func:`run_byte_lm`: trains every model x seed of the ``lm_wt2_bytes`` experiment with the library trainer
  (resumable from ``runs/lm_wt2_bytes/``), evaluates it as the PTB comparisons do
  (:func:`paperlib.experiments.language_models.lm_ptb.evaluate_run`: deterministic, validation-optimal temperature, MC dropout),
  converts bits per byte to word perplexity and writes ``results/lm_wt2_bytes.json`` with provenance.
- ``conversion_check`` in the results: eq. 3.15 applied to the thesis' 1.2649 bits/byte with our test file's byte
  and word counts (it must give the thesis' 88.8: a check of the data and the conversion, not of a model).

The claims (the mLSTM beats an LSTM of the same size at the byte level; the byte mLSTM is on par with word-level
VD LSTMs) are judged by :func:`paperlib.experiments.language_models.claims.byte_claim`; the thesis' numbers are in
:mod:`paperlib.reference.byte_lm`.

Departures: our mLSTM (Krause eqs. 3.5-3.9, :mod:`paperlib.models.mlstm`) has no weight normalisation; the
dropouts are the library's input / state / output masks. When ``eval_tokens`` evaluates a prefix of a split, the
words of exactly that prefix are counted (a cut line contributes its words but no end-of-line token) and eq. 3.15
uses the prefix's bytes; evaluation runs ``eval_batch_size`` parallel streams whose first bytes have no context
and are not scored (20 of 100,000 bytes at ``cpu``), a difference of under 0.03% in the ratio.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.config import register_experiment
from paperlib.data.corpora import DataError, corpus_dir, get_corpus, is_fetched, pinned_checksums
from paperlib.experiments.common.stage import begin_stage, results_path
from paperlib.experiments.language_models.settings import LanguageModelParams
from paperlib.reference.byte_lm import TEST_BITS_PER_BYTE

EXPERIMENT = "lm_wt2_bytes"
SPLITS = ("train", "valid", "test")
LN2 = math.log(2.0)

register_experiment(EXPERIMENT)(LanguageModelParams)  # same schema as the PTB comparisons; corpus = wikitext2


def count_words(data: bytes) -> int:
    """Word-level tokens of ``data``: whitespace-split words plus one per newline (the word models' <eos>)."""
    text = data.decode("utf-8", errors="replace")
    return len(text.split()) + text.count("\n")


def bits_per_word(bits_per_symbol: float, symbols: int, words: int) -> float:
    """Eq. (3.15): bits/word = bits/symbol x symbols / words."""
    if symbols < 1 or words < 1:
        raise ValueError(f"symbols and words must be positive; got {symbols} and {words}")
    return bits_per_symbol * symbols / words


def word_perplexity(bits_per_symbol: float, symbols: int, words: int) -> float:
    """Word-level perplexity 2^(bits/word) of a symbol-level model (eq. 3.15)."""
    return 2.0 ** bits_per_word(bits_per_symbol, symbols, words)


@dataclass
class ByteCorpus:
    """A corpus as byte-id streams (ids 0..255) with the byte and word counts of each split."""

    name: str
    raw: dict[str, bytes]

    def split(self, name: str) -> torch.Tensor:
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; valid splits: {', '.join(SPLITS)}")
        return torch.frombuffer(bytearray(self.raw[name]), dtype=torch.uint8).long()

    def words(self, name: str, limit: int | None = None) -> int:
        return count_words(self.raw[name][:limit])

    @property
    def vocab_size(self) -> int:
        return 256


def load_bytes(corpus: str = "wikitext2", root: str | os.PathLike = "data/raw", verify: bool = True) -> ByteCorpus:
    """The fetched (checksum-verified) files of a line-split corpus as raw bytes."""
    spec = get_corpus(corpus)
    if len(spec.files) != len(SPLITS):
        raise DataError(f"{corpus} is not split into train/valid/test files")
    if verify and not is_fetched(spec, root):
        raise DataError(f"{corpus} is missing or fails its checksum under {Path(root).resolve()}: "
                        f"run `paperlib data fetch {corpus}`")
    folder = corpus_dir(spec.name, root)
    return ByteCorpus(spec.name, {s: (folder / spec.file(s).name).read_bytes() for s in SPLITS})


def _summary(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per model: mean and std over seeds of bits per byte and of the eq. 3.15 word perplexity."""
    import numpy as np

    out: dict[str, dict[str, float]] = {}
    for model in dict.fromkeys(r["model"] for r in runs):
        mine = [r for r in runs if r["model"] == model]
        entry: dict[str, float] = {"seeds": len(mine), "parameters": mine[0]["parameters"]}
        for split in ("valid", "test"):
            for suffix in ("", "_temp", "_mc"):
                bpb = np.array([r[f"{split}_nll{suffix}"] / LN2 for r in mine])
                ppl = np.array([word_perplexity(b, r["eval_bytes"][split], r["eval_words"][split])
                                for b, r in zip(bpb, mine)])
                for name, values in ((f"{split}_bpb{suffix}", bpb), (f"{split}_word_ppl{suffix}", ppl)):
                    entry[name] = float(values.mean())
                    entry[name + "_std"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        out[model] = entry
    return out


def run_byte_lm(profile: str | None = None, progress: bool = True, out: str | os.PathLike | None = None,
                runs_dir: str | os.PathLike | None = None) -> Path:
    """Train and evaluate every model x seed of ``lm_wt2_bytes``; write ``results/lm_wt2_bytes.json``.

    Training and evaluation are those of the PTB comparisons (:func:`paperlib.experiments.language_models.lm_ptb.train_and_evaluate`),
    on byte streams instead of a tokenised corpus.
    """
    from paperlib.distributed import is_main_process
    from paperlib.experiments.language_models.lm_ptb import train_and_evaluate
    from paperlib.experiments.common.provenance import provenance
    from paperlib.atomic_files import write_json_atomic

    stage = begin_stage(EXPERIMENT, profile)  # joins torchrun first: the corpus goes to the rank's own GPU
    started, root, profile, settings, device = stage.started, stage.root, stage.profile, stage.settings, stage.device
    corpus = load_bytes(settings.corpus, stage.data_root)
    limit = settings.eval_tokens
    valid, test = (corpus.split(s)[:limit] for s in ("valid", "test"))
    eval_bytes = {"valid": int(valid.numel()), "test": int(test.numel())}
    eval_words = {s: corpus.words(s, limit) for s in ("valid", "test")}
    train, valid, test = (t.to(device) for t in (corpus.split("train"), valid, test))
    runs_dir = Path(runs_dir) if runs_dir is not None else root / "runs" / EXPERIMENT
    runs = train_and_evaluate(EXPERIMENT, settings, corpus.vocab_size, train, valid, test, runs_dir, device, progress,
                              spec_extra={"corpus": settings.corpus},
                              record_extra={"eval_bytes": eval_bytes, "eval_words": eval_words}, code_modules=(__name__,))
    test_bytes, test_words = len(corpus.raw["test"]), corpus.words("test")
    results = {
        "experiment": EXPERIMENT, "corpus": settings.corpus, "level": "byte", "profile": profile,
        "vocab_size": corpus.vocab_size, "train": settings.train, "mc_samples": settings.mc_samples,
        "models": settings.models, "train_bytes": len(corpus.raw["train"]),
        "eval_bytes": eval_bytes, "eval_words": eval_words,
        "runs": [{k: v for k, v in r.items() if k not in ("train_seconds", "eval_seconds")} for r in runs],
        "summary": _summary(runs),
        "conversion_check": {"bytes": test_bytes, "words": test_words, "bits_per_byte": TEST_BITS_PER_BYTE,
                             "perplexity": word_perplexity(TEST_BITS_PER_BYTE, test_bytes, test_words)},
    }
    out = Path(out) if out is not None else results_path(root, EXPERIMENT, profile)
    if is_main_process():
        write_json_atomic(out, results)
        write_json_atomic(out.with_suffix(".provenance.json"),
                          {**provenance(root, profile, vars(settings), pinned_checksums(settings.corpus), started,
                                        code=code_hash(__name__)),
                           "train_seconds": {f"{r['model']}-seed{r['seed']}": r["train_seconds"] for r in runs}})
    return out


__all__ = ["EXPERIMENT", "ByteCorpus", "bits_per_word", "count_words", "load_bytes", "run_byte_lm", "word_perplexity"]
