#!/usr/bin/env bash
# boltzattn-lab eval-engines on a tiny brackets grid (T = 6; softmax, boltzmann,
# boltzmann with a band 2): every Ising run evaluated with its own engine
# and with mf and hybrid into engines.json (the banded model refused by
# hybrid with the library's reason; softmax left alone); hybrid with its
# default window T - 1 = 5 gives the exact loss; the own evaluation is the
# run's final one; a rerun adds nothing; another window or item count adds
# its own entries; a clone without a checkpoint skips that run with a note;
# a grid without Ising arms has nothing to evaluate; the engine options are
# refused where the list has no engine they apply to (exit 2).
# usage: tests/engine_eval.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab
set -u
BIN=${1:?usage: engine_eval.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab}
LABBIN=${2:?usage: engine_eval.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab}
. "$(dirname "$0")/lib.sh"
check() { if eval "$1" 2>/dev/null; then ok; else bad "$2"; fi; }
py() { local s=$1; shift; python3 -c "$s" "$@"; }

G="$TMP/g"
expect 0 "results: $G/results.csv" -- "$BIN" ablate --task brackets --arm softmax,boltzmann,boltzmann+band2 \
    --T 6 --embd 8 --seeds 2 --steps 5 --batch 4 --out "$G"
expect 0 "engine evaluation (mf, hybrid): 6 evaluated, 2 refused, 0 kept, 0 skipped (no checkpoint); wrote $G/engines.json" -- \
    "$LABBIN" eval-engines --out "$G" --engines mf,hybrid
