#!/usr/bin/env bash
# Long contexts from the command line (issue 15): relative and banded
# couplings, the band and auto engines, the log-n field bias, models
# without position embeddings, eval --T at another length, and every bad
# input of these options as a clear usage error (exit 2).
# usage: tests/long.sh PATH/TO/boltzattn
set -u
BIN=${1:?usage: long.sh PATH/TO/boltzattn}
. "$(dirname "$0")/lib.sh"

for i in $(seq 1 300); do echo "the cat sat on the mat and the dog sat on the log"; done >"$TMP/corpus.txt"
D=(--task charlm --data "$TMP/corpus.txt")
TINYV=(--embd 8 --heads 2 --batch 2 --eval-items 4)
TINY=("${TINYV[@]}" --quiet)

# --- beyond the exact engines: the refusal names what works
expect 2 "couplings of range W (config 'band', --band W) are exact at any T" -- \
    "$BIN" train "${D[@]}" --attn boltzmann --T 1024 --steps 1 --out "$TMP/x"
expect 2 "--band W (e.g. --band 8" -- "$BIN" train "${D[@]}" --attn coupling --T 64 --steps 1 --out "$TMP/x"
expect 2 "or --attn softmax|sigmoid" -- "$BIN" train "${D[@]}" --attn boltzmann --T 27 --steps 1 --out "$TMP/x"
# --- bad values of the new options
expect 2 "--band: 0 is out of range" -- "$BIN" train "${D[@]}" --attn boltzmann --band 0 --T 32 --out "$TMP/x"
expect 2 "band W = 8 exceeds T - 1 = 5" -- "$BIN" train "${D[@]}" --attn boltzmann --band 8 --T 6 --out "$TMP/x"
expect 2 "--band: 17 is out of range" -- "$BIN" train "${D[@]}" --attn boltzmann --band 17 --T 64 --out "$TMP/x"
expect 2 "--band: 'x' is not an integer" -- "$BIN" train "${D[@]}" --attn boltzmann --band x --T 64 --out "$TMP/x"
expect 2 "softmax attention has none" -- "$BIN" train "${D[@]}" --attn softmax --band 4 --T 64 --out "$TMP/x"
expect 2 "sigmoid attention has none" -- "$BIN" train "${D[@]}" --attn sigmoid --band 4 --T 64 --out "$TMP/x"
expect 2 "relative couplings belong to boltzmann and coupling attention; sigmoid" -- \
    "$BIN" train "${D[@]}" --attn sigmoid --couplings relative --T 64 --out "$TMP/x"
expect 2 "unknown couplings 'toeplitz'" -- "$BIN" train "${D[@]}" --couplings toeplitz --out "$TMP/x"
expect 2 "unknown field bias 'logn'" -- "$BIN" train "${D[@]}" --field-bias logn --out "$TMP/x"
expect 2 "does nothing to softmax attention" -- "$BIN" train "${D[@]}" --attn softmax --field-bias log-n --out "$TMP/x"
expect 2 "--pos-emb: unknown position encoding 'rotary' (expected none|learned|rope|alibi)" -- \
    "$BIN" train "${D[@]}" --pos-emb rotary --out "$TMP/x"
expect 2 "the head size n_embd / n_head = 9 / 3 = 3 must be even" -- \
    "$BIN" train "${D[@]}" --pos-emb rope --embd 9 --heads 3 --out "$TMP/x"
expect 2 "unknown engine 'gpu'" -- "$BIN" train "${D[@]}" --engine gpu --out "$TMP/x"
expect 2 "too large for the band engine without a band" -- \
    "$BIN" train "${D[@]}" --attn boltzmann --engine band --T 18 --out "$TMP/x"
expect 2 "T * 2^W = 33554432 window values per thread" -- \
    "$BIN" train "${D[@]}" --attn boltzmann --band 13 --T 4096 --out "$TMP/x"
# nothing was made by the refusals
[ ! -e "$TMP/x" ] && ok || bad "a refused train left $TMP/x"

# --- a banded relative model: the header names the form and the engine
out=$("$BIN" train "${D[@]}" --attn boltzmann --couplings relative --band 3 --T 24 --steps 3 \
    "${TINYV[@]}" --out "$TMP/rel" 2>&1) && ok || bad "relative banded train failed: $out"
