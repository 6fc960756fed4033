"""The GLM clip margin (fedgdp.core.privacy.clip_margin, docs/methods.md §2 "The clip
margin"): every *computed* clipped per-sample gradient has norm <= B exactly, in the
core rule (clip_rows), the real-data clipping of matrix models and the simulations'
compiled port; and the port clips where the core rule does."""
import numpy as np
import pytest

from fedgdp.core import privacy
from fedgdp.core.glm import get_model
from fedgdp.realdata.clipping import clip_residuals
from fedgdp.simulation.backend import ClientBlock
from fedgdp.simulation.data import Replicate


def _rows(d: int, n: int, seed: int) -> np.ndarray:
    """Rows of norms spread over 1e-3 .. 1e6 (and many just above 1) in random directions."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((n, d))
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    scale = np.concatenate([np.exp(rng.uniform(np.log(1e-3), np.log(1e6), n // 2)),
                            1.0 + rng.uniform(0, 1e-12, n - n // 2)])
    return U * scale[:, None]


def _exact_norms(G: np.ndarray) -> np.ndarray:
    """Norms in long double where it is wider than float64 (x86), else float64 sums of
    exact float64 squares' rounding: the check below is then a little weaker."""
    Gl = G.astype(np.longdouble)
    return np.sqrt((Gl * Gl).sum(axis=1))


def test_margin_formula():
    assert privacy.clip_margin(5) == 21 * 2.0 ** -53
    assert privacy.clip_scale(2.0, 5) == (1 - 21 * 2.0 ** -53) * 2.0
    assert privacy.clip_scale(np.inf, 5) == np.inf


@pytest.mark.parametrize("d", [1, 2, 5, 64, 785])
@pytest.mark.parametrize("B", [1.0, 0.1, 3e-7, 7.3e4])
def test_core_rule_never_exceeds_the_bound(d, B):
    G = _rows(d, 4000, seed=d) * B
    C = privacy.clip_rows(G, B)
    assert np.all(_exact_norms(C) <= B)
    assert np.all(privacy.row_norms(C) <= B)
    # the margin is small: clipped rows lie within kappa + rounding of B
    clipped = privacy.row_norms(G) > B
    assert np.all(privacy.row_norms(C[clipped]) >= B * (1 - 2 * privacy.clip_margin(d)))


@pytest.mark.parametrize("k", [1, 10])
def test_realdata_matrix_clip_never_exceeds_the_bound(k):
    rng = np.random.default_rng(k)
    d, n, B = 30, 3000, 0.7
    X = _rows(d, n, seed=3)
    Res = rng.standard_normal((n, k)) * np.exp(rng.uniform(-3, 6, (n, 1)))
    clip_residuals(Res, privacy.row_norms(X), B, d)
    G = np.einsum("nd,nk->ndk", X, Res).reshape(n, d * k)      # the per-sample gradients x_j r_j'
    assert np.all(_exact_norms(G) <= B)


@pytest.mark.parametrize("model", ["logistic", "poisson"])
def test_compiled_port_never_exceeds_the_bound_and_matches_the_core_rule(model):
    """One-row clients: a client's mean clipped gradient is its one clipped per-sample
    gradient, as the compiled kernel computes it (residual clipped to clip_scale(B, d)/||x||)."""
    glm = get_model(model)
    rng = np.random.default_rng(7)
    n, d, B = 2000, 5, 0.5
    X = _rows(d, n, seed=11) * 40.0
    y = glm.sample(rng, np.clip(X @ np.full(d, 0.1), -5, 3))
    rep = Replicate(X, y, np.ones(n, dtype=int))
    block = ClientBlock([rep], glm)
    theta = np.zeros((1, n, d))
    fast = block.gradients(theta, block.clip_bounds(np.array([B])))[0]
    assert np.all(_exact_norms(fast) <= B)
    ref = np.stack([privacy.clip_rows(glm.per_sample_gradients(theta[0, j], X[j:j + 1], y[j:j + 1]), B)[0]
                    for j in range(n)])
    np.testing.assert_allclose(fast, ref, rtol=1e-13, atol=1e-300)     # the same rule, rounded apart
