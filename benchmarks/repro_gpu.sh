#!/usr/bin/env bash
# The repro's GPU runs, recorded in BENCHMARKS.md. Run from the project root on a CUDA
# machine; writes one JSON line per run to ${OUT:-benchmarks/results}/repro_runs.jsonl.
set -uo pipefail
DEST=${OUT:-benchmarks/results}
mkdir -p "$DEST"
F=$DEST/repro_runs.jsonl
: > "$F"
ONLY=${1:-}     # a regular expression: run only the rows whose label matches
run() {  # run LABEL ARGS...   (STANDIN=1 run ...: --impl te against tests/repro/te_standin)
  local label=$1; shift
  [[ -n $ONLY && ! $label =~ $ONLY ]] && return 0
  local t0 t1 line rc path=${PYTHONPATH:-}
  [ "${STANDIN:-}" = 1 ] && path=tests/repro/te_standin${path:+:$path}
  t0=$(date +%s.%N)
  PYTHONPATH=$path python -m repro "$@" >"$DEST/.stdout" 2>"$DEST/.stderr"; rc=$?
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
# The verdict table (issue 14): every "works" row must exit 0, every emulated row 1.
run default
run default-again
run emulate-prefix-as-tensor --emulate-prefix-as-tensor
run inject-unrelated-error --inject-unrelated-error
run no-weak-ref --no-weak-ref
run no-weak-ref-emulated --no-weak-ref --emulate-prefix-as-tensor
run 1f1b-L2-mb8 --num-layers 2 --num-microbatches 8 --pipeline-warmup 3
run 1f1b-L2-mb8-emulated --num-layers 2 --num-microbatches 8 --pipeline-warmup 3 --emulate-prefix-as-tensor
run 1f1b-L4-mb8 --num-layers 4 --num-microbatches 8 --pipeline-warmup 3
run 1f1b-L4-mb8-emulated --num-layers 4 --num-microbatches 8 --pipeline-warmup 3 --emulate-prefix-as-tensor
MIXTRAL=(--hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 --num-query-groups 8
         --num-experts 8 --moe-router-topk 2 --seq-length 4096)
run mixtral-8x7b-layer "${MIXTRAL[@]}" --num-layers 1
run mixtral-8x7b-layer-emulated "${MIXTRAL[@]}" --num-layers 1 --emulate-prefix-as-tensor
run layerwise --order layerwise
run layerwise-emulated --order layerwise --emulate-prefix-as-tensor
run clone-grads --clone-grads
run scope-full --cuda-graph-scope full
run scope-full-emulated --cuda-graph-scope full --emulate-prefix-as-tensor
STANDIN=1 run te-standin --impl te
STANDIN=1 run te-standin-emulated --impl te --emulate-prefix-as-tensor
STANDIN=1 run te-standin-no-weak-ref --impl te --no-weak-ref
STANDIN=1 run te-standin-1f1b-L4-mb8 --impl te --num-layers 4 --num-microbatches 8 --pipeline-warmup 3
run te-missing --impl te
for L in 1 2 4; do for S in 1024 4096; do run "layers${L}-seq${S}" --num-layers "$L" --seq-length "$S"; done; done
run fp32 --dtype fp32
