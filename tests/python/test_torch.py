"""boltzattn.torch: the op's gradients (torch.autograd.gradcheck, every
engine), its values against a pure-PyTorch enumeration written here, the
command line's loss and gradients from a checkpoint it trained, the
checkpoint round trip, the input rules, and a nanoGPT-style model that
learns bracket matching. Run by tests/python.sh (CTest `python`), which
sets BOLTZATTN_LIBRARY, PYTHONPATH and BOLTZATTN_CLI."""
import itertools
import json
import os
import subprocess
import tempfile
import unittest

import numpy as np
import torch

import boltzattn
from boltzattn import BoltzattnError
from boltzattn.torch import (BoltzattnModel, BoltzmannSelfAttention, attention,
                             boltzmann_attention, rope)

CLI = os.environ.get("BOLTZATTN_CLI")
torch.manual_seed(0)


def rand(*shape, dtype=torch.float64, scale=1.0, grad=True):
    return (scale * torch.randn(*shape, dtype=dtype)).requires_grad_(grad)


def alibi_slopes(H):
    """ALiBi's slopes for H heads (a power of two: 2^(-8 (h+1) / H)),
    written here from the paper, independently of the library."""
    assert H & (H - 1) == 0
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], dtype=torch.float64)


def enumeration_attention(q, k, v, J, scale=None, alibi=False):
    """Boltzmann attention by summing every spin state of every query, in
    plain PyTorch (differentiable by autograd): for query i the keys
    0..i are spins with fields scale q_i.k_j (less m_h (i - j) with ALiBi)
    and couplings J_jk (j < k)."""
    B, H, T, d = q.shape
    m = alibi_slopes(H).to(q.dtype) if alibi else torch.zeros(H, dtype=q.dtype)
    scale = 1.0 / d ** 0.5 if scale is None else scale
    if J.dim() == 2:  # relative: J_jk = J[dist - 1]
        D = J.shape[1]
        Jf = torch.zeros(H, T, T, dtype=q.dtype)
        for j in range(T):
            for kk in range(j + 1, min(T, j + D + 1)):
                Jf[:, j, kk] = J[:, kk - j - 1]
        J = Jf
    Jt = torch.triu(J, 1)
    out = []
    for i in range(T):
        n = i + 1
        S = torch.tensor(list(itertools.product([-1.0, 1.0], repeat=n)), dtype=q.dtype)
        h = scale * torch.einsum("bhd,bhjd->bhj", q[:, :, i], k[:, :, :n])  # (B,H,n)
        h = h - m[None, :, None] * (i - torch.arange(n, dtype=q.dtype))[None, None, :]
        E = torch.einsum("bhj,sj->bhs", h, S) + torch.einsum("sj,hjk,sk->hs", S, Jt[:, :n, :n], S)
        p = torch.softmax(E, dim=-1)  # (B,H,2^n)
        w = torch.einsum("bhs,sj->bhj", p, (S > 0).to(q.dtype))
        a = w / w.sum(-1, keepdim=True)
        out.append(torch.einsum("bhj,bhjd->bhd", a, v[:, :, :n]))
    return torch.stack(out, dim=2)


