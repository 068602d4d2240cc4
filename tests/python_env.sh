# Sourced by the tests that run Python (crosscheck.sh, python.sh): sets PY
# to the first of $PYTHON, /usr/bin/python3 and python3 that imports numpy
# (Debian's python3 first: its python3-numpy and python3-torch are what CI
# installs, and a python3 earlier on PATH may lack them), or exits 77
# (skipped) saying what was tried.
PY=
for cand in ${PYTHON:-} /usr/bin/python3 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import numpy' >/dev/null 2>&1; then
        PY=$(command -v "$cand"); break
    fi
done
if [ -z "$PY" ]; then
    echo "SKIP: no python3 with numpy found (tried ${PYTHON:+$PYTHON, }/usr/bin/python3, python3); apt-get install python3-numpy"
    exit 77
fi
