#!/usr/bin/env bash
# The installed library as a user meets it (issue 17; docs/c-api.md):
# installs the build tree into a temporary prefix, checks what landed there
# (headers, libboltzattn.a, libboltzattn.so with its soname and an export
# list of exactly the public functions, boltzattn.pc, the CMake package),
# then builds both examples against the installed copy with the pkg-config
# commands written in their headers (shared and static) and with CMake
# (find_package, shared and static), runs them and compares their output:
# the op example's with the in-tree build's, bit for bit, and its
# finite-difference lines "ok". Every C block of docs/c-api.md must be a
# verbatim excerpt of an example, so the document cannot drift from code
# that is built here.
#
# usage: install.sh BUILD_DIR SOURCE_DIR IN_TREE_OP_EXAMPLE plain|asan [CC]
set -euo pipefail
build=$1 src=$2 intree=$3 mode=$4 cc=${5:-cc}

fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in pkg-config cmake nm readelf python3; do
    command -v "$tool" >/dev/null || { echo "SKIP: $tool not found"; exit 77; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || {
    cat "$tmp/install.log"; fail "cmake --install"; }
libdir=$(dirname "$(find "$prefix" -name libboltzattn.a | head -n 1)")
[ -n "$libdir" ] && [ -d "$libdir" ] || fail "libboltzattn.a not installed"

# ---------------------------------------------------------------- files
for f in include/boltzattn.h include/boltzattn_ising.h include/boltzattn_samplers.h include/boltzattn_train.h \
         include/boltzattn_op.h; do
    [ -f "$prefix/$f" ] || fail "$f not installed"
done
# every header of include/ and nothing else, each compiling on its own (C
# and, where there is one, C++); boltzattn.h brings in the others
diff <(cd "$src/include" && ls -- *.h) <(cd "$prefix/include" && ls -- *.h) >"$tmp/headers" || {
    cat "$tmp/headers"; fail "the installed headers are not those of include/"; }
for h in "$prefix"/include/*.h; do
    echo "#include <$(basename "$h")>" | "$cc" -std=c11 -Wall -Wextra -Werror -fsyntax-only \
        -I "$prefix/include" -x c - || fail "$(basename "$h") does not compile alone"
    if command -v c++ >/dev/null; then
        echo "#include <$(basename "$h")>" | c++ -Wall -Wextra -Werror -fsyntax-only \
            -I "$prefix/include" -x c++ - || fail "$(basename "$h") does not compile alone as C++"
    fi
done
for f in libboltzattn.so.0.1.0 pkgconfig/boltzattn.pc cmake/boltzattn/boltzattnConfig.cmake \
         cmake/boltzattn/boltzattnConfigVersion.cmake cmake/boltzattn/boltzattnTargets.cmake; do
    [ -f "$libdir/$f" ] || fail "$libdir/$f not installed"
done
[ "$(readlink "$libdir/libboltzattn.so.0")" = libboltzattn.so.0.1.0 ] || fail "libboltzattn.so.0 link"
[ "$(readlink "$libdir/libboltzattn.so")" = libboltzattn.so.0 ] || fail "libboltzattn.so link"
soname=$(readelf -d "$libdir/libboltzattn.so.0.1.0" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libboltzattn.so.0 ] || fail "soname is '$soname', expected libboltzattn.so.0"

# ------------------------------------------- exports: the public API only
# The functions the installed headers declare (comments stripped by the
# preprocessor) against the dynamic symbols the library defines.
"$cc" -E -P -I "$prefix/include" "$prefix/include/boltzattn.h" |
    grep -oE '\bba_[A-Za-z0-9_]+[[:space:]]*\(' | sed 's/[[:space:](]//g' | sort -u >"$tmp/declared"
nm -D --defined-only "$libdir/libboltzattn.so.0.1.0" | awk '$2 ~ /^[TtWiDdBbRr]$/ {print $3}' |
    sed 's/@.*//' | sort -u >"$tmp/exported"
grep -v '^ba_' "$tmp/exported" >"$tmp/foreign" || true
# a few names the toolchain itself adds to every shared object, and the
# locks of the library's named OpenMP critical sections (#pragma omp
# critical(ba_...)), which OpenMP makes global by design
grep -vE '^(_init|_fini|_edata|_end|__bss_start|\.gomp_critical_user_ba_[a-z0-9_]+)$' \
    "$tmp/foreign" >"$tmp/foreign2" || true
[ ! -s "$tmp/foreign2" ] || { head "$tmp/foreign2"; fail "exported symbols without the ba_ prefix"; }
comm -13 "$tmp/declared" <(grep '^ba_' "$tmp/exported") >"$tmp/extra"
[ ! -s "$tmp/extra" ] || { head "$tmp/extra"; fail "internal symbols exported (not in the public headers)"; }
comm -23 "$tmp/declared" "$tmp/exported" >"$tmp/missing"
[ ! -s "$tmp/missing" ] || { head "$tmp/missing"; fail "public functions not exported"; }
for internal in ba_attn_core_forward_f32 ba_attention_forward_f32 ba_engine_forward ba_band_forward; do
    ! grep -qx "$internal" "$tmp/exported" || fail "internal $internal exported"
done
echo "exports: $(wc -l <"$tmp/exported") symbols, exactly the $(wc -l <"$tmp/declared") public functions"

# ------------------------------------------------------------ examples
extra=()
if [ "$mode" = asan ]; then
    extra=(-fsanitize=address,undefined -fno-omit-frame-pointer)
fi
export PKG_CONFIG_PATH=$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ "$(pkg-config --modversion boltzattn)" = 0.1.0 ] || fail "pkg-config --modversion boltzattn"
[ "$(pkg-config --variable=prefix boltzattn | xargs realpath)" = "$(realpath "$prefix")" ] ||
    fail "boltzattn.pc's prefix is not the install prefix"

