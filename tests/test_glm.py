"""Analytic derivatives of the GLM losses against central finite differences."""
import numpy as np
import pytest

from fedgdp.glm import MODELS, get_model, population_hessian, population_min_eigenvalue


def _data(rng, shape=(3, 40, 4)):
    X = rng.standard_normal(shape)
    X[..., 0] = 1.0
    return X


@pytest.mark.parametrize("name", sorted(MODELS))
def test_gradient_matches_finite_differences(name):
    rng = np.random.default_rng(1)
    glm = get_model(name)
    X = _data(rng)
    theta = 0.3 * rng.standard_normal((3, 4))
    y = glm.sample(rng, np.einsum("rnd,rd->rn", X, theta))
    g = glm.gradient(theta, X, y)
    h = 1e-6
    for k in range(4):
        e = np.zeros(4)
        e[k] = h
        fd = (glm.loss(theta + e, X, y) - glm.loss(theta - e, X, y)) / (2 * h)
        # central differences are O(h^2) ~ 1e-12 accurate; rounding ~ 1e-16/h ~ 1e-10
        np.testing.assert_allclose(g[:, k], fd, rtol=0, atol=1e-8)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_hessian_matches_finite_differences_of_gradient(name):
    rng = np.random.default_rng(2)
    glm = get_model(name)
    X = _data(rng)
    theta = 0.3 * rng.standard_normal((3, 4))
    y = glm.sample(rng, np.einsum("rnd,rd->rn", X, theta))
    H = glm.hessian(theta, X)
    h = 1e-6
    for k in range(4):
        e = np.zeros(4)
        e[k] = h
        fd = (glm.gradient(theta + e, X, y) - glm.gradient(theta - e, X, y)) / (2 * h)
        np.testing.assert_allclose(H[:, :, k], fd, rtol=0, atol=1e-8)
    np.testing.assert_allclose(H, np.swapaxes(H, -1, -2), atol=1e-15)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_kernel_reproduces_the_residual(name):
    """The scaled fast-kernel arithmetic equals resid_scale * (b'(eta) - y)."""
    glm = get_model(name)
    rng = np.random.default_rng(3)
    eta = rng.normal(0, 2, 50)
    y = glm.sample(rng, eta)
    k = glm.kernel
    s = k.inv_inplace(k.theta_scale * eta.copy()) - k.y_transform(y)
    np.testing.assert_allclose(s, k.resid_scale * (glm.mean(eta) - y), rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("name,beta", [("logistic", [0.5, -0.5, 1.0, -1.0, 0.5]),
                                       ("poisson", [0.5, 0.3, -0.3, 0.2, -0.2]),
                                       ("logistic", [0.2, 0.0, 0.0])])
def test_population_hessian_matches_monte_carlo(name, beta):
    """Quadrature vs 2e6 Monte Carlo draws: entries agree to 5 MC standard errors."""
    rng = np.random.default_rng(11)
    n = 2_000_000
    X = np.empty((n, len(beta)))
    X[:, 0] = 1.0
    X[:, 1:] = 1.3 * rng.standard_normal((n, len(beta) - 1))
    v = get_model(name).variance(X @ np.array(beta))
    mc = (X * v[:, None]).T @ X / n
    # clamp at 0: a constant weight (zero slopes) has variance 0, which rounding can make -1e-17
    se = np.sqrt(np.maximum(((X * v[:, None]) ** 2).T @ (X ** 2) / n - mc ** 2, 0.0)) / np.sqrt(n)
    H = population_hessian(name, beta, 1.3)
    assert np.all(np.abs(H - mc) < 5 * se + 1e-12)
    lam = population_min_eigenvalue(name, beta, 1.3)
    assert lam == pytest.approx(np.linalg.eigvalsh(mc)[0], rel=0.01) and lam > 0


def test_unknown_model_is_named():
    with pytest.raises(ValueError, match="'probit'"):
        get_model("probit")
