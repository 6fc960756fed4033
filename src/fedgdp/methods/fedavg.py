"""FedAvg (Algorithm 3): R rounds of K noisy local steps, averaged."""

from __future__ import annotations

from ..core import privacy
from .base import GRADIENT_METHODS, Method, MethodTags
from .settings import RoundSettings


class FedAvg(Method):
    name, label, algorithm = "fedavg", "FedAvg", "Algorithm 3"
    tags = MethodTags(backends=GRADIENT_METHODS, theory_bound="fedavg", tested_release=privacy.LOCAL_STEP)
    settings_class = RoundSettings

    def noise_shapes(self, s, m, d):
        """One replicate's noise: ``Z`` of shape (R, K, m, d), one draw per round, step and client."""
        return {"Z": (s.R, s.K, m, d)}

    def rounds(self, s):
        """Communication rounds: ``R``."""
        return s.R

    def plan(self, data, s):
        """The releases of Algorithm 3 (`fedgdp.core.privacy.plan_fedavg`): R K noisy local iterates per client."""
        return privacy.plan_fedavg(B=data.plan_B, n=data.plan_n, eta=s.eta, R=s.R, K=s.K)

    def run(self, be, s):
        """Algorithm 3: R rounds of K noisy local steps from the global parameter, each averaged with the weights."""
        (sigma,), ledgers = be.calibrate(self, s)
        self.check_step_bound(be, [(s.R * s.K, s.eta, sigma, False)])
        w = self.weights(be, s)
        theta = be.start()
        for r in range(s.R):
            local = be.local_steps(theta, K=s.K, eta=s.eta, sigma=sigma, noise=be.noise.take("Z", r))
            theta = be.average(w, local)
        return be.finish(theta, ledgers, self.comm(s, be.m, be.dk))
