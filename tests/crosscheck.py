#!/usr/bin/env python3
"""Independent float64 cross-check of boltzattn's loss and gradients.

usage: crosscheck.py CKPT BATCH GRADS [--stencil 2|4] [--step H] [--chunk K]

  --stencil 2   two-point central differences, step 1e-4 * max(1,|x|) (default)
  --stencil 4   fourth-order central differences, step 1e-3 * max(1,|x|); also
                prints fd_est, the two-point estimate's distance from it
  --step H      override the relative step
  --chunk K     parameter elements perturbed per vectorised pass (default 256)

Written from the specification (BOLTZMANN_ATTENTION.md, sections 2, 5, 6)
and the checkpoint format only; it shares no code or algorithm with the C
sources. The forward pass is recomputed in float64 (Boltzmann weights by plain
enumeration of every spin state), the gradient of every parameter element is
taken by central finite differences in float64, and both are compared with
what `boltzattn grads` wrote (F32): per tensor, rel_l2 = |g_c - g_ref|_2 /
max(|g_ref|_2, 1e-8) and rel_max = max|g_c - g_ref| / (max|g_ref| + 1e-8).
Passes when the loss agrees to 1e-5 relative and every rel_l2 < 1e-4; a
tensor whose gradient is zero (|g_ref| and |g_c| both below 1e-7 of the
largest tensor gradient norm, e.g. J under `coupling`, where h = 0 makes every
marginal exactly 1/2) passes as "zero".

Exit status: 0 all match, 1 a mismatch (or bad input), 77 numpy missing.
"""
import json
import math
import struct
import sys

try:
    import numpy as np
except ImportError:  # pragma: no cover
    print("SKIP: numpy is not available for %s" % sys.executable)
    sys.exit(77)

LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4
ZERO_FRAC = 1e-7
LN_EPS = 1e-5

DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8",
          "F16": "<f2", "I16": "<i2", "I8": "i1", "U8": "u1"}


# ---------------------------------------------------------------- safetensors
def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("%s: too short for a safetensors file" % path)
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError("%s: header length %d past end of file" % (path, n))
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    data = blob[8 + n:]
    tensors = {}
    for name, info in header.items():
        dt = np.dtype(DTYPES[info["dtype"]])
        shape = tuple(info["shape"])
        a, b = info["data_offsets"]
        count = int(np.prod(shape)) if shape else 1
        if b - a != count * dt.itemsize or b > len(data):
            raise ValueError("%s: tensor %s has inconsistent offsets" % (path, name))
        tensors[name] = np.frombuffer(data, dtype=dt, count=count, offset=a).reshape(shape)
    return meta, tensors


# ---------------------------------------------------------------- the model
# Every parameter carries a leading "model" axis of length 1 or M: the finite
# differences evaluate M perturbed copies of the model in one vectorised pass.
# Activations have shape [M, B, T, C].

def linear(x, w, b):
    # x [Mx,B,T,in], w [Mw,out,in], b [Mb,out]  ->  [M,B,T,out], M = max(Mx, Mw, Mb)
    Mx, Bn, Tn, nin = x.shape
    if w.shape[0] == 1:                      # one GEMM over every row
        y = (x.reshape(-1, nin) @ w[0].T).reshape(Mx, Bn, Tn, -1)
    else:                                    # one GEMM per model copy
        y = np.matmul(x.reshape(Mx, Bn * Tn, nin), np.swapaxes(w, -1, -2))
        y = y.reshape(w.shape[0], Bn, Tn, -1)
    return y + b[:, None, None, :]


def layer_norm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    xh = (x - mu) / np.sqrt(var + LN_EPS)
    return xh * w[:, None, None, :] + b[:, None, None, :]


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x * x * x))))


_STATES = {}


def spin_states(n):
    """All 2^n configurations of n spins in {-1,+1}, shape [2^n, n]."""
    if n not in _STATES:
        idx = np.arange(2 ** n)[:, None]
        bits = (idx >> np.arange(n)[None, :]) & 1
        _STATES[n] = np.where(bits == 1, 1.0, -1.0)
    return _STATES[n]


