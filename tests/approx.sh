#!/usr/bin/env bash
# Tests of `boltzattn-lab approx`: the accuracy.json of a small random run
# (every cell present, values in range, stats of the query's own row), the
# approximate engines exact in the limits where they must be (J tiny: every
# engine within 1e-3; hybrid with a window of at least n - 1: the exact
# marginals to 1e-9), and not exact where they should not be (mf at
# a = 0.25); the same numbers for the same seed, at any thread count and
# whatever other cells the run holds; a checkpoint's records beside the
# random cells (each run keeps the other's); the document regenerated from
# the JSON alone (tables, the probe comparison and its rule); its sections
# on training with the engines from tiny grids beside it (paired by seed
# with exact runs, every cell from the run records and engines.json,
# missing data said); and exit 2 with a message naming the value for bad
# options and for every malformed field of accuracy.json and engines.json
# (never a crash).
# usage: tests/approx.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab
set -u
BIN=${1:?usage: approx.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab}
LABBIN=${2:?usage: approx.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab}
. "$(dirname "$0")/lib.sh"
check() { if eval "$1" 2>/dev/null; then ok; else bad "$2"; fi; }
# py SCRIPT ARGS...: a python3 check, its failure message on stdout
py() { local s=$1; shift; python3 -c "$s" "$@"; }

# ------------------------------------------------------- random instances
D="$TMP/r"
expect 0 "wrote $D/accuracy.json" -- "$LABBIN" approx --n 8 --a 0.01,0.25 --instances 5 \
    --engines mf,tap,bp,hybrid --window 8 --out "$D"
