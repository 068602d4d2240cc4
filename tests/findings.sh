#!/usr/bin/env bash
# findings: README.md's findings block (between <!-- findings:begin --> and
# <!-- findings:end -->) is what `boltzattn-lab report --verdicts results
# --readme` makes of the committed records now: regenerated into a copy and
# compared. Fails when the block is stale (records or claims changed since
# `make results-doc`) or the markers are gone.
# usage: tests/findings.sh PATH/TO/boltzattn-lab
set -u
BIN=${1:?usage: findings.sh PATH/TO/boltzattn-lab}
LABBIN=$BIN
. "$(dirname "$0")/lib.sh"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
cp "$SRC/README.md" "$TMP/README.md"
# the block names its root as given, so run where make results-doc runs
(cd "$SRC" && "$LABBIN" report --verdicts results --readme "$TMP/README.md") >"$TMP/out" 2>&1
if [ $? = 0 ]; then ok; else bad "the block could not be regenerated: $(cat "$TMP/out")"; fi
if cmp -s "$SRC/README.md" "$TMP/README.md"; then
    ok
else
    bad "README.md's findings block is stale: run 'make results-doc' (diff below)"
    diff "$SRC/README.md" "$TMP/README.md" | head -20
fi
echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
