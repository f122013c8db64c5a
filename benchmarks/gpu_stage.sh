#!/usr/bin/env bash
# A stage of the `gpu` profile in chunks, on GPU machines that start bare and allow one command of a few minutes:
# each chunk carries the stage's state there, continues it until a time limit and brings the state back. For the
# stages that stop at a time limit with their work saved: micmco_ptb and micmco_ptb_ladder.
#
#   bash benchmarks/gpu_stage.sh --prepare STAGE        # here: wheels into .whl/ (when empty); says what to carry
#   bash benchmarks/gpu_stage.sh STAGE [SECONDS]        # there, carrying .whl and data/raw/ptb
#   bash benchmarks/gpu_stage.sh --collect DIR STAGE    # here: DIR holds what came back from there
#
# The stage's state between chunks is results/gpu/STAGE.state.tar.gz (`paperlib state pack`: studies, finished runs,
# the points of a batch in progress, no checkpoints; a few MB at most), committed, so it travels with the working
# tree and never mixes with a machine's own runs/ (the cpu profile's).
# There: installs the wheels, merges results/gpu/STAGE.state.tar.gz into runs/, runs `paperlib run STAGE` at the gpu
# profile with PAPERLIB_TIME_LIMIT=SECONDS (default 420: no stack starts that the time left would not finish, by
# the last one's time; the running one is checkpointed at the limit and the command exits with status 3), under
# `timeout` SECONDS + 150 (a batch's evaluations run to their end), then writes to $OUT the stage's state
# (STAGE.tar.gz, at most 16 MiB; a stack cut off part-way starts again from its first step next time), its results
# when it finished (STAGE.json and STAGE.provenance.json), and chunk.json: the card, driver, torch and CUDA
# versions, seconds, exit status and the trials and runs finished so far.
# --collect keeps the state as results/gpu/STAGE.state.tar.gz for the next chunk, copies finished results into
# results/gpu/ and appends chunk.json to results/gpu/STAGE.chunks.jsonl (commit them), warning when a chunk
# finished nothing new. The code and the gpu profile's settings must stay the same between chunks: a study or run
# folder made by other code or settings is not continued but started again.
set -euo pipefail
here=$PWD
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
usage="usage: gpu_stage.sh --prepare STAGE | STAGE [SECONDS] | --collect DIR STAGE"
check_stage() {
  case "$1" in
    micmco_ptb|micmco_ptb_ladder) ;;
    *) echo "gpu_stage.sh: $1 does not stop at a time limit with its work saved; run it in one command" >&2; exit 2 ;;
  esac
}
if [ "${1:-}" = "--prepare" ]; then
  stage=${2:?$usage}; check_stage "$stage"
  ls .whl/*.whl >/dev/null 2>&1 || bash benchmarks/gpu.sh --fetch-wheels
  if [ -f "results/gpu/$stage.state.tar.gz" ]; then
    echo "carry: .whl data/raw/ptb ($stage continues from results/gpu/$stage.state.tar.gz, in the working tree)"
  else
    echo "carry: .whl data/raw/ptb ($stage starts from nothing: no results/gpu/$stage.state.tar.gz)"
  fi
  du -sh .whl data/raw/ptb
  exit 0
fi
if [ "${1:-}" = "--collect" ]; then
  back=${2:?$usage} stage=${3:?$usage}; check_stage "$stage"
  case "$back" in /*) ;; *) back=$here/$back ;; esac
  for f in "$back/$stage.tar.gz" "$back/chunk.json"; do
    if [ ! -f "$f" ]; then echo "gpu_stage.sh: $f is missing: nothing collected" >&2; exit 2; fi
  done
  mkdir -p results/gpu
  cp "$back/$stage.tar.gz" "results/gpu/$stage.state.tar.gz"
  for f in "$back/$stage.json" "$back/$stage.provenance.json"; do
    if [ -f "$f" ]; then cp "$f" results/gpu/; fi
  done
  python3 - "$back/chunk.json" "results/gpu/$stage.chunks.jsonl" <<'PY'
import json, sys
chunk = json.load(open(sys.argv[1]))
try:
    earlier = [json.loads(line) for line in open(sys.argv[2]) if line.strip()]
except FileNotFoundError:
    earlier = []
done = (chunk.get("complete_trials", 0), chunk.get("finished_runs", 0))
if earlier and not chunk.get("finished") and done <= (earlier[-1].get("complete_trials", 0),
                                                      earlier[-1].get("finished_runs", 0)):
    print("warning: this chunk finished no trial or run; give the next one more time", file=sys.stderr)
with open(sys.argv[2], "a") as out:
    out.write(json.dumps(chunk) + "\n")
print(json.dumps(chunk))
PY
  exit 0
fi
stage=${1:?$usage} seconds=${2:-420}
check_stage "$stage"
out=${OUT:-runs/chunk-out}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
if [ -f "results/gpu/$stage.state.tar.gz" ]; then python3 -m paperlib state unpack "results/gpu/$stage.state.tar.gz"; fi
started=$(date +%s)
status=0
PAPERLIB_PROFILE=gpu PAPERLIB_TIME_LIMIT=$seconds timeout -s TERM $((seconds + 150)) \
  python3 -m paperlib run "$stage" || status=$?
packed=0
python3 -m paperlib state pack "$stage" --out "$out/$stage.tar.gz" --limit-mb 16 || packed=$?
if [ "$status" -eq 0 ]; then
  for f in "results/gpu/$stage.json" "results/gpu/$stage.provenance.json"; do
    if [ -f "$f" ]; then cp "$f" "$out/"; fi
  done
fi
python3 - "$out/chunk.json" "$stage" "$status" "$(( $(date +%s) - started ))" "$seconds" "$packed" <<'PY'
import datetime, json, pathlib, sqlite3, subprocess, sys
import torch
path, stage, status, seconds, limit, packed = sys.argv[1:]
try:
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True, check=True).stdout.strip()
except (OSError, subprocess.CalledProcessError):
    driver = None
folder = pathlib.Path("runs") / stage
trials = 0
for study in sorted(folder.glob("*.sqlite3")):  # the studies' finished trials
    with sqlite3.connect(study) as db:
        trials += db.execute("select count(*) from trials where state = 'COMPLETE'").fetchone()[0]
runs = sum(1 for p in folder.glob("*/*.json") if not p.name.endswith(".stack.json"))  # the ladder's finished runs
chunk = {"stage": stage, "profile": "gpu", "date": datetime.date.today().isoformat(),
         "card": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", "driver": driver,
         "torch": torch.__version__, "cuda": torch.version.cuda, "seconds": int(seconds), "time_limit": float(limit),
         "exit_status": int(status), "finished": int(status) == 0, "state_packed": int(packed) == 0,
         "complete_trials": trials, "finished_runs": runs}
json.dump(chunk, open(path, "w"), indent=1)
print(json.dumps(chunk))
PY
# 0: the stage finished; 3: stopped at the time limit (124: cut off by timeout), its state in $out; else a failure
if [ "$packed" -ne 0 ]; then exit "$packed"; fi
if [ "$status" -ne 0 ] && [ "$status" -ne 3 ] && [ "$status" -ne 124 ]; then exit "$status"; fi
