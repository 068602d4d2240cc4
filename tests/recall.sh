#!/usr/bin/env bash
# recall (multi-query associative recall) from the command line: refusals
# naming the values, train -> eval reproducing the final accuracy above
# chance, the run record's data fields, batch -> grads, sample refused,
# boltzmann with a band at T = 64, and a tiny ablate grid with its
# summary and plots' data.
# usage: tests/recall.sh PATH/TO/boltzattn
set -u
BIN=${1:?usage: recall.sh PATH/TO/boltzattn}
. "$(dirname "$0")/lib.sh"

# --- refusals: exit 2 naming the value
expect 2 "recall vocabulary = 7 must be even" -- "$BIN" train --task recall --recall-vocab 7 --out "$TMP/x"
expect 2 "--recall-vocab: 300 is out of range" -- "$BIN" train --task recall --recall-vocab 300 --out "$TMP/x"
expect 2 "recall pairs = 9 is out of range [1, 8]" -- "$BIN" train --task recall --recall-vocab 16 --pairs 9 --T 64 --attn softmax --out "$TMP/x"
expect 2 "recall T = 15 is out of range [16, 4096]" -- "$BIN" train --task recall --attn softmax --pairs 4 --T 15 --out "$TMP/x"
expect 2 "--pairs is for --task recall" -- "$BIN" train --task brackets --pairs 4 --out "$TMP/x"
expect 2 "--recall-vocab is for --task recall" -- "$BIN" train --task charlm --recall-vocab 16 --out "$TMP/x"
expect 0 "--recall-vocab" -- "$BIN" train --help
expect 0 "charlm|brackets|recall" -- "$BIN" ablate --help
[ ! -e "$TMP/x" ] && ok || bad "a refused run left its directory"

# --- softmax learns the lookup: two layers (a lookup needs two attention
# steps), rotary positions and weights of std 0.1 (GPT-2's 0.02 sits on the
# no-lookup floor here: docs/cli.md, "recall") reach far above the 61 % a
# model gets that knows the context's values but not which key holds which;
# eval reproduces the final accuracy exactly
R="$TMP/rc"
"$BIN" train --task recall --attn softmax --T 32 --pairs 4 --recall-vocab 16 --layers 2 --heads 2 \
    --pos-emb rope --init-std 0.1 --batch 16 --steps 400 --warmup 150 --threads 1 \
    --out "$R" >"$TMP/train.out" 2>"$TMP/train.err"
[ $? = 0 ] && ok || bad "recall training failed: $(cat "$TMP/train.err")"
grep -q "recall: vocabulary 16, 4 pairs, .* held out; chance 12.50 %" "$TMP/train.err" && ok ||
    bad "no recall banner: $(cat "$TMP/train.err")"
train_acc=$(sed -n 's/^final: accuracy \([0-9.]*\) %  ([0-9]* of 24000 queried values in 2000 held-out sequences).*/\1/p' "$TMP/train.out")
eval_acc=$("$BIN" eval --ckpt "$R/model.safetensors" 2>/dev/null |
    sed -n 's/^eval: accuracy \([0-9.]*\) %  ([0-9]* of 24000 queried values in 2000 held-out sequences).*/\1/p')
if [ -n "$train_acc" ] && [ "$train_acc" = "$eval_acc" ]; then ok; else
    bad "eval accuracy '$eval_acc' differs from train's '$train_acc' ($(cat "$TMP/train.out"))"; fi
awk -v a="${eval_acc:-0}" 'BEGIN { exit !(a > 90) }' && ok ||
    bad "recall accuracy ${eval_acc:-none} % after 400 steps is not above 90 % (no-lookup floor 61 %)"
grep -q '"init_std":[[:space:]]*0.1' "$R/run.json" && ok || bad "run.json lacks init_std 0.1"
expect 2 "--init-std: 0 is out of range" -- "$BIN" train --task recall --attn softmax --init-std 0 --out "$TMP/x"
expect 2 "--init-std: 2 is out of range" -- "$BIN" ablate --task recall --attn softmax --init-std 2 --out "$TMP/x"
grep -q '"task":[[:space:]]*"recall"' "$R/run.json" && grep -q '"recall_vocab":[[:space:]]*16' "$R/run.json" &&
    grep -q '"pairs":[[:space:]]*4' "$R/run.json" && grep -q '"val_acc"' "$R/run.json" && ok ||
    bad "run.json lacks the recall data description"

# --- batch -> grads over recall data; sample refuses it
expect 0 "wrote 4 x 32 batch" -- "$BIN" batch --ckpt "$R/model.safetensors" --size 4 --out "$TMP/b.safetensors"
expect 0 "gradients of" -- "$BIN" grads --ckpt "$R/model.safetensors" --batch "$TMP/b.safetensors" --out "$TMP/g.safetensors"
expect 2 "sampling needs a charlm checkpoint, this one is recall" -- "$BIN" sample --ckpt "$R/model.safetensors"

# --- boltzmann with relative couplings of range 4 (band engine) at T = 64
expect 0 "final: accuracy" -- "$BIN" train --task recall --attn boltzmann --couplings relative --band 4 \
    --T 64 --embd 16 --steps 4 --batch 4 --heldout 16 --out "$TMP/bz" --quiet
expect 0 "queried values in 16 held-out sequences" -- "$BIN" eval --ckpt "$TMP/bz/model.safetensors"

# --- a tiny grid: grid.json keeps the data description, the summary the metric
G="$TMP/grid"
"$BIN" ablate --task recall --attn softmax,sigmoid --T 16 --pairs 2 --recall-vocab 8 --embd 8 \
    --seeds 1 --steps 20 --batch 8 --heldout 50 --out "$G" >"$TMP/g.out" 2>"$TMP/g.err"
[ $? = 0 ] && ok || bad "recall grid failed: $(cat "$TMP/g.err")"
grep -q '"recall_vocab":[[:space:]]*8' "$G/grid.json" && grep -q '"pairs":[[:space:]]*2' "$G/grid.json" &&
    ok || bad "grid.json lacks recall_vocab and pairs"
grep -q "Held-out set: 50 sequences, 300 queried-value targets" "$G/summary.md" && ok ||
    bad "summary lacks the held-out set: $(head -20 "$G/summary.md")"
grep -q "^recall,softmax,16,8,1,1,20,accuracy," "$G/results.csv" && ok ||
    bad "results.csv lacks the recall accuracy: $(cat "$G/results.csv")"
"$BIN" ablate --task recall --attn softmax,sigmoid --T 16 --pairs 2 --recall-vocab 8 --embd 8 \
    --seeds 1 --steps 20 --batch 8 --heldout 50 --out "$G" --summary-only >/dev/null 2>&1 && ok ||
    bad "the recall grid.json does not read back"
expect 2 "--T 6: recall T = 6 is out of range [8, 4096]" -- "$BIN" ablate --task recall --attn softmax --T 6 --pairs 2 --recall-vocab 8 --out "$TMP/g2"
env PATH=/nonexistent "$BIN" plot "$G" >/dev/null 2>&1
grep -q "^recall softmax 16 8 1 1 " "$G/plots/summary.dat" && ok ||
    bad "plot's summary.dat lacks the recall cell: $(cat "$G/plots/summary.dat" 2>/dev/null)"
[ -f "$G/plots/recall_acc_vs_T.gp" ] && ok || bad "no recall_acc_vs_T.gp: $(ls "$G/plots")"

echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
