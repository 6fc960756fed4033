"""FedNewton-Iter (Algorithm 5, CNNs only): cycles of FedAvg rounds, each followed by
one private head-only Newton round on the network's last layer."""

from __future__ import annotations

from ..core import privacy
from .base import CNN, Method, MethodTags
from .settings import IterSettings


class FedNewtonIter(Method):
    """Algorithm 5 (paper section 3.7) for a network: ``cycles`` times, ``R / cycles``
    FedAvg rounds, then one round in which every drawn client releases a noisy
    head-only Newton step ``head - alpha (h + lambda I)^{-1} gbar`` of the last layer
    (clipped per-sample head gradients, empirical Fisher ``h``; calibration
    `fedgdp.core.privacy.plan_fednewton_iter`)."""

    name, label, algorithm = "fednewton_iter", "FedNewton-Iter", "Algorithm 5"
    tags = MethodTags(backends=frozenset({CNN}))
    settings_class = IterSettings

    def check_settings(self, s):
        """Refuse ``rounds`` that are not a multiple of ``newton_cycles``."""
        if s.R % s.cycles:
            raise ValueError(f"rounds must be a multiple of newton_cycles, got rounds={s.R}, "
                             f"newton_cycles={s.cycles}")

    def rounds(self, s):
        """Communication rounds: ``R + cycles``."""
        return s.R + s.cycles

    def plan(self, data, s):
        """The releases of Algorithm 5 (`fedgdp.core.privacy.plan_fednewton_iter`)."""
        return privacy.plan_fednewton_iter(B=data.plan_B, n=data.plan_n, eta=s.eta, R=s.R, K=s.K,
                                           cycles=s.cycles, ridge=s.ridge, damping=s.damping)

    def run(self, be, s):
        """Algorithm 5: ``cycles`` times, ``R / cycles`` FedAvg rounds, then one noisy head-only Newton round."""
        R, K, C = s.R, s.K, s.cycles
        self.check_settings(s)
        (sigma1, sigma2), ledgers = be.calibrate(self, s)
        w = self.weights(be, s)
        theta = be.start()
        for _ in range(C):
            for _ in range(R // C):
                theta = be.average(w, be.local_steps(theta, K=K, eta=s.eta, sigma=sigma1,
                                                     noise=be.noise.take("Z1")))
            step = be.head_newton_release(theta, ridge=s.ridge, damping=s.damping)
            theta = be.average(w, be.add_noise(step, sigma2, be.noise.take("Z2")))
        return be.finish(theta, ledgers, self.comm(s, be.m, be.dk))
