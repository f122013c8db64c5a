"""Run caches are keyed on the code a run executes: an edited model is trained again, never read back."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from paperlib.experiments.common.code_hash import closure, code_hash, code_manifest
from tests.conftest import REPO


def scratch_package(tmp_path: Path) -> Path:
    """A copy of the package's sources (no caches), to edit without touching the repository."""
    target = tmp_path / "src" / "paperlib"
    shutil.copytree(REPO / "paperlib", target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def test_the_closure_of_a_stage_holds_the_models_it_trains_and_not_the_compendium():
    found = closure(["paperlib.experiments.language_models.lm_ptb"])
    assert {"paperlib.models.lstm", "paperlib.train", "paperlib.experiments.language_models.lm_ptb", "paperlib.models"} <= found
    assert not any(m.startswith("paperlib.compendium") for m in found)
    with pytest.raises(ValueError, match="not a module of paperlib"):
        closure(["paperlib.no_such_module"])


def test_the_code_hash_moves_with_a_file_in_the_closure_and_only_then(tmp_path):
    """Each state of the sources is its own copy (the hash is computed once per process and folder)."""
    stage = "paperlib.experiments.reverse_copy.reverse_copy"
    original = scratch_package(tmp_path / "original")
    before = code_hash(stage, package_dir=original)
    assert before == code_hash(stage, package_dir=REPO / "paperlib")  # named by relative paths: a copy is the same code
    assert set(code_manifest([stage], original)) == set(code_manifest([stage]))

    outside = scratch_package(tmp_path / "outside")
    (outside / "compendium" / "results_index" / "__init__.py").write_text("# the index does not train models\n")
    assert code_hash(stage, package_dir=outside) == before

    edited = scratch_package(tmp_path / "edited")
    lstm = edited / "models" / "lstm.py"
    lstm.write_text(lstm.read_text() + "\n# an edit\n")
    assert code_hash(stage, package_dir=edited) != before

    crlf = scratch_package(tmp_path / "crlf")
    mogrifier = crlf / "models" / "mogrifier.py"
    mogrifier.write_bytes(mogrifier.read_bytes().replace(b"\n", b"\r\n"))
    assert code_hash(stage, package_dir=crlf) == before  # a CRLF checkout is the same code


TRAIN_TWICE = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from types import SimpleNamespace

    import torch

    from paperlib.experiments.language_models.lm_ptb import train_and_evaluate

    out = Path(sys.argv[1])
    torch.manual_seed(0)
    streams = [torch.randint(0, 12, (n,)) for n in (600, 120, 120)]
    settings = SimpleNamespace(
        models={"lstm": {"cell": "lstm", "hidden_size": 8, "num_layers": 1}},
        train={"batch_size": 4, "bptt": 8, "max_steps": 4, "eval_every": 2, "eval_batch_size": 2,
               "eval_max_windows": 2},
        seeds=[1], eval_tokens=None, mc_samples=1, threads=1, workers=1)
    import paperlib
    record = train_and_evaluate("t", settings, 12, *streams, out / "runs", torch.device("cpu"), progress=True)[0]
    print(json.dumps({"package": paperlib.__file__, "valid_nll": record["valid_nll"]}))
""")


@pytest.mark.slow
def test_a_run_cached_by_old_code_is_trained_again_after_a_model_edit(tmp_path):
    """Edit a model file in a scratch copy, re-run, and the cached run is not reused."""
    package = scratch_package(tmp_path)
    script = tmp_path / "train.py"
    script.write_text(TRAIN_TWICE)
    env = {**os.environ, "PYTHONPATH": str(package.parent), "OMP_NUM_THREADS": "1"}

    def run() -> tuple[bool, dict]:
        proc = subprocess.run([sys.executable, str(script), str(tmp_path)], env=env, capture_output=True, text=True,
                              timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        last = json.loads(proc.stdout.strip().splitlines()[-1])
        assert Path(last["package"]).resolve().parent == package.resolve()  # the scratch copy ran, not the repo
        return "t: training lstm" in proc.stdout, last

    trained, first = run()
    assert trained
    trained, again = run()
    assert not trained and again == first  # same code, same settings: read back from done.json
    lstm = package / "models" / "lstm.py"
    lstm.write_text(lstm.read_text() + "\n# an edit that changes nothing numerically, but is new code\n")
    trained, edited = run()
    assert trained  # the old run was not reused
    assert edited["valid_nll"] == first["valid_nll"]  # and (the edit being a comment) it trains to the same numbers
