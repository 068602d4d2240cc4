"""Boltzmann attention for PyTorch: the library's attention op as a
torch.autograd.Function, a drop-in causal self-attention block, and the
command line's whole model, loadable from and savable to its checkpoints.

    import torch
    from boltzattn.torch import boltzmann_attention
    q, k, v = (torch.randn(2, 4, 16, 8, dtype=torch.float64, requires_grad=True)
               for _ in range(3))                               # [B, H, T, d]
    J = torch.zeros(4, 16, 16, dtype=torch.float64, requires_grad=True)  # [H, T, T]
    y = boltzmann_attention(q, k, v, J)                         # [B, H, T, d]
    y.square().sum().backward()                                 # q.grad ... J.grad

Everything runs in the C library on the CPU (OpenMP threads); tensors are
float32 or float64, all of one dtype. docs/python.md has the rules.
"""
import ctypes
import math
import warnings

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from . import _lib, _op

__all__ = ["boltzmann_attention", "attention", "rope", "BoltzmannSelfAttention", "Block",
           "BoltzattnModel", "release_memory"]


def rope(x, t0=0):
    """Rotary position embedding of x [..., T, d] (d even), as the library's
    models apply it to q and k (src/model/positions.c): channels (2i, 2i+1)
    at position t0 + t turned by (t0 + t) * 10000^(-2i/d). The angles'
    cosines and sines are formed in float64, then cast to x's dtype.
    Differentiable; returns a new tensor."""
    T, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError("rope turns pairs of channels: the last dimension d = %d must be even"
                         % d)
    i = torch.arange(d // 2, dtype=torch.float64)
    theta = torch.pow(torch.tensor(10000.0, dtype=torch.float64), -2.0 * i / d)
    ang = (t0 + torch.arange(T, dtype=torch.float64)).unsqueeze(1) * theta  # (T, d/2)
    c, s = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((c * x0 - s * x1, s * x0 + c * x1), dim=-1).flatten(-2)

_PTR = {torch.float32: ctypes.POINTER(ctypes.c_float),
        torch.float64: ctypes.POINTER(ctypes.c_double)}


def _ptr(t):
    return ctypes.cast(t.data_ptr(), _PTR[t.dtype]) if t is not None else None


def _check_tensor(name, t, dtype, shape=None):
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s must be a torch.Tensor, not %s" % (name, type(t).__name__))
    if t.device.type != "cpu":
        raise ValueError("%s is on %s: boltzattn runs on the CPU; move it with .cpu()"
                         % (name, t.device))
    if t.layout != torch.strided:
        raise ValueError("%s has layout %s; only dense (strided) tensors are taken"
                         % (name, t.layout))
    if t.dtype not in _PTR:
        raise TypeError("%s has dtype %s; boltzattn takes float32 or float64" % (name, t.dtype))
    if dtype is not None and t.dtype != dtype:
        raise TypeError("%s has dtype %s but q has %s: give every tensor one dtype"
                        % (name, t.dtype, dtype))
    if shape is not None and tuple(t.shape) != tuple(shape):
        raise ValueError("%s has shape %s; expected %s like q" % (name, list(t.shape), list(shape)))


def _check_finite(name, t, desc, what):
    """BoltzattnError (status 5, numeric) naming the first non-finite value
    of t that the op reads, as the library's own check words it: q, k, v,
    dout [B, H, T, d] by flat index and position, J by its indices (only
    the couplings the op reads: j < k within the band, or distances within
    the band)."""
    bad = ~torch.isfinite(t.detach())
    if name == "J":
        Hh = t.shape[0]
        reach = desc.band if desc.band > 0 else desc.T - 1
        if t.dim() == 2:
            bad[:, reach:] = False
        else:
            T = desc.T
            j = torch.arange(T).unsqueeze(1)
            k = torch.arange(T).unsqueeze(0)
            bad &= ((j < k) & (k - j <= reach)).expand(Hh, T, T)
    if not bool(bad.any()):
        return
    i = int(bad.reshape(-1).nonzero()[0])
    x = t.detach().reshape(-1)[i].item()
    if name == "J" and t.dim() == 2:
        D = t.shape[1]
        where = "J[%d][%d] (distance %d)" % (i // D, i % D, i % D + 1)
    elif name == "J":
        T = t.shape[1]
        where = "J[%d][%d][%d]" % (i // (T * T), i // T % T, i % T)
    else:
        H, T, d = t.shape[1:]
        where = "%s[%d] (b %d, h %d, t %d, c %d)" % (name, i, i // (d * T * H), i // (d * T) % H,
                                                     i // d % T, i % d)
    raise _lib.BoltzattnError(5, "%s: %s = %g is not finite" % (what, where, x))


class _AttentionFunction(torch.autograd.Function):
    """forward(q, k, v, J, desc) -> out through ba_attn_op_forward_*, the
    backward through ba_attn_op_backward_* of the same op context."""

    @staticmethod
    def forward(ctx, q, k, v, J, desc):
        f64 = q.dtype == torch.float64
        lease = _op.Lease(_op.desc_key(desc, f64))
        op = lease.op
        out = torch.empty_like(q)
        err = _lib.errbuf()
        fwd = _lib.lib.ba_attn_op_forward_f64 if f64 else _lib.lib.ba_attn_op_forward_f32
        _lib.check(fwd(op.p, ctypes.byref(desc), _ptr(q), _ptr(k), _ptr(v), _ptr(J), _ptr(out),
                       err), err, "boltzmann attention forward")
        stats = op.approx_stats()
        if stats["unconverged"]:
            warnings.warn("boltzattn: %d of %d attention rows did not converge (engine %s); "
                          "their weights are the last iterate and add no gradient"
                          % (stats["unconverged"], stats["queries"],
                             [k2 for k2, v2 in _lib.ENGINE.items() if v2 == desc.engine][0]),
                          RuntimeWarning, stacklevel=3)
        ctx.lease = lease
        ctx.save_for_backward(q, k, v, J)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout):
        q, k, v, J = ctx.saved_tensors
        dout = dout.contiguous()
        if dout.dtype != q.dtype:
            dout = dout.to(q.dtype)
        _check_finite("dout", dout, None, "boltzmann attention backward")
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        dJ = torch.empty_like(J) if J is not None and ctx.needs_input_grad[3] else None
        err = _lib.errbuf()
        bwd = (_lib.lib.ba_attn_op_backward_f64 if q.dtype == torch.float64
               else _lib.lib.ba_attn_op_backward_f32)
        _lib.check(bwd(ctx.lease.op.p, _ptr(q), _ptr(k), _ptr(v), _ptr(J), _ptr(dout), _ptr(dq),
                       _ptr(dk), _ptr(dv), _ptr(dJ), err), err, "boltzmann attention backward")
        return dq, dk, dv, dJ, None


def release_memory():
    """Frees the op contexts kept idle for the next call (the pool is
    bounded anyway: docs/python.md); returns how many were freed."""
    return _op.release_idle()


def attention(q, k, v, J=None, attn="boltzmann", causal=True, scale=None, engine="auto",
              band=None, field_bias=None, approx=None, window=None, alibi=False):
    """Causal attention of the library's variants over q, k, v [B, H, T, d]
    (the layout of torch.nn.functional.scaled_dot_product_attention),
    returning out [B, H, T, d] with gradients to q, k, v and J.

    attn: "boltzmann" (weights are the spin marginals of the Ising model
    with fields scale q_i.k_j and couplings J), "coupling" (J only),
    "softmax" or "sigmoid" (J must be None). J: [H, T, T]
    absolute couplings (J[h, j, k] couples keys j < k; the rest is not
    read and gets zero gradient) or [H, D] relative ones (J[h, dist - 1]).
    engine: auto (band when band is set, else the exact fast engine),
    reference, fast, band, or the approximate mf, tap, bp, hybrid (approx:
    a dict of damping, tol, max_iter; window: hybrid's exact window).
    band: couplings of range at most band (farther ones are 0). field_bias:
    None or "log-n". alibi: True adds ALiBi's distance bias -m_h (i - j) to
    head h's fields (m_h the geometric slopes of H heads), for every
    variant. Non-contiguous inputs are copied first.
    Errors: TypeError/ValueError naming the argument (device, dtype, shape,
    an unknown name, an integer out of C's range, a setting the call would
    not use: J or an engine for softmax/sigmoid, approx for an exact
    engine), BoltzattnError naming a non-finite q, k, v, J (or, in the
    backward, dout) value, or with the library's message (a T past the
    engine's limit, ...)."""
    _check_tensor("q", q, None)
    if q.dim() != 4:
        raise ValueError("q must be [B, H, T, d], not %s" % (list(q.shape),))
    _check_tensor("k", k, q.dtype, q.shape)
    _check_tensor("v", v, q.dtype, q.shape)
    B, H, T, d = q.shape
    if J is not None:
        _check_tensor("J", J, q.dtype)
    desc = _op.make_desc(B, H, T, d, None if J is None else tuple(J.shape), attn, causal, scale,
                         engine, band, field_bias, approx, window, alibi)
    for name, t in (("q", q), ("k", k), ("v", v), ("J", J)):
        if t is not None:
            _check_finite(name, t, desc, "boltzmann attention forward")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if J is not None:
        J = J.contiguous()
    return _AttentionFunction.apply(q, k, v, J, desc)


def boltzmann_attention(q, k, v, J, causal=True, scale=None, engine="auto", band=None,
                        field_bias=None, approx=None, window=None, alibi=False):
    """Boltzmann attention: attention(q, k, v, J, attn="boltzmann", ...)."""
    return attention(q, k, v, J, "boltzmann", causal, scale, engine, band, field_bias, approx,
                     window, alibi)


class BoltzmannSelfAttention(nn.Module):
    """Causal self-attention over x [B, T, C]: qkv projection, heads of
    width C / n_head, the library's attention, output projection. Its
    parameters are named as the checkpoint's blocks.{l}.attn.*: qkv.weight
    [3C, C], qkv.bias, proj.weight [C, C], proj.bias, and J [H, T, T]
    (absolute) or J_rel [H, D] (relative; D = band, else block_size - 1),
    for boltzmann and coupling attention. Initialised as the library does:
    weights N(0, 0.02) (proj N(0, 0.02 / sqrt(2 n_layer))), biases 0,
    couplings N(0, j_init_std) (0 by default) inside the band."""

    def __init__(self, n_embd, n_head, block_size, attn="boltzmann", couplings="absolute",
                 band=None, engine="auto", field_bias=None, j_init_std=0.0, n_layer=1,
                 approx=None, window=None, rope=False, alibi=False):
        super().__init__()
        if rope and alibi:
            raise ValueError("rope and alibi are two position encodings: choose one")
        if n_embd % n_head:
            raise ValueError("n_embd = %d is not a multiple of n_head = %d" % (n_embd, n_head))
        if rope and (n_embd // n_head) % 2:
            raise ValueError("rope needs an even head size, not %d" % (n_embd // n_head))
        self.rope, self.alibi = bool(rope), bool(alibi)
        _lib.enum_value(_lib.ATTN, "attn", attn)
        _lib.enum_value(_lib.COUPLINGS, "couplings", couplings)
        self.n_embd, self.n_head, self.block_size = n_embd, n_head, block_size
        self.attn, self.couplings, self.band = attn, couplings, band or None
        self.engine, self.field_bias = engine, field_bias
        self.approx, self.window = approx, window
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.ising = attn in ("boltzmann", "coupling")
        self.j_name = None
        if self.ising:
            if couplings == "relative":
                self.j_name = "J_rel"
                shape = (n_head, self.band or max(block_size - 1, 1))
            else:
                self.j_name = "J"
                shape = (n_head, block_size, block_size)
            self.register_parameter(self.j_name, nn.Parameter(torch.zeros(shape)))
        self.reset_parameters(j_init_std, n_layer)
        # fail now, not at the first forward, on settings the library refuses
        _op.make_desc(1, n_head, block_size, n_embd // n_head,
                      None if not self.ising else tuple(self.couplings_param().shape), attn,
                      True, None, engine, self.band, field_bias, approx, window, self.alibi)

    def couplings_param(self):
        return getattr(self, self.j_name) if self.j_name else None

    def reset_parameters(self, j_init_std=0.0, n_layer=1):
        with torch.no_grad():
            nn.init.normal_(self.qkv.weight, 0.0, 0.02)
            nn.init.zeros_(self.qkv.bias)
            nn.init.normal_(self.proj.weight, 0.0, 0.02 / math.sqrt(2.0 * n_layer))
            nn.init.zeros_(self.proj.bias)
            J = self.couplings_param()
            if J is not None:
                J.zero_()
                if j_init_std > 0:
                    J.normal_(0.0, j_init_std)
                    if self.couplings == "absolute":
                        T = self.block_size
                        reach = self.band or T - 1
                        j, k = torch.meshgrid(torch.arange(T), torch.arange(T), indexing="ij")
                        J.mul_(((k > j) & (k - j <= reach)).to(J.dtype))

    def forward(self, x):
        B, T, C = x.shape
        if T > self.block_size:
            raise ValueError("sequence length %d exceeds block_size %d" % (T, self.block_size))
        q, k, v = self.qkv(x).split(C, dim=2)
        H, d = self.n_head, C // self.n_head
        q, k, v = (t.view(B, T, H, d).transpose(1, 2) for t in (q, k, v))  # (B, H, T, d)
        if self.rope:
            q, k = rope(q), rope(k)
        J = self.couplings_param()
        band = self.band
        if J is not None:
            if self.couplings == "absolute" and T < self.block_size:
                J = J[:, :T, :T]
            if band:
                band = min(band, T - 1) or None
        y = attention(q, k, v, J, self.attn, True, None, self.engine, band, self.field_bias,
                      self.approx, self.window, self.alibi)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.proj(y)


class _FFN(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.proj(nn.functional.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    """One pre-LayerNorm transformer block as the library builds it: x +
    attn(ln1(x)), then x + ffn(ln2(x)) (GELU, tanh form) when ffn is on."""

    def __init__(self, n_embd, n_head, block_size, ffn=True, **attn_kw):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.attn = BoltzmannSelfAttention(n_embd, n_head, block_size, **attn_kw)
        if ffn:
            self.ln2 = nn.LayerNorm(n_embd, eps=1e-5)
            self.ffn = _FFN(n_embd)
        else:
            self.ln2 = self.ffn = None

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        if self.ffn is not None:
            x = x + self.ffn(self.ln2(x))
        return x


class BoltzattnModel(nn.Module):
    """The command line's model from its config (the checkpoint's "config"
    JSON as a dict): token (and position) embeddings, n_layer blocks, a
    final LayerNorm and the output head, with the checkpoint's tensor
    names, so load_state_dict takes a checkpoint's tensors as they are.
    forward(idx [B, T] int64, targets [B, T] or None; -1 is no target)
    returns (logits [B, T, out_size], mean cross-entropy or None). A
    pointer head's position i ranges over positions 0..i-1 (the others are
    -inf)."""

    def __init__(self, config, dtype=torch.float32):
        super().__init__()
        c = dict(config)
        self.config = c
        C, T, L = c["n_embd"], c["block_size"], c["n_layer"]
        self.pointer = c.get("head", "token") == "pointer"
        self.tok_emb = nn.Parameter(torch.zeros(c["vocab_size"], C))
        # pos_emb: true (learned, also when absent), false (none), "rope" or
        # "alibi"
        pos = c.get("pos_emb", True)
        if pos not in (True, False, "rope", "alibi"):
            raise ValueError("config pos_emb = %r: expected true, false, \"rope\" or \"alibi\""
                             % (pos,))
        if pos is True:
            self.pos_emb = nn.Parameter(torch.zeros(T, C))
        else:
            self.pos_emb = None
        # softmax and sigmoid attention solve no Ising model: no engine
        engine = c.get("engine", "auto") if c["attn"] in ("boltzmann", "coupling") else "auto"
        kw = dict(attn=c["attn"], couplings=c.get("couplings", "absolute"),
                  band=c.get("band", 0) or None, engine=engine,
                  field_bias=c.get("field_bias", "none"), n_layer=L,
                  j_init_std=c.get("j_init_std", 0.0), rope=pos == "rope",
                  alibi=pos == "alibi")
        # "band_precision": "float" (the C trainer's float band window
        # term, issue 42) is not read: the op runs the band engine in double,
        # which differs from float by its rounding alone (tests/test_band32.c)
        if _lib.engine_caps(engine) & _lib.CAP["approx"]:
            kw["approx"] = c.get("approx")
            kw["window"] = c.get("window")
        self.blocks = nn.ModuleList(Block(C, c["n_head"], T, c.get("ffn", True), **kw)
                                    for _ in range(L))
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        self.head = nn.Linear(C, c["out_size"])
        with torch.no_grad():
            nn.init.normal_(self.tok_emb, 0.0, 0.02)
            if self.pos_emb is not None:
                nn.init.normal_(self.pos_emb, 0.0, 0.02)
            nn.init.normal_(self.head.weight, 0.0, 0.02)
            nn.init.zeros_(self.head.bias)
            for b in self.blocks:
                if b.ffn is not None:
                    nn.init.normal_(b.ffn.fc.weight, 0.0, 0.02)
                    nn.init.zeros_(b.ffn.fc.bias)
                    nn.init.normal_(b.ffn.proj.weight, 0.0, 0.02 / math.sqrt(2.0 * L))
                    nn.init.zeros_(b.ffn.proj.bias)
        self.to(dtype)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        x = self.tok_emb[idx]
        if self.pos_emb is not None:
            x = x + self.pos_emb[:T]
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln_f(x))
        if self.pointer:
            O = logits.shape[-1]
            pos = torch.arange(T).unsqueeze(1)
            cols = torch.arange(O).unsqueeze(0)
            logits = logits.masked_fill(cols >= pos, float("-inf"))
        if targets is None:
            return logits, None
        keep = targets.reshape(-1) != -1
        if not bool(keep.any()):
            raise ValueError("targets has no position to score (all -1)")
        flat = logits.reshape(-1, logits.shape[-1])[keep]
        loss = nn.functional.cross_entropy(flat, targets.reshape(-1)[keep])
        return logits, loss
