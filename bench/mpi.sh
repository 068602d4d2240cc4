#!/usr/bin/env bash
# Data-parallel training and distributed grids on this machine (issues 18
# and 42), side by side in one run:
# - charlm training of the headline model (Boltzmann attention, exact fast
#   engine, C = 32, batch 32) at T = 16, 20 and 24, and of a long-context
#   model (relative couplings, band engine W = 8, C = 64, batch 8) at
#   T = 256: steps/s with 1 rank x 1 thread, 1 rank x 2 threads and 2 ranks
#   x 1 thread (the same global batch), and what the reductions cost (bytes
#   a step, seconds in them);
# - a small grid (brackets, 2 arms x 2 T x 2 seeds) with 1 and 2 ranks.
# usage: bench/mpi.sh [BIN] [DATA] [OUT.json]
#   STEPS16, STEPS20, STEPS24, STEPS256: steps a measurement (defaults 60,
#   30, 12, 12); ONLY=band: the band rows alone (no fast-engine rows, no
#   grid)
# The results go to OUT.json (default bench-mpi.json) and a table on
# stdout; docs/performance.md ("Data-parallel training") quotes them.
set -euo pipefail
BIN=${1:-build/boltzattn}
DATA=${2:-}
OUTJ=${3:-bench-mpi.json}
if [ -z "$DATA" ]; then
    for d in data/tinyshakespeare.txt ../shared/data/tinyshakespeare.txt; do
        [ -f "$d" ] && DATA=$d && break
    done
fi
[ -n "$DATA" ] && [ -f "$DATA" ] || { echo "no Tiny Shakespeare: run 'make data' or pass DATA" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "mpirun not found (apt-get install openmpi-bin)" >&2; exit 2; }
ldd "$BIN" | grep -q libmpi || { echo "$BIN was built without MPI" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset OMP_NUM_THREADS
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
MPI=(mpirun --bind-to none -np 2)

# one measurement: NAME RANKS THREADS T STEPS -> $TMP/NAME/run.json (+ comm.json)
# T = 256 is the band model, the others the headline model
measure() {
    local name=$1 ranks=$2 threads=$3 T=$4 steps=$5
    local model=(--embd 32 --batch 32)
    [ "$T" = 256 ] && model=(--couplings relative --band 8 --embd 64 --batch 8)
    local args=(train --task charlm --attn boltzmann --T "$T" "${model[@]}"
                --steps "$steps" --eval-every 0 --eval-items 32 --save-every 0 --seed 1
                --threads "$threads" --data "$DATA" --out "$TMP/$name" --quiet)
    if [ "$ranks" = 1 ]; then
        "$BIN" "${args[@]}" >/dev/null
    else
        "${MPI[@]}" "$BIN" "${args[@]}" --comm-stats "$TMP/$name.comm.json" >/dev/null
    fi
}

TS=(16 20 24 256)
[ "${ONLY:-}" = band ] && TS=(256)
for T in "${TS[@]}"; do
    v=STEPS$T
    steps=${!v:-$([ $T = 16 ] && echo 60 || { [ $T = 20 ] && echo 30 || echo 12; })}
    echo "T = $T: $steps steps each (1x1, 1x2, 2x1)" >&2
    measure "T$T-1x1" 1 1 "$T" "$steps"
    measure "T$T-1x2" 1 2 "$T" "$steps"
    measure "T$T-2x1" 2 1 "$T" "$steps"
done

# the grid: 8 cells of brackets, the same with one and two ranks
grid1=0 grid2=0
if [ "${ONLY:-}" != band ]; then
GRID=(ablate --task brackets --arm softmax,boltzmann --T 12,16 --embd 16 --seeds 2 --steps 400
      --batch 32 --eval-every 0 --eval-items 256)
t0=$(date +%s.%N); "$BIN" "${GRID[@]}" --out "$TMP/g1" >/dev/null 2>&1; t1=$(date +%s.%N)
"${MPI[@]}" "$BIN" "${GRID[@]}" --threads 1 --out "$TMP/g2" >/dev/null 2>&1; t2=$(date +%s.%N)
grid1=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'); grid2=$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')
fi

python3 - "$TMP" "$OUTJ" "$grid1" "$grid2" "$(nproc)" "${TS[*]}" <<'EOF'
import json, sys, os
tmp, outj, g1, g2, cpus = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
rows = []
for T in map(int, sys.argv[6].split()):
    r = {"T": T, "model": "band W = 8, C = 64, batch 8" if T == 256 else "fast, C = 32, batch 32"}
    for cfg in ("1x1", "1x2", "2x1"):
        run = json.load(open(os.path.join(tmp, "T%d-%s" % (T, cfg), "run.json")))
        r["params"] = run["params"]
        r["steps_per_s_" + cfg] = run["step"] / run["train_s"]
    c = json.load(open(os.path.join(tmp, "T%d-2x1.comm.json" % T)))
    r["bytes_per_step"] = c["bytes"] / c["steps"]
    r["reduce_s_per_step"] = c["reduce_s"] / c["steps"]
    r["wait_s_per_step"] = c["wait_s"] / c["steps"]
    r["step_s_2x1"] = c["train_s"] / c["steps"]
    rows.append(r)
out = {"cpus": cpus, "training": rows,
       "grid": {"cells": 8, "wall_s_1_rank": g1, "wall_s_2_ranks": g2} if g2 > 0 else None}
json.dump(out, open(outj, "w"), indent=1)
print("%4s %-28s %8s %10s %10s %10s %8s %8s %12s %9s %7s" % ("T", "model", "params", "1x1 st/s",
      "1x2 st/s", "2x1 st/s", "2x1/1x2", "2x1/1x1", "MB/step/rank", "reduce %", "wait %"))
for r in rows:
    print("%4d %-28s %8d %10.3f %10.3f %10.3f %8.2f %8.2f %12.3f %9.1f %7.1f" % (
        r["T"], r["model"], r["params"], r["steps_per_s_1x1"], r["steps_per_s_1x2"], r["steps_per_s_2x1"],
        r["steps_per_s_2x1"] / r["steps_per_s_1x2"], r["steps_per_s_2x1"] / r["steps_per_s_1x1"],
        r["bytes_per_step"] / 1e6, 100 * r["reduce_s_per_step"] / r["step_s_2x1"],
        100 * r["wait_s_per_step"] / r["step_s_2x1"]))
if g2 > 0:
    print("grid of 8 brackets cells: 1 rank %.1f s, 2 ranks x 1 thread %.1f s (%.2fx)" % (g1, g2, g1 / g2))
print("(%s)" % outj)
EOF
