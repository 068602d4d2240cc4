#!/usr/bin/env bash
# Tests of the analysis subcommands: `couplings` on a tiny trained model
# (file contents, row counts, refusal of a softmax checkpoint) and `plot` on
# a hand-made ablation directory (.dat files, PNGs when gnuplot is
# installed, the message and exit 0 when it is not, exit 2 on bad input).
# Passes with or without gnuplot.
# usage: tests/analysis.sh PATH/TO/boltzattn
set -u
BIN=${1:?usage: analysis.sh PATH/TO/boltzattn}
. "$(dirname "$0")/lib.sh"
check() { if eval "$1" 2>/dev/null; then ok; else bad "$2"; fi; }

# rows FILE: data lines (not the header, not blank, not comments)
rows() { tail -n +2 "$1" | grep -cv '^\s*$'; }

if command -v gnuplot >/dev/null 2>&1; then GNUPLOT=1; else GNUPLOT=0; echo "note: gnuplot not installed, PNG checks skipped"; fi
png_ok() { [ -s "$1" ] && [ "$(head -c 4 "$1" | tail -c 3)" = "PNG" ]; }

# ------------------------------------------------------------ couplings
T=6
expect 0 "final: accuracy" -- "$BIN" train --task brackets --attn boltzmann --T $T --embd 16 \
    --steps 30 --batch 8 --j-init-std 0.3 --quiet --out "$TMP/m"
expect 0 "mean J by key distance" -- "$BIN" couplings --ckpt "$TMP/m/model.safetensors" --out "$TMP/c"
C="$TMP/c"
check '[ -f "$C/J_l0_h0.csv" ] && [ "$(head -1 "$C/J_l0_h0.csv")" = "j,k,J" ]' \
    "J_l0_h0.csv missing or without the header j,k,J"
check '[ "$(rows "$C/J_l0_h0.csv")" = $((T * (T - 1) / 2)) ]' \
    "J_l0_h0.csv has $(rows "$C/J_l0_h0.csv" 2>/dev/null) pair rows, expected $((T * (T - 1) / 2))"
