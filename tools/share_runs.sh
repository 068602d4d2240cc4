#!/usr/bin/env bash
# Copies finished ablation runs into another grid's runs/ directory, so a
# cell two grids share (the same settings) is trained once.
# usage: tools/share_runs.sh RUN_DIR... DEST_RUNS_DIR
# A run is finished when it has result.json. A finished run already in DEST
# is kept; an unfinished one of the same name (an interrupted cell's save
# point) is replaced as a whole, never merged with the finished run's files.
# Unfinished sources and unmatched globs are skipped.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: share_runs.sh RUN_DIR... DEST_RUNS_DIR" >&2; exit 2; }
dest=${*: -1}
mkdir -p "$dest"
for r in "${@:1:$#-1}"; do
    [ -f "$r/result.json" ] || continue
    name=$(basename "$r")
    [ -f "$dest/$name/result.json" ] && continue
    rm -rf "${dest:?}/$name"
    cp -r "$r" "$dest/"
done
