"""DP-SCAFFOLD (real data only): SCAFFOLD (option II control variates) with FedAvg's
noise; the control variates are post-processing of released iterates."""

from __future__ import annotations

import numpy as np

from ..core import privacy
from .base import REALDATA, Method, MethodTags
from .settings import ScaffoldSettings


class DPScaffold(Method):
    """SCAFFOLD (option II) with FedAvg's noise: each local step is ``y <- y - eta
    (clip-grad_i(y) - c_i + c) + sigma Z``; ``c_i+ = c_i - c + (theta - y_K)/(K eta)``.
    The control variates are computed from released iterates only (post-processing),
    so the ledger is FedAvg's."""

    name, label, algorithm = "dp_scaffold", "DP-SCAFFOLD", "SCAFFOLD + Algorithm 3 noise"
    # per round: the update and the control variate; drifts: local steps corrected by c - c_i
    tags = MethodTags(backends=frozenset({REALDATA}), per_round=2, drifts=True)
    settings_class = ScaffoldSettings

    def rounds(self, s):
        """Communication rounds: ``R``."""
        return s.R

    def plan(self, data, s):   # FedAvg's releases: the control variates are post-processing
        """FedAvg's releases (`fedgdp.core.privacy.plan_fedavg`): the control variates are post-processing."""
        return privacy.plan_fedavg(B=data.plan_B, n=data.plan_n, eta=s.eta, R=s.R, K=s.K)

    def run(self, be, s):
        """SCAFFOLD (option II): R rounds of K noisy local steps with drift ``c - c_i``, a server step ``eta_g``."""
        rounds, K, eta = s.R, s.K, s.eta
        (sigma,), ledgers = be.calibrate(self, s)
        self.check_step_bound(be, [(rounds * K, eta, sigma, False)], drift_rounds=rounds, eta_g=s.eta_g)
        w = self.weights(be, s)
        theta, c = be.start(), be.zeros()
        ci = np.zeros(theta.shape[:1] + (be.m,) + theta.shape[1:])
        for r in range(rounds):
            y = be.local_steps(theta, K=K, eta=eta, sigma=sigma, noise=be.noise.take("Z", r),
                               drift=c[:, None] - ci)
            ci_new = ci - c[:, None] + (theta[:, None] - y) / (K * eta)
            dy, dc = be.average(w, y - theta[:, None]), be.average(w, ci_new - ci)
            ci = ci_new
            theta = theta + s.eta_g * dy
            c = c + dc
        return be.finish(theta, ledgers, self.comm(s, be.m, be.dk))
