#!/usr/bin/env bash
# Builds the libFuzzer targets in tests/fuzz (clang, ASan + UBSan) against
# the library sources and runs each for SECONDS (default 20) from a copy of
# the committed seed corpus (tests/fuzz/corpus/TARGET plus the matching
# files of tests/malformed/). Exits non-zero if a target finds a crash, a
# leak or a timeout; the input that caused it is kept and its path printed.
# Without clang's libFuzzer it prints SKIP and exits 0.
#
#   bash tests/fuzz/run.sh [SECONDS]
#
# Environment: CLANG (default clang), BA_FUZZ_BUILD (default build-fuzz),
# BA_FUZZ_CRASHES (where crashing inputs go, default tests/fuzz/crashes),
# BA_FUZZ_TARGETS (default "checkpoint batch data").
set -uo pipefail
cd "$(dirname "$0")/../.."

secs=${1:-20}
case $secs in
    '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac
cc=${CLANG:-clang}
bdir=${BA_FUZZ_BUILD:-build-fuzz}
crashes=${BA_FUZZ_CRASHES:-tests/fuzz/crashes}
targets=${BA_FUZZ_TARGETS:-checkpoint batch data}
arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
blasdir=/usr/lib/$arch/openblas-openmp
[ -d "$blasdir" ] || blasdir=/usr/lib/$arch

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Is there a clang whose libFuzzer runtime links?
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "SKIP: fuzzing: $cc not found (apt-get install clang libclang-rt-14-dev)"
    exit 0
fi
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
    >"$tmp/probe.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$tmp/probe.c" -o "$tmp/probe" >"$tmp/probe.log" 2>&1; then
    echo "SKIP: fuzzing: $cc cannot build a libFuzzer target (apt-get install libclang-rt-14-dev):"
    sed 's/^/    /' "$tmp/probe.log" | head -5
    exit 0
fi
# OpenMP through clang needs LLVM's libomp (libomp-dev); without it the
# library builds serially (its OpenMP use is guarded by _OPENMP).
omp=-fopenmp
if ! "$cc" -fopenmp -fsanitize=fuzzer "$tmp/probe.c" -o "$tmp/probe" >/dev/null 2>&1; then
    echo "note: $cc -fopenmp does not link (apt-get install libomp-dev); building without OpenMP"
    omp=
fi

flags=(-std=c11 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined $omp -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
       -Iinclude -Isrc -I/usr/include/$arch)
libs=(-lcjson -L"$blasdir" -Wl,-rpath,"$blasdir" -lopenblas -lm)

mkdir -p "$bdir/obj"
echo "fuzz: building into $bdir/ with $("$cc" --version | head -1)"
t0=$(date +%s)
# The library once, without the fuzzer's main (fuzzer-no-link), in parallel.
pids=()
for src in src/*/*.c; do
    rel=${src#src/}
    obj=$bdir/obj/${rel//\//_}
    obj=${obj%.c}.o
    "${cc}" "${flags[@]/-fsanitize=fuzzer,address,undefined/-fsanitize=fuzzer-no-link,address,undefined}" \
        -Wno-pass-failed -c "$src" -o "$obj" &
    pids+=($!)
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
if [ $fail -ne 0 ]; then
    echo "FAIL: fuzz: the library did not compile" >&2
    exit 1
fi
for t in $targets; do
    if ! "$cc" "${flags[@]}" -Wall -Wextra "tests/fuzz/fuzz_$t.c" "$bdir"/obj/*.o "${libs[@]}" \
        -o "$bdir/fuzz_$t"; then
        echo "FAIL: fuzz: fuzz_$t did not build" >&2
        exit 1
    fi
done
echo "fuzz: built in $(($(date +%s) - t0)) s"

mkdir -p "$crashes"
status=0
for t in $targets; do
    work=$tmp/corpus-$t
    mkdir -p "$work"
    cp tests/fuzz/corpus/"$t"/* "$work"/ 2>/dev/null
    # the malformed-file corpus of tests/malformed.sh seeds the same readers
    case $t in
        checkpoint) cp tests/malformed/ckpt_* "$work"/ 2>/dev/null ;;
        batch) cp tests/malformed/batch_* "$work"/ 2>/dev/null ;;
        data) cp tests/malformed/text_* "$work"/ 2>/dev/null ;;
    esac
    log=$tmp/fuzz-$t.log
    # Timeouts (-timeout, seconds per input) count as failures; OpenMP
    # threads are pinned to one so executions are comparable run to run.
    t1=$(date +%s)
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
        "$bdir/fuzz_$t" -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 \
        -timeout=30 -print_final_stats=1 -artifact_prefix="$crashes/$t-" "$work" >"$log" 2>&1
    rc=$?
    took=$(($(date +%s) - t1))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    echo "fuzz_$t: ${execs:-?} executions in ${took} s (${cov:-cov: ?}, corpus $(ls "$work" | wc -l) files)"
    if [ $rc -ne 0 ]; then
        status=1
        echo "FAIL: fuzz_$t exited with status $rc; its report:" >&2
        # From the sanitizer's or libFuzzer's first error line on.
        grep -v '^#[0-9]' "$log" |
            awk '/ERROR|runtime error|deadly signal|out-of-memory|timeout/ { on = 1 } on' |
            head -60 | sed 's/^/    /' >&2
        art=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
        if [ -n "$art" ]; then
            echo "crashing input kept: $art (reproduce: $bdir/fuzz_$t $art)" >&2
        fi
    fi
done
exit $status
