#!/usr/bin/env bash
# Tests of `boltzattn-lab dqa`: the CSV's columns and values on random instances
# (TV in [0, 1], KL >= 0, beta_eff > 0 and increasing with tau for short
# quenches, Boltzmann-like output while beta_eff <= 0.1, mean rows that are
# the means of the instance rows), determinism, the plot files (PNG when
# gnuplot is installed; a message and exit 0 when it is not), a checkpoint's
# couplings and fields (also of models trained with a sampler), the size
# chosen from a checkpoint (refused above 20 unless asked for), the size
# and memory stated up front and on running out of memory, the progress
# line (terminals only), and the exit codes of bad input.
# usage: tests/dqa.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab
set -u
BIN=${1:?usage: dqa.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab}
LABBIN=${2:?usage: dqa.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab}
. "$(dirname "$0")/lib.sh"
check() { if eval "$1" 2>/dev/null; then ok; else bad "$2"; fi; }

if command -v gnuplot >/dev/null 2>&1; then GNUPLOT=1; else GNUPLOT=0; echo "note: gnuplot not installed, PNG checks skipped"; fi
png_ok() { [ -s "$1" ] && [ "$(head -c 4 "$1" | tail -c 3)" = "PNG" ]; }

# ------------------------------------------------------- random instances
D="$TMP/d"
K=3
expect 0 "closest to the beta = 1 target" -- "$LABBIN" dqa --n 6 --instances $K --seed 3 \
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
expect 0 "" -- "$LABBIN" dqa --n 6 --instances $K --seed 3 --tau 0.1,0.2,0.4,1 --steps 50 \
    --lambda 1,2 --out "$TMP/d2"
check 'cmp -s "$CSV" "$TMP/d2/dqa.csv"' "same seed gave a different dqa.csv"
# a single setting, first order
expect 0 "" -- "$LABBIN" dqa --n 4 --instances 1 --tau 0.5 --steps 20 --order 1 --out "$TMP/d3"
check '[ "$(tail -n +2 "$TMP/d3/dqa.csv" | wc -l)" = 3 ] && awk -F, "NR == 2 && \$3 != 1 { exit 1 }" "$TMP/d3/dqa.csv"' \
    "single-setting CSV"
# --ref-steps: the Trotter error of second order falls as 1/M^2 (ratio 4 per
# doubling; band [3, 5])
expect 0 "TV(M, M_ref)" -- "$LABBIN" dqa --n 5 --instances 2 --tau 1.5 --steps 10,20,40 \
    --ref-steps 2000 --out "$TMP/t"
check 'awk -F, "\$1 == \"mean\" { if (prev && !(prev / \$13 > 3 && prev / \$13 < 5)) exit 1; prev = \$13 }
       END { if (!prev) exit 1 }" "$TMP/t/dqa.csv"' \
    "tv_trotter does not fall as 1/M^2 with --ref-steps"
# without gnuplot on PATH: CSV written, one clear line, exit 0
expect 0 "gnuplot not found: CSV written, plot skipped" -- env PATH=/nonexistent "$LABBIN" dqa \
    --n 4 --instances 2 --tau 0.5,1 --out "$TMP/d4"
check '[ -s "$TMP/d4/dqa.csv" ] && [ ! -e "$TMP/d4/dqa.png" ]' "no-gnuplot run: CSV missing or PNG present"

# ------------------------------------------------------------ checkpoint
T=6
expect 0 "final: accuracy" -- "$BIN" train --task brackets --attn boltzmann --T $T --embd 16 \
    --steps 20 --batch 8 --j-init-std 0.3 --quiet --out "$TMP/m"
expect 0 "fields check: h and J give the model's exact layer-0 attention" -- "$LABBIN" dqa \
    --ckpt "$TMP/m/model.safetensors" --instances 2 --tau 0.5,1 --out "$TMP/c"
check 'awk -F, "NR > 1 && \$2 != $T { exit 1 }" "$TMP/c/dqa.csv"' "checkpoint CSV: n is not T = $T"
expect 0 "" -- "$LABBIN" dqa --ckpt "$TMP/m/model.safetensors" --n 4 --instances 1 --tau 1 --out "$TMP/c2"
check 'awk -F, "NR > 1 && \$2 != 4 { exit 1 }" "$TMP/c2/dqa.csv"' "checkpoint CSV: --n 4 not honoured"
expect 0 "" -- "$BIN" train --task brackets --attn softmax --T $T --embd 16 --steps 2 --batch 8 \
    --quiet --out "$TMP/s"