# The build line of an example, as its header comment writes it.
build_line() { sed -n 's/^ \* build: //p' "$1"; }

run_example() { # name dir binary args...: its output into $tmp/out.<name>
    local name=$1 dir=$2 bin=$3; shift 3
    (cd "$dir" && ASAN_OPTIONS=detect_leaks=1 "$bin" "$@") >"$tmp/out.$name" 2>&1 || {
        cat "$tmp/out.$name"; fail "$name exited with $?"; }
}

for ex in op train; do
    exdir=$src/examples/$ex
    args=()
    [ $ex = train ] && args=(40)
    # pkg-config, shared: the command in the example's header, verbatim
    line=$(build_line "$exdir/${ex}_example.c")
    [ -n "$line" ] || fail "examples/$ex/${ex}_example.c has no 'build:' line"
    w=$tmp/pc-$ex && mkdir -p "$w" && cp "$exdir/${ex}_example.c" "$w/"
    (cd "$w" && eval "${line/#cc /$cc ${extra[*]} }") || fail "$ex: $line"
    deps=$(ldd "$w/${ex}_example")
    grep -q "libboltzattn.so.0 => $libdir" <<<"$deps" || fail "$ex does not load the installed libboltzattn.so"
    run_example "$ex-pc" "$w" "$w/${ex}_example" "${args[@]}"
    # pkg-config, static: libboltzattn.a and its Libs.private/Requires.private
    libs=$(pkg-config --static --libs boltzattn | sed "s#-lboltzattn#$libdir/libboltzattn.a#")
    "$cc" "${extra[@]}" -O2 -o "$w/${ex}_static" "$w/${ex}_example.c" \
        $(pkg-config --cflags boltzattn) $libs || fail "$ex: static link with pkg-config --static"
    deps=$(ldd "$w/${ex}_static")
    ! grep -q libboltzattn <<<"$deps" || fail "$ex static build loads libboltzattn.so"
    run_example "$ex-pcstatic" "$w" "$w/${ex}_static" "${args[@]}"
    # CMake, shared and static
    for kind in shared static; do
        b=$tmp/cm-$ex-$kind
        cmake -S "$exdir" -B "$b" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
            -DBOLTZATTN_STATIC=$([ $kind = static ] && echo ON || echo OFF) \
            -DCMAKE_C_FLAGS="${extra[*]}" >"$b.log" 2>&1 || { cat "$b.log"; fail "$ex: cmake configure ($kind)"; }
        cmake --build "$b" >>"$b.log" 2>&1 || { cat "$b.log"; fail "$ex: cmake build ($kind)"; }
        run_example "$ex-cmake-$kind" "$b" "$b/${ex}_example" "${args[@]}"
    done
    for v in pcstatic cmake-shared cmake-static; do
        cmp -s "$tmp/out.$ex-pc" "$tmp/out.$ex-$v" || {
            diff "$tmp/out.$ex-pc" "$tmp/out.$ex-$v"; fail "$ex: output of the $v build differs"; }
    done
