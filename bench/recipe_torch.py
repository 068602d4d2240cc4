"""The nanoGPT Shakespeare-char CPU recipe's training step: boltzattn's
`train` against the same step in PyTorch eager, side by side in one run
(docs/performance.md, "The recipe step against PyTorch", issue 42).

The shapes are the recipe's: softmax attention, T = 64, 4 layers, 4 heads,
C = 128, batch 12, vocabulary 65 (Tiny Shakespeare's characters), pre-LN
blocks with a 4C tanh-GELU FFN, biases, learned positions, no dropout,
AdamW (lr 1e-3, betas 0.9/0.99, decay 0.1) with gradient clipping at 1.
boltzattn trains on the corpus (its own batch sampling included in its
time, saves off); PyTorch on random token batches of the same shape (the
data costs it nothing).

The contestants alternate round by round (boltzattn for --steps steps,
then PyTorch for --steps steps), so a busy machine slows both alike;
each reports the median of its rounds' ms per step. Both run on
--threads threads.

usage: python3 bench/recipe_torch.py --bin build/boltzattn --data FILE
       [--steps 40] [--rounds 3] [--threads 1] [--csv PATH]
Exit status: 0 ok, 1 a contestant failed, 2 bad arguments.
"""
import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

T, L, H, C, B, V = 64, 4, 4, 128, 12, 65


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(C)
        self.qkv = torch.nn.Linear(C, 3 * C)
        self.proj = torch.nn.Linear(C, C)
        self.ln2 = torch.nn.LayerNorm(C)
        self.fc = torch.nn.Linear(C, 4 * C)
        self.fcp = torch.nn.Linear(4 * C, C)
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (z.view(b, t, H, C // H).transpose(1, 2) for z in (q, k, v))
        s = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        a = torch.softmax(s.masked_fill(~self.mask[:t, :t], float("-inf")), dim=-1)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, t, C))
        f = torch.nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh")
        return x + self.fcp(f)


class Recipe(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = torch.nn.Embedding(V, C)
        self.pos = torch.nn.Embedding(T, C)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(L))
        self.lnf = torch.nn.LayerNorm(C)
        self.head = torch.nn.Linear(C, V)

    def forward(self, idx, tgt):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.lnf(x))
        return torch.nn.functional.cross_entropy(logits.view(-1, V), tgt.view(-1))


def torch_round(model, opt, steps, gen):
    idx = torch.randint(0, V, (steps, B, T), generator=gen)
    tgt = torch.randint(0, V, (steps, B, T), generator=gen)
    t0 = time.perf_counter()
    for s in range(steps):
        loss = model(idx[s], tgt[s])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return (time.perf_counter() - t0) / steps * 1e3


def c_round(args, steps, work):
    out = os.path.join(work, "run")
    cmd = [args.bin, "train", "--task", "charlm", "--data", args.data, "--attn", "softmax",
           "--T", str(T), "--layers", str(L), "--heads", str(H), "--embd", str(C),
           "--batch", str(B), "--steps", str(steps), "--lr", "1e-3", "--eval-every", "0",
           "--eval-items", "12", "--save-every", "0", "--threads", str(args.threads),
           "--quiet", "--force", "--out", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("boltzattn train failed: " + r.stderr.strip()[-400:])
    with open(os.path.join(out, "metrics.jsonl")) as f:
        final = [json.loads(line) for line in f if '"event":"final"' in line][-1]
    return 1e3 / final["steps_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="path of the boltzattn tool")
    ap.add_argument("--data", required=True, help="the Tiny Shakespeare text")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--csv", help="also write the results as CSV")
    args = ap.parse_args()
    if args.steps < 2 or args.rounds < 1 or args.threads < 1:
        ap.error("--steps >= 2, --rounds >= 1, --threads >= 1")
    if not os.path.isfile(args.data):
        ap.error("--data %s is not a file" % args.data)
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    model = Recipe()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    gen = torch.Generator().manual_seed(2)
    torch_round(model, opt, 5, gen)  # warm-up: allocations, first-call costs
    cs, ts = [], []
    with tempfile.TemporaryDirectory() as work:
        try:
            for _ in range(args.rounds):
                cs.append(c_round(args, args.steps, work))
                ts.append(torch_round(model, opt, args.steps, gen))
        except RuntimeError as e:
            print(e, file=sys.stderr)
            return 1
    c, t = statistics.median(cs), statistics.median(ts)
    params = sum(p.numel() for p in model.parameters())
    print("recipe step (T %d, %d layers, %d heads, C %d, batch %d, %d parameters), %d thread(s), "
          "median of %d rounds of %d steps" % (T, L, H, C, B, params, args.threads, args.rounds,
                                              args.steps))
    print("  boltzattn %.1f ms/step   PyTorch %s eager %.1f ms/step   PyTorch / boltzattn %.2fx"
          % (c, torch.__version__, t, t / c))
    print("  rounds: boltzattn %s   PyTorch %s" % (" ".join("%.1f" % x for x in cs),
                                                 " ".join("%.1f" % x for x in ts)))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["threads", "boltzattn_ms", "torch_ms", "ratio"])
            w.writerow([args.threads, "%.3f" % c, "%.3f" % t, "%.4f" % (t / c)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
