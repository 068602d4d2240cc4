#!/usr/bin/env bash
# Tests of `boltzattn dqa`: the CSV's columns and values on random instances
# (TV in [0, 1], KL >= 0, beta_eff > 0 and increasing with tau for short
# quenches, Boltzmann-like output while beta_eff <= 0.1, mean rows that are
# the means of the instance rows), determinism, the plot files (PNG when
# gnuplot is installed; a message and exit 0 when it is not), a checkpoint's
# couplings and fields, and the exit codes of bad input.
# usage: tests/dqa.sh PATH/TO/boltzattn
set -u
BIN=${1:?usage: dqa.sh PATH/TO/boltzattn}
. "$(dirname "$0")/lib.sh"
check() { if eval "$1" 2>/dev/null; then ok; else bad "$2"; fi; }

if command -v gnuplot >/dev/null 2>&1; then GNUPLOT=1; else GNUPLOT=0; echo "note: gnuplot not installed, PNG checks skipped"; fi
png_ok() { [ -s "$1" ] && [ "$(head -c 4 "$1" | tail -c 3)" = "PNG" ]; }

# ------------------------------------------------------- random instances
D="$TMP/d"
K=3
expect 0 "closest to the beta = 1 target" -- "$BIN" dqa --n 6 --instances $K --seed 3 \
    --tau 0.1,0.2,0.4,1 --steps 50 --lambda 1,2 --out "$D"
CSV="$D/dqa.csv"
check '[ "$(head -1 "$CSV")" = "instance,n,order,gamma,lambda,steps,tau,tv,kl,beta_eff,r2,tv_beta_eff,tv_trotter" ]' \
    "dqa.csv header"
check 'awk -F, "NR > 1 && \$13 != \"nan\" { exit 1 }" "$CSV"' "tv_trotter is not nan without --ref-steps"
S=8 # 4 tau x 1 M x 2 lambda
check '[ "$(tail -n +2 "$CSV" | wc -l)" = $(((K + 2) * S)) ]' \
    "dqa.csv has $(tail -n +2 "$CSV" | wc -l) rows, expected $(((K + 2) * S))"
check '[ "$(grep -c "^mean," "$CSV")" = $S ] && [ "$(grep -c "^sd," "$CSV")" = $S ]' \
    "dqa.csv lacks one mean and one sd row per setting"
check 'awk -F, "NR > 1 && (\$2 != 6 || \$3 != 2 || \$4 != 1 || \$6 != 50) { exit 1 }" "$CSV"' \
    "n, order, gamma or steps columns wrong"
# value ranges on every instance and mean row
check 'awk -F, "NR > 1 && \$1 != \"sd\" && !(\$8 >= 0 && \$8 <= 1 && \$9 >= 0 && \$10 > 0 && \$11 >= 0 && \$11 <= 1 && \$12 >= 0 && \$12 <= 1) { exit 1 }" "$CSV"' \
    "a row with TV outside [0,1], KL < 0, beta_eff <= 0 or r2 outside [0,1]"
# beta_eff grows with tau (each lambda, mean rows; the CSV lists tau ascending)
check 'awk -F, "\$1 == \"mean\" { if (\$5 == lam && \$10 <= prev) exit 1; lam = \$5; prev = \$10 }" "$CSV"' \
    "mean beta_eff does not increase with tau"
# short quenches are hot and Boltzmann-like: beta_eff < 0.05 at tau = 0.1, and
# TV to Boltzmann(beta_eff) < 0.03 wherever beta_eff <= 0.1 (lambda = 1)
check 'awk -F, "\$1 == \"mean\" && \$7 == 0.1 && !(\$10 < 0.05) { exit 1 }" "$CSV"' \
    "beta_eff at tau = 0.1 is not below 0.05"
check 'awk -F, "\$1 == \"mean\" && \$5 == 1 && \$10 <= 0.1 && !(\$12 < 0.03) { exit 1 }" "$CSV"' \
    "output not Boltzmann-like (TV to beta_eff >= 0.03) where beta_eff <= 0.1"
# the quench is far from the beta = 1 target (TV > 0.2 everywhere here)
check 'awk -F, "\$1 == \"mean\" && !(\$8 > 0.2) { exit 1 }" "$CSV"' \
    "a short quench came within 0.2 TV of the beta = 1 target"
# mean rows are the means of the instance rows (tv column)
check 'awk -F, -v K=$K "NR > 1 && \$1 ~ /^[0-9]+\$/ { s[\$5\",\"\$7] += \$8 }
       \$1 == \"mean\" { d = s[\$5\",\"\$7] / K - \$8; if (d > 1e-5 || d < -1e-5) exit 1 }" "$CSV"' \
    "mean rows are not the means of the instance rows"
check '[ -s "$D/dqa.dat" ] && [ -s "$D/dqa.gp" ]' "dqa.dat or dqa.gp missing"
check '[ "$(grep -c "^0\.1 " "$D/dqa.dat")" = 2 ]' "dqa.dat lacks one block per curve"
if [ $GNUPLOT = 1 ]; then
    check 'png_ok "$D/dqa.png"' "dqa.png missing or not a PNG"
fi
# same seed, same numbers
expect 0 "" -- "$BIN" dqa --n 6 --instances $K --seed 3 --tau 0.1,0.2,0.4,1 --steps 50 \
    --lambda 1,2 --out "$TMP/d2"
