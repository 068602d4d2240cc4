"""The attention op's description and calls, shared by the PyTorch binding
and the numpy helpers: argument rules in one place, checked once more by
the library (ba_attn_op_check), whose message names the bad value."""
import ctypes
import math
import threading

from . import _lib


def approx_settings(approx):
    """ba_approx from None (the library's defaults) or a dict with any of
    damping, tol, max_iter."""
    a = _lib.lib.ba_approx_default()
    if approx is None:
        return a
    if not isinstance(approx, dict):
        raise TypeError("approx must be a dict with damping, tol and/or max_iter, not %r"
                        % (approx,))
    for key, val in approx.items():
        if key not in ("damping", "tol", "max_iter"):
            raise ValueError("approx: unknown setting %r (damping, tol, max_iter)" % (key,))
        if key == "max_iter":
            a.max_iter = _lib.int_arg("approx max_iter", val)
        else:
            setattr(a, key, _lib.real_arg("approx " + key, val))
    return a


def make_desc(B, H, T, d, j_shape, attn="boltzmann", causal=True, scale=None, engine="auto",
              band=None, field_bias=None, approx=None, window=None, alibi=False):
    """The ba_attn_op_desc of one call; j_shape is J's shape (None without
    J). Raises ValueError/TypeError naming the bad argument, or
    BoltzattnError with the library's verdict (a T beyond the engine)."""
    if alibi not in (True, False):
        raise TypeError("alibi must be True or False, not %r" % (alibi,))
    if causal is not True:
        raise ValueError("causal=%r: the op is causal only (query i sees keys 0..i)" % (causal,))
    B, H, T, d = (_lib.int_arg(n, x) for n, x in (("B", B), ("H", H), ("T", T), ("d", d)))
    desc = _lib.lib.ba_attn_op_default(B, H, T, d)
    desc.attn = _lib.enum_value(_lib.ATTN, "attn", attn)
    desc.engine = _lib.enum_value(_lib.ENGINE, "engine", engine)
    ising = attn in ("boltzmann", "coupling")
    # settings the call would not use are refused, not dropped
    if not ising and engine != "auto":
        raise ValueError("engine %r solves the Ising attention (boltzmann, coupling); %s "
                         "attention has none: leave engine='auto'" % (engine, attn))
    if approx is not None and not _lib.engine_caps(engine) & _lib.CAP["approx"]:
        raise ValueError("approx is for the approximate engines (%s); engine %r takes none"
                         % (", ".join(n for n in sorted(_lib.ENGINES)
                                      if _lib.engine_caps(n) & _lib.CAP["approx"]), engine))
    if scale is not None:
        scale = _lib.real_arg("scale", scale)
        if not math.isfinite(scale):
            raise ValueError("scale = %r is not finite" % (scale,))
        desc.scale = scale
    desc.field_bias = _lib.enum_value(_lib.FIELD_BIAS, "field_bias",
                                      "none" if field_bias is None else field_bias)
    if band is not None:
        desc.band = _lib.int_arg("band", band)
    if window is not None:
        desc.window = _lib.int_arg("window", window)
    desc.approx = approx_settings(approx)
    desc.alibi = 1 if alibi else 0
    if not ising and j_shape is not None:
        raise ValueError("%s attention takes no couplings: give J=None" % attn)
    if ising:
        if j_shape is None:
            raise ValueError("%s attention needs couplings J ([H, T, T] or [H, D])" % attn)
        if len(j_shape) == 3:
            if tuple(j_shape) != (H, T, T):
                raise ValueError("absolute couplings J must have shape [H, T, T] = [%d, %d, %d], "
                                 "not %s" % (H, T, T, list(j_shape)))
            desc.couplings = _lib.COUPLINGS["absolute"]
        elif len(j_shape) == 2:
            if j_shape[0] != H:
                raise ValueError("relative couplings J must have shape [H, D] with H = %d, not %s"
                                 % (H, list(j_shape)))
            desc.couplings = _lib.COUPLINGS["relative"]
            desc.D = _lib.int_arg("D (J's second dimension)", j_shape[1])
        else:
            raise ValueError("J must be [H, T, T] (absolute) or [H, D] (relative), not %s"
                             % (list(j_shape),))
    err = _lib.errbuf()
    _lib.check(_lib.lib.ba_attn_op_check(ctypes.byref(desc), err), err, "boltzmann attention")
    return desc


class OpContext:
    """Owns one ba_attn_op_ctx: what a backward needs from its forward."""

    def __init__(self):
        p = ctypes.c_void_p()
        err = _lib.errbuf()
        _lib.check(_lib.lib.ba_attn_op_ctx_new(ctypes.byref(p), err), err, "op context")
        self.p = p

    def approx_stats(self):
        return _lib.lib.ba_attn_op_approx_stats_take(self.p).as_dict()

    def __del__(self):
        p = getattr(self, "p", None)
        if p is not None and p.value is not None and _lib is not None and _lib.lib is not None:
            _lib.lib.ba_attn_op_ctx_free(p)
            self.p = None


# Idle contexts, kept for the next forward: a context keeps its buffers
# (the weights, the fast engine's kernels), which are tens of megabytes at
# T = 16..20, and a fresh one per call would fault them in every time
# (measured: half the op's time at T = 16, B = 64, H = 4). The pool is
# bounded: a context goes back tagged with the shape it served (its
# buffers fit that shape), a forward takes one of its own shape only (so
# no context is grown by a larger shape on top of what it holds), at most
# _POOL_MAX idle contexts are kept, the least recently used freed first,
# and one idle for _POOL_AGE leases (its shape no longer called) is freed.
_POOL_MAX = 4
_POOL_AGE = 64
_pool = []  # [lease number when returned, key, OpContext], oldest first
_pool_lock = threading.Lock()
_leases = 0


def desc_key(desc, f64):
    """What a context's buffers depend on: the op's shape and kind."""
    return (f64, desc.B, desc.H, desc.T, desc.d, desc.attn, desc.engine, desc.couplings,
            desc.D, desc.band, desc.window, desc.alibi)


def release_idle():
    """Frees every idle context of the pool (contexts held by live autograd
    graphs go when their graphs do). Returns how many were freed."""
    with _pool_lock:
        idle = [e[2] for e in _pool]
        del _pool[:]
    for op in idle:
        op.__del__()
    return len(idle)


def pool_size():
    with _pool_lock:
        return len(_pool)


class Lease:
    """A context taken from the pool for one forward and what may follow
    (its backward, a second backward with retain_graph); it goes back to
    the pool when the lease is dropped, that is when autograd frees the
    graph that holds it. key: desc_key of the call (None: any context)."""

    def __init__(self, key=None):
        global _leases
        op, stale = None, []
        with _pool_lock:
            _leases += 1
            keep = []
            for e in _pool:
                if e[0] < _leases - _POOL_AGE:
                    stale.append(e[2])
                else:
                    keep.append(e)
            _pool[:] = keep
            for i in range(len(_pool) - 1, -1, -1):
                if key is None or _pool[i][1] == key:
                    op = _pool.pop(i)[2]
                    break
        for old in stale:  # freed outside the lock
            old.__del__()
        self.key = key
        self.op = op if op is not None else OpContext()

    def __del__(self):
        op, self.op = getattr(self, "op", None), None
        if op is None:
            return
        try:
            evicted = []
            with _pool_lock:
                _pool.append([_leases, getattr(self, "key", None), op])
                while len(_pool) > _POOL_MAX:
                    evicted.append(_pool.pop(0)[2])
            for old in evicted:
                old.__del__()
        except Exception:  # interpreter shutdown: the context frees itself
            pass
