"""boltzattn: Boltzmann attention from Python, over the C library
libboltzattn (ctypes; numpy, and PyTorch for boltzattn.torch, are the only
imports).

    import numpy as np, boltzattn
    w = boltzattn.ising_marginals(np.array([0.5, -0.2, 0.1]),
                                  np.triu(np.full((3, 3), 0.3), 1))   # P(s_j = +1)
    model = boltzattn.load_checkpoint("runs/x/model.safetensors")     # a torch module

The library is found through BOLTZATTN_LIBRARY (a path to the .so), then
beside this package, then the system loader. docs/python.md has the rest.
"""
import ctypes
import json
import os
import struct
import warnings

import numpy as np

from . import _lib, _op
from ._lib import BoltzattnError

__version__ = "0.1.0"
__all__ = ["ising_marginals", "read_checkpoint", "load_checkpoint", "save_checkpoint",
           "BoltzattnError", "library_path"]

library_path = _lib.path


def ising_marginals(h, J, engine="auto", band=None, approx=None, window=None, log=False):
    """P(s_j = +1) (or, with log=True, its log) of the Ising system with
    fields h (n,) and couplings J (n, n; only j < k is read),
    P(s) ~ exp(sum_j h_j s_j + sum_{j<k} J_jk s_j s_k), as a float64 array
    (n,). engine: auto (band when band is set, else fast), reference, fast
    (exact, n <= 20 / 26), band (exact for couplings of range <= band;
    farther ones are ignored), mf, tap, bp or hybrid (approximate; window:
    hybrid's exact window; approx: dict of damping, tol, max_iter).
    Raises ValueError for bad shapes or names, BoltzattnError with the
    library's message otherwise (n past the engine's limit, non-finite
    values, an iteration that did not converge)."""
    h = np.ascontiguousarray(h, dtype=np.float64)
    J = np.ascontiguousarray(J, dtype=np.float64)
    if h.ndim != 1 or h.size < 1:
        raise ValueError("h must be a non-empty vector (n,), not shape %s" % (h.shape,))
    n = h.size
    if J.shape != (n, n):
        raise ValueError("J must be (n, n) = (%d, %d), not %s" % (n, n, J.shape))
    n = _lib.int_arg("n (h's length)", n, 1)
    e = _lib.enum_value(_lib.ENGINE, "engine", engine)
    caps = _lib.engine_caps(engine)
    banded = engine == "auto" or caps & _lib.CAP["band"]
    band = None if band is None else _lib.int_arg("band", band)
    window = None if window is None else _lib.int_arg("window", window)
    W = (band or 0) if banded else (window or 0)
    if not banded and band:
        raise ValueError("band is for the auto and band engines; the hybrid engine takes window")
    if not caps & _lib.CAP["window"] and window:
        raise ValueError("window is the hybrid engine's; the %s engine takes none" % engine)
    if approx is not None and not caps & _lib.CAP["approx"]:
        raise ValueError("approx is for the approximate engines; the %s engine takes none"
                         % engine)
    a = _op.approx_settings(approx)
    logw = np.empty(n)
    st = _lib.ApproxStats()
    err = _lib.errbuf()
    D = ctypes.POINTER(ctypes.c_double)
    rc = _lib.lib.ba_ising_solve(e, W, ctypes.byref(a), n, h.ctypes.data_as(D),
                                 J.ctypes.data_as(D), n, logw.ctypes.data_as(D),
                                 ctypes.byref(st), err)
    _lib.check(rc, err, "ising_marginals")
    if st.unconverged:
        raise BoltzattnError(5, "ising_marginals: the %s iteration did not converge in %d sweeps "
                             "(raise approx max_iter or lower damping)" % (engine, a.max_iter))
    return logw if log else np.exp(logw)


# ------------------------------------------------------------ checkpoints

def _read_header(path):
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise BoltzattnError(3, "%s: too short for a safetensors file" % path)
        (n,) = struct.unpack("<Q", head)
        if n > 100 * 1024 * 1024:
            raise BoltzattnError(3, "%s: header length %d is not plausible" % (path, n))
        raw = f.read(n)
    if len(raw) != n:
        raise BoltzattnError(3, "%s: header runs past the end of the file" % path)
    return json.loads(raw.decode("utf-8"))


def read_checkpoint(path):
    """(config dict, {name: float32 numpy array}) of a checkpoint written by
    the command line (or save_checkpoint), read and checked by the
    library's own loader: every tensor's name, shape and finiteness
    against the config, and the checksum. Raises BoltzattnError naming the
    problem (missing file, corrupt data, a tensor that does not fit)."""
    path = os.fspath(path)
    m = ctypes.c_void_p()
    err = _lib.errbuf()
    rc = _lib.lib.ba_checkpoint_load(os.fsencode(path), ctypes.byref(m), None, err)
    _lib.check(rc, err, "checkpoint %s" % path)
    try:
        params = _lib.lib.ba_model_params(m)
        tensors = {}
        info = _lib.TensorInfo()
        for i in range(_lib.lib.ba_model_num_tensors(m)):
            _lib.lib.ba_model_tensor(m, i, ctypes.byref(info))
            flat = np.ctypeslib.as_array(params, shape=(info.offset + info.size,))
            shape = tuple(info.shape[:info.ndim])
            tensors[info.name.decode()] = flat[info.offset:].copy().reshape(shape)
    finally:
        _lib.lib.ba_model_free(m)
    meta = _read_header(path).get("__metadata__", {})
    return json.loads(meta["config"]), tensors


