#!/usr/bin/env bash
# CLI tests: exit codes and messages for bad input, and the train -> eval,
# batch -> grads and sample round trips on tiny runs.
# usage: tests/cli.sh PATH/TO/boltzattn
set -u
BIN=${1:?usage: cli.sh PATH/TO/boltzattn}
. "$(dirname "$0")/lib.sh"

# --- usage errors: exit 2 with a message naming the problem
expect 2 "unknown command 'frobnicate'" -- "$BIN" frobnicate
expect 2 "usage:" -- "$BIN"
expect 0 "train" -- "$BIN" --help
expect 0 "--eval-every" -- "$BIN" train --help
for c in eval sample grads batch; do expect 0 "--ckpt" -- "$BIN" $c --help; done
expect 2 "unknown option '--bogus'" -- "$BIN" train --bogus 3
expect 2 "unknown task 'chess'" -- "$BIN" train --task chess
expect 2 "unknown attention variant 'linear'" -- "$BIN" train --attn linear
expect 2 "--steps: 'ten' is not an integer" -- "$BIN" train --steps ten
expect 2 "--steps: -5 is out of range" -- "$BIN" train --steps -5
expect 2 "--steps: '99999999999999999999' is not an integer" -- "$BIN" train --steps 99999999999999999999
expect 2 "--lr: 'nan' is not a finite number" -- "$BIN" train --lr nan
expect 2 "--batch: 0 is out of range" -- "$BIN" train --batch 0
expect 2 "--T: 0 is out of range" -- "$BIN" train --T 0
expect 2 "needs a value" -- "$BIN" train --T
expect 2 "--seed: '-1' is not a non-negative integer" -- "$BIN" train --seed -1
expect 2 "not divisible by n_head" -- "$BIN" train --embd 10 --heads 3
expect 2 "accepts T <= 20" -- "$BIN" train --task brackets --attn boltzmann --engine reference --T 21
expect 2 "go to T = 26" -- "$BIN" train --task brackets --attn boltzmann --T 27
expect 2 "--band W (e.g. --band 8" -- "$BIN" train --task brackets --attn boltzmann --T 27
expect 2 "accepts T <= 26" -- "$BIN" train --task brackets --attn boltzmann --engine fast --T 27
expect 2 "16384 MiB" -- "$BIN" train --task brackets --attn coupling --engine fast --T 30
expect 2 "unknown engine 'quantum'" -- "$BIN" train --engine quantum
expect 2 "cannot read data file $TMP/nope.txt" -- "$BIN" train --task charlm --data "$TMP/nope.txt" --out "$TMP/x"
expect 2 "option '--ckpt' is required" -- "$BIN" eval
expect 2 "No such file" -- "$BIN" eval --ckpt "$TMP/missing.safetensors"
# a FIFO as a checkpoint is refused at once, not waited on for a writer
mkfifo "$TMP/fifo.safetensors"
expect 2 "is not a regular file" -- timeout 10 "$BIN" eval --ckpt "$TMP/fifo.safetensors"
printf 'not a checkpoint' >"$TMP/junk.safetensors"
expect 2 "" -- "$BIN" eval --ckpt "$TMP/junk.safetensors"

# --- brackets: train, then eval reproduces the final accuracy exactly
expect 0 "final: accuracy" -- "$BIN" train --task brackets --attn boltzmann --T 6 --embd 16 \
    --steps 60 --batch 16 --out "$TMP/br" --quiet
[ -f "$TMP/br/model.safetensors" ] && ok || bad "no checkpoint written"
[ -f "$TMP/br/metrics.jsonl" ] && grep -q '"event":"final"' "$TMP/br/metrics.jsonl" && ok ||
    bad "metrics.jsonl lacks the final record"
train_acc=$("$BIN" train --task brackets --attn boltzmann --T 6 --embd 16 --steps 60 --batch 16 \
    --out "$TMP/br" --force --quiet 2>/dev/null | sed -n 's/^final: accuracy \([0-9.]*\) %.*/\1/p')
eval_acc=$("$BIN" eval --ckpt "$TMP/br/model.safetensors" 2>/dev/null |
    sed -n 's/^eval: accuracy \([0-9.]*\) %.*/\1/p')
if [ -n "$train_acc" ] && [ "$train_acc" = "$eval_acc" ]; then ok; else
    bad "eval accuracy '$eval_acc' differs from train's '$train_acc'"; fi

# --- a corrupted tensor byte (still a finite value) is caught by the checksum
cp "$TMP/br/model.safetensors" "$TMP/flip.safetensors"
size=$(stat -c %s "$TMP/flip.safetensors")
byte=$(od -An -tu1 -j $((size - 3)) -N1 "$TMP/flip.safetensors" | tr -d ' ')
printf "$(printf '\\%03o' $((byte ^ 1)))" | dd of="$TMP/flip.safetensors" bs=1 seek=$((size - 3)) conv=notrunc 2>/dev/null
expect 2 "checksum mismatch" -- "$BIN" eval --ckpt "$TMP/flip.safetensors"

