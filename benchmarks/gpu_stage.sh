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
# profile until SECONDS (default 420) after the command started (PAPERLIB_TIME_LIMIT: no stack starts that the time
# left would not finish, by the last one's time; the running one is checkpointed at the limit and the command exits
# with status 3), under `timeout` 150 s later (a batch's evaluations run to their end; SECONDS + about 180 must fit
# the machine's limit per command), then writes to $OUT the stage's state
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
if earlier and earlier[-1] == chunk:
    sys.exit("this chunk is already collected")
keys = ("finished_trials", "test_scores", "finished_runs")
if earlier and not chunk.get("finished") and all((chunk.get(k) or 0) <= (earlier[-1].get(k) or 0) for k in keys):
    print("warning: this chunk finished no trial, test score or run; give the next one more time", file=sys.stderr)
with open(sys.argv[2], "a") as out:
    out.write(json.dumps(chunk) + "\n")
print(json.dumps(chunk))
PY
  exit 0
fi
stage=${1:?$usage} seconds=${2:-420}
check_stage "$stage"
begun=$(date +%s)
out=${OUT:-runs/chunk-out}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
if [ -f "results/gpu/$stage.state.tar.gz" ]; then python3 -m paperlib state unpack "results/gpu/$stage.state.tar.gz"; fi
started=$(date +%s)
left=$(( seconds - (started - begun) ))
status=0
PAPERLIB_PROFILE=gpu PAPERLIB_TIME_LIMIT=$left timeout -s INT -k 30 $((left + 150)) \
  python3 -m paperlib run "$stage" || status=$?
# a killed writer may leave a SQLite journal behind: the first reader rolls it back (the journal does not travel)
python3 -c 'import glob, sqlite3, sys
for path in glob.glob(f"runs/{sys.argv[1]}/*.sqlite3"):
    sqlite3.connect(path).execute("select count(*) from sqlite_master").fetchone()' "$stage" || true
packed=0
python3 -m paperlib state pack "$stage" --out "$out/$stage.tar.gz" --limit-mb 16 || packed=$?
if [ "$status" -eq 0 ]; then
  for f in "results/gpu/$stage.json" "results/gpu/$stage.provenance.json"; do
    if [ -f "$f" ]; then cp "$f" "$out/"; fi
  done
fi
python3 - "$out/chunk.json" "$stage" "$status" "$(( $(date +%s) - begun ))" "$seconds" "$packed" <<'PY' || true
import datetime, json, pathlib, sqlite3, subprocess, sys
path, stage, status, seconds, limit, packed = sys.argv[1:]
chunk = {"stage": stage, "profile": "gpu", "date": datetime.date.today().isoformat(), "seconds": int(seconds),
         "time_limit": float(limit), "exit_status": int(status), "finished": int(status) == 0,
         "state_packed": int(packed) == 0}
try:
    import torch
    chunk.update(card=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
                 torch=torch.__version__, cuda=torch.version.cuda)
    chunk["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                     capture_output=True, text=True, check=True).stdout.strip()
except Exception as error:  # (no GPU, no nvidia-smi): the record still comes back
    chunk.setdefault("driver", None)
    chunk["note"] = f"{type(error).__name__}: {error}"
folder = pathlib.Path("runs") / stage
try:  # progress: trials told (not those an interruption failed), test scores kept, the ladder's finished runs
    finished = 0
    for study in sorted(folder.glob("*.sqlite3")):
        with sqlite3.connect(study) as db:
            finished += db.execute(
                "select count(*) from trials t where state in ('COMPLETE', 'FAIL') and not exists (select 1 from "
                "trial_user_attributes a where a.trial_id = t.trial_id and a.key = 'interrupted')").fetchone()[0]
    chunk.update(finished_trials=finished, test_scores=len(list(folder.glob("*.test-*.json"))),
                 finished_runs=sum(1 for p in folder.glob("*/*.json") if not p.name.endswith(".stack.json")))
except Exception as error:
    chunk["progress_error"] = f"{type(error).__name__}: {error}"
json.dump(chunk, open(path, "w"), indent=1)
print(json.dumps(chunk))
PY
# 0: the stage finished; 3: stopped at the time limit (124: cut off by timeout), its state in $out; else a failure
if [ "$packed" -ne 0 ]; then exit "$packed"; fi
if [ "$status" -ne 0 ] && [ "$status" -ne 3 ] && [ "$status" -ne 124 ]; then exit "$status"; fi
exit 0
