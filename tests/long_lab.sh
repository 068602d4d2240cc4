#!/usr/bin/env bash
# The lab's long-context layer on a tiny long-style grid (charlm on a
# generated text at T = 16 and 32, C = 8, 1 layer, 2 heads): arms with a
# couplings form (ablate --arm), their cells, labels and summaries,
# couplings by distance of relative and banded models, length
# extrapolation (a T = 16 relative model at T = 32; absolute and
# position-embedding models refused with the library's reason; resumed,
# skipped without a checkpoint), the long-context section of the report,
# bad arm specs, and the long preset end to end at toy budgets.
# usage: tests/long_lab.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab
set -u
BIN=${1:?usage: long_lab.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab}
LABBIN=${2:?usage: long_lab.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab}
. "$(dirname "$0")/lib.sh"
# check NAME EXPR (this script names its checks first)
check() { if eval "$2"; then ok; else bad "$1"; fi; }
has() { grep -qxF -- "$2" "$1"; }
# flat FILE: the JSON file on one line without blanks, for grep
flat() { tr -d ' \t\n' <"$1"; }
# with gnuplot the figures exist and are linked; without, they are not
if command -v gnuplot >/dev/null 2>&1; then GNUPLOT=1; else GNUPLOT=0; echo "note: gnuplot not installed, figure links not checked"; fi
# close A B: two numbers agree to 1e-9 relative
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-9 * (a < 0 ? -a : a)) }'; }

for i in $(seq 1 600); do echo "the quick brown fox $i jumps over the lazy dog, said KING HENRY."; done >"$TMP/text.txt"
O="$TMP/out"
ARMS=softmax,sigmoid+log-n,boltzmann+relative+band2
A=(--task charlm --arm "$ARMS" --arm boltzmann+band2 --arm boltzmann+band2+pos-emb=none --embd 8
   --heads 2 --seeds 2 --steps 24 --batch 8 --eval-every 8 --eval-items 8 --data "$TMP/text.txt")
G="$O/charlm-T16"
"$BIN" ablate "${A[@]}" --T 16 --out "$G" >/dev/null 2>"$TMP/e1"
check "the T = 16 grid trains" '[ $? = 0 ] && [ "$(tail -n +2 "$G/results.csv" | wc -l)" = 10 ]'
"$BIN" ablate "${A[@]}" --T 32 --out "$O/charlm-T32" >/dev/null 2>&1
check "the T = 32 grid trains" '[ $? = 0 ] && [ "$(tail -n +2 "$O/charlm-T32/results.csv" | wc -l)" = 10 ]'

# --- arms: cells named by their label (plain arms as ever), grid.json
# records a form only where it is not the plain one, the run records hold it
R="$G/runs/charlm-T16-C8-ffn1"
check "cell names" '[ -f "$R-softmax-s1/run.json" ] && [ -f "$R-sigmoid-logn-s2/run.json" ] &&
    [ -f "$R-boltzmann-rel-W2-s1/run.json" ] && [ -f "$R-boltzmann-W2-s2/run.json" ] &&
    [ -f "$R-boltzmann-W2-nopos-s1/run.json" ]'
check "grid.json: plain arms as before, forms recorded" '
    flat "$G/grid.json" | grep -qF "{\"attn\":\"softmax\",\"sampler\":{\"kind\":\"exact\"}}" &&
    flat "$G/grid.json" | grep -qF "{\"attn\":\"boltzmann\",\"sampler\":{\"kind\":\"exact\"},\"couplings\":\"relative\",\"band\":2,\"field_bias\":\"none\",\"pos_emb\":false}" &&
    flat "$G/grid.json" | grep -qF "{\"attn\":\"sigmoid\",\"sampler\":{\"kind\":\"exact\"},\"couplings\":\"absolute\",\"band\":0,\"field_bias\":\"log-n\",\"pos_emb\":true}" &&
    flat "$G/grid.json" | grep -qF "\"band\":2,\"field_bias\":\"none\",\"pos_emb\":false}]"'
check "run records hold the form (relative: no position embeddings)" '
    flat "$R-boltzmann-rel-W2-s1/run.json" | grep -q "\"pos_emb\":false,\"couplings\":\"relative\",\"band\":2" &&
    flat "$R-boltzmann-W2-s1/run.json" | grep -q "\"pos_emb\":true,\"couplings\":\"absolute\",\"band\":2" &&
    flat "$R-sigmoid-logn-s1/run.json" | grep -q "\"field_bias\":\"log-n\""'
check "summary: a row per arm, labelled, the form legend, no paper number" '
    grep -q "^| boltzmann-rel-W2 | 2 | [0-9.]* ± [0-9.]* | [-+][0-9.]* \[[-+][0-9.]*, [-+][0-9.]*\] |  |$" "$G/summary.md" &&
    grep -q "^| sigmoid-logn | 2 |" "$G/summary.md" && grep -q "^| boltzmann-W2-nopos | 2 |" "$G/summary.md" &&
    grep -q "^| softmax | 2 | .* | (reference) |  |$" "$G/summary.md" && grep -q "^A variant.s label names its form" "$G/summary.md"'
