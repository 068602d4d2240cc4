#!/usr/bin/env bash
# Tests of the analysis subcommands: `couplings` on a tiny trained model
# (file contents, row counts, couplings.json, a grid's cell, refusal of a
# softmax checkpoint) and `plot` on a hand-made ablation directory of run
# records (.dat files, PNGs when gnuplot is installed, the message and exit
# 0 when it is not, exit 2 on bad input).
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
# couplings.json: the cell from the checkpoint's config, the run, the means
check 'grep -q "\"cell\":[[:space:]]*\"brackets-T6-C16-ffn1-boltzmann\"" "$C/couplings.json" &&
       grep -q "\"run\":[[:space:]]*\"m\"" "$C/couplings.json" && ! grep -q over_runs "$C/couplings.json"' \
    "couplings.json lacks the cell or the run, or has over_runs for one run"
j1=$(tr -d '\n\t ' <"$C/couplings.json" | grep -o '"n":5,"mean":[-0-9.e]*' | head -1 | cut -d: -f3)
check 'awk -v a="$j1" -v b="$d1" "BEGIN { exit !(a - b < 5e-5 && b - a < 5e-5) }"' \
    "couplings.json mean at distance 1 ($j1) differs from distance.csv ($d1)"
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
expect 2 "option '--ckpt' (or '--grid') is required" -- "$BIN" couplings --out "$TMP/cx"
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

# --grid: the grid's exact boltzmann cell with the largest T (with the FFN),
# over its finished seeds that kept their checkpoint
GR="$TMP/gr"
"$BIN" ablate --task brackets --attn softmax,boltzmann --T 4,6 --embd 8 --seeds 2 --steps 20 --batch 8 \
    --out "$GR" >/dev/null 2>&1
expect 0 "couplings of 2 runs" -- "$BIN" couplings --grid "$GR"
check 'grep -q "\"cell\":[[:space:]]*\"brackets-T6-C8-ffn1-boltzmann\"" "$GR/couplings/couplings.json" &&
       grep -q over_runs "$GR/couplings/couplings.json"' "--grid did not take the T = 6 boltzmann cell"
rm "$GR/runs/brackets-T6-C8-ffn1-boltzmann-s2/model.safetensors"
expect 0 "couplings of $GR/runs/brackets-T6-C8-ffn1-boltzmann-s1/model.safetensors" -- \
    "$BIN" couplings --grid "$GR" --out "$TMP/g1"
expect 2 "has no finished exact boltzmann run with its checkpoint" -- "$BIN" couplings --grid "$TMP/abl-none"
expect 2 "exclude each other" -- "$BIN" couplings --grid "$GR" --ckpt "$TMP/m/model.safetensors"
expect 2 "--prefer-C needs --grid" -- "$BIN" couplings --ckpt "$TMP/m/model.safetensors" --prefer-C 8

# ----------------------------------------------------------------- plot
A="$TMP/abl"
# record NAME VARIANT T C SEED ACC [STATUS]: a run directory with its run
# record (run.json) and a log with two evaluations and a final one
record() {
    local d="$A/runs/$1" status=${7:-finished}
    mkdir -p "$d"
    local cfg="{\"task\":\"brackets\",\"attn\":\"$2\",\"engine\":\"fast\",\"n_layer\":1,\"n_head\":1,\"n_embd\":$4,\"block_size\":$3,\"vocab_size\":2,\"head\":\"pointer\",\"out_size\":$3,\"ffn\":true,\"kinds\":1,\"n_heldout\":2000,\"data_seed\":\"1234\",\"sampler\":{\"kind\":\"exact\"}}"
    local tr="{\"steps\":100,\"batch\":8,\"lr\":0.003,\"min_lr\":0.0003,\"warmup\":5,\"weight_decay\":0.1,\"beta1\":0.9,\"beta2\":0.99,\"clip\":1,\"j_init_std\":0,\"seed\":\"$5\",\"eval_every\":10,\"eval_items\":64,\"log_every\":10,\"save_every\":10,\"threads\":1}"
    printf '{"format":"boltzattn-run","version":1,"status":"%s","step":100,"train_s":1.5,"params":100,"config":%s,"train":%s,"result":{"val_loss":0.3,"val_ppl":1.35,"val_acc":%s,"items":400,"targets":1600}}\n' \
        "$status" "$cfg" "$tr" "$6" >"$d/run.json"
    cat >"$d/metrics.jsonl" <<EOF
{"event":"config","config":$cfg,"train":$tr,"params":100}
{"event":"train","step":10,"loss":0.9}
{"event":"eval","step":10,"val_loss":0.8,"val_ppl":2.2,"val_acc":0.6$5,"items":64}
{"event":"eval","step":20,"val_loss":0.6,"val_ppl":1.8,"val_acc":0.7$5,"items":64}
{"event":"final","step":30,"val_loss":0.5,"val_ppl":1.6,"val_acc":0.8$5,"items":400,"targets":1600,"train_s":1.0,"steps_per_s":30}
EOF
}
mkdir -p "$A"
for v in softmax boltzmann; do
    for t in 4 8; do
        for s in 1 2; do
            acc=$(awk -v t=$t -v s=$s -v v=$v 'BEGIN { printf "%.4f", 0.95 - 0.02 * t + 0.01 * s + (v == "boltzmann") * 0.02 }')
            record "brackets-T$t-C32-$v-s$s" $v $t 32 $s $acc
        done
    done