def load_checkpoint(path, dtype=None):
    """The model of a checkpoint as a boltzattn.torch.BoltzattnModel (a
    torch.nn.Module, float32 or the dtype given), its tensors loaded as
    they are; model.config is the checkpoint's config."""
    import torch

    from .torch import BoltzattnModel

    config, tensors = read_checkpoint(path)
    sampler = (config.get("sampler") or {}).get("kind", "exact")
    if sampler != "exact":
        warnings.warn("%s was trained with sampled attention (%s); the PyTorch model computes "
                      "the exact marginals, as `boltzattn eval --engine` does" % (path, sampler),
                      RuntimeWarning, stacklevel=2)
    dtype = dtype or torch.float32
    model = BoltzattnModel(config, dtype=dtype)
    model.load_state_dict({k: torch.from_numpy(v).to(dtype) for k, v in tensors.items()},
                          strict=True)
    return model


_LAYER_ORDER = ["ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight",
                "attn.proj.bias", "attn.J", "attn.J_rel", "ln2.weight", "ln2.bias",
                "ffn.fc.weight", "ffn.fc.bias", "ffn.proj.weight", "ffn.proj.bias"]
_TAIL_ORDER = ["ln_f.weight", "ln_f.bias", "head.weight", "head.bias"]


def _tensor_rank(name):
    """The library's tensor order (its checksum runs in it): embeddings,
    each block's tensors, the final LayerNorm and the head."""
    if name in ("tok_emb", "pos_emb"):
        return (0, name != "tok_emb", 0)
    if name.startswith("blocks."):
        _, layer, rest = name.split(".", 2)
        return (1, int(layer), _LAYER_ORDER.index(rest))
    return (2, _TAIL_ORDER.index(name), 0)


def save_checkpoint(model, path, step=None):
    """Writes model (a BoltzattnModel) as a checkpoint the command line
    reads (eval, grads, couplings, generate): F32 tensors with the
    checkpoint's names, model.config as "config" (it must hold the task and
    its data description, as a loaded checkpoint's does), a checksum. The
    library writes it (ba_checkpoint_save_tensors): it builds its own model
    from the config, checks every tensor's name, shape and finiteness
    against it, and replaces path atomically with its one file writer
    (ba_write_file: a temporary opened without following links, fsync'ed,
    renamed over path), so a model the library would refuse never replaces
    a file. A path that exists and is not a regular file (a directory, a
    device) is refused; a symbolic link to a regular file is itself
    replaced, its target left alone. step: an int in [0, 2**63 - 1]."""
    path = os.fspath(path)
    config = getattr(model, "config", None)
    if not isinstance(config, dict) or "task" not in config:
        raise ValueError("model.config must be the model's config dict with its task "
                         "(as load_checkpoint gives)")
    state = model.state_dict()
    unknown = [n for n in state if not n.startswith("blocks.") and n not in _TAIL_ORDER
               and n not in ("tok_emb", "pos_emb")]
    if unknown:
        raise ValueError("model has tensors the checkpoint format does not: %s" % unknown)
    names, arrays = [], []
    for name in sorted(state, key=_tensor_rank):
        a = np.ascontiguousarray(state[name].detach().cpu().numpy(), dtype=np.float32)
        if a.ndim > 3:
            raise ValueError("tensor %s has %d dimensions; a checkpoint's have at most 3"
                             % (name, a.ndim))
        if not np.all(np.isfinite(a)):
            raise ValueError("tensor %s has a non-finite value" % name)
        names.append(name)
        arrays.append(a)
    n = len(names)
    shapes = (ctypes.c_int * (3 * n + 1))()
    ndims = (ctypes.c_int * (n + 1))()
    for i, a in enumerate(arrays):
        ndims[i] = a.ndim
        for j, dim in enumerate(a.shape):
            shapes[3 * i + j] = _lib.int_arg("tensor %s's shape" % names[i], dim)
    F = ctypes.POINTER(ctypes.c_float)
    data = (F * (n + 1))(*[a.ctypes.data_as(F) for a in arrays])
    cnames = (ctypes.c_char_p * (n + 1))(*[nm.encode() for nm in names])
    keys = (ctypes.c_char_p * 1)()
    vals = (ctypes.c_char_p * 1)()
    n_meta = 0
    if step is not None:
        keys[0] = b"step"
        vals[0] = str(_lib.int_arg("step", step, 0, 2 ** 63 - 1)).encode()
        n_meta = 1
    err = _lib.errbuf()
    rc = _lib.lib.ba_checkpoint_save_tensors(
        os.fsencode(path), json.dumps(config, separators=(",", ":")).encode(), n, cnames,
        ndims, shapes, data, keys, vals, n_meta, err)
    _lib.check(rc, err, "save_checkpoint %s" % path)
