#!/usr/bin/env bash
# Data safety (issue 14): output targets that are devices, FIFOs or the
# input itself; a second run into a run's directory; a resume whose state,
# log or data belong to another run; a finished run resumed; a signal
# during the final evaluation. Every refusal exits 2 and leaves the files
# as they were.
# usage: tests/safety.sh PATH/TO/boltzattn
set -u
BIN=${1:?usage: safety.sh PATH/TO/boltzattn}
. "$(dirname "$0")/lib.sh"

# same_bytes A B WHAT: A and B are byte-identical
same_bytes() { cmp -s "$1" "$2" && ok || bad "$3"; }
# unfinish DIR: the run as a kill during its final evaluation leaves it:
# run.json "running", no final record
unfinish() {
    sed -i 's/"status":\(\s*\)"finished"/"status":\1"running"/' "$1/run.json"
    grep -v '"event":"final"' "$1/metrics.jsonl" >"$1/m.tmp" && mv "$1/m.tmp" "$1/metrics.jsonl"
}

BR=(--task brackets --attn boltzmann --T 6 --embd 8 --heads 2 --batch 8 --eval-items 16 --quiet)
"$BIN" train "${BR[@]}" --steps 20 --out "$TMP/a" >/dev/null 2>&1 || bad "training the fixture failed"
CK=$TMP/a/model.safetensors
cp "$CK" "$TMP/ck.orig"
"$BIN" batch --ckpt "$CK" --out "$TMP/b.st" >/dev/null 2>&1 || bad "writing the batch fixture failed"
cp "$TMP/b.st" "$TMP/b.orig"

# ---- item 1: an output that exists and is not a regular file is refused
# before anything is computed, and stays what it was
for cmd in batch grads; do
    extra=()
    [ $cmd = grads ] && extra=(--batch "$TMP/b.st")
    expect 2 "exists and is not a regular file (a character device)" -- \
        "$BIN" $cmd --ckpt "$CK" "${extra[@]}" --out /dev/null
    [ -c /dev/null ] && ok || bad "$cmd --out /dev/null: /dev/null is no longer a device"
    if [ -e /dev/full ]; then
        expect 2 "exists and is not a regular file" -- "$BIN" $cmd --ckpt "$CK" "${extra[@]}" --out /dev/full
    fi
    mkfifo "$TMP/fifo-$cmd"
    expect 2 "(a FIFO)" -- timeout 20 "$BIN" $cmd --ckpt "$CK" "${extra[@]}" --out "$TMP/fifo-$cmd"
    [ -p "$TMP/fifo-$cmd" ] && ok || bad "$cmd --out FIFO: the FIFO was replaced"
    expect 2 "(a directory)" -- "$BIN" $cmd --ckpt "$CK" "${extra[@]}" --out "$TMP"
    expect 2 "--out: the path is empty" -- "$BIN" $cmd --ckpt "$CK" "${extra[@]}" --out ""
done

# ---- item 2: an output that is an input, under any name
expect 2 "is the input" -- "$BIN" grads --ckpt "$CK" --batch "$TMP/b.st" --out "$CK"
expect 2 "is the input" -- "$BIN" grads --ckpt "$CK" --batch "$TMP/b.st" --out "$TMP/b.st"
expect 2 "is the input" -- "$BIN" batch --ckpt "$CK" --out "$CK"
ln -s "$CK" "$TMP/link.st"
ln "$CK" "$TMP/hard.st"
expect 2 "is the input" -- "$BIN" grads --ckpt "$CK" --batch "$TMP/b.st" --out "$TMP/link.st"
expect 2 "is the input" -- "$BIN" batch --ckpt "$TMP/hard.st" --out "$CK"
expect 2 "is the input" -- "$BIN" batch --ckpt "$CK" --out "$TMP/a/./model.safetensors"
same_bytes "$CK" "$TMP/ck.orig" "an input checkpoint was modified"
same_bytes "$TMP/b.st" "$TMP/b.orig" "an input batch was modified"
# and a regular output elsewhere still works
expect 0 "gradients of" -- "$BIN" grads --ckpt "$CK" --batch "$TMP/b.st" --out "$TMP/g.st"

