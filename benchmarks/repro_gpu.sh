#!/usr/bin/env bash
# The repro's GPU runs, recorded in BENCHMARKS.md. Run from the project root on a CUDA
# machine; writes one JSON line per run to ${OUT:-benchmarks/results}/repro_runs.jsonl.
set -uo pipefail
DEST=${OUT:-benchmarks/results}
mkdir -p "$DEST"
F=$DEST/repro_runs.jsonl
: > "$F"
run() {  # run LABEL ARGS...
  local label=$1; shift
  local t0 t1 line rc
  t0=$(date +%s.%N)
  python -m repro "$@" >"$DEST/.stdout" 2>"$DEST/.stderr"; rc=$?
  line=$(tail -n 1 "$DEST/.stdout")
  t1=$(date +%s.%N)
  python - "$label" "$rc" "$t0" "$t1" "$line" >> "$F" <<'PY'
import json, sys
label, rc, t0, t1, line = sys.argv[1:]
try:
    d = json.loads(line)
except ValueError:
    d = {"unparsed": line}
d.update(label=label, process_exit=int(rc), process_wall_s=round(float(t1) - float(t0), 2))
print(json.dumps(d, sort_keys=True))
PY
  echo "$label: exit $rc"
  rm -f "$DEST/.stdout" "$DEST/.stderr"
}
run default
run default-again
run emulate-prefix-as-tensor --emulate-prefix-as-tensor
run inject-unrelated-error --inject-unrelated-error
run no-weak-ref --no-weak-ref
run scope-full --cuda-graph-scope full
for L in 1 2 4; do for S in 1024 4096; do run "layers${L}-seq${S}" --num-layers "$L" --seq-length "$S"; done; done
run fp32 --dtype fp32
