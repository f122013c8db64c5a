"""The polyphonic-music experiment (stage ``music``): Krause Table 4.6 (§4.8) on JSB Chorales and Nottingham.

Per corpus: trains the LSTM-NADE (:mod:`paperlib.models.rnn_nade`, :mod:`paperlib.song_training`) once per seed,
reports each seed's static log-likelihood per frame on the validation and test songs, then dynamically evaluates
the first seed's model (:mod:`paperlib.dyneval.songs`) with SGD and global RMS, each learning rate chosen on the
validation songs from a grid and the weights reset at every song with decay 0, as §4.8 describes. Per-song
log-likelihoods of the test songs (and the songs' frame counts) are kept for every row, for comparisons paired by
song, and each corpus records where its time went (training, dynamic evaluation, the frame NADE). The methods live in
the library; this module only turns ``params.yaml`` settings into ``results/music.json``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
from torch import Tensor

from paperlib.data.music import FRAMES, PianoRolls
from paperlib.device import load_checkpoint
from paperlib.dyneval.songs import dynamic_evaluate_songs, song_mean_squared_gradients, static_evaluate_songs
from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.config import register_experiment, require_keys
from paperlib.experiments.common.runs import json_safe
from paperlib.models.nade import NADE
from paperlib.models.rnn_nade import LSTMNADE
from paperlib.reference.music import table_4_6
from paperlib.song_training import SongTrainConfig, train_on_songs

MODEL_KEYS = ("embedding_size", "hidden_size", "num_layers", "nade_size")
MODEL_OPTIONAL = ("dropout", "nade_dropout", "activation")
DYNEVAL_KEYS = ("segment_len", "sgd_lr", "global_rms_lr", "gradient_batch_size", "gradient_max_batches")
RULES = ("sgd", "global_rms")


@register_experiment("music")
@dataclass(frozen=True)
class MusicParams:
    """LSTM-NADE with static and dynamic evaluation on polyphonic music (Krause §4.8, Table 4.6).

    ``model`` and ``train`` map each corpus to its LSTM-NADE size (keys :data:`MODEL_KEYS`, optionally
    :data:`MODEL_OPTIONAL`) and its :class:`~paperlib.song_training.SongTrainConfig` fields (``seed`` is
    set per run from ``seeds``). ``dyneval``: ``segment_len`` (frames per update), the learning-rate grids
    ``sgd_lr`` and ``global_rms_lr`` searched on the validation songs, and the training batches of MS_g
    (``gradient_batch_size`` songs, at most ``gradient_max_batches``, null for all). ``valid_songs`` /
    ``test_songs``: the first songs of each split used (null: all). ``frame_nade`` (optional) maps a corpus to
    ``{"hidden_size": H, "train": {...}}``: Table 4.6's "NADE (1 frame only)" row, trained with the first seed.
    """

    corpora: list[str]
    model: dict
    train: dict
    seeds: list[int]
    dyneval: dict
    valid_songs: int | None = None
    test_songs: int | None = None
    frame_nade: dict = field(default_factory=dict)
    threads: int = 2

    def __post_init__(self) -> None:
        if not self.corpora or any(c not in FRAMES for c in self.corpora):
            raise ValueError(f"corpora must be among {', '.join(FRAMES)}, got {self.corpora}")
        for corpus in self.corpora:
            if corpus not in self.model or corpus not in self.train:
                raise ValueError(f"model and train need an entry for every corpus; {corpus!r} is missing")
            require_keys(f"model.{corpus}", self.model[corpus], MODEL_KEYS, MODEL_OPTIONAL)
            try:
                SongTrainConfig(**self.train[corpus])
            except TypeError as err:
                raise ValueError(f"train.{corpus}: {err}") from None
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be a non-empty list of distinct integers, got {self.seeds}")
        require_keys("dyneval", self.dyneval, DYNEVAL_KEYS)
        for rule in RULES:
            grid = self.dyneval[f"{rule}_lr"]
            if not isinstance(grid, list) or not grid or not all(v > 0 for v in grid):
                raise ValueError(f"dyneval.{rule}_lr must be a non-empty list of positive rates, got {grid}")
        for name in ("valid_songs", "test_songs"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or null, got {value}")
        for corpus, block in self.frame_nade.items():
            if corpus not in self.corpora:
                raise ValueError(f"frame_nade.{corpus}: not one of corpora {self.corpora}")
            require_keys(f"frame_nade.{corpus}", block, ("hidden_size", "train"))
            try:
                SongTrainConfig(**block["train"])
            except TypeError as err:
                raise ValueError(f"frame_nade.{corpus}.train: {err}") from None
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")


def build_model(spec: Mapping[str, Any]) -> LSTMNADE:
    """The LSTM-NADE of a ``model`` entry (88 notes)."""
    return LSTMNADE(notes=88, **spec)


def _tuned_dynamic_evaluation(model: LSTMNADE, valid: Sequence[Tensor], test: Sequence[Tensor], rule: str,
                              grid: Sequence[float], ms_g, segment_len: int, log) -> dict[str, Any]:
    """One dynamic-evaluation row: the grid's best learning rate on the validation songs, then the test songs."""
    trials = []
    for lr in grid:
        ll = dynamic_evaluate_songs(model, valid, lr=lr, segment_len=segment_len, rule=rule, ms_g=ms_g
                                    ).log_likelihood_per_frame()
        trials.append({"lr": lr, "valid_ll": ll if math.isfinite(ll) else -math.inf})
    best = max(trials, key=lambda t: t["valid_ll"])
    test_result = dynamic_evaluate_songs(model, test, lr=best["lr"], segment_len=segment_len, rule=rule, ms_g=ms_g)
    log(f"  dynamic eval ({rule}): lr {best['lr']:g}  valid {best['valid_ll']:.3f}  "
        f"test {test_result.log_likelihood_per_frame():.3f} nats/frame")
    return {"lr": best["lr"], "valid_ll": best["valid_ll"], "test_ll": test_result.log_likelihood_per_frame(),
            "test_song_ll": test_result.song_log_likelihoods().tolist(), "trials": trials}


