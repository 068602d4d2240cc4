"""boltzattn's numpy side: ising_marginals against a plain enumeration
written here, every engine, and the checkpoint reader/writer's refusals.
Run by tests/python.sh (CTest `python`), which sets BOLTZATTN_LIBRARY,
PYTHONPATH and BOLTZATTN_CLI."""
import itertools
import os
import tempfile
import unittest

import numpy as np

import boltzattn
from boltzattn import BoltzattnError


def enumerate_marginals(h, J):
    """P(s_j = +1) by summing all 2^n states (float64)."""
    n = len(h)
    S = np.array(list(itertools.product([-1.0, 1.0], repeat=n)))  # (2^n, n)
    E = S @ h + np.einsum("sj,jk,sk->s", S, np.triu(J, 1), S)
    p = np.exp(E - E.max())
    p /= p.sum()
    return (p[:, None] * (S > 0)).sum(0)


class IsingMarginals(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(7)
        self.n = 9
        self.h = rng.normal(size=self.n)
        self.J = np.triu(rng.normal(scale=0.4, size=(self.n, self.n)), 1)

    def test_exact_engines_match_enumeration(self):
        want = enumerate_marginals(self.h, self.J)
        for engine in ("reference", "fast", "auto"):
            got = boltzattn.ising_marginals(self.h, self.J, engine=engine)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=0, err_msg=engine)
        # the band engine with a band covering every pair is the full model
        got = boltzattn.ising_marginals(self.h, self.J, engine="band", band=self.n - 1)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)

    def test_band_ignores_far_couplings(self):
        W = 2
        j, k = np.indices(self.J.shape)
        Jb = np.where(k - j <= W, self.J, 0.0)
        want = enumerate_marginals(self.h, Jb)
        got = boltzattn.ising_marginals(self.h, self.J, band=W)  # auto -> band
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)

    def test_approximate_engines(self):
        # J = 0: every engine is exact, w = sigmoid(2h)
        want0 = 1.0 / (1.0 + np.exp(-2.0 * self.h))
        for engine, kw in (("mf", {}), ("tap", {}), ("bp", {}), ("hybrid", {"window": 2})):
            got = boltzattn.ising_marginals(self.h, 0 * self.J, engine=engine, **kw)
            np.testing.assert_allclose(got, want0, rtol=1e-9, err_msg=engine)
        # weak couplings: close to exact, TAP and BP closer than naive MF
        Jw = 0.05 * self.J
        want = enumerate_marginals(self.h, Jw)
        errs = {}
        for engine, kw in (("mf", {}), ("tap", {}), ("bp", {}), ("hybrid", {"window": 3})):
            got = boltzattn.ising_marginals(self.h, Jw, engine=engine, **kw)
            errs[engine] = np.abs(got - want).max()
            self.assertLess(errs[engine], 2e-3, engine)
        self.assertLess(errs["tap"], errs["mf"])
        self.assertLess(errs["bp"], errs["mf"])

    def test_refusals(self):
        with self.assertRaisesRegex(ValueError, "engine 'nope'"):
            boltzattn.ising_marginals(self.h, self.J, engine="nope")
        with self.assertRaisesRegex(ValueError, "window is the hybrid engine's"):
            boltzattn.ising_marginals(self.h, self.J, engine="band", band=2, window=2)
        with self.assertRaisesRegex(ValueError, "J must be"):
            boltzattn.ising_marginals(self.h, self.J[:3])
        big = np.zeros(30)
        with self.assertRaises(BoltzattnError) as cm:
            boltzattn.ising_marginals(big, np.zeros((30, 30)), engine="fast")
        self.assertEqual(cm.exception.status, 6)
        self.assertIn("30", str(cm.exception))
        bad = self.h.copy()
        bad[4] = np.nan
        with self.assertRaisesRegex(BoltzattnError, r"h\[4\]"):
            boltzattn.ising_marginals(bad, self.J)


class CheckpointReader(unittest.TestCase):
    def test_missing_and_corrupt_files(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(BoltzattnError) as cm:
                boltzattn.read_checkpoint(os.path.join(d, "none.safetensors"))
            self.assertEqual(cm.exception.status, 2)
            p = os.path.join(d, "junk.safetensors")
            with open(p, "wb") as f:
                f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
            with self.assertRaises(BoltzattnError):
                boltzattn.read_checkpoint(p)


if __name__ == "__main__":
    unittest.main()
