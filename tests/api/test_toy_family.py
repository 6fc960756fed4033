"""A family added from outside the package, in this one file: a probit (binary labels, ``P(y = 1) = Phi(x'theta)``).

A family is a `fedgdp.core.families.Family` registered with `register_family`; its model is a
`fedgdp.core.glm.GLM`. The probit's link is not canonical, so its model overrides the per-row residual
(the score ``dl/ds``: the per-sample gradient is ``x r``, as every method and clip reads it), the loss,
and its curvature is the expected information ``phi(s)^2 / (Phi(s) (1 - Phi(s)))`` (Newton steps are
then Fisher scoring: the same maximiser). Nothing else is declared: `FederatedGLM(family="probit")`
fits it privately and non-privately, the forecast and the inference included.

Reference: statsmodels' ``GLM(family=Binomial(link=Probit()))`` on the pooled rows, fitted by IRLS
(Fisher scoring, so its covariance is the inverse expected information, as ours) with ``tol=1e-12``.
NP-Pooled with ridge 0 and gradient tolerance 1e-11 solves the same score equations: the coefficients
agree to 1e-7 (a gradient of 1e-11 moves them by about ``||H^-1|| 1e-11``; the information here is
about 0.5 per row, so far below 1e-7) and the standard errors to 1e-5 relative (statsmodels takes
its covariance at the last IRLS weights, one step behind its returned estimate).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.special import log_ndtr, ndtr, ndtri

from fedgdp import FederatedGLM
from fedgdp.core.families import FAMILIES, Family, get_family, register_family
from fedgdp.core.glm import GLM

sm = pytest.importorskip("statsmodels.api")


def _phi(s):
    return np.exp(-0.5 * s * s) / math.sqrt(2.0 * math.pi)


class ProbitModel(GLM):
    """Probit regression, one output: mean ``Phi(s)``; residual the score ``dl/ds``."""

    name = "probit"
    k = 1
    bounded_residuals = False          # the score grows as |s| on a misfit row

    def targets(self, labels):
        return np.asarray(labels, dtype=float).reshape(-1, 1)

    def mean(self, S):
        return ndtr(S)

    @staticmethod
    def _score(S, Y):
        """``dl/ds``: ``-phi/Phi`` for a 1, ``phi/(1 - Phi)`` for a 0 (each overflow free)."""
        return np.where(Y > 0.5, -_phi(S) / ndtr(S), _phi(S) / ndtr(-S))

    def residuals(self, theta, X, Y):
        return self._score(X @ theta, Y)

    def loss_gradient(self, theta, X, Y):
        S = X @ theta
        loss = -float(np.mean(np.where(Y > 0.5, log_ndtr(S), log_ndtr(-S))))
        return loss, X.T @ self._score(S, Y) / X.shape[0], ndtr(S)

    @staticmethod
    def _information(P):
        P = np.clip(P, 1e-300, 1.0 - 1e-16)
        return _phi(ndtri(P)) ** 2 / (P * (1.0 - P))

    def curvature(self, P, V):
        return self._information(P) * V

    def curvature_bound(self, P):
        return self._information(P)[:, 0]


class Probit(Family):
    """The estimator's probit family: its model and the forecast's curvature (``2/pi`` at 0)."""

    def model(self, n_classes=None):
        return ProbitModel()

    def curvature_at_zero(self, k, b):
        return np.array([[2.0 / math.pi]])

    def curvature_at(self, S, b):
        s = S[:, 0]
        return np.array([[float(np.mean(_phi(s) ** 2 / (ndtr(s) * ndtr(-s))))]])


@pytest.fixture(scope="module")
def probit():
    # the score is not bounded by 1 as logistic's (it grows as |s| on a misfit row): the public clip is
    # 2 sqrt(d), as Poisson's (at sqrt(d) the clip's bias here is about 5 standard errors)
    family = register_family(Probit("probit", "binary", irls=False, max_classes=2, clip_factor=2.0))
    yield family
    del FAMILIES["probit"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(64)
    m, n, truth = 10, 500, np.array([-0.3, 0.8, -0.5, 0.2])
    X = rng.standard_normal((m * n, len(truth) - 1))
    y = (rng.random(m * n) < ndtr(truth[0] + X @ truth[1:])).astype(int)
    return X, y, np.repeat(np.arange(m), n)


def _reference(X, y):
    glm = sm.GLM(y, sm.add_constant(X), family=sm.families.Binomial(link=sm.families.links.Probit()))
    return glm.fit(tol=1e-12)


def test_registered_by_name_and_refused_twice(probit):
    assert get_family("probit") is probit
    with pytest.raises(ValueError, match="registered already"):
        register_family(Probit("probit", "binary"))
    with pytest.raises(ValueError, match="takes a Family"):
        register_family("probit")


def test_the_non_private_fit_is_the_probit_mle(probit, data):
    X, y, clients = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = FederatedGLM(family="probit", mu=math.inf, method="np_pooled",
                           method_settings={"ridge": 0.0, "gtol": 1e-11}).fit(X, y, clients)
    ref = _reference(X, y)
    theta = np.r_[est.intercept_, est.coef_.ravel()]
    np.testing.assert_allclose(theta, ref.params, rtol=0, atol=1e-7)
    s = est.summary()
    np.testing.assert_allclose(s["se"].to_numpy(), ref.bse, rtol=1e-5)
    assert list(est.classes_) == [0, 1] and est.predict_proba(X[:3]).shape == (3, 2)
    np.testing.assert_allclose(est.predict_proba(X[:3])[:, 1], ndtr(ref.params[0] + X[:3] @ ref.params[1:]),
                               rtol=1e-6)


@pytest.mark.parametrize("method", ["auto", "fedsgd"])
def test_a_private_fit_spends_mu_and_lands_within_its_noise(probit, data, method):
    """At mu = 2 the ledger composes to mu (1e-12), and each coefficient lies within 5 of summary's
    standard errors (``se``, at least the noise's sd ``se_noise``) of the non-private MLE on the same rows:
    the gap is the noise (and the clip's bias, small at the declared clip: about 1 se over seeds 3, 4)."""
    X, y, clients = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = FederatedGLM(family="probit", mu=2.0, method=method, classes=[0, 1], random_state=3).fit(X, y, clients)
    assert est.method_ != "fedirls"
    assert float(np.max(est.privacy_.ledger.composed_mu())) == pytest.approx(2.0, rel=1e-12)
    s = est.summary()
    assert (s["se_noise"] > 0).all()
    gap = s["coef"].to_numpy() - _reference(X, y).params
    assert np.all(np.abs(gap) <= 5 * s["se"].to_numpy()), (gap, s["se"].to_numpy())