check 'awk -F, "NR > 1 && !(\$1 < \$2) { exit 1 }" "$C/J_l0_h0.csv"' "a pair with j >= k in J_l0_h0.csv"
check '[ "$(grep -v "^#" "$C/J_l0_h0_matrix.txt" | wc -l)" = $T ] &&
       [ "$(grep -v "^#" "$C/J_l0_h0_matrix.txt" | awk "{ print NF }" | sort -u)" = $T ]' \
    "J_l0_h0_matrix.txt is not $T x $T"
check '[ "$(head -1 "$C/distance.csv")" = "layer,head,distance,n,mean,sd,min,max" ]' \
    "distance.csv header"
check '[ "$(grep -c "^0,0," "$C/distance.csv")" = $((T - 1)) ] &&
       [ "$(grep -c "^all,all," "$C/distance.csv")" = $((T - 1)) ]' \
    "distance.csv lacks $((T - 1)) rows per head and for all"
# distance d has T - d pairs
check 'awk -F, -v T=$T "NR > 1 && \$4 != T - \$3 { exit 1 }" "$C/distance.csv"' \
    "distance.csv pair counts are not T - d"
# the mean at distance 1 matches the CSV it came from
m1=$(awk -F, 'NR > 1 && $2 == $1 + 1 { s += $3; n++ } END { printf "%.4f", s / n }' "$C/J_l0_h0.csv")
d1=$(awk -F, '$1 == "all" && $3 == 1 { printf "%.4f", $5 }' "$C/distance.csv")
check '[ "$m1" = "$d1" ]' "mean J at distance 1: distance.csv $d1, J_l0_h0.csv $m1"
check '[ -f "$C/J_heatmap_l0_h0.gp" ] && [ -f "$C/J_vs_distance.gp" ]' "gnuplot scripts not kept"
if [ $GNUPLOT = 1 ]; then
    check 'png_ok "$C/J_heatmap_l0_h0.png" && png_ok "$C/J_vs_distance.png"' "coupling plots missing or not PNG"
fi
# default --out: couplings/ next to the checkpoint
expect 0 "" -- "$BIN" couplings --ckpt "$TMP/m/model.safetensors"
check '[ -f "$TMP/m/couplings/distance.csv" ]' "default output directory not used"
# without gnuplot on PATH: CSV written, one clear line, exit 0
expect 0 "gnuplot not found: CSV written, plots skipped" -- env PATH=/nonexistent "$BIN" couplings \
    --ckpt "$TMP/m/model.safetensors" --out "$TMP/c2"
check '[ "$(rows "$TMP/c2/J_l0_h0.csv")" = $((T * (T - 1) / 2)) ] && [ ! -e "$TMP/c2/J_vs_distance.png" ]' \
    "without gnuplot: CSV not written or a PNG appeared"
# bad input
expect 0 "" -- "$BIN" train --task brackets --attn softmax --T 4 --embd 16 --steps 2 --batch 4 \
    --quiet --out "$TMP/s"
expect 2 "softmax model: it has no couplings J" -- "$BIN" couplings --ckpt "$TMP/s/model.safetensors" --out "$TMP/cs"
expect 2 "option '--ckpt' is required" -- "$BIN" couplings --out "$TMP/cx"
expect 2 "" -- "$BIN" couplings --ckpt "$TMP/missing.safetensors" --out "$TMP/cx"
expect 0 "--ckpt" -- "$BIN" couplings --help

# several runs of one configuration: J averaged over runs, and the spread
# over runs of each run's mean J by distance, checked against the two
# single-run tables (mean = (a + b) / 2, sd = |a - b| / sqrt 2, interval =
# mean -+ t(1) sd / sqrt 2 with t(1) = 12.7062)
expect 0 "" -- "$BIN" train --task brackets --attn boltzmann --T $T --embd 16 --steps 30 --batch 8 \
    --j-init-std 0.3 --seed 7 --quiet --out "$TMP/m2"
expect 0 "" -- "$BIN" couplings --ckpt "$TMP/m2/model.safetensors" --out "$TMP/c3"
expect 0 "these runs: d = 2..4" -- "$BIN" couplings --ckpt "$TMP/m/model.safetensors" \
    --ckpt="$TMP/m2/model.safetensors" --out "$TMP/cm"
check '[ "$(head -1 "$TMP/cm/distance_runs.csv")" = "distance,runs,mean,sd,ci95_lo,ci95_hi,positive_runs" ] &&
       [ "$(rows "$TMP/cm/distance_runs.csv")" = $((T - 1)) ]' "distance_runs.csv header or row count"
bad_rows=$(join -t, <(awk -F, '$1 == "all" { print $3 "," $5 }' "$C/distance.csv" | sort) \
                    <(awk -F, '$1 == "all" { print $3 "," $5 }' "$TMP/c3/distance.csv" | sort) |
    join -t, - <(tail -n +2 "$TMP/cm/distance_runs.csv" | sort) |
    awk -F, 'function abs(x) { return x < 0 ? -x : x }
             { m = ($2 + $3) / 2; s = abs($2 - $3) / sqrt(2); h = 12.7062 * s / sqrt(2);
               p = ($2 > 0) + ($3 > 0)
               if ($4 != 2 || abs($5 - m) > 1e-6 || abs($6 - s) > 1e-6 ||
                   abs($7 - (m - h)) > 1e-5 || abs($8 - (m + h)) > 1e-5 || $9 != p) print $1 }')
check '[ -z "$bad_rows" ] && [ "$(tail -n +2 "$TMP/cm/distance_runs.csv" | wc -l)" = $((T - 1)) ]' \
    "distance_runs.csv disagrees with the single-run tables at distance(s): $bad_rows"
# the pair file holds the mean over runs and its sd
check '[ "$(head -1 "$TMP/cm/J_l0_h0.csv")" = "j,k,J,sd" ]' "J_l0_h0.csv of two runs lacks the sd column"
bad_pairs=$(paste -d, <(tail -n +2 "$C/J_l0_h0.csv") <(tail -n +2 "$TMP/c3/J_l0_h0.csv") \
                      <(tail -n +2 "$TMP/cm/J_l0_h0.csv") |
    awk -F, 'function abs(x) { return x < 0 ? -x : x }
             abs($9 - ($3 + $6) / 2) > 1e-6 || abs($10 - abs($3 - $6) / sqrt(2)) > 1e-6 { print $1 "-" $2 }')
check '[ -z "$bad_pairs" ]' "mean J over two runs wrong at pairs: $bad_pairs"
check '[ "$(cat "$TMP/cm/runs.txt")" = "$(printf "%s\n%s" "$TMP/m/model.safetensors" "$TMP/m2/model.safetensors")" ]' \
    "runs.txt does not list the two checkpoints in order"
# runs of different shapes are refused, naming both
expect 0 "" -- "$BIN" train --task brackets --attn boltzmann --T 4 --embd 16 --steps 2 --batch 4 \
    --quiet --out "$TMP/m4"
expect 2 "does not match" -- "$BIN" couplings --ckpt "$TMP/m/model.safetensors" \
    --ckpt "$TMP/m4/model.safetensors" --out "$TMP/cx"
expect 2 "softmax model" -- "$BIN" couplings --ckpt "$TMP/m/model.safetensors" \
    --ckpt "$TMP/s/model.safetensors" --out "$TMP/cx"

# ----------------------------------------------------------------- plot
A="$TMP/abl"
mkdir -p "$A"
{
    echo "task,variant,T,C,ffn,seed,steps,metric,value,val_loss,val_ppl,val_acc,items,targets,wall_s"
    for v in softmax boltzmann; do
        for t in 4 8; do
            for s in 1 2; do
                acc=$(awk -v t=$t -v s=$s -v v=$v 'BEGIN { printf "%.4f", 0.95 - 0.02 * t + 0.01 * s + (v == "boltzmann") * 0.02 }')
                echo "brackets,$v,$t,32,1,$s,100,accuracy,$acc,0.3,1.35,$acc,400,1600,1.5"
            done
        done
    done
} >"$A/results.csv"
mkrun() { # mkrun NAME VARIANT SEED: a metrics.jsonl with two evals and a final
    mkdir -p "$A/runs/$1"
    cat >"$A/runs/$1/metrics.jsonl" <<EOF
{"event":"config","config":{"task":"brackets","attn":"$2","engine":"fast","n_layer":1,"n_head":1,"n_embd":32,"block_size":8,"ffn":true},"train":{"seed":"$3"},"params":100}
{"event":"train","step":10,"loss":0.9}
{"event":"eval","step":10,"val_loss":0.8,"val_ppl":2.2,"val_acc":0.6$3,"items":64}
{"event":"eval","step":20,"val_loss":0.6,"val_ppl":1.8,"val_acc":0.7$3,"items":64}
{"event":"final","step":30,"val_loss":0.5,"val_ppl":1.6,"val_acc":0.8$3,"items":400,"targets":1600,"train_s":1.0,"steps_per_s":30}
EOF
}
mkrun brackets-softmax-T8-s1 softmax 1
mkrun brackets-softmax-T8-s2 softmax 2
mkrun brackets-boltzmann-T8-s1 boltzmann 1
mkrun brackets-boltzmann-T8-s2 boltzmann 2
expect 0 "8 runs in 4 groups" -- "$BIN" plot "$A"
P="$A/plots"
check '[ -f "$P/summary.dat" ] && [ "$(grep -vc "^#" "$P/summary.dat")" = 4 ]' "summary.dat lacks 4 groups"
check '[ -f "$P/brackets_C32_ffn1_vs_T.dat" ]' "brackets_C32_ffn1_vs_T.dat missing"
# two variant blocks of two T each, each T over 2 seeds
check '[ "$(grep -c "^# variant" "$P/brackets_C32_ffn1_vs_T.dat")" = 2 ] &&
       [ "$(grep -v "^#" "$P/brackets_C32_ffn1_vs_T.dat" | awk "NF && \$2 == 2" | wc -l)" = 4 ]' \
    "brackets_C32_ffn1_vs_T.dat: expected 2 blocks of 2 points over 2 seeds"
# softmax at T=4: seeds 0.8800 and 0.8900 -> mean 88.5 %, sd 0.7071
check 'awk "/variant softmax/ { s = 1 } s && \$1 == 4 { exit !(\$3 > 88.4999 && \$3 < 88.5001 && \$4 > 0.7070 && \$4 < 0.7072) }" "$P/brackets_C32_ffn1_vs_T.dat"' \
    "softmax T=4 mean/sd are not 88.5 / 0.7071"
check '[ -f "$P/curves_brackets_T8_C32_ffn1.dat" ] &&
       [ "$(grep -v "^#" "$P/curves_brackets_T8_C32_ffn1.dat" | awk "NF" | wc -l)" = 6 ]' \
    "learning curves: expected 3 steps x 2 variants"
check 'for g in acc_vs_T learning_curves; do [ -f "$P/$g.gp" ] || exit 1; done' "plot scripts missing"
check '[ ! -e "$P/width_T4.gp" ]' "a width plot for a single C"
if [ $GNUPLOT = 1 ]; then
    check 'png_ok "$A/acc_vs_T.png" && png_ok "$A/learning_curves.png"' "acc_vs_T.png or learning_curves.png missing"
    check '[ ! -e "$A/ppl_vs_T.png" ]' "ppl_vs_T.png without charlm results"
fi
# a second width at T=4 gives width_T4.png (and the vs-T plot moves to C=64)
echo "brackets,softmax,4,64,1,1,100,accuracy,0.95,0.3,1.3,0.95,400,1600,1.5" >>"$A/results.csv"
echo "brackets,softmax,4,64,1,2,100,accuracy,,,,,,," >>"$A/results.csv" # a failed run: no value
expect 0 "1 without a value left out" -- "$BIN" plot "$A"
check '[ -f "$P/brackets_T4_ffn1_vs_C.dat" ] && [ -f "$P/width_T4.gp" ] && [ ! -e "$P/width_T8.gp" ]' \
    "width files for T=4 only"
[ $GNUPLOT = 1 ] && check 'png_ok "$A/width_T4.png"' "width_T4.png missing"
# --curves-T / --curves-C choose the learning curves' cell (a T = 4 run
# joins the T = 8 runs; by default the largest T is drawn)
mkdir -p "$A/runs/brackets-softmax-T4-s1"
sed 's/"block_size":8/"block_size":4/' "$A/runs/brackets-softmax-T8-s1/metrics.jsonl" \
    >"$A/runs/brackets-softmax-T4-s1/metrics.jsonl"
rm -rf "$P"
expect 0 "" -- "$BIN" plot "$A" --curves-T 4
check '[ -f "$P/curves_brackets_T4_C32_ffn1.dat" ] && [ ! -e "$P/curves_brackets_T8_C32_ffn1.dat" ] &&
       [ "$(grep -v "^#" "$P/curves_brackets_T4_C32_ffn1.dat" | awk "NF" | wc -l)" = 3 ]' \
    "--curves-T 4: expected the T = 4 curves only (3 steps, one variant)"
expect 0 "" -- "$BIN" plot --curves-C=32 "$A"
check '[ -f "$P/curves_brackets_T8_C32_ffn1.dat" ]' "--curves-C 32: the largest T with C = 32 is 8"
rm -rf "$P"
expect 2 "no runs with learning curves at T=8 C=16" -- "$BIN" plot "$A" --curves-T 8 --curves-C 16
check '[ ! -e "$P" ]' "a refused plot wrote its directory"
expect 2 "'--curves-T' needs a value" -- "$BIN" plot "$A" --curves-T
expect 2 "--curves-C: 0 is out of range" -- "$BIN" plot "$A" --curves-C 0
rm -r "$A/runs/brackets-softmax-T4-s1"
# plots/ is plot's own: an earlier call's .dat/.gp files go, other files stay
mkdir -p "$P"
echo old >"$P/curves_brackets_T99_C1_ffn1.dat"
echo mine >"$P/notes.txt"
expect 0 "" -- "$BIN" plot "$A"
check '[ ! -e "$P/curves_brackets_T99_C1_ffn1.dat" ] && [ "$(cat "$P/notes.txt")" = mine ] &&
       [ -f "$P/summary.dat" ]' "stale .dat kept, or a foreign file removed, by a new plot"
# without gnuplot: .dat files, a clear line, exit 0
rm -rf "$P"
expect 0 "gnuplot not found" -- env PATH=/nonexistent "$BIN" plot "$A"
check '[ -f "$P/summary.dat" ] && [ -f "$P/brackets_C64_ffn1_vs_T.dat" ] && [ -f "$P/brackets_T4_ffn1_vs_C.dat" ]' \
    "without gnuplot: .dat files not written"
check '[ -z "$(find "$TMP" -name "*.tmp")" ]' "temporary output files left behind"
# A torn last record (a run killed while appending to its log) is ignored
# without a warning; a damaged line inside the log is reported and skipped.
R="$TMP/torn"
mkdir -p "$R"
cp -r "$A/results.csv" "$A/runs" "$R/"
printf '{"event":"eval","step":40,"val_loss":0.4,"val_ac' >>"$R/runs/brackets-softmax-T8-s1/metrics.jsonl"
out=$(env PATH=/nonexistent "$BIN" plot "$R" 2>&1)
rc=$?
check '[ $rc = 0 ]' "plot with a torn last record exited $rc: $out"
check '! grep -q "warning" <<<"$out"' "a torn last record was warned about: $out"
check '[ "$(grep -v "^#" "$R/plots/curves_brackets_T8_C32_ffn1.dat" | awk "NF" | wc -l)" = 6 ] &&
       ! grep -q "^40 " "$R/plots/curves_brackets_T8_C32_ffn1.dat"' \
    "a torn last record changed the learning curves"
sed -i '3a {"event":"eval","step":15,"val_lo' "$R/runs/brackets-boltzmann-T8-s1/metrics.jsonl"
expect 0 "brackets-boltzmann-T8-s1/metrics.jsonl:4: not JSON, line skipped" -- \
    env PATH=/nonexistent "$BIN" plot "$R"
check '[ "$(grep -v "^#" "$R/plots/curves_brackets_T8_C32_ffn1.dat" | awk "NF" | wc -l)" = 6 ]' \
    "a damaged middle line changed the learning curves"
# bad input: exit 2 naming the file and line
expect 2 "$TMP/nope" -- "$BIN" plot "$TMP/nope"
expect 2 "required" -- "$BIN" plot
mkdir -p "$TMP/empty"
expect 2 "$TMP/empty/results.csv" -- "$BIN" plot "$TMP/empty"
B="$TMP/bad"
mkdir -p "$B"
head -3 "$A/results.csv" >"$B/results.csv"
echo "brackets,softmax,8,32,1,1,100,accuracy" >>"$B/results.csv"
expect 2 "$B/results.csv:4:" -- "$BIN" plot "$B"
head -3 "$A/results.csv" >"$B/results.csv"
echo "brackets,softmax,8,32,1,1,100,accuracy,high,0.3,1.3,0.9,400,1600,1.5" >>"$B/results.csv"
expect 2 "$B/results.csv:4: value 'high' is not a number" -- "$BIN" plot "$B"
echo "task,variant,T" >"$B/results.csv"
expect 2 "$B/results.csv:1: the header lacks column 'C'" -- "$BIN" plot "$B"
head -1 "$A/results.csv" >"$B/results.csv"
echo "brackets,softmax,8,32,1,1,100,accuracy,87,0.3,1.3,0.9,400,1600,1.5" >>"$B/results.csv"
expect 2 "not a fraction" -- "$BIN" plot "$B"
expect 0 "usage:" -- "$BIN" plot --help

echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