check "results.csv and effects.csv name the variant by its label" '
    [ "$(grep -c "^charlm,boltzmann-rel-W2,16,8,1," "$G/results.csv")" = 2 ] &&
    grep -q "^charlm,16,8,1,sigmoid-logn,exact,0,2,2," "$G/effects.csv" &&
    flat "$G/results.json" | grep -q "\"variant\":\"boltzmann-W2-nopos\",\"attn\":\"boltzmann\",\"couplings\":\"absolute\",\"band\":2,\"field_bias\":\"none\",\"pos_emb\":false"'
cp "$G/summary.md" "$TMP/summary1"
"$BIN" ablate "${A[@]}" --T 16 --out "$G" >/dev/null 2>"$TMP/e2"
check "the grid resumes complete" 'grep -q "10 runs in the grid, 10 already finished" "$TMP/e2" && ! grep -q "^\[" "$TMP/e2"'
"$BIN" ablate "${A[@]}" --T 16 --out "$G" --summary-only >/dev/null 2>&1
check "summary-only rewrites the same summary" '[ $? = 0 ] && cmp -s "$G/summary.md" "$TMP/summary1"'
"$BIN" plot "$G" >"$TMP/plot.out" 2>&1
check "plot groups by label" '[ $? = 0 ] && grep -q "^charlm boltzmann-rel-W2 16 8 1 2 " "$G/plots/summary.dat" &&
    grep -q "^# variant boltzmann-W2-nopos$" "$G/plots/curves_charlm_T16_C8_ffn1.dat"'

# --- couplings by distance
C="$G/couplings/boltzmann+relative+band2"
"$BIN" couplings --grid "$G" --arm boltzmann+relative+band2 --out "$C" >"$TMP/c1" 2>&1
check "couplings of the relative arm" '[ $? = 0 ] && grep -q "couplings of 2 runs .*charlm boltzmann-rel-W2, T=16, 1 layer x 2 heads" "$TMP/c1"'
check "relative: J by distance per head, W = 2 distances, no heatmap" '
    [ "$(head -1 "$C/J_l0_h0.csv")" = "distance,J,sd" ] && [ "$(tail -n +2 "$C/J_l0_h1.csv" | wc -l)" = 2 ] &&
    [ "$(grep -c "^all,all," "$C/distance.csv")" = 2 ] && [ "$(tail -n +2 "$C/distance_runs.csv" | wc -l)" = 2 ] &&
    [ ! -e "$C/J_heatmap_l0_h0.gp" ] && [ ! -e "$C/J_l0_h0_matrix.txt" ] && [ -f "$C/J_vs_distance.gp" ]'
check "relative: couplings.json names the form" '
    flat "$C/couplings.json" | grep -q "\"cell\":\"charlm-T16-C8-ffn1-boltzmann-rel-W2\"" &&
    flat "$C/couplings.json" | grep -q "\"variant\":\"boltzmann-rel-W2\",\"couplings\":\"relative\",\"band\":2,\"distances\":2" &&
    [ "$(flat "$C/couplings.json" | grep -o "\"positive_runs\"" | wc -l)" = 2 ]'
# one run: J_rel of layer 0 by head; the mean over heads is the "all" row,
# two values (one per head) at each distance
"$BIN" couplings --ckpt "$R-boltzmann-rel-W2-s1/model.safetensors" --out "$TMP/c1run" >/dev/null 2>&1
for d in 1 2; do
    h0=$(awk -F, -v d=$d '$1 == d { print $2 }' "$TMP/c1run/J_l0_h0.csv")
    h1=$(awk -F, -v d=$d '$1 == d { print $2 }' "$TMP/c1run/J_l0_h1.csv")
    all=$(awk -F, -v d=$d '$1 == "all" && $3 == d { print $4 " " $5 }' "$TMP/c1run/distance.csv")
    check "relative, one run, d = $d: the all row is the mean of the two heads" \
        'awk -v a="$h0" -v b="$h1" -v r="$all" "BEGIN { split(r, x, \" \"); m = (a + b) / 2; d = x[2] - m; exit !(x[1] == 2 && d < 1e-7 && d > -1e-7) }"'
done
B="$G/couplings/boltzmann+band2"
"$BIN" couplings --grid "$G" --arm boltzmann+band2 --out "$B" >"$TMP/c2" 2>&1
check "banded absolute: the pairs within the band, distances 1..W" '[ $? = 0 ] &&
    [ "$(tail -n +2 "$B/J_l0_h0.csv" | wc -l)" = 29 ] && awk -F, "NR > 1 && \$2 - \$1 > 2 { exit 1 }" "$B/J_l0_h0.csv" &&
    [ "$(grep -c "^all,all," "$B/distance.csv")" = 2 ] && grep -q "^all,all,1,60," "$B/distance.csv" &&
    grep -q "^all,all,2,56," "$B/distance.csv" && [ -f "$B/J_heatmap_l0_h0.gp" ] &&
    grep -q "d >= 6: none (distances 1..2 only)" "$TMP/c2"'
