"""The non-private baselines say what they are: NP-Pooled is a ridge fit (ridge 1e-3 on
the coefficients), and ridge 0 is the MLE, checked against statsmodels' GLM on
statsmodels' own data."""
import math

import numpy as np
import pytest

from fedgdp import FederatedGLM

sm = pytest.importorskip("statsmodels.api")


@pytest.mark.parametrize("name,family", [("spector", "logistic"), ("randhie", "poisson")])
def test_ridge_zero_is_statsmodels_mle(name, family):
    data = getattr(sm.datasets, name).load_pandas()
    X, y = data.exog.to_numpy(float), data.endog.to_numpy(float)
    fam = sm.families.Binomial() if family == "logistic" else sm.families.Poisson()
    want = sm.GLM(y, sm.add_constant(X), family=fam).fit().params        # IRLS to its default tolerance 1e-8
    est = FederatedGLM(family=family, method="np_pooled", mu=math.inf, method_settings={"ridge": 0})
    est.fit(X, y, clients="single")
    got = np.concatenate([np.ravel(est.intercept_), np.ravel(est.coef_)])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)     # both solvers stop at gradient norms ~1e-8
    assert est.fit_info_["ridge"] == 0 and est.fit_info_["status"] == "converged"


def test_default_ridge_is_reported_and_shrinks():
    """The default ridge 1e-3 is not the MLE: on spector it moves the intercept by about 0.5."""
    data = sm.datasets.spector.load_pandas()
    X, y = data.exog.to_numpy(float), data.endog.to_numpy(float)
    mle = FederatedGLM(method="np_pooled", mu=math.inf, method_settings={"ridge": 0}).fit(X, y, "single")
    ridge = FederatedGLM(method="np_pooled", mu=math.inf).fit(X, y, "single")
    assert ridge.fit_info_["ridge"] == 1e-3 and "ridge 0.001" in ridge.fit_info_["objective"]
    assert abs(float(ridge.intercept_[0] - mle.intercept_[0])) > 0.3
