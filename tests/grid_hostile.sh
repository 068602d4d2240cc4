#!/usr/bin/env bash
# Grids given hostile input (issue 41): a rerun into a grid with other
# settings is refused naming the setting (never counted finished); a
# summary reads the grid from grid.json and writes nothing but the
# summary; grid.json, run.json or metrics.jsonl that is a FIFO, a
# directory or a symlink loop is an error naming the path (never a hang or
# a skip); a record holding a non-finite metric is left out with a warning
# naming the file and the key (the summary marks the seed missing).
# usage: tests/grid_hostile.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab
set -u
BIN=${1:?usage: grid_hostile.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab}
LABBIN=${2:?usage: grid_hostile.sh PATH/TO/boltzattn PATH/TO/boltzattn-lab}
. "$(dirname "$0")/lib.sh"
check() { if eval "$2"; then ok; else bad "$1"; fi; }
T10="timeout 20"

G="$TMP/g"
A=(--task brackets --attn softmax,boltzmann --T 6 --embd 8 --seeds 2 --steps 20 --batch 8 --heldout 16)
"$BIN" ablate "${A[@]}" --out "$G" >/dev/null 2>&1
check "the grid trains" '[ $? = 0 ] && [ "$(tail -n +2 "$G/results.csv" | wc -l)" = 4 ]'
cp "$G/grid.json" "$TMP/grid.json.0"
stamp=$(stat -c %Y "$G/runs/brackets-T6-C8-ffn1-softmax-s1/run.json")

# --- H3: a rerun with other settings is refused, naming the setting
expect 2 "'lr' is 0.003 there, 0.01 asked now" -- "$BIN" ablate "${A[@]}" --lr 0.01 --out "$G"
expect 2 "'batch' is 8 there, 4 asked now" -- "$BIN" ablate "${A[@]/--batch/--batch}" --batch 4 --out "$G"
expect 2 "'weight_decay' is" -- "$BIN" ablate "${A[@]}" --weight-decay 0.5 --out "$G"
expect 2 "'n_layer' is 1 there, 2 asked now" -- "$BIN" ablate "${A[@]}" --layers 2 --out "$G"
expect 2 "'n_heldout' is 16 there, 32 asked now" -- "$BIN" ablate "${A[@]}" --heldout 32 --out "$G"
expect 2 "'warmup' is" -- "$BIN" ablate "${A[@]}" --warmup 3 --out "$G"
check "nothing trained or rewritten by the refusals" 'cmp -s "$G/grid.json" "$TMP/grid.json.0" &&
    [ "$(stat -c %Y "$G/runs/brackets-T6-C8-ffn1-softmax-s1/run.json")" = "$stamp" ]'
"$BIN" ablate "${A[@]}" --threads 1 --out "$G" >/dev/null 2>"$TMP/same"
check "the same settings (other threads): all finished, nothing trained" '[ $? = 0 ] &&
    grep -q "4 runs in the grid, 4 already finished" "$TMP/same" && ! grep -q "^\[" "$TMP/same"'

# --- H5: a summary reads the grid from grid.json and writes only the summary
cp "$G/grid.json" "$TMP/grid.json.0" # (it records the last run's thread count)
"$BIN" ablate "${A[@]}" --out "$G" --summary-only >/dev/null 2>&1
check "summary with the full options" '[ $? = 0 ]'
for f in summary.md results.csv results.json effects.csv; do cp "$G/$f" "$TMP/full.$f"; done
sleep 1
touch "$TMP/t0"
"$BIN" ablate --out "$G" --summary-only >/dev/null 2>"$TMP/s1"
check "summary with --out alone exits 0" '[ $? = 0 ] && [ ! -s "$TMP/s1" ]'
check "its outputs are the full options' ones" 'for f in summary.md results.csv results.json effects.csv; do cmp -s "$G/$f" "$TMP/full.$f" || exit 1; done'
check "it writes the summary's files only" '[ "$(cd "$G" && find . -newer "$TMP/t0" -type f | sort | tr "\n" " ")" = "./effects.csv ./results.csv ./results.json ./summary.md " ]'
expect 2 "'T' is [6] there, [8] by the options" -- "$BIN" ablate "${A[@]}" --T 8 --out "$G" --summary-only
expect 2 "'arms' is" -- "$BIN" ablate "${A[@]}" --attn softmax --out "$G" --summary-only
expect 2 "give --out alone" -- "$BIN" ablate --T 6 --out "$G" --summary-only
expect 2 "'n_heldout' is 16 there, 2000 by the options" -- "$BIN" ablate --task brackets --attn softmax,boltzmann --T 6 --embd 8 --seeds 2 --out "$G" --summary-only
"$BIN" ablate --out "$G" --summary-only --share-from "$TMP/gb" >/dev/null 2>&1
check "--share-from copies nothing into a summary" '[ $? = 0 ] && [ ! -e "$TMP/gb" ] && cmp -s "$G/summary.md" "$TMP/full.summary.md"'
check "refused summaries leave grid.json and results as they were" 'cmp -s "$G/grid.json" "$TMP/grid.json.0" && cmp -s "$G/results.csv" "$TMP/full.results.csv"'
cp -r "$G" "$TMP/gb"
echo '{"format": "boltzattn-grid", "task": "brackets"' >"$TMP/gb/grid.json"
expect 2 "grid.json: bad or missing field 'JSON'" -- "$BIN" ablate "${A[@]}" --out "$TMP/gb" --summary-only
check "an unreadable grid.json is kept, the results too" 'grep -q "^{\"format\": \"boltzattn-grid\", \"task\": \"brackets\"$" "$TMP/gb/grid.json" &&
    cmp -s "$TMP/gb/results.csv" "$TMP/full.results.csv"'

