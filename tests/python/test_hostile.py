"""Hostile inputs to the Python package (issue 41): the checkpoint writer
against planted links, directories, devices and unwritable directories;
integers that would wrap on their way into C; the op's memory across
calls of changing shapes; settings the call would not use; non-finite
tensors. Run by tests/python.sh (CTest `python`), which sets
BOLTZATTN_LIBRARY, PYTHONPATH and BOLTZATTN_CLI."""
import ctypes
import os
import stat
import subprocess
import tempfile
import unittest

import numpy as np
import torch

import boltzattn
from boltzattn import BoltzattnError, _lib, _op
from boltzattn.torch import BoltzmannSelfAttention, attention, boltzmann_attention, release_memory

CLI = os.environ.get("BOLTZATTN_CLI")
torch.manual_seed(0)


def rand(*shape, dtype=torch.float64, scale=1.0):
    return scale * torch.randn(*shape, dtype=dtype)


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def tree(d):
    """Every file under d with its kind, link target and contents."""
    out = {}
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            p = os.path.join(root, n)
            if os.path.islink(p):
                out[p] = ("link", os.readlink(p))
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    out[p] = ("file", f.read())
            else:
                out[p] = ("other", None)
    return out


@unittest.skipIf(not CLI, "BOLTZATTN_CLI is not set (tests/python.sh sets it)")
class SaveCheckpoint(unittest.TestCase):
    """H2: one writer, the library's; nothing but the target is touched."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        run = os.path.join(cls.dir.name, "run")
        r = subprocess.run([CLI, "train", "--task", "brackets", "--attn", "boltzmann", "--T", "6",
                            "--embd", "8", "--steps", "2", "--batch", "4", "--threads", "1",
                            "--quiet", "--out", run], capture_output=True, text=True)
        if r.returncode:
            raise AssertionError("boltzattn train failed: %s" % r.stderr)
        cls.ckpt = os.path.join(run, "model.safetensors")
        cls.model = boltzattn.load_checkpoint(cls.ckpt)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.victim = os.path.join(self.d, "victim")
        with open(self.victim, "wb") as f:
            f.write(b"precious")

    def tearDown(self):
        for root, dirs, _ in os.walk(self.d):
            for n in dirs:
                os.chmod(os.path.join(root, n), 0o700)
        self.tmp.cleanup()

    def assert_reads_back(self, path):
        config, tensors = boltzattn.read_checkpoint(path)
        self.assertEqual(config["task"], self.model.config["task"])
        for name, t in self.model.state_dict().items():
            np.testing.assert_array_equal(tensors[name], t.numpy(), err_msg=name)

    def test_round_trip_and_step(self):
        target = os.path.join(self.d, "m.safetensors")
        boltzattn.save_checkpoint(self.model, target, step=np.int64(7))
        self.assert_reads_back(target)
        self.assertEqual(boltzattn._read_header(target)["__metadata__"]["step"], "7")
        self.assertEqual(sorted(os.listdir(self.d)), ["m.safetensors", "victim"])

    def test_links_planted_at_temporary_names(self):
        target = os.path.join(self.d, "m.safetensors")
        # the old writer's temporary name (PATH.<pid>.tmp, also the
        # library's), a link to a file and a dangling one
        for dest in (self.victim, os.path.join(self.d, "created-through-link")):
            with self.subTest(dest=dest):
                tmp = "%s.%d.tmp" % (target, os.getpid())
                os.symlink(dest, tmp)
                before = tree(self.d)
                with self.assertRaisesRegex(BoltzattnError, "cannot create"):
                    boltzattn.save_checkpoint(self.model, target)
                self.assertEqual(tree(self.d), before)  # nothing written, nothing created
                os.unlink(tmp)
        with open(self.victim, "rb") as f:
            self.assertEqual(f.read(), b"precious")

    def test_symlinked_target_is_replaced_not_followed(self):
        # the library's rule (ba_write_file): the link itself is replaced
        # by the new file; the file it pointed to is left alone
        link = os.path.join(self.d, "link.safetensors")
        os.symlink(self.victim, link)
        boltzattn.save_checkpoint(self.model, link)
        self.assertFalse(os.path.islink(link))
        self.assert_reads_back(link)
        with open(self.victim, "rb") as f:
            self.assertEqual(f.read(), b"precious")
        dangling = os.path.join(self.d, "dangling.safetensors")
        os.symlink(os.path.join(self.d, "nowhere"), dangling)
        boltzattn.save_checkpoint(self.model, dangling)
        self.assertFalse(os.path.islink(dangling))
        self.assertFalse(os.path.lexists(os.path.join(self.d, "nowhere")))

    def test_targets_that_are_not_regular_files(self):
        sub = os.path.join(self.d, "sub")
        os.mkdir(sub)
        with open(os.path.join(sub, "keep"), "wb") as f:
            f.write(b"x")
        link_to_dir = os.path.join(self.d, "dirlink")
        os.symlink(sub, link_to_dir)
        for target in (sub, link_to_dir, "/dev/null"):
            with self.subTest(target=target):
                before = tree(self.d)
                with self.assertRaisesRegex(BoltzattnError, "not a regular file"):
                    boltzattn.save_checkpoint(self.model, target)
                self.assertEqual(tree(self.d), before)
        self.assertTrue(stat.S_ISCHR(os.stat("/dev/null").st_mode))

    def test_over_the_input_checkpoint(self):
        copy = os.path.join(self.d, "in.safetensors")
        with open(self.ckpt, "rb") as f, open(copy, "wb") as g:
            g.write(f.read())
        m = boltzattn.load_checkpoint(copy)
        boltzattn.save_checkpoint(m, copy)
        self.assert_reads_back(copy)

    def test_read_only_directory(self):
        ro = os.path.join(self.d, "ro")
        os.mkdir(ro)
        os.chmod(ro, 0o500)
        if os.access(ro, os.W_OK):  # root writes anyway
            self.skipTest("the directory stays writable for this user (root)")
        with self.assertRaisesRegex(BoltzattnError, "cannot create"):
            boltzattn.save_checkpoint(self.model, os.path.join(ro, "m.safetensors"))
        self.assertEqual(os.listdir(ro), [])

    def test_models_the_library_refuses_replace_nothing(self):
        target = os.path.join(self.d, "m.safetensors")
        boltzattn.save_checkpoint(self.model, target)
        with open(target, "rb") as f:
            good = f.read()
        bad = boltzattn.load_checkpoint(target)
        with torch.no_grad():
            bad.head.bias[0] = float("nan")
        with self.assertRaisesRegex(ValueError, "head.bias has a non-finite value"):
            boltzattn.save_checkpoint(bad, target)
        wrong = boltzattn.load_checkpoint(target)
        wrong.config = dict(wrong.config, n_embd=16)  # tensors no longer fit the config
        with self.assertRaisesRegex(BoltzattnError, "has shape"):
            boltzattn.save_checkpoint(wrong, target)
        for step in (-1, 2 ** 63, True, 1.5):
            with self.subTest(step=step), self.assertRaisesRegex((ValueError, TypeError), "step"):
                boltzattn.save_checkpoint(self.model, target, step=step)
        with open(target, "rb") as f:
            self.assertEqual(f.read(), good)
        self.assertEqual(sorted(os.listdir(self.d)), ["m.safetensors", "victim"])


class IntegerRanges(unittest.TestCase):
    """Every integer that crosses into C is range-checked, never wrapped."""

    def setUp(self):
        self.q = rand(1, 2, 6, 4)
        self.J = rand(2, 6, 6, scale=0.3)
        self.Jr = rand(2, 3, scale=0.3)

    def test_band_window_max_iter(self):
        q, J = self.q, self.J
        for val in (2 ** 31, 2 ** 32 + 2, 2 ** 63, -1, np.int64(2 ** 32 + 2), np.uint64(2 ** 33)):
            with self.subTest(band=val), self.assertRaisesRegex(ValueError, r"band = .*\[0, 2147483647\]"):
                boltzmann_attention(q, q, q, J, band=val)
            with self.subTest(window=val), self.assertRaisesRegex(ValueError, r"window = .*range"):
                boltzmann_attention(q, q, q, J, engine="hybrid", window=val)
            with self.subTest(max_iter=val), self.assertRaisesRegex(ValueError, "approx max_iter"):
                boltzmann_attention(q, q, q, J, engine="mf", approx={"max_iter": val})
            with self.subTest(ising_band=val), self.assertRaisesRegex(ValueError, "band = "):
                boltzattn.ising_marginals(np.zeros(4), np.zeros((4, 4)), band=val)
        for val in (True, np.bool_(True), 2.5, "2", float("nan")):
            with self.subTest(band=val), self.assertRaisesRegex(TypeError, "band must be an integer"):
                boltzmann_attention(q, q, q, J, band=val)
        # numpy integers and integral floats in range are the ints they hold
        y = boltzmann_attention(q, q, q, J, band=2)
        for val in (np.int32(2), np.int64(2), np.uint8(2), 2.0):
            torch.testing.assert_close(boltzmann_attention(q, q, q, J, band=val), y,
                                       rtol=0, atol=0)

    def test_shapes_that_would_wrap(self):
        # stride-0 views: the size is huge, the memory is not
        big = torch.zeros(1, 2, 6, 4, dtype=torch.float64).expand(2 ** 32 + 1, 2, 6, 4)
        with self.assertRaisesRegex(ValueError, r"B = 4294967297 is out of range"):
            boltzmann_attention(big, big, big, self.J)
        Jr = torch.zeros(2, 1, dtype=torch.float64).expand(2, 2 ** 32 + 2)
        with self.assertRaisesRegex(ValueError, r"D \(J's second dimension\) = 4294967298"):
            boltzmann_attention(self.q, self.q, self.q, Jr)
        with self.assertRaisesRegex(ValueError, "T = 4294967297"):
            _op.make_desc(1, 1, 2 ** 32 + 1, 2, (1, 3))

    def test_int_arg(self):
        self.assertEqual(_lib.int_arg("x", np.int16(5)), 5)
        self.assertIs(type(_lib.int_arg("x", np.int64(5))), int)
        for bad in (-1, 2 ** 31):
            with self.assertRaisesRegex(ValueError, r"x = -?\d+ is out of range"):
                _lib.int_arg("x", bad)
        with self.assertRaises(TypeError):
            _lib.int_arg("x", None)


class OpMemory(unittest.TestCase):
    """The op's idle contexts are bounded and let go of shapes no longer
    called (RSS from /proc/self/statm)."""

    @staticmethod
    def call(B, H, T, d, backward=True):
        q = torch.randn(B, H, T, d, requires_grad=True)
        J = torch.zeros(H, T, T, requires_grad=True)
        y = attention(q, q, q, J, engine="fast")
        if backward:
            y.sum().backward()
        return y

    def test_bounded_across_shapes(self):
        release_memory()
        for s in ((2, 2, 6, 4), (2, 2, 7, 4)):
            self.call(*s)
        start = rss_mb()
        # eight graphs alive at once at T = 18: eight contexts of ~10 MB
        ys = [self.call(4, 2, 18, 4, backward=False) for _ in range(8)]
        peak = rss_mb()
        del ys
        self.assertLessEqual(_op.pool_size(), _op._POOL_MAX)
        # then 200 calls alternating four small shapes
        shapes = [(2, 2, 6, 4), (2, 2, 7, 4), (1, 2, 5, 4), (3, 1, 6, 2)]
        for i in range(200):
            self.call(*shapes[i % 4])
            self.assertLessEqual(_op.pool_size(), _op._POOL_MAX)
        end = rss_mb()
        # the T = 18 contexts were freed as their shape went out of use
        self.assertFalse([e for e in _op._pool if e[1][3] == 18])
        self.assertLess(end, start + 0.25 * max(peak - start, 40.0),
                        "RSS start %.0f MB, peak %.0f, end %.0f" % (start, peak, end))
        self.assertEqual(release_memory() <= _op._POOL_MAX, True)
        self.assertEqual(_op.pool_size(), 0)

    def test_same_shape_reuses_one_context(self):
        release_memory()
        seen = set()
        for _ in range(20):
            self.call(2, 2, 6, 4)
            seen.add(id(_op._pool[-1][2]))
        self.assertEqual(len(seen), 1)


class UnusedSettings(unittest.TestCase):
    """A setting the call would not use is an error, not a silent drop."""

    def test_refused(self):
        q, J = rand(1, 2, 6, 4), rand(2, 6, 6, scale=0.3)
        with self.assertRaisesRegex(ValueError, "softmax attention takes no couplings"):
            attention(q, q, q, J, attn="softmax")
        with self.assertRaisesRegex(ValueError, "engine 'mf' .* sigmoid attention has none"):
            attention(q, q, q, None, attn="sigmoid", engine="mf")
        for engine in ("auto", "fast", "reference", "band"):
            with self.subTest(engine=engine), \
                    self.assertRaisesRegex(ValueError, "approx is for the approximate engines"):
                attention(q, q, q, J, engine=engine, approx={"max_iter": 50})
        with self.assertRaisesRegex(ValueError, "approx is for the approximate engines"):
            boltzattn.ising_marginals(np.zeros(3), np.zeros((3, 3)), engine="fast",
                                      approx={"tol": 1e-6})
        with self.assertRaisesRegex(ValueError, "approx is for the approximate engines"):
            BoltzmannSelfAttention(8, 2, 6, approx={"max_iter": 5})
        # the library's own refusals (window off hybrid, band on softmax) stay errors
        with self.assertRaisesRegex(BoltzattnError, "window"):
            attention(q, q, q, J, engine="tap", window=1)

    def test_still_taken(self):
        q, J = rand(1, 2, 6, 4), rand(2, 6, 6, scale=0.3)
        attention(q, q, q, None, attn="softmax")
        attention(q, q, q, J, engine="mf", approx={"max_iter": 200, "tol": 1e-9})
        attention(q, q, q, J, engine="hybrid", window=2)


class NonFinite(unittest.TestCase):
    """Non-finite q, k, v, J, dout: refused before the C call, naming the
    tensor and the position as the library does."""

    def setUp(self):
        self.q, self.k, self.v = rand(1, 2, 6, 4), rand(1, 2, 6, 4), rand(1, 2, 6, 4)
        self.J = rand(2, 6, 6, scale=0.3)
        self.calls = 0
        real = _lib.lib.ba_attn_op_forward_f64

        def counting(*a):
            self.calls += 1
            return real(*a)

        _lib.lib.ba_attn_op_forward_f64 = counting
        self.addCleanup(setattr, _lib.lib, "ba_attn_op_forward_f64", real)

    def test_inputs(self):
        for name, idx, msg in (("q", (0, 1, 3, 2), r"q\[38\] \(b 0, h 1, t 3, c 2\) = nan"),
                               ("k", (0, 0, 0, 0), r"k\[0\] \(b 0, h 0, t 0, c 0\) = inf"),
                               ("v", (0, 1, 5, 3), r"v\[47\] \(b 0, h 1, t 5, c 3\) = -inf"),
                               ("J", (1, 2, 4), r"J\[1\]\[2\]\[4\] = nan")):
            for dtype in (torch.float64, torch.float32):
                t = dict(q=self.q, k=self.k, v=self.v, J=self.J)
                t = {n: x.to(dtype) for n, x in t.items()}
                bad = t[name].clone()
                bad[idx] = {"q": float("nan"), "k": float("inf"), "v": float("-inf"),
                            "J": float("nan")}[name]
                t[name] = bad
                with self.subTest(name=name, dtype=dtype), \
                        self.assertRaisesRegex(BoltzattnError, "forward: " + msg):
                    boltzmann_attention(t["q"], t["k"], t["v"], t["J"])
        self.assertEqual(self.calls, 0)
        Jr = rand(2, 3)
        Jr[1, 2] = float("inf")
        with self.assertRaisesRegex(BoltzattnError, r"J\[1\]\[2\] \(distance 3\) = inf"):
            boltzmann_attention(self.q, self.k, self.v, Jr)
        self.assertEqual(self.calls, 0)

    def test_entries_the_op_does_not_read(self):
        J = self.J.clone()
        J[0, 3, 1] = float("nan")  # j > k: not read
        J[1, 0, 5] = float("inf")  # farther than the band
        y = boltzmann_attention(self.q, self.k, self.v, J, band=2)
        self.assertTrue(bool(torch.isfinite(y).all()))
        Jr = rand(2, 4)
        Jr[:, 3] = float("nan")  # distance 4 > band 3
        boltzmann_attention(self.q, self.k, self.v, Jr, band=3)

    def test_dout(self):
        q = self.q.clone().requires_grad_(True)
        y = boltzmann_attention(q, self.k, self.v, self.J)
        g = torch.zeros_like(y)
        g[0, 1, 2, 3] = float("-inf")
        real = _lib.lib.ba_attn_op_backward_f64
        backward_calls = []
        _lib.lib.ba_attn_op_backward_f64 = lambda *a: backward_calls.append(1) or real(*a)
        try:
            with self.assertRaisesRegex(BoltzattnError,
                                        r"backward: dout\[35\] \(b 0, h 1, t 2, c 3\) = -inf"):
                y.backward(g)
        finally:
            _lib.lib.ba_attn_op_backward_f64 = real
        self.assertEqual(backward_calls, [])


if __name__ == "__main__":
    unittest.main()
