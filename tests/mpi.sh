#!/usr/bin/env bash
# The tool under MPI (issue 18), on this machine over loopback:
# - data-parallel `train` with N = 2, 3, 4 ranks against one process with
#   the same global batch: the losses of the first 50 steps agree to float
#   rounding (the worst relative difference is printed); for a fixed N the
#   run is bit-reproducible; only rank 0 writes and speaks;
# - a rank killed with SIGKILL mid-run ends the job non-zero, naming it;
#   the run resumes (with the same N: the weights of the uninterrupted run,
#   to the bit; with another N: it finishes);
# - a stop asked with SIGTERM stops every rank at one save point;
# - a batch the ranks cannot share, a command that does not run on ranks;
# - ranks started with different settings (an MPMD launch), for train and
#   ablate: every rank stops before any work with exit code 2, within a
#   timeout, rank 0 naming the setting that differs; a refusal on one rank
#   only (a missing data file, a bad option, --help) or a locked output
#   directory on rank 0 ends every rank, the failed rank's words shown;
# - `ablate` with 2 ranks trains the grid of one process, cell for cell.
# Skips (77) where the tool was built without MPI or mpirun is missing.
BIN=${1:?usage: mpi.sh PATH/TO/boltzattn}
MPIRUN=${2:-mpirun}
. "$(dirname "$0")/lib.sh"

if ! command -v "$MPIRUN" >/dev/null 2>&1; then
    echo "SKIP: $MPIRUN not found (apt-get install openmpi-bin)"; exit 77
fi
if ! ldd "$BIN" 2>/dev/null | grep -q libmpi; then
    echo "SKIP: $BIN was built without MPI (install libopenmpi-dev and rebuild)"; exit 77
fi
# Open MPI refuses root unless told (CI runs as root); loopback only; a
# sanitized tool would report Open MPI's own allocations as leaks
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
unset OMP_NUM_THREADS
run_np() { local n=$1; shift; "$MPIRUN" --oversubscribe --bind-to none -np "$n" "$BIN" "$@"; }
# in the background, as mpirun itself ($! is mpirun: signals go to it)
bg_np() { ( exec "$MPIRUN" --oversubscribe --bind-to none -np "$@" ) & }

ARGS=(--task brackets --attn boltzmann --T 8 --embd 16 --heads 2 --steps 50 --batch 12
      --log-every 1 --eval-every 25 --eval-items 24 --threads 1 --quiet)

# ---- the losses against one process
"$BIN" train "${ARGS[@]}" --out "$TMP/n1" >/dev/null 2>&1 || bad "single-process run failed"
for n in 2 3 4; do
    out=$(run_np $n train "${ARGS[@]}" --out "$TMP/n$n" 2>&1) || { bad "np $n failed: $out"; continue; }
    [ "$(grep -c '^checkpoint:' <<<"$out")" = 1 ] && ok || bad "np $n: not one final report: $out"
    worst=$(python3 - "$TMP/n1/metrics.jsonl" "$TMP/n$n/metrics.jsonl" <<'EOF'
import json, sys
def losses(p):
    return [r["loss"] for r in map(json.loads, open(p)) if r["event"] == "train"]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 50, (len(a), len(b))
print("%.3e" % max(abs(x - y) / abs(x) for x, y in zip(a, b)))
EOF
    ) || { bad "np $n: cannot compare the logs"; continue; }
    echo "np $n: worst relative difference of the 50 losses from one process: $worst"
    awk -v w="$worst" 'BEGIN { exit !(w < 1e-5) }' && ok || bad "np $n: losses differ by $worst"
    # one writer: the run directory holds one run's files, no stray ones
    extra=$(ls -A "$TMP/n$n" | grep -Ev '^(run.json|metrics.jsonl|model.safetensors|state.safetensors)$')
    [ -z "$extra" ] && ok || bad "np $n: unexpected files in the run directory: $extra"
