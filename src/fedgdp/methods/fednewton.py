"""FedNewton (Algorithm 4), as printed (privacy mode ``paper``) and certified
(clipped per-sample Hessians, the ridge solve): `FedNewton` and `FedNewtonCertified`."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..core import privacy
from .base import Backend, Method, MethodTags
from .settings import StepSettings


class FedNewton(Method):
    """Algorithm 4: in privacy mode ``paper`` as printed (eigenvalue floor, uncertified), in
    ``certified`` with clipped per-sample Hessians and the ridge solve
    (`fedgdp.core.privacy.plan_fednewton`). Stage 1 is reused by the other variant when
    every input is equal (checked): both draw the same noise.
    """

    name, label, algorithm = "fednewton", "FedNewton", "Algorithm 4"
    # halves: stage 1 and the Hessian on half 1, the Newton gradient on half 2; the bound:
    # Theorem 3.9 (for the certified variant too: it assumes per-sample Hessians bounded as
    # the clipping enforces, where the clip changes nothing); the real-data fits run level by level
    tags = MethodTags(halves=True, solves_newton=True, theory_bound="fednewton", tested_release="newton",
                      certified_alternatives="privacy_mode='certified' or method='fednewton_certified'",
                      stacks_levels=False)
    settings_class = StepSettings

    def noise_shapes(self, s, m, d):
        """One replicate's noise: ``Z1`` (K, m, d) for the stage-1 local steps, ``Z2`` (m, d) for the Newton release."""
        return {"Z1": (s.K, m, d), "Z2": (m, d)}

    def rounds(self, s):
        """Communication rounds: 2 (stage 1's average, then the Newton step)."""
        return 2

    def privacy_modes(self) -> tuple[str, ...]:
        """Both modes, unless certified in every mode (`FedNewtonCertified`)."""
        return ("paper",) if self.tags.always_certified else ("paper", "certified")

    def certified(self, data) -> bool:
        """Whether the fit on ``data`` is certified (always, or privacy mode ``certified``).

        Parameters
        ----------
        data : object
            A backend's data (its ``privacy`` dict is read).
        """
        return self.tags.always_certified or data.privacy.get("mode", "paper") == "certified"

    def hessian_bound(self, data) -> float | None:
        """The per-sample Hessian clip ``H_c = hessian_clip * tau1`` when certified, else None.

        Parameters
        ----------
        data : object
            A backend's data (``privacy["hessian_clip"]``, ``tau1``).
        """
        return float(data.privacy["hessian_clip"]) * data.tau1 if self.certified(data) else None

    def plan(self, data, s):
        """Algorithm 4's releases (`fedgdp.core.privacy.plan_fednewton`): K iterates, one Newton release."""
        n1, n2 = data.plan_halves()
        bound = self.hessian_bound(data)
        return privacy.plan_fednewton(B=data.plan_B, n1=n1, n2=n2, eta=s.eta, K=s.K, tau1=data.tau1,
                                      hessian_bound=bound, solve_tol=0.0 if bound is None else data.solve_tol)

    def check_release_bound(self, data, s, s1, s2) -> None:
        """Refuse a certified fit whose releases could exceed `fedgdp.core.privacy.RELEASE_MAX`,
        from public inputs only (docs/methods.md §2, "The certified solve"): entries of the
        stage-1 iterate <= ``K (eta B + z s1)``, of the step <= ``B / tau1``, of the release
        <= their sum + ``z s2``; of the Hessian <= ``(1 + hessian_clip) tau1``.

        Parameters
        ----------
        data : object
            A backend's data (``plan_B``, ``tau1``, ``privacy``).
        s : MethodSettings
            The method's frozen settings (`fedgdp.methods.Method.settings`).
        s1, s2 : ndarray
            The noise sds of the local steps and of the Newton release.
        """
        B, tau1, z = np.asarray(data.plan_B, float), float(data.tau1), privacy.NOISE_BOUND
        with np.errstate(over="ignore", invalid="ignore"):
            bound = privacy.iterate_bound(s.K, s.eta, B, np.asarray(s1)) + B / tau1 + z * np.asarray(s2)
            bound = np.maximum(np.max(bound), (1.0 + float(data.privacy["hessian_clip"])) * tau1)
        privacy.check_release_bound(self.name, bound, f"clip B={float(np.max(B)):g}, tau1={tau1:g}, "
                                                      f"K={s.K}, eta={s.eta:g}, mu, hessian_clip")

    def newton_update(self, be: Backend, theta1: np.ndarray) -> np.ndarray:
        """Every client's pre-noise Newton release ``theta1 - s`` (b, m, P).

        Parameters
        ----------
        be : Backend
            The backend of the fit.
        theta1 : ndarray of shape (b, P)
            The stage-1 global parameter.
        """
        return be.newton_release(theta1, hessian_bound=self.hessian_bound(be.data))

    def run(self, be, s):
        """Algorithm 4: FedAvg (R = 1, K local steps on half 1), then every client's noisy Newton release, averaged."""
        K, eta = s.K, s.eta
        (s1, s2), ledgers = be.calibrate(self, s)
        if be.data.private and self.certified(be.data):
            self.check_release_bound(be.data, s, s1, s2)
        w = self.weights(be, s)
        Z1 = be.noise.take("Z1")
        theta1 = be.memo("_newton_stage1", (K, eta, w, s1, Z1), lambda: be.average(
            w, be.local_steps(be.start(), K=K, eta=eta, sigma=s1, noise=Z1, part="half1")))
        step = self.newton_update(be, theta1)
        if be.data.private and not np.isfinite(step).all():
            raise ValueError(f"method {self.name}: the Newton release is not finite (NaN or inf); nothing is "
                             "released")
        local = be.add_noise(step, s2, be.noise.take("Z2"))
        return be.finish(be.average(w, local), ledgers, self.comm(s, be.m, be.dk))


class FedNewtonCertified(FedNewton):
    """Certified FedNewton in every privacy mode, on FedNewton's noise stream (common
    random numbers: the two differ only in the Newton step and its calibration)."""

    name, label, algorithm = "fednewton_certified", "FedNewton (certified)", "Algorithm 4, certified"
    tags = replace(FedNewton.tags, always_certified=True)

    @property
    def noise_stream(self) -> str:
        return "fednewton"
