#!/usr/bin/env bash
# Hostile inputs (issue 14): files that never end or never arrive, results
# over nothing, non-finite models sampled, lists with holes and repeats,
# runs given twice, summaries of grids that do not exist, and the messages
# and help texts that go with them. Every command that could hang runs
# under a timeout (exit 124 fails the check). The malformed-file corpus
# (tests/malformed.sh) holds the files these checks also point at.
# usage: tests/inputs.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab
set -u
BIN=${1:?usage: inputs.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab}
LABBIN=${2:?usage: inputs.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab}
. "$(dirname "$0")/lib.sh"
M=$(cd "$(dirname "$0")/malformed" && pwd)
cd "$TMP" || exit 1
# check NAME EXPR
check() { if eval "$2"; then ok; else bad "$1"; fi; }
T30=(timeout 30)
LM=(train --task charlm --T 4 --embd 4 --steps 2 --quiet)

# ---------------------------------------------------- 7: unbounded files
# charlm data that is not a regular file is refused before a byte is read
expect 2 "'/dev/zero' is a character device: charlm data must be a regular file" -- \
    "${T30[@]}" "$BIN" "${LM[@]}" --data /dev/zero --out r_zero
expect 2 "'/dev/zero' is a character device" -- \
    env BA_DATA=/dev/zero "${T30[@]}" "$BIN" "${LM[@]}" --out r_zero_env
mkfifo fifo
expect 2 "'fifo' is a FIFO: charlm data must be a regular file" -- \
    "${T30[@]}" "$BIN" "${LM[@]}" --data fifo --out r_fifo
expect 2 "'fifo' is a FIFO" -- "${T30[@]}" "$BIN" eval --ckpt "$M/ckpt_ok_charlm.safetensors" \
    --data fifo
# checkpoints and batch files: a FIFO is refused, not waited on
expect 2 "'fifo' is not a regular file" -- "${T30[@]}" "$BIN" eval --ckpt fifo
expect 2 "'fifo' is not a regular file" -- "${T30[@]}" "$BIN" grads \
    --ckpt "$M/ckpt_ok_brackets.safetensors" --batch fifo --out g.safetensors
mkdir rs && mkfifo rs/state.safetensors
expect 2 "'rs/state.safetensors' is not a regular file" -- "${T30[@]}" "$BIN" train --resume rs \
    --quiet
# a file one byte over the stated limit (sparse: nothing is written)
truncate -s 1073741825 big.txt
expect 2 "'big.txt' has 1073741825 bytes, above the limit of 1073741824 bytes (1 GiB)" -- \
    "${T30[@]}" "$BIN" "${LM[@]}" --data big.txt --out r_big
rm -f big.txt
check "eval --help states the data limit" '"$BIN" eval --help | grep -q "regular file of at most 1 GiB"'
check "batch --help states the data limit" '"$BIN" batch --help | grep -q "regular file of at most 1 GiB"'

# eval of a checkpoint whose recorded training data is /dev/zero, a FIFO, or
# a file the user did not name: the recorded path (a link, swapped after
# training) is refused or reported by offset, never by its bytes
cp "$M/text_ok.txt" data.txt
ln -s data.txt recorded.txt
"$BIN" "${LM[@]}" --data "$TMP/recorded.txt" --out lm >/dev/null 2>&1
check "the charlm run trains" '[ -f lm/model.safetensors ]'
ln -sf /dev/zero recorded.txt
expect 2 "is a character device: charlm data must be a regular file" -- \
    "${T30[@]}" "$BIN" eval --ckpt lm/model.safetensors
expect 2 "the training data the checkpoint records (--data PATH reads another file)" -- \
    "${T30[@]}" "$BIN" eval --ckpt lm/model.safetensors
rm recorded.txt && mkfifo recorded.txt
expect 2 "is a FIFO" -- "${T30[@]}" "$BIN" eval --ckpt lm/model.safetensors
rm recorded.txt
{ printf 'abc ab\nca Q\n'; cat "$M/text_ok.txt"; } >secret.txt
ln -s secret.txt recorded.txt
out=$("${T30[@]}" "$BIN" eval --ckpt lm/model.safetensors 2>&1)
rc=$?
leak=0
grep -qE "[(']Q[)']|byte 81|0x51" <<<"$out" && leak=1
check "a byte outside the vocabulary: exit 2, by its offset only (not 'Q', 81, 0x51): $out" \
    '[ $rc = 2 ] && grep -qF "the byte at offset 10 of" <<<"$out" && [ $leak = 0 ]'
out=$("${T30[@]}" "$BIN" "${LM[@]}" --data "$M/text_latin1.txt" --out r_latin 2>&1)
check "invalid UTF-8 is reported without its bytes (0xef): $out" \
    'grep -qF "offset 2 of" <<<"$out" && ! grep -qi "0xef\|0x76" <<<"$out"'