out=$(py '
import json, sys
g = sys.argv[1]
d = json.load(open(g + "/engines.json"))
assert d["format"] == "boltzattn-engine-eval" and d["version"] == 1, "format"
es = d["entries"]
key = {(e["run"], e["engine"]): e for e in es}
runs = ["brackets-T6-C8-ffn1-%s-s%d" % (v, s) for v in ("boltzmann", "boltzmann-W2") for s in (1, 2)]
assert len(es) == 8 and set(key) == {(r, e) for r in runs for e in ("mf", "hybrid")}, "entries %s" % sorted(key)
for (run, eng), e in key.items():
    assert e["T"] == 6 and e["C"] == 8 and e["ffn"] == 1 and e["items"] == 0 and e["batch"] == 4, "keys of %s" % run
    assert e["approx"] == {"damping": 0.5, "tol": 1e-8, "max_iter": 1000}, "approx of %s" % run
    assert e["window"] == (5 if eng == "hybrid" else 0), "window of %s %s" % (run, eng)
    if "W2" in run and eng == "hybrid":
        assert e["status"] == "refused" and "hybrid engine takes full-range couplings" in e["reason"], "refusal"
        assert "own" not in e and "with" not in e, "a refused entry has results"
        continue
    assert e["status"] == "done", "status of %s %s" % (run, eng)
    assert e["own_engine"] == ("band" if "W2" in run else "fast"), "own engine of %s" % run
    own, w, st = e["own"], e["with"], e["stats"]
    assert own["items"] == w["items"] > 0 and own["targets"] == w["targets"] > 0, "counts"
    # the own evaluation (every item, the grid batch) is the run final one
    final = json.load(open("%s/runs/%s/run.json" % (g, run)))["result"]["val_loss"]
    assert abs(own["val_loss"] - final) <= 1e-9 * abs(final), "own %r vs final %r" % (own["val_loss"], final)
    assert st["rows"] > 0 and 1 <= st["sweeps_mean"] <= st["sweeps_max"] and st["unconverged"] == 0, "stats %s" % st
    if eng == "hybrid":  # a window of T - 1 covers every coupling: exact
        assert abs(w["val_loss"] - own["val_loss"]) <= 1e-6, "hybrid W = 5: %r vs exact %r" % (w["val_loss"], own["val_loss"])
print("ok")' "$G" 2>&1)
check '[ "$out" = ok ]' "engines.json: $out"

cp "$G/engines.json" "$TMP/e1.json"
expect 0 "engine evaluation (mf, hybrid): 0 evaluated, 0 refused, 8 kept, 0 skipped (no checkpoint)" -- \
    "$LABBIN" eval-engines --out "$G" --engines mf,hybrid
check 'cmp -s "$G/engines.json" "$TMP/e1.json"' "a rerun changed engines.json"
# another window, item count or engine setting is another entry
expect 0 "engine evaluation (hybrid): 2 evaluated, 2 refused, 0 kept" -- \
    "$LABBIN" eval-engines --out "$G" --engines hybrid --window 3 --items 2 --batch 2
expect 0 "engine evaluation (mf): 4 evaluated, 0 refused, 0 kept" -- \
    "$LABBIN" eval-engines --out "$G" --engines mf --damping 0.3
out=$(py '
import json, sys
es = json.load(open(sys.argv[1]))["entries"]
assert len(es) == 16, "%d entries" % len(es)
w3 = [e for e in es if e["window"] == 3]
assert len(w3) == 4 and all(e["items"] == 2 and e["batch"] == 2 for e in w3), "window 3 entries"
assert all(e["with"]["items"] == 2 for e in w3 if e["status"] == "done"), "items of window 3"
d3 = [e for e in es if e["approx"] and e["approx"]["damping"] == 0.3]
assert sorted(e["engine"] for e in d3) == ["mf"] * 4, "damping 0.3: %s" % [(e["engine"], e["status"]) for e in d3]
print("ok")' "$G/engines.json" 2>&1)
check '[ "$out" = ok ]' "keyed entries: $out"

# a clone without one checkpoint: that run skipped with a note, the
# refusals (judged on the config) still recorded
G2="$TMP/clone"
cp -r "$G" "$G2" && rm "$G2/engines.json" "$G2/runs/brackets-T6-C8-ffn1-boltzmann-s2/model.safetensors"
expect 0 "engine evaluation (mf, hybrid): 4 evaluated, 2 refused, 0 kept, 2 skipped (no checkpoint)" -- \
    "$LABBIN" eval-engines --out "$G2" --engines mf,hybrid
expect 0 "brackets-T6-C8-ffn1-boltzmann-s2: no checkpoint (" -- "$LABBIN" eval-engines --out "$G2" --engines tap

# nothing to evaluate, bad usage, a damaged file
S="$TMP/s"
"$BIN" ablate --task brackets --attn softmax --T 6 --embd 8 --seeds 1 --steps 3 --batch 4 --out "$S" >/dev/null 2>&1
expect 0 "no boltzmann or coupling arm with exact inference: nothing to evaluate" -- \
    "$LABBIN" eval-engines --out "$S" --engines mf,hybrid
check '[ ! -e "$S/engines.json" ]' "a grid with nothing to evaluate got engines.json"
expect 2 "--engines: unknown engine 'meanfield'" -- "$LABBIN" eval-engines --out "$G" --engines mf,meanfield
expect 2 "'mf' is listed twice" -- "$LABBIN" eval-engines --out "$G" --engines mf,mf
expect 2 "--window is the hybrid engine's window, and --engines does not list hybrid" -- \
    "$LABBIN" eval-engines --out "$G" --engines mf,tap --window 3
expect 2 "--tol applies to the approximate engines (mf, tap, bp, hybrid), and --engines lists none" -- \
    "$LABBIN" eval-engines --out "$G" --engines fast,reference --tol 1e-6
expect 2 "unknown option '--engine'" -- "$LABBIN" eval-engines --out "$G" --engines mf --engine mf
expect 2 "unknown option '--T'" -- "$LABBIN" eval-engines --out "$G" --engines mf --T 6
expect 2 "--damping 0: must be above 0" -- "$LABBIN" eval-engines --out "$G" --engines mf --damping 0
expect 2 "option '--engines' is required" -- "$LABBIN" eval-engines --out "$G" --items 2
expect 2 "unknown option '--eval-engines'" -- "$BIN" ablate --out "$G" --eval-engines mf
expect 2 "not a grid of 'boltzattn ablate'" -- "$LABBIN" eval-engines --out "$TMP/nogrid" --engines mf
echo '{"format":"boltzattn-engine-eval","entries":[{"run":"x","status":"done"}]}' >"$G2/engines.json"
expect 2 "is not an engine evaluation file of this tool (format boltzattn-engine-eval, entries with run, status, engine, window, approx and items)" -- \
    "$LABBIN" eval-engines --out "$G2" --engines mf
check 'grep -q "\"run\":\"x\"" "$G2/engines.json"' "a damaged engines.json was replaced"
expect 0 "--engines LIST" -- "$LABBIN" eval-engines --help

echo "engine_eval.sh: $pass passed, $failed failed"
[ $failed -eq 0 ]