done

# The op example: finite differences ok, and the checksum of the in-tree
# build (static library, the project's own flags).
grep -q '^checksum: out ' "$tmp/out.op-pc" || fail "op example printed no checksum"
[ "$(grep -c '^finite difference .* ok$' "$tmp/out.op-pc")" = 2 ] || {
    cat "$tmp/out.op-pc"; fail "op example's finite-difference check"; }
run_example op-intree "$tmp" "$intree"
cmp -s "$tmp/out.op-pc" "$tmp/out.op-intree" || {
    diff "$tmp/out.op-intree" "$tmp/out.op-pc"; fail "installed op example differs from the in-tree build"; }
grep -qE '^held-out accuracy [0-9.]+ %$' "$tmp/out.train-pc" || {
    cat "$tmp/out.train-pc"; fail "train example's output"; }
cat "$tmp/out.op-pc" "$tmp/out.train-pc"

# ------------------------------------- docs/c-api.md quotes the examples
python3 "$src/tests/doc_excerpts.py" "$src/docs/c-api.md" c,cmake \
    "$src"/examples/*/*_example.c "$src"/examples/*/CMakeLists.txt \
    "$src"/cli/train.c "$src"/cli/mpi.c || fail "docs/c-api.md"
# --------------------------------------------- the installed Python package
# Installed under PREFIX/lib/pythonX.Y/site-packages (the user site for
# ~/.local, a venv's own directory) with a link to the installed library
# beside it; it must load that library, not the build tree's.
pydir=$(find "$prefix" -type d -path '*/site-packages/boltzattn' | head -n 1)
[ -n "$pydir" ] && [ -f "$pydir/__init__.py" ] && [ -f "$pydir/torch.py" ] ||
    fail "the Python package was not installed under $prefix/lib/pythonX.Y/site-packages"
[ "$(realpath "$pydir/libboltzattn.so.0")" = "$(realpath "$libdir/libboltzattn.so.0.1.0")" ] ||
    fail "$pydir/libboltzattn.so.0 does not lead to the installed library"
if [ "$mode" = asan ]; then
    echo "SKIP the installed package's import: a sanitized library does not load into python3"
elif /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
    env -u BOLTZATTN_LIBRARY PYTHONPATH="$(dirname "$pydir")" /usr/bin/python3 - "$libdir" <<'EOF'
import os, sys
import numpy as np
import boltzattn
lib = os.path.realpath(boltzattn.library_path)
want = os.path.realpath(os.path.join(sys.argv[1], "libboltzattn.so.0.1.0"))
assert lib == want, (lib, want)
w = boltzattn.ising_marginals(np.array([0.3]), np.zeros((1, 1)))
assert abs(w[0] - 1 / (1 + np.exp(-0.6))) < 1e-15, w
print("installed python package: loads", lib)
EOF
else
    echo "SKIP the installed package's import: /usr/bin/python3 has no numpy"
fi
echo "install: ok"
