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
        setattr(a, key, int(val) if key == "max_iter" else float(val))
    return a


def make_desc(B, H, T, d, j_shape, attn="boltzmann", causal=True, scale=None, engine="auto",
              band=None, field_bias=None, approx=None, window=None):
    """The ba_attn_op_desc of one call; j_shape is J's shape (None without
    J). Raises ValueError/TypeError naming the bad argument, or
    BoltzattnError with the library's verdict (a T beyond the engine)."""
    if causal is not True:
        raise ValueError("causal=%r: the op is causal only (query i sees keys 0..i)" % (causal,))
    desc = _lib.lib.ba_attn_op_default(B, H, T, d)
    desc.attn = _lib.enum_value(_lib.ATTN, "attn", attn)
    desc.engine = _lib.enum_value(_lib.ENGINE, "engine", engine)
    if scale is not None:
        scale = float(scale)
        if not math.isfinite(scale):
            raise ValueError("scale = %r is not finite" % (scale,))
        desc.scale = scale
    desc.field_bias = _lib.enum_value(_lib.FIELD_BIAS, "field_bias",
                                      "none" if field_bias is None else field_bias)
    if band is not None:
        if isinstance(band, bool) or int(band) != band:
            raise TypeError("band must be an int or None, not %r" % (band,))
        desc.band = int(band)
    if window is not None:
        desc.window = int(window)
    desc.approx = approx_settings(approx)
    ising = attn in ("boltzmann", "coupling")
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
            desc.D = int(j_shape[1])
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
# (measured: half the op's time at T = 16, B = 64, H = 4).
_POOL_MAX = 8
_pool = []
_pool_lock = threading.Lock()


class Lease:
    """A context taken from the pool for one forward and what may follow
    (its backward, a second backward with retain_graph); it goes back to
    the pool when the lease is dropped, that is when autograd frees the
    graph that holds it."""

    def __init__(self):
        with _pool_lock:
            op = _pool.pop() if _pool else None
        self.op = op if op is not None else OpContext()

    def __del__(self):
        op, self.op = getattr(self, "op", None), None
        if op is None:
            return
        try:
            with _pool_lock:
                if len(_pool) < _POOL_MAX:
                    _pool.append(op)
                    return
        except Exception:  # interpreter shutdown: the context frees itself
            pass
