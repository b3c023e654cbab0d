#!/usr/bin/env bash
# On a CUDA machine: a local-backend bisection whose test is the repro, over a generated
# repository where commit 3 of 6 turns on --emulate-prefix-as-tensor. Checks that each
# probe's verdict is the one running the repro by hand gives. Writes to ${OUT:-/tmp}.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${OUT:-/tmp}
W=$(mktemp -d)
git init -q -b main "$W/r"
cd "$W/r"
for i in 0 1 2 3 4 5; do
  if [ "$i" -ge 3 ]; then echo "--emulate-prefix-as-tensor --num-layers 1" > flags
  else echo "--num-layers 1" > flags; fi
  git add flags
  git -c user.name=t -c user.email=t@t commit -q --allow-empty -m "step $i (#$((500 + i)))"
done
TEST="cd $ROOT && python -m repro \$(cat \"\$BISECT_WORKTREE/flags\")"
python -m bisect_ngc bisect --repo "$W/r" --old main~5 --new main --test "$TEST" \
  --state "$W/st" --json --quiet > "$DEST/wiring_bisect.json"
python -m bisect_ngc log --state "$W/st" --json > "$DEST/wiring_log.json"
cd "$ROOT"
python -m repro --num-layers 1 > "$W/by_hand_works.txt"; echo "by hand, no flags: exit $?"
set +e
python -m repro --emulate-prefix-as-tensor --num-layers 1 > "$W/by_hand_fail.txt"
echo "by hand, emulated: exit $?"
set -e
python - "$DEST" "$W" <<'PY'
import json, sys
dest, w = sys.argv[1:]
res = json.load(open(f"{dest}/wiring_bisect.json"))
log = json.load(open(f"{dest}/wiring_log.json"))
hand_ok = json.loads(open(f"{w}/by_hand_works.txt").read().strip().splitlines()[-1])
hand_bad = json.loads(open(f"{w}/by_hand_fail.txt").read().strip().splitlines()[-1])
print("bisect:", res["status"], "first_new index", res["candidates"], "probes", res["probes"])
for p in log:
    print(" probe", p["index"], p["verdict"], "exit", p["exit_code"])
expect = {0: ("pass", hand_ok["exit_code"]), 1: ("fail", hand_bad["exit_code"])}
ok = all((p["verdict"], p["exit_code"]) == expect[p["index"] >= 3] for p in log)
print("probes agree with the repro run by hand:", ok)
json.dump({"agree": ok, "by_hand": [hand_ok["exit_code"], hand_bad["exit_code"]]},
          open(f"{dest}/wiring_summary.json", "w"))
PY