expect 2 "has no couplings J" -- "$LABBIN" dqa --ckpt "$TMP/s/model.safetensors" --out "$TMP/x"
expect 2 "--layer 1" -- "$LABBIN" dqa --ckpt "$TMP/m/model.safetensors" --layer 1 --out "$TMP/x"
expect 2 "--head 2" -- "$LABBIN" dqa --ckpt "$TMP/m/model.safetensors" --head 2 --out "$TMP/x"
expect 2 "--n" -- "$LABBIN" dqa --ckpt "$TMP/m/model.safetensors" --n 7 --out "$TMP/x"
expect 2 "--j-std" -- "$LABBIN" dqa --ckpt "$TMP/m/model.safetensors" --j-std 1 --out "$TMP/x"
expect 2 "--instances 100000" -- "$LABBIN" dqa --ckpt "$TMP/m/model.safetensors" --instances 100000 --out "$TMP/x"
expect 2 "nonexistent" -- "$LABBIN" dqa --ckpt "$TMP/nonexistent.safetensors" --out "$TMP/x"

# ------------------------------------- checkpoints trained with a sampler
# docs/cli.md's example (train --sampler direct --shots 64, then dqa --ckpt),
# made tiny. The fields are checked against the model's exact attention:
# its 64-shot attention differs from the exact one by ~0.05, so a check
# against the model's own (sampled) forward fails here.
expect 0 "final:" -- "$BIN" train --task brackets --attn boltzmann --T 8 --sampler direct \
    --shots 64 --embd 16 --steps 2 --batch 4 --heldout 8 --quiet --out "$TMP/dm"
out=$("$LABBIN" dqa --ckpt "$TMP/dm/model.safetensors" --instances 5 --tau 1 --steps 20 \
    --out "$TMP/dc" 2>&1)
rc=$?
check '[ $rc = 0 ]' "dqa --ckpt of a direct-sampled model exited $rc: $out"
# float weights: the exact fields reproduce the exact weights to ~1e-7
md=$(sed -n "s/^fields check: h and J give the model's exact layer-0 attention of query 7 to within //p" <<<"$out")
check 'awk -v d="$md" "BEGIN { exit !(d != \"\" && d + 0 < 1e-6) }"' \
    "direct-sampled model: fields check '$md' missing or not below 1e-6: $out"
# A model that samples at a T beyond exact inference (30 > 26): its layer-0
# fields are used, and the check is skipped with a note.
expect 0 "final:" -- "$BIN" train --task brackets --attn boltzmann --T 30 --sampler gibbs \
    --embd 16 --steps 1 --batch 2 --heldout 8 --quiet --out "$TMP/g30"
out=$("$LABBIN" dqa --ckpt "$TMP/g30/model.safetensors" --n 5 --instances 2 --tau 1 --steps 20 \
    --out "$TMP/gc" 2>&1)
rc=$?
check '[ $rc = 0 ] && grep -qF "fields check: skipped (no exact inference at the model'"'"'s T = 30)" <<<"$out" &&
       grep -qF "fields check against the model'"'"'s exact attention is skipped" <<<"$out"' \
    "T = 30 gibbs model: rc $rc, or no skipped check and note: $out"
check 'awk -F, "NR > 1 && \$2 != 5 { exit 1 }" "$TMP/gc/dqa.csv"' "T = 30 gibbs model: --n 5 not honoured"

# ------------------------------------------------- size, memory, progress
# A size nobody asked for is refused before any work (the output directory
# is not even made), naming n, the memory and the option that asks for it:
# T = 40 gives n = 24 (the simulator's limit), 5 arrays of 2^24 doubles.
expect 0 "final:" -- "$BIN" train --task brackets --attn coupling --T 40 --sampler gibbs \
    --embd 16 --steps 1 --batch 2 --heldout 8 --quiet --out "$TMP/c40"
expect 2 "so n would be 24 spins (its T, capped at the simulator's 24): 2^24 states, about 640 MiB of memory" \
    -- "$LABBIN" dqa --ckpt "$TMP/c40/model.safetensors" --out "$TMP/big"
expect 2 "give --n 24 to run this size anyway" -- "$LABBIN" dqa --ckpt "$TMP/c40/model.safetensors" \
    --out "$TMP/big"
check '[ ! -e "$TMP/big" ]' "the refused run made its output directory"
# the limit is 20: T = 21 is refused, T = 20 runs by itself
expect 0 "final:" -- "$BIN" train --task brackets --attn coupling --T 21 --sampler gibbs \
    --embd 16 --steps 1 --batch 2 --heldout 8 --quiet --out "$TMP/c21"
expect 2 "so n would be 21 spins (its T): 2^21 states, about 80 MiB" -- "$LABBIN" dqa \
    --ckpt "$TMP/c21/model.safetensors" --out "$TMP/big"
expect 0 "final:" -- "$BIN" train --task brackets --attn coupling --T 20 --sampler gibbs \
    --embd 16 --steps 1 --batch 2 --heldout 8 --quiet --out "$TMP/c20"
expect 0 "size: n = 20 (the checkpoint's T), 2^20 = 1048576 states; memory about 40 MiB at the peak (5 arrays of 2^20 doubles); 1 anneal, 2 Trotter steps in all" \
    -- "$LABBIN" dqa --ckpt "$TMP/c20/model.safetensors" --instances 1 --tau 1 --steps 2 --out "$TMP/c20d"
