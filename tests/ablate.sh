#!/usr/bin/env bash
# ablate: a tiny grid runs (grid.json, a run record per cell), an
# interrupted grid resumes without rerunning finished cells (the unfinished
# one, its log torn by the kill, runs again with a clean log), the summary
# marks missing runs instead of inventing them, runs of older versions are
# read and get their record, and --share-from copies the finished runs
# another grid has with the same settings. The report is tests/report.sh's.
# usage: tests/ablate.sh PATH/TO/boltzattn
set -u
BIN=${1:?usage: ablate.sh PATH/TO/boltzattn}
. "$(dirname "$0")/lib.sh"
# check NAME EXPR (this script names its checks first)
check() { if eval "$2"; then ok; else bad "$1"; fi; }

G="$TMP/grid"
ARGS=(--task brackets --attn softmax,boltzmann --T 6 --embd 8 --seeds 2 --steps 40 --batch 16 --out "$G")
"$BIN" ablate "${ARGS[@]}" >"$TMP/out1" 2>"$TMP/err1"
check "first run exits 0" '[ $? = 0 ]'
check "4 result rows" '[ "$(tail -n +2 "$G/results.csv" | wc -l)" = 4 ]'
check "csv header" 'head -1 "$G/results.csv" | grep -q "^task,variant,T,C,ffn,seed,steps,metric,value,"'
check "summary has both variants" 'grep -q "| softmax | 2 |" "$G/summary.md" && grep -q "| boltzmann | 2 |" "$G/summary.md"'
check "summary names held-out size" 'grep -q "Held-out set: 4 sequences" "$G/summary.md"'
check "json has 4 runs" '[ "$(grep -c "\"variant\"" "$G/results.json")" = 4 ]'
check "effects.csv: header and one row per variant" '[ "$(head -1 "$G/effects.csv")" = "task,T,C,ffn,variant,sampler,shots,runs,seeds,mean,sd,pairs,effect,ci_lo,ci_hi,unit,paper" ] && [ "$(tail -n +2 "$G/effects.csv" | wc -l)" = 2 ]'
check "grid.json records the grid" 'grep -q "\"format\":[[:space:]]*\"boltzattn-grid\"" "$G/grid.json" && grep -q "\"seeds\":[[:space:]]*2" "$G/grid.json"'
check "a run record per cell, finished" '[ "$(grep -l "\"status\":[[:space:]]*\"finished\"" "$G"/runs/*/run.json | wc -l)" = 4 ]'
check "effects.csv: softmax has no effect, boltzmann two pairs" 'grep -q "^brackets,6,8,1,softmax,exact,0,2,2,[0-9.]*,[0-9.e-]*,0,,,,points,$" "$G/effects.csv" && grep -q "^brackets,6,8,1,boltzmann,exact,0,2,2,.*,2,[-0-9.e]*,[-0-9.e]*,[-0-9.e]*,points,$" "$G/effects.csv"'
cp "$G/results.csv" "$TMP/before.csv"
# a grid.json whose arm carries an integer parameter far out of range is
# refused by its readers as damaged (checked before it is stored)
BG="$TMP/badgrid"
cp -r "$G" "$BG"
sed -i 's/"kind":[[:space:]]*"exact"/"kind": "exact", "trotter_steps": 1e300/' "$BG/grid.json"
cp "$BG/grid.json" "$TMP/badgrid.json"
env PATH=/nonexistent "$BIN" plot "$BG" >/dev/null 2>"$TMP/errbad"
rc=$?
check "out-of-range sampler parameter in grid.json: exit 2 naming the field" '[ $rc = 2 ] && grep -q "grid.json: bad or missing field .arms." "$TMP/errbad" && cmp -s "$BG/grid.json" "$TMP/badgrid.json"'