def ising_weights(hrow, J, n):
    """w_j = P(s_j = +1) for j < n under P(s) ~ exp(sum_j h_j s_j + sum_{j<k} J_jk s_j s_k).

    hrow: [M,B,H,n] fields (or None for h = 0); J: [MJ,H,T,T] couplings
    (only the strict upper triangle of the leading n x n block is used).
    Plain enumeration of all 2^n states, log-sum-exp, float64.
    Returns [M',B',H,n] (broadcast of the inputs).
    """
    S = spin_states(n)                                   # [2^n, n]
    Jn = np.triu(J[..., :n, :n], k=1)                    # [MJ,H,n,n]
    pair = np.einsum("sj,mhjk,sk->mhs", S, Jn, S)        # [MJ,H,2^n]
    logit = pair[:, None]                                # [MJ,1,H,2^n]
    if hrow is not None:
        logit = logit + np.einsum("mbhj,sj->mbhs", hrow, S)
    mx = logit.max(axis=-1, keepdims=True)
    p = np.exp(logit - mx)
    p = p / p.sum(axis=-1, keepdims=True)                # P(s), each state
    up = (S > 0).astype(np.float64)                      # [2^n, n]
    return np.einsum("mbhs,sj->mbhj", p, up)             # P(s_j = +1)


def attention(x, P, pre, cfg):
    """x [M,B,T,C] (already LayerNormed) -> [M,B,T,C] after the output projection."""
    M, B, T, C = x.shape
    H = cfg["n_head"]
    d = C // H
    kind = cfg["attn"]
    qkv = linear(x, P[pre + "attn.qkv.weight"], P[pre + "attn.qkv.bias"])   # [M,B,T,3C]
    M = qkv.shape[0]                    # a perturbed qkv copy widens the model axis
    q = qkv[..., 0:C].reshape(M, B, T, H, d).transpose(0, 1, 3, 2, 4)      # [M,B,H,T,d]
    k = qkv[..., C:2 * C].reshape(M, B, T, H, d).transpose(0, 1, 3, 2, 4)
    v = qkv[..., 2 * C:3 * C].reshape(M, B, T, H, d).transpose(0, 1, 3, 2, 4)
    h = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(d)               # [M,B,H,T,T]
    causal = np.tril(np.ones((T, T), dtype=bool))                          # j <= i

    if kind == "softmax":
        hm = np.where(causal, h, -np.inf)
        hm = hm - hm.max(axis=-1, keepdims=True)
        w = np.exp(hm)
    elif kind == "sigmoid":
        with np.errstate(over="ignore"):
            w = 1.0 / (1.0 + np.exp(-2.0 * h))
        w = np.where(causal, w, 0.0)
    elif kind in ("boltzmann", "coupling"):
        J = P[pre + "attn.J"]                                              # [MJ,H,T,T]
        Mo = max(M, J.shape[0])
        w = np.zeros((Mo, B, H, T, T))
        for i in range(T):
            n = i + 1
            hrow = h[..., i, :n] if kind == "boltzmann" else None
            wi = ising_weights(hrow, J, n)
            w[:, :, :, i, :n] = wi
    else:
        raise ValueError("unknown attention variant %r" % kind)

    a = w / w.sum(axis=-1, keepdims=True)
    y = np.matmul(a, v)                                                     # [M,B,H,T,d]
    y = y.transpose(0, 1, 3, 2, 4).reshape(y.shape[0], B, T, C)
    return linear(y, P[pre + "attn.proj.weight"], P[pre + "attn.proj.bias"])


def stage_of(name, cfg):
    """Stage a parameter belongs to: 0 embeddings, 1+l block l, n_layer+1 the output."""
    if name in ("tok_emb", "pos_emb"):
        return 0
    if name.startswith("blocks."):
        return 1 + int(name.split(".")[1])
    return cfg["n_layer"] + 1


