"""Finite arithmetic (docs/methods.md §2, "Finite arithmetic"): no finite input gives a
private release that is not finite, in the simulation and the real-data backends; a
data file that is not finite is refused at load, naming the file and the row."""
import numpy as np
import pytest

from fedgdp.common.datasets import check_finite
from fedgdp.core.privacy import clip_rows, row_norms

BIG = np.finfo(float).max


def _huge_rows(X, rng):
    """Rows of extreme but finite entries: float max with both signs (x'theta is inf - inf
    = NaN in the linear predictor), float max in one coordinate, 1e200 everywhere."""
    X = X.copy()
    d = X.shape[1]
    X[0] = BIG * np.where(np.arange(d) % 2 == 0, 1.0, -1.0)
    X[1] = 0.0
    X[1, -1] = BIG
    X[2] = 1e200
    X[3] = -BIG
    return X


def test_row_norms_do_not_overflow_where_the_norm_is_finite():
    X = np.array([[3.0, 4.0], [1e200, 1e200], [1e-200, 1e-200], [BIG, 0.0], [BIG, BIG], [0.0, 0.0]])
    got = row_norms(X)
    np.testing.assert_allclose(got[:4], [5.0, np.sqrt(2) * 1e200, np.sqrt(2) * 1e-200, BIG], rtol=1e-15)
    assert got[4] == np.inf and got[5] == 0.0
    assert row_norms(X[:1])[0] == np.linalg.norm(X[0])      # ordinary rows: the plain norm, bit for bit


def test_clipping_zeroes_non_finite_rows_and_keeps_the_bound():
    G = np.array([[3.0, 4.0], [np.nan, 1.0], [np.inf, 0.0], [BIG, BIG], [0.3, 0.4]])
    out = clip_rows(G, 1.0)
    # rtol: the clip margin (2 + 16) 2^-53 = 2.0e-15 of fedgdp.core.privacy.clip_margin, plus rounding
    np.testing.assert_allclose(out, [[0.6, 0.8], [0, 0], [0, 0], [0, 0], [0.3, 0.4]], rtol=3e-15)
    assert np.all(row_norms(out) <= 1.0)


@pytest.mark.parametrize("model", ["logistic", "poisson"])
@pytest.mark.parametrize("method,mode", [("fedsgd", "paper"), ("fedavg", "paper"), ("fedhybrid", "paper"),
                                         ("fednewton", "certified"), ("fednewton_certified", "paper")])
def test_simulation_releases_stay_finite_with_float_max_records(model, method, mode):
    """Every clipped per-sample gradient and Hessian of a float-max row is zero or within
    its bound, so the fit (clipped, noisy, public bound) is finite."""
    from fedgdp.core.glm import get_model
    from fedgdp.simulation.backend import FitData, get_method
    from fedgdp.simulation.data import Replicate
    from fedgdp.simulation.params import resolve

    rng = np.random.default_rng(0)
    n, d = 20, 5
    X = np.column_stack([np.ones(n), rng.standard_normal((n, d - 1))])
    y = rng.integers(0, 2, n).astype(float)
    X = _huge_rows(X, rng)
    X[12] = BIG * np.where(np.arange(d) % 2 == 0, 1.0, -1.0)        # half 2 too
    rep = Replicate(X, y, np.array([10, 10]))
    fd = FitData([rep], get_model(model), np.array([1.0]), 2.0, 0.5, privacy={"mode": mode, "hessian_clip": 4.0},
                 clip={"rule": "fixed", "value": 1.0})
    meth = get_method(method)
    s = resolve({"model": model, "methods": [method], "K": 5}).method_settings[method]
    noise = meth.draw_noise(np.random.default_rng(1), s, 2, d, True)
    with np.errstate(all="ignore"):
        fit = meth.fit(fd, s, {k: v[None] for k, v in noise.items()})
    assert np.isfinite(fit.theta).all()


def test_paper_newton_step_on_float_max_records_is_an_error_not_a_release():
    """The paper's unclipped Hessian of a float-max row is not finite: the private
    release is refused (a release that is not finite is an error, never an output)."""
    from fedgdp.core.glm import get_model
    from fedgdp.simulation.backend import FitData, get_method
    from fedgdp.simulation.data import Replicate
    from fedgdp.simulation.params import resolve

    rng = np.random.default_rng(0)
    X = np.column_stack([np.ones(20), rng.standard_normal((20, 4))])
    X[0] = [1.0, 1e200, 0.0, 0.0, 0.0]
    rep = Replicate(X, rng.poisson(1.0, 20).astype(float), np.array([20]))
    fd = FitData([rep], get_model("poisson"), np.array([1.0]), 2.0, 0.5, clip={"rule": "fixed", "value": 1.0})
    meth = get_method("fednewton")
    s = resolve({"model": "poisson", "methods": ["fednewton"], "K": 1}).method_settings["fednewton"]
    noise = meth.draw_noise(np.random.default_rng(1), s, 1, 5, True)
    with np.errstate(all="ignore"), pytest.raises(ValueError, match="not finite"):
        meth.fit(fd, s, {k: v[None] for k, v in noise.items()})


@pytest.mark.parametrize("task", ["binary", "multiclass"])
@pytest.mark.parametrize("solver", ["cg", "ridge"])
def test_realdata_releases_stay_finite_with_float_max_records(task, solver):
    from fedgdp.core.glm import matrix_model
    from fedgdp.realdata import FoldData, get_method, resolve

    rng = np.random.default_rng(0)
    model = matrix_model(task, n_classes=3)
    n, d = 24, 6
    Xs, Ys = [], []
    for _ in range(2):
        X = _huge_rows(np.column_stack([np.ones(n), rng.random((n, d - 1))]), rng)
        X[15] = X[0]                         # half 2 too
        Xs.append(X)
        Ys.append(model.targets(rng.integers(0, 2 if task == "binary" else 3, n)))
    names = ["fedsgd", "fedavg", "fedhybrid", "dp_scaffold", "fednewton", "fednewton_certified"]
    p = resolve({"task": task, "methods": names, "clip": 1.0, "privacy": {"mode": "certified"},
                 "newton": {"solver": solver}})
    fd = FoldData(model, Xs, Ys, mu=2.0, B=1.0, tau1=0.5, newton=p.newton, privacy=p.privacy, clip=p.clip)
    for name in names:
        s = dict(p.method_settings[name])
        s.update({key: 3 for key in ("K", "K1", "K2") if key in s})
        with np.errstate(all="ignore"):
            fit = get_method(name).fit(fd, s, np.random.default_rng(2))
        assert np.isfinite(fit.theta).all(), name


def test_data_that_is_not_finite_is_refused_naming_the_source_and_row():
    X = np.ones((5, 3))
    check_finite(X, "f.npz")
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"f\.npz: row 3 holds a value that is not finite"):
        check_finite(X, "f.npz")