# interrupt: one run was killed before it finished (its record still says
# running), its log torn in the middle of a record
cell="$G/runs/brackets-T6-C8-ffn1-boltzmann-s2"
unfinish() { sed -i 's/"status":\(\s*\)"finished"/"status":\1"running"/' "$1/run.json"; }
unfinish "$cell"
printf '{"event":"train","step":30,"lo' >>"$cell/metrics.jsonl"
stamp=$(stat -c %Y "$G/runs/brackets-T6-C8-ffn1-softmax-s1/run.json")
sleep 1
"$BIN" ablate "${ARGS[@]}" >"$TMP/out2" 2>"$TMP/err2"
check "resume exits 0" '[ $? = 0 ]'
check "resume reports 3 finished" 'grep -q "4 runs in the grid, 3 already finished" "$TMP/err2"'
check "resume ran exactly one run" '[ "$(grep -c "^\[" "$TMP/err2")" = 1 ]'
check "finished runs untouched" '[ "$(stat -c %Y "$G/runs/brackets-T6-C8-ffn1-softmax-s1/run.json")" = "$stamp" ]'
check "resumed results identical but for wall time (same seed, same build)" 'diff <(cut -d, -f1-14 "$TMP/before.csv") <(cut -d, -f1-14 "$G/results.csv") >/dev/null'
check "the rerun cell's log holds whole records only" 'awk "!/^{.*}\$/ { exit 1 }" "$cell/metrics.jsonl" && [ -z "$(tail -c 1 "$cell/metrics.jsonl")" ]'
env PATH=/nonexistent "$BIN" plot "$G" >"$TMP/plot.out" 2>&1
check "plot of the grid exits 0 without warnings" '[ $? = 0 ] && ! grep -q warning "$TMP/plot.out"'

# missing: the summary says so and invents nothing
unfinish "$cell"
"$BIN" ablate "${ARGS[@]}" --summary-only >/dev/null 2>&1
check "summary-only exits 0" '[ $? = 0 ]'
check "3 rows after removal" '[ "$(tail -n +2 "$G/results.csv" | wc -l)" = 3 ]'
check "missing seed marked" 'grep -q "| boltzmann | 1 of 2 (missing seeds 2) |" "$G/summary.md"'
check "effect from one pair has no interval" 'grep -q "one pair, no interval" "$G/summary.md"'

# sampled cells join the grid: the exact cells keep their names (so the grid
# above counts as finished), only boltzmann gets sampled cells, named with a
# -KIND-S<shots> suffix, and softmax stays the reference of the effects
"$BIN" ablate "${ARGS[@]}" --sampler exact,direct --shots 8,16 --dqa-tau 2 >"$TMP/out3" 2>"$TMP/err3"
check "sampled grid: dqa option without dqa is exit 2" '[ $? = 2 ] && grep -q "dqa-tau applies to the dqa sampler only" "$TMP/err3"'
"$BIN" ablate "${ARGS[@]}" --sampler exact,direct --shots 8,16 >"$TMP/out3" 2>"$TMP/err3"
check "sampled grid exits 0" '[ $? = 0 ]'
check "sampled grid: 8 runs, 3 finished (exact names unchanged)" 'grep -q "8 runs in the grid, 3 already finished" "$TMP/err3"'
check "sampled cell names" '[ -f "$G/runs/brackets-T6-C8-ffn1-boltzmann-s1-direct-S8/run.json" ] && [ -f "$G/runs/brackets-T6-C8-ffn1-boltzmann-s2-direct-S16/run.json" ]'
check "no sampled softmax cells" '! ls "$G/runs" | grep -q "softmax-s.-direct"'
check "csv has sampler and shots columns" 'head -1 "$G/results.csv" | grep -q ",wall_s,sampler,shots,exact_value$"'
check "exact rows: sampler exact, shots 0" '[ "$(grep -c ",exact,0,$" "$G/results.csv")" = 4 ]'
check "sampled rows: direct with their shots and an exact value" '[ "$(grep -c ",direct,8,0\.[0-9]*$" "$G/results.csv")" = 2 ] && [ "$(grep -c ",direct,16,0\.[0-9]*$" "$G/results.csv")" = 2 ]'
check "json rows carry sampler and shots" '[ "$(grep -c "\"sampler\":" "$G/results.json")" = 8 ] && grep -q "\"shots\":\s*16" "$G/results.json"'
check "summary rows of the sampled variants" 'grep -q "| boltzmann (direct, S=8) | 2 | .*(exact inference" "$G/summary.md" && grep -q "| boltzmann (direct, S=16) | 2 |" "$G/summary.md" && grep -q "| softmax | 2 | .*(reference)" "$G/summary.md"'
"$BIN" ablate "${ARGS[@]}" --sampler exact,direct --shots 8,16 >"$TMP/out4" 2>"$TMP/err4"
check "sampled grid resumes complete" 'grep -q "8 runs in the grid, 8 already finished" "$TMP/err4"'

