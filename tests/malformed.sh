#!/usr/bin/env bash
# The malformed-file corpus (tests/malformed/, written by gen.py): every file
# listed in expected.tsv goes to the CLI reader the manifest names, which
# must exit with the stated code (2 for bad input) and print the stated
# message; a crash (exit status >= 128, a sanitizer report) always fails.
# Also checks that every corpus file is listed and, where python3 exists,
# that gen.py reproduces the committed files byte for byte.
# usage: tests/malformed.sh PATH/TO/boltzattn
set -u
BIN=${1:?usage: malformed.sh PATH/TO/boltzattn}
. "$(dirname "$0")/lib.sh"
DIR=$(cd "$(dirname "$0")/malformed" && pwd)

# Relative names, so messages quote the file as the manifest does.
cd "$DIR" || exit 1
declare -A listed
n=0
while IFS=$'\t' read -r file cmd code want; do
    case $file in '' | '#'*) continue ;; esac
    n=$((n + 1))
    listed[$file]=1
    if [ ! -f "$file" ]; then
        bad "$file: listed in expected.tsv but missing"
        continue
    fi
    case $cmd in
        eval) out=$("$BIN" eval --ckpt "$file" 2>&1) ;;
        grads) out=$("$BIN" grads --ckpt ckpt_ok_brackets.safetensors --batch "$file" \
            --out "$TMP/grads.safetensors" 2>&1) ;;
        train-data) out=$("$BIN" train --task charlm --T 4 --embd 4 --steps 1 --data "$file" \
            --out "$TMP/run$n" --quiet 2>&1) ;;
        eval-data) out=$("$BIN" eval --ckpt ckpt_ok_charlm.safetensors --data "$file" 2>&1) ;;
        eval-lm) out=$("$BIN" eval --ckpt "$file" --data text_ok.txt 2>&1) ;;
        resume)
            mkdir -p "$TMP/resume$n"
            cp "$file" "$TMP/resume$n/state.safetensors"
            out=$("$BIN" train --resume "$TMP/resume$n" --quiet 2>&1)
            ;;
        *)
            bad "$file: unknown command '$cmd' in expected.tsv"
            continue
            ;;
    esac
    rc=$?
    if [ $rc -ge 128 ]; then
        bad "$file ($cmd): crashed with exit status $rc: $out"
    elif [[ $out == *Sanitizer* || $out == *"runtime error:"* ]]; then
        bad "$file ($cmd): sanitizer report: $out"
    elif [ "$rc" != "$code" ]; then
        bad "$file ($cmd): exit $rc, expected $code: $out"
    elif [[ $out != *"$want"* ]]; then
        bad "$file ($cmd): the output lacks '$want': $out"
    else
        ok
    fi
done <expected.tsv

# every corpus file has an expectation
for f in *; do
    case $f in gen.py | expected.tsv) continue ;; esac
    [ -n "${listed[$f]:-}" ] && ok || bad "$f is in tests/malformed/ but not in expected.tsv"
done

# the generator reproduces the corpus
if command -v python3 >/dev/null 2>&1; then
    if python3 gen.py "$TMP/regen" >/dev/null; then
        cp gen.py expected.tsv "$TMP/regen/"
        if diff -r "$TMP/regen" . >"$TMP/regen.diff" 2>&1; then ok; else
            bad "gen.py does not reproduce the committed corpus: $(head -5 "$TMP/regen.diff")"
        fi
    else
        bad "gen.py failed"
    fi
else
    echo "note: python3 not found: the generator's reproducibility is not checked"
fi

echo "$n cases; $pass passed, $failed failed"
[ "$failed" = 0 ]
