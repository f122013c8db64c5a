"""The `paperlib` command line: every command has --help, errors are one line with a non-zero exit."""

import subprocess
import sys

import pytest

from paperlib.cli import build_parser, main
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