# ---- files read whole have a size limit, checked before any memory is
# taken (a sparse 4 GiB + 1 file costs no disk)
if truncate -s 4294967297 "$TMP/huge.st" 2>/dev/null; then
    expect 2 "more than the 4294967296 bytes (4 GiB) a file read whole may have" -- \
        "$BIN" eval --ckpt "$TMP/huge.st"
    expect 2 "more than the 4294967296 bytes" -- \
        "$BIN" grads --ckpt "$CK" --batch "$TMP/huge.st" --out "$TMP/g2.st"
    rm -f "$TMP/huge.st"
else
    echo "skip: this file system makes no sparse files (the size-limit check)"
fi

# ---- the library's writer itself never replaces a non-regular file: a
# FIFO where a forced run saves its checkpoint (the FIFO stays)
mkdir -p "$TMP/ff"
mkfifo "$TMP/ff/model.safetensors"
expect 1 "exists and is not a regular file; not replacing it" -- \
    timeout 60 "$BIN" train "${BR[@]}" --steps 4 --out "$TMP/ff" --force
[ -p "$TMP/ff/model.safetensors" ] && ok || bad "the writer replaced a FIFO"

# ---- item 4: a second run into a run's directory is refused unless
# --force; the first run's files stay as they were
cp "$TMP/a/metrics.jsonl" "$TMP/m.orig"
expect 2 "already holds a finished run: brackets boltzmann T=6, step 20 of 20; pass --resume" -- \
    "$BIN" train "${BR[@]}" --steps 30 --out "$TMP/a"
same_bytes "$CK" "$TMP/ck.orig" "a refused run changed the model"
same_bytes "$TMP/a/metrics.jsonl" "$TMP/m.orig" "a refused run changed the log"
expect 0 "final: accuracy" -- "$BIN" train "${BR[@]}" --steps 30 --out "$TMP/a" --force
grep -Eq '"steps":[[:space:]]*30,' "$TMP/a/run.json" && ok || bad "--force did not replace the run"
[ "$(grep -c '"event":"config"' "$TMP/a/metrics.jsonl")" = 1 ] && ok ||
    bad "--force: the new log is not a fresh one"
# a directory with only a log (a killed run's) counts as a run too
mkdir -p "$TMP/k" && echo '{"event":"config"}' >"$TMP/k/metrics.jsonl"
expect 2 "already holds a run's metrics.jsonl" -- "$BIN" train "${BR[@]}" --steps 5 --out "$TMP/k"
# usage errors: --out empty or a file
expect 2 "--out: the path is empty" -- "$BIN" train "${BR[@]}" --steps 5 --out ""
expect 2 "exists and is not a directory" -- "$BIN" train "${BR[@]}" --steps 5 --out "$TMP/b.st"
# links that lead nowhere, and a path through a file: usage errors, nothing made
ln -s "$TMP/loop" "$TMP/loop"
ln -s "$TMP/nothing/here" "$TMP/dangling"
expect 2 "not a directory to write into (Too many levels of symbolic links)" -- \
    "$BIN" train "${BR[@]}" --steps 5 --out "$TMP/loop"
expect 2 "not a directory to write into (a symbolic link to nothing)" -- \
    "$BIN" train "${BR[@]}" --steps 5 --out "$TMP/dangling"
expect 2 "not a directory to write into (Not a directory)" -- \
    "$BIN" train "${BR[@]}" --steps 5 --out "$TMP/b.st/run"
[ ! -e "$TMP/nothing" ] && ok || bad "a refused --out through a dangling link made its target"
# a log planted as a symbolic link is never followed
mkdir -p "$TMP/sl"
echo "precious" >"$TMP/precious.txt"
ln -s "$TMP/precious.txt" "$TMP/sl/metrics.jsonl"
expect 1 "not a regular file" -- "$BIN" train "${BR[@]}" --steps 5 --out "$TMP/sl" --force
[ "$(cat "$TMP/precious.txt")" = precious ] && ok || bad "the log's symlink target was written"

# ---- item 5: resume with another run's state, or another text
"$BIN" train --task brackets --attn softmax --T 8 --embd 8 --heads 2 --batch 8 --quiet \
    --steps 40 --save-every 10 --out "$TMP/soft" >/dev/null 2>&1