class Gradcheck(unittest.TestCase):
    """torch.autograd.gradcheck in float64 for every engine, both kinds of
    couplings and several shapes; the approximate engines are iterated to
    1e-13 so that their fixed point is a smooth function to the step."""

    CASES = [
        ("reference", {}), ("fast", {}), ("auto", {}), ("band", {"band": 2}),
        ("auto", {"band": 1}), ("mf", {}), ("tap", {}), ("bp", {}),
        ("hybrid", {"window": 2}),
    ]

    def check(self, shape, relative, engine, kw, field_bias=None):
        B, H, T, d = shape
        q, k, v = rand(*shape, scale=0.7), rand(*shape, scale=0.7), rand(*shape)
        if relative:
            J = rand(H, kw.get("band", T - 1), scale=0.3)
        else:
            J = rand(H, T, T, scale=0.3)
        if engine in ("mf", "tap", "bp", "hybrid"):
            kw = dict(kw, approx={"tol": 1e-13, "max_iter": 5000})

        def f(q, k, v, J):
            return boltzmann_attention(q, k, v, J, engine=engine, field_bias=field_bias, **kw)

        self.assertTrue(torch.autograd.gradcheck(f, (q, k, v, J), eps=1e-6, atol=1e-6,
                                                 rtol=1e-4),
                        "%s %s relative=%s" % (engine, shape, relative))

    def test_every_engine(self):
        for (engine, kw), shape, relative in itertools.product(
                self.CASES, [(1, 1, 5, 3), (2, 2, 6, 4)], [False, True]):
            with self.subTest(engine=engine, shape=shape, relative=relative, **kw):
                self.check(shape, relative, engine, kw)

    def test_field_bias_and_other_variants(self):
        self.check((2, 1, 6, 3), False, "fast", {}, field_bias="log-n")
        for attn in ("softmax", "sigmoid", "coupling"):
            shape = (2, 2, 5, 3)
            q, k, v = rand(*shape), rand(*shape), rand(*shape)
            J = rand(2, 5, 5, scale=0.5) if attn == "coupling" else None
            args = (q, k, v) + ((J,) if J is not None else ())

            def f(*a, attn=attn):
                return attention(*a[:3], a[3] if len(a) > 3 else None, attn=attn)

            self.assertTrue(torch.autograd.gradcheck(f, args, eps=1e-6, atol=1e-6), attn)


class AgainstEnumeration(unittest.TestCase):
    def test_values_and_gradients(self):
        for relative, engine, kw in ((False, "reference", {}), (False, "fast", {}),
                                     (True, "fast", {}), (True, "band", {"band": 3})):
            shape = (2, 2, 7, 4)
            q, k, v = rand(*shape), rand(*shape), rand(*shape)
            J = rand(2, 3 if kw else 6, scale=0.5) if relative else rand(2, 7, 7, scale=0.5)
            got = boltzmann_attention(q, k, v, J, engine=engine, **kw)
            want = enumeration_attention(q, k, v, J)
            torch.testing.assert_close(got, want, rtol=1e-11, atol=1e-12)
            g = torch.randn_like(got)
            gq = torch.autograd.grad(got, (q, k, v, J), g)
            wq = torch.autograd.grad(want, (q, k, v, J), g)
            if not relative:  # the op's dJ is 0 off the upper triangle, by contract
                wq = wq[:3] + (torch.triu(wq[3], 1),)
            for a, b, name in zip(gq, wq, "qkvJ"):
                torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-11, msg=name)

    def test_float32_matches_float64(self):
        shape = (2, 2, 12, 8)
        q, k, v = rand(*shape), rand(*shape), rand(*shape)
        J = rand(2, 12, 12, scale=0.4)
        y64 = boltzmann_attention(q, k, v, J)
        y32 = boltzmann_attention(q.float(), k.float(), v.float(), J.float())
        self.assertEqual(y32.dtype, torch.float32)
        err = (y32.double() - y64).abs().max().item()
        self.assertLess(err, 1e-5)