done
# the final evaluation is shared by batch and added in one process's order:
# on the same weights it is one process's to the bit
"$BIN" eval --ckpt "$TMP/n3/model.safetensors" --threads 1 >"$TMP/eval3.txt" 2>&1
python3 - "$TMP/n3/run.json" "$TMP/eval3.txt" <<'EOF' && ok || bad "np 3: final evaluation differs from eval"
import json, re, sys
res = json.load(open(sys.argv[1]))["result"]
line = open(sys.argv[2]).read()
m = re.search(r"loss ([0-9.]+)", line)
assert m and abs(float(m.group(1)) - res["val_loss"]) < 1e-4, (line, res)
EOF
run_np 2 train "${ARGS[@]}" --out "$TMP/n2b" >/dev/null 2>&1 || bad "np 2 repeat failed"
cmp -s "$TMP/n2/model.safetensors" "$TMP/n2b/model.safetensors" && ok ||
    bad "np 2: two runs gave different weights"

# ---- refusals
expect 2 "does not divide among 5 ranks" -- run_np 5 train "${ARGS[@]}" --out "$TMP/n5"
[ ! -e "$TMP/n5/run.json" ] && ok || bad "a refused run left a run record"
expect 2 "does not run on several MPI ranks" -- run_np 2 eval --ckpt "$TMP/n1/model.safetensors"
expect 2 "already holds" -- run_np 2 train "${ARGS[@]}" --out "$TMP/n2"

# ---- ranks that disagree: mpmd N ARGS0... :: ARGS1... starts N ranks
# with the first command line and one more with the second
mpmd() {
    local n=$1 a=() b=() seen=0
    shift
    for x in "$@"; do
        if [ "$x" = "::" ]; then seen=1
        elif [ $seen = 0 ]; then a+=("$x")
        else b+=("$x"); fi
    done
    timeout 60 "$MPIRUN" --oversubscribe --bind-to none -np "$n" "$BIN" "${a[@]}" : -np 1 "$BIN" "${b[@]}"
}
# refused CODE PATTERN DIR N ARGS0... :: ARGS1...: the job ends with CODE
# within the timeout, its output names PATTERN, nothing crashed or aborted,
# and DIR (if not empty) holds no run record
refused() {
    local code=$1 pat=$2 dir=$3 out rc
    shift 3
    out=$(mpmd "$@" 2>&1)
    rc=$?
    [ $rc = "$code" ] && ok || bad "$pat: exit code $rc (124: hung), expected $code: $out"
    grep -qF -- "$pat" <<<"$out" && ok || bad "the output lacks '$pat': $out"
    ! grep -qE 'AddressSanitizer|runtime error:|MPI_ABORT|MPI_ERR|Segmentation|signal [0-9]' <<<"$out" &&
        ok || bad "$pat: a crash or an abort: $out"
    { [ -z "$dir" ] || [ ! -e "$dir/run.json" ]; } && ok || bad "$pat: a refused run left a run record"
}
D=$TMP/dis
SMALL=("${ARGS[@]}" --steps 20 --out "$D")
refused 2 "rank 1's settings differ from rank 0's: T = 10, not 8" "$D" \
    1 train "${SMALL[@]}" :: train "${SMALL[@]}" --T 10
refused 2 "rank 1's settings differ from rank 0's: embd = 32, not 16" "$D" \
    1 train "${SMALL[@]}" :: train "${SMALL[@]}" --embd 32
refused 2 "lr = 0.004, not 0.003" "$D" 1 train "${SMALL[@]}" :: train "${SMALL[@]}" --lr 0.004
refused 2 "seed = 2, not 1" "$D" 1 train "${SMALL[@]}" :: train "${SMALL[@]}" --seed 2
refused 2 "steps = 30, not 20" "$D" 1 train "${SMALL[@]}" :: train "${SMALL[@]}" --steps 30
refused 2 "batch = 24, not 12" "$D" 1 train "${SMALL[@]}" :: train "${SMALL[@]}" --batch 24
refused 2 "attn = softmax, not boltzmann" "$D" 1 train "${SMALL[@]}" :: train "${SMALL[@]}" --attn softmax
refused 2 "engine = reference, not auto" "$D" 1 train "${SMALL[@]}" :: train "${SMALL[@]}" --engine reference
refused 2 "out = $TMP/dis2, not $D" "$D" 1 train "${SMALL[@]}" :: train "${SMALL[@]}" --out "$TMP/dis2"
# the third of three ranks
refused 2 "rank 2's settings differ from rank 0's: eval-every = 5, not 25" "$D" \
    2 train "${SMALL[@]}" :: train "${SMALL[@]}" --eval-every 5
