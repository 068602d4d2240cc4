#!/usr/bin/env bash
# Kill tests: a training killed with SIGKILL at fixed moments, then resumed
# with `train --resume`, ends with the same weights (byte for byte) and the
# same logged losses as the run that was never interrupted; after every kill
# the checkpoint on disk loads.
# usage: tests/resume.sh PATH/TO/boltzattn
set -u
BIN=${1:?usage: resume.sh PATH/TO/boltzattn}
TMP=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
pass=0
failed=0
ok() { pass=$((pass + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }

ARGS=(--task brackets --attn boltzmann --T 8 --embd 16 --steps 1500 --batch 16
      --save-every 50 --eval-every 500 --log-every 10 --quiet)
"$BIN" train "${ARGS[@]}" --out "$TMP/a" >/dev/null 2>&1 || bad "uninterrupted run failed"

# Kill moments: after this many logged training records (10 steps each).
kills=(7 31 64 103)
first=1
for k in "${kills[@]}"; do
    if [ $first = 1 ]; then
        "$BIN" train "${ARGS[@]}" --out "$TMP/b" >/dev/null 2>&1 &
        first=0
    else
        "$BIN" train --resume "$TMP/b" --quiet >/dev/null 2>&1 &
    fi
    pid=$!
    for _ in $(seq 1 600); do
        n=$(grep -c '"event":"train"' "$TMP/b/metrics.jsonl" 2>/dev/null)
        n=${n:-0}
        [ "$n" -ge "$k" ] && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.01
    done
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    "$BIN" eval --ckpt "$TMP/b/model.safetensors" >/dev/null 2>&1 && ok ||
        bad "checkpoint does not load after the kill at record $k"
done
"$BIN" train --resume "$TMP/b" --quiet >/dev/null 2>&1 && ok || bad "final resume failed"
cmp -s "$TMP/a/model.safetensors" "$TMP/b/model.safetensors" && ok ||
    bad "resumed weights differ from the uninterrupted run"
strip() { grep '"event":"train"' "$1" | sed 's/,"steps_per_s.*//'; }
if diff <(strip "$TMP/a/metrics.jsonl") <(strip "$TMP/b/metrics.jsonl") >/dev/null; then ok; else
    bad "logged losses differ"; fi
[ "$(grep -c '"event":"resume"' "$TMP/b/metrics.jsonl")" -ge 1 ] && ok || bad "no resume record"

# --resume refuses settings that would change the run, and bad directories
out=$("$BIN" train --resume "$TMP/b" --steps 10 2>&1)
[ $? = 2 ] && grep -q "cannot be combined with --resume" <<<"$out" && ok || bad "--steps with --resume: $out"
out=$("$BIN" train --resume "$TMP/nowhere" 2>&1)
[ $? = 2 ] && ok || bad "--resume of a missing directory: $out"
head -c 100 "$TMP/b/state.safetensors" >"$TMP/trunc.safetensors"
mkdir -p "$TMP/c" && cp "$TMP/trunc.safetensors" "$TMP/c/state.safetensors"
out=$("$BIN" train --resume "$TMP/c" 2>&1)
[ $? = 2 ] && ok || bad "--resume of a truncated state: $out"

echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