class InputRules(unittest.TestCase):
    def setUp(self):
        self.q, self.k, self.v = rand(1, 2, 6, 4), rand(1, 2, 6, 4), rand(1, 2, 6, 4)
        self.J = rand(2, 6, 6, scale=0.3)

    def test_refusals_name_the_argument(self):
        q, k, v, J = self.q, self.k, self.v, self.J
        with self.assertRaisesRegex(ValueError, "q is on meta"):
            boltzmann_attention(q.to("meta"), k, v, J)
        with self.assertRaisesRegex(TypeError, "k has dtype torch.float32 but q"):
            boltzmann_attention(q, k.float(), v, J)
        with self.assertRaisesRegex(TypeError, "float16"):
            boltzmann_attention(q.half(), k.half(), v.half(), J.half())
        with self.assertRaisesRegex(ValueError, r"absolute couplings J must have shape"):
            boltzmann_attention(q, k, v, J[:, :5, :5])
        with self.assertRaisesRegex(ValueError, "causal only"):
            boltzmann_attention(q, k, v, J, causal=False)
        with self.assertRaisesRegex(ValueError, "engine 'exact'"):
            boltzmann_attention(q, k, v, J, engine="exact")
        long = rand(1, 1, 30, 2)
        with self.assertRaises(BoltzattnError) as cm:
            boltzmann_attention(long, long, long, rand(1, 30, 30))
        self.assertEqual(cm.exception.status, 6)
        self.assertIn("band", str(cm.exception))
        bad = q.detach().clone()
        bad[0, 1, 3, 2] = float("inf")
        with self.assertRaisesRegex(BoltzattnError, "not finite"):
            boltzmann_attention(bad, k, v, J)
        y = boltzmann_attention(q, k, v, J)
        g = torch.zeros_like(y)
        g[0, 0, 2, 1] = float("nan")
        with self.assertRaisesRegex(BoltzattnError, r"dout\[9\] \(b 0, h 0, t 2, c 1\)"):
            y.backward(g)

    def test_non_contiguous_inputs_are_taken(self):
        q, k, v, J = self.q, self.k, self.v, self.J
        qt = q.detach().transpose(1, 2).contiguous().transpose(1, 2)  # same values, strided
        self.assertFalse(qt.is_contiguous())
        torch.testing.assert_close(boltzmann_attention(qt, k, v, J),
                                   boltzmann_attention(q, k, v, J), rtol=0, atol=0)


def run_cli(*args):
    r = subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True)
    if r.returncode:
        raise AssertionError("boltzattn %s failed (%d): %s" % (" ".join(map(str, args)),
                                                             r.returncode, r.stderr))
    return r.stdout


def read_grads(path):
    tensors = {}
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        tensors[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype="<f4").reshape(
            info["shape"])
    return tensors


CORPUS = ("First Citizen: Before we proceed any further, hear me speak.\n"
          "All: Speak, speak. You are all resolved rather to die than to famish?\n") * 20


class Rope(unittest.TestCase):
    """boltzattn.torch.rope against complex multiplication in numpy, its
    relative-position property, its gradient (torch.autograd.gradcheck)
    and its refusal of an odd d. The C kernel is held to the same twin in
    tests/test_positions.c, and a --pos-emb rope checkpoint's loss and
    gradients to the C model's in AgainstCli."""

    def test_values(self):
        g = torch.Generator().manual_seed(5)
        x = torch.randn(2, 3, 11, 8, dtype=torch.float64, generator=g)
        y = rope(x, t0=4).numpy()
        z = x.numpy()[..., 0::2] + 1j * x.numpy()[..., 1::2]
        theta = 10000.0 ** (-2.0 * np.arange(4) / 8)
        z = z * np.exp(1j * np.outer(4 + np.arange(11), theta))
        self.assertLess(np.abs(y[..., 0::2] - z.real).max(), 1e-13)
        self.assertLess(np.abs(y[..., 1::2] - z.imag).max(), 1e-13)

    def test_relative(self):
        g = torch.Generator().manual_seed(6)
        q, k = torch.randn(2, 16, dtype=torch.float64, generator=g)
        dots = []
        for shift in (0, 7, 300):
            a = rope(q.expand(40, 16), t0=shift)[9]
            b = rope(k.expand(40, 16), t0=shift)[2]
            dots.append(float(a @ b))
        self.assertLess(max(dots) - min(dots), 1e-12)

    def test_gradient_and_refusal(self):
        x = torch.randn(1, 5, 6, dtype=torch.float64, requires_grad=True)
        self.assertTrue(torch.autograd.gradcheck(lambda t: rope(t, 2), (x,)))
        with self.assertRaisesRegex(ValueError, "must be even"):
            rope(torch.zeros(3, 5))


