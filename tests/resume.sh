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

# kill_resume NAME KILLS ARGS...: the run with ARGS uninterrupted in $TMP/NAME-a,
# and in $TMP/NAME-b killed after each of the KILLS (comma-separated) logged
# training records (10 steps each) and resumed; then both must agree.
kill_resume() {
    local name=$1 kills=$2
    shift 2
    local A="$TMP/$name-a" B="$TMP/$name-b"
    "$BIN" train "$@" --out "$A" >/dev/null 2>&1 || bad "$name: uninterrupted run failed"
    local first=1 k pid n
    for k in ${kills//,/ }; do
        if [ $first = 1 ]; then
            "$BIN" train "$@" --out "$B" >/dev/null 2>&1 &
            first=0
        else
            "$BIN" train --resume "$B" --quiet >/dev/null 2>&1 &
        fi
        pid=$!
        for _ in $(seq 1 600); do
            n=$(grep -c '"event":"train"' "$B/metrics.jsonl" 2>/dev/null)
            n=${n:-0}
            [ "$n" -ge "$k" ] && break
            kill -0 $pid 2>/dev/null || break
            sleep 0.01
        done
        kill -9 $pid 2>/dev/null
        wait $pid 2>/dev/null
        "$BIN" eval --ckpt "$B/model.safetensors" >/dev/null 2>&1 && ok ||
            bad "$name: checkpoint does not load after the kill at record $k"
    done
    "$BIN" train --resume "$B" --quiet >/dev/null 2>&1 && ok || bad "$name: final resume failed"
    cmp -s "$A/model.safetensors" "$B/model.safetensors" && ok ||
        bad "$name: resumed weights differ from the uninterrupted run"
    if diff <(strip "$A/metrics.jsonl") <(strip "$B/metrics.jsonl") >/dev/null; then ok; else
        bad "$name: logged losses differ"; fi
    [ "$(grep -c '"event":"resume"' "$B/metrics.jsonl")" -ge 1 ] && ok || bad "$name: no resume record"
}
strip() { grep '"event":"train"' "$1" | sed 's/,"steps_per_s.*//'; }

ARGS=(--task brackets --attn boltzmann --T 8 --embd 16 --steps 1500 --batch 16
      --save-every 50 --eval-every 500 --log-every 10 --quiet)
kill_resume exact 7,31,64,103 "${ARGS[@]}"
# Sampled attention: the sampler's RNG stream is part of the resumable state
# (and evaluations, which use a fixed stream of their own, do not move it).
kill_resume sampled 5,17,33 --task brackets --attn boltzmann --T 8 --embd 16 --steps 500 \
    --batch 16 --save-every 40 --eval-every 100 --log-every 10 --quiet --sampler direct --shots 32
# The final record of the sampled run has the exact-inference numbers too.
grep '"event":"final"' "$TMP/sampled-a/metrics.jsonl" | grep -q '"exact_val_acc"' && ok ||
    bad "sampled: the final record lacks exact_val_acc"
[ "$(grep -c '"event":"eval"' "$TMP/sampled-a/metrics.jsonl")" = 4 ] && ok ||
    bad "sampled: expected 4 eval records"

# --resume refuses settings that would change the run, and bad directories
out=$("$BIN" train --resume "$TMP/exact-b" --steps 10 2>&1)
[ $? = 2 ] && grep -q "cannot be combined with --resume" <<<"$out" && ok || bad "--steps with --resume: $out"
out=$("$BIN" train --resume "$TMP/nowhere" 2>&1)
[ $? = 2 ] && ok || bad "--resume of a missing directory: $out"
out=$("$BIN" train --resume "$TMP/sampled-b" --shots 8 2>&1)
[ $? = 2 ] && grep -q "cannot be combined with --resume" <<<"$out" && ok || bad "--shots with --resume: $out"
head -c 100 "$TMP/exact-b/state.safetensors" >"$TMP/trunc.safetensors"
mkdir -p "$TMP/c" && cp "$TMP/trunc.safetensors" "$TMP/c/state.safetensors"
out=$("$BIN" train --resume "$TMP/c" 2>&1)
[ $? = 2 ] && ok || bad "--resume of a truncated state: $out"

echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
