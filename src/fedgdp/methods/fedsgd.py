"""FedSGD (Algorithm 1): K server steps on noisy clipped client gradients."""

from __future__ import annotations

from ..core import privacy
from .base import GRADIENT_METHODS, Method, MethodTags
from .settings import StepSettings


class FedSGD(Method):
    name, label, algorithm = "fedsgd", "FedSGD", "Algorithm 1"
    tags = MethodTags(backends=GRADIENT_METHODS, theory_bound="fedsgd", tested_release="gradient")
    settings_class = StepSettings

    def noise_shapes(self, s, m, d):
        """One replicate's noise: ``Z`` of shape (K, m, d), one draw per step and client."""
        return {"Z": (s.K, m, d)}

    def rounds(self, s):
        """Communication rounds: one per server step, ``K``."""
        return s.K

    def plan(self, data, s):
        """The releases of Algorithm 1 (`fedgdp.core.privacy.plan_fedsgd`): K clipped gradients per client."""
        return privacy.plan_fedsgd(B=data.plan_B, n=data.plan_n, K=s.K)

    def run(self, be, s):
        """Algorithm 1: K server steps from `Backend.start` on the weighted noisy clipped gradients."""
        (sigma,), ledgers = be.calibrate(self, s)
        self.check_step_bound(be, [(s.K, s.eta, sigma, True)])
        w = self.weights(be, s)
        theta = be.server_steps(be.start(), w, K=s.K, eta=s.eta, sigma=sigma, noise=be.noise.take("Z"))
        return be.finish(theta, ledgers, self.comm(s, be.m, be.dk))