out=$(py '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "boltzattn-approx" and d["version"] == 1, "format"
s = d["settings"]
assert s["instances"] == 5 and s["window"] == 8 and s["seed"] == "1", "settings"
assert s["command"].startswith("boltzattn-lab approx ") and "--instances 5" in s["command"], "command"
cells = {(c["engine"], c["n"], c["a"], c["bias"]): c for c in d["cells"]}
want = {(e, 8, a, b) for e in ("mf", "tap", "bp", "hybrid") for a in (0.01, 0.25)
        for b in ("none", "log-n")}
assert set(cells) == want and len(d["cells"]) == 16, "cells %s" % sorted(cells)
for k, c in cells.items():
    assert c["instances"] == 5 and c["stats_rows"] == 5, "counts of %s" % (k,)
    assert 0 <= c["worst_dw_mean"] <= c["worst_dw_p95"] + 1e-15 <= 1 + 1e-15, "dw of %s" % (k,)
    assert 0 <= c["kl_mean"] and 0 <= c["kl_p95"] and 0 <= c["worst_da_mean"] <= 1, "kl of %s" % (k,)
    assert 0 <= c["first_try"] <= c["converged"] <= 1, "rates of %s" % (k,)
    assert 1 <= c["sweeps_mean"] <= c["sweeps_max"], "sweeps of %s" % (k,)
    if k[2] == 0.01:
        assert c["worst_dw_mean"] < 1e-3, "J tiny: %s mean worst |dw| %g" % (k, c["worst_dw_mean"])
    if k[0] == "hybrid":
        assert c["worst_dw_p95"] < 1e-9 and c["kl_p95"] < 1e-9, "hybrid W >= n-1 not exact: %s %g" % (k, c["worst_dw_p95"])
m = cells[("mf", 8, 0.25, "none")]["worst_dw_mean"]
assert m > 1e-3, "mf at a = 0.25 is within %g of exact: the comparison is vacuous" % m
print("ok")
' "$D/accuracy.json" 2>&1)
check '[ "$out" = ok ]' "accuracy.json of the small run: $out"

# the same seed gives the same cells, at one thread or two, and a cell does
# not depend on the other cells of the run (each instance has its own stream)
same_cells() { py '
import json, sys
a = {(c["engine"], c["n"], c["a"], c["bias"]): c for c in json.load(open(sys.argv[1]))["cells"]}
b = {(c["engine"], c["n"], c["a"], c["bias"]): c for c in json.load(open(sys.argv[2]))["cells"]}
assert b and all(a[k] == v for k, v in b.items()), "differ"
' "$1" "$2"; }
OMP_NUM_THREADS=1 "$LABBIN" approx --n 8 --a 0.01,0.25 --instances 5 --engines mf,tap,bp,hybrid \
    --out "$TMP/r1" >/dev/null 2>&1
check 'same_cells "$D/accuracy.json" "$TMP/r1/accuracy.json" && same_cells "$TMP/r1/accuracy.json" "$D/accuracy.json"' \
    "same seed, one thread: different cells"
"$LABBIN" approx --n 8 --a 0.25 --bias log-n --instances 5 --engines tap --out "$TMP/r2" >/dev/null 2>&1
check 'same_cells "$D/accuracy.json" "$TMP/r2/accuracy.json"' \
    "a cell run alone differs from the same cell in a larger run"
"$LABBIN" approx --n 8 --a 0.25 --instances 5 --seed 2 --engines mf --out "$TMP/r3" >/dev/null 2>&1
check '! same_cells "$D/accuracy.json" "$TMP/r3/accuracy.json"' "another seed gave the same cells"
# band (the band alone) and hybrid at a window below n - 1 are not exact
expect 0 "" -- "$LABBIN" approx --n 10 --a 0.5 --bias none --instances 4 --engines hybrid,band \
    --window 3 --out "$TMP/w"
out=$(py '
import json, sys
c = {x["engine"]: x for x in json.load(open(sys.argv[1]))["cells"]}
assert c["band"]["worst_dw_mean"] > 1e-3 and c["hybrid"]["worst_dw_mean"] > 1e-6, "exact"
assert c["band"]["sweeps_mean"] is None and c["band"]["converged"] == 1, "band stats"
print("ok")' "$TMP/w/accuracy.json" 2>&1)
check '[ "$out" = ok ]' "window 3 at n = 10: $out"

# ------------------------------------------------------------ checkpoint
T=6
expect 0 "final:" -- "$BIN" train --task brackets --attn boltzmann --T $T --embd 16 --heads 2 \
    --steps 5 --batch 4 --j-init-std 0.3 --quiet --out "$TMP/m"
expect 0 "fields check: the instances' exact weights match the model's attention" -- "$LABBIN" \
    approx --ckpt "$TMP/m/model.safetensors" --instances 3 --out "$D"
out=$(py '
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["cells"]) == 16, "the random cells were not kept"
r = d["checkpoints"]
assert sorted(x["engine"] for x in r) == ["bp", "hybrid", "mf", "tap"], "engines"
for x in r:
    assert x["label"] == "m" and x["n"] == 6 and x["T"] == 6 and x["bias"] == "none", "keys"
    assert x["items"] == 3 and x["heads"] == 2 and x["instances"] == 6, "counts"
    assert x["settings"]["window"] == 8, "settings"
    if x["engine"] == "hybrid":
        assert x["worst_dw_p95"] < 1e-9, "hybrid not exact on the checkpoint"
print("ok")' "$D/accuracy.json" 2>&1)
check '[ "$out" = ok ]' "checkpoint records: $out"
# again with --n: records of another n are added, the same ones replaced
expect 0 "" -- "$LABBIN" approx --ckpt "$TMP/m/model.safetensors" --n 4,6 --instances 2 \
    --engines mf --out "$D"
check 'py "import json,sys; r=json.load(open(sys.argv[1]))[\"checkpoints\"]; assert len(r)==5 and sum(x[\"engine\"]==\"mf\" and x[\"items\"]==2 for x in r)==2" "$D/accuracy.json"' \
    "checkpoint records were not merged by (label, engine, n)"
# a random run keeps the checkpoint records
"$LABBIN" approx --n 8 --a 0.01,0.25 --instances 5 --engines mf,tap,bp,hybrid --out "$D" >/dev/null 2>&1
check 'py "import json,sys; d=json.load(open(sys.argv[1])); assert len(d[\"checkpoints\"])==5 and len(d[\"cells\"])==16" "$D/accuracy.json"' \
    "a random run dropped the checkpoint records"
expect 0 "" -- "$BIN" train --task brackets --attn softmax --T $T --embd 16 --steps 2 --batch 4 \
    --quiet --out "$TMP/s"
expect 2 "has no couplings J" -- "$LABBIN" approx --ckpt "$TMP/s/model.safetensors" --out "$TMP/x"
expect 2 "--n 7" -- "$LABBIN" approx --ckpt "$TMP/m/model.safetensors" --n 7 --out "$TMP/x"
expect 2 "--a does not apply with --ckpt" -- "$LABBIN" approx --ckpt "$TMP/m/model.safetensors" \
    --a 1 --out "$TMP/x"

# ------------------------------------------------------------- document
DOC="$TMP/approximate.md"
expect 0 "wrote $DOC" -- "$LABBIN" approx --doc "$DOC" --from "$D"
check 'grep -qF "## Random instances, bias none" "$DOC" && grep -qF "## Random instances, bias log-n" "$DOC"' \
    "document lacks a section per bias"
check 'grep -qF "| engine | a | n = 8 | conv. |" "$DOC" && grep -qE "^\| mf \| 0\.01 \| [0-9.e-]+ \([0-9.e-]+\) \| [0-9.]+ % \|$" "$DOC"' \
    "document lacks the |dw| table or its mf row"
check 'grep -qF "KL(exact ‖ approx)" "$DOC" && grep -qF "## Trained checkpoints" "$DOC" && grep -qE "^\| m \| boltzmann \|" "$DOC"' \
    "document lacks the KL or checkpoint table"
check 'grep -qF "## Against the spec'"'"'s probe" "$DOC" && grep -qF "within ±25 %" "$DOC" && grep -qF "not in the data" "$DOC"' \
    "document lacks the probe comparison, its rule, or the note on missing cells"
check 'grep -qF "approx --doc $DOC --from $D" "$DOC"' "document lacks the command that regenerates it"
cp "$DOC" "$TMP/doc1"
"$LABBIN" approx --doc "$DOC" --from "$D" >/dev/null 2>&1
check 'cmp -s "$DOC" "$TMP/doc1"' "the document is not the same when regenerated"
# the probe rule on known numbers: n = 16 cells written by hand
mkdir -p "$TMP/p"
py '
import json, sys
def cell(e, a, b, dw, da, conv=1.0, first=1.0):
    return {"engine": e, "n": 16, "a": a, "bias": b, "instances": 100, "stats_rows": 100,
            "worst_dw_mean": dw, "worst_dw_p95": 2 * dw, "kl_mean": 0.01, "kl_p95": 0.02,
            "worst_da_mean": da, "worst_da_p95": 2 * da, "converged": conv, "first_try": first,
            "unconverged": 0, "retried": 0, "sweeps_mean": 50, "sweeps_max": 90}
cells = [cell("mf", 0.25, "none", 0.17, 0.023), cell("mf", 1, "none", 0.5, 0.018),
         cell("tap", 1, "none", 0.2, 0.02, 1.0, 0.12)]
s = {"command": "boltzattn approx --out X", "oracle": "fast", "window": 8, "damping": 0.5,
     "tol": 1e-8, "max_iter": 1000, "instances": 100, "seed": "1", "engines": ["mf", "tap"],
     "n": [16], "a": [0.25, 1], "bias": ["none"], "p95": "x"}
json.dump({"format": "boltzattn-approx", "version": 1, "cells": cells, "checkpoints": [],
           "settings": s}, open(sys.argv[1], "w"))' "$TMP/p/accuracy.json"
expect 0 "" -- "$LABBIN" approx --doc "$TMP/p.md" --from "$TMP/p"
check 'grep -qF -- "- mf, a = 0.25, no shift: worst |Δw| 0.17 vs 0.16: agrees; worst |Δa| 0.023 vs 0.023: agrees." "$TMP/p.md"' \
    "probe rule: mf at a = 0.25 not 'agrees'"
check 'grep -qF -- "- mf, a = 1, no shift: worst |Δw| 0.5 vs 0.14: higher (x3.6)" "$TMP/p.md"' \
    "probe rule: mf at a = 1 not 'higher (x3.6)'"
check 'grep -qF -- "converged on the first try 12 % vs 10 %: agrees (after the library'"'"'s retry: 100 %)" "$TMP/p.md"' \
    "probe rule: tap's convergence"
check 'grep -qF "4 of the 5 probe numbers compared agree" "$TMP/p.md"' "probe rule: the count"

# ------------------------------------ document: training with the engines
# A study directory with grids trained by tiny real ablate runs: at T = 12
# mf (2 seeds), hybrid (1 seed: one pair) and tap (seed 5: no exact run of
# that seed) paired with the exact runs of --exact-from (where a grid of
# other settings, sorted first, must not pair); at T = 20 an exact grid and
# mf beside it, and the exact grid's engines.json (mf and hybrid; tap and
# bp absent); bp has no grid at either T.
for i in $(seq 1 300); do echo "the quick brown fox $i jumps over the lazy dog, said KING HENRY."; done >"$TMP/text.txt"
TA=(--task charlm --embd 8 --steps 6 --batch 4 --eval-every 0 --data "$TMP/text.txt")
E="$TMP/e"
X="$TMP/full"
mkdir -p "$E" && cp "$D/accuracy.json" "$E/"
grids_ok=1
"$BIN" ablate "${TA[@]}" --attn softmax,boltzmann --seeds 3 --T 12 --out "$X/charlm" >/dev/null 2>&1 || grids_ok=0
"$BIN" ablate "${TA[@]}" --steps 7 --attn boltzmann --seeds 3 --T 12 --out "$X/a-other" >/dev/null 2>&1 || grids_ok=0
"$BIN" ablate "${TA[@]}" --attn boltzmann --seeds 2 --T 12 --engine mf --out "$E/charlm-T12-mf" >/dev/null 2>&1 || grids_ok=0
"$BIN" ablate "${TA[@]}" --attn boltzmann --seeds 1 --T 12 --engine hybrid --out "$E/charlm-T12-hybrid" >/dev/null 2>&1 || grids_ok=0
"$BIN" ablate "${TA[@]}" --attn boltzmann --seeds 1 --seed0 5 --T 12 --engine tap --out "$E/charlm-T12-tap" >/dev/null 2>&1 || grids_ok=0
"$BIN" ablate "${TA[@]}" --attn boltzmann --seeds 2 --T 20 --out "$E/charlm-T20-fast" >/dev/null 2>&1 || grids_ok=0
"$BIN" ablate "${TA[@]}" --attn boltzmann --seeds 2 --T 20 --engine mf --out "$E/charlm-T20-mf" >/dev/null 2>&1 || grids_ok=0
"$LABBIN" eval-engines --out "$E/charlm-T20-fast" --engines mf,hybrid --items 5 >/dev/null 2>&1 || grids_ok=0
# and a brackets grid with its engines.json: a table of its own, after charlm's
"$BIN" ablate --task brackets --attn boltzmann --T 6 --embd 4 --steps 5 --batch 4 --seeds 1 \
    --out "$E/brackets-T6-fast" >/dev/null 2>&1 || grids_ok=0
"$LABBIN" eval-engines --out "$E/brackets-T6-fast" --engines mf >/dev/null 2>&1 || grids_ok=0
check '[ $grids_ok = 1 ]' "the study's grids were not made"
TDOC="$TMP/train.md"
expect 0 "and the grids' training sections" -- "$LABBIN" approx --doc "$TDOC" --from "$E" --exact-from "$X"
out=$(py '
import json, math, sys
E, X, doc = sys.argv[1:4]
md = open(doc).read()
t975 = {1: 12.7062, 2: 4.3027}
def ppl(grid, name):
    return json.load(open("%s/runs/%s/run.json" % (grid, name)))["result"]["val_ppl"]
def nz(x): return 0.0 if abs(x) < 0.005 else x
def msd(v):
    m = sum(v) / len(v)
    if len(v) == 1: return "%.3f (one run)" % m
    return "%.3f ± %.3f" % (m, math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)))
def change(d):
    m = sum(d) / len(d)
    if len(d) == 1: return "%+.2f %% (one pair; interval n/a)" % nz(m)
    h = t975[len(d) - 1] * math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1)) / math.sqrt(len(d))
    return "%+.2f %% [%+.2f, %+.2f]" % (nz(m), nz(m - h), nz(m + h))