# a cell stopped mid-run (SIGTERM: it saves and exits 1) continues from its
# save point and ends exactly where an uninterrupted run ends
L=(--task brackets --attn softmax --T 6 --embd 8 --seeds 1 --steps 6000 --batch 16 --eval-every 0 --save-every 100)
# stop_after_save DIR: runs that cell into DIR and sends SIGTERM once its
# first save point is on disk (so the signal handler is in place and the
# run is not over, whatever the machine's speed); returns its exit status
stop_after_save() {
    "$BIN" ablate "${L[@]}" --out "$1" >/dev/null 2>"$1.err" &
    local pid=$!
    for _ in $(seq 1 200); do
        [ -e "$1/runs/brackets-T6-C8-ffn1-softmax-s1/state.safetensors" ] && break
        sleep 0.01
    done
    kill -TERM $pid
    wait $pid
}
stop_after_save "$TMP/long"
check "stopped cell exits 1" '[ $? = 1 ]'
check "stopped cell left a state" '[ -f "$TMP/long/runs/brackets-T6-C8-ffn1-softmax-s1/state.safetensors" ]'
lc="$TMP/long/runs/brackets-T6-C8-ffn1-softmax-s1"
prior=$(LC_ALL=C grep -ao '"train_s":"[0-9.]*"' "$lc/state.safetensors" | grep -o '[0-9.]*')
"$BIN" ablate "${L[@]}" --out "$TMP/long" >/dev/null 2>"$TMP/err6"
check "continued cell exits 0" '[ $? = 0 ]'
check "cell continues from its save point" 'grep -q "brackets-T6-C8-ffn1-softmax-s1 continues from its last save point" "$TMP/err6"'
# the run's training time counts both calls: the state's figure at the
# stop plus the second call's, in the log and in the run record
fin=$(grep '"event":"final"' "$lc/metrics.jsonl")
num() { grep -o "\"$1\":[0-9.]*" <<<"$fin" | cut -d: -f2; }
wall=$(grep -o '"train_s":[[:space:]]*[0-9.]*' "$lc/run.json" | grep -o '[0-9.]*$')
check "the stopped call's training time is in the state" 'awk -v p="$prior" "BEGIN { exit !(p > 0) }"'
check "train_s_total = time before the stop + this call's" \
    'awk -v p="$prior" -v c="$(num train_s)" -v t="$(num train_s_total)" "BEGIN { d = t - p - c; exit !(d > -0.002 && d < 0.002) }"'
check "run.json train_s is the total" 'awk -v w="$wall" -v t="$(num train_s_total)" "BEGIN { d = w - t; exit !(d > -0.001 && d < 0.001) }"'
# a state saved before the time was kept: the log's figure stands in (the
# last elapsed_s of the stopped call)
stop_after_save "$TMP/legacy"
check "legacy state: the cell stopped with exit 1" '[ $? = 1 ]'
gc="$TMP/legacy/runs/brackets-T6-C8-ffn1-softmax-s1"
LC_ALL=C sed -i 's/"train_s":"/"train_x":"/' "$gc/state.safetensors"
"$BIN" ablate "${L[@]}" --out "$TMP/legacy" >/dev/null 2>&1
check "legacy state: the continued cell exits 0" '[ $? = 0 ]'
fin=$(grep '"event":"final"' "$gc/metrics.jsonl")
logged=$(awk '/"event":"resume"/ { exit } /"elapsed_s"/ { sub(/.*"elapsed_s":/, ""); sub(/[,}].*/, ""); e = $0 } END { print e }' "$gc/metrics.jsonl")
check "legacy state: train_s_total = the log's time + this call's" \
    'awk -v p="$logged" -v c="$(num train_s)" -v t="$(num train_s_total)" "BEGIN { d = t - p - c; exit !(p > 0 && d > -0.002 && d < 0.002) }"'
