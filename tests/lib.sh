# The set-up every shell test shares; source it after setting BIN:
#     BIN=${1:?usage: NAME.sh PATH/TO/boltzattn}
#     . "$(dirname "$0")/lib.sh"
# It makes BIN (and LABBIN, when set) absolute (tests may cd or empty PATH), a scratch directory
# TMP removed at exit (kept when KEEP is set, for debugging), two OpenMP
# threads unless the caller chose, the pass/failed counters and the
# helpers ok, bad and expect.
case $BIN in /*) ;; *) BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")" ;; esac
# the lab program (boltzattn-lab), for the tests of its commands
if [ -n "${LABBIN:-}" ]; then
    case $LABBIN in /*) ;; *) LABBIN="$(cd "$(dirname "$LABBIN")" && pwd)/$(basename "$LABBIN")" ;; esac
fi
TMP=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
pass=0
failed=0

ok() { pass=$((pass + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }

# expect CODE PATTERN -- command...: the exit code, and a substring of the
# output (stdout and stderr) unless PATTERN is empty
expect() {
    local code=$1 pat=$2
    shift 3
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" != "$code" ]; then
        bad "'$*' exited $rc, expected $code; output: $out"
    elif [ -n "$pat" ] && ! grep -qF -- "$pat" <<<"$out"; then
        bad "'$*' output lacks '$pat'; output: $out"
    else
        ok
    fi
}

# wait_records DIR N PID: until DIR/metrics.jsonl holds N training records
# or process PID has ended (at most about 15 s).
wait_records() {
    local n
    for _ in $(seq 1 1500); do
        n=$(grep -c '"event":"train"' "$1/metrics.jsonl" 2>/dev/null)
        [ "${n:-0}" -ge "$2" ] && return 0
        kill -0 "$3" 2>/dev/null || return 0
        sleep 0.01
    done
}