rm recorded.txt && ln -s data.txt recorded.txt

# --------------------------------------------- 10: results over nothing
BR=(train --task brackets --attn softmax --embd 4 --steps 2 --quiet)
expect 2 "--heldout: 0 is out of range [1," -- \
    "$BIN" "${BR[@]}" --T 4 --heldout 0 --out r_h0
check "--heldout 0 trains nothing" '[ ! -e r_h0 ]'
expect 2 "(1 sequence of T = 2, data seed 1234) holds no closing bracket" -- \
    "$BIN" "${BR[@]}" --T 2 --out r_t2
expect 2 "n_heldout = 0" -- "$BIN" eval --ckpt "$M/ckpt_cfg_heldout_zero.safetensors"
expect 2 "--heldout: 0 is out of range [1," -- "$BIN" ablate --task brackets --attn softmax --T 4 --heldout 0 \
    --embd 4 --seeds 1 --steps 1 --out g_h0
check "ablate --heldout 0 creates no grid" '[ ! -e g_h0 ]'
expect 2 "the batch has no targets (all 8 are -1): there is no loss to compute" -- \
    "$BIN" grads --ckpt "$M/ckpt_ok_brackets.safetensors" \
    --batch "$M/batch_targets_all_none.safetensors" --out g.safetensors
check "no gradient file for a batch without targets" '[ ! -e g.safetensors ]'

# --------------------------------------- 11: sampling non-finite logits
"$BIN" sample --ckpt "$M/ckpt_lm_logits_inf.safetensors" --len 20 >s.out 2>s.err
rc=$?
check "sample of non-finite logits: exit 1 naming them, no text: $(cat s.err s.out)" \
    '[ $rc = 1 ] && grep -qF "is inf, not finite: the checkpoint cannot be sampled from" s.err &&
     [ ! -s s.out ]'
expect 1 "not finite" -- "$BIN" sample --ckpt "$M/ckpt_lm_logits_inf.safetensors" --temperature 0
expect 1 "loss is not finite" -- "$BIN" eval --ckpt "$M/ckpt_lm_logits_inf.safetensors" \
    --data "$M/text_ok.txt"

# ------------------------------------------------------------- 13: lists
expect 2 "--T: 4 is listed twice" -- "$BIN" ablate --task brackets --T 4,4 --out g_list
expect 2 "--attn: 'softmax,,boltzmann' has an empty item" -- \
    "$BIN" ablate --task brackets --attn "softmax,,boltzmann" --out g_list
expect 2 "--T: '4,' is not a comma-separated list of integers" -- \
    "$BIN" ablate --task brackets --T "4," --out g_list
expect 2 "--embd: ',8' is not a comma-separated list" -- \
    "$BIN" ablate --task brackets --embd ",8" --out g_list
expect 2 "--attn: 'softmax' is listed twice" -- \
    "$BIN" ablate --task brackets --attn softmax,softmax --out g_list
expect 2 "--sampler: 'gibbs' is listed twice" -- \
    "$BIN" ablate --task brackets --sampler gibbs,gibbs --shots 8 --out g_list
expect 2 "--tau: '1,,2' is not a comma-separated list of numbers" -- \
    "$LABBIN" dqa --tau "1,,2" --out d_list
expect 2 "--tau: 2 is listed twice" -- "$LABBIN" dqa --tau "2,2" --out d_list
# numbers are plain decimals, as names are plain names: no blank, no hex
expect 2 "--T: '4, 8' is not a comma-separated list of integers" -- \
    "$BIN" ablate --task brackets --T "4, 8" --out g_list
expect 2 "--attn: unknown attention variant ' boltzmann'" -- \
    "$BIN" ablate --task brackets --attn "softmax, boltzmann" --out g_list
expect 2 "--embd: '0x8' is not a comma-separated list of integers" -- \
    "$BIN" ablate --task brackets --embd 0x8 --out g_list
check "refused lists create nothing" '[ ! -e g_list ] && [ ! -e d_list ]'

# a summary of a grid that does not exist: refused, nothing created
expect 2 "holds no grid (no grid.json): nothing to summarise" -- \
    "$BIN" ablate --task brackets --summary-only --out "$TMP/none/x"
check "--summary-only creates no directory" '[ ! -e "$TMP/none" ]'

# one run given twice (also under another name) is not two runs
"$BIN" train --task brackets --attn boltzmann --T 4 --embd 4 --steps 2 --quiet --out bz1 \
    >/dev/null 2>&1
"$BIN" train --task brackets --attn boltzmann --T 4 --embd 4 --steps 2 --seed 2 --quiet --out bz2 \
    >/dev/null 2>&1
