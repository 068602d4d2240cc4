#!/usr/bin/env bash
# The Python package (python/boltzattn; docs/python.md) against the library
# it wraps and the command line: tests/python/test_numpy.py (numpy only),
# then tests/python/test_torch.py (PyTorch), tests/python/test_hostile.py
# (hostile inputs: checkpoint targets, integer ranges, the op's memory,
# unused settings, non-finite tensors), and the docs' example
# (examples/python/swap_attention.py), each with unittest.
#
# usage: tests/python.sh LIBRARY CLI plain|asan
# env:   PYTHON   a python3 to use (default: /usr/bin/python3, then python3)
# exit:  0 passed, 1 a failure, 77 skipped (the reason is printed: numpy or
#        torch missing, or a sanitized build)
set -u
lib=$1 cli=$2 mode=${3:-plain}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)

if [ "$mode" = asan ]; then
    echo "SKIP: the sanitized libboltzattn.so cannot be loaded into an uninstrumented python3"
    exit 77
fi
. "$here/python_env.sh"
export BOLTZATTN_LIBRARY=$lib BOLTZATTN_CLI=$cli PYTHONPATH=$src/python
export PYTHONDONTWRITEBYTECODE=1
cd "$here/python" || exit 1
"$PY" -m unittest -v test_numpy || exit 1
if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
    echo "SKIP: the PyTorch tests: $PY has no torch (apt-get install python3-torch)"
    exit 77
fi
"$PY" -W error::RuntimeWarning -m unittest -v test_torch || exit 1
"$PY" -W error::RuntimeWarning -m unittest -v test_hostile || exit 1
"$PY" "$src/examples/python/swap_attention.py" || { echo "FAIL: examples/python/swap_attention.py"; exit 1; }
# docs/python.md quotes the example: every python block is an excerpt of it
"$PY" "$here/doc_excerpts.py" "$src/docs/python.md" python "$src"/examples/python/*.py || exit 1
echo "python: all passed with $PY ($("$PY" -c 'import torch; print("torch", torch.__version__)'))"
