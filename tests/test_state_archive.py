"""A stage's resumable state packed on one machine and continued on another (paperlib.compendium.state_archive)."""

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from paperlib.compendium.cli import main
from paperlib.compendium.state_archive import pack, portable_files, unpack
from paperlib.experiments.micmco.ptb.design import MicmcoPtbParams
from paperlib.experiments.micmco.ptb.data import prepare_sentences
from paperlib.experiments.micmco.ptb.studies import run_curve_study
from tests.conftest import REPO
from tests.test_micmco_ptb import EOS, SMOKE, UNK, V, toy_sentences


def _state(root):
    folder = root / "runs" / "stage"
    (folder / "ladder-abc").mkdir(parents=True)
    (folder / "study.sqlite3").write_bytes(b"SQLite format 3\0" + bytes(range(256)) * 40)
    (folder / "study.stack.json").write_text('{"trials": [4, 5]}')
    (folder / "ladder-abc" / "run-0.json").write_text('{"scores": []}')
    (folder / "study.stack.pt").write_bytes(b"\0" * 5000)  # a checkpoint: stays behind
    (folder / "study.sqlite3-journal").write_bytes(b"j")  # an open database's side file
    (root / "runs" / "other").mkdir()
    (root / "runs" / "other" / "x.json").write_text("{}")  # another stage's
    return folder


def test_pack_keeps_studies_and_records_leaves_checkpoints_and_repeats_byte_for_byte(tmp_path):
    folder = _state(tmp_path / "here")
    assert [p.as_posix() for p in portable_files(tmp_path / "here", ["stage"])] == [
        "runs/stage/ladder-abc/run-0.json", "runs/stage/study.sqlite3", "runs/stage/study.stack.json"]
    made = pack(tmp_path / "here", ["stage"], tmp_path / "a.tar.gz")
    assert made["files"] == 3 and made["left_behind"] == ["runs/stage/study.stack.pt"]
    time.sleep(1.1)  # other file times, same archive
    (folder / "study.stack.json").write_text('{"trials": [4, 5]}')
    pack(tmp_path / "here", ["stage"], tmp_path / "b.tar.gz")
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()
    names = unpack(tmp_path / "a.tar.gz", tmp_path / "there")
    assert sorted(names) == ["runs/stage/ladder-abc/run-0.json", "runs/stage/study.sqlite3",
                             "runs/stage/study.stack.json"]
    for name in names:
        assert (tmp_path / "there" / name).read_bytes() == (tmp_path / "here" / name).read_bytes()
    (tmp_path / "there" / "runs/stage/study.stack.json").write_text("older")
    unpack(tmp_path / "a.tar.gz", tmp_path / "there")  # the archive's copy replaces the older one
    assert (tmp_path / "there" / "runs/stage/study.stack.json").read_text() == '{"trials": [4, 5]}'
    (folder / "linked.json").symlink_to(tmp_path / "a.tar.gz")  # a link is not state: left out
    assert "runs/stage/linked.json" not in [p.as_posix() for p in portable_files(tmp_path / "here", ["stage"])]


def test_bad_archives_limits_and_names_are_clear_errors(tmp_path):
    _state(tmp_path / "here")
    with pytest.raises(ValueError, match="over the limit of 100"):
        pack(tmp_path / "here", ["stage"], tmp_path / "big.tar.gz", limit=100)
    assert not (tmp_path / "big.tar.gz").exists()
    with pytest.raises(ValueError, match="not a stage name"):
        pack(tmp_path / "here", ["../etc"], tmp_path / "x.tar.gz")
    with pytest.raises(ValueError, match="no folder runs/stagee/ .* nothing of stage 'stagee' has run"):
        pack(tmp_path / "here", ["stagee"], tmp_path / "x.tar.gz")
    for name in ("../escape.json", "params.yaml", "runs/x.json", "/runs/stage/abs.json"):
        evil = tmp_path / "evil.tar.gz"
        with tarfile.open(evil, "w:gz") as tar:
            ok = tarfile.TarInfo("runs/stage/fine.json")
            ok.size = 2
            tar.addfile(ok, io.BytesIO(b"{}"))
            bad = tarfile.TarInfo(name)
            bad.size = 2
            tar.addfile(bad, io.BytesIO(b"{}"))
        with pytest.raises(ValueError, match="not a file under runs/<stage>/"):
            unpack(evil, tmp_path / "there")
        assert not (tmp_path / "there" / "runs" / "stage" / "fine.json").exists()  # nothing written