grep -qF "pos-emb=none couplings=relative band=3 engine=band (auto)" <<<"$out" && ok ||
    bad "the train header lacks the couplings' form: $out"
S='[[:space:]]*'
grep -Eq "\"couplings\":$S\"relative\"" "$TMP/rel/run.json" && grep -Eq "\"band\":${S}3," "$TMP/rel/run.json" &&
    grep -Eq "\"pos_emb\":${S}false" "$TMP/rel/run.json" && ok || bad "run.json lacks the couplings' form"
# its checkpoint holds J_rel [H, D] = [2, 3]
grep -aq '"blocks.0.attn.J_rel":{"dtype":"F32","shape":\[2,3\]' "$TMP/rel/model.safetensors" && ok ||
    bad "the relative checkpoint lacks blocks.0.attn.J_rel [2, 3]"
# eval at the trained T, at a longer one, at a shorter one
own=$("$BIN" eval --ckpt "$TMP/rel/model.safetensors" --data "$TMP/corpus.txt" 2>/dev/null | grep '^eval:')
same=$("$BIN" eval --ckpt "$TMP/rel/model.safetensors" --data "$TMP/corpus.txt" --T 24 2>/dev/null | grep '^eval:')
[ -n "$own" ] && [ "$own" = "$same" ] && ok || bad "eval --T 24 differs from eval: '$own' vs '$same'"
expect 0 "charlm boltzmann T=96" -- "$BIN" eval --ckpt "$TMP/rel/model.safetensors" --data "$TMP/corpus.txt" --T 96
expect 0 "charlm boltzmann T=8" -- "$BIN" eval --ckpt "$TMP/rel/model.safetensors" --data "$TMP/corpus.txt" --T 8
expect 2 "band W = 3 exceeds T - 1 = 1" -- "$BIN" eval --ckpt "$TMP/rel/model.safetensors" --data "$TMP/corpus.txt" --T 2
expect 2 "--T: 5000 is out of range" -- "$BIN" eval --ckpt "$TMP/rel/model.safetensors" --data "$TMP/corpus.txt" --T 5000
expect 0 "the" -- "$BIN" sample --ckpt "$TMP/rel/model.safetensors" --prompt "the " --len 10
# eval --band-precision: the double-trained model with the float window
# term, within float's rounding (4 T 2^-24 relative, the engine's bound) of
# its double loss; double again is the checkpoint's own; refused (exit 2,
# the setting named) where no band engine runs or for another value
ev() { "$BIN" eval --ckpt "$TMP/rel/model.safetensors" --data "$TMP/corpus.txt" "$@" 2>/dev/null | grep '^eval:'; }
f32=$(ev --band-precision float) f64=$(ev --band-precision double)
[ -n "$f32" ] && [ "$f64" = "$own" ] && python3 -c "
import sys
a, b = (float(x.split()[2]) for x in sys.argv[1:3])
sys.exit(abs(a - b) > 4 * 24 * 2 ** -24 * b + 5e-5)" "$f32" "$own" && ok ||
    bad "eval --band-precision: float '$f32' or double '$f64' against '$own'"
expect 2 "--band-precision: " -- "$BIN" eval --ckpt "$TMP/rel/model.safetensors" --data "$TMP/corpus.txt" --band-precision half
expect 2 "--band-precision float: band_precision float applies to" -- \
    "$BIN" eval --ckpt "$TMP/rel/model.safetensors" --data "$TMP/corpus.txt" --engine mf --band-precision float