# --- fuzzer find: a tiny file whose config describes a huge model is refused
#     before anything is allocated
expect 2 "file holds only" -- "$BIN" eval --ckpt "$(dirname "$0")/fuzz/crashes/checkpoint-oom-config-only.safetensors"

# --- batch and grads
expect 0 "wrote 4 x 6 batch" -- "$BIN" batch --ckpt "$TMP/br/model.safetensors" --size 4 --out "$TMP/b.safetensors"
expect 0 "gradients of" -- "$BIN" grads --ckpt "$TMP/br/model.safetensors" --batch "$TMP/b.safetensors" --out "$TMP/g.safetensors"
[ -s "$TMP/g.safetensors" ] && ok || bad "no gradient file"
expect 2 "" -- "$BIN" grads --ckpt "$TMP/br/model.safetensors" --batch "$TMP/junk.safetensors" --out "$TMP/g2.safetensors"
expect 2 "option '--out' is required" -- "$BIN" grads --ckpt "$TMP/br/model.safetensors" --batch "$TMP/b.safetensors"
expect 2 "sampling needs a charlm checkpoint" -- "$BIN" sample --ckpt "$TMP/br/model.safetensors"

# --- charlm on a small generated corpus
for i in $(seq 1 400); do echo "the cat sat on the mat and the dog sat on the log"; done >"$TMP/corpus.txt"
expect 0 "final: val_loss" -- "$BIN" train --task charlm --attn sigmoid --T 8 --embd 16 --steps 40 \
    --batch 8 --data "$TMP/corpus.txt" --out "$TMP/lm" --quiet
expect 0 "eval: val_loss" -- "$BIN" eval --ckpt "$TMP/lm/model.safetensors" --data "$TMP/corpus.txt"
expect 0 "the" -- "$BIN" sample --ckpt "$TMP/lm/model.safetensors" --prompt "the " --len 20 --seed 3
expect 2 "--prompt" -- "$BIN" sample --ckpt "$TMP/lm/model.safetensors" --prompt "XYZ"
expect 2 "--temperature: -1 is out of range" -- "$BIN" sample --ckpt "$TMP/lm/model.safetensors" --temperature -1
# a byte outside the checkpoint's vocabulary is a clear input error
{ cat "$TMP/corpus.txt"; printf 'Zebra\n'; } >"$TMP/other.txt"
expect 2 "the byte at offset 20000 of" -- "$BIN" eval --ckpt "$TMP/lm/model.safetensors" --data "$TMP/other.txt"
# greedy sampling is deterministic
s1=$("$BIN" sample --ckpt "$TMP/lm/model.safetensors" --prompt "the " --len 30 --temperature 0)
s2=$("$BIN" sample --ckpt "$TMP/lm/model.safetensors" --prompt "the " --len 30 --temperature 0 --seed 9)
[ "$s1" = "$s2" ] && ok || bad "greedy sampling differs between seeds"

# --- one writer per output directory: a lock file left by a process that is
# gone (no process holds its lock) is taken over; a live holder refuses
mkdir -p "$TMP/locked"
echo 999999999 >"$TMP/locked/.lock"
expect 0 "final: accuracy" -- "$BIN" train --task brackets --T 6 --embd 8 --steps 5 --out "$TMP/locked" --quiet
[ ! -e "$TMP/locked/.lock" ] && ok || bad "the lock file outlived the run"

# --- SIGINT: the step finishes, a checkpoint is saved, exit 1 with a message
"$BIN" train --task brackets --T 8 --embd 16 --steps 100000000 --eval-every 0 --out "$TMP/int" --quiet \
    >"$TMP/int.out" 2>"$TMP/int.err" &
pid=$!
for _ in $(seq 1 50); do grep -q '"event":"train"' "$TMP/int/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
[ "$(cat "$TMP/int/.lock")" = $pid ] && ok || bad "the lock file does not name the training's process $pid"
expect 2 "is in use by process $pid" -- "$BIN" train --task brackets --T 8 --embd 16 --steps 5 --out "$TMP/int" --quiet
kill -INT $pid
wait $pid
rc=$?
[ "$rc" = 1 ] && ok || bad "interrupted train exited $rc, expected 1"
grep -q "interrupted by signal 2 at step" "$TMP/int.err" && ok || bad "no interruption message: $(cat "$TMP/int.err")"
expect 0 "eval: accuracy" -- "$BIN" eval --ckpt "$TMP/int/model.safetensors"
[ ! -e "$TMP/int/.lock" ] && ok || bad "the lock file outlived the interrupted run"

echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
