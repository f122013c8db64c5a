#!/usr/bin/env bash
# A stage of the `gpu` profile in chunks, on GPU machines that start bare and allow one command of a few minutes:
# each chunk carries the stage's state there, continues it until a time limit and brings the state back.
#
#   bash benchmarks/gpu_stage.sh --prepare STAGE        # here: wheels into .whl/ (when empty) and the stage's state
#                                                        # into runs/device/STAGE.tar.gz (paperlib state pack)
#   bash benchmarks/gpu_stage.sh STAGE [SECONDS]        # there, carrying .whl, data/raw/ptb and runs/device
#   bash benchmarks/gpu_stage.sh --collect DIR STAGE    # here: DIR holds what came back from there
#
# There: installs the wheels, merges runs/device/STAGE.tar.gz into runs/, runs `paperlib run STAGE` at the gpu
# profile with PAPERLIB_TIME_LIMIT=SECONDS (default 420: the running stack is checkpointed and the command exits
# with status 3, "the same command continues"), then writes to $OUT the stage's state without checkpoints
# (STAGE.tar.gz, at most 16 MiB: studies, finished runs, the points of the batch in progress, which starts again
# from its first step next time), the stage's results when it finished (results/gpu/STAGE.json and its
# provenance), and chunk.json: the card, driver, torch and CUDA versions, seconds and exit status.
# --collect merges the state into runs/, keeps it as runs/device/STAGE.tar.gz for the next chunk, copies finished
# results into results/gpu/ and appends chunk.json to results/gpu/STAGE.chunks.jsonl (commit both).
# The code and the gpu profile's settings must stay the same between chunks: a study made by other code or
# settings is not continued but started again.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
if [ "${1:-}" = "--prepare" ]; then
  stage=${2:?usage: --prepare STAGE}
  ls .whl/*.whl >/dev/null 2>&1 || bash benchmarks/gpu.sh --fetch-wheels
  python3 -m paperlib state pack "$stage" --out "runs/device/$stage.tar.gz" --limit-mb 16
  du -sh .whl data/raw/ptb runs/device
  exit 0
fi
if [ "${1:-}" = "--collect" ]; then
  back=${2:?usage: --collect DIR STAGE} stage=${3:?usage: --collect DIR STAGE}
  mkdir -p runs/device results/gpu
  python3 -m paperlib state unpack "$back/$stage.tar.gz"
  cp "$back/$stage.tar.gz" "runs/device/$stage.tar.gz"
  for f in "$back/$stage.json" "$back/$stage.provenance.json"; do
    if [ -f "$f" ]; then cp "$f" results/gpu/; fi
  done
  python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$back/chunk.json" \
    >> "results/gpu/$stage.chunks.jsonl"
  tail -n 1 "results/gpu/$stage.chunks.jsonl"
  exit 0
fi
stage=${1:?usage: gpu_stage.sh STAGE [SECONDS]} seconds=${2:-420}
out=${OUT:-runs/device/out}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
if [ -f "runs/device/$stage.tar.gz" ]; then python3 -m paperlib state unpack "runs/device/$stage.tar.gz"; fi
started=$(date +%s)
status=0
PAPERLIB_PROFILE=gpu PAPERLIB_TIME_LIMIT=$seconds python3 -m paperlib run "$stage" || status=$?
python3 -m paperlib state pack "$stage" --out "$out/$stage.tar.gz" --limit-mb 16
for f in "results/gpu/$stage.json" "results/gpu/$stage.provenance.json"; do
  if [ -f "$f" ]; then cp "$f" "$out/"; fi
done
python3 - "$out/chunk.json" "$stage" "$status" "$(( $(date +%s) - started ))" "$seconds" <<'PY'
import datetime, json, subprocess, sys
import torch
path, stage, status, seconds, limit = sys.argv[1:]
try:
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True, check=True).stdout.strip()
except (OSError, subprocess.CalledProcessError):
    driver = None
chunk = {"stage": stage, "profile": "gpu", "date": datetime.date.today().isoformat(),
         "card": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", "driver": driver,
         "torch": torch.__version__, "cuda": torch.version.cuda, "seconds": int(seconds), "time_limit": float(limit),
         "exit_status": int(status), "finished": int(status) == 0}
json.dump(chunk, open(path, "w"), indent=1)
print(json.dumps(chunk))
PY
# 0: the stage finished; 3: stopped at the time limit, its state in $out; anything else: a failure
if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then exit "$status"; fi