expect 2 "--arm needs --grid" -- "$BIN" couplings --ckpt "$R-boltzmann-W2-s1/model.safetensors" --arm boltzmann
expect 2 "only boltzmann and coupling models have couplings J" -- "$BIN" couplings --grid "$G" --arm softmax
expect 2 "has no finished exact boltzmann-rel run with its checkpoint" -- "$BIN" couplings --grid "$G" --arm boltzmann+relative
expect 2 "unknown part 'wide'" -- "$BIN" couplings --grid "$G" --arm boltzmann+wide

# --- length extrapolation: T = 16 models at T = 32
"$BIN" ablate --out "$G" --extrapolate 32 >"$TMP/x1" 2>"$TMP/x1e"
check "extrapolation runs: 2 evaluated, 8 refused" '[ $? = 0 ] &&
    grep -q "^extrapolation to T = 32: 2 evaluated, 8 refused, 0 kept, 0 skipped (no checkpoint); wrote $G/extrapolation.json$" "$TMP/x1"'
X="$G/extrapolation.json"
check "extrapolation.json: format and statuses" '
    flat "$X" | grep -q "^{\"format\":\"boltzattn-extrapolation\",\"version\":1,\"entries\":\[" &&
    [ "$(flat "$X" | grep -o "\"status\":\"done\"" | wc -l)" = 2 ] && [ "$(flat "$X" | grep -o "\"status\":\"refused\"" | wc -l)" = 8 ]'
# the done entries, one per line: run, own T's ppl and windows, T2's
done_rows() { flat "$X" | grep -o "\"run\":\"[^\"]*\",[^{]*\"status\":\"done\",\"at_T\":{[^}]*},\"at_T_eval\":{[^}]*}" |
    sed -E 's/"run":"([^"]*)".*"at_T":\{[^}]*"val_ppl":([^,]*),[^}]*"items":([0-9]*)[^}]*\},"at_T_eval":\{[^}]*"val_ppl":([^,]*),[^}]*"items":([0-9]*).*/\1 \2 \3 \4 \5/'; }
done_rows >"$TMP/done"
check "the relative runs are the ones evaluated" '[ "$(cut -d" " -f1 "$TMP/done" | tr "\n" " ")" = "charlm-T16-C8-ffn1-boltzmann-rel-W2-s1 charlm-T16-C8-ffn1-boltzmann-rel-W2-s2 " ]'
while read -r run own nown long nlong; do
    final=$(flat "$G/runs/$run/run.json" | grep -o "\"result\":{\"val_loss\":[^,]*,\"val_ppl\":[^,]*" | sed 's/.*"val_ppl"://')
    check "$run: ppl at T = 32 finite and > 1, on every window" 'awk -v p="$long" -v n="$nlong" -v m="$nown" "BEGIN { exit !(p > 1 && p < 1e6 && n > 0 && m == 2 * n) }"'
    check "$run: ppl at its own T is its final evaluation's" 'close "$own" "$final"'
done <"$TMP/done"
check "refusals name the library's reasons" '
    flat "$X" | grep -q "\"run\":\"charlm-T16-C8-ffn1-boltzmann-W2-nopos-s1\",[^{]*\"status\":\"refused\",\"reason\":\"T=32islongerthanthemodel.sT=16:itsabsolutecouplingsexistonlybetweenitsTpositions" &&
    flat "$X" | grep -q "\"run\":\"charlm-T16-C8-ffn1-softmax-s2\",[^{]*\"status\":\"refused\",\"reason\":\"[^\"]*learnedpositionembeddings"'
cp "$X" "$TMP/x.json"
"$BIN" ablate --out "$G" --extrapolate 32 >"$TMP/x2" 2>&1
check "a rerun keeps every entry and changes nothing" '[ $? = 0 ] && grep -q "0 evaluated, 0 refused, 10 kept, 0 skipped" "$TMP/x2" && cmp -s "$X" "$TMP/x.json"'
# a clone without a checkpoint: that run is skipped with a note, and
# evaluated once the checkpoint is back (the others kept)
G2="$TMP/clone/charlm-T16"
mkdir -p "$TMP/clone" && cp -r "$G" "$G2" && rm "$G2/extrapolation.json"
mv "$G2/runs/charlm-T16-C8-ffn1-boltzmann-rel-W2-s2/model.safetensors" "$TMP/ckpt"
"$BIN" ablate --out "$G2" --extrapolate 32 --extrapolate-items 3 --batch 4 >"$TMP/x3" 2>&1
check "without its checkpoint a run is skipped with a note" '[ $? = 0 ] && grep -q "1 evaluated, 8 refused, 0 kept, 1 skipped" "$TMP/x3" &&
    grep -q "charlm-T16-C8-ffn1-boltzmann-rel-W2-s2: no checkpoint (.*model.safetensors): skipped" "$TMP/x3" &&
    flat "$G2/extrapolation.json" | grep -q "\"items\":3,\"batch\":4,\"status\":\"done\",\"at_T\":{[^}]*\"items\":3,"'