def row(label, grid, T, seeds, engine, exact_grid):
    v = [ppl("%s/%s" % (E, grid), "charlm-T%d-C8-ffn1-boltzmann-s%d" % (T, s)) for s in seeds]
    ex = [ppl(exact_grid, "charlm-T%d-C8-ffn1-boltzmann-s%d" % (T, s)) for s in seeds]
    d = [100 * (a / b - 1) for a, b in zip(v, ex)]
    r = "| %s | `%s` | %d of %d | %s | %.3f (%d pair%s) | %s | 6 × 4 |" % (
        label, grid, len(seeds), len(seeds), msd(v), sum(ex) / len(ex), len(ex),
        "" if len(ex) == 1 else "s", change(d))
    assert r in md, "row missing: " + r
row("mf", "charlm-T12-mf", 12, [1, 2], "mf", X + "/charlm")
row("hybrid, W = 8", "charlm-T12-hybrid", 12, [1], "hybrid", X + "/charlm")
row("mf", "charlm-T20-mf", 20, [1, 2], "mf", E + "/charlm-T20-fast")
tap = ppl(E + "/charlm-T12-tap", "charlm-T12-C8-ffn1-boltzmann-s5")
for r in ["| tap | `charlm-T12-tap` | 1 of 1 | %.3f (one run) | no exact run of these seeds | n/a | 6 × 4 |" % tap,
          # the exact runs of the seeds of every row: 1, 2 (5 has none)
          "| exact (fast) | `%s/charlm` | 2 of 3 | %s | – | (the reference) | 6 × 4 |"
          % (X, msd([ppl(X + "/charlm", "charlm-T12-C8-ffn1-boltzmann-s%d" % s) for s in (1, 2)])),
          "| exact (fast) | `charlm-T20-fast` | 2 of 2 | %s | – | (the reference) | 6 × 4 |"
          % msd([ppl(E + "/charlm-T20-fast", "charlm-T20-C8-ffn1-boltzmann-s%d" % s) for s in (1, 2)]),
          "| bp | no grid | – | no data | – | no data | – |",
          "| hybrid | no grid | – | no data | – | no data | – |",
          "The exact-trained runs are those of `%s/charlm` (" % X,
          "No exact-trained grid at T = 12 in `%s`: no data." % E,
          "From `charlm-T20-fast/engines.json`.",
          "| tap | no entry | – | 0 | no data | no data | n/a | – | – |"]:
    assert r in md, "missing: " + r