ln bz1/model.safetensors twin.safetensors
expect 2 "are the same file: each run may be given once" -- \
    "$BIN" couplings --ckpt bz1/model.safetensors --ckpt bz1/model.safetensors --out c_same
expect 2 "--ckpt bz1/model.safetensors and --ckpt twin.safetensors are the same file" -- \
    "$BIN" couplings --ckpt bz1/model.safetensors --ckpt twin.safetensors --out c_same
check "refused couplings write nothing" '[ ! -e c_same ]'
expect 0 "couplings of 2 runs" -- env PATH=/nonexistent "$BIN" couplings \
    --ckpt bz1/model.safetensors --ckpt bz2/model.safetensors --out c_two

# more evaluation items than the split has: refused, naming the count
expect 2 "--size 1000: the evaluation split has only 1 held-out sequence" -- \
    "$BIN" batch --ckpt "$M/ckpt_ok_brackets.safetensors" --split eval --size 1000 --out b.st
expect 2 "--size 3: the evaluation split has only 2 windows" -- \
    "$BIN" batch --ckpt lm/model.safetensors --split eval --size 3 --out b.st
check "no batch file written" '[ ! -e b.st ]'
expect 0 "wrote 2 x 4 batch" -- "$BIN" batch --ckpt lm/model.safetensors --split eval --size 2 \
    --out b.st

# --------------------------------------------- 14: messages and options
out=$("$BIN" grads --ckpt "$M/ckpt_ok_charlm.safetensors" \
    --batch "$M/batch_target_row1_pos2.safetensors" --out g.safetensors 2>&1)
rc=$?
check "a charlm target out of range by batch row and position: $out" \
    '[ $rc = 2 ] && grep -qF "target 7 at batch 1 position 2 is outside [0, 5)" <<<"$out" &&
     ! grep -q "row 6" <<<"$out"'
check "eval --help offers no --sampler-beta (eval computes no gradient)" \
    '! "$BIN" eval --help | grep -q -- --sampler-beta && "$BIN" train --help | grep -q -- --sampler-beta'
expect 2 "--sampler-beta" -- "$BIN" eval --ckpt "$M/ckpt_ok_brackets.safetensors" --sampler-beta 2
check "sample --help offers --threads" '"$BIN" sample --help | grep -q -- "--threads N"'
expect 0 "" -- "$BIN" sample --ckpt lm/model.safetensors --len 5 --threads 1
expect 2 "--threads: 0 is out of range" -- "$BIN" sample --ckpt lm/model.safetensors --threads 0
# more threads than CPUs are refused, naming the CPUs the process may use
cpus=$(nproc)
expect 2 "--threads: 1000 is out of range [1, $cpus]" -- "$BIN" train --task brackets --threads 1000 --steps 1
expect 2 "--threads: $((cpus + 1)) is out of range [1, $cpus]" -- \
    "$BIN" eval --ckpt "$M/ckpt_ok_brackets.safetensors" --threads $((cpus + 1))
# a T beyond every limit is refused with the limits in --help
check "train --help names the T limits" '"$BIN" train --help | grep -q "at most 26 (fast engine), 20 (reference)"'
# brackets' limits: T up to the model's 4096 for every kind (exact draws
# up to 64, 41, 32, 27 for 1-4 kinds, which ablate's --T help states), a
# depth cap that leaves too few prefixes is refused naming it
expect 2 "--T: 4097 is out of range [1, 4096]" -- "$BIN" "${BR[@]}" --T 4097 --out r_t65
expect 2 "T = 65 with 1 kind and max_depth 1 has only 1 valid prefix" -- \
    "$BIN" "${BR[@]}" --T 65 --max-depth 1 --out r_t65
expect 2 "--T: 4097 is out of range [1, 4096]" -- \
    "$BIN" ablate --task brackets --attn softmax --T 8,4097 --embd 4 --seeds 1 --steps 1 --out g_t65
check "ablate --T help states the limits" \
    '"$BIN" ablate --help | grep -q "brackets: exact draws to 64 (41, 32, 27 with 2-4 --kinds), double beyond"'
# eval's progress line: on a terminal only
"$BIN" eval --ckpt lm/model.safetensors --batch 1 >e.out 2>e.err
check "eval prints no progress line off a terminal" '[ ! -s e.err ] && grep -q "^eval: val_loss" e.out'
if command -v script >/dev/null 2>&1; then
    script -qec "'$BIN' eval --ckpt lm/model.safetensors --batch 1" /dev/null >tty.out 2>&1
    check "eval on a terminal shows its progress: $(cat -v tty.out)" \
        'grep -q "eval: 1 of 2 items" tty.out && grep -q "eval: val_loss" tty.out'
else
    echo "note: script(1) not found: eval's progress line on a terminal is not checked"
fi

echo "$pass passed, $failed failed"
[ "$failed" = 0 ] && [ "$pass" -gt 0 ]
