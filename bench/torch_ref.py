"""Exact Boltzmann attention written in PyTorch alone, the prototype the
benchmarks compare the library with (bench/python_op.py: the op;
bench/train_torch.py: a whole training step)."""
import itertools

import torch


_STATES = {}


def states(n, dtype):
    """(2^n, n) spin states, made once per n and dtype (a prototype would
    keep them too)."""
    key = (n, dtype)
    if key not in _STATES:
        _STATES[key] = torch.tensor(list(itertools.product([-1.0, 1.0], repeat=n)), dtype=dtype)
    return _STATES[key]


def _attention(q, k, v, J, marginals):
    """Boltzmann attention row by row: for query i the n = i + 1 keys split
    into halves A (n // 2 spins) and B, marginals(h, SA, SB, Jt, a) gives
    P(s_j = +1) of every key (B,H,n) from the fields h (B,H,n), the halves'
    spin states and the upper-triangular couplings; the weights are those
    marginals normalised."""
    Bsz, H, T, d = q.shape
    Jt = torch.triu(J, 1)
    outs = []
    for i in range(T):
        n = i + 1
        a = n // 2
        h = torch.einsum("bhd,bhjd->bhj", q[:, :, i], k[:, :, :n]) / d ** 0.5  # (B,H,n)
        w = marginals(h, states(a, q.dtype), states(n - a, q.dtype), Jt[:, :n, :n], a)
        att = w / w.sum(-1, keepdim=True)
        outs.append(torch.einsum("bhj,bhjd->bhd", att, v[:, :, :n]))
    return torch.stack(outs, 2)


def _pair_energy(S, Jb):
    """sum_{j<k} J_jk s_j s_k for every row of S: (H, 2^m) from S (2^m, m)
    and Jb (H, m, m) upper-triangular."""
    return torch.einsum("sj,hjk,sk->hs", S, Jb, S)


def _table_marginals(h, SA, SB, Jt, a):
    EA = h[..., :a] @ SA.T + _pair_energy(SA, Jt[:, :a, :a])
    EB = h[..., a:] @ SB.T + _pair_energy(SB, Jt[:, a:, a:])
    X = torch.einsum("sj,hjk,tk->hst", SA, Jt[:, :a, a:], SB)  # (H, 2^a, 2^b)
    L = EA[..., :, None] + EB[..., None, :] + X  # (B,H,2^a,2^b)
    P = torch.softmax(L.reshape(*L.shape[:2], -1), -1).reshape(L.shape)
    return torch.cat([P.sum(-1) @ (SA > 0).to(h.dtype), P.sum(-2) @ (SB > 0).to(h.dtype)], -1)


def torch_split_halves(q, k, v, J):
    """Exact Boltzmann attention in PyTorch alone: each query's 2^|A| x 2^|B|
    table of energies E_A + E_B + s_A' J_AB s_B, its softmax summed against
    the states (autograd gives the backward)."""
    return _attention(q, k, v, J, _table_marginals)


def _factorised_marginals(h, SA, SB, Jt, a):
    X = (_pair_energy(SA, Jt[:, :a, :a])[:, :, None] + _pair_energy(SB, Jt[:, a:, a:])[:, None]
         + torch.einsum("sj,hjk,tk->hst", SA, Jt[:, :a, a:], SB))  # (H, 2^a, 2^b)
    K = torch.exp(X - X.amax(dim=(1, 2), keepdim=True))
    uA, vB = h[..., :a] @ SA.T, h[..., a:] @ SB.T  # (B,H,2^a), (B,H,2^b)
    eu = torch.exp(uA - uA.amax(-1, keepdim=True))
    ev = torch.exp(vB - vB.amax(-1, keepdim=True))
    R = torch.einsum("bht,hst->bhs", ev, K)  # (B,H,2^a)
    L = torch.einsum("bhs,hst->bht", eu, K)  # (B,H,2^b)
    Z = (eu * R).sum(-1, keepdim=True)
    return torch.cat([(eu * R) @ (SA > 0).to(h.dtype), (ev * L) @ (SB > 0).to(h.dtype)], -1) / Z


def torch_factorised(q, k, v, J):
    """The library's own algorithm (spec section 4) in PyTorch: the coupling
    kernel K = exp(X) over (sA, sB) is shared by the whole batch, and every
    query's marginals come from two matrix products with it, R = ev K^T and
    L = eu K (autograd gives the backward). Shifts by maxima keep the float
    exponentials in range for moderate couplings; a prototype would stop
    there."""
    return _attention(q, k, v, J, _factorised_marginals)
