"""Every family with a parameter matrix theta (d, k) (logistic, Poisson, softmax): derivatives against finite
differences, the dense Hessian against Hessian-vector products, cheap clipping."""
import numpy as np
import pytest

from fedgdp.core.glm import BINARY_LOGISTIC, LOGISTIC, POISSON, Multinomial, matrix_model
from fedgdp.core.privacy import clip_rows
from fedgdp.realdata import clipped_gradient

MODELS = [BINARY_LOGISTIC, POISSON, Multinomial(3), Multinomial(10)]   # theta (d, k), k = 1, 1, 3, 10


def _data(model, n=40, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = np.hstack([np.ones((n, 1)), rng.random((n, d - 1))])
    labels = rng.integers(0, max(2, model.k), n)
    return rng, X, model.targets(labels), labels


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"{m.name}-{m.k}")
def test_gradient_matches_finite_differences(model):
    rng, X, Y, _ = _data(model)
    T = rng.normal(size=(X.shape[1], model.k))
    eps = 1e-6
    fd = np.zeros_like(T)
    for idx in np.ndindex(T.shape):
        E = np.zeros_like(T)
        E[idx] = eps
        fd[idx] = (model.loss(T + E, X, Y) - model.loss(T - E, X, Y)) / (2 * eps)
    assert np.allclose(model.gradient(T, X, Y), fd, atol=1e-8)
    assert np.allclose(model.per_sample_gradients(T, X, Y).mean(axis=0), model.gradient(T, X, Y), atol=1e-14)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"{m.name}-{m.k}")
def test_hvp_matches_finite_differences_and_dense_hessian(model):
    rng, X, Y, _ = _data(model, seed=1)
    T = rng.normal(size=(X.shape[1], model.k))
    V = rng.normal(size=T.shape)
    eps = 1e-6
    fd = (model.gradient(T + eps * V, X, Y) - model.gradient(T - eps * V, X, Y)) / (2 * eps)
    hv = model.hvp(T, X, V)
    assert np.allclose(hv, fd, atol=1e-8)
    H = model.hessian(T, X)
    assert H.shape == (T.size, T.size)
    assert np.allclose(H, H.T, atol=1e-14)
    assert np.allclose(H @ V.ravel(), hv.ravel(), atol=1e-13)
    assert np.linalg.eigvalsh(H).min() > -1e-12


def test_softmax_is_stable_for_huge_scores_and_rows_sum_to_one():
    model = Multinomial(4)
    X = np.array([[1.0, 500.0], [1.0, -800.0]])
    T = np.array([[0.0, 1.0, 2.0, 3.0], [3.0, 2.0, 1.0, 0.0]])
    P = model.predict(T, X)
    assert np.all(np.isfinite(P)) and np.allclose(P.sum(axis=1), 1.0)
    assert np.isfinite(model.loss(T, X, model.targets([0, 3])))


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"{m.name}-{m.k}")
def test_clipping_by_residual_norm_equals_clipping_each_per_sample_gradient(model):
    rng, X, Y, _ = _data(model, n=60, seed=3)
    T = rng.normal(size=(X.shape[1], model.k))
    G = model.per_sample_gradients(T, X, Y).reshape(X.shape[0], -1)
    norms = np.linalg.norm(G, axis=1)
    assert np.allclose(norms, np.linalg.norm(X, axis=1) * np.linalg.norm(model.residuals(T, X, Y), axis=1))
    B = float(np.median(norms))
    expected = clip_rows(G, B).mean(axis=0).reshape(T.shape)
    assert np.allclose(clipped_gradient(model, T, X, Y, B), expected, atol=1e-14)
    assert np.allclose(clipped_gradient(model, T, X, Y, np.inf), model.gradient(T, X, Y))


def test_targets_and_model_lookup_errors():
    assert matrix_model("binary") is BINARY_LOGISTIC is LOGISTIC and matrix_model("multiclass").k == 10
    with pytest.raises(ValueError, match="unknown task 'ternary'"):
        matrix_model("ternary")
    with pytest.raises(ValueError, match=r"labels must lie in 0\.\.2"):
        Multinomial(3).targets([0, 3])
    with pytest.raises(ValueError, match="n_classes must be >= 2"):
        Multinomial(1)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"{m.name}-{m.k}")
def test_fused_loss_gradient_equals_the_separate_calls(model):
    """One product X Theta for loss, gradient and P: the same arithmetic, so equal to
    rounding (1e-14 relative), and hvp_at(P) equals hvp."""
    rng, X, Y, _ = _data(model, seed=2)
    T = rng.normal(size=(X.shape[1], model.k)) * 3
    value, grad, P = model.loss_gradient(T, X, Y)
    assert value == pytest.approx(model.loss(T, X, Y), rel=1e-14)
    assert np.allclose(grad, model.gradient(T, X, Y), rtol=1e-14, atol=1e-16)
    assert np.allclose(P, model.predict(T, X), rtol=1e-14, atol=1e-16)
    V = rng.normal(size=T.shape)
    assert np.allclose(model.hvp_at(P, X, V), model.hvp(T, X, V), rtol=1e-14, atol=1e-16)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: f"{m.name}-{m.k}")
def test_row_blocks_reassociate_only(model, monkeypatch):
    """Above ROW_BLOCK_MIN rows, loss_gradient and hvp_at sum over blocks of rows: equal
    to the one-block result to 1e-12 relative (summation order only)."""
    from fedgdp.core import glm

    rng, X, Y, _ = _data(model, n=300, seed=4)
    T, V = rng.normal(size=(X.shape[1], model.k)), rng.normal(size=(X.shape[1], model.k))
    scale = rng.random(X.shape[0])
    value, grad, P = model.loss_gradient(T, X, Y)
    hv = model.hvp_at(P, X, V, scale)
    monkeypatch.setattr(glm, "ROW_BLOCK", 64)
    monkeypatch.setattr(glm, "ROW_BLOCK_MIN", 100)
    value_b, grad_b, P_b = model.loss_gradient(T, X, Y)
    assert value_b == pytest.approx(value, rel=1e-12)
    assert np.allclose(grad_b, grad, rtol=1e-12, atol=1e-15) and np.allclose(P_b, P, rtol=1e-13, atol=1e-16)
    assert np.allclose(model.hvp_at(P, X, V, scale), hv, rtol=1e-12, atol=1e-15)
