#!/usr/bin/env bash
# The device check in one command: benchmarks/gpu.py on a bare GPU machine (an image with torch and the
# scientific stack but no package registry), plus the one step that must happen beforehand on a machine that has one.
#
#   bash benchmarks/gpu.sh --fetch-wheels    # here, once: the pure-Python packages the image lacks -> .whl/ (ignored)
#   bash benchmarks/gpu.sh [gpu.py args]     # there, with .whl carried: installs them, runs the tests and timings
#
# Carry data/raw/ too (the `data` stage's corpora, about 36 MB) and the tests that need corpora run there as well:
# without a data mirror on that machine, gpu.py links them into one (gpu.py's data_mirror) for the test run.
#
# The default run fits an 8-minute slot: tests (at most 200 s; on an H200 with 8 workers 88% of the suite ran in
# 120 s; each failure is logged as it happens, so a run cut off there still names its failures), then ceilings, stacked trials (<= 45 s), concurrent
# processes (<= 50 s), evaluation passes (<= 30 s) and workloads (230 s in all), then the stacks again as replayed
# CUDA graphs (about 40 s more, checked before each stack; last because a capture that fails can spoil what
# follows); torch.compile's
# first step (~3 min, gpu.py's COMPILE_SECONDS) rarely fits after them and is then listed as not timed. A second
# slot measures compilation alone: bash benchmarks/gpu.sh --no-tests --stages lm_ptb --per-stage 2 --budget 400
# --stacked --concurrent --compile reduce-overhead default
#
# The image lacks optuna (tuning studies; with colorlog, alembic, Mako and SQLAlchemy), zuko
# (the DSSM's flows), nltk (word-generation metrics) and pretty_midi (music); benchmarks/gpu-wheels.txt pins
# them. wordfreq (60 MB installed), dvc, papermill and nbval do not travel: the tests that need them skip there,
# saying why. Output goes to $OUT when set (the folder a remote machine returns), else benchmarks/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--fetch-wheels" ]; then
  rm -rf .whl && mkdir -p .whl
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d .whl -r benchmarks/gpu-wheels.txt
  ls .whl && du -sh .whl
  exit 0
fi
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8 PAPERLIB_TEST_THREADS=1 \
  PAPERLIB_ALLOW_MISSING=1
out=${OUT:-benchmarks/results}
nvidia-smi || true
tests=--tests
if [ "${1:-}" = "--no-tests" ]; then tests=; shift; fi
python3 benchmarks/gpu.py --out "$out" $tests --pytest-args '-m "not slow" -n 8 tests/' --tests-limit 200 \
  --budget 230 --graphs --compile reduce-overhead "$@"
