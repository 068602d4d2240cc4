#!/bin/sh
# The demo of `make run`: softmax and boltzmann attention trained side by
# side on the brackets task (no data file needed), a short comparison with
# its caveat, and a picture of the learning curves.
#
# usage: examples/demo.sh [BIN [OUT]]   (defaults: build/boltzattn, runs/demo)
#        SEEDS=N examples/demo.sh ...   seeds per arm (default 8)
#
# The cell (T = 16, C = 8, attention only, 2000 steps) is the one of the
# committed quick grid (results/quick/brackets) where the two arms differ at
# a budget of about a minute on 2 cores; the committed longer runs of the
# same cell (results/full/brackets-width) are quoted as the caveat. Nothing
# below is typed by hand: the numbers come from the runs' summary and from
# the committed summary.
set -eu

BIN=${1:-build/boltzattn}
OUT=${2:-runs/demo}
SEEDS=${SEEDS:-8}
LONG=results/full/brackets-width/summary.md
CELL="T = 16, C = 8, without FFN"

[ -x "$BIN" ] || { echo "demo: $BIN not found (build first: make build)" >&2; exit 1; }
case $SEEDS in '' | *[!0-9]*) echo "demo: SEEDS must be a number" >&2; exit 2 ;; esac
if [ -e "$OUT" ] && [ ! -f "$OUT/grid.json" ]; then
    echo "demo: $OUT exists and is not a grid directory; not touching it" >&2
    exit 1
fi
rm -rf "$OUT" # a fresh grid each time (ablate would keep finished runs)

echo "brackets (which ')' closes which '(': held-out accuracy, higher is better),"
echo "T = 16, width C = 8, attention only, 2000 steps: softmax vs boltzmann, $SEEDS seeds each"
"$BIN" ablate --task brackets --attn softmax,boltzmann --T 16 --embd 8 --no-ffn \
    --steps 2000 --seeds "$SEEDS" --out "$OUT"

# The rows of one cell of a summary.md: "variant|runs|mean ± sd|effect [CI]".
rows() {
    awk -v cell="## $2" '
        $0 == cell { on = 1; next }
        on && /^## / { exit }
        on && /^Held-out set:/ { sub(/^Held-out set: /, ""); sub(/\.$/, ""); print "set|" $0 }
        on && /^\| (softmax|boltzmann) \|/ {
            n = split($0, f, "|")
            for (i = 2; i <= 5; i++) gsub(/^ +| +$/, "", f[i])
            print f[2] "|" f[3] "|" f[4] "|" f[5]
        }' "$1"
}

here=$(rows "$OUT/summary.md" "$CELL")
echo
echo "$here" | awk -F'|' -v seeds="$SEEDS" '
    $1 == "set" { print "held-out set: " $2 "; mean ± sd over " seeds " seeds:"; next }
    $1 == "softmax" { printf "  %-10s %s %%\n", $1, $3 }
    $1 == "boltzmann" {
        printf "  %-10s %s %%   boltzmann - softmax, paired by seed: %s points (95 %% CI)\n", $1, $3, $4
        ci = $4; sub(/^[^[]*\[/, "", ci); sub(/\].*$/, "", ci); split(ci, b, ", ")
        if (b[1] + 0 > 0) v = "boltzmann is ahead at this budget"
        else if (b[2] + 0 < 0) v = "softmax is ahead at this budget"
        else v = "no resolved difference at this budget"
        print "  verdict: " v " (the interval " (v ~ /resolved/ ? "includes" : "excludes") " 0)"
    }'

echo
echo "caveat: $SEEDS seeds of one small cell at a short budget (2000 steps), and at this"
echo "budget the arms are still learning: a gap here says how fast they learn, not where"
echo "they end up."
if [ -f "$LONG" ] && long=$(rows "$LONG" "$CELL") && [ -n "$long" ]; then
    echo "$long" | awk -F'|' '
        $1 == "softmax" { s = $3 " %"; n = $2 }
        $1 == "boltzmann" {
            b = $3 " %"; e = $4
            ci = $4; sub(/^[^[]*\[/, "", ci); sub(/\].*$/, "", ci); split(ci, c, ", ")
            v = c[1] + 0 > 0 || c[2] + 0 < 0 ? "resolved" : "not resolved"
        }
        END {
            print "The committed runs of this cell at 16000 steps (results/full/brackets-width, " n " seeds):"
            print "  softmax " s ", boltzmann " b "; difference " e " points: " v "."
            print "Over all committed grids, see docs/results.md."
        }'
else
    echo "(the committed longer runs, $LONG, are not in this tree; see docs/results.md)"
fi

echo
"$BIN" plot "$OUT" >/dev/null
png="$OUT/learning_curves.png"
if [ ! -s "$png" ]; then
    echo "demo: no picture at $png (is gnuplot installed? apt-get install gnuplot-nox)" >&2
    exit 1
fi
echo "picture (learning curves of both arms): $png"
if "$BIN" couplings --grid "$OUT" >"$OUT/couplings.txt" 2>&1 && [ -s "$OUT/couplings/J_vs_distance.png" ]; then
    echo "learned couplings J by key distance (the paper's sign pattern): $OUT/couplings/J_vs_distance.png"
    grep -E '^(paper|these runs)' "$OUT/couplings.txt" | sed 's/^/  /'
fi