def test_a_stacked_study_stopped_at_its_time_limit_continues_on_another_machine(tmp_path, monkeypatch, capsys):
    """Stopped inside its first batch, the study's state travels without the stack's checkpoint; on the other
    machine the batch is asked again with the same points and seeds and trains from its start: the records equal
    an uninterrupted study's exactly (the same computation in the same order)."""
    from paperlib.experiments.common.runs import TimeLimitReached
    from paperlib.experiments.micmco.ptb import studies

    settings = MicmcoPtbParams(figures=["5.12"], **{**SMOKE, "trials": 4, "stack_size": 2})
    splits = {"train": toy_sentences(120, 1), "valid": toy_sentences(30, 2), "test": toy_sentences(30, 3)}
    data = prepare_sentences(splits, V, EOS, UNK, settings)
    whole = run_curve_study("dreg16_kl.shared", settings, data, tmp_path / "whole", "smoke")

    real_run = studies.StackedTrials.run

    def deadline_after_two_steps(self, until=None, deadline=None):  # as if the deadline passed at step 2
        return real_run(self, until=min(until, self.step_count + 2), deadline=deadline)

    here, there = tmp_path / "here", tmp_path / "there"
    monkeypatch.setattr(studies.StackedTrials, "run", deadline_after_two_steps)
    with pytest.raises(TimeLimitReached, match="at step 2 of 4"):
        run_curve_study("dreg16_kl.shared", settings, data, here / "runs" / "micmco_ptb", "smoke",
                        deadline=time.time() + 3600)
    monkeypatch.undo()
    monkeypatch.setenv("PAPERLIB_ROOT", str(here))
    assert main(["state", "pack", "micmco_ptb", "--out", str(tmp_path / "state.tar.gz"), "--limit-mb", "16"]) == 0
    assert "left behind 1 checkpoints" in capsys.readouterr().out
    monkeypatch.setenv("PAPERLIB_ROOT", str(there))
    assert main(["state", "unpack", str(tmp_path / "state.tar.gz")]) == 0
    moved = sorted(p.name for p in (there / "runs" / "micmco_ptb").iterdir())
    assert any(n.endswith(".sqlite3") for n in moved) and any(n.endswith(".stack.json") for n in moved)
    assert not any(n.endswith(".pt") for n in moved)
    continued = run_curve_study("dreg16_kl.shared", settings, data, there / "runs" / "micmco_ptb", "smoke")
    assert [(r["params"], r["nll"], r["kl"]) for r in continued] == [(r["params"], r["nll"], r["kl"]) for r in whole]


def test_the_chunk_script_collects_the_state_results_and_chunk_log_that_came_back(tmp_path):
    """benchmarks/gpu_stage.sh --collect in a checkout (here a skeleton beside a copy of the script): the returned
    state is kept as results/gpu/<stage>.state.tar.gz for the next chunk (this machine's runs/ untouched), finished
    results go to results/gpu/, each chunk's record is appended to results/gpu/<stage>.chunks.jsonl, and a chunk that
    finished nothing new is flagged; a stage that cannot stop at a time limit, or a folder missing what a chunk
    returns, is refused."""
    checkout, back = tmp_path / "checkout", tmp_path / "back"
    (checkout / "benchmarks").mkdir(parents=True)
    shutil.copy(REPO / "benchmarks" / "gpu_stage.sh", checkout / "benchmarks")
    (tmp_path / "there" / "runs" / "micmco_ptb").mkdir(parents=True)
    (tmp_path / "there" / "runs" / "micmco_ptb" / "study.sqlite3").write_bytes(b"SQLite format 3\0")
    pack(tmp_path / "there", ["micmco_ptb"], back / "micmco_ptb.tar.gz")
    (back / "micmco_ptb.json").write_text('{"curves": {}}')
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}

    def collect(*args):
        return subprocess.run(["bash", str(checkout / "benchmarks" / "gpu_stage.sh"), "--collect", *args],
                              capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)

    for seconds, trials in ((60, 10), (120, 10)):
        (back / "chunk.json").write_text(json.dumps({"stage": "micmco_ptb", "seconds": seconds, "exit_status": 3,
                                                     "finished_trials": trials, "test_scores": 0,
                                                     "finished_runs": 0}))
        done = collect("back", "micmco_ptb")  # a relative folder: relative to where the command was given
        assert done.returncode == 0, done.stderr[-2000:]
    assert "finished no trial, test score or run" in done.stderr  # the second chunk added nothing
    again = collect("back", "micmco_ptb")
    assert again.returncode != 0 and "already collected" in again.stderr  # the same chunk twice
    kept = checkout / "results" / "gpu" / "micmco_ptb.state.tar.gz"
    assert kept.read_bytes() == (back / "micmco_ptb.tar.gz").read_bytes() and not (checkout / "runs").exists()
    assert (checkout / "results" / "gpu" / "micmco_ptb.json").read_text() == '{"curves": {}}'
    chunks = (checkout / "results" / "gpu" / "micmco_ptb.chunks.jsonl").read_text().splitlines()
    assert [json.loads(line)["seconds"] for line in chunks] == [60, 120]
    (back / "chunk.json").unlink()
    refused = collect(str(back), "micmco_ptb")
    assert refused.returncode == 2 and "chunk.json is missing" in refused.stderr
    assert len((checkout / "results" / "gpu" / "micmco_ptb.chunks.jsonl").read_text().splitlines()) == 2
    refused = collect(str(back), "lm_ptb")
    assert refused.returncode == 2 and "does not stop at a time limit" in refused.stderr
