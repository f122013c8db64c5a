"""The `paperlib` command line: every command has --help, errors are one line with a non-zero exit."""

import subprocess
import sys

import pytest

from paperlib.compendium.cli import build_parser, main
from tests.conftest import REPO


def _commands(parser, prefix=()):
    import argparse

    yield prefix
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*prefix, name))


@pytest.mark.parametrize("command", list(_commands(build_parser())), ids=lambda c: " ".join(c) or "paperlib")
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    assert "usage: paperlib" in capsys.readouterr().out


def test_module_entry_point_runs():
    out = subprocess.run([sys.executable, "-m", "paperlib", "--help"], capture_output=True, text=True, check=True).stdout
    assert "run-notebook" in out and "data" in out


def test_params_show_prints_the_validated_profile(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("PAPERLIB_ROOT", raising=False)
    assert main(["params", "show", "dataset_summary", "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    assert '"profile": "smoke"' in out and '"max_rank"' in out


def test_unknown_profile_on_the_command_line_is_one_clear_line(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("PAPERLIB_ROOT", raising=False)
    assert main(["params", "show", "--profile", "laptop"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown profile 'laptop'" in err and "\n" not in err


def test_unknown_notebook_lists_the_available_ones(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("PAPERLIB_ROOT", raising=False)
    assert main(["run-notebook", "no_such_notebook", "--profile", "smoke"]) == 2
    err = capsys.readouterr().err
    assert "available: " in err and "dataset_summary" in err


def _smoke_dyneval_checkpoint(tmp_path):
    """A checkpoint of the smoke profile's dynamic-evaluation LM (untrained weights, PTB vocabulary)."""
    import torch

    from paperlib.experiments.common.config import experiment_params
    from paperlib.models import build_lm

    spec = experiment_params("dyneval", "smoke").model
    torch.manual_seed(0)
    model = build_lm(spec["cell"], 10_000, spec["hidden_size"], spec["num_layers"], **spec.get("options", {}))
    path = tmp_path / "lm.pt"
    torch.save({"model": model.state_dict()}, path)
    return path


def test_dyneval_tune_searches_the_grid_and_reports_its_best_trial(data_root, tmp_path, capsys, monkeypatch):
    import json
    import math

    monkeypatch.chdir(REPO)
    monkeypatch.delenv("PAPERLIB_ROOT", raising=False)
    ckpt, out = _smoke_dyneval_checkpoint(tmp_path), tmp_path / "tuned.json"
    args = ["dyneval", "tune", "ptb", "--row", "sgd_decay", "--grid", "lr=0,0.5", "--grid", "decay=0,0.1",
            "--valid-tokens", "30", "--checkpoint", str(ckpt), "--data-root", str(data_root), "--profile", "smoke",
            "--quiet", "--out", str(out)]
    assert main(args) == 0
    result = json.loads(out.read_text())
    points = {(t["lr"], t["decay"]) for t in result["trials"]}
    assert points == {(0.0, 0.0), (0.0, 0.1), (0.5, 0.0), (0.5, 0.1)}
    best = min(result["trials"], key=lambda t: t["nll"])
    assert result["best"] == {"lr": best["lr"], "decay": best["decay"]} and result["valid_nll"] == best["nll"]
    # lr = 0 is static evaluation of an untrained model: about ln V nats per token
    static = [t["nll"] for t in result["trials"] if t["lr"] == 0.0]
    # decay 0.1 re-rounds θ as 0.9 θ + 0.1 θ_g at each update (float32, an ulp or so), hence a margin of abs=1e-5
    assert static[0] == pytest.approx(static[1], abs=1e-5) and abs(static[0] - math.log(10_000)) < 0.5
    assert "best" in capsys.readouterr().out


def test_dyneval_tune_rejects_unknown_rows_and_bad_grids_in_one_line(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("PAPERLIB_ROOT", raising=False)
    assert main(["dyneval", "tune", "ptb", "--row", "static", "--profile", "smoke"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown row 'static'" in err and "global_rms_rms_decay" in err and "\n" not in err
    assert main(["dyneval", "tune", "ptb", "--grid", "lr", "--profile", "smoke"]) == 2
    assert "bad --grid 'lr'" in capsys.readouterr().err


def test_a_stage_stopped_at_its_time_limit_exits_3_saying_how_to_continue(capsys, monkeypatch):
    import types

    from paperlib.compendium import cli
    from paperlib.experiments.common.runs import TimeLimitReached

    def stopped(profile, progress):
        raise TimeLimitReached("micmco_ptb_ladder stopped at its time limit; the same command continues")

    module = types.ModuleType("fake_stage")
    module.run = stopped
    monkeypatch.setitem(sys.modules, "fake_stage", module)
    monkeypatch.setitem(cli.RUNNERS, "micmco_ptb_ladder", "fake_stage:run")
    assert cli.main(["run", "micmco_ptb_ladder", "--profile", "smoke"]) == 3
    assert "the same command continues" in capsys.readouterr().out