class Alibi(unittest.TestCase):
    """attention(..., alibi=True) against references written here: softmax
    and sigmoid with the distance bias added to the scores in plain
    PyTorch, boltzmann and coupling against the enumeration with biased
    fields; gradcheck through the op; the module's refusal of rope and
    alibi together."""

    def test_softmax_and_sigmoid(self):
        B, H, T, d = 2, 4, 9, 5
        q, k, v = rand(B, H, T, d), rand(B, H, T, d), rand(B, H, T, d)
        m = alibi_slopes(H)
        dist = torch.arange(T)[:, None] - torch.arange(T)[None, :]
        mask = dist < 0
        h = q @ k.transpose(-1, -2) / d ** 0.5 - m[None, :, None, None] * dist
        want = torch.softmax(h.masked_fill(mask, -torch.inf), -1) @ v
        got = attention(q, k, v, None, "softmax", alibi=True)
        self.assertLess((got - want).abs().max().item(), 1e-12)
        w = torch.sigmoid(2 * h).masked_fill(mask, 0)
        want = (w / w.sum(-1, keepdim=True)) @ v
        got = attention(q, k, v, None, "sigmoid", alibi=True)
        self.assertLess((got - want).abs().max().item(), 1e-12)
        plain = attention(q, k, v, None, "softmax")
        self.assertGreater((got - plain).abs().max().item(), 1e-3)  # not vacuous

    def test_boltzmann_and_coupling(self):
        B, H, T, d = 1, 2, 6, 3
        q, k, v = rand(B, H, T, d), rand(B, H, T, d), rand(B, H, T, d)
        J = rand(H, T, T, scale=0.5)
        want = enumeration_attention(q, k, v, J, alibi=True)
        for engine in ("reference", "fast", "band", "auto"):
            got = boltzmann_attention(q, k, v, J, engine=engine, alibi=True)
            self.assertLess((got - want).abs().max().item(), 1e-11, engine)
        zero = torch.zeros(B, H, T, d, dtype=torch.float64)
        want = enumeration_attention(zero, zero, v, J, alibi=True)
        got = attention(q, k, v, J, "coupling", alibi=True)
        self.assertLess((got - want).abs().max().item(), 1e-11)

    def test_gradcheck(self):
        B, H, T, d = 1, 2, 5, 3
        q, k, v = rand(B, H, T, d), rand(B, H, T, d), rand(B, H, T, d)
        Jr = rand(H, 2, scale=0.5)
        for attn, J in (("softmax", None), ("boltzmann", Jr), ("coupling", Jr)):
            f = (lambda a, b, c, j, at=attn: attention(a, b, c, j, at, band=2, alibi=True)) \
                if J is not None else (lambda a, b, c, j, at=attn: attention(a, b, c, None, at,
                                                                            alibi=True))
            self.assertTrue(torch.autograd.gradcheck(f, (q, k, v, J)), attn)

    def test_refusals(self):
        with self.assertRaisesRegex(ValueError, "choose one"):
            BoltzmannSelfAttention(8, 2, 6, rope=True, alibi=True)
        q = rand(1, 1, 3, 2)
        with self.assertRaisesRegex(TypeError, "alibi"):
            attention(q, q, q, None, "softmax", alibi="yes")


