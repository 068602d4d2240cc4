"""ctypes declarations of the parts of libboltzattn the package calls.

The library is found, in this order, at the path in the environment variable
BOLTZATTN_LIBRARY, beside this package (an installed copy links it there),
then by the system loader (libboltzattn.so.0). Every struct below mirrors a
struct of include/boltzattn.h or include/boltzattn_op.h field for field;
ctypes lays them out with the platform's C rules, as the compiler does.
"""
import ctypes
import numbers
import os

import numpy as np

ERR_LEN = 512  # BA_ERR_LEN: every library error message fits in it
INT_MAX = 2 ** 31 - 1  # a C int: every int field and argument the package passes

# enum values of include/boltzattn.h
ATTN = {"softmax": 0, "sigmoid": 1, "boltzmann": 2, "coupling": 3}
# ENGINE (name -> number) and ENGINES (name -> its table row) come from the
# library's engine table at load time, below: no engine is named here.
# The capability bits of a row (BA_ENGINE_CAP_* of include/boltzattn.h):
CAP = {"exact": 1, "enumerate": 2, "approx": 4, "band": 8, "window": 16, "context": 32,
       "f32": 64}
COUPLINGS = {"absolute": 0, "relative": 1}
FIELD_BIAS = {"none": 0, "log-n": 1}
STATUS = {0: "ok", 1: "bad argument", 2: "i/o error", 3: "bad format", 4: "out of memory",
          5: "numeric error", 6: "beyond the engine's limit",
          7: "interrupted"}


class BoltzattnError(RuntimeError):
    """A call into libboltzattn failed; .status is the library's ba_status
    code and the message is the library's own, naming the bad value."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Approx(ctypes.Structure):
    """ba_approx: the approximate engines' iteration settings."""
    _fields_ = [("damping", ctypes.c_double), ("tol", ctypes.c_double),
                ("max_iter", ctypes.c_int)]


class ApproxStats(ctypes.Structure):
    """ba_approx_stats: what the approximate engines did."""
    _fields_ = [("queries", ctypes.c_long), ("sweeps", ctypes.c_long),
                ("max_sweeps", ctypes.c_int), ("retried", ctypes.c_long),
                ("unconverged", ctypes.c_long)]

    def as_dict(self):
        return {name: getattr(self, name) for name, _ in self._fields_}


class OpDesc(ctypes.Structure):
    """ba_attn_op_desc: what the attention op computes."""
    _fields_ = [("B", ctypes.c_int), ("H", ctypes.c_int), ("T", ctypes.c_int),
                ("d", ctypes.c_int), ("causal", ctypes.c_int), ("scale", ctypes.c_double),
                ("attn", ctypes.c_int), ("engine", ctypes.c_int), ("couplings", ctypes.c_int),
                ("D", ctypes.c_int), ("band", ctypes.c_int), ("field_bias", ctypes.c_int),
                ("approx", Approx), ("window", ctypes.c_int), ("alibi", ctypes.c_int)]


class TensorInfo(ctypes.Structure):
    """ba_tensor_info: one parameter tensor of a model."""
    _fields_ = [("name", ctypes.c_char * 64), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int * 3), ("offset", ctypes.c_size_t),
                ("size", ctypes.c_size_t), ("decay", ctypes.c_int)]


_P = ctypes.c_void_p
_D = ctypes.POINTER(ctypes.c_double)
_F = ctypes.POINTER(ctypes.c_float)
_ERR = ctypes.c_char_p  # a caller-owned buffer of ERR_LEN bytes


def _candidates():
    env = os.environ.get("BOLTZATTN_LIBRARY")
    if env:
        # the user named a file: that one or an error, never a silent fallback
        return [("BOLTZATTN_LIBRARY", env)]
    here = os.path.dirname(os.path.abspath(__file__))
    return [("beside the package", os.path.join(here, "libboltzattn.so.0")),
            ("the system loader", "libboltzattn.so.0")]


def _load():
    tried = []
    for where, path in _candidates():
        if where != "the system loader" and not os.path.exists(path):
            tried.append("%s (%s): no such file" % (path, where))
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s): %s" % (path, where, e))
    raise ImportError("boltzattn: cannot load libboltzattn.so.0; tried " + "; ".join(tried) +
                      ". Build the library (cmake --build build) and set "
                      "BOLTZATTN_LIBRARY=build/libboltzattn.so, or install the project "
                      "(docs/python.md).")


lib, path = _load()