assert "a-other" not in md, "a grid of other settings was paired"
es = [e for e in json.load(open(E + "/charlm-T20-fast/engines.json"))["entries"] if e["engine"] == "mf"]
w = [e["with"]["val_ppl"] for e in es]; o = [e["own"]["val_ppl"] for e in es]
rows = sum(e["stats"]["rows"] for e in es); unc = sum(e["stats"]["unconverged"] for e in es)
sw = sum(e["stats"]["sweeps_mean"] * e["stats"]["rows"] for e in es) / rows
r = "| mf | damping 0.5, tol 1e-08, max-iter 1000 | 5 | 2 | %.3f | %.3f | %s | %d of %d | %.1f |" % (
    sum(w) / 2, sum(o) / 2, change([100 * (a / b - 1) for a, b in zip(w, o)]), unc, rows, sw)
assert r in md, "evaluation row missing: " + r
assert "| hybrid (W = 8) | damping 0.5, tol 1e-08, max-iter 1000 | 5 | 2 |" in md, "hybrid evaluation row"
assert md.index("### T = 12") < md.index("### T = 20"), "order of T"
b = md.index("### brackets, T = 6\n\nFrom `brackets-T6-fast/engines.json`.")
assert b > md.rindex("### T = 20"), "the brackets table is not after the charlm ones"
e = json.load(open(E + "/brackets-T6-fast/engines.json"))["entries"]
assert len(e) == 1 and e[0]["engine"] == "mf", "brackets engines.json"
r = "| mf | damping 0.5, tol 1e-08, max-iter 1000 | all | 1 | %.3f | %.3f |" % (e[0]["with"]["val_ppl"], e[0]["own"]["val_ppl"])
assert r in md[b:], "brackets evaluation row missing: " + r
assert "brackets-T6" not in md[:b], "a brackets grid entered the charlm sections"
print("ok")' "$E" "$X" "$TDOC" 2>&1)
check '[ "$out" = ok ]' "training sections: $out"
cp "$TDOC" "$TMP/train1.md"
"$LABBIN" approx --doc "$TDOC" --from "$E" --exact-from "$X" >/dev/null 2>&1
check 'cmp -s "$TDOC" "$TMP/train1.md"' "the training sections are not the same when regenerated"
check '! grep -q "Training with each engine" "$DOC"' "a directory without grids got the training sections"
# no --exact-from, and no results/full where it runs: the T = 12 pairs are
# said to be missing, the T = 20 ones (the directory's own) are there
(cd "$TMP" && "$LABBIN" approx --doc "$TMP/train2.md" --from "$E" >/dev/null 2>&1)
check 'grep -qF "| exact | none: no exact grid at T = 12 in \`$E\`, and no run in \`results/full\` of the same model, data, settings and seeds |" "$TMP/train2.md" &&
    grep -qE "^\| mf \| \`charlm-T12-mf\` \| 2 of 2 \| [0-9.]+ ± [0-9.]+ \| no exact run of these seeds \| n/a \| 6 × 4 \|$" "$TMP/train2.md" &&
    grep -qE "^\| mf \| \`charlm-T20-mf\` \| 2 of 2 \| [0-9.]+ ± [0-9.]+ \| [0-9.]+ \(2 pairs\) \|" "$TMP/train2.md"' \
    "without exact runs to pair with: the cells do not say so"