"$BIN" ablate "${L[@]}" --out "$TMP/whole" >/dev/null 2>&1
check "continued cell equals an uninterrupted one" 'diff <(cut -d, -f1-14 "$TMP/long/results.csv") <(cut -d, -f1-14 "$TMP/whole/results.csv") >/dev/null'
check "continued model is bit-identical" 'cmp -s "$TMP/long/runs/brackets-T6-C8-ffn1-softmax-s1/model.safetensors" "$TMP/whole/runs/brackets-T6-C8-ffn1-softmax-s1/model.safetensors"'

# two processes on one grid: a cell whose lock (DIR/.lock, the one `train`
# takes) a live process holds is skipped, not trained twice; once the
# holder is gone the next call trains it, taking over a lock file a dead
# process left
K=(--task brackets --attn softmax,boltzmann --T 6 --embd 8 --seeds 1 --steps 20 --batch 16 --out "$TMP/lk")
held="$TMP/lk/runs/brackets-T6-C8-ffn1-boltzmann-s1"
mkdir -p "$held"
"$BIN" train --task brackets --T 6 --embd 8 --steps 100000000 --eval-every 0 --out "$held" --quiet >/dev/null 2>&1 &
holder=$!
for _ in $(seq 1 100); do grep -q '"event":"train"' "$held/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
"$BIN" ablate "${K[@]}" >/dev/null 2>"$TMP/errlk"
check "grid with a held cell exits 0" '[ $? = 0 ]'
check "held cell skipped and named" 'grep -q "^brackets-T6-C8-ffn1-boltzmann-s1 is being trained by another process: skipped$" "$TMP/errlk"'
check "held cell not trained, its lock left alone" '! grep -q finished "$held/run.json" && [ "$(cat "$held/.lock")" = $holder ]'
check "the free cell trained, its lock released" 'grep -q finished "$TMP/lk/runs/brackets-T6-C8-ffn1-softmax-s1/run.json" && [ ! -e "$TMP/lk/runs/brackets-T6-C8-ffn1-softmax-s1/.lock" ]'
check "summary marks the held cell missing" 'grep -q "| boltzmann | 0 of 1 (missing seeds 1) |" "$TMP/lk/summary.md"'
kill -INT $holder
wait $holder
echo 999999999 >"$held/.lock" # as a killed process leaves it
"$BIN" ablate "${K[@]}" >/dev/null 2>"$TMP/errlk2"
check "stale lock taken over: the cell trains" 'grep -q "2 runs in the grid, 1 already finished" "$TMP/errlk2" && grep -q finished "$held/run.json" && ! grep -q "skipped" "$TMP/errlk2" && [ ! -e "$held/.lock" ]'

# two ablate processes side by side on one grid: every cell trains once in
# all (each process skips the cells the other holds or has finished)
P=(--task brackets --attn softmax --T 6 --embd 8 --seeds 6 --steps 300 --batch 16 --eval-every 0 --out "$TMP/par")
"$BIN" ablate "${P[@]}" >/dev/null 2>"$TMP/errp1" &
p1=$!
"$BIN" ablate "${P[@]}" >/dev/null 2>"$TMP/errp2"
s2=$?
wait $p1
s1=$?
failed_before=$failed
check "side-by-side processes exit 0" '[ $s1 = 0 ] && [ $s2 = 0 ]'
check "each cell trained exactly once in all" '[ "$(cat "$TMP/errp1" "$TMP/errp2" | grep -c "^\[")" = 6 ] && [ "$(tail -n +2 "$TMP/par/results.csv" | wc -l)" = 6 ]'
[ "$failed" = "$failed_before" ] || cat "$TMP/errp1" "$TMP/errp2" # what each process did

