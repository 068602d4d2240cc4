"""The library's whole training step against the same step in PyTorch, side
by side in one run (docs/performance.md, "Training steps: against
PyTorch").

Both train the model bench_train times: brackets-shaped batches (B
sequences of T tokens), 1 layer, 1 head, width C, pre-LayerNorm block with
FFN (4C, tanh GELU), pointer head over the earlier positions, cross-entropy,
gradient clipping at 1 and AdamW (lr 1e-3, betas 0.9/0.99, decay 0.1). The
PyTorch model's attention is exact Boltzmann attention by split halves
(bench/torch_ref.py, autograd for the backward): by default the library's
own algorithm (a kernel shared by the batch and matrix products, the
strongest prototype; --torch-attn table forms each query's whole 2^n
table instead); the library's step is ba_trainer_step with the
fast engine, timed by bench_train itself.

The contestants alternate round by round (bench_train for --c-steps steps,
then --torch-steps PyTorch steps), so a busy machine slows both alike, and
each reports the median of its rounds. Both use the same thread count
(--threads; OMP_NUM_THREADS for bench_train, torch.set_num_threads).

usage: python3 bench/train_torch.py --bench build/bench_train [--T 16,20]
       [--B 64] [--C 64] [--rounds 3] [--threads 2] [--csv PATH]
Exit status: 0 ok, 1 a contestant failed, 2 bad arguments.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from torch_ref import torch_factorised, torch_split_halves

ATTN = {"factorised": torch_factorised, "table": torch_split_halves}


class Model(torch.nn.Module):
    def __init__(self, V, T, C, attn):
        super().__init__()
        self.attn = attn
        self.wte = torch.nn.Embedding(V, C)
        self.wpe = torch.nn.Parameter(0.02 * torch.randn(T, C))
        self.ln1 = torch.nn.LayerNorm(C)
        self.qkv = torch.nn.Linear(C, 3 * C)
        self.J = torch.nn.Parameter(torch.zeros(1, T, T))
        self.proj = torch.nn.Linear(C, C)
        self.ln2 = torch.nn.LayerNorm(C)
        self.fc = torch.nn.Linear(C, 4 * C)
        self.fcp = torch.nn.Linear(4 * C, C)
        self.lnf = torch.nn.LayerNorm(C)
        self.head = torch.nn.Linear(C, T)

    def forward(self, x):
        Bn, T = x.shape
        h = self.wte(x) + self.wpe[:T]
        q, k, v = self.qkv(self.ln1(h)).chunk(3, -1)
        y = self.attn(q[:, None], k[:, None], v[:, None], self.J)[:, 0]
        h = h + self.proj(y)
        h = h + self.fcp(torch.nn.functional.gelu(self.fc(self.ln2(h)), approximate="tanh"))
        logits = self.head(self.lnf(h))
        # pointer head: position t points at an earlier position (position
        # 0, whose target is ignored, keeps one column so its row stays finite)
        t = torch.arange(T)
        return logits.masked_fill((t[None, :] >= t[:, None]) & (t[:, None] > 0), float("-inf"))


def torch_steps(attn, T, B, C, steps, state):
    """Median seconds of steps PyTorch training steps (state carries the
    model between rounds, so only the first round warms up)."""
    if state.get("T") != T:
        torch.manual_seed(T)
        m = Model(3, T, C, ATTN[attn])
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
        state.clear()
        state.update(T=T, m=m, opt=opt)
        one_step(state, T, B)  # warm-up
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        one_step(state, T, B)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def one_step(state, T, B):
    m, opt = state["m"], state["opt"]
    x = torch.randint(0, 3, (B, T))
    tgt = (torch.rand(B, T) * torch.arange(T)).long()  # some earlier position
    tgt[:, 0] = -100  # position 0 has nothing to point at
    logits = m(x)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, T), tgt.reshape(-1),
                                             ignore_index=-100)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
    opt.step()


def c_steps(bench, T, B, C, steps, threads):
    """bench_train's ms per step of (softmax, boltzmann) for steps timed steps."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "b.csv")
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        r = subprocess.run([bench, "--T", str(T), "--B", str(B), "--C", str(C), "--steps",
                            str(steps), "--csv", path], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode:
            sys.exit("train_torch: %s failed (%d): %s" % (bench, r.returncode, r.stderr.strip()))
        with open(path) as f:
            rows = {row["variant"]: float(row["ms_per_step"]) for row in csv.DictReader(f)}
    return rows["softmax"] / 1e3, rows["boltzmann"] / 1e3


def check_same():
    """The two PyTorch attentions compute the same thing (before timing)."""
    torch.manual_seed(1)
    q, k, v = (torch.randn(3, 2, 9, 4, dtype=torch.float64) for _ in range(3))
    J = 0.5 * torch.randn(2, 9, 9, dtype=torch.float64)
    diff = (torch_factorised(q, k, v, J) - torch_split_halves(q, k, v, J)).abs().max().item()
    if diff > 1e-10:
        sys.exit("train_torch: the two PyTorch attentions differ by %g" % diff)


def positive(s):
    v = int(s)
    if v < 1:
        raise argparse.ArgumentTypeError("must be at least 1, not %s" % s)
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", required=True, help="path of bench_train")
    ap.add_argument("--T", default="16,20", help="comma-separated block sizes, 2..22")
    ap.add_argument("--B", type=positive, default=64)
    ap.add_argument("--C", type=positive, default=64)
    ap.add_argument("--rounds", type=positive, default=3)
    ap.add_argument("--c-steps", type=positive, default=20, dest="c_steps")
    ap.add_argument("--torch-steps", type=positive, default=3, dest="torch_steps")
    ap.add_argument("--threads", type=positive, default=2)
    ap.add_argument("--torch-attn", choices=sorted(ATTN), default="factorised", dest="torch_attn",
                    help="the PyTorch attention: factorised (the library's algorithm: a shared "
                         "kernel and matrix products) or table (the whole 2^n table per query)")
    ap.add_argument("--csv", help="also write the results as CSV")
    a = ap.parse_args()
    try:
        Ts = [int(t) for t in a.T.split(",")]
    except ValueError:
        ap.error("--T takes comma-separated integers, not %r" % a.T)
    if any(not 2 <= t <= 22 for t in Ts):
        ap.error("--T values must lie in 2..22 (PyTorch's tables grow as 2^T)")
    if not os.access(a.bench, os.X_OK):
        ap.error("--bench %s is not an executable" % a.bench)
    torch.set_num_threads(a.threads)
    check_same()
    print("# train_torch: B = %d, C = %d, threads %d, PyTorch attention %s, torch %s, load %.2f "
          "at start" % (a.B, a.C, a.threads, a.torch_attn, torch.__version__,
                        os.getloadavg()[0]), flush=True)
    print("  T  C softmax ms  C boltzmann ms  PyTorch ms  PyTorch / C boltzmann", flush=True)
    out = []
    for T in Ts:
        cs, cb, tt, state = [], [], [], {}
        for _ in range(a.rounds):
            s, b = c_steps(a.bench, T, a.B, a.C, a.c_steps, a.threads)
            cs.append(s), cb.append(b)
            tt.append(torch_steps(a.torch_attn, T, a.B, a.C, a.torch_steps, state))
            # PyTorch's OpenMP threads spin a while after its last step; the
            # next bench_train must not start among them
            time.sleep(1.0)
        s, b, t = (statistics.median(x) for x in (cs, cb, tt))
        print("%3d %12.2f %15.2f %11.1f %22.1fx" % (T, 1e3 * s, 1e3 * b, 1e3 * t, t / b),
              flush=True)
        out.append((T, a.B, a.C, a.threads, 1e3 * s, 1e3 * b, 1e3 * t, t / b))
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["T", "B", "C", "threads", "c_softmax_ms", "c_boltzmann_ms", "torch_ms",
                        "speedup", "torch_attn"])
            out = [r + (a.torch_attn,) for r in out]
            w.writerows(out)


if __name__ == "__main__":
    main()