def run_stages(P, cfg, inputs, targets, start=0, x=None, keep=None):
    """Forward from stage `start` (x = that stage's input; ignored for stage 0).

    Returns the mean cross-entropy over positions with target != -1, one value
    per model copy. If `keep` is a list, each stage's input is appended to it.
    """
    Tb = inputs.shape[1]
    L = cfg["n_layer"]
    if start == 0:
        x = P["tok_emb"][:, inputs] + P["pos_emb"][:, None, :Tb, :]           # [M,B,T,C]
        start = 1
    for l in range(start - 1, L):
        if keep is not None:
            keep.append(x)
        pre = "blocks.%d." % l
        x = x + attention(layer_norm(x, P[pre + "ln1.weight"], P[pre + "ln1.bias"]), P, pre, cfg)
        if cfg["ffn"]:
            u = layer_norm(x, P[pre + "ln2.weight"], P[pre + "ln2.bias"])
            u = gelu_tanh(linear(u, P[pre + "ffn.fc.weight"], P[pre + "ffn.fc.bias"]))
            x = x + linear(u, P[pre + "ffn.proj.weight"], P[pre + "ffn.proj.bias"])
    if keep is not None:
        keep.append(x)
    bi, ti = np.nonzero(targets != -1)
    if len(bi) == 0:
        raise ValueError("batch has no targets")
    x = x[:, bi, ti, :][:, None]                                           # [M,1,N,C]
    x = layer_norm(x, P["ln_f.weight"], P["ln_f.bias"])[:, 0]              # [M,N,C]
    logits = np.matmul(x, np.swapaxes(P["head.weight"], -1, -2)) + P["head.bias"][:, None, :]
    if cfg["task"] == "brackets":
        cols = np.arange(logits.shape[-1])
        allowed = cols[None, :] < ti[:, None]                               # j < i only
        logits = np.where(allowed, logits, -np.inf)
    mx = logits.max(axis=-1, keepdims=True)
    lse = mx[..., 0] + np.log(np.exp(logits - mx).sum(axis=-1))
    tgt = targets[bi, ti]
    picked = logits[:, np.arange(len(bi)), tgt]
    return (lse - picked).mean(axis=-1)                                     # [M]


def forward_loss(P, cfg, inputs, targets):
    return run_stages(P, cfg, inputs, targets)


def expected_names(cfg):
    names = ["tok_emb", "pos_emb"]
    for l in range(cfg["n_layer"]):
        p = "blocks.%d." % l
        names += [p + "ln1.weight", p + "ln1.bias", p + "attn.qkv.weight", p + "attn.qkv.bias",
                  p + "attn.proj.weight", p + "attn.proj.bias"]
        if cfg["attn"] in ("boltzmann", "coupling"):
            names.append(p + "attn.J")
        if cfg["ffn"]:
            names += [p + "ln2.weight", p + "ln2.bias", p + "ffn.fc.weight", p + "ffn.fc.bias",
                      p + "ffn.proj.weight", p + "ffn.proj.bias"]
    names += ["ln_f.weight", "ln_f.bias", "head.weight", "head.bias"]
    return names


def fd_gradient(params, name, cfg, inputs, targets, step, chunk, cache, stencil):
    """Gradient of the loss w.r.t. params[name] by central finite differences.

    stencil 2: (f(+h) - f(-h)) / 2h.  stencil 4: the fourth-order
    (f(-2h) - 8 f(-h) + 8 f(+h) - f(+2h)) / 12h, returned together with the
    two-point value from the same evaluations (their difference estimates the
    two-point error). h = step * max(1, |x|), rounded so x +- h is exact.
    Returns (g, g2) with g2 None for stencil 2.
    """
    base = params[name]
    flat = base.reshape(-1)
    n = flat.size
    offs = np.array([-1.0, 1.0]) if stencil == 2 else np.array([-2.0, -1.0, 1.0, 2.0])
    S = len(offs)
    g = np.zeros(n)
    g2 = np.zeros(n)
    P = {k: v[None] for k, v in params.items()}
    st = stage_of(name, cfg)
    for s in range(0, n, chunk):
        idx = np.arange(s, min(n, s + chunk))
        K = len(idx)
        hstep = step * np.maximum(1.0, np.abs(flat[idx]))
        hstep = (flat[idx] + hstep) - flat[idx]
        stack = np.repeat(flat[None, :], S * K, axis=0)                     # [S*K, n]
        stack[np.arange(S * K), np.tile(idx, S)] += np.repeat(offs, K) * np.tile(hstep, S)
        P[name] = stack.reshape((S * K,) + base.shape)
        L = run_stages(P, cfg, inputs, targets, start=st, x=cache[st] if st else None)
        L = np.broadcast_to(L, (S * K,)).reshape(S, K)   # M = 1 if the tensor is unused
        if stencil == 2:
            g[idx] = (L[1] - L[0]) / (2.0 * hstep)
        else:
            g[idx] = (L[0] - 8.0 * L[1] + 8.0 * L[2] - L[3]) / (12.0 * hstep)
            g2[idx] = (L[2] - L[1]) / (2.0 * hstep)
    P[name] = base[None]
    return g.reshape(base.shape), (g2.reshape(base.shape) if stencil == 4 else None)


