"""Configuration: `params.yaml` is the single source of settings, with profiles that select sizes.

`params.yaml` has a top-level `profile` (the active one), shared sections (`seed`, `data`) and one
section per experiment under `experiments`, keyed by profile::

    profile: cpu
    experiments:
      dataset_summary:
        smoke: {corpora: [ptb], top_words: 20}
        cpu:   {...}
        paper: {...}

Each experiment registers a dataclass schema with :func:`register_experiment`; loading checks every
profile of that experiment against it, so a misspelled key or an unknown profile is a clear
:class:`ParamsError` naming the valid choices instead of a traceback from deep inside a run.

Each schema lives beside its experiment's code, and :data:`SCHEMA_HOMES` says where, so that reading one
experiment's settings imports that experiment's module alone: a stage needs only the packages its own code
imports (the DSSM's ``zuko`` is not needed to train a language model, Optuna not to time one).
:func:`load_params` checks every name and profile of the file and the shared sections; the settings of each
experiment are checked when they are read (:func:`experiment_params`), and :func:`validate_params` checks all of
them at once (the tests do, on the repository's file).

The active profile is, in order: an explicit argument, the environment variable
``PAPERLIB_PROFILE`` (CI sets it to ``smoke`` for nbval), the `profile` key of `params.yaml`.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
import types
import typing
from pathlib import Path
from typing import Any

import yaml

PROFILES: tuple[str, ...] = ("smoke", "cpu", "gpu", "paper")
PROFILE_ENV = "PAPERLIB_PROFILE"
ROOT_ENV = "PAPERLIB_ROOT"

_SCHEMAS: dict[str, type] = {}
_SECTIONS: dict[str, type] = {}
_REGISTERED_BY: dict[str, str] = {}  # schema name -> the module that registered it (checked against SCHEMA_HOMES)
_OPTIONAL_SECTIONS: set[str] = set()  # sections whose schema's defaults stand in when params.yaml omits them
_TOP_LEVEL = ("profile", "experiments")  # every experiment names its own seeds


class ParamsError(ValueError):
    """A problem with `params.yaml` or with a requested profile/experiment."""


def register_experiment(name: str):
    """Class decorator: register a dataclass as the parameter schema of experiment `name` (a module listed for
    `name` in :data:`SCHEMA_HOMES`)."""
    home = sys._getframe(1).f_globals.get("__name__")

    def wrap(cls: type) -> type:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls!r} must be a dataclass to be an experiment schema")
        _SCHEMAS[name] = cls
        _REGISTERED_BY[name] = home
        return cls

    return wrap


def register_section(name: str, optional: bool = False):
    """Class decorator: register a dataclass as the schema of a shared top-level section (e.g. `data`);
    an ``optional`` section may be left out, and then reads as the schema's defaults."""

    home = sys._getframe(1).f_globals.get("__name__")

    def wrap(cls: type) -> type:
        _SECTIONS[name] = cls
        _REGISTERED_BY[name] = home
        if optional:
            _OPTIONAL_SECTIONS.add(name)
        return cls

    return wrap


def require_keys(where: str, block: Any, required: typing.Sequence[str], optional: typing.Sequence[str] = ()) -> None:
    """A nested settings block (a mapping inside one experiment's schema) has every ``required`` key and no key
    outside ``required`` and ``optional``; else a ValueError naming both lists (the schema check turns it into a
    :class:`ParamsError`)."""
    if not isinstance(block, dict):
        raise ValueError(f"{where} must be a mapping with keys {list(required)}")
    missing = [k for k in required if k not in block]
    unknown = sorted(set(block) - set(required) - set(optional))
    if missing or unknown:
        raise ValueError(f"{where}: needs keys {list(required)} (optional {list(optional)}); "
                         f"missing {missing}, unknown {unknown}")


def registered_experiments() -> list[str]:
    return sorted(EXPERIMENT_HOMES)


def repo_root(start: str | os.PathLike | None = None) -> Path:
    """The compendium's root: the nearest folder at or above `start` (default: cwd) holding `dvc.yaml`.

    Notebooks need this because nbval starts kernels in the notebook's folder while papermill and
    DVC start them at the repository root. ``PAPERLIB_ROOT`` overrides the search.
    """
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV]).resolve()
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "dvc.yaml").is_file() and (folder / "params.yaml").is_file():
            return folder
    raise ParamsError(
        f"no paperlib compendium (a folder with dvc.yaml and params.yaml) at or above {here}; "
        f"run from inside the repository or set {ROOT_ENV}"
    )


