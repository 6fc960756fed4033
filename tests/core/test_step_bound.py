"""The gradient methods refuse, from public inputs only, a private fit whose iterates
could overflow (docs/methods.md §2, "No refusal depends on a record"), before any step
and alike on a data set and a neighbour (before this, eta = 1e300 ended inside the fit in
an internal OverflowError, after the data were read)."""
import numpy as np
import pytest

from fedgdp import FederatedGLM


def _data(seed=0, big=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] + rng.logistic(size=120) > 0).astype(int)
    if big:
        X[0] = 1e150                                  # a neighbour: one record replaced by a huge one
    return X, y, np.repeat(np.arange(4), 30)


@pytest.mark.parametrize("method,settings", [
    ("fedsgd", {"eta": 1e300}), ("fedavg", {"eta": 1e300}),
    ("fedhybrid", {"eta1": 1e300, "eta2": 1e300}), ("dp_scaffold", {"eta": 1e300}),
])
def test_a_huge_step_is_refused_on_every_data_set_alike(method, settings):
    for big in (False, True):
        X, y, cl = _data(big=big)
        est = FederatedGLM(method=method, mu=2, clip=1.0, classes=[0, 1], method_settings=settings,
                           random_state=0)
        with pytest.raises(ValueError, match=f"method {method}: a release could reach"):
            est.fit(X, y, cl)


@pytest.mark.parametrize("method", ["fedsgd", "fedavg", "fedhybrid", "dp_scaffold"])
def test_default_steps_release_on_data_and_neighbour(method):
    for big in (False, True):
        X, y, cl = _data(big=big)
        est = FederatedGLM(method=method, mu=2, clip=1.0, classes=[0, 1], random_state=0).fit(X, y, cl)
        assert np.all(np.isfinite(est.coef_))


def test_the_overflow_bound_is_one_function():
    """`privacy.iterate_bound`, which both the gradient methods' and FedNewton's refusals
    call: noise on the iterate ``K (eta B + z sd)``, on the gradient ``K eta (B + z sd)``."""
    from fedgdp.core.privacy import NOISE_BOUND, iterate_bound

    z = NOISE_BOUND
    assert iterate_bound(5, 0.5, 2.0, 0.25) == 5 * (0.5 * 2.0 + z * 0.25)
    assert iterate_bound(5, 0.5, 2.0, 0.25, on_gradient=True) == 5 * 0.5 * (2.0 + z * 0.25)
    np.testing.assert_array_equal(iterate_bound(3, 0.1, np.array([1.0, 2.0]), np.array([0.5, 0.5])),
                                  3 * (0.1 * np.array([1.0, 2.0]) + z * 0.5))
