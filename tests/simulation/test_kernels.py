"""The compiled kernels (fedgdp.simulation.kernels) against plain numpy, and their fallbacks."""
import os
import subprocess
import sys

import numpy as np
import pytest

from fedgdp.core import privacy
from fedgdp.core.glm import get_model
from fedgdp.simulation import kernels
from fedgdp.simulation.backend import ClientBlock
from fedgdp.simulation.data import Replicate

# Client sizes around the chunk length (CHUNK = 256) and tiny ones, so chunks that
# span several clients, clients that span several chunks and one-row clients occur.
SIZES = np.array([[1, 3, 255, 256, 257, 40, 600, 2], [7, 300, 1, 512, 9, 250, 5, 60]])


def _block(model: str, seed: int = 0) -> tuple[list[Replicate], ClientBlock]:
    rng = np.random.default_rng(seed)
    glm = get_model(model)
    reps = []
    for sizes in SIZES:
        N = int(sizes.sum())
        X = np.column_stack([np.ones(N), rng.normal(size=(N, 4))])
        reps.append(Replicate(X, glm.sample(rng, X @ np.array([0.3, 0.5, -0.5, 0.2, 0.1])), sizes))
    return reps, ClientBlock(reps, glm)


def _loop_gradients(glm, reps, theta, B):
    """Mean clipped per-sample gradient, client by client (privacy.clip_rows)."""
    out = np.empty_like(theta)
    for r, rep in enumerate(reps):
        for i in range(rep.sizes.shape[0]):
            X, y = rep.client(i)
            out[r, i] = privacy.clip_rows(glm.per_sample_gradients(theta[r, i], X, y), B[r]).mean(axis=0)
    return out


@pytest.mark.parametrize("model", ["logistic", "poisson"])
@pytest.mark.parametrize("private", [True, False])
def test_gradients_equal_the_clipped_loop(model, private):
    reps, data = _block(model)
    theta = np.random.default_rng(1).normal(scale=0.4, size=(data.n_rep, data.m, data.d))
    B = np.array([0.8, 1.7]) if private else np.full(2, np.inf)
    fast = data.gradients(theta, data.clip_bounds(B) if private else None)
    np.testing.assert_allclose(fast, _loop_gradients(data.glm, reps, theta, B), rtol=0, atol=1e-13)


@pytest.mark.parametrize("model", ["logistic", "poisson"])
def test_local_and_server_steps_equal_repeated_gradients(model):
    """The fused K-step kernels equal K calls of the one-step kernel plus the noise
    (local: Algorithms 2-4; server: Algorithms 1-2), for groups of many small clients."""
    reps, data = _block(model, seed=2)
    rng = np.random.default_rng(3)
    K, eta = 4, 0.3
    bounds = data.clip_bounds(np.array([0.9, 1.1]))
    sigma = rng.uniform(0.01, 0.1, size=(data.n_rep, data.m))
    Z = rng.normal(size=(data.n_rep, K, data.m, data.d))
    w = rng.dirichlet(np.ones(data.m), size=data.n_rep)
    theta = np.zeros((data.n_rep, data.m, data.d))
    for t in range(K):
        theta = theta - eta * data.gradients(theta, bounds) + sigma[..., None] * Z[:, t]
    local = data.local_steps(np.zeros_like(theta), K=K, eta=eta, bounds=bounds, sigma=sigma, Z=Z)
    np.testing.assert_allclose(local, theta, rtol=0, atol=1e-12)
    glob = np.zeros((data.n_rep, data.d))
    for t in range(K):
        g = data.gradients(np.repeat(glob[:, None], data.m, axis=1), bounds) + sigma[..., None] * Z[:, t]
        glob = glob - eta * np.einsum("rm,rmd->rd", w, g)
    server = data.server_steps(np.zeros((data.n_rep, data.d)), w, K=K, eta=eta, bounds=bounds, sigma=sigma, Z=Z)
    np.testing.assert_allclose(server, glob, rtol=0, atol=1e-12)