# --- special files where records are read: an error naming the path
F="$TMP/f"
cp -r "$G" "$F" && rm "$F/grid.json" && mkfifo "$F/grid.json"
expect 2 "$F/grid.json' is not a regular file" -- $T10 "$BIN" ablate --out "$F" --summary-only
expect 2 "$F/grid.json is not a regular file" -- $T10 "$BIN" ablate "${A[@]}" --out "$F"
check "the FIFO is not replaced" '[ -p "$F/grid.json" ]'
expect 2 "$F/grid.json' is not a regular file" -- $T10 "$BIN" plot "$F"
mkdir "$TMP/rep" && ln -s "$F" "$TMP/rep/f"
expect 2 "$TMP/rep/f/grid.json' is not a regular file" -- $T10 "$LABBIN" report "$TMP/rep" --preset quick
rm "$F/grid.json" && mkdir "$F/grid.json"
expect 2 "$F/grid.json' is not a regular file" -- $T10 "$BIN" ablate --out "$F" --summary-only
rmdir "$F/grid.json" && ln -s grid.json "$F/grid.json"
expect 2 "$F/grid.json" -- $T10 "$BIN" ablate --out "$F" --summary-only
expect 2 "$F/grid.json is not a regular file" -- $T10 "$BIN" ablate "${A[@]}" --out "$F"
rm "$F/grid.json" && cp "$G/grid.json" "$F/grid.json"
R="$F/runs/brackets-T6-C8-ffn1-softmax-s2"
mv "$R/run.json" "$TMP/run.json.keep" && mkfifo "$R/run.json"
expect 2 "$R/run.json' is not a regular file" -- $T10 "$BIN" ablate --out "$F" --summary-only
expect 2 "$R/run.json' is not a regular file" -- $T10 "$LABBIN" summary "$F"
rm "$R/run.json" && ln -s run.json "$R/run.json"
expect 2 "$R/run.json" -- $T10 "$BIN" ablate --out "$F" --summary-only
rm "$R/run.json" && mv "$TMP/run.json.keep" "$R/run.json"
mv "$R/metrics.jsonl" "$TMP/m.keep" && mkfifo "$R/metrics.jsonl"
expect 2 "$R/metrics.jsonl' is not a regular file" -- $T10 env PATH=/nonexistent "$BIN" plot "$F"
rm "$R/metrics.jsonl" && mkdir "$R/metrics.jsonl"
expect 2 "$R/metrics.jsonl' is not a regular file" -- $T10 env PATH=/nonexistent "$BIN" plot "$F"

# --- non-finite metrics: the record is left out, named, never tabled
N="$TMP/n/brackets"
mkdir -p "$TMP/n" && cp -r "$G" "$N"
nr="$N/runs/brackets-T6-C8-ffn1-boltzmann-s2"
sed -i 's/"val_acc":\([[:space:]]*\)[0-9.e-]*/"val_acc":\11e999/' "$nr/run.json"
"$BIN" ablate --out "$N" --summary-only >/dev/null 2>"$TMP/n1"
check "inf val_acc: warning naming the file and key" '[ $? = 0 ] && grep -q "$nr/run.json: .val_acc. is not a finite number; run left out" "$TMP/n1"'
check "inf val_acc: the seed is marked missing, no inf tabled" 'grep -q "| boltzmann | 1 of 2 (missing seeds 2) |" "$N/summary.md" &&
    ! grep -qiw "inf" "$N/results.csv" "$N/summary.md" "$N/effects.csv"'
"$LABBIN" report "$TMP/n" --preset quick >"$TMP/n.md" 2>"$TMP/n2"
check "report: the run named and left out, no inf in the report" 'grep -q "$nr/run.json: .val_acc. is not a finite number" "$TMP/n2" && ! grep -qiw "inf" "$TMP/n.md"'
expect 2 "$nr/run.json: 'val_acc' is not a finite number" -- "$BIN" ablate "${A[@]}" --out "$N"
sed -i 's/"val_acc":\([[:space:]]*\)1e999/"val_acc":\1-1e999/' "$nr/run.json"
expect 0 "'val_acc' is not a finite number" -- "$BIN" ablate --out "$N" --summary-only
sed -i 's/"val_acc":\([[:space:]]*\)-1e999/"val_acc":\10.5/; s/"val_loss":\([[:space:]]*\)[0-9.e-]*/"val_loss":\11e999/' "$nr/run.json"
expect 0 "'val_loss' is not a finite number" -- "$BIN" ablate --out "$N" --summary-only
sed -i 's/"val_loss":\([[:space:]]*\)1e999/"val_loss":\11/; s/"train_s":\([[:space:]]*\)[0-9.e-]*/"train_s":\11e999/' "$nr/run.json"
expect 0 "is not a finite number" -- "$BIN" ablate --out "$N" --summary-only

# ---- a grid directory that is a link to nothing, a loop, a path through a file
ln -s "$TMP/gl" "$TMP/gl"
ln -s "$TMP/nowhere/g" "$TMP/gd"
for d in "$TMP/gl" "$TMP/gd" "$G/grid.json/x"; do
    expect 2 "--out $d: not a directory to write into" -- "$BIN" ablate "${A[@]}" --out "$d"
done
[ ! -e "$TMP/nowhere" ] && ok || bad "ablate made the target of a dangling link"

echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