# no engines.json yet
mv "$E/charlm-T20-fast/engines.json" "$TMP/engines.json"
"$LABBIN" approx --doc "$TMP/train3.md" --from "$E" --exact-from "$X" >/dev/null 2>&1
check 'grep -qF "\`charlm-T20-fast\` has no engines.json yet: no data" "$TMP/train3.md"' "a missing engines.json is not said"
# a damaged engines.json is bad input naming the field
py '
import json, sys
d = json.load(open(sys.argv[1]))
del d["entries"][0]["with"]
json.dump(d, open(sys.argv[2], "w"))' "$TMP/engines.json" "$E/charlm-T20-fast/engines.json"
expect 2 "engines.json: field entries[0].with is missing or malformed" -- "$LABBIN" approx --doc "$TMP/x.md" --from "$E" --exact-from "$X"
echo '{"format":"boltzattn-engine-eval","version":1,"entries":[{"engine":"warp"}]}' >"$E/charlm-T20-fast/engines.json"
expect 2 "field entries[0].engine is missing or malformed" -- "$LABBIN" approx --doc "$TMP/x.md" --from "$E" --exact-from "$X"
mv "$TMP/engines.json" "$E/charlm-T20-fast/engines.json"
expect 2 "--exact-from needs --doc" -- "$LABBIN" approx --exact-from "$X" --out "$TMP/x"
expect 2 "--exact-from must not be empty" -- "$LABBIN" approx --doc "$TMP/x.md" --from "$E" --exact-from ""

