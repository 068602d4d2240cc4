#!/usr/bin/env bash
# The approximate engines from the command line (issue 16): training with
# mf, tap, bp and hybrid at a T no exact engine reaches with full-range
# couplings, their counts in metrics.jsonl, hybrid's window (--band under
# --engine hybrid), evaluation of a checkpoint with another engine, the
# non-convergence report, and every bad value as a usage error (exit 2).
# usage: tests/engines.sh PATH/TO/boltzattn
set -u
BIN=${1:?usage: engines.sh PATH/TO/boltzattn}
. "$(dirname "$0")/lib.sh"

for i in $(seq 1 300); do echo "the cat sat on the mat and the dog sat on the log"; done >"$TMP/corpus.txt"
D=(--task charlm --data "$TMP/corpus.txt")
TINYV=(--embd 8 --heads 2 --batch 2 --eval-items 4 --log-every 1)

# --- bad values: each named, nothing made
expect 2 "--damping 0: must be above 0" -- "$BIN" train "${D[@]}" --attn boltzmann --engine mf --damping 0 --out "$TMP/x"
expect 2 "--damping: 1.5 is out of range" -- "$BIN" train "${D[@]}" --attn boltzmann --engine mf --damping 1.5 --out "$TMP/x"
expect 2 "--tol 0: must be above 0" -- "$BIN" train "${D[@]}" --attn boltzmann --engine tap --tol 0 --out "$TMP/x"
expect 2 "--tol: -1 is out of range" -- "$BIN" train "${D[@]}" --attn boltzmann --engine tap --tol -1 --out "$TMP/x"
expect 2 "--max-iter: 0 is out of range" -- "$BIN" train "${D[@]}" --attn boltzmann --engine bp --max-iter 0 --out "$TMP/x"
expect 2 "--damping: 'nan' is not a finite number" -- "$BIN" train "${D[@]}" --attn boltzmann --engine bp --damping nan --out "$TMP/x"
expect 2 "--window applies to the hybrid engine (--engine hybrid), not to the mf engine" -- \
    "$BIN" train "${D[@]}" --attn boltzmann --engine mf --window 4 --out "$TMP/x"
expect 2 "--damping applies to the approximate engines (--engine mf|tap|bp|hybrid), not to the auto engine" -- \
    "$BIN" train "${D[@]}" --attn boltzmann --damping 0.3 --out "$TMP/x"
expect 2 "--window: 17 is out of range" -- "$BIN" train "${D[@]}" --attn boltzmann --engine hybrid --window 17 --out "$TMP/x"
expect 2 "--band 4 and --window 3: under --engine hybrid both name the exact window" -- \
    "$BIN" train "${D[@]}" --attn boltzmann --engine hybrid --band 4 --window 3 --T 32 --out "$TMP/x"
expect 2 "unknown engine 'meanfield'" -- "$BIN" train "${D[@]}" --engine meanfield --out "$TMP/x"
[ ! -e "$TMP/x" ] && ok || bad "a refused train left $TMP/x"

# --- the engine table (boltzattn engines): the loops below take their
# engines from it, so an empty or broken list must fail here, not pass
approx=$("$BIN" engines --names --with approx) && [ -n "$approx" ] && ok ||
    bad "engines --names --with approx gave nothing"
all=$("$BIN" engines --names) && ok || bad "engines --names failed"
for e in $all; do
    "$BIN" engines | grep -qE "^[0-9]+ +$e " && ok || bad "engines does not list $e"
done
expect 2 "--with: unknown capability 'quantum'" -- "$BIN" engines --with quantum

# --- full-range couplings at T = 48 (no exact engine takes them there)
for e in $("$BIN" engines --names --with approx --without window); do
    out=$("$BIN" train "${D[@]}" --attn boltzmann --engine $e --T 48 --steps 2 "${TINYV[@]}" \
        --out "$TMP/$e" 2>&1) && ok || bad "$e train failed: $out"
    grep -qF "couplings=absolute engine=$e" <<<"$out" && ok || bad "$e: the header lacks the engine: $out"
    # every train record counts its rows: 2 steps x (forward + backward) x
    # B = 2 x T = 48 rows x 2 heads = 384 per step
    python3 - "$TMP/$e/metrics.jsonl" <<'EOF' && ok || bad "$e: metrics.jsonl lacks the approximate counts"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
tr = [r for r in recs if r["event"] == "train"]
assert len(tr) == 2, tr
for r in tr:
    a = r["approx"]
    assert a["rows"] == 384, a
    # (a backward row whose upstream gradient is 0, the first query's, takes 0 sweeps)
    assert a["sweeps_mean"] > 0.5 and a["sweeps_max"] >= 1, a
    assert a["unconverged"] == 0 and a["retried"] == 0, a
ev = [r for r in recs if r["event"] == "eval"]
assert all(r["approx"]["rows"] > 0 for r in ev), ev
EOF
    grep -Eq '"engine":[[:space:]]*"'$e'"' "$TMP/$e/run.json" && grep -q '"damping"' "$TMP/$e/run.json" &&
        ok || bad "$e: run.json lacks the engine's settings"
done

# --- hybrid: --band W is its window, the couplings stay full range
out=$("$BIN" train "${D[@]}" --attn boltzmann --couplings relative --engine hybrid --band 4 --T 40 \
    --steps 2 "${TINYV[@]}" --out "$TMP/hyb" 2>&1) && ok || bad "hybrid train failed: $out"