def test_group_size_does_not_change_the_numbers_beyond_rounding():
    """Groups of one client and groups of many give the same local steps (1e-12)."""
    reps, data = _block("logistic", seed=4)
    bounds = data.clip_bounds(np.array([1.0, 1.0]))
    theta0 = np.zeros((data.C, data.d))
    out = []
    for max_rows in (1, 64, 100_000):
        th = theta0.copy()
        kernels.local_descent(data.XT, data.y, bounds, data.offsets, kernels.client_groups(data.sizes, max_rows),
                              data.m, th, 5, 0.5, data.model, True, np.zeros(data.C), np.zeros((0, 0, 0, 0)), False)
        out.append(th)
    np.testing.assert_allclose(out[1], out[0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(out[2], out[0], rtol=0, atol=1e-12)


def test_the_kernel_codes_are_the_families_own():
    """The kernels' model codes are declared by the families (`Family.kernel`); softmax has none."""
    from fedgdp.core.families import FAMILIES

    assert kernels.MODEL_CODES == {"logistic": 0, "poisson": 1} == {
        name: f.kernel for name, f in FAMILIES.items() if f.kernel is not None}
    assert kernels.LOGISTIC == FAMILIES["logistic"].kernel and FAMILIES["multinomial"].kernel is None


def test_client_groups_depend_only_on_the_replicates_own_sizes():
    both = kernels.client_groups(SIZES, 300)
    first = kernels.client_groups(SIZES[:1], 300)
    second = kernels.client_groups(SIZES[1:], 300)
    np.testing.assert_array_equal(both, np.concatenate([first, second[1:] + SIZES.shape[1]]))
    assert first.tolist() == [0, 3, 4, 6, 7, 8]     # cut where the next client would pass 300 rows


@pytest.mark.parametrize("model", ["logistic", "poisson"])
@pytest.mark.parametrize("bound", [None, 0.05])
def test_hessians_equal_the_glm(model, bound):
    reps, data = _block(model, seed=5)
    theta = np.random.default_rng(6).normal(scale=0.3, size=(data.n_rep, data.m, data.d))
    H = data.hessians(theta, bound)
    glm = data.glm
    for r, rep in enumerate(reps):
        for i in range(data.m):
            X, _ = rep.client(i)
            if bound is None:
                v = glm.variance(X @ theta[r, i])
                ref = (X * v[:, None]).T @ X / X.shape[0]
            else:               # the compiled port of the one reference Hessian clip
                aX, P = glm.clipped_hessian_rows(theta[r, i], X, bound)
                ref = glm.hessian(theta[r, i], aX, P=P)
            np.testing.assert_allclose(H[r, i], ref, rtol=0, atol=1e-13)
    if bound is None:
        X, _ = reps[0].client(6)
        np.testing.assert_allclose(H[0, 6], glm.hessian(theta[0, 6], X), rtol=0, atol=1e-13)


def test_exp_is_the_libm_exp():
    """Within 4 ulp where the result is normal; specials and the overflow and
    underflow limits as numpy's exp (subnormal results within 1e-300)."""
    x = np.concatenate([np.linspace(-760, 720, 300_001), np.random.default_rng(7).normal(scale=3, size=10_000),
                        [0.0, -0.0, 709.78, 709.79, -745.2, -708.4, np.inf, -np.inf, np.nan]])
    got = np.array([kernels._exp(v) for v in x])
    with np.errstate(over="ignore", under="ignore"):
        ref = np.exp(x)
    normal = np.isfinite(ref) & (ref >= np.finfo(float).tiny)
    assert np.max(np.abs(got[normal] / ref[normal] - 1)) < 4 * np.finfo(float).eps
    tiny = np.isfinite(ref) & ~normal
    assert np.all(np.abs(got[tiny] - ref[tiny]) < 1e-300)
    np.testing.assert_array_equal(got[~np.isfinite(ref)], ref[~np.isfinite(ref)])


def test_diverged_parameters_stay_nan_and_clipped_nan_gradients_are_zero():
    """Unclipped: a NaN parameter gives a NaN gradient (a diverged run stays NaN).
    Clipped: its per-sample gradients are not finite, so the rule clips them to zero
    (docs/methods.md §2, "Finite arithmetic"); the other clients are untouched."""
    _, data = _block("logistic")
    theta = np.zeros((data.n_rep, data.m, data.d))
    theta[1, 2, 0] = np.nan
    others = lambda g: np.delete(g.reshape(-1, data.d), data.m + 2, axis=0)     # noqa: E731
    g = data.gradients(theta, None)
    assert np.isnan(g[1, 2]).all() and np.isfinite(others(g)).all()
    g = data.gradients(theta, data.clip_bounds(np.array([1.0, 1.0])))
    assert (g[1, 2] == 0).all() and np.isfinite(others(g)).all()


@pytest.mark.slow
def test_kernels_compile_where_no_cache_location_is_writable(tmp_path):
    """With no usable cache locator numba refuses cache=True; the kernels then
    compile in the process instead of failing (a fresh compile of every kernel: slow)."""
    code = ("import numpy as np; from fedgdp.simulation import kernels; "
            "from fedgdp.simulation.backend import ClientBlock; from fedgdp.core.glm import LOGISTIC; "
            "from fedgdp.simulation.data import Replicate; "
            "X = np.ones((4, 2)); "
            "d = ClientBlock([Replicate(X, np.array([0., 1, 1, 0]), np.array([2, 2]))], LOGISTIC); "
            "print(type(kernels.gradients._cache).__name__, d.gradients(np.zeros((1, 2, 2)), None)[0, 0, 0])")
    env = dict(os.environ, NUMBA_CACHE_LOCATOR_CLASSES="ZipCacheLocator")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["NullCache", "0.0"]
    assert "NUMBA_CACHE_DIR" in out.stderr        # one warning saying what to do


def test_kernels_do_not_import_scipy_linalg():
    """numba would import scipy.linalg for a BLAS check (about 0.15 CPU-s a process)."""
    code = "import sys; import fedgdp.simulation.kernels; print('scipy.linalg' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
