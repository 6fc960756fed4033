"""Inference: FederatedGLM.summary / conf_int (fedgdp.api.inference).

At mu = inf NP-Pooled with ridge 0 is the MLE, and its standard errors are statsmodels'
(relative 1e-6): the inverse information (GLM's default) and the HC0 sandwich. statsmodels
is fitted with ``tol=1e-12``: its default IRLS tolerance (1e-8 on the deviance) leaves its
own covariance, taken at the last-but-one iterate's weights, about 1e-5 off the MLE's;
NP-Pooled's gradient tolerance is 1e-11 for the same reason (its default, 1e-8, leaves
the softmax contrasts about 3e-6 off statsmodels 0.15's Newton fit).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from fedgdp import FederatedGLM
from fedgdp.api import inference
from fedgdp.realdata import moments

sm = pytest.importorskip("statsmodels.api")

COLUMNS = ["coef", "se", "z", "p", "ci_low", "ci_high", "se_sampling", "se_noise", "note"]


def _mle(family, X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return FederatedGLM(family=family, mu=math.inf, method="np_pooled",
                            method_settings={"ridge": 0, "gtol": 1e-11}, **kw).fit(X, y, "single")


def _spector():
    d = sm.datasets.spector.load_pandas()
    return d.exog.values.astype(float), d.endog.values


def _cpunish():
    d = sm.datasets.cpunish.load_pandas()
    X = d.exog.copy()
    X["INCOME"] = X["INCOME"] / 1000          # thousands of dollars: both fits then converge tightly
    return X.values.astype(float), d.endog.values


@pytest.mark.parametrize("cov_type,sm_cov", [("model", "nonrobust"), ("robust", "HC0")])
@pytest.mark.parametrize("family", ["logistic", "poisson"])
def test_statsmodels_glm_standard_errors(family, cov_type, sm_cov):
    X, y = _spector() if family == "logistic" else _cpunish()
    kw = {"classes": [0, 1]} if family == "logistic" else {}
    est = _mle(family, X, y, **kw)
    s = est.summary(cov_type=cov_type)
    fam = sm.families.Binomial() if family == "logistic" else sm.families.Poisson()
    ref = sm.GLM(y, sm.add_constant(X), family=fam).fit(cov_type=sm_cov, tol=1e-12)
    np.testing.assert_allclose(s["coef"].to_numpy(), ref.params, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(s["se"].to_numpy(), ref.bse, rtol=1e-6)
    np.testing.assert_allclose(s["se_noise"].to_numpy(), 0.0)
    ci = est.conf_int()
    np.testing.assert_allclose(ci.to_numpy(), ref.conf_int(), rtol=1e-5) if cov_type == "model" else None


@pytest.mark.parametrize("cov_type,sm_cov", [("model", "nonrobust"), ("robust", "HC0")])
def test_statsmodels_mnlogit_contrasts(cov_type, sm_cov):
    """Softmax: the class contrasts theta_c - theta_0 and their covariance are MNLogit's
    (reference class 0); the summary's centred coefficients carry the same information."""
    d = sm.datasets.anes96.load_pandas()
    X = d.exog[["logpopul", "selfLR", "age", "educ", "income"]].values.astype(float)
    y = d.endog.values.astype(int)
    est = _mle("multinomial", X, y, classes=list(range(7)))
    ref = sm.MNLogit(y, sm.add_constant(X)).fit(disp=0, cov_type=sm_cov, method="newton", maxiter=100, tol=1e-12)
    V = inference.covariance(est.inference_, cov_type=cov_type, method=est.method_, settings=est.settings_)
    dd, k = est.theta_.shape
    L = np.zeros((dd * (k - 1), dd * k))
    for a in range(dd):
        for c in range(1, k):
            L[a * (k - 1) + c - 1, a * k + c], L[a * (k - 1) + c - 1, a * k] = 1.0, -1.0
    se = np.sqrt(np.diag(L @ V @ L.T)).reshape(dd, k - 1)
    np.testing.assert_allclose(est.theta_[:, 1:] - est.theta_[:, :1], ref.params, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(se, ref.bse, rtol=1e-6)


def _data(family, n=1200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    s = 0.2 + X @ np.array([0.5, -0.3])
    if family == "logistic":
        y = (s + rng.logistic(size=n) > 0).astype(int)
    elif family == "poisson":
        y = rng.poisson(np.exp(s))
    else:
        y = np.argmax(np.column_stack([np.zeros(n), s, -s]) + rng.gumbel(size=(n, 3)), axis=1)
    return X, y, np.repeat(np.arange(4), n // 4)


@pytest.mark.parametrize("family", ["logistic", "poisson", "multinomial"])
def test_summary_shapes_and_ledger(family):
    X, y, clients = _data(family)
    kw = {} if family == "poisson" else {"classes": [0, 1] if family == "logistic" else [0, 1, 2]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = FederatedGLM(family=family, mu=2.0, **kw).fit(X, y, clients)
    s = est.summary()
    k = 3 if family == "multinomial" else 1
    assert list(s.columns) == COLUMNS and len(s) == 3 * k
    if family == "multinomial":
        assert s.index.names == ["class", "term"] and list(s.index.get_level_values(0)[:3]) == [0, 0, 0]
        # centred across the classes: each term's coefficients sum to zero
        np.testing.assert_allclose(s["coef"].to_numpy().reshape(k, 3).sum(axis=0), 0.0, atol=1e-12)
    else:
        assert list(s.index) == ["(intercept)", "x0", "x1"]
    assert np.all(np.isfinite(s.drop(columns="note").to_numpy(float)))
    assert np.all(s["se_sampling"] > 0) and np.all(s["se_noise"] > 0)
    np.testing.assert_allclose(s["se"] ** 2, s["se_sampling"] ** 2 + s["se_noise"] ** 2)
    ci = est.conf_int(alpha=0.1)
    assert list(ci.columns) == ["ci_low", "ci_high"] and ci.shape == (3 * k, 2)
    assert np.all(ci["ci_low"] < s["coef"]) and np.all(s["coef"] < ci["ci_high"])
    assert np.all(ci["ci_high"] - ci["ci_low"] < s["ci_high"] - s["ci_low"])     # 90% narrower than 95%
    # the ledger: inference's two releases at 10% of mu^2, everything composing to the target mu
    ledger = est.privacy_.ledger
    stages = [r.stage for r in ledger.releases]
    assert stages[-2:] == list(inference.STAGES)
    spent = sum(r.count * np.asarray(r.mu) ** 2 for r in ledger.releases if r.stage in inference.STAGES)
    np.testing.assert_allclose(spent, 0.1 * 4.0, rtol=1e-12)
    np.testing.assert_allclose(est.privacy_.mu_composed, 2.0, rtol=1e-12)
    assert est.privacy_.certified
    np.testing.assert_allclose(est.estimation_mu_, 2.0 * math.sqrt(0.9))
    text = str(s)
    for word in ("family " + family, "mu spent 2", "10% of mu^2", "guarantee", "noise secret: True",
                 "clipping bias not accounted"):
        assert word in text, word


def test_a_noise_dominated_curvature_is_said():
    """4 clients of 30 rows at mu = 1 (B = sqrt(3)): the released H's noise (summed sd 38
    per entry, floor 2 sd sqrt(3) = 131) exceeds the data's curvature (about 120 x 0.2 per
    direction), every eigenvalue is floored and the header says se_sampling understates; on
    4 clients of 300 rows at mu = 5 (eigenvalues 213-287, floor 26) none is."""
    for n, mu, floored in ((120, 1.0, True), (1200, 5.0, False)):
        X, y, clients = _data("logistic", n=n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = FederatedGLM(mu=mu, classes=[0, 1], random_state=0).fit(X, y, clients)
        low, D, floor = inference.floored_directions(est.inference_)
        assert D == 3 and floor > 0 and (low == 3 if floored else low == 0), (n, mu, low, floor)
        assert ("curvature noise-dominated in 3 of 3 directions" in str(est.summary())) == floored


def test_share_zero_spends_nothing_and_says_so():
    X, y, clients = _data("logistic")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = FederatedGLM(mu=2.0, classes=[0, 1], inference_share=0).fit(X, y, clients)
    assert not any(r.stage in inference.STAGES for r in est.privacy_.ledger.releases)
    assert est.estimation_mu_ == 2.0
    s = est.summary()
    assert est.inference_.source == "public curvature model" and "ignores the data's own curvature" in str(s)


@pytest.mark.parametrize("bad", [1.0, -0.1, True, "a"])
def test_share_refused(bad):
    X, y, clients = _data("logistic")
    with pytest.raises((ValueError, TypeError), match="inference_share"):
        FederatedGLM(mu=2.0, classes=[0, 1], inference_share=bad).fit(X, y, clients)


def test_bad_cov_type_and_alpha():
    X, y, clients = _data("logistic")
    est = _mle("logistic", X, y, classes=[0, 1])
    with pytest.raises(ValueError, match="cov_type"):
        est.summary(cov_type="HC3")
    with pytest.raises(ValueError, match="alpha"):
        est.conf_int(alpha=1.5)


def test_sensitivity_bounds_hold():
    """The recorded sensitivities bound the change of a client's (noiseless) moments when one
    record is replaced by an adversarial one (huge features, a wrong label)."""
    from fedgdp.core.glm import matrix_model

    rng = np.random.default_rng(1)
    for model, B in ((matrix_model("binary"), 2.0), (matrix_model("multiclass", 3), 1.5)):
        k = model.k
        X = np.column_stack([np.ones(50), rng.normal(size=(50, 2))])
        Y = model.targets(rng.integers(0, max(k, 2), size=50))
        theta = rng.normal(size=(3, k))
        S, H = moments.client_moments(model, theta, X, Y, B)
        X2, Y2 = X.copy(), Y.copy()
        X2[0] = [1.0, 1e3, -1e3]
        Y2[0] = 1.0 - Y2[0] if k == 1 else np.roll(Y2[0], 1)
        S2, H2 = moments.client_moments(model, theta, X2, Y2, B)
        sens = [float(np.ravel(spec.sensitivity)[0]) for spec in moments.release_plan(B, k)]
        assert np.linalg.norm(S - S2) <= sens[0] and np.linalg.norm(H - H2) <= sens[1]


def test_fit_command_prints_and_json_carries_the_summary(tmp_path, capsys):
    import json

    import pandas as pd

    from fedgdp.commands.cli import main

    X, y, clients = _data("logistic")
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "y": y, "c": clients}).to_csv(tmp_path / "d.csv", index=False)
    argv = ["fit", str(tmp_path / "d.csv"), "--target", "y", "--client", "c", "--classes", "0,1", "--seed", "3"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "FederatedGLM summary: family logistic" in out and "se_sampling" in out and "10% of mu^2" in out
    assert main(argv + ["--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    rows = rep["summary"]["rows"]
    assert [r["term"] for r in rows] == ["(intercept)", "a", "b"] and set(COLUMNS) <= set(rows[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = FederatedGLM(mu=2.0, classes=[0, 1], random_state=3).fit(
            pd.read_csv(tmp_path / "d.csv")[["a", "b"]], y, clients)
    np.testing.assert_allclose([r["se"] for r in rows], est.summary()["se"], rtol=1e-12)
    assert any(r["stage"] == inference.STAGES[0] for r in rep["privacy"]["releases"])


def test_covariance_reads_the_settings_dict_form_as_the_typed_settings():
    """An estimator pickled before its settings were typed holds them as a dict: FedNewton's covariance (which
    reads ``tau1``, the privacy mode and the method's ridge) is the same from either form, bit for bit."""
    from fedgdp import FederatedGLM

    rng = np.random.default_rng(5)
    X = rng.standard_normal((600, 3))
    y = (rng.random(600) < 1 / (1 + np.exp(-X @ [1.0, -0.5, 0.3]))).astype(int)
    est = FederatedGLM(method="fednewton", mu=np.inf, tau1=2.0, privacy_mode="certified", classes=[0, 1])
    est.fit(X, y, clients=np.repeat(np.arange(4), 150))
    typed = inference.covariance(est.inference_, method=est.method_, settings=est.settings_)
    as_dict = inference.covariance(est.inference_, method=est.method_, settings=est.settings_.as_dict())
    np.testing.assert_array_equal(as_dict, typed)
    plain = inference.covariance(est.inference_, method=est.method_, settings=None)      # tau1 0.5, not certified
    assert not np.array_equal(plain, typed)                   # the settings matter here, so the check can fail