# bad usage
"$BIN" ablate --task brackets >/dev/null 2>&1
check "missing --out is exit 2" '[ $? = 2 ]'
"$BIN" ablate --task brackets --out "$TMP/x" --T 6,x >/dev/null 2>&1
check "bad list is exit 2" '[ $? = 2 ]'
"$BIN" ablate --task brackets --out "$TMP/x" --attn softmax,softmax >/dev/null 2>&1
check "duplicate variant is exit 2" '[ $? = 2 ]'
"$BIN" ablate --task brackets --out "$TMP/x" --attn boltzmann --T 30 >/dev/null 2>&1
check "T beyond the engine is exit 2" '[ $? = 2 ]'

"$BIN" ablate --task brackets --out "$TMP/x" --attn softmax --sampler direct >/dev/null 2>&1
check "sampler without boltzmann/coupling is exit 2" '[ $? = 2 ]'
"$BIN" ablate --task brackets --out "$TMP/x" --attn boltzmann --shots 16 >/dev/null 2>&1
check "shots without a sampler is exit 2" '[ $? = 2 ]'
"$BIN" ablate --task brackets --out "$TMP/x" --attn boltzmann --sampler direct,direct >/dev/null 2>&1
check "duplicate sampler is exit 2" '[ $? = 2 ]'
"$BIN" ablate --task brackets --out "$TMP/x" --attn boltzmann --sampler direct --shots 0 >/dev/null 2>&1
check "shots out of range is exit 2" '[ $? = 2 ]'
"$BIN" ablate --task brackets --out "$TMP/x" --attn boltzmann --sampler direct --T 30 >/dev/null 2>&1
check "T beyond the sampler is exit 2" '[ $? = 2 ]'
"$BIN" ablate --task brackets --out "$TMP/x" --attn boltzmann --sampler gibbs --shots 4 >/dev/null 2>&1
check "gibbs chains above the shots is exit 2" '[ $? = 2 ]'
[ ! -e "$TMP/x" ] && pass=$((pass + 1)) || { failed=$((failed + 1)); echo "FAIL: a refused grid created its directory"; }
"$BIN" ablate --task brackets --out "$TMP/x" --T "6," >/dev/null 2>&1
check "a list with an empty item is exit 2" '[ $? = 2 ]'
"$BIN" ablate --task brackets --out "$TMP/x" --T 6,6 >/dev/null 2>&1
check "a repeated T is exit 2" '[ $? = 2 ]'
"$BIN" ablate --task brackets --out "$TMP/x" --attn "softmax,,boltzmann" >/dev/null 2>&1
check "an empty variant is exit 2" '[ $? = 2 ]'


# --share-from: the finished runs of another grid with the same config and
# settings fill this grid's cells (copied, byte for byte); one of other
# settings is not taken; an interrupted run at a cell's name is replaced
# whole. The cells it cannot fill are trained.
H="$TMP/share"
"$BIN" ablate --task brackets --attn softmax,boltzmann --T 6,8 --embd 8 --seeds 2 --steps 40 --batch 16 \
    --out "$H" --share-from "$G" --summary-only >/dev/null 2>&1
check "summary-only of a grid never started: refused, nothing shared or made" '[ $? = 2 ] && [ ! -e "$H" ]'
mkdir -p "$H/runs/brackets-T6-C8-ffn1-softmax-s1"
echo stale >"$H/runs/brackets-T6-C8-ffn1-softmax-s1/model.safetensors"
"$BIN" ablate --task brackets --attn softmax,boltzmann --T 6,8 --embd 8 --seeds 2 --steps 40 --batch 16 \
    --out "$H" --share-from "$G" --share-from "$TMP/long" >/dev/null 2>"$TMP/errsh"
