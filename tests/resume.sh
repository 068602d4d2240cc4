#!/usr/bin/env bash
# Kill tests: a training killed with SIGKILL at fixed moments, then resumed
# with `train --resume`, ends with the same weights (byte for byte) and the
# same logged losses as the run that was never interrupted; after every kill
# the checkpoint on disk loads.
# Signals: a first SIGTERM saves a loadable checkpoint and a resumable state
# and exits 1 with a message (and the resumed run again ends byte-identical);
# a second signal during the save ends the process at once, by the signal,
# leaving the previous files as they were. A signal inside one long step
# (seconds) abandons the step at once and the resume redoes it exactly.
# Numerical guards: a run driven to non-finite values stops with exit 1,
# naming the step and the tensor, and keeps its last checkpoint and state
# (finite: they load; resuming meets the same failure at the same step).
# usage: tests/resume.sh PATH/TO/boltzattn
set -u
BIN=${1:?usage: resume.sh PATH/TO/boltzattn}
. "$(dirname "$0")/lib.sh"

# wait_config DIR PID: until DIR's log holds its config record (the run is
# about to take its first step), PID ends, or 6 s pass.
wait_config() {
    for _ in $(seq 1 600); do
        grep -q '"event":"config"' "$1/metrics.jsonl" 2>/dev/null && return
        kill -0 "$2" 2>/dev/null || return
        sleep 0.01
    done
}

