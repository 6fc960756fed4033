"""Analytic derivatives of the GLM losses against central finite differences."""
import numpy as np
import pytest

from fedgdp.core.glm import MODELS, get_model, population_hessian, population_min_eigenvalue


def _data(rng, n=40, d=4):
    X = rng.standard_normal((n, d))
    X[:, 0] = 1.0
    return X


def _central_differences(f, theta, h=1e-6):
    """``(f(theta + h e_k) - f(theta - h e_k)) / 2h`` for every coordinate k, stacked."""
    return np.stack([(f(theta + e) - f(theta - e)) / (2 * h) for e in h * np.eye(theta.shape[0])])


@pytest.mark.parametrize("name", sorted(MODELS))
def test_gradient_matches_finite_differences(name):
    rng = np.random.default_rng(1)
    glm = get_model(name)
    X = _data(rng)
    theta = 0.3 * rng.standard_normal(4)
    y = glm.sample(rng, X @ theta)
    g = glm.gradient(theta, X, y)
    assert g.shape == (4,)
    fd = _central_differences(lambda t: glm.loss(t, X, y), theta)
    # central differences are O(h^2) ~ 1e-12 accurate; rounding ~ 1e-16/h ~ 1e-10
    np.testing.assert_allclose(g, fd, rtol=0, atol=1e-8)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_hessian_matches_finite_differences_of_gradient(name):
    rng = np.random.default_rng(2)
    glm = get_model(name)
    X = _data(rng)
    theta = 0.3 * rng.standard_normal(4)
    y = glm.sample(rng, X @ theta)
    H = glm.hessian(theta, X)
    assert H.shape == (4, 4)
    fd = _central_differences(lambda t: glm.gradient(t, X, y), theta)    # row k: d gradient / d theta_k
    np.testing.assert_allclose(H, fd.T, rtol=0, atol=1e-8)
    np.testing.assert_allclose(H, H.T, atol=1e-15)
    np.testing.assert_allclose(H, (X * glm.variance(X @ theta)[:, None]).T @ X / 40, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_vector_theta_is_the_one_column_matrix(name):
    """theta (d,) with y (n,) computes exactly what theta (d, 1) with Y (n, 1) does;
    only the output axis is dropped."""
    rng = np.random.default_rng(3)
    glm = get_model(name)
    X = _data(rng, n=30, d=5)
    theta, v = 0.3 * rng.standard_normal(5), rng.standard_normal(5)
    y = glm.sample(rng, X @ theta)
    T, V, Y = theta[:, None], v[:, None], glm.targets(y)
    assert Y.shape == (30, 1) and glm.k == 1
    value, grad, P = glm.loss_gradient(theta, X, y)
    value_c, grad_c, P_c = glm.loss_gradient(T, X, Y)
    assert value == value_c and grad.shape == (5,) and P.shape == (30,)
    np.testing.assert_array_equal(grad, grad_c[:, 0])
    np.testing.assert_array_equal(P, P_c[:, 0])
    np.testing.assert_array_equal(glm.residuals(theta, X, y), glm.residuals(T, X, Y)[:, 0])
    G = glm.per_sample_gradients(theta, X, y)
    assert G.shape == (30, 5)
    np.testing.assert_array_equal(G, glm.per_sample_gradients(T, X, Y)[:, :, 0])
    np.testing.assert_array_equal(glm.hessian(theta, X), glm.hessian(T, X))
    np.testing.assert_array_equal(glm.hvp(theta, X, v), glm.hvp(T, X, V)[:, 0])
    np.testing.assert_allclose(glm.hvp(theta, X, v), glm.hessian(theta, X) @ v, rtol=1e-13, atol=1e-15)


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