done
# only the T = 8 runs' logs make learning curves
for d in "$A"/runs/*-T4-*; do rm "$d/metrics.jsonl"; done
expect 0 "$A: 8 runs in 4 groups" -- "$BIN" plot "$A"
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
       [ "$(grep -v "^#" "$P/curves_brackets_T8_C32_ffn1.dat" | awk "NF == 6" | wc -l)" = 6 ]' \
    "learning curves: expected 3 steps x 2 variants over the runs"
# beside the mean, each run's own periodic curve (a thin line), in seed
# order: with a few seeds a mean and sd hide a split (one seed solving the
# task, one not); softmax's seeds reach 61 and 62 % at step 10
check 'awk "/^# variant softmax\$/ { v = 1 } /^# variant boltzmann/ { v = 0 }
            /run of seed/ { s = \$NF; o = o s \",\" }
            v && NF == 2 { r[s] = r[s] \$1 \":\" \$2 \" \" }
            END { exit !(r[1] == \"10:61 20:71 \" && r[2] == \"10:62 20:72 \" && o == \"1,2,1,2,\") }" \
       "$P/curves_brackets_T8_C32_ffn1.dat"' \
    "learning curves: each run's own curve missing, wrong or out of seed order"
# the final evaluation (all 400 items) is a block of its own, drawn as a
# point apart, never joined to the periodic ones (64 items): per variant a
# block of 2 periodic points and a block of 1 final point
check 'awk "/^# periodic evaluations, over/ { b = \"p\" } /run of seed/ { b = \"r\" }
            /^# final/ { b = \"f\" }
            /^[0-9]/ { n[b]++; if (b == \"f\" && \$1 != 30) exit 1 }
            END { exit !(n[\"p\"] == 4 && n[\"r\"] == 8 && n[\"f\"] == 2) }" \
       "$P/curves_brackets_T8_C32_ffn1.dat"' \
    "learning curves: the final evaluations are not in blocks of their own"
# the means as lines without bars, each run as a thin line without a key
# entry, the finals apart with the seeds' range (min, max) as their bars
check '[ "$(grep -c "using (\$1[-+][0-9.]*):3:5:6 with yerrorbars .* notitle" "$P/learning_curves.gp")" = 2 ] &&
       [ "$(grep -c "using 1:3 with linespoints" "$P/learning_curves.gp")" = 2 ] &&
       [ "$(grep -c "using 1:2 with lines linewidth 1 .* notitle" "$P/learning_curves.gp")" = 4 ] &&
       ! grep -q "yerrorlines" "$P/learning_curves.gp" &&
       grep -q "title \"final, all 400 items\"" "$P/learning_curves.gp"' \
    "learning_curves.gp: runs, means or finals not drawn as they should"
# every figure says its budget and the metric's direction
check 'grep -q "brackets, T=8, C=32: 2 seeds, 100 steps" "$P/learning_curves.gp" &&
       grep -q "same 64 items" "$P/learning_curves.gp" &&
       grep -q "(higher is better)" "$P/learning_curves.gp" &&
       grep -q "2 seeds, 100 steps" "$P/acc_vs_T.gp" && grep -q "(higher is better)" "$P/acc_vs_T.gp"' \
    "a figure without seeds, steps or the metric's direction"
check 'for g in acc_vs_T learning_curves; do [ -f "$P/$g.gp" ] || exit 1; done' "plot scripts missing"
check '[ ! -e "$P/width_T4.gp" ]' "a width plot for a single C"
if [ $GNUPLOT = 1 ]; then
    check 'png_ok "$A/acc_vs_T.png" && png_ok "$A/learning_curves.png"' "acc_vs_T.png or learning_curves.png missing"
    check '[ ! -e "$A/ppl_vs_T.png" ]' "ppl_vs_T.png without charlm results"
fi
# a second width at T=4 gives width_T4.png (and the vs-T plot moves to C=64);
# an unfinished run is no result
record brackets-T4-C64-softmax-s1 softmax 4 64 1 0.95
rm "$A/runs/brackets-T4-C64-softmax-s1/metrics.jsonl"
record brackets-T4-C64-softmax-s2 softmax 4 64 2 0.5 running
rm "$A/runs/brackets-T4-C64-softmax-s2/metrics.jsonl"
expect 0 "$A: 9 runs in 5 groups" -- "$BIN" plot "$A"
check '[ -f "$P/brackets_T4_ffn1_vs_C.dat" ] && [ -f "$P/width_T4.gp" ] && [ ! -e "$P/width_T8.gp" ]' \
    "width files for T=4 only"
[ $GNUPLOT = 1 ] && check 'png_ok "$A/width_T4.png"' "width_T4.png missing"
# --curves-T / --curves-C choose the learning curves' cell (a T = 4 run
# joins the T = 8 runs; by default the largest T is drawn)
cp "$A/runs/brackets-T8-C32-softmax-s1/metrics.jsonl" "$A/runs/brackets-T4-C32-softmax-s1/"
rm -rf "$P"
expect 0 "" -- "$BIN" plot "$A" --curves-T 4
check '[ -f "$P/curves_brackets_T4_C32_ffn1.dat" ] && [ ! -e "$P/curves_brackets_T8_C32_ffn1.dat" ] &&
       [ "$(grep -v "^#" "$P/curves_brackets_T4_C32_ffn1.dat" | awk "NF == 6" | wc -l)" = 3 ] &&
       [ "$(grep -v "^#" "$P/curves_brackets_T4_C32_ffn1.dat" | awk "NF == 2" | wc -l)" = 2 ]' \
    "--curves-T 4: expected the T = 4 curves only (3 steps, one variant, one run)"
expect 0 "" -- "$BIN" plot --curves-C=32 "$A"
check '[ -f "$P/curves_brackets_T8_C32_ffn1.dat" ]' "--curves-C 32: the largest T with C = 32 is 8"
rm -rf "$P"
expect 2 "no runs with learning curves at T=8 C=16" -- "$BIN" plot "$A" --curves-T 8 --curves-C 16
check '[ ! -e "$P" ]' "a refused plot wrote its directory"
expect 2 "'--curves-T' needs a value" -- "$BIN" plot "$A" --curves-T
expect 2 "--curves-C: 0 is out of range" -- "$BIN" plot "$A" --curves-C 0
rm "$A/runs/brackets-T4-C32-softmax-s1/metrics.jsonl"
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
cp -r "$A/runs" "$R/"
printf '{"event":"eval","step":40,"val_loss":0.4,"val_ac' >>"$R/runs/brackets-T8-C32-softmax-s1/metrics.jsonl"
out=$(env PATH=/nonexistent "$BIN" plot "$R" 2>&1)
rc=$?
check '[ $rc = 0 ]' "plot with a torn last record exited $rc: $out"
check '! grep -q "warning" <<<"$out"' "a torn last record was warned about: $out"
check '[ "$(grep -v "^#" "$R/plots/curves_brackets_T8_C32_ffn1.dat" | awk "NF == 6" | wc -l)" = 6 ] &&
       ! grep -q "^40 " "$R/plots/curves_brackets_T8_C32_ffn1.dat"' \
    "a torn last record changed the learning curves"
sed -i '3a {"event":"eval","step":15,"val_lo' "$R/runs/brackets-T8-C32-boltzmann-s1/metrics.jsonl"
expect 0 "brackets-T8-C32-boltzmann-s1/metrics.jsonl:4: not JSON, line skipped" -- \
    env PATH=/nonexistent "$BIN" plot "$R"
check '[ "$(grep -v "^#" "$R/plots/curves_brackets_T8_C32_ffn1.dat" | awk "NF == 6" | wc -l)" = 6 ]' \
    "a damaged middle line changed the learning curves"
# a charlm learning curve within a decade of perplexity (9.6 to 7.0) on its
# log axis: five or more labelled tics at one round step, not one label
LM="$TMP/lm"
d="$LM/runs/charlm-T4-C8-softmax-s1"
mkdir -p "$d"
cfg='{"task":"charlm","attn":"softmax","engine":"fast","n_layer":1,"n_head":1,"n_embd":8,"block_size":4,"vocab_size":3,"head":"token","out_size":3,"ffn":true,"kinds":1,"n_heldout":20,"data_seed":"1234","vocab":[97,98,99],"sampler":{"kind":"exact"}}'
tr='{"steps":30,"batch":8,"lr":0.003,"min_lr":0.0003,"warmup":5,"weight_decay":0.1,"beta1":0.9,"beta2":0.99,"clip":1,"j_init_std":0,"seed":"1","eval_every":10,"eval_items":64,"log_every":10,"save_every":10,"threads":1}'
printf '{"format":"boltzattn-run","version":1,"status":"finished","step":30,"train_s":1,"params":100,"config":%s,"train":%s,"result":{"val_loss":1.95,"val_ppl":7.0,"val_acc":0.3,"items":20,"targets":80}}\n' "$cfg" "$tr" >"$d/run.json"
printf '{"event":"config","config":%s,"train":%s,"params":100}\n' "$cfg" "$tr" >"$d/metrics.jsonl"
printf '{"event":"eval","step":%d,"val_loss":2,"val_ppl":%s,"val_acc":0.3,"items":64}\n' 10 9.6 20 8.0 >>"$d/metrics.jsonl"
echo '{"event":"final","step":30,"val_loss":1.95,"val_ppl":7.0,"val_acc":0.3,"items":20,"targets":80,"train_s":1,"steps_per_s":30}' >>"$d/metrics.jsonl"
expect 0 "" -- env PATH=/nonexistent "$BIN" plot "$LM"
tics=$(grep "^set ytics (" "$LM/plots/learning_curves.gp" 2>/dev/null | tr -cd , | wc -c)
check '[ "$tics" -ge 4 ] && [ "$tics" -le 10 ]' "learning_curves.gp: $((tics + 1)) y tics for 7.0 to 9.6, expected 5 to 11"
check 'grep -q "^set ytics (7, 7.5, 8, 8.5, 9, 9.5)" "$LM/plots/learning_curves.gp"' \
    "learning_curves.gp: expected tics 7 to 9.5 in steps of 0.5"
# bad input: exit 2 naming the file and line
expect 2 "$TMP/nope" -- "$BIN" plot "$TMP/nope"
expect 2 "required" -- "$BIN" plot
mkdir -p "$TMP/empty"
expect 2 "no finished runs with a run record under $TMP/empty/runs" -- "$BIN" plot "$TMP/empty"
# a damaged run record: named in a warning, the run left out
B="$TMP/bad"
mkdir -p "$B/runs"
cp -r "$A/runs/brackets-T8-C32-softmax-s1" "$A/runs/brackets-T8-C32-softmax-s2" "$B/runs/"
echo '{"format":"boltzattn-run","status":"finished"' >"$B/runs/brackets-T8-C32-softmax-s2/run.json"
expect 0 "brackets-T8-C32-softmax-s2/run.json is not valid JSON; run left out" -- \
    env PATH=/nonexistent "$BIN" plot "$B"
sed -i 's/"block_size":8/"block_size":-3/' "$B/runs/brackets-T8-C32-softmax-s1/run.json"
expect 2 "no finished runs" -- env PATH=/nonexistent "$BIN" plot "$B"
expect 0 "usage:" -- "$BIN" plot --help

echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
