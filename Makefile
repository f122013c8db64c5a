# Two entry points, each doing its own set-up (see README):
#   make reproduce   - create .venv if needed, then `dvc repro` (default profile: cpu)
#   make test        - create .venv if needed, then the test suite (unit tests, pipeline + nbval in smoke)
#
# torch is installed first and pinned, because an unpinned `torch` in a fresh venv resolves to a
# multi-GB CUDA build. Choose another build with e.g.
#   make test TORCH_SPEC=torch==2.13.0 TORCH_PIP_ARGS="--index-url <your platform's wheel index>"

VENV ?= .venv
PYTHON ?= python3
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=
PY := $(VENV)/bin/python

export PATH := $(abspath $(VENV))/bin:$(PATH)
export DVC_NO_ANALYTICS := 1
# The local data mirror (a copy of the corpora laid out like shared/data), when one sits beside the repo.
ifneq ($(wildcard ../shared/data/MANIFEST.json),)
export PAPERLIB_DATA_MIRROR ?= $(abspath ../shared/data)
endif

.PHONY: reproduce test env lab clean-env

reproduce: $(VENV)/.installed
	@start=$$(date +%s); dvc repro && paperlib index --readme && \
	echo "make reproduce: $$(( ($$(date +%s) - start + 59) / 60 )) min wall time for this run (stages already up to date are skipped)"

test: $(VENV)/.installed
	$(PY) -m pytest

env: $(VENV)/.installed

lab: $(VENV)/.installed
	jupyter lab --allow-root notebooks/

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)" $(TORCH_PIP_ARGS)
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[dev]"
	touch $@

clean-env:
	rm -rf $(VENV)