@unittest.skipIf(not CLI, "BOLTZATTN_CLI is not set (tests/python.sh sets it)")
class AgainstCli(unittest.TestCase):
    """A checkpoint trained by `boltzattn train`, loaded here, gives the
    loss and gradients `boltzattn grads` gives on the same batch."""

    CONFIGS = [
        ("brackets", ["--attn", "boltzmann", "--couplings", "relative", "--band", "3",
                      "--j-init-std", "0.5", "--layers", "2", "--heads", "2"]),
        ("brackets", ["--attn", "boltzmann", "--j-init-std", "0.5", "--no-ffn"]),
        ("charlm", ["--attn", "boltzmann", "--j-init-std", "0.5", "--field-bias", "log-n"]),
        ("charlm", ["--attn", "softmax", "--layers", "2", "--heads", "2"]),
        ("charlm", ["--attn", "boltzmann", "--couplings", "relative", "--band", "3",
                    "--j-init-std", "0.5", "--heads", "2", "--pos-emb", "rope"]),
        ("charlm", ["--attn", "sigmoid", "--pos-emb", "rope", "--heads", "2"]),
        ("charlm", ["--attn", "boltzmann", "--couplings", "relative", "--band", "3",
                    "--j-init-std", "0.5", "--heads", "2", "--pos-emb", "alibi"]),
        ("charlm", ["--attn", "softmax", "--pos-emb", "alibi", "--heads", "4"]),
        ("brackets", ["--attn", "coupling", "--j-init-std", "0.5", "--pos-emb", "alibi"]),
        # T = 8 holds two recall pairs and their two queries
        ("recall", ["--attn", "boltzmann", "--pairs", "2", "--recall-vocab", "8",
                    "--j-init-std", "0.5", "--layers", "2", "--heads", "2"]),
    ]

    def test_loss_and_gradients(self):
        with tempfile.TemporaryDirectory() as d:
            corpus = os.path.join(d, "corpus.txt")
            with open(corpus, "w") as f:
                f.write(CORPUS)
            for i, (task, extra) in enumerate(self.CONFIGS):
                with self.subTest(task=task, extra=extra):
                    run = os.path.join(d, "run%d" % i)
                    data = ["--data", corpus] if task == "charlm" else []
                    run_cli("train", "--task", task, "--steps", 20, "--lr", 0.02, "--embd", 16,
                            "--T", 8, "--batch", 8, "--threads", 1, "--quiet", *data, *extra,
                            "--out", run)
                    ckpt = os.path.join(run, "model.safetensors")
                    batch = os.path.join(d, "batch%d.safetensors" % i)
                    grads = os.path.join(d, "grads%d.safetensors" % i)
                    run_cli("batch", "--ckpt", ckpt, *data, "--size", 4, "--seed", 3,
                            "--out", batch)
                    run_cli("grads", "--ckpt", ckpt, "--batch", batch, "--threads", 1,
                            "--out", grads)
                    self.compare(ckpt, batch, grads, d)

    def compare(self, ckpt, batch, grads, d):
        model = boltzattn.load_checkpoint(ckpt)
        b = read_grads(batch)
        idx = torch.from_numpy(b["inputs"].view("<i4").astype(np.int64))
        tgt = torch.from_numpy(b["targets"].view("<i4").astype(np.int64))
        _, loss = model(idx, tgt)
        loss.backward()
        g = read_grads(grads)
        want = float(g["loss"][0])
        self.assertAlmostEqual(loss.item(), want, delta=2e-6 * max(1.0, abs(want)))
        for name, p in model.named_parameters():
            ref = torch.from_numpy(g[name].copy())
            rel = (p.grad - ref).norm() / max(ref.norm().item(), 1e-8)
            self.assertLess(rel.item(), 1e-3, name)
        # the same model written back by save_checkpoint is read by the CLI
        # and gives the same loss
        again = os.path.join(d, "again.safetensors")
        boltzattn.save_checkpoint(model, again)
        g2 = os.path.join(d, "again-grads.safetensors")
        run_cli("grads", "--ckpt", again, "--batch", batch, "--threads", 1, "--out", g2)
        self.assertEqual(float(read_grads(g2)["loss"][0]), want)
        # never over something that is not a regular file
        for target in (d, "/dev/null"):
            with self.assertRaisesRegex(BoltzattnError, "not a regular file"):
                boltzattn.save_checkpoint(model, target)


@unittest.skipIf(not CLI, "BOLTZATTN_CLI is not set (tests/python.sh sets it)")
class SampledCheckpoint(unittest.TestCase):
    def test_loading_says_it_is_exact(self):
        with tempfile.TemporaryDirectory() as d:
            run_cli("train", "--task", "brackets", "--attn", "boltzmann", "--T", 6, "--embd", 8,
                    "--steps", 2, "--batch", 4, "--sampler", "gibbs", "--shots", 16,
                    "--threads", 1, "--quiet", "--out", os.path.join(d, "r"))
            with self.assertWarnsRegex(RuntimeWarning, "sampled attention \\(gibbs\\)"):
                m = boltzattn.load_checkpoint(os.path.join(d, "r", "model.safetensors"))
            self.assertEqual(m.config["sampler"]["kind"], "gibbs")