# ------------------------------------------------------------- bad input
expect 2 "--n: 21" -- "$LABBIN" approx --n 8,21 --out "$TMP/x"
expect 2 "--n: 1 " -- "$LABBIN" approx --n 1 --out "$TMP/x"
expect 2 "'8,x'" -- "$LABBIN" approx --n 8,x --out "$TMP/x"
expect 2 "'0.1,zz'" -- "$LABBIN" approx --a 0.1,zz --out "$TMP/x"
expect 2 "unknown engine 'foo'" -- "$LABBIN" approx --engines mf,foo --out "$TMP/x"
expect 2 "unknown engine 'fast'" -- "$LABBIN" approx --engines fast --out "$TMP/x"
expect 2 "'mf' is listed twice" -- "$LABBIN" approx --engines mf,mf --out "$TMP/x"
expect 2 "unknown bias 'logn'" -- "$LABBIN" approx --bias logn --out "$TMP/x"
expect 2 "--window: 0" -- "$LABBIN" approx --window 0 --out "$TMP/x"
expect 2 "--window: 17" -- "$LABBIN" approx --window 17 --out "$TMP/x"
expect 2 "--damping: 0 is outside (0, 1]" -- "$LABBIN" approx --damping 0 --out "$TMP/x"
expect 2 "--damping: 1.5 is outside (0, 1]" -- "$LABBIN" approx --damping 1.5 --out "$TMP/x"
expect 2 "--tol: 0 is not above 0" -- "$LABBIN" approx --tol 0 --out "$TMP/x"
expect 2 "--tol: -1e-08 is not above 0" -- "$LABBIN" approx --tol -1e-8 --out "$TMP/x"
expect 2 "--max-iter: 0" -- "$LABBIN" approx --max-iter 0 --out "$TMP/x"
expect 2 "option '--out' is required" -- "$LABBIN" approx --n 8
expect 2 "--doc needs --from" -- "$LABBIN" approx --doc "$TMP/x.md"
expect 2 "--from needs --doc" -- "$LABBIN" approx --from "$D"
expect 2 "--n does not apply with --doc" -- "$LABBIN" approx --doc "$TMP/x.md" --from "$D" --n 8
expect 2 "$TMP/x/accuracy.json" -- "$LABBIN" approx --doc "$TMP/x.md" --from "$TMP/x"
touch "$TMP/file"
expect 2 "--out $TMP/file: exists and is not a directory" -- "$LABBIN" approx --out "$TMP/file"
expect 2 "not a regular file" -- "$LABBIN" approx --doc /dev/null --from "$D"
expect 2 "would destroy the input" -- "$LABBIN" approx --doc "$D/accuracy.json" --from "$D"
mkdir -p "$TMP/j"
echo '{"format":"boltzattn-approx","version":1,"cells":[' >"$TMP/j/accuracy.json"
expect 2 "is not valid JSON" -- "$LABBIN" approx --doc "$TMP/x.md" --from "$TMP/j"
# an existing file that is not an approx record is not replaced
echo '{"x": 1}' >"$TMP/j/accuracy.json"
expect 2 "not an approx record; not replacing it" -- "$LABBIN" approx --n 3 --instances 1 --out "$TMP/j"
check 'grep -qF "\"x\": 1" "$TMP/j/accuracy.json"' "a foreign accuracy.json was replaced"
# every field of a record and of the settings removed, or of the wrong type:
# exit 2 naming it (null is a measure that was not finite: accepted there)
py '
import json, sys, os, copy
d = json.load(open(sys.argv[1]))
d["cells"] = d["cells"][:1]
d["checkpoints"] = d["checkpoints"][:1]
out = sys.argv[2]
k = 0
def emit(x, where):
    global k
    os.makedirs("%s/%d" % (out, k))
    json.dump(x, open("%s/%d/accuracy.json" % (out, k), "w"))
    open("%s/%d/where" % (out, k), "w").write(where)
    k += 1