grep -qF "couplings=relative window=4 engine=hybrid" <<<"$out" && ok || bad "hybrid header: $out"
python3 - "$TMP/hyb/run.json" <<'EOF' && ok || bad "hybrid run.json: window 4, band 0 expected"
import json, sys
c = json.load(open(sys.argv[1]))["config"]
assert c["window"] == 4 and c["band"] == 0 and c["engine"] == "hybrid", c
EOF
# the relative couplings have every distance 1..T-1: [H, D] = [2, 39]
"$BIN" couplings --ckpt "$TMP/hyb/model.safetensors" --out "$TMP/hybj" >/dev/null 2>&1 &&
    [ "$(grep -c '^[0-9]' "$TMP/hybj/J_l0_h0.csv")" = 39 ] && ok ||
    bad "the hybrid model's relative couplings are not the 39 distances of T = 40"

# --- an exact-trained model evaluated with each approximate engine
"$BIN" train "${D[@]}" --attn boltzmann --T 10 --steps 3 "${TINYV[@]}" --quiet --out "$TMP/ex" ||
    bad "exact train failed"
exact=$("$BIN" eval --ckpt "$TMP/ex/model.safetensors" --items 8 2>&1) && ok || bad "exact eval: $exact"
for e in $("$BIN" engines --names --with approx); do
    out=$("$BIN" eval --ckpt "$TMP/ex/model.safetensors" --items 8 --engine $e 2>&1) && ok ||
        bad "eval --engine $e failed: $out"
    grep -qF "(engine $e" <<<"$out" && grep -qE "eval approx: [0-9]+ rows" <<<"$out" && ok ||
        bad "eval --engine $e does not say how it ran: $out"
done
# hybrid with a window of T - 1 is the exact model: the same loss to the printed digits
out=$("$BIN" eval --ckpt "$TMP/ex/model.safetensors" --items 8 --engine hybrid --window 9 2>&1)
l1=$(grep -oE 'loss [0-9.]+' <<<"$exact" | head -1); l2=$(grep -oE 'loss [0-9.]+' <<<"$out" | head -1)
[ -n "$l1" ] && [ "$l1" = "$l2" ] && ok || bad "hybrid window 9 at T = 10 is not exact: '$l1' vs '$l2'"
expect 2 "--window applies to the hybrid engine" -- "$BIN" eval --ckpt "$TMP/ex/model.safetensors" --engine mf --window 3
expect 2 "--damping 0: must be above 0" -- "$BIN" eval --ckpt "$TMP/ex/model.safetensors" --engine mf --damping 0

# --- non-convergence is reported, never silent: one sweep cannot reach 1e-12
out=$("$BIN" train "${D[@]}" --attn boltzmann --engine mf --max-iter 1 --tol 1e-12 --T 16 \
    --steps 2 "${TINYV[@]}" --out "$TMP/nc" 2>&1) && ok || bad "unconverged train failed: $out"
grep -qE "[0-9]+ of [0-9]+ attention rows did not converge" <<<"$out" && ok ||
    bad "no report of the unconverged rows: $out"
python3 - "$TMP/nc/metrics.jsonl" <<'EOF' && ok || bad "metrics.jsonl does not count the unconverged rows"
import json, sys
tr = [json.loads(l) for l in open(sys.argv[1])]
tr = [r for r in tr if r["event"] == "train"]
# step 1 starts from J = 0, where one sweep is the exact answer; step 2 cannot
assert tr and tr[0]["approx"]["unconverged"] == 0, tr
assert tr[-1]["approx"]["unconverged"] > 0 and tr[-1]["approx"]["retried"] > 0, tr
EOF

# --- a grid with an approximate engine: its settings in grid.json, the
# Ising arms' run configs carry them (softmax's do not), and a resumed grid
# keeps them
G="$TMP/grid"
GA=(--task brackets --attn softmax,boltzmann --T 6 --embd 8 --seeds 1 --steps 4 --batch 4
    --engine hybrid --window 2 --damping 0.25 --out "$G")
"$BIN" ablate "${GA[@]}" >/dev/null 2>"$TMP/gerr" && ok || bad "ablate with hybrid failed: $(cat "$TMP/gerr")"
python3 - "$G" <<'EOF' && ok || bad "grid.json or the runs lack the approximate settings"
import json, sys, glob, os
g = json.load(open(os.path.join(sys.argv[1], "grid.json")))
assert g["engine"] == "hybrid" and g["window"] == 2 and g["approx"]["damping"] == 0.25, g
runs = {os.path.basename(os.path.dirname(p)): json.load(open(p))["config"]
        for p in glob.glob(os.path.join(sys.argv[1], "runs", "*", "run.json"))}
assert len(runs) == 2, runs
for name, c in runs.items():
    if "boltzmann" in name:
        assert c["window"] == 2 and c["approx"]["damping"] == 0.25, c
    else:
        assert "approx" not in c, c
EOF
"$BIN" ablate "${GA[@]}" >/dev/null 2>&1 && ok || bad "the finished hybrid grid does not resume"
expect 2 "holds a finished run that is not this grid's cell" -- "$BIN" ablate "${GA[@]/0.25/0.5}"

echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