cp "$G2/extrapolation.json" "$TMP/x3.json"
"$LABBIN" report "$TMP/clone" --preset long >"$TMP/r0.md" 2>&1
check "the report names the run not evaluated yet" 'grep -q "^1 finished run of the grid has no entry at T = 32 yet" "$TMP/r0.md" &&
    grep -q "^| boltzmann-rel-W2 | 16 | 1 | [0-9.]* (one run) | [0-9.]* (one run) | [-+][0-9.]* % (one pair) | too few seeds | not run |$" "$TMP/r0.md"'
mv "$TMP/ckpt" "$G2/runs/charlm-T16-C8-ffn1-boltzmann-rel-W2-s2/model.safetensors"
"$BIN" ablate --out "$G2" --extrapolate 32 --extrapolate-items 3 --batch 4 >"$TMP/x4" 2>&1
check "the rerun evaluates what was missing, keeps the rest" '[ $? = 0 ] && grep -q "1 evaluated, 0 refused, 9 kept, 0 skipped" "$TMP/x4" &&
    [ "$(flat "$G2/extrapolation.json" | grep -o "\"status\":\"done\"" | wc -l)" = 2 ]'
echo '{"format":"boltzattn-extrapolation","entries":[{"run":"x"}]}' >"$G2/extrapolation.json"
expect 2 "is not an extrapolation file of this tool" -- "$BIN" ablate --out "$G2" --extrapolate 32
expect 2 "--extrapolate reads the grid from DIR/grid.json and trains nothing: --T does not apply" -- \
    "$BIN" ablate --out "$G" --extrapolate 32 --T 16
expect 2 "--extrapolate-items needs --extrapolate" -- "$BIN" ablate --task charlm --out "$TMP/nx" --extrapolate-items 3
expect 2 "not a grid of 'boltzattn ablate'" -- "$BIN" ablate --out "$TMP/nogrid" --extrapolate 32
"$BIN" ablate --task brackets --attn softmax --T 4 --embd 8 --seeds 1 --steps 2 --batch 4 --out "$TMP/br" >/dev/null 2>&1
expect 2 "extrapolation evaluates language models" -- "$BIN" ablate --out "$TMP/br" --extrapolate 8

# --- extrapolation beside training: each run evaluated as soon as it is
# trained (a study spans machines, and checkpoints are not committed), the
# same entries as an evaluation afterwards
XT=(--task charlm --arm softmax,boltzmann+relative+band2 --embd 8 --heads 2 --seeds 2 --steps 8
    --batch 8 --eval-every 4 --eval-items 4 --T 16 --data "$TMP/text.txt")