"$BIN" train "${BR[@]}" --steps 20 --save-every 5 --out "$TMP/bz" >/dev/null 2>&1
# an unfinished boltzmann run: its state from step 5, its log cut there
mkdir -p "$TMP/half"
"$BIN" train "${BR[@]}" --steps 20 --save-every 5 --eval-every 5 --out "$TMP/half" >/dev/null 2>&1
unfinish "$TMP/half"
cp "$TMP/soft/state.safetensors" "$TMP/half/state.safetensors"
cp "$TMP/half/metrics.jsonl" "$TMP/half.log"
cp "$TMP/half/model.safetensors" "$TMP/half.model"
expect 2 "is the log of another run: its config has" -- "$BIN" train --resume "$TMP/half"
same_bytes "$TMP/half/metrics.jsonl" "$TMP/half.log" "a refused resume changed the log"
same_bytes "$TMP/half/model.safetensors" "$TMP/half.model" "a refused resume changed the model"
# a finished run: "already finished", nothing appended
cp "$TMP/bz/metrics.jsonl" "$TMP/bz.log"
expect 2 "has already finished" -- "$BIN" train --resume "$TMP/bz"
same_bytes "$TMP/bz/metrics.jsonl" "$TMP/bz.log" "resuming a finished run changed its log"

# charlm: a resume on another text with the same vocabulary is refused
for i in $(seq 1 300); do echo "to be or not to be, that is it $((i % 7))"; done >"$TMP/t1.txt"
for i in $(seq 1 300); do echo "to be or not to be, that is it $((i % 5))"; done >"$TMP/t2.txt"
LM=(--task charlm --attn softmax --T 8 --embd 8 --heads 2 --batch 4 --eval-items 8 --quiet)
"$BIN" train "${LM[@]}" --data "$TMP/t1.txt" --steps 20 --save-every 10 --out "$TMP/lm" \
    >/dev/null 2>&1
unfinish "$TMP/lm"
expect 2 "the data differs from the run's: $TMP/t2.txt has" -- \
    "$BIN" train --resume "$TMP/lm" --data "$TMP/t2.txt"
# the same text under another name is the same data: the resume evaluates
cp "$TMP/t1.txt" "$TMP/t1-moved.txt"
expect 0 "final: val_loss" -- "$BIN" train --resume "$TMP/lm" --data "$TMP/t1-moved.txt"
[ "$(grep -c '"event":"final"' "$TMP/lm/metrics.jsonl")" = 1 ] && ok || bad "not one final record"

# ---- item 3 / 14: a signal during the final evaluation stops it (the
# weights are already saved); the resume evaluates. The evaluation is made
# long (boltzmann T = 20, 360 windows: 3-4 s, 80 ms a batch) and the signal
# sent once the last step's record is in the log, which the final save
# point flushes.
awk 'BEGIN { srand(3); split("to be or not that is the question whether tis nobler", w, " ");
    for (i = 0; i < 15000; i++) printf "%s ", w[int(rand() * 11) + 1] }' >"$TMP/long.txt"
"$BIN" train --task charlm --attn boltzmann --T 20 --embd 8 --heads 1 --batch 8 --steps 2 \
    --log-every 1 --eval-every 0 --j-init-std 0.1 --data "$TMP/long.txt" --out "$TMP/fe" \
    >"$TMP/fe.out" 2>"$TMP/fe.err" &
pid=$!
for _ in $(seq 1 1000); do
    grep -q '"event":"train","step":2' "$TMP/fe/metrics.jsonl" 2>/dev/null && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.01
done
kill -INT $pid
wait $pid
rc=$?
[ $rc = 1 ] && ok || bad "a signal during the final evaluation: exit $rc, expected 1: $(cat "$TMP/fe.err")"
grep -q "stopping the final evaluation" "$TMP/fe.err" && grep -q "during the final evaluation" "$TMP/fe.err" &&
    ok || bad "the messages of a stop during the final evaluation: $(cat "$TMP/fe.err")"
grep -Eq '"status":[[:space:]]*"stopped"' "$TMP/fe/run.json" && ok || bad "run.json is not 'stopped'"
grep -q '"event":"final"' "$TMP/fe/metrics.jsonl" && bad "a stopped evaluation wrote a final record" || ok
[ -f "$TMP/fe/model.safetensors" ] && ok || bad "no checkpoint after a stop in the final evaluation"
expect 0 "no steps left; the model of step 2 evaluated" -- "$BIN" train --resume "$TMP/fe" --quiet
[ "$(grep -c '"event":"final"' "$TMP/fe/metrics.jsonl")" = 1 ] && ok || bad "not one final record"

echo "$pass passed, $failed failed"
[ "$failed" = 0 ] && [ "$pass" -gt 0 ]