def corpus_results(rolls: PianoRolls, settings: MusicParams, train_model: Callable[[int], tuple[LSTMNADE, dict]],
                   log: Callable[[str], None]) -> dict[str, Any]:
    """Table 4.6's rows for one corpus: static per seed (models from ``train_model(seed)``), then SGD and global
    RMS dynamic evaluation of the first seed's model, tuned on the validation songs, and the frame-independent
    NADE when ``frame_nade`` names the corpus."""
    valid = rolls.split("valid")[: settings.valid_songs]
    test = rolls.split("test")[: settings.test_songs]
    seeds = []
    first = None
    for seed in settings.seeds:
        model, info = train_model(seed)
        static_valid = static_evaluate_songs(model, valid).log_likelihood_per_frame()
        static_test = static_evaluate_songs(model, test)
        seeds.append({"seed": seed, **info, "valid_ll": static_valid,
                      "test_ll": static_test.log_likelihood_per_frame()})
        log(f"  seed {seed}: static valid {static_valid:.3f}  test {seeds[-1]['test_ll']:.3f} nats/frame")
        if first is None:
            first = model, static_test
    model, static_test = first
    tick = time.time()
    dyn = settings.dyneval
    ms_g = song_mean_squared_gradients(model, rolls.split("train"), batch_size=dyn["gradient_batch_size"],
                                       max_batches=dyn["gradient_max_batches"])
    rows = {"static": {"valid_ll": seeds[0]["valid_ll"], "test_ll": seeds[0]["test_ll"],
                       "test_song_ll": static_test.song_log_likelihoods().tolist()}}
    for rule in RULES:
        rows[rule] = _tuned_dynamic_evaluation(model, valid, test, rule, dyn[f"{rule}_lr"],
                                               ms_g if rule == "global_rms" else None, dyn["segment_len"], log)
    dyneval_seconds = round(time.time() - tick, 1)
    tick = time.time()
    if rolls.name in settings.frame_nade:
        block = settings.frame_nade[rolls.name]
        torch.manual_seed(settings.seeds[0])
        nade = NADE(88, block["hidden_size"])
        config = SongTrainConfig(**{**block["train"], "seed": settings.seeds[0]})
        trained = train_on_songs(nade, rolls.split("train"), valid, config)
        nade_test = static_evaluate_songs(nade, test)
        rows["nade"] = {"valid_ll": trained.best_valid_ll, "test_ll": nade_test.log_likelihood_per_frame(),
                        "test_song_ll": nade_test.song_log_likelihoods().tolist(),
                        "parameters": sum(p.numel() for p in nade.parameters())}
        log(f"  NADE (1 frame only): valid {trained.best_valid_ll:.3f}  test {rows['nade']['test_ll']:.3f} nats/frame")
    test_lls = torch.tensor([s["test_ll"] for s in seeds], dtype=torch.float64)
    return {
        "frame": rolls.frame,
        "parameters": sum(p.numel() for p in model.parameters()),
        "valid_songs": len(valid), "test_songs": len(test),
        "valid_frames": sum(s.shape[0] for s in valid), "test_frames": sum(s.shape[0] for s in test),
        "test_song_frames": [s.shape[0] for s in test],
        "seeds": seeds,
        "static_test_mean": float(test_lls.mean()),
        "static_test_sd": float(test_lls.std()) if len(seeds) > 1 else None,
        "rows": rows,
        "thesis": table_4_6(rolls.name),
        "seconds": {"train": round(sum(s["train_seconds"] for s in seeds), 1), "dyneval": dyneval_seconds,
                    "frame_nade": round(time.time() - tick, 1)},
    }


