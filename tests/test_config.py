"""params.yaml: profiles, schemas and clear errors for bad configuration."""

import shutil

import pytest
import yaml

from paperlib.experiments.common.config import (
    PROFILES, ParamsError, active_profile, experiment_params, load_params, repo_root, validate_params,
)
from tests.conftest import REPO


def write(tmp_path, raw):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture
def raw():
    return yaml.safe_load((REPO / "params.yaml").read_text())


def test_repository_params_are_valid_for_every_profile(raw):
    validate_params(raw)
    for profile in PROFILES:
        settings = experiment_params("dataset_summary", profile, raw)
        assert settings.corpora and settings.sentence_max_len == 35


def test_unknown_profile_names_the_valid_ones(raw, tmp_path):
    raw["profile"] = "laptop"
    with pytest.raises(ParamsError, match="unknown profile 'laptop'; valid profiles: smoke, cpu, gpu, paper"):
        load_params(write(tmp_path, raw))
    with pytest.raises(ParamsError, match="valid profiles"):
        active_profile("h100")


def test_misspelled_key_names_the_valid_keys(raw):
    raw["experiments"]["dataset_summary"]["cpu"]["max_rnak"] = 3
    with pytest.raises(ParamsError, match=r"unknown key\(s\) \['max_rnak'\]; valid keys: corpora, max_rank"):
        validate_params(raw)


def test_wrong_type_missing_profile_and_unknown_experiment_are_clear(raw):
    bad = yaml.safe_load(yaml.safe_dump(raw))
    bad["experiments"]["dataset_summary"]["smoke"]["max_rank"] = "many"
    with pytest.raises(ParamsError, match="max_rank: expected int"):
        validate_params(bad)
    bad = yaml.safe_load(yaml.safe_dump(raw))
    del bad["experiments"]["dataset_summary"]["paper"]
    with pytest.raises(ParamsError, match=r"lacks profile\(s\) \['paper'\]"):
        validate_params(bad)
    bad = yaml.safe_load(yaml.safe_dump(raw))
    bad["experiments"]["dataset_sumary"] = bad["experiments"].pop("dataset_summary")
    with pytest.raises(ParamsError, match="unknown experiment 'dataset_sumary'"):
        validate_params(bad)
    bad = yaml.safe_load(yaml.safe_dump(raw))
    bad["experiments"]["dataset_summary"]["cpu"]["corpora"] = ["ptb", "enwik9"]
    with pytest.raises(ParamsError, match="unknown corpora"):
        validate_params(bad)
    bad = yaml.safe_load(yaml.safe_dump(raw))
    bad["dta"] = bad.pop("data")
    with pytest.raises(ParamsError, match=r"unknown top-level key\(s\) \['dta'\]"):
        validate_params(bad)
    bad = yaml.safe_load(yaml.safe_dump(raw))
    bad["seed"] = 1  # a global seed was once validated but never read; each experiment lists its own seeds
    with pytest.raises(ParamsError, match="top-level 'seed' is not read: each experiment lists its own seeds"):
        validate_params(bad)


def _keys(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*path, str(key))
            yield from _keys(value, (*path, str(key)))
    elif isinstance(node, list):
        for value in node:
            yield from _keys(value, path)


def test_no_profile_stops_training_on_the_clock(raw):
    """Every profile's training ends on steps, epochs or a learning-rate floor: a wall-clock limit (the trainers'
    ``max_seconds``) would make a stage's numbers depend on how fast the machine that ran it was, so the same
    ``dvc repro`` would train other models on a slower or busier CPU."""
    assert ("experiments", "music", "cpu", "train", "jsb_chorales", "max_epochs") in set(_keys(raw))  # the walk reads
    clocked = [".".join(path) for path in _keys(raw["experiments"], ("experiments",)) if path[-1] == "max_seconds"]
    assert not clocked, f"training stopped by the clock: {clocked}"


def test_profile_resolution_order(raw, monkeypatch):
    monkeypatch.delenv("PAPERLIB_PROFILE", raising=False)
    assert active_profile(None, raw) == raw["profile"]
    monkeypatch.setenv("PAPERLIB_PROFILE", "smoke")
    assert active_profile(None, raw) == "smoke"
    assert active_profile("paper", raw) == "paper"
    assert experiment_params("dataset_summary", None, raw).corpora == raw["experiments"]["dataset_summary"]["smoke"]["corpora"]


def test_repo_root_is_found_from_the_notebook_folder(monkeypatch):
    monkeypatch.delenv("PAPERLIB_ROOT", raising=False)
    assert repo_root(REPO / "notebooks") == REPO


def test_outside_a_compendium_repo_root_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("PAPERLIB_ROOT", raising=False)
    with pytest.raises(ParamsError, match="no paperlib compendium"):
        repo_root(tmp_path)
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    assert repo_root(tmp_path) == tmp_path.resolve()


def test_every_schema_is_registered_where_schema_homes_say():
    """Reading one experiment's settings imports the module SCHEMA_HOMES names for it, so that module must be the
    one that registers its schema (and every registered schema must be listed)."""
    from paperlib.experiments.common import config

    config._import_schema_modules()
    homes = {**config.EXPERIMENT_HOMES, **config.SECTION_HOMES}
    assert set(config._REGISTERED_BY) == set(homes)
    assert {name: config._REGISTERED_BY[name] for name in homes} == homes


BLOCKED = ("optuna", "zuko", "nltk", "wordfreq", "dvc", "papermill", "nbformat", "psycopg2")
IMPORT_WITHOUT = """
import sys
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError("not installed here: " + name)
sys.meta_path.insert(0, Blocker())
from paperlib.experiments.common.config import experiment_params, load_params
from paperlib.experiments.dryrun import dryrun
params = load_params()
for stage in {stages!r}:
    settings = experiment_params(stage, "paper", params)
    workload = next(dryrun.ADAPTERS[stage](stage, settings, "fp32", lambda n: min(n, 2)))
print("ok")
"""


def test_a_stage_reads_its_settings_and_builds_its_workload_with_only_the_packages_it_imports():
    """A machine with torch, numpy, pandas, scipy, matplotlib, seaborn, pyyaml and tqdm (a GPU image) reads the
    language-model, averaging, dynamic-evaluation, reverse-copy and MICMCO stages' settings and builds their
    workloads: reading one experiment's settings no longer imports every experiment (Optuna for the tuning study,
    zuko and nltk for the DSSM, the compendium's DVC and papermill)."""
    import subprocess
    import sys

    stages = ["lm_ptb", "lm_ptb_char", "lm_ptb_ablation", "lm_wt2_bytes", "averaging_ptb", "dyneval",
              "dyneval_char", "dyneval_transformer", "reverse_copy", "micmco_synthetic", "micmco_synthetic_ladder", "micmco_ptb",
              "micmco_ptb_ladder"]
    code = IMPORT_WITHOUT.format(blocked=BLOCKED, stages=stages)
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    blocked = subprocess.run([sys.executable, "-c", IMPORT_WITHOUT.format(blocked=BLOCKED, stages=["tuning_ptb"])],
                             cwd=REPO, capture_output=True, text=True, timeout=300)
    assert "not installed here: optuna" in blocked.stderr  # the tuning study does need Optuna