# the data: two charlm texts of one size and alphabet
python3 - "$TMP/a.txt" "$TMP/b.txt" <<'EOF'
import random, sys
for seed, path in enumerate(sys.argv[1:]):
    random.seed(seed)
    open(path, "w").write("".join(random.choice("abcdefgh \n") for _ in range(20000)))
EOF
CHAR=(--task charlm --attn softmax --T 8 --embd 16 --steps 10 --batch 8 --threads 1 --quiet --out "$D")
refused 2 "rank 1's settings differ from rank 0's: data = a text of 20000 bytes" "$D" \
    1 train "${CHAR[@]}" --data "$TMP/a.txt" :: train "${CHAR[@]}" --data "$TMP/b.txt"
# ablate, and two commands
GSMALL=(--task brackets --arm softmax,boltzmann --T 6 --embd 8 --seeds 1 --steps 10 --batch 8
        --eval-every 0 --eval-items 16 --threads 1 --out "$TMP/gd")
refused 2 "rank 1's settings differ from rank 0's: steps = 20, not 10" "" \
    1 ablate "${GSMALL[@]}" :: ablate "${GSMALL[@]}" --steps 20
refused 2 "rank 1's settings differ from rank 0's: T = [8], not [6]" "" \
    1 ablate "${GSMALL[@]}" :: ablate "${GSMALL[@]}" --T 8
[ ! -e "$TMP/gd/grid.json" ] && ok || bad "ablate: ranks that disagree wrote grid.json"
refused 2 "command = train, not ablate" "" 1 ablate "${GSMALL[@]}" :: train "${SMALL[@]}"
# a refusal on one rank only: every rank ends, rank 0 shows why
refused 2 "[rank 1] boltzattn train: cannot read data file $TMP/none.txt" "$D" \
    1 train "${CHAR[@]}" --data "$TMP/a.txt" :: train "${CHAR[@]}" --data "$TMP/none.txt"
refused 2 "[rank 1] boltzattn ablate: --arm" "" \
    1 ablate "${GSMALL[@]}" :: ablate "${GSMALL[@]}" --arm softmax
refused 2 "rank 2 ended its command (exit code 0) without meeting the others" "$D" \
    2 train "${SMALL[@]}" :: train "${SMALL[@]}" --help
# the output directory locked by another process: rank 0 refuses, all end
mkdir -p "$TMP/locked"
python3 - "$TMP/locked/.lock" <<'EOF' &
import fcntl, sys, time
f = open(sys.argv[1], "w")
fcntl.lockf(f, fcntl.LOCK_EX)
open(sys.argv[1] + ".held", "w").close()
time.sleep(60)
EOF
holder=$!
for _ in $(seq 1 500); do [ -e "$TMP/locked/.lock.held" ] && break; sleep 0.01; done
refused 2 "is in use by process $holder" "$TMP/locked" \
    1 train "${SMALL[@]}" --out "$TMP/locked" :: train "${SMALL[@]}" --out "$TMP/locked"
kill $holder 2>/dev/null
wait $holder 2>/dev/null

# ---- a rank killed, then resumed
LONG=(--task brackets --attn boltzmann --T 8 --embd 16 --heads 2 --steps 600 --batch 12
      --save-every 40 --eval-every 300 --log-every 10 --threads 1 --quiet)
run_np 2 train "${LONG[@]}" --out "$TMP/ka" >/dev/null 2>&1 || bad "uninterrupted np 2 run failed"
bg_np 2 "$BIN" train "${LONG[@]}" --out "$TMP/kb" >"$TMP/kb.log" 2>&1
job=$!
wait_records "$TMP/kb" 13 $job
victim=""
for p in $(pgrep -f -- "--out $TMP/kb"); do
    tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && victim=$p
