"""Side-by-side timings of the Python binding (docs/performance.md,
"Python"):

1. overhead: boltzattn.torch.boltzmann_attention (autograd, forward then
   backward) against the same C op called directly through ctypes on
   preallocated buffers, at T = 16, B = 64, H = 4, d = 16 (float32);
2. against PyTorch: the op against a PyTorch-only implementation of the
   same exact computation (each query's spins split into two halves whose
   2^(n/2) states are enumerated, the joint table formed as a broadcast
   sum, gradients by autograd) at T = 12, 16 (B = 64) and 20 (B = 16),
   forward + backward, H = 4, d = 16, float32.

Each pair of contestants runs alternately, rep after rep, in one process,
and the medians are compared, so a busy machine slows both alike. One
thread each (OMP_NUM_THREADS=1, torch.set_num_threads(1)) unless
OMP_NUM_THREADS is set. Output: one CSV line per comparison on stdout.

usage: BOLTZATTN_LIBRARY=build/libboltzattn.so PYTHONPATH=python \\
       python3 bench/python_op.py [--reps N] [--B-torch B] [--B-torch-20 B]
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from boltzattn import _lib, _op  # noqa: E402
from boltzattn.torch import boltzmann_attention  # noqa: E402
from torch_ref import torch_split_halves  # noqa: E402


def c_op_step(desc, bufs):
    """Forward and backward of the C op on preallocated float32 buffers."""
    q, k, v, J, out, dout, dq, dk, dv, dJ = (ctypes.cast(t.data_ptr(), ctypes.POINTER(ctypes.c_float))
                                             for t in bufs)
    op = bufs.op
    err = _lib.errbuf()
    _lib.check(_lib.lib.ba_attn_op_forward_f32(op.p, ctypes.byref(desc), q, k, v, J, out, err),
               err, "forward")
    _lib.check(_lib.lib.ba_attn_op_backward_f32(op.p, q, k, v, J, dout, dq, dk, dv, dJ, err),
               err, "backward")


class Bufs(list):
    pass


def timed(fn, reps, *contestants):
    """Median seconds of each contestant, run alternately rep by rep."""
    times = [[] for _ in contestants]
    for c in contestants:
        fn(c)  # warm up
    for _ in range(reps):
        for j, c in enumerate(contestants):
            t0 = time.perf_counter()
            fn(c)
            times[j].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def overhead(reps):
    B, H, T, d = 64, 4, 16, 16
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, T, d) for _ in range(3))
    J = 0.1 * torch.randn(H, T, T)
    desc = _op.make_desc(B, H, T, d, (H, T, T))
    bufs = Bufs([q, k, v, J, torch.empty_like(q), torch.randn_like(q), torch.empty_like(q),
                 torch.empty_like(q), torch.empty_like(q), torch.empty_like(J)])
    bufs.op = _op.OpContext()
    dout = bufs[5]
    qg, kg, vg, Jg = (t.clone().requires_grad_() for t in (q, k, v, J))

    def run(which):
        if which == "c":
            c_op_step(desc, bufs)
        else:
            y = boltzmann_attention(qg, kg, vg, Jg)
            y.backward(dout)
            for t in (qg, kg, vg, Jg):
                t.grad = None

    tc, tp = timed(run, reps, "c", "py")
    print("overhead,T=%d,B=%d,H=%d,d=%d,c_op_ms=%.3f,python_op_ms=%.3f,overhead=%.1f%%"
          % (T, B, H, d, 1e3 * tc, 1e3 * tp, 100 * (tp / tc - 1)), flush=True)


def against_torch(reps, Bt, Bt20):
    H, d = 4, 16
    for T in (12, 16, 20):
        Bn = Bt20 if T == 20 else Bt
        torch.manual_seed(T)
        q, k, v = (torch.randn(Bn, H, T, d, requires_grad=True) for _ in range(3))
        J = (0.1 * torch.randn(H, T, T)).requires_grad_()
        g = torch.randn(Bn, H, T, d)
        # the two compute the same thing: check before timing
        y1 = boltzmann_attention(q, k, v, J)
        y2 = torch_split_halves(q, k, v, J)
        diff = (y1 - y2).abs().max().item()
        if diff > 1e-4:
            sys.exit("bench: the op and the PyTorch reference differ by %g at T = %d" % (diff, T))

        def run(which):
            f = boltzmann_attention if which == "op" else torch_split_halves
            y = f(q, k, v, J)
            y.backward(g)
            for t in (q, k, v, J):
                t.grad = None

        r = max(2, reps // (4 if T == 20 else 1))
        top, tt = timed(run, r, "op", "torch")
        print("vs_torch,T=%d,B=%d,H=%d,d=%d,op_ms=%.2f,torch_ms=%.2f,speedup=%.1fx,max_diff=%.1e"
              % (T, Bn, H, d, 1e3 * top, 1e3 * tt, tt / top, diff), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--B-torch", type=int, default=64, dest="bt",
                    help="batch of the comparison with PyTorch at T = 12 and 16")
    ap.add_argument("--B-torch-20", type=int, default=16, dest="bt20",
                    help="its batch at T = 20, where PyTorch's table is B x H x 2^20 floats "
                         "per query and autograd keeps every query's")
    a = ap.parse_args()
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    print("# threads %s, torch %s, load %.2f" % (os.environ["OMP_NUM_THREADS"], torch.__version__,
                                                 os.getloadavg()[0]), flush=True)
    overhead(a.reps)
    against_torch(a.reps, a.bt, a.bt20)


if __name__ == "__main__":
    main()
