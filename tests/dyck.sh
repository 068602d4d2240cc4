#!/usr/bin/env bash
# Long Dyck from the command line: brackets at T = 256 (past the exact
# sampler's 64, drawn in double precision) with softmax and with banded
# relative boltzmann attention, eval of their checkpoints, a depth cap
# (--max-depth) recorded in run.json and honoured by eval,
# uncapped runs' files without max_depth, and the refusals.
# usage: tests/dyck.sh PATH/TO/boltzattn
set -u
BIN=${1:?usage: dyck.sh PATH/TO/boltzattn}
# one thread unless the caller chose: these runs are small, and two
# threads on a busy machine spend their time waiting for each other
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
S='[[:space:]]*'

# the final accuracy line of a train's stdout, and eval's own
final_of() { grep '^final:' <<<"$1" | sed 's/^final:/eval:/'; }
eval_of() { "$BIN" eval --ckpt "$1/model.safetensors" --batch 8 2>/dev/null | grep '^eval:'; }

# --- softmax at T = 256
out=$("$BIN" train --task brackets --attn softmax --T 256 --embd 32 --steps 20 --batch 4 \
    --out sm 2>&1) && ok || bad "softmax T=256 train failed: $out"
grep -qF "brackets: 2^64 or more training prefixes, 2000 held out (deepest nesting: mean" <<<"$out" &&
    ok || bad "the brackets line lacks the sizes and depths: $out"
grep -q "max_depth" sm/run.json sm/metrics.jsonl && bad "an uncapped run recorded max_depth" || ok
[ "$(final_of "$out")" = "$(eval_of sm)" ] && [ -n "$(eval_of sm)" ] && ok ||
    bad "eval of the softmax checkpoint differs from its final: '$(final_of "$out")' vs '$(eval_of sm)'"

# --- boltzmann, relative couplings on the band engine, at T = 256
out=$("$BIN" train --task brackets --attn boltzmann --couplings relative --band 4 --T 256 \
    --embd 16 --steps 3 --batch 2 --heldout 200 --out bz 2>&1) && ok ||
    bad "boltzmann band T=256 train failed: $out"
grep -qF "engine=band" <<<"$out" && ok || bad "the boltzmann run is not on the band engine: $out"
[ "$(final_of "$out")" = "$(eval_of bz)" ] && ok ||
    bad "eval of the boltzmann checkpoint differs from its final: '$(final_of "$out")' vs '$(eval_of bz)'"

# --- a depth cap: recorded, reached and never exceeded, honoured by eval
out=$("$BIN" train --task brackets --attn softmax --T 256 --embd 16 --steps 4 --batch 4 \
    --heldout 300 --max-depth 8 --out cap 2>&1) && ok || bad "--max-depth 8 train failed: $out"
grep -qF "training prefixes of depth <= 8, 300 held out (deepest nesting: mean" <<<"$out" &&
    grep -qF ", max 8)" <<<"$out" && ok || bad "the capped brackets line is wrong: $out"
grep -Eq "\"max_depth\":${S}8" cap/run.json && ok || bad "run.json lacks max_depth 8"
[ "$(final_of "$out")" = "$(eval_of cap)" ] && ok ||
    bad "eval of the capped checkpoint differs from its final: '$(final_of "$out")' vs '$(eval_of cap)'"
# one kind, depth 2, at T = 64: the exact sampler with a cap
expect 0 "of depth <= 2" -- "$BIN" train --task brackets --attn softmax --T 64 --embd 8 --steps 2 \
    --batch 2 --heldout 50 --max-depth 2 --out cap2

# --- refusals (exit 2, nothing made)
expect 2 "--max-depth: 0 is out of range [1, 4096]" -- \
    "$BIN" train --task brackets --attn softmax --T 256 --max-depth 0 --out x
expect 2 "--max-depth: -3 is out of range" -- \
    "$BIN" train --task brackets --attn softmax --T 256 --max-depth -3 --out x
expect 2 "--max-depth: 'deep' is not an integer" -- \
    "$BIN" train --task brackets --attn softmax --T 256 --max-depth deep --out x
expect 2 "--max-depth is for --task brackets" -- \
    "$BIN" train --task charlm --attn softmax --T 256 --max-depth 4 --out x
expect 2 "max_depth 1 has only 1 valid prefix" -- \
    "$BIN" train --task brackets --attn softmax --T 256 --max-depth 1 --out x
expect 2 "--T: 4097 is out of range [1, 4096]" -- "$BIN" train --task brackets --attn softmax --T 4097 --out x
[ ! -e x ] && ok || bad "a refused train left x"

# the cap in a grid: ablate --max-depth records it in grid.json and every
# run, evaluates the capped held-out set (the cell's accuracy is the
# run's eval), refuses to resume the grid under another cap, and a grid
# without one keeps grid.json free of the key
"$BIN" ablate --task brackets --attn softmax --T 64 --embd 8 --seeds 1 --steps 10 --batch 4 \
    --heldout 50 --eval-items 50 --max-depth 3 --out gcap >/dev/null 2>&1 &&
    grep -q "\"max_depth\":${S}3" gcap/grid.json &&
    grep -q "\"max_depth\":${S}3" gcap/runs/brackets-T64-C8-ffn1-softmax-s1/run.json &&
    ok || bad "ablate --max-depth 3: grid.json and run.json do not both carry the cap"
# eval (which rebuilds the held-out set from the checkpoint's cap) gives
# the run's own accuracy: the run was evaluated on the capped set
acc=$(python3 -c "import json, sys; print('%.2f' % (100 * json.load(open(sys.argv[1]))['result']['val_acc']))" \
    gcap/runs/brackets-T64-C8-ffn1-softmax-s1/run.json 2>/dev/null)
[ -n "$acc" ] && eval_of gcap/runs/brackets-T64-C8-ffn1-softmax-s1 | grep -q "^eval: accuracy $acc %" &&
    ok || bad "ablate --max-depth 3: eval's accuracy is not the run's ($acc)"
expect 2 "'max_depth' is 3 there, 4 asked now" -- \
    "$BIN" ablate --task brackets --attn softmax --T 64 --embd 8 --seeds 1 --steps 10 --batch 4 \
    --heldout 50 --eval-items 50 --max-depth 4 --out gcap
"$BIN" ablate --out gcap --summary-only >/dev/null 2>&1 && ok || bad "a capped grid does not read back"
cp -r gcap gbad && sed -i 's/"max_depth":[[:space:]]*3/"max_depth": 0.5/' gbad/grid.json
expect 2 "grid.json: bad or missing field 'max_depth'" -- "$BIN" ablate --out gbad --summary-only
"$BIN" ablate --task brackets --attn softmax --T 8 --embd 8 --seeds 1 --steps 5 --batch 4 \
    --heldout 8 --eval-items 8 --out gfree >/dev/null 2>&1 && ! grep -q max_depth gfree/grid.json &&
    ok || bad "an uncapped grid's grid.json has max_depth (or the grid failed)"
expect 2 "--max-depth is for --task brackets" -- \
    "$BIN" ablate --task recall --attn softmax --T 64 --max-depth 4 --out gx
expect 2 "--pairs is for --task recall" -- \
    "$BIN" ablate --task brackets --attn softmax --T 64 --pairs 4 --out gx
[ ! -e gx ] && ok || bad "a refused ablate left gx"

echo "dyck: $pass passed, $failed failed"
[ "$failed" -eq 0 ]
