#!/usr/bin/env bash
# Cross-check boltzattn's loss and gradients against the independent float64
# finite-difference reference tests/crosscheck.py, for every attention variant
# on both tasks, with and without the FFN, 1 and 2 layers/heads.
#
# usage: tests/crosscheck.sh BIN        (BIN = path to the boltzattn executable)
# env:   PYTHON     a python3 with numpy to use (default: /usr/bin/python3, then python3)
#        CC_JOBS    configurations checked in parallel (default 2)
#        CC_KEEP=1  keep the temporary directory
#        CC_STENCIL finite-difference stencil of crosscheck.py, 2 or 4 (default 4;
#                   2 takes about half the Python time and is ~10x less accurate)
# exit:  0 all passed, 1 a failure, 77 skipped (no python with numpy)
set -u

BIN=${1:-}
if [ -z "$BIN" ] || [ ! -x "$BIN" ]; then
  echo "usage: $0 BIN   (BIN: the boltzattn executable)" >&2
  exit 2
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK=$HERE/crosscheck.py

. "$HERE/python_env.sh"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/crosscheck.XXXXXX") || exit 1
if [ "${CC_KEEP:-0}" = 1 ]; then echo "keeping $TMP"; else trap 'rm -rf "$TMP"' EXIT; fi
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

# A small deterministic plain-text corpus for charlm (about 6 kB, ~30 symbols).
CORPUS=$TMP/corpus.txt
{
  for r in 1 2 3 4 5 6 7 8; do
    cat <<'EOF'
First Citizen: Before we proceed any further, hear me speak.
All: Speak, speak. You are all resolved rather to die than to famish?
Resolved. resolved. First, you know Caius Marcius is chief enemy to the people.
We know't, we know't. Let us kill him, and we'll have corn at our own price.
Is't a verdict? No more talking on't; let it be done: away, away!
EOF
    echo "round $r of the quick brown fox jumps over the lazy dog."
  done
} > "$CORPUS"

# name | task | attn | extra train options
CONFIGS=(
  "br-softmax-ffn-L1H1      brackets softmax   "
  "br-softmax-noffn-L2H2    brackets softmax   --no-ffn --layers 2 --heads 2"
  "br-sigmoid-ffn-L2H2      brackets sigmoid   --layers 2 --heads 2"
  "br-sigmoid-noffn-L1H1    brackets sigmoid   --no-ffn"
  "br-boltzmann-ffn-L2H2    brackets boltzmann --j-init-std 0.5 --layers 2 --heads 2"
  "br-boltzmann-noffn-L1H1  brackets boltzmann --j-init-std 0.5 --no-ffn"
  "br-boltzmann-noffn-J0    brackets boltzmann --no-ffn --steps 1 --lr 0"
  "br-coupling-ffn-L1H1     brackets coupling  --j-init-std 0.5"
  "br-coupling-noffn-L2H2   brackets coupling  --j-init-std 0.5 --no-ffn --layers 2 --heads 2"
  "lm-softmax-ffn-L1H1      charlm   softmax   "
  "lm-sigmoid-noffn-L1H1    charlm   sigmoid   --no-ffn"
  "lm-boltzmann-ffn-L2H2    charlm   boltzmann --j-init-std 0.5 --layers 2 --heads 2"
  "lm-coupling-noffn-L1H1   charlm   coupling  --j-init-std 0.5 --no-ffn"
)

# --lr 0.02 (not the default 3e-3): after 30 steps the fields q.k are then
# large enough that the four variants' gradients differ by 10-50 % on these
# models; at small fields softmax and sigmoid(2h) agree to first order in h.
run_one() {  # index name task attn opts...
  local i=$1 name=$2 task=$3 attn=$4; shift 4
  local d=$TMP/$name log=$TMP/$name.log
  mkdir -p "$d"
  local data=()
  [ "$task" = charlm ] && data=(--data "$CORPUS")
  {
    echo "== $name: train --task $task --attn $attn $*"
    "$BIN" train --task "$task" --attn "$attn" --steps 30 --lr 0.02 --embd 16 --T 6 --batch 8 \
        --seed $((i + 1)) --threads 1 --quiet "${data[@]}" "$@" --out "$d/run" \
      && "$BIN" batch --ckpt "$d/run/model.safetensors" "${data[@]}" --size 4 --seed $((i + 7)) \
        --out "$d/batch.safetensors" \
      && "$BIN" grads --ckpt "$d/run/model.safetensors" --batch "$d/batch.safetensors" \
        --threads 1 --out "$d/grads.safetensors" \
      && "$PY" "$CHECK" "$d/run/model.safetensors" "$d/batch.safetensors" "$d/grads.safetensors" \
        --stencil "${CC_STENCIL:-4}"
    echo "rc=$?"
  } > "$log" 2>&1
}

start=$(date +%s)
JOBS=${CC_JOBS:-2}
i=0
for c in "${CONFIGS[@]}"; do
  # shellcheck disable=SC2086
  run_one $i $c &
  i=$((i + 1))
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n 2>/dev/null || sleep 0.2; done
done
wait

pass=0; fail=0; failed=()
for c in "${CONFIGS[@]}"; do
  # shellcheck disable=SC2086
  set -- $c
  name=$1; log=$TMP/$name.log
  rc=$(sed -n 's/^rc=//p' "$log" | tail -n 1)
  worst=$(sed -n 's/^max rel_l2 \([^ ]*\) .*loss rel err \([^ ]*\)$/max rel_l2 \1, loss rel \2/p' "$log")
  if [ "$rc" = 0 ]; then
    pass=$((pass + 1)); printf 'PASS %-26s %s\n' "$name" "$worst"
  else
    fail=$((fail + 1)); failed+=("$name")
    printf 'FAIL %-26s %s (rc=%s)\n' "$name" "$worst" "${rc:-?}"
    sed 's/^/    /' "$log"
  fi
done
echo "crosscheck: $((i)) configurations in $(( $(date +%s) - start )) s with $PY"
echo "$pass passed, $fail failed${failed:+: ${failed[*]}}"
[ "$fail" = 0 ]
