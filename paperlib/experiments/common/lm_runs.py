"""A language model's training run, done once: trained (resumably) in its run folder, or read back when the folder
holds a finished run made with the same settings by the current training and model code (:func:`train_or_load`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch import nn

from paperlib.atomic_files import write_json_atomic
from paperlib.device import load_checkpoint
from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.runs import json_safe


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, tied weights once."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def train_or_load(model: nn.Module, corpus: Any, corpus_name: str, spec: dict[str, Any], config: Any, run_dir: Path,
                  device: Any, progress: bool, log: Callable[[str], None], *, stage: str, name: str,
                  summarize: Callable[[Any], dict[str, Any]]) -> tuple[nn.Module, dict[str, Any]]:
    """A language model of ``spec`` trained on ``corpus`` (``.train``, ``.valid``, ``.vocab``) with ``config`` (a
    :class:`paperlib.train.TrainConfig`), resumably, in ``run_dir``; or read back when the folder holds a finished
    run made with these settings by the current training and model code (a folder made otherwise is emptied and the
    model retrained).

    ``model`` is the freshly built model (its initial weights); the log names it ``name`` after the ``stage``.
    Returns the model at its best validation checkpoint, in eval mode, and the run's record (``done.json``): its
    parameter count, steps, ``summarize(result)`` of the :class:`paperlib.train.TrainResult` (the stage's own tokens
    and validation entries), rollbacks and training seconds."""
    from paperlib.train import Trainer, forget_stale_run

    forget_stale_run(run_dir, json_safe({"model": spec, "train": vars(config), "corpus": corpus_name,
                                         "vocab_size": len(corpus.vocab),
                                         "code": code_hash("paperlib.train", "paperlib.models")}))
    done = run_dir / "done.json"
    if done.is_file():
        model.load_state_dict(load_checkpoint(run_dir / "best.pt", device)["model"])
        info = json.loads(done.read_text())
        log(f"{stage}: {name} loaded from {run_dir} ({info['parameters']:,} parameters)")
        return model.to(device).eval(), info
    log(f"{stage}: training {name} ({count_parameters(model):,} parameters)")
    trainer = Trainer(model, corpus.train, corpus.valid, config, run_dir, device=device, progress=progress)
    result = trainer.fit(resume=True)
    trainer.load(trainer.best_path, restore_position=False)
    info = {"parameters": count_parameters(model), "train_steps": result.steps, **summarize(result),
            "rollbacks": result.rollbacks, "train_seconds": round(trainer.train_seconds, 1)}
    write_json_atomic(done, info)
    return trainer.model.eval(), info


__all__ = ["count_parameters", "train_or_load"]