done
if [ -n "$victim" ]; then
    kill -9 "$victim"
    wait $job
    rc=$?
    [ $rc != 0 ] && ok || bad "the job went on after rank 1 was killed"
    grep -q "rank 1" "$TMP/kb.log" && ok || bad "the job's messages do not name rank 1: $(cat "$TMP/kb.log")"
    "$BIN" eval --ckpt "$TMP/kb/model.safetensors" >/dev/null 2>&1 && ok ||
        bad "the checkpoint does not load after the kill"
    step=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' "$TMP/kb/run.json")
    [ "$step" -ge 40 ] && [ "$step" -lt 600 ] && ok || bad "killed run: saved step $step"
    cp -r "$TMP/kb" "$TMP/kc"
    run_np 2 train --resume "$TMP/kb" --threads 1 --quiet >/dev/null 2>&1 && ok || bad "np 2 resume failed"
    cmp -s "$TMP/ka/model.safetensors" "$TMP/kb/model.safetensors" && ok ||
        bad "resumed np 2 weights differ from the uninterrupted np 2 run"
    # another N: the state holds nothing of the ranks
    run_np 3 train --resume "$TMP/kc" --threads 1 --quiet >/dev/null 2>&1 && ok || bad "np 3 resume of an np 2 run failed"
    grep -q '"status":[[:space:]]*"finished"' "$TMP/kc/run.json" && ok || bad "np 3 resume did not finish"
else
    wait $job
    bad "no rank 1 process found to kill (the run ended first?)"
fi

# ---- SIGTERM to the job: every rank stops at the same save point
bg_np 2 "$BIN" train "${LONG[@]}" --steps 100000 --out "$TMP/st" >"$TMP/st.log" 2>&1
job=$!
wait_records "$TMP/st" 5 $job
kill -TERM $job
wait $job
grep -q '"status":[[:space:]]*"stopped"' "$TMP/st/run.json" && ok || bad "SIGTERM: run not stopped: $(cat "$TMP/st/run.json" "$TMP/st.log")"
grep -q "interrupted by signal 15" "$TMP/st.log" && ok || bad "SIGTERM: no message: $(cat "$TMP/st.log")"
! grep -q "MPI_ABORT" "$TMP/st.log" && ok || bad "SIGTERM: an agreed stop aborted the job: $(cat "$TMP/st.log")"
[ "$(grep -c 'signal received' "$TMP/st.log")" = 1 ] && ok || bad "SIGTERM: not one notice: $(cat "$TMP/st.log")"

# ---- ablate on 2 ranks: the cells of one process, bit for bit
GRID=(--task brackets --arm softmax,boltzmann --T 6 --embd 8 --seeds 2 --steps 30 --batch 8
      --eval-every 0 --eval-items 16 --threads 1)
"$BIN" ablate "${GRID[@]}" --out "$TMP/g1" >/dev/null 2>&1 || bad "ablate on one process failed"
out=$(run_np 2 ablate "${GRID[@]}" --out "$TMP/g2" 2>&1) || bad "ablate on 2 ranks failed: $out"
[ "$(grep -c '^results:' <<<"$out")" = 1 ] && ok || bad "ablate np 2: not one results line: $out"
cells=0
for d in "$TMP"/g1/runs/*/; do
    name=$(basename "$d")
    cells=$((cells + 1))
    cmp -s "$d/model.safetensors" "$TMP/g2/runs/$name/model.safetensors" && ok ||
        bad "ablate np 2: cell $name differs from one process's"
done
[ $cells = 4 ] && ok || bad "ablate: $cells cells, expected 4"
python3 - "$TMP/g1/results.json" "$TMP/g2/results.json" <<'EOF' && ok || bad "ablate np 2: results.json differs"
import json, sys
def runs(p):
    j = json.load(open(p))
    rs = j["runs"] if isinstance(j, dict) and "runs" in j else j
    return sorted(json.dumps({k: v for k, v in r.items() if "time" not in k and not k.endswith("_s")},
                             sort_keys=True) for r in rs)
assert runs(sys.argv[1]) == runs(sys.argv[2])
EOF

echo "mpi: $pass passed, $failed failed"
[ $failed = 0 ]