def _train_or_load(settings: MusicParams, corpus: str, rolls: PianoRolls, root: Path, device, progress: bool,
                   log) -> Callable[[int], tuple[LSTMNADE, dict]]:
    """``seed -> (trained model, info)``: a finished run under ``runs/music/<corpus>/seed<k>`` is read back."""
    from paperlib.train import forget_stale_run

    def train_model(seed: int) -> tuple[LSTMNADE, dict]:
        run_dir = root / "runs" / "music" / corpus / f"seed{seed}"
        spec = {"model": settings.model[corpus], "train": settings.train[corpus], "seed": seed,
                "code": code_hash("paperlib.song_training", "paperlib.models.rnn_nade")}
        forget_stale_run(run_dir, json_safe(spec))
        torch.manual_seed(seed)
        model = build_model(settings.model[corpus]).to(device)
        done = run_dir / "model.pt"
        if done.is_file():
            payload = load_checkpoint(done, device, weights_only=True)
            model.load_state_dict(payload["model"])
            return model.eval(), {"train_seconds": payload["seconds"], "best_epoch": payload["best_epoch"]}
        log(f"  training seed {seed}")
        config = SongTrainConfig(**{**settings.train[corpus], "seed": seed})
        result = train_on_songs(model, rolls.split("train"), rolls.split("valid"), config,
                                log if progress else None)
        torch.save({"model": model.state_dict(), "seconds": round(result.seconds, 1), "best_epoch": result.best_epoch},
                   done)
        return model.eval(), {"train_seconds": round(result.seconds, 1), "best_epoch": result.best_epoch}

    return train_model


def run_music(profile: str | None = None, progress: bool = True, out: str | None = None) -> Path:
    """Run the music experiment of ``params.yaml`` (profile ``profile``); returns the results path.

    Writes ``results/music.json`` (per corpus: per-seed static log-likelihoods, the static / SGD / global RMS
    rows with per-song test log-likelihoods, the thesis' Table 4.6 column) and ``results/music.provenance.json``.
    """
    from paperlib.atomic_files import write_json_atomic
    from paperlib.data import load_piano_rolls, pinned_checksums
    from paperlib.experiments.common.provenance import provenance
    from paperlib.experiments.common.stage import begin_stage, results_path

    stage = begin_stage("music", profile, progress=progress)
    settings, root, log = stage.settings, stage.root, stage.log
    results: dict[str, Any] = {"profile": stage.profile, "convention": "log-likelihood per frame in nats: the sum "
                               "over the 88 notes of a frame, averaged over all frames", "corpora": {}}
    seconds: dict[str, float] = {}
    for corpus in settings.corpora:
        tick = time.time()
        log(f"music: {corpus}")
        rolls = load_piano_rolls(corpus, stage.data_root)
        train_model = _train_or_load(settings, corpus, rolls, root, stage.device, progress, log)
        results["corpora"][corpus] = corpus_results(rolls, settings, train_model, log)
        seconds[corpus] = round(time.time() - tick, 1)
    path = Path(out) if out is not None else results_path(root, "music", stage.profile)
    write_json_atomic(path, json_safe(results))
    record = provenance(root, stage.profile, json_safe(vars(settings)), pinned_checksums(*settings.corpora),
                        stage.started, code=code_hash(__name__))
    write_json_atomic(path.with_name(path.stem + ".provenance.json"), {**record, "seconds": seconds})
    return path
