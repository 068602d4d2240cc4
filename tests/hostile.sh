#!/usr/bin/env bash
# Issue 41's fresh hostile round from the command line: out-of-range and
# non-finite numbers, outputs and inputs that are devices, FIFOs,
# directories, the input itself, loops of links, a finished run; corrupt
# and oversized files. Each must be a usage error (exit 2) naming the
# problem, and nothing may be made or lost. (Most classes have deeper
# tests elsewhere: safety.sh, inputs.sh, malformed.sh, grid_hostile.sh.)
# usage: tests/hostile.sh PATH/TO/boltzattn
set -u
BIN=${1:?usage: hostile.sh PATH/TO/boltzattn}
. "$(dirname "$0")/lib.sh"

for i in $(seq 1 300); do echo "the cat sat on the mat and the dog sat on the log"; done >"$TMP/c.txt"
"$BIN" train --task brackets --T 8 --embd 8 --steps 3 --batch 4 --quiet --out "$TMP/run" >/dev/null 2>&1 ||
    bad "the fixture run failed"
CK=$TMP/run/model.safetensors
cp "$CK" "$TMP/ck.orig"
mkfifo "$TMP/fifo"
ln -s "$TMP/loop" "$TMP/loop"
C=(--task charlm --data "$TMP/c.txt")
X=$TMP/x
# numbers
expect 2 "--T: 0 is out of range" -- "$BIN" train "${C[@]}" --T 0 --out "$X"
expect 2 "--T: -5 is out of range" -- "$BIN" train "${C[@]}" --T -5 --out "$X"
expect 2 "--T:" -- "$BIN" train "${C[@]}" --T 99999999999999 --out "$X"
expect 2 "--embd:" -- "$BIN" train "${C[@]}" --embd 1000000000 --out "$X"
expect 2 "not divisible by n_head = 3" -- "$BIN" train "${C[@]}" --heads 3 --embd 8 --out "$X"
expect 2 "--lr: 'nan' is not a finite number" -- "$BIN" train "${C[@]}" --lr nan --out "$X"
expect 2 "--lr: 'inf' is not a finite number" -- "$BIN" train "${C[@]}" --lr inf --out "$X"
expect 2 "--lr: -1 is out of range" -- "$BIN" train "${C[@]}" --lr -1 --out "$X"
expect 2 "--clip: 'nan' is not a finite number" -- "$BIN" train "${C[@]}" --clip nan --out "$X"
expect 2 "--steps: 0 is out of range" -- "$BIN" train "${C[@]}" --steps 0 --out "$X"
expect 2 "--batch: 0 is out of range" -- "$BIN" train "${C[@]}" --batch 0 --out "$X"
expect 2 "--save-every: -1 is out of range" -- "$BIN" train "${C[@]}" --save-every -1 --out "$X"
expect 2 "--eval-items: 0 is out of range" -- "$BIN" train "${C[@]}" --eval-items 0 --out "$X"
expect 2 "--threads: 100000 is out of range" -- "$BIN" train "${C[@]}" --threads 100000 --out "$X"
expect 2 "--threads: -1 is out of range" -- "$BIN" train "${C[@]}" --threads -1 --out "$X"
expect 2 "--seed: '-1' is not a non-negative integer" -- "$BIN" train "${C[@]}" --seed -1 --out "$X"
expect 2 "--seed: '18446744073709551616' is not" -- \
    "$BIN" train "${C[@]}" --seed 18446744073709551616 --out "$X"
expect 2 "T * 2^W = 268435456 window values per thread" -- \
    "$BIN" train "${C[@]}" --attn boltzmann --engine band --band 16 --T 4096 --out "$X"
expect 2 "--items: -1 is out of range" -- "$BIN" eval --ckpt "$CK" --items -1
expect 2 "--T: 0 is out of range" -- "$BIN" eval --ckpt "$CK" --T 0
expect 2 "--len: -1 is out of range" -- "$BIN" sample --ckpt "$CK" --len -1
expect 2 "--temperature: 'nan' is not a finite number" -- "$BIN" sample --ckpt "$CK" --temperature nan
expect 2 "--temperature: -1 is out of range" -- "$BIN" sample --ckpt "$CK" --temperature -1
[ ! -e "$X" ] && ok || bad "a refused train made $X"
# outputs
expect 2 "--out /dev/null: exists and is not a directory" -- "$BIN" train "${C[@]}" --out /dev/null
expect 2 "exists and is not a directory" -- "$BIN" train "${C[@]}" --out "$TMP/fifo"
expect 2 "exists and is not a directory" -- "$BIN" train "${C[@]}" --out "$TMP/c.txt"
expect 2 "not a directory to write into" -- "$BIN" train "${C[@]}" --out "$TMP/loop"
expect 2 "already holds a finished run" -- "$BIN" train "${C[@]}" --out "$TMP/run"
expect 2 "--out $TMP/loop: not a directory to write into" -- \
    "$BIN" ablate --task brackets --T 6 --arm softmax --seeds 1 --out "$TMP/loop"
# inputs
expect 2 "is a directory: charlm data must be a regular file" -- "$BIN" train --task charlm --data "$TMP" --out "$X"
expect 2 "is a FIFO: charlm data must be a regular file" -- "$BIN" train --task charlm --data "$TMP/fifo" --out "$X"
expect 2 "is a character device" -- "$BIN" train --task charlm --data /dev/zero --out "$X"
expect 2 "is not a regular file" -- "$BIN" eval --ckpt "$TMP/fifo"
expect 2 "is not a regular file" -- "$BIN" eval --ckpt /dev/zero
expect 2 "is not a regular file" -- "$BIN" eval --ckpt "$TMP"
expect 2 "header length" -- "$BIN" eval --ckpt "$TMP/c.txt"
expect 2 "header length" -- "$BIN" couplings --ckpt "$TMP/c.txt"
expect 2 "Not a directory" -- "$BIN" train --resume "$TMP/fifo"
expect 2 "Not a directory" -- "$BIN" train --resume /dev/null
# a checkpoint with a NaN written into a tensor, and one whose header
# length is 2^63 - 1
cp "$CK" "$TMP/nan.safetensors"
printf '\xff\xff\xff\x7f' | dd of="$TMP/nan.safetensors" bs=1 seek=3000 conv=notrunc 2>/dev/null
expect 2 "is not finite" -- "$BIN" eval --ckpt "$TMP/nan.safetensors"
printf '\xff\xff\xff\xff\xff\xff\xff\x7f{}' >"$TMP/huge.safetensors"
expect 2 "is above the limit" -- "$BIN" eval --ckpt "$TMP/huge.safetensors"
[ ! -e "$X" ] && ok || bad "a refused command made $X"
cmp -s "$CK" "$TMP/ck.orig" && ok || bad "the fixture's checkpoint changed"

echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