# asked for, it runs, saying n and the memory before the results
out=$("$LABBIN" dqa --ckpt "$TMP/c40/model.safetensors" --n 21 --instances 1 --tau 1 --steps 2 \
    --ref-steps 3 --out "$TMP/c40d" 2>/dev/null)
rc=$?
check '[ $rc = 0 ] && [ "$(sed -n 2p <<<"$out")" = "size: n = 21 (--n), 2^21 = 2097152 states; memory about 96 MiB at the peak (6 arrays of 2^21 doubles); 2 anneals, 5 Trotter steps in all" ]' \
    "explicit --n 21: rc $rc, or line 2 is not the size line: $out"
check 'awk -F, "NR > 1 && \$2 != 21 { exit 1 }" "$TMP/c40d/dqa.csv"' "explicit --n 21: CSV n is not 21"
# the fields check's exact forward at the model's T is counted too: the fast
# engine keeps 2^(T+1) doubles, 16 MiB at T = 20, even for n = 6
expect 0 "final:" -- "$BIN" train --task brackets --attn boltzmann --T 20 --embd 16 --steps 1 \
    --batch 2 --heldout 8 --quiet --out "$TMP/b20"
expect 0 "model: its exact forward at T = 20 (the fields check) holds about 16 MiB more" -- \
    "$LABBIN" dqa --ckpt "$TMP/b20/model.safetensors" --n 6 --instances 1 --tau 1 --steps 2 \
    --out "$TMP/b20d"
# Under a memory limit the size comes first, and the failure says how much
# was asked for (one thread: the address space of more threads' malloc
# arenas would depend on the machine). ASan cannot run under ulimit -v.
if grep -qa __asan_init "$LABBIN"; then
    echo "note: sanitizer build, memory-limit check skipped"
else
    out=$( (ulimit -v 600000 && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 exec "$LABBIN" dqa --n 24 \
        --instances 1 --tau 1 --steps 1 --threads 1 --out "$TMP/oom") 2>&1)
    rc=$?
    check '[ $rc = 1 ] && grep -qF "size: n = 24 (--n), 2^24 = 16777216 states; memory about 640 MiB" <<<"$out" &&
           grep -qF "out of memory for n = 24: asked for 640 MiB (5 arrays of 2^24 doubles" <<<"$out"' \
        "n = 24 under a 600 MB limit: rc $rc (expected 1), or no size line or amount: $out"
fi
# The progress line: on a terminal (a pty from script(1)) anneal counts and
# an ETA on stderr; nothing when stderr is not a terminal.
err=$("$LABBIN" dqa --n 6 --instances 2 --tau 0.5,1 --steps 20 --out "$TMP/p1" 2>&1 >/dev/null)
check '! grep -qF "ETA" <<<"$err" && ! grep -qF "anneal 1/4" <<<"$err"' \
    "progress line written when stderr is not a terminal: $err"
if script -qec true /dev/null >/dev/null 2>&1; then
    tty=$(script -qec "'$LABBIN' dqa --n 6 --instances 2 --tau 0.5,1 --steps 20 --out '$TMP/p2'" /dev/null 2>&1)
    check 'grep -qF "anneal 1/4    0%" <<<"$tty" && grep -qF "ETA ?" <<<"$tty"' \
        "no progress line with an ETA on a terminal: $tty"
else
    echo "note: script(1) not available, terminal progress check skipped"
fi

# ------------------------------------------------------------- bad input
expect 2 "--tau" -- "$LABBIN" dqa --tau 0,1 --out "$TMP/x"
expect 2 "--tau" -- "$LABBIN" dqa --tau 1,,x --out "$TMP/x"
expect 2 "--steps" -- "$LABBIN" dqa --steps 1.5 --out "$TMP/x"
expect 2 "--lambda" -- "$LABBIN" dqa --lambda -1 --out "$TMP/x"
expect 2 "--order" -- "$LABBIN" dqa --order 3 --out "$TMP/x"
expect 2 "--n" -- "$LABBIN" dqa --n 25 --out "$TMP/x"
expect 2 "--gamma" -- "$LABBIN" dqa --gamma 0 --out "$TMP/x"
expect 2 "--head needs --ckpt" -- "$LABBIN" dqa --head 1 --out "$TMP/x"
expect 2 "unknown option '--bogus'" -- "$LABBIN" dqa --bogus
expect 2 "--out must not be empty" -- "$LABBIN" dqa --out ""
expect 0 "usage: boltzattn-lab dqa" -- "$LABBIN" dqa --help
# an output directory that cannot be made is a runtime failure
touch "$TMP/file"
expect 1 "" -- "$LABBIN" dqa --n 3 --instances 1 --tau 1 --out "$TMP/file/sub"

echo "dqa.sh: $pass passed, $failed failed"
[ $failed -eq 0 ]