def bracket_batch(rng, B, T):
    """Balanced bracket strings of length T over one kind: tokens 0 '(' and
    1 ')', and at each ')' the position of its '(' (pointer targets; -1
    elsewhere), written here independently of the library's generator."""
    idx = np.zeros((B, T), dtype=np.int64)
    tgt = -np.ones((B, T), dtype=np.int64)
    for b in range(B):
        stack, opens_left = [], T // 2
        for t in range(T):
            can_open = opens_left > 0
            can_close = len(stack) > 0
            if can_open and (not can_close or rng.random() < 0.5):
                idx[b, t] = 0
                stack.append(t)
                opens_left -= 1
            else:
                idx[b, t] = 1
                tgt[b, t] = stack.pop()
    return torch.from_numpy(idx), torch.from_numpy(tgt)


class TinyGPT(torch.nn.Module):
    """A nanoGPT-style model written here, as a user would, around
    BoltzmannSelfAttention: embeddings, pre-LayerNorm blocks with an MLP,
    and a pointer head (position i scores positions 0..i-1)."""

    def __init__(self, T, C=32, H=2, L=1):
        super().__init__()
        nn = torch.nn
        self.tok = nn.Embedding(2, C)
        self.pos = nn.Parameter(0.02 * torch.randn(T, C))
        self.blocks = nn.ModuleList(nn.ModuleDict(dict(
            ln1=nn.LayerNorm(C), ln2=nn.LayerNorm(C),
            attn=BoltzmannSelfAttention(C, H, T, couplings="relative", band=4),
            mlp=nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))))
            for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.head = nn.Linear(C, T)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.tok(idx) + self.pos[:T]
        for b in self.blocks:
            x = x + b["attn"](b["ln1"](x))
            x = x + b["mlp"](b["ln2"](x))
        logits = self.head(self.ln_f(x))
        mask = torch.arange(T)[None, :] >= torch.arange(T)[:, None]  # column >= row
        logits = logits.masked_fill(mask, float("-inf"))
        keep = targets.reshape(-1) != -1
        return torch.nn.functional.cross_entropy(logits.reshape(-1, T)[keep],
                                                 targets.reshape(-1)[keep])


class NanoGPTBrackets(unittest.TestCase):
    def test_loss_falls(self):
        torch.manual_seed(1)
        rng = np.random.default_rng(1)
        T = 10
        model = TinyGPT(T)
        names = [n for n, _ in model.named_parameters()]
        self.assertIn("blocks.0.attn.J_rel", names)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        losses = []
        for step in range(150):
            idx, tgt = bracket_batch(rng, 32, T)
            loss = model(idx, tgt)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        first, last = np.mean(losses[:10]), np.mean(losses[-10:])
        self.assertLess(last, 0.6 * first, "loss %.3f -> %.3f" % (first, last))
        # the couplings learned something (they start at 0)
        self.assertGreater(model.blocks[0]["attn"].J_rel.abs().max().item(), 1e-3)


class SelfAttentionModule(unittest.TestCase):
    def test_state_dict_and_init(self):
        m = BoltzmannSelfAttention(16, 2, 8, couplings="absolute", band=3, j_init_std=0.5)
        sd = m.state_dict()
        self.assertEqual(sorted(sd), ["J", "proj.bias", "proj.weight", "qkv.bias", "qkv.weight"])
        J = sd["J"]
        j, k = torch.meshgrid(torch.arange(8), torch.arange(8), indexing="ij")
        self.assertTrue(bool((J[:, (k <= j) | (k - j > 3)] == 0).all()))
        self.assertGreater(J[:, (k > j) & (k - j <= 3)].std().item(), 0.2)
        y = m(torch.randn(3, 5, 16))  # shorter than block_size
        self.assertEqual(tuple(y.shape), (3, 5, 16))
        r = BoltzmannSelfAttention(16, 2, 8, couplings="relative")
        self.assertEqual(tuple(r.state_dict()["J_rel"].shape), (2, 7))


if __name__ == "__main__":
    unittest.main()