for part in ("cells", "checkpoints"):
    for key in d[part][0]:
        if key in ("unconverged", "retried", "path"):
            continue  # counts the document does not read
        for bad in ("drop", "str", "list", "big"):
            if bad == "str" and key in ("label", "variant", "model_engine"):
                continue  # any string will do there
            x = copy.deepcopy(d)
            if bad == "drop": del x[part][0][key]
            else: x[part][0][key] = {"str": "1", "list": [1], "big": 1e300}[bad]
            if bad == "big" and key in ("worst_dw_mean", "worst_dw_p95", "kl_mean",
                "kl_p95", "worst_da_mean", "worst_da_p95", "sweeps_mean", "sweeps_max"):
                continue  # large but valid
            emit(x, "%s[0].%s" % (part, "settings" if key == "settings" else key))
for key in ("instances", "window", "max_iter", "damping", "tol", "seed", "command"):
    x = copy.deepcopy(d); del x["settings"][key]; emit(x, "settings." + key)
for key in ("format", "version", "cells", "checkpoints"):
    x = copy.deepcopy(d); x[key] = "zz"; emit(x, key)
emit([1, 2], "format")
emit("text", "format")
' "$D/accuracy.json" "$TMP/mal"
nmal=0
for m in "$TMP"/mal/*/; do
    where=$(cat "$m/where")
    expect 2 "field $where is missing or malformed" -- "$LABBIN" approx --doc "$m/d.md" --from "$m"
    nmal=$((nmal + 1))
done
check '[ $nmal -gt 60 ]' "only $nmal malformed files were tried"

expect 0 "usage: boltzattn-lab approx" -- "$LABBIN" approx --help
expect 0 "approx   accuracy of the approximate engines" -- "$LABBIN" --help
expect 2 "unknown command 'approx'" -- "$BIN" approx --help

echo "approx.sh: $pass passed, $failed failed"
[ $failed -eq 0 ]