def _sig(name, restype, argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


_sig("ba_attn_op_default", OpDesc, [ctypes.c_int] * 4)
_sig("ba_attn_op_check", ctypes.c_int, [ctypes.POINTER(OpDesc), _ERR])
_sig("ba_attn_op_j_size", ctypes.c_size_t, [ctypes.POINTER(OpDesc)])
_sig("ba_attn_op_ctx_new", ctypes.c_int, [ctypes.POINTER(_P), _ERR])
_sig("ba_attn_op_ctx_free", None, [_P])
_sig("ba_attn_op_forward_f32", ctypes.c_int, [_P, ctypes.POINTER(OpDesc), _F, _F, _F, _F, _F,
                                              _ERR])
_sig("ba_attn_op_forward_f64", ctypes.c_int, [_P, ctypes.POINTER(OpDesc), _D, _D, _D, _D, _D,
                                              _ERR])
_sig("ba_attn_op_backward_f32", ctypes.c_int, [_P, _F, _F, _F, _F, _F, _F, _F, _F, _F, _ERR])
_sig("ba_attn_op_backward_f64", ctypes.c_int, [_P, _D, _D, _D, _D, _D, _D, _D, _D, _D, _ERR])
_sig("ba_attn_op_approx_stats_take", ApproxStats, [_P])
_sig("ba_approx_default", Approx, [])
_sig("ba_ising_solve", ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.POINTER(Approx),
                                      ctypes.c_int, _D, _D, ctypes.c_int, _D,
                                      ctypes.POINTER(ApproxStats), _ERR])
_sig("ba_checkpoint_load", ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_P), _P, _ERR])
_sig("ba_checkpoint_save_tensors", ctypes.c_int,
     [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
      ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int), ctypes.POINTER(_F),
      ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, _ERR])
_sig("ba_model_free", None, [_P])
_sig("ba_model_num_tensors", ctypes.c_int, [_P])
_sig("ba_model_tensor", ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(TensorInfo)])
_sig("ba_model_params", _F, [_P])
_sig("ba_engine_count", ctypes.c_int, [])
_sig("ba_engine_info", ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                      ctypes.POINTER(ctypes.c_char_p),
                                      ctypes.POINTER(ctypes.c_char_p),
                                      ctypes.POINTER(ctypes.c_int),
                                      ctypes.POINTER(ctypes.c_uint)])
_sig("ba_engine_parse", ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), _ERR])


def _engine_table():
    """The library's engine table: name -> dict(id, summary, max_spins, caps)."""
    rows = {}
    for i in range(lib.ba_engine_count()):
        eid, lim, caps = ctypes.c_int(), ctypes.c_int(), ctypes.c_uint()
        name, summary = ctypes.c_char_p(), ctypes.c_char_p()
        if lib.ba_engine_info(i, ctypes.byref(eid), ctypes.byref(name), ctypes.byref(summary),
                              ctypes.byref(lim), ctypes.byref(caps)) == 0:
            rows[name.value.decode()] = {"id": eid.value, "summary": summary.value.decode(),
                                         "max_spins": lim.value, "caps": caps.value}
    return rows


def _rule_number(name):
    """The number of a name the library parses that is a rule, not a table
    row (auto: band when a band is set, else fast)."""
    v = ctypes.c_int()
    err = ctypes.create_string_buffer(ERR_LEN)
    if lib.ba_engine_parse(name.encode(), ctypes.byref(v), err) != 0:
        raise ImportError("boltzattn: the library does not take engine %r: %s"
                          % (name, err.value.decode("utf-8", "replace")))
    return v.value


ENGINES = _engine_table()
ENGINE = {name: row["id"] for name, row in ENGINES.items()}
ENGINE["auto"] = _rule_number("auto")


def engine_caps(name):
    """The capability bits (CAP) of engine name; 0 for auto or an unknown name."""
    row = ENGINES.get(name)
    return row["caps"] if row else 0


def errbuf():
    return ctypes.create_string_buffer(ERR_LEN)


def check(rc, err, what):
    """Raises BoltzattnError with the library's message when rc is not 0."""
    if rc:
        msg = err.value.decode("utf-8", "replace") or STATUS.get(rc, "error %d" % rc)
        raise BoltzattnError(rc, "%s: %s" % (what, msg))


def enum_value(table, kind, name):
    if not isinstance(name, str) or name not in table:
        raise ValueError("%s %r is not one of %s" % (kind, name, ", ".join(sorted(table))))
    return table[name]


def real_arg(name, value):
    """value as a Python float: an int, a float or a numpy number; a bool or
    anything else is refused (TypeError naming the argument)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError("%s must be a number, not %r" % (name, value))
    return float(value)


def int_arg(name, value, lo=0, hi=INT_MAX):
    """value as a Python int in [lo, hi] for a C int (or other integer) of
    the library: an int, a numpy integer or an integral float; a bool, a
    fraction or a value outside the range is refused (TypeError /
    ValueError naming the argument and the range), never wrapped as ctypes
    would (2**32 + 2 would reach C as 2)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, float)):
        raise TypeError("%s must be an integer, not %r" % (name, value))
    if isinstance(value, float):
        if not value.is_integer():
            raise TypeError("%s must be an integer, not %r" % (name, value))
    v = int(value)
    if not lo <= v <= hi:
        raise ValueError("%s = %d is out of range: it must be in [%d, %d]" % (name, v, lo, hi))
    return v
