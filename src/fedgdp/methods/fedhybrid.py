"""FedHybrid (Algorithm 2): K1 noisy local steps, averaged, then K2 FedSGD steps."""

from __future__ import annotations

from ..core import privacy
from .base import GRADIENT_METHODS, Method, MethodTags
from .settings import HybridSettings


class FedHybrid(Method):
    """Algorithm 2 of the paper (not the "FedHybrid" of Niu & Wei, IEEE TSP 2023): ``R1``
    rounds of ``K1`` local steps (``R1 = 1`` unless set), then ``K2`` server steps;
    ``share1`` of the steps (CNNs: of the rounds) go to stage 1, ``split(total, share1)``.
    """

    name, label, algorithm = "fedhybrid", "FedHybrid", "Algorithm 2"
    tags = MethodTags(backends=GRADIENT_METHODS, theory_bound="fedhybrid", tested_release="gradient")
    SHARE1 = 0.6              # stage 1's share of the steps (docs/methods.md §3: K1 = 30 of 50)

    @staticmethod
    def split(total: int, share: float) -> int:
        """Stage 1's part of ``total``: ``round(share * total)`` (half to even).

        Parameters
        ----------
        total : int
            The steps (or rounds) to split.
        share : float
            Stage 1's share.
        """
        return int(round(share * total))

    settings_class = HybridSettings

    def noise_shapes(self, s, m, d):
        """One replicate's noise: ``Z1`` (K1, m, d) for stage 1, ``Z2`` (K2, m, d) for stage 2."""
        return {"Z1": (s.K1, m, d), "Z2": (s.K2, m, d)}

    def local_step_size(self, s):
        """Stage 1's step size ``eta1`` (its ``local step`` release)."""
        return s.eta1

    def rounds(self, s):
        """Communication rounds: ``R1 + K2``."""
        return s.R1 + s.K2

    def plan(self, data, s):
        """Algorithm 2's releases (`fedgdp.core.privacy.plan_fedhybrid`): R1 K1 iterates, K2 gradients."""
        return privacy.plan_fedhybrid(B=data.plan_B, n=data.plan_n, eta1=s.eta1, K1=s.R1 * s.K1,
                                      K2=s.K2)

    def run(self, be, s):
        """Algorithm 2: R1 rounds of K1 noisy local steps, each averaged, then K2 FedSGD server steps."""
        (a1, a2), ledgers = be.calibrate(self, s)
        self.check_step_bound(be, [(s.R1 * s.K1, s.eta1, a1, False),
                                   (s.K2, s.eta2, a2, True)])
        w = self.weights(be, s)
        theta = be.start()
        for _ in range(s.R1):
            local = be.local_steps(theta, K=s.K1, eta=s.eta1, sigma=a1, noise=be.noise.take("Z1"))
            theta = be.average(w, local)
        theta = be.server_steps(theta, w, K=s.K2, eta=s.eta2, sigma=a2, noise=be.noise.take("Z2"))
        return be.finish(theta, ledgers, self.comm(s, be.m, be.dk))