GX="$TMP/xtrain/charlm-T16"
# the progress lines and the evaluations' notes both go to stderr, in the
# order they happen: seed 1's relative run is evaluated before seed 2 trains
"$BIN" ablate "${XT[@]}" --out "$GX" --extrapolate 32,64 --extrapolate-items 3 --extrapolate-batch 2 >"$TMP/xt1" 2>"$TMP/xt1e"
R1=charlm-T16-C8-ffn1-boltzmann-rel-W2-s1
check "ablate --extrapolate with the grid's options trains and evaluates each run as it finishes" '[ $? = 0 ] &&
    [ "$(grep -E "^\[|evaluating at" "$TMP/xt1e" | sed "s/:.*//" | tr "\n" "|")" = \
      "[1/4] charlm-T16-C8-ffn1-softmax-s1|[2/4] $R1|$R1|$R1|[3/4] charlm-T16-C8-ffn1-softmax-s2|[4/4] charlm-T16-C8-ffn1-boltzmann-rel-W2-s2|charlm-T16-C8-ffn1-boltzmann-rel-W2-s2|charlm-T16-C8-ffn1-boltzmann-rel-W2-s2|" ] &&
    [ "$(flat "$GX/extrapolation.json" | grep -o "\"items\":3,\"batch\":2,\"status\":\"done\"" | wc -l)" = 4 ] &&
    [ "$(flat "$GX/extrapolation.json" | grep -o "\"status\":\"refused\"" | wc -l)" = 4 ]' || cat "$TMP/xt1e"
# entries: one a line, in a fixed order
entries() { flat "$1" | sed 's/},{"run"/}\n{"run"/g' | sort; }
GY="$TMP/xafter/charlm-T16"
mkdir -p "$TMP/xafter" && cp -r "$GX" "$GY" && rm "$GY/extrapolation.json"
"$BIN" ablate --out "$GY" --extrapolate 32,64 --extrapolate-items 3 --extrapolate-batch 2 >/dev/null 2>&1
check "the entries made beside training are those of an evaluation afterwards, digit for digit" '[ $? = 0 ] &&
    [ "$(entries "$GX/extrapolation.json" | wc -l)" = 8 ] && [ "$(entries "$GX/extrapolation.json")" = "$(entries "$GY/extrapolation.json")" ]'
cp "$GX/extrapolation.json" "$TMP/xt.json"
"$BIN" ablate "${XT[@]}" --out "$GX" --extrapolate 32,64 --extrapolate-items 3 --extrapolate-batch 2 >"$TMP/xt2" 2>&1
check "a rerun trains nothing and evaluates nothing again" '[ $? = 0 ] && ! grep -q "^\[" "$TMP/xt2" &&
    grep -q "^extrapolation to T = 64: 0 evaluated, 0 refused, 4 kept" "$TMP/xt2" && cmp -s "$GX/extrapolation.json" "$TMP/xt.json"'
# --- the grid's lock: while another process holds it (the other chain of
# a study, evaluating), the evaluation alone and the passes after each run
# skip with a note, but ablate's last pass waits for it (the holder may
# have read the runs before this process's last one finished)
GZ="$TMP/xwait/charlm-T16"
mkdir -p "$TMP/xwait" && cp -r "$GX" "$GZ" && rm "$GZ/extrapolation.json"
if command -v python3 >/dev/null 2>&1; then
    # a POSIX record lock on the grid's lock file, as take_lock's, held
    # until $TMP/release exists (at most a minute)
    python3 -c 'import fcntl, os, sys, time
f = open(sys.argv[1] + "/.lock", "a+"); fcntl.lockf(f, fcntl.LOCK_EX); open(sys.argv[2], "w").close()
for _ in range(600):
    if os.path.exists(sys.argv[3]): break
    time.sleep(0.1)' "$GZ" "$TMP/held" "$TMP/release" &
    HP=$!
    for _ in $(seq 1 300); do [ -e "$TMP/held" ] && break; sleep 0.1; done
    "$BIN" ablate --out "$GZ" --extrapolate 32 >/dev/null 2>"$TMP/xw0e"
    check "the evaluation alone skips while another process holds the grid's lock" '[ $? = 0 ] &&
        grep -q "extrapolation is being done by another process (.*in use by process $HP .*): skipped" "$TMP/xw0e" &&
        [ ! -e "$GZ/extrapolation.json" ]' || cat "$TMP/xw0e"
    "$BIN" ablate "${XT[@]}" --out "$GZ" --extrapolate 32 --extrapolate-items 3 --extrapolate-batch 2 >/dev/null 2>"$TMP/xw1e" &
    AP=$!
    for _ in $(seq 1 300); do grep -q "waiting for it" "$TMP/xw1e" && break; sleep 0.1; done
    check "ablate's last pass waits for the lock, evaluating nothing meanwhile" '
        grep -q "extrapolation is being done by another process (.*in use by process $HP .*): waiting for it" "$TMP/xw1e" &&
        [ ! -e "$GZ/extrapolation.json" ]' || cat "$TMP/xw1e"
    touch "$TMP/release"
    wait "$HP"
    wait "$AP"
    check "then evaluates every run once the lock is free" '[ $? = 0 ] &&
        [ "$(flat "$GZ/extrapolation.json" | grep -o "\"items\":3,\"batch\":2,\"status\":\"done\"" | wc -l)" = 2 ] &&
        [ "$(flat "$GZ/extrapolation.json" | grep -o "\"status\":\"refused\"" | wc -l)" = 2 ]' || cat "$TMP/xw1e"
else
    echo "SKIP: python3 not installed, the grid lock's wait is not checked"
fi
expect 2 "--extrapolate evaluates language models (charlm), not a brackets grid" -- \
    "$BIN" ablate --task brackets --attn softmax --T 4 --out "$TMP/brx" --extrapolate 8
check "the refused grid made no directory" '[ ! -e "$TMP/brx" ]'
expect 2 "--extrapolate-batch needs --extrapolate" -- "$BIN" ablate "${XT[@]}" --out "$TMP/nx" --extrapolate-batch 2
expect 2 "--summary-only trains and evaluates nothing: --extrapolate does not apply" -- \
    "$BIN" ablate "${XT[@]}" --out "$GX" --summary-only --extrapolate 32
expect 2 "--batch and --extrapolate-batch say the same with --out alone: give one" -- \
    "$BIN" ablate --out "$GX" --extrapolate 32 --batch 2 --extrapolate-batch 2

# --- the report's long-context section
"$LABBIN" report "$O" --preset long >"$TMP/r1.md" 2>"$TMP/r1.err"
check "report --preset long exits 0 without messages" '[ $? = 0 ] && [ ! -s "$TMP/r1.err" ]'
check "one long-context section, the T's in order, the preset's grids not run" '[ "$(grep -c "^## Long context$" "$TMP/r1.md")" = 1 ] &&
    [ "$(grep "^### T = .*(\`" "$TMP/r1.md" | tr "\n" "|")" = "### T = 16 (\`charlm-T16\`)|### T = 32 (\`charlm-T32\`)|" ] &&
    has "$TMP/r1.md" "| charlm-T64 | not run yet |" && has "$TMP/r1.md" "| charlm-T1024 | not run yet |" &&
    has "$TMP/r1.md" "| charlm-T16 | 10 of 10 |"'
# the softmax row: the mean of its two runs' final perplexities
sm=$(for s in 1 2; do flat "$R-softmax-s$s/run.json" | grep -o "\"result\":{\"val_loss\":[^,]*,\"val_ppl\":[^,]*" | sed 's/.*"val_ppl"://'; done |
    awk '{ s += $1 } END { printf "%.3f", s / 2 }')
check "arms table: softmax is the reference, its mean from the records" \
    'grep -q "^| softmax | 2 | $sm \[[0-9.]*, [0-9.]*\] | (reference) |  |$" "$TMP/r1.md"'
check "arms table: every arm with an effect and a verdict" '
    grep -Eq "^\| boltzmann-rel-W2 \| 2 \| [0-9.]+ \[[0-9.]+, [0-9.]+\] \| [-+][0-9.]+ % \[[-+][0-9.]+, [-+][0-9.]+\] \| (better than softmax|worse than softmax|no resolved difference) \|$" "$TMP/r1.md" &&
    [ "$(grep -c "^| sigmoid-logn | 2 | [0-9.]* \[" "$TMP/r1.md")" = 2 ]'
check "J by distance: the analysed arms side by side, the others named" '
    has "$TMP/r1.md" "| distance | boltzmann-rel-W2 | boltzmann-W2 | paper |" &&
    grep -q "^| 2 | [-+][0-9.]* \[[-+][0-9.]*, [-+][0-9.]*\][ <>0]* | [-+][0-9.]* \[.*\][ <>0]* | > 0 |$" "$TMP/r1.md" &&
    grep -q "No couplings analysis for \`boltzmann-W2-nopos\`" "$TMP/r1.md" &&
    has "$TMP/r1.md" "Seeds analysed (runs whose checkpoints were at hand): \`boltzmann-rel-W2\` 2 of 2, \`boltzmann-W2\` 2 of 2." &&
    { [ $GNUPLOT = 0 ] || has "$TMP/r1.md" "![J_vs_distance.png](charlm-T16/couplings/boltzmann+relative+band2/J_vs_distance.png)"; }'
long=$(awk '{ s += $4 } END { printf "%.3f", s / NR }' "$TMP/done")
check "extrapolation table: the entries' perplexities, the arm trained at T = 32 beside them" '
    grep -q "^#### Length extrapolation: \`charlm-T16\` evaluated at T = 32$" "$TMP/r1.md" &&
    grep -Eq "^\| boltzmann-rel-W2 \| 16 \| 2 \| [0-9.]+ \[[0-9.]+, [0-9.]+\] \| $long \[[0-9.]+, [0-9.]+\] \| [-+][0-9.]+ % \[[-+][0-9.]+, [-+][0-9.]+\] \| [a-z =0-9]+ \| [0-9.]+ \[[0-9.]+, [0-9.]+\] \|$" "$TMP/r1.md" &&
    grep -q "^- \`softmax\` (2 runs): T = 32 is longer than the model.s T = 16: it has learned position embeddings" "$TMP/r1.md" &&
    grep -q "^- \`boltzmann-W2-nopos\` (2 runs): .*its absolute couplings exist only" "$TMP/r1.md"'
check "the per-grid sections follow" 'grep -q "^## charlm-T16$" "$TMP/r1.md" && grep -q "^## charlm-T32$" "$TMP/r1.md"'
"$LABBIN" report "$O" --preset long --section-only --link-prefix ../results/long/ >"$TMP/s1.md" 2>&1
check "--section-only: the section alone, with its generator line" '[ $? = 0 ] && [ "$(head -1 "$TMP/s1.md")" = "## Long context" ] &&
    grep -q "^Generated by \`boltzattn-lab report\` from the files under \`$O\` on [0-9-]*; nothing below is typed by hand" "$TMP/s1.md" &&
    ! grep -q "^# Results" "$TMP/s1.md" && ! grep -q "^## charlm-T16" "$TMP/s1.md" &&
    { [ $GNUPLOT = 0 ] || has "$TMP/s1.md" "![learning_curves.png](../results/long/charlm-T16/learning_curves.png)"; }'
"$LABBIN" report "$O" --preset quick >"$TMP/q.md" 2>&1
check "other presets have no long-context section" '! grep -q "^## Long context" "$TMP/q.md"'
expect 2 "--section-only applies to --preset long" -- "$LABBIN" report "$O" --preset full --section-only
# an interrupted grid: a run not finished is named missing, never filled in
sed -i 's/"status":\(\s*\)"finished"/"status":\1"running"/' "$O/charlm-T32/runs/charlm-T32-C8-ffn1-boltzmann-W2-s2/run.json"
"$LABBIN" report "$O" --preset long >"$TMP/r2.md" 2>&1
check "a missing run: the grid incomplete, the seed named" '
    grep -q "^24 steps, batch 8, learning rate 0.003, 1 layer x 2 heads, 2 seeds; \*\*incomplete: 9 of 10 runs finished\*\*" "$TMP/r2.md" &&
    grep -q "^| boltzmann-W2 | 1 of 2 (missing seeds 2) | [0-9.]* (one run) | [-+][0-9.]* % (one pair) | too few seeds |$" "$TMP/r2.md"'

# --- an arm's own engine: full-range relative couplings with mf beside a
# banded exact arm in one grid; the grid's approximate settings apply to it
E="$O/engine-arm"
EA=(--task charlm --arm boltzmann+relative+engine=mf,boltzmann+relative+band2 --embd 8 --heads 2
    --seeds 1 --steps 6 --batch 4 --eval-every 3 --eval-items 4 --damping 0.6 --T 16
    --data "$TMP/text.txt" --out "$E")
"$BIN" ablate "${EA[@]}" >/dev/null 2>"$TMP/ea1"
RE="$E/runs/charlm-T16-C8-ffn1-boltzmann-rel"
check "an engine arm trains with its engine, the other arm with the grid's" '[ $? = 0 ] &&
    flat "$RE-mf-s1/run.json" | grep -q "\"engine\":\"mf\"" &&
    flat "$RE-mf-s1/run.json" | grep -q "\"couplings\":\"relative\",\"band\":0" &&
    flat "$RE-mf-s1/run.json" | grep -q "\"approx\":{\"damping\":0.6," &&
    flat "$RE-W2-s1/run.json" | grep -q "\"engine\":\"auto\"" &&
    grep -q "\"sweeps_mean\"" "$RE-mf-s1/metrics.jsonl" && ! grep -q "\"sweeps_mean\"" "$RE-W2-s1/metrics.jsonl"'
check "grid.json records the arm's engine and the settings" '
    flat "$E/grid.json" | grep -qF "\"pos_emb\":false,\"engine\":\"mf\"}" &&
    flat "$E/grid.json" | grep -qF "\"engine\":\"auto\",\"approx\":{\"damping\":0.6,"'
"$BIN" ablate "${EA[@]}" >/dev/null 2>"$TMP/ea2"
check "the engine arm's grid resumes complete" 'grep -q "2 runs in the grid, 2 already finished" "$TMP/ea2"'
"$BIN" ablate "${EA[@]/0.6/0.7}" >/dev/null 2>"$TMP/ea3"
check "other settings: the finished engine run is not taken for the cell" '[ $? = 2 ] &&
    grep -q "boltzmann-rel-mf-s1 holds a finished run that is not this grid.s cell" "$TMP/ea3"'
"$BIN" ablate --out "$E" --extrapolate 32 --data "$TMP/text.txt" >"$TMP/ea4" 2>&1
check "full-range relative couplings do not extrapolate (refused with the reason)" '[ $? = 0 ] &&
    flat "$E/extrapolation.json" | grep -q "\"run\":\"charlm-T16-C8-ffn1-boltzmann-rel-mf-s1\",.*\"status\":\"refused\""'

# --- bad arm specs: exit 2 naming the problem, nothing created
bad_arm() {
    expect 2 "$2" -- "$BIN" ablate --task charlm --T 16 --embd 8 --heads 2 --data "$TMP/text.txt" --out "$TMP/badarm" --arm "$1"
}
bad_arm boltzmann+relative+band0 "'band0' is not a band: band<W> with W in 1..16"
bad_arm boltzmann+band17 "'band17' is not a band"
bad_arm boltzmann+wide "unknown part 'wide'"
bad_arm boltzmann+relative+absolute "the couplings' form given twice"
bad_arm boltzmann+band2+band4 "the band given twice"
bad_arm boltzmann+ "'boltzmann+' has an empty part"
bad_arm attention "'attention':"
bad_arm "softmax,,boltzmann" "has an empty item"
bad_arm "boltzmann+relative+band2,boltzmann+band2+relative" "'boltzmann+relative+band2' and 'boltzmann+band2+relative' are the same arm"
bad_arm "boltzmann+relative+band2+pos-emb=none,boltzmann+relative+band2" "are the same arm"
bad_arm "boltzmann+relative+engine=tap,boltzmann+relative" "are the same arm (arms of one grid differ by more than their engine"
bad_arm boltzmann+engine=fast "'engine=fast' is not an arm engine: engine=mf, tap, bp or hybrid"
bad_arm boltzmann+engine=mf+engine=tap "the engine given twice"
bad_arm sigmoid+engine=mf "an engine applies to boltzmann and coupling arms"
# the library's verdicts on a form that does not suit the variant or T
bad_arm sigmoid+band4 "sigmoid attention has none"
bad_arm softmax+log-n "does nothing to softmax attention"
bad_arm softmax+relative "relative couplings belong to boltzmann and coupling attention"
bad_arm boltzmann+band16 "exceeds T - 1 = 15"
expect 2 "--arm and --attn exclude each other" -- "$BIN" ablate --task charlm --out "$TMP/badarm" --arm softmax --attn softmax
check "no refused grid made its directory" '[ ! -e "$TMP/badarm" ]'

# --- the long preset end to end at toy budgets: two chains side by side,
# every grid, the extrapolation, couplings and the report; a rerun trains
# nothing
P="$TMP/preset"
toy=(JOBS=2 THREADS=1 DATA="$TMP/text.txt" OUT="$P" LONG_C=8 LONG_LAYERS=1 LONG_HEADS=2
     LONG_ARMS=softmax,boltzmann+relative+band2 T64_STEPS=4 T64_BATCH=2 T64_SEEDS=1
     T64_EVAL_EVERY=2 T64_EVAL_ITEMS=2 T256_STEPS=4 T256_BATCH=2 T256_SEEDS=2 T256_EVAL_EVERY=2
     T256_EVAL_ITEMS=2 T1024_STEPS=2 T1024_BATCH=1 T1024_SEEDS=1 T1024_EVAL_EVERY=1
     T1024_EVAL_ITEMS=1 T1024_ARMS=boltzmann+relative+band2 EXTRAP_ITEMS=2 EXTRAP_BATCH=2
     T256_EXTRA_ARMS=boltzmann+relative+engine=mf)
LAB="$(cd "$(dirname "$0")/.." && pwd)/lab/reproduce.sh"
(cd "$TMP" && env "${toy[@]}" bash "$LAB" long "$BIN" "$LABBIN") >"$TMP/p1" 2>&1
check "the long preset runs" '[ $? = 0 ] && [ -f "$P/report.md" ]' || cat "$TMP/p1"
check "every grid finished, the T = 1024 arms as asked" '
    has "$P/report.md" "| charlm-T64 | 2 of 2 |" && has "$P/report.md" "| charlm-T256 | 6 of 6 |" &&
    has "$P/report.md" "| charlm-T1024 | 1 of 1 |" && ! grep -q "not run yet" "$P/report.md"'
check "the relative models of T = 256 evaluated at T = 1024" '
    [ "$(flat "$P/charlm-T256/extrapolation.json" | grep -o "\"T_eval\":1024,\"items\":2,\"batch\":2,\"status\":\"done\"" | wc -l)" = 2 ] &&
    grep -q "^| boltzmann-rel-W2 | 256 | 2 | .* | [0-9.]* (one run) |$" "$P/report.md"'
check "one couplings analysis per Ising arm" '[ -f "$P/charlm-T256/couplings/boltzmann+relative+band2/couplings.json" ] &&
    [ ! -e "$P/charlm-T256/couplings/softmax" ] && has "$P/report.md" "| distance | boltzmann-rel-W2 | paper |"'
check "the T = 256 engine arm: trained with its engine, its couplings analysed, refused at T = 1024" '
    grep -q "^| boltzmann-rel-mf | 2 | [0-9.]* \[[0-9.]*, [0-9.]*\] | [-+][0-9.]* % \[" "$P/report.md" &&
    [ -f "$P/charlm-T256/couplings/boltzmann+relative+engine=mf/couplings.json" ] &&
    grep -q "^| distance | boltzmann-rel-W2 | boltzmann-rel-mf | paper |" "$P/report.md" &&
    grep -q "^- .boltzmann-rel-mf. (2 runs): T = 1024 is longer than the model.s T = 256" "$P/report.md"'
cp "$P/charlm-T256/extrapolation.json" "$TMP/p.json"
(cd "$TMP" && env "${toy[@]}" bash "$LAB" long "$BIN" "$LABBIN") >"$TMP/p2" 2>&1
check "a rerun trains nothing and keeps the extrapolation" '[ $? = 0 ] && ! grep -q "^\[" "$TMP/p2" &&
    [ "$(grep -c "runs in the grid, \([0-9]*\) already finished" "$TMP/p2")" = 6 ] &&
    grep -q "0 evaluated, 0 refused, 6 kept" "$TMP/p2" && cmp -s "$P/charlm-T256/extrapolation.json" "$TMP/p.json"' || cat "$TMP/p2"
(cd "$TMP" && env "${toy[@]}" SUMMARY_ONLY=1 bash "$LAB" long "$BIN" "$LABBIN") >"$TMP/p3" 2>&1
check "SUMMARY_ONLY rewrites the report without evaluating" '[ $? = 0 ] && ! grep -q "extrapolation to T" "$TMP/p3" && [ -f "$P/report.md" ]'
# a machine holding fewer of the checkpoints (they are not committed) keeps
# the analysis that stands on more, and says so
rm "$P"/charlm-T256/runs/*-boltzmann-rel-W2-s2/model.safetensors
(cd "$TMP" && env "${toy[@]}" SUMMARY_ONLY=1 bash "$LAB" long "$BIN" "$LABBIN") >"$TMP/p4" 2>&1
check "fewer checkpoints at hand keep the couplings analysis of more" '[ $? = 0 ] &&
    [ "$(wc -l <"$P/charlm-T256/couplings/boltzmann+relative+band2/runs.txt")" = 2 ] &&
    grep -q "reproduce: kept .*charlm-T256/couplings/boltzmann+relative+band2 (2 runs), not replaced by an analysis of the 1 checkpoints at hand" "$TMP/p4" &&
    [ ! -e "$P/charlm-T256/couplings/boltzmann+relative+band2.new" ]' || cat "$TMP/p4"

echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