check 'cmp -s "$CSV" "$TMP/d2/dqa.csv"' "same seed gave a different dqa.csv"
# a single setting, first order
expect 0 "" -- "$BIN" dqa --n 4 --instances 1 --tau 0.5 --steps 20 --order 1 --out "$TMP/d3"
check '[ "$(tail -n +2 "$TMP/d3/dqa.csv" | wc -l)" = 3 ] && awk -F, "NR == 2 && \$3 != 1 { exit 1 }" "$TMP/d3/dqa.csv"' \
    "single-setting CSV"
# --ref-steps: the Trotter error of second order falls as 1/M^2 (ratio 4 per
# doubling; band [3, 5])
expect 0 "TV(M, M_ref)" -- "$BIN" dqa --n 5 --instances 2 --tau 1.5 --steps 10,20,40 \
    --ref-steps 2000 --out "$TMP/t"
check 'awk -F, "\$1 == \"mean\" { if (prev && !(prev / \$13 > 3 && prev / \$13 < 5)) exit 1; prev = \$13 }
       END { if (!prev) exit 1 }" "$TMP/t/dqa.csv"' \
    "tv_trotter does not fall as 1/M^2 with --ref-steps"
# without gnuplot on PATH: CSV written, one clear line, exit 0
expect 0 "gnuplot not found: CSV written, plot skipped" -- env PATH=/nonexistent "$BIN" dqa \
    --n 4 --instances 2 --tau 0.5,1 --out "$TMP/d4"
check '[ -s "$TMP/d4/dqa.csv" ] && [ ! -e "$TMP/d4/dqa.png" ]' "no-gnuplot run: CSV missing or PNG present"

# ------------------------------------------------------------ checkpoint
T=6
expect 0 "final: accuracy" -- "$BIN" train --task brackets --attn boltzmann --T $T --embd 16 \
    --steps 20 --batch 8 --j-init-std 0.3 --quiet --out "$TMP/m"
expect 0 "fields check: h and J give the model's layer-0 attention" -- "$BIN" dqa \
    --ckpt "$TMP/m/model.safetensors" --instances 2 --tau 0.5,1 --out "$TMP/c"
check 'awk -F, "NR > 1 && \$2 != $T { exit 1 }" "$TMP/c/dqa.csv"' "checkpoint CSV: n is not T = $T"
expect 0 "" -- "$BIN" dqa --ckpt "$TMP/m/model.safetensors" --n 4 --instances 1 --tau 1 --out "$TMP/c2"
check 'awk -F, "NR > 1 && \$2 != 4 { exit 1 }" "$TMP/c2/dqa.csv"' "checkpoint CSV: --n 4 not honoured"
expect 0 "" -- "$BIN" train --task brackets --attn softmax --T $T --embd 16 --steps 2 --batch 8 \
    --quiet --out "$TMP/s"
expect 2 "has no couplings J" -- "$BIN" dqa --ckpt "$TMP/s/model.safetensors" --out "$TMP/x"
expect 2 "--layer 1" -- "$BIN" dqa --ckpt "$TMP/m/model.safetensors" --layer 1 --out "$TMP/x"
expect 2 "--head 2" -- "$BIN" dqa --ckpt "$TMP/m/model.safetensors" --head 2 --out "$TMP/x"
expect 2 "--n" -- "$BIN" dqa --ckpt "$TMP/m/model.safetensors" --n 7 --out "$TMP/x"
expect 2 "--j-std" -- "$BIN" dqa --ckpt "$TMP/m/model.safetensors" --j-std 1 --out "$TMP/x"
expect 2 "--instances 100000" -- "$BIN" dqa --ckpt "$TMP/m/model.safetensors" --instances 100000 --out "$TMP/x"
expect 2 "nonexistent" -- "$BIN" dqa --ckpt "$TMP/nonexistent.safetensors" --out "$TMP/x"

# ------------------------------------------------------------- bad input
expect 2 "--tau" -- "$BIN" dqa --tau 0,1 --out "$TMP/x"
expect 2 "--tau" -- "$BIN" dqa --tau 1,,x --out "$TMP/x"
expect 2 "--steps" -- "$BIN" dqa --steps 1.5 --out "$TMP/x"
expect 2 "--lambda" -- "$BIN" dqa --lambda -1 --out "$TMP/x"
expect 2 "--order" -- "$BIN" dqa --order 3 --out "$TMP/x"
expect 2 "--n" -- "$BIN" dqa --n 25 --out "$TMP/x"
expect 2 "--gamma" -- "$BIN" dqa --gamma 0 --out "$TMP/x"
expect 2 "--head needs --ckpt" -- "$BIN" dqa --head 1 --out "$TMP/x"
expect 2 "unknown option '--bogus'" -- "$BIN" dqa --bogus
expect 2 "--out must not be empty" -- "$BIN" dqa --out ""
expect 0 "usage: boltzattn dqa" -- "$BIN" dqa --help
# an output directory that cannot be made is a runtime failure
touch "$TMP/file"
expect 1 "" -- "$BIN" dqa --n 3 --instances 1 --tau 1 --out "$TMP/file/sub"

echo "dqa.sh: $pass passed, $failed failed"
[ $failed -eq 0 ]