def load_params(path: str | os.PathLike | None = None, validate: bool = True) -> dict[str, Any]:
    """Read and validate `params.yaml` (default: the one at the repository root). ``validate=False`` only reads
    it (validation imports every experiment's schema, torch included), for a caller that needs no settings of
    its own and hands on to code that validates."""
    path = Path(path) if path is not None else repo_root() / "params.yaml"
    if not path.is_file():
        raise ParamsError(f"params file not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ParamsError(f"{path} is not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise ParamsError(f"{path} must hold a mapping at the top level")
    if validate:
        validate_params(raw, source=str(path), experiments=())
    return raw


def validate_params(raw: dict[str, Any], source: str = "params.yaml",
                    experiments: typing.Iterable[str] | None = None) -> None:
    """Check the profile name, the shared sections, that every experiment is known and gives every profile, and
    the blocks of ``experiments`` (default: all) against their schemas, importing only those experiments'
    modules."""
    deep = set(EXPERIMENT_HOMES) if experiments is None else set(experiments)
    _import_schema_modules(set(SECTION_HOMES) | deep)
    if "seed" in raw:
        raise ParamsError(f"{source}: top-level 'seed' is not read: each experiment lists its own seeds "
                          "(experiments.<name>.<profile>.seeds); remove it")
    unknown = sorted(set(raw) - set(_TOP_LEVEL) - set(_SECTIONS))
    if unknown:
        valid = ", ".join([*_TOP_LEVEL, *sorted(_SECTIONS)])
        raise ParamsError(f"{source}: unknown top-level key(s) {unknown}; valid keys: {valid}")
    _check_profile_name(raw.get("profile"), f"{source}: key 'profile'")
    for name, schema in _SECTIONS.items():
        if name not in raw:
            if name in _OPTIONAL_SECTIONS:
                continue
            raise ParamsError(f"{source}: missing section {name!r}")
        _build(schema, raw[name], f"{source}: {name}")
    experiments = raw.get("experiments", {}) or {}
    if not isinstance(experiments, dict):
        raise ParamsError(f"{source}: 'experiments' must be a mapping")
    for name, by_profile in experiments.items():
        if name not in EXPERIMENT_HOMES:
            raise ParamsError(
                f"{source}: unknown experiment {name!r}; known experiments: {', '.join(sorted(EXPERIMENT_HOMES))}"
            )
        if not isinstance(by_profile, dict):
            raise ParamsError(f"{source}: experiments.{name} must map profiles to settings")
        unknown = sorted(set(by_profile) - set(PROFILES))
        if unknown:
            raise ParamsError(
                f"{source}: experiments.{name} has unknown profile(s) {unknown}; valid profiles: {', '.join(PROFILES)}"
            )
        missing = [p for p in PROFILES if p not in by_profile]
        if missing:
            raise ParamsError(f"{source}: experiments.{name} lacks profile(s) {missing}")
        if name in deep:
            for profile, block in by_profile.items():
                _build(_SCHEMAS[name], block, f"{source}: experiments.{name}.{profile}")


def active_profile(profile: str | None = None, params: dict[str, Any] | None = None) -> str:
    """The profile in force: argument, else $PAPERLIB_PROFILE, else params.yaml's `profile`."""
    if profile is None:
        profile = os.environ.get(PROFILE_ENV) or None
    if profile is None:
        params = params if params is not None else load_params()
        profile = params.get("profile", "cpu")
    _check_profile_name(profile, "profile")
    return profile


def experiment_params(name: str, profile: str | None = None, params: dict[str, Any] | None = None):
    """The validated settings of experiment `name` under the active (or given) profile."""
    params = params if params is not None else load_params()
    profile = active_profile(profile, params)
    experiments = params.get("experiments", {}) or {}
    if name not in experiments:
        known = ", ".join(sorted(experiments)) or "none"
        raise ParamsError(f"params.yaml has no experiment {name!r}; it defines: {known}")
    if name not in EXPERIMENT_HOMES:
        raise ParamsError(f"unknown experiment {name!r}; known experiments: {', '.join(sorted(EXPERIMENT_HOMES))}")
    _import_schema_modules({name})
    return _build(_SCHEMAS[name], experiments[name][profile], f"experiments.{name}.{profile}")


def section_params(name: str, params: dict[str, Any] | None = None):
    """The validated shared section `name` (e.g. `data`) of params.yaml."""
    params = params if params is not None else load_params()
    _import_schema_modules(set(SECTION_HOMES))
    if name not in _SECTIONS:
        raise ParamsError(f"unknown section {name!r}; known sections: {', '.join(sorted(_SECTIONS))}")
    return _build(_SECTIONS[name], params.get(name, {}) if name in _OPTIONAL_SECTIONS else params[name], name)


def _check_profile_name(profile: Any, where: str) -> None:
    if profile not in PROFILES:
        raise ParamsError(f"{where}: unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")


def _build(schema: type, block: Any, where: str):
    if not isinstance(block, dict):
        raise ParamsError(f"{where} must be a mapping of settings")
    fields = {f.name: f for f in dataclasses.fields(schema)}
    unknown = sorted(set(block) - set(fields))
    if unknown:
        raise ParamsError(f"{where}: unknown key(s) {unknown}; valid keys: {', '.join(sorted(fields))}")
    hints = typing.get_type_hints(schema)
    required = [
        n
        for n, f in fields.items()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [n for n in required if n not in block]
    if missing:
        raise ParamsError(f"{where}: missing key(s) {missing}")
    for key, value in block.items():
        if not _matches(value, hints[key]):
            raise ParamsError(f"{where}.{key}: expected {_type_name(hints[key])}, got {value!r}")
    try:
        obj = schema(**block)
    except (TypeError, ValueError) as err:
        raise ParamsError(f"{where}: {err}") from None
    return obj


def _matches(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin in (list, tuple):
        (item,) = typing.get_args(hint)[:1] or (Any,)
        return isinstance(value, list) and all(_matches(v, item) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


# Where each schema is registered: experiments keep their schema beside their code, so reading one experiment's
# settings imports that module (and what it imports) and nothing else. A test checks these against what the
# modules register.
EXPERIMENT_HOMES: dict[str, str] = {
    "dataset_summary": "paperlib.experiments.common.schemas",
    "lm_ptb": "paperlib.experiments.language_models.settings",
    "lm_ptb_char": "paperlib.experiments.language_models.settings",
    "lm_ptb_ablation": "paperlib.experiments.language_models.settings",
    "averaging_ptb": "paperlib.experiments.averaging.averaging_ptb",
    "averaging_basin": "paperlib.experiments.averaging.averaging_basin",
    "tuning_ptb": "paperlib.experiments.language_models.tuning_ptb",
    "dyneval": "paperlib.experiments.dynamic_evaluation.dyneval",
    "dyneval_char": "paperlib.experiments.dynamic_evaluation.dyneval_char",
    "dyneval_transformer": "paperlib.experiments.dynamic_evaluation.dyneval_transformer",
    "lm_wt2_bytes": "paperlib.experiments.language_models.lm_wt2_bytes",
    "reverse_copy": "paperlib.experiments.reverse_copy.reverse_copy",
    "micmco_synthetic": "paperlib.experiments.micmco.synthetic.studies",
    "micmco_synthetic_ladder": "paperlib.experiments.micmco.synthetic.ladder",
    "micmco_ptb": "paperlib.experiments.micmco.ptb.design",
    "micmco_ptb_ladder": "paperlib.experiments.micmco.ptb.ladder",
    "word_generation": "paperlib.experiments.word_generation.settings",
    "word_generation_ladder": "paperlib.experiments.word_generation.ladder",
    "word_generation_ngram": "paperlib.experiments.word_generation.word_generation_ngram",
    "music": "paperlib.experiments.music.music",
}
SECTION_HOMES: dict[str, str] = {
    "data": "paperlib.experiments.common.schemas",
    "dryrun": "paperlib.experiments.common.schemas",
    "compute": "paperlib.experiments.common.stage",
}


def _import_schema_modules(names: typing.Iterable[str] | None = None) -> None:
    """Import the modules that register the schemas of ``names`` (experiments or sections; default: all)."""
    homes = {**EXPERIMENT_HOMES, **SECTION_HOMES}
    for name in sorted(homes if names is None else set(names)):
        importlib.import_module(homes[name])