def main(argv):
    args = [a for a in argv[1:]]
    step, chunk, stencil = None, 256, 2
    pos = []
    i = 0
    while i < len(args):
        if args[i] == "--step":
            step = float(args[i + 1]); i += 2
        elif args[i] == "--stencil":
            stencil = int(args[i + 1]); i += 2
            if stencil not in (2, 4):
                print("--stencil must be 2 or 4", file=sys.stderr); return 1
        elif args[i] == "--chunk":
            chunk = int(args[i + 1]); i += 2
        elif args[i] in ("-h", "--help"):
            print(__doc__); return 0
        else:
            pos.append(args[i]); i += 1
    if len(pos) != 3:
        print("usage: crosscheck.py CKPT BATCH GRADS [--stencil 2|4] [--step H] [--chunk K]", file=sys.stderr)
        return 1
    ckpt_path, batch_path, grads_path = pos
    if step is None:
        # Two-point: measured on the test models, a step of 1e-6 leaves ~5e-5
        # relative rounding error on the smallest gradient tensors (J, |g| ~
        # 1e-5), 1e-3 leaves ~4e-4 truncation error; at 1e-4 the whole C-vs-ref
        # difference stayed below 6e-6 (the four-point stencil: below 1.5e-6).
        # Four-point: truncation is O(h^4), so a larger step is best.
        step = 1e-4 if stencil == 2 else 1e-3

    meta, ck = read_safetensors(ckpt_path)
    cfg = json.loads(meta["config"])
    _, batch = read_safetensors(batch_path)
    _, grads = read_safetensors(grads_path)
    inputs = np.asarray(batch["inputs"], dtype=np.int64)
    targets = np.asarray(batch["targets"], dtype=np.int64)

    names = expected_names(cfg)
    ok = True
    missing = [n for n in names if n not in ck]
    if missing:
        print("FAIL: checkpoint lacks %s" % ", ".join(missing)); return 1
    params = {n: np.array(ck[n], dtype=np.float64) for n in names}
    extra_ck = sorted(set(ck) - set(names))
    if extra_ck:
        print("note: checkpoint tensors not in the spec's list (ignored): %s" % ", ".join(extra_ck))

    # shape sanity against the config
    C, T, V, H = cfg["n_embd"], cfg["block_size"], cfg["vocab_size"], cfg["n_head"]
    out = cfg["out_size"]
    want = {"tok_emb": (V, C), "pos_emb": (T, C), "head.weight": (out, C), "head.bias": (out,)}
    for l in range(cfg["n_layer"]):
        want["blocks.%d.attn.qkv.weight" % l] = (3 * C, C)
        if cfg["attn"] in ("boltzmann", "coupling"):
            want["blocks.%d.attn.J" % l] = (H, T, T)
    for n, s in want.items():
        if params[n].shape != s:
            print("FAIL: %s has shape %s, expected %s" % (n, params[n].shape, s)); return 1
    if inputs.shape != targets.shape or inputs.shape[1] > T:
        print("FAIL: batch shapes %s / %s" % (inputs.shape, targets.shape)); return 1

    print("finite differences: %d-point central stencil, step %g * max(1, |x|)" % (stencil, step))
    print("config: task=%s attn=%s L=%d H=%d C=%d T=%d V=%d out=%d ffn=%s; batch %dx%d, %d targets"
          % (cfg["task"], cfg["attn"], cfg["n_layer"], H, C, T, V, out, cfg["ffn"],
             inputs.shape[0], inputs.shape[1], int((targets != -1).sum())))

    cache = [None]           # cache[s] = the unperturbed input of stage s (s >= 1)
    loss_ref = float(run_stages({k: v[None] for k, v in params.items()}, cfg, inputs, targets,
                                keep=cache)[0])
    loss_c = float(grads["loss"].reshape(-1)[0])
    lrel = abs(loss_c - loss_ref) / max(abs(loss_ref), 1e-12)
    lok = lrel < LOSS_RTOL
    ok &= lok
    print("loss: C %.8f  ref %.10f  rel err %.2e  %s" % (loss_c, loss_ref, lrel, "ok" if lok else "FAIL"))

    gmissing = [n for n in names if n not in grads]
    if gmissing:
        ok = False
        print("FAIL: gradient file lacks %s" % ", ".join(gmissing))
    gextra = sorted(set(grads) - set(names) - {"loss"})
    if gextra:
        print("note: gradient file has tensors not in the checkpoint list: %s" % ", ".join(gextra))

    refs = {}
    for n in names:
        if n not in grads:
            continue
        gc = np.asarray(grads[n], dtype=np.float64)
        if gc.shape != params[n].shape:
            ok = False
            print("%-28s FAIL: gradient shape %s, parameter shape %s" % (n, gc.shape, params[n].shape))
            continue
        refs[n] = (gc,) + fd_gradient(params, n, cfg, inputs, targets, step, chunk, cache, stencil)
    # A tensor whose exact gradient vanishes (e.g. by a symmetry) has no scale
    # of its own for a relative error: both sides are rounding noise. It passes
    # when both norms are below ZERO_FRAC of the largest tensor gradient norm.
    gscale = max([float(np.linalg.norm(r[1])) for r in refs.values()] + [0.0])
    zero_tol = ZERO_FRAC * gscale
    worst = 0.0
    print("%-28s %10s %10s %10s %10s %s" % ("tensor", "|g_ref|", "rel_l2", "rel_max", "fd_est", ""))
    for n, (gc, g4, g2) in refs.items():
        nref = float(np.linalg.norm(g4))
        rel = float(np.linalg.norm(gc - g4)) / max(nref, 1e-8)
        relmax = float(np.max(np.abs(gc - g4))) / (float(np.max(np.abs(g4))) + 1e-8)
        # |two-point - four-point| estimates the two-point error; the four-point
        # stencil's own error is far smaller
        fd_est = (float(np.linalg.norm(g2 - g4)) / max(nref, 1e-8)) if g2 is not None else None
        finite = bool(np.isfinite(rel)) and bool(np.all(np.isfinite(gc)))
        zero = finite and nref <= zero_tol and float(np.linalg.norm(gc)) <= zero_tol
        good = finite and (rel < GRAD_RTOL or zero)
        ok &= good
        if not zero:
            worst = max(worst, rel if np.isfinite(rel) else float("inf"))
        verdict = ("ok (zero: |g_c| %.1e)" % float(np.linalg.norm(gc))) if zero and rel >= GRAD_RTOL \
            else ("ok" if good else "FAIL")
        print("%-28s %10.3e %10.2e %10.2e %10s %s" % (n, nref, rel, relmax,
              "-" if fd_est is None else "%.1e" % fd_est, verdict))
    print("max rel_l2 %.2e over %d tensors; loss rel err %.2e" % (worst, len(names), lrel))
    print("VERDICT: %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (OSError, ValueError, KeyError) as e:
        print("FAIL: %s: %s" % (type(e).__name__, e))
        sys.exit(1)