check "shared grid exits 0" '[ $? = 0 ]'
check "the 4 finished T = 6 runs copied (the stale one replaced)" 'grep -q "4 finished runs copied from $G" "$TMP/errsh" && [ -f "$H/runs/brackets-T6-C8-ffn1-softmax-s1/run.json" ]'
check "the T = 8 cells trained" '[ "$(grep -c "^\[" "$TMP/errsh")" = 4 ]'
check "a copy is byte for byte" 'cmp -s "$G/runs/brackets-T6-C8-ffn1-softmax-s1/model.safetensors" "$H/runs/brackets-T6-C8-ffn1-softmax-s1/model.safetensors"'
check "a run of other settings is not taken" '! grep -q "from $TMP/long" "$TMP/errsh"'

# a finished run of other settings where a cell would go is not overwritten
"$BIN" ablate --task brackets --attn softmax,boltzmann --T 6 --embd 8 --seeds 2 --steps 50 --batch 16 \
    --out "$G" >/dev/null 2>"$TMP/errfo"
check "a foreign finished run is refused, exit 2" '[ $? = 2 ] && grep -q "holds a finished run that is not this grid.s cell" "$TMP/errfo"'

# a run of an older version: result.json and the log's config record; it
# counts as finished and gets its run record, with the same result
O="$TMP/old"
cp -r "$G" "$O"
oc="$O/runs/brackets-T6-C8-ffn1-softmax-s1"
acc=$(grep -o '"val_acc":[[:space:]]*[0-9.e-]*' "$oc/run.json" | head -1 | grep -o '[0-9.e-]*$')
rm "$oc/run.json"
printf '{"task":"brackets","variant":"softmax","T":6,"C":8,"ffn":1,"seed":1,"steps":40,"metric":"accuracy","value":%s,"val_loss":1,"val_ppl":2.7,"val_acc":%s,"items":4,"targets":9,"wall_s":0.5}\n' "$acc" "$acc" >"$oc/result.json"
# a summary reads it as it is (it writes nothing but the summary); a
# rerun of the grid gives it its record
"$BIN" ablate --out "$O" --summary-only >/dev/null 2>"$TMP/errold"
check "older run counted by a summary, not upgraded by it" '[ $? = 0 ] && grep -q "| softmax | 2 |" "$O/summary.md" && [ ! -e "$oc/run.json" ]'
"$BIN" ablate "${ARGS[@]/$G/$O}" >/dev/null 2>"$TMP/errold"
check "older run read and upgraded" 'grep -q "1 run of an older version got run.json" "$TMP/errold" && grep -q finished "$oc/run.json" && [ -f "$oc/result.json" ]'
check "older run counted" 'grep -q "| softmax | 2 |" "$O/summary.md"'
check "older run's result kept" 'grep -q "\"val_acc\":[[:space:]]*$acc" "$oc/run.json"'

# a grid trained on to more seeds (reproduce.sh's more-seeds step): the
# grid's first options, with fewer seeds, still summarise it whole; more
# seeds than it has are another grid
E="$TMP/extended"
EA=(--task brackets --attn softmax,boltzmann --T 6 --embd 8 --steps 20 --batch 8 --out "$E")
"$BIN" ablate "${EA[@]}" --seeds 2 >/dev/null 2>&1 && "$BIN" ablate "${EA[@]}" --seeds 3 >/dev/null 2>&1
check "a grid extended from 2 seeds to 3" '[ $? = 0 ] && grep -q "\"seeds\":[[:space:]]*3" "$E/grid.json"'
"$BIN" ablate "${EA[@]}" --seeds 2 --summary-only >/dev/null 2>&1
check "summary-only with its first options: all 3 seeds, grid.json kept" '[ $? = 0 ] &&
    [ "$(tail -n +2 "$E/results.csv" | wc -l)" = 6 ] && grep -q "\"seeds\":[[:space:]]*3" "$E/grid.json"'
expect 2 "('seeds' is 3 there, 4 by the options)" -- "$BIN" ablate "${EA[@]}" --seeds 4 --summary-only
# fewer seeds from another first seed are not its first options
expect 2 "the options describe another grid than $E/grid.json ('seeds' is 3 there, 2 by the options)" -- "$BIN" ablate "${EA[@]}" --seeds 2 --seed0 2 --summary-only

echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
