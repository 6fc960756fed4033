"""Statistical check of the estimators against the pooled MLE (Monte Carlo tolerance)."""
import numpy as np
import pytest
import statsmodels.api as sm

from fedgdp.simulation.params import resolve
from fedgdp.simulation.run import run_cell, simulate_block


@pytest.mark.slow
def test_nonprivate_fedsgd_mse_matches_pooled_mle():
    """Logistic, m = 50, equal(100), mu = inf, 400 replicates.

    FedSGD's empirical MSE must lie within Monte Carlo error of the pooled MLE's:
    |MSE_fedsgd - MSE_mle| < 3 * sqrt(SE_fedsgd^2 + SE_mle^2) (unpaired, a 3-sigma
    band, about 0.001 here on MSEs near 0.0073). K = 300 so that gradient descent has
    converged (the contraction per step is about 1 - eta * tau1 ~ 0.95; at the paper's
    K = 50 FedSGD is still 2.5 times the MLE's MSE because it stops early).
    """
    p = resolve(dict(model="logistic", sizes="equal(100)", m=50, mu="inf", K=300, methods=["fedsgd"]))
    seeds = list(range(400))
    fedsgd = np.array([r["sq_error"] for r in run_cell(p, seeds)])
    beta = np.array(p.beta_true)
    mle = np.array([np.sum((sm.GLM(r.y, r.X, family=sm.families.Binomial()).fit().params - beta) ** 2)
                    for r in simulate_block(p, seeds)])
    se = np.sqrt(fedsgd.var(ddof=1) / fedsgd.size + mle.var(ddof=1) / mle.size)
    assert abs(fedsgd.mean() - mle.mean()) < 3 * se
    assert 0.004 < mle.mean() < 0.012     # the MLE's MSE ~ trace(I^-1)/N; a sanity range