# kill_resume NAME KILLS ARGS...: the run with ARGS uninterrupted in $TMP/NAME-a,
# and in $TMP/NAME-b killed after each of the KILLS (comma-separated) logged
# training records (10 steps each) and resumed; then both must agree.
kill_resume() {
    local name=$1 kills=$2
    shift 2
    local A="$TMP/$name-a" B="$TMP/$name-b"
    "$BIN" train "$@" --out "$A" >/dev/null 2>&1 || bad "$name: uninterrupted run failed"
    local first=1 k pid
    for k in ${kills//,/ }; do
        if [ $first = 1 ]; then
            "$BIN" train "$@" --out "$B" >/dev/null 2>&1 &
            first=0
        else
            "$BIN" train --resume "$B" --quiet >/dev/null 2>&1 &
        fi
        pid=$!
        wait_records "$B" "$k" $pid
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

# ---- a first signal: save, message, exit 1; the state resumes exactly
"$BIN" train "${ARGS[@]}" --out "$TMP/s" >/dev/null 2>"$TMP/s.err" &
pid=$!
wait_records "$TMP/s" 5 $pid
kill -TERM $pid
wait $pid
rc=$?
[ $rc = 1 ] && ok || bad "first SIGTERM: exit $rc, expected 1: $(cat "$TMP/s.err")"
msg=$(grep -o 'interrupted by signal 15 at step [0-9]*; checkpoint saved' "$TMP/s.err")
[ -n "$msg" ] && ok || bad "first SIGTERM: no 'interrupted ... checkpoint saved' message: $(cat "$TMP/s.err")"
grep -q 'a second signal exits at once' "$TMP/s.err" && ok || bad "first SIGTERM: no notice on receipt"
sstep=${msg#*at step }
sstep=${sstep%%;*}
grep -aq "\"step\":\"$sstep\"" "$TMP/s/model.safetensors" && ok ||
    bad "the checkpoint does not hold step $sstep"
[ ! -e "$TMP/s/.lock" ] && ok || bad "the lock file outlived a clean exit"
"$BIN" eval --ckpt "$TMP/s/model.safetensors" >/dev/null 2>&1 && ok ||
    bad "checkpoint saved on SIGTERM does not load"
"$BIN" train --resume "$TMP/s" --quiet >/dev/null 2>&1 && ok || bad "resume after SIGTERM failed"
cmp -s "$TMP/exact-a/model.safetensors" "$TMP/s/model.safetensors" && ok ||
    bad "weights resumed after SIGTERM differ from the uninterrupted run"

# ---- a signal inside one long step (T = 1024, band 10: seconds a step,
# where the first signal used to wait for the step's end): the step is
# abandoned between the band engine's queries, the run saves step 0 and
# exits; resumed, it redoes the step and ends with the uninterrupted run's
# weights, to the bit. That the run stopped at step 0, not 1, shows the
# step was cut short, whatever the machine's speed.
for i in $(seq 1 250); do echo "the cat sat on the mat and the dog sat on the log"; done >"$TMP/long.txt"
LONG=(--task charlm --data "$TMP/long.txt" --attn boltzmann --couplings relative --band 10
      --T 1024 --batch 1 --embd 8 --heads 1 --steps 1 --quiet)
"$BIN" train "${LONG[@]}" --out "$TMP/long-a" >/dev/null 2>&1 || bad "long: the uninterrupted run failed"
"$BIN" train "${LONG[@]}" --out "$TMP/long-b" >/dev/null 2>"$TMP/long.err" &
pid=$!
wait_config "$TMP/long-b" $pid
sleep 0.5 # inside the first step
kill -INT $pid
wait $pid
rc=$?
[ $rc = 1 ] && ok || bad "long: exit $rc after SIGINT, expected 1: $(cat "$TMP/long.err")"
grep -q 'interrupted by signal 2 at step 0; checkpoint saved' "$TMP/long.err" && ok ||
    bad "long: the step was not cut short (expected a stop at step 0): $(cat "$TMP/long.err")"
grep -q '"event":"train"' "$TMP/long-b/metrics.jsonl" && bad "long: an abandoned step was logged" || ok
grep -Eq '"status":[[:space:]]*"stopped"' "$TMP/long-b/run.json" && ok || bad "long: run.json does not say stopped"
"$BIN" train --resume "$TMP/long-b" --quiet >/dev/null 2>&1 && ok || bad "long: resume failed"
cmp -s "$TMP/long-a/model.safetensors" "$TMP/long-b/model.safetensors" && ok ||
    bad "long: weights resumed after a step cut short differ from the uninterrupted run"
diff <(grep '"event":"train"' "$TMP/long-a/metrics.jsonl" | sed 's/,"steps_per_s.*//') \
     <(grep '"event":"train"' "$TMP/long-b/metrics.jsonl" | sed 's/,"steps_per_s.*//') >/dev/null && ok ||
    bad "long: the resumed run logged another loss for the redone step"

# ---- a second signal during the save exits at once. The save is held
# open deterministically: the state's temporary file (STATE.<pid>.tmp,
# written by the process with that id) is a FIFO without a reader, so the
# save blocks in open() until the second signal arrives. The run saves
# nothing before the signal, so the FIFO is in place in time.
mkdir -p "$TMP/d"
"$BIN" train "${ARGS[@]}" --save-every 0 --eval-every 0 --steps 100000000 --out "$TMP/d" \
    >/dev/null 2>"$TMP/d.err" &
pid=$!
mkfifo "$TMP/d/state.safetensors.$pid.tmp"
wait_config "$TMP/d" $pid
sleep 0.2 # into the training loop
kill -INT $pid
# Blocked in the save: the kernel's wait channel names the FIFO wait where
# /proc shows it; otherwise a step (milliseconds here) is long over by then.
blocked=0
for _ in $(seq 1 500); do
    case $(cat /proc/$pid/wchan 2>/dev/null) in
        *fifo* | *pipe* | *partner*) blocked=1; break ;;
    esac
    sleep 0.01
done
[ $blocked = 1 ] || sleep 1
if kill -0 $pid 2>/dev/null; then ok; else bad "the run exited before the second signal: $(cat "$TMP/d.err")"; fi
kill -INT $pid
gone=0
for _ in $(seq 1 300); do
    kill -0 $pid 2>/dev/null || { gone=1; break; }
    sleep 0.01
done
[ $gone = 1 ] && ok || { bad "the second SIGINT did not end the process within 3 s"; kill -9 $pid; }
wait $pid
rc=$?
[ $rc = 130 ] && ok || bad "second SIGINT: exit status $rc, expected 130 (killed by SIGINT)"
[ ! -e "$TMP/d/model.safetensors" ] && [ ! -e "$TMP/d/state.safetensors" ] && ok ||
    bad "an interrupted save left a checkpoint or state"
grep -q 'checkpoint saved' "$TMP/d.err" && bad "second signal: claims a save: $(cat "$TMP/d.err")" || ok
# the lock of the dead process is taken over by the next run
rm -f "$TMP/d/state.safetensors.$pid.tmp"
[ -e "$TMP/d/.lock" ] && ok || bad "no stale lock left by the killed run"
"$BIN" train "${ARGS[@]}" --steps 20 --out "$TMP/d" --force >/dev/null 2>&1 && ok ||
    bad "a new run does not take over the stale lock"

# ---- numerical guards: a genuine blow-up (rate 10, decay 10), saving
# every step. Two ways to fail: a non-finite gradient (clip off,
# boltzmann) and a non-finite loss (softmax, no FFN).
guard() { # name, expected phrase, extra args...
    local name=$1 phrase=$2
    shift 2
    local out=$TMP/g-$name
    "$BIN" train --task brackets --T 6 --embd 16 --steps 300 --batch 8 --lr 10 \
        --weight-decay 10 --save-every 1 --eval-every 0 --heldout 8 --quiet \
        --out "$out" "$@" >/dev/null 2>"$out.err"
    local rc=$?
    [ $rc = 1 ] && ok || bad "guard $name: exit $rc, expected 1: $(cat "$out.err")"
    local line
    line=$(grep -o "step [0-9]*: $phrase.*" "$out.err" | head -1)
    [ -n "$line" ] && ok || bad "guard $name: no 'step N: $phrase' message: $(cat "$out.err")"
    local n=${line#step }
    n=${n%%:*}
    grep -q "keeps the last good checkpoint (step $((n - 1)))" "$out.err" && ok ||
        bad "guard $name: does not report keeping step $((n - 1)): $(cat "$out.err")"
    grep -aq "\"step\":\"$((n - 1))\"" "$out/model.safetensors" && ok ||
        bad "guard $name: the checkpoint is not the one of step $((n - 1))"
    ls "$out"/*.tmp >/dev/null 2>&1 && bad "guard $name: temporary files left" || ok
    # finite, so it loads: a load failure would be exit 2
    "$BIN" eval --ckpt "$out/model.safetensors" >/dev/null 2>"$out.eval"
    rc=$?
    [ $rc != 2 ] && ok || bad "guard $name: the kept checkpoint does not load: $(cat "$out.eval")"
    # the state loads too, and the same failure recurs at the same step
    "$BIN" train --resume "$out" --quiet >/dev/null 2>"$out.err2"
    rc=$?
    [ $rc = 1 ] && grep -q "step $n: $phrase" "$out.err2" && ok ||
        bad "guard $name: resume gave exit $rc, not the same failure at step $n: $(cat "$out.err2")"
}
# The blow-up is refused where it starts: either the attention backward
# (every key of a query too unlikely to differentiate in double) or the
# gradient check after it.
guard grad "\\(blocks\\.[0-9]* attention backward: .*too unlikely to differentiate\\|gradient of .* is not finite\\)" \
    --attn boltzmann --clip 0
# softmax (tiled attention): the loss, or first the gradient (the tiled
# backward's D_i = dy.y is rounding noise times |v| once the rows are one-hot
# at |v| ~ 1e16, where the dense core's is exactly 0; docs/performance.md)
guard loss "\\(loss is not finite .*first non-finite tensor: activation\\|gradient of .* is not finite\\)" \
    --attn softmax --no-ffn

echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