# --- rotary positions (issue 43): recorded, and a rope model runs at a longer T
expect 0 "" -- "$BIN" train "${D[@]}" --attn softmax --pos-emb rope --T 12 --steps 2 "${TINY[@]}" --out "$TMP/rope"
grep -Eq "\"pos_emb\":${S}\"rope\"" "$TMP/rope/run.json" && ok || bad "run.json lacks pos_emb rope"
grep -aq '"pos_emb":{' "$TMP/rope/model.safetensors" && bad "a rope model has a pos_emb tensor" || ok
expect 0 "charlm softmax T=40" -- "$BIN" eval --ckpt "$TMP/rope/model.safetensors" --data "$TMP/corpus.txt" --T 40
expect 0 "" -- "$BIN" train "${D[@]}" --attn boltzmann --couplings relative --band 2 --pos-emb rope --T 12 --steps 2 "${TINY[@]}" --out "$TMP/roperel"
expect 0 "charlm boltzmann T=40" -- "$BIN" eval --ckpt "$TMP/roperel/model.safetensors" --data "$TMP/corpus.txt" --T 40
# --- ALiBi (issue 43): every variant; recorded; runs at a longer T
expect 0 "" -- "$BIN" train "${D[@]}" --attn sigmoid --field-bias log-n --pos-emb alibi --heads 2 --T 12 --steps 2 "${TINY[@]}" --out "$TMP/alibi"
grep -Eq "\"pos_emb\":${S}\"alibi\"" "$TMP/alibi/run.json" && ok || bad "run.json lacks pos_emb alibi"
grep -aq '"pos_emb":{' "$TMP/alibi/model.safetensors" && bad "an alibi model has a pos_emb tensor" || ok
expect 0 "charlm sigmoid T=40" -- "$BIN" eval --ckpt "$TMP/alibi/model.safetensors" --data "$TMP/corpus.txt" --T 40
expect 0 "" -- "$BIN" train "${D[@]}" --attn coupling --couplings relative --band 2 --pos-emb alibi --T 12 --steps 2 "${TINY[@]}" --out "$TMP/alibirel"
expect 0 "charlm coupling T=40" -- "$BIN" eval --ckpt "$TMP/alibirel/model.safetensors" --data "$TMP/corpus.txt" --T 40

# --- models that cannot run longer say why (exit 2)
expect 0 "" -- "$BIN" train "${D[@]}" --attn boltzmann --couplings relative --T 12 --steps 2 "${TINY[@]}" --out "$TMP/relfull"
expect 2 "relative couplings without a band cover distances up to T - 1 only" -- \
    "$BIN" eval --ckpt "$TMP/relfull/model.safetensors" --data "$TMP/corpus.txt" --T 20
expect 0 "" -- "$BIN" train "${D[@]}" --attn boltzmann --band 2 --T 12 --steps 2 "${TINY[@]}" --pos-emb none --out "$TMP/absband"
expect 2 "absolute couplings exist only between its T positions" -- \
    "$BIN" eval --ckpt "$TMP/absband/model.safetensors" --data "$TMP/corpus.txt" --T 20
expect 0 "" -- "$BIN" train "${D[@]}" --attn sigmoid --field-bias log-n --T 12 --steps 2 "${TINY[@]}" --out "$TMP/sig"
expect 2 "learned position embeddings for its T positions only" -- \
    "$BIN" eval --ckpt "$TMP/sig/model.safetensors" --data "$TMP/corpus.txt" --T 20
expect 0 "eval: val_loss" -- "$BIN" eval --ckpt "$TMP/sig/model.safetensors" --data "$TMP/corpus.txt" --T 6
# an absolute banded model stores 0 beyond its band (blocks.0.attn.J is
# [2, 12, 12]; J_0,5 is 5 keys apart)
grep -aqF '\"band\":2' "$TMP/absband/model.safetensors" && ok || bad "the banded checkpoint does not record its band"
# the pointer head runs at its own T only
expect 0 "" -- "$BIN" train --task brackets --attn boltzmann --band 2 --T 8 --embd 4 --steps 2 --batch 4 --quiet --out "$TMP/br"
expect 2 "a pointer head's outputs are the model's 8 positions" -- "$BIN" eval --ckpt "$TMP/br/model.safetensors" --T 6
# a resumed run keeps its own form
expect 2 "--band cannot be combined with --resume" -- "$BIN" train --resume "$TMP/rel" --band 4

# --- the band engine's result does not depend on the thread count
for th in 1 2; do
    "$BIN" train "${D[@]}" --attn boltzmann --couplings relative --band 4 --T 32 --steps 4 "${TINY[@]}" \
        --threads "$th" --out "$TMP/th$th" >/dev/null 2>&1 || bad "train --threads $th failed"
done
a=$(grep -o '"val_loss":[^,]*' "$TMP/th1/run.json" | head -1)
b=$(grep -o '"val_loss":[^,]*' "$TMP/th2/run.json" | head -1)
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "band training differs between 1 and 2 threads: '$a' vs '$b'"

echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
