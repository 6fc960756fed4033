"""Real-data methods: Newton solvers, SCAFFOLD against a plain loop, ledgers, digits
accuracy of the pooled fit, the run's rows, the CLI and Figures 7-8."""
import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest

from fedgdp import realdata as rd
from fedgdp.commands.cli import main
from fedgdp.common.datasets import load_digits
from fedgdp.core.glm import BINARY_LOGISTIC, Multinomial

MODELS = [BINARY_LOGISTIC, Multinomial(3)]


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """Small matrices: one BLAS thread is faster than several fighting over 2 cores."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(limits=1):
        yield


def _fold(model, sizes=(23, 30, 17, 41), d=6, seed=0, **kw):
    """Small federated data with uneven (odd and even) client sizes."""
    rng = np.random.default_rng(seed)
    X, Y = [], []
    beta = rng.normal(size=(d, model.k)) * 2
    for n in sizes:
        x = np.hstack([np.ones((n, 1)), rng.random((n, d - 1))])
        P = model.predict(beta, x)
        if model.k == 1:
            labels = (rng.random(n) < P[:, 0]).astype(int)
        else:
            labels = np.array([rng.choice(model.k, p=p) for p in P])
        X.append(x)
        Y.append(model.targets(labels))
    return rd.FoldData(model, X, Y, **kw)


# ------------------------------------------------------------------ Newton step
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_cg_newton_step_equals_dense_newton_step(model):
    fd = _fold(model, seed=1)
    rng = np.random.default_rng(2)
    Theta = rng.normal(size=(fd.d, fd.k))
    g = fd.gradient(0, Theta)
    for tau1 in (0.05, 0.5, 2.0):
        cg = rd.newton_step(model, Theta, fd.X[1], g, tau1, solver="cg", cg_tol=1e-13, cg_maxiter=1000)
        dense = rd.newton_step(model, Theta, fd.X[1], g, tau1, solver="ridge")
        H = model.hessian(Theta, fd.X[1])
        assert np.allclose(dense.ravel(), np.linalg.solve(H + tau1 * np.eye(H.shape[0]), g.ravel()))
        assert np.allclose(cg, dense, rtol=1e-9, atol=1e-11)
        for s in (cg, dense, rd.newton_step(model, Theta, fd.X[1], g, tau1, solver="floor")):
            assert np.linalg.norm(s) <= np.linalg.norm(g) / tau1 * (1 + 1e-12)    # the calibrated bound


def test_floor_solver_matches_the_simulations_floored_solve():
    from fedgdp.core.solvers import floored_solve

    fd = _fold(BINARY_LOGISTIC, seed=3)
    Theta = np.full((fd.d, 1), 0.3)
    g = fd.gradient(2, Theta)
    H = BINARY_LOGISTIC.hessian(Theta, fd.X[2])
    s = rd.newton_step(BINARY_LOGISTIC, Theta, fd.X[2], g, 0.4, solver="floor")
    assert np.allclose(s[:, 0], floored_solve(H, g[:, 0], 0.4))


def test_truncated_cg_keeps_the_norm_bound():
    fd = _fold(Multinomial(3), seed=4)
    Theta = np.zeros((fd.d, 3))
    g = fd.gradient(0, Theta)
    norms = [np.linalg.norm(rd.cg_solve(lambda V: Multinomial(3).hvp(Theta, fd.X[0], V) + 0.1 * V, g,
                                       tol=1e-30, maxiter=it)[0]) for it in range(1, 12)]
    assert np.all(np.diff(norms) >= -1e-10) and norms[-1] <= np.linalg.norm(g) / 0.1


# ------------------------------------------------------------------- SCAFFOLD
def _plain_gradient(model, Theta, X, Y, B):
    """Mean of clipped per-sample gradients, one sample at a time."""
    total = np.zeros_like(Theta)
    for x, y in zip(X, Y):
        s = x @ Theta
        if model.k == 1:
            p = 1.0 / (1.0 + np.exp(-s))
        else:
            p = np.exp(s - s.max())
            p /= p.sum()
        G = np.outer(x, p - y)
        norm = np.linalg.norm(G)
        if np.isfinite(B) and norm > B:
            G *= B / norm
        total += G
    return total / X.shape[0]


def _plain_scaffold(fd, R_, K, eta, eta_g, B=math.inf, sigmas=None, rng=None):
    """SCAFFOLD (Karimireddy et al. 2020, option II), client by client, step by step."""
    m, d, k = fd.m, fd.d, fd.k
    n = np.array([x.shape[0] for x in fd.X], float)
    w = n / n.sum()
    theta, c = np.zeros((d, k)), np.zeros((d, k))
    ci = [np.zeros((d, k)) for _ in range(m)]
    for _ in range(R_):
        dys, dcs = [], []
        for i in range(m):
            y = theta.copy()
            for _ in range(K):
                y = y - eta * (_plain_gradient(fd.model, y, fd.X[i], fd.Y[i], B) - ci[i] + c)
                if rng is not None:
                    y = y + sigmas[i] * rng.standard_normal((d, k))
            new = ci[i] - c + (theta - y) / (K * eta)
            dys.append(y - theta)
            dcs.append(new - ci[i])
            ci[i] = new
        theta = theta + eta_g * sum(wi * dy for wi, dy in zip(w, dys))
        c = c + sum(wi * dc for wi, dc in zip(w, dcs))
    return theta


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_scaffold_without_privacy_equals_a_plain_loop(model):
    fd = _fold(model, seed=5)
    s = {"R": 3, "K": 4, "eta": 0.7, "eta_g": 0.9}
    fit = rd.REGISTRY["np_scaffold"].fit(fd, s, None)
    assert np.allclose(fit.theta, _plain_scaffold(fd, 3, 4, 0.7, 0.9), atol=1e-13)
    assert np.allclose(rd.REGISTRY["dp_scaffold"].fit(fd, s, None).theta, fit.theta)     # mu = inf
    assert fit.rounds == 3 and fit.floats_up == 3 * fd.m * fd.d * fd.k * 2
    # the control variates matter: SCAFFOLD is not FedAvg
    avg = rd.REGISTRY["np_fedavg"].fit(fd, {"R": 3, "K": 4, "eta": 0.7}, None)
    assert not np.allclose(avg.theta, fit.theta)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_dp_scaffold_equals_a_plain_loop_with_the_same_noise(model):
    fd = _fold(model, seed=6, mu=2.0, B=0.8)
    s = {"R": 2, "K": 3, "eta": 0.5, "eta_g": 1.0}
    fit = rd.REGISTRY["dp_scaffold"].fit(fd, s, np.random.default_rng(11))
    n = fd.sizes.astype(float)
    sigmas = 2 * 0.8 * 0.5 * math.sqrt(2 * 3) / (2.0 * n)        # FedAvg's noise (docs/methods.md §2)
    plain = _plain_scaffold(fd, 2, 3, 0.5, 1.0, B=0.8, sigmas=sigmas, rng=np.random.default_rng(11))
    assert np.allclose(fit.theta, plain, atol=1e-12)
    assert np.allclose(fit.ledger.releases[0].sigma[0], sigmas)


BATCHED = {"fedsgd": {"K": 4, "eta": 0.5}, "fedavg": {"R": 2, "K": 3, "eta": 0.5},
           "fedhybrid": {"K1": 3, "eta1": 0.5, "K2": 2, "eta2": 0.4},
           "dp_scaffold": {"R": 2, "K": 3, "eta": 0.5, "eta_g": 0.9}}


@pytest.mark.parametrize("name", list(BATCHED))
def test_fitting_all_mu_at_once_equals_one_fit_per_mu(name):
    """Stacked parameters (one product X [Theta_1 Theta_2 Theta_3], one noise draw
    shared by the levels) against separate fits with their own, alike-seeded
    generators: the arithmetic is the same up to the wider product's summation order,
    so 1e-10 relative. Each level keeps its own bound and noise sd."""
    model = Multinomial(3)
    levels = [(6.0, 0.9), (2.0, 0.5), (0.5, 0.3)]
    fds = [_fold(model, seed=7, mu=mu, B=B) for mu, B in levels]
    meth, s = rd.REGISTRY[name], rd.resolve({"method_settings": {name: BATCHED[name]}}).method_settings[name]
    many = meth.fit_many(fds, s, [np.random.default_rng(3) for _ in fds])
    for fd, fit in zip(fds, many):
        one = meth.fit(fd, s, np.random.default_rng(3))
        assert np.allclose(fit.theta, one.theta, rtol=1e-10, atol=1e-12)
        assert fit.ledger.composed_mu()[0] == pytest.approx(one.ledger.composed_mu()[0])
    assert not np.allclose(many[0].theta, many[2].theta)
    # generators in different states are not shared: the fits fall back to one per level
    rngs = [np.random.default_rng(3), np.random.default_rng(4), np.random.default_rng(5)]
    apart = meth.fit_many(fds, s, rngs)
    assert np.allclose(apart[1].theta, meth.fit(fds[1], s, np.random.default_rng(4)).theta, rtol=0, atol=0)


def test_non_private_baselines_refuse_a_finite_mu():
    fd = _fold(BINARY_LOGISTIC, mu=2.0, B=1.0)
    with pytest.raises(ValueError, match="np_fedavg is non-private"):
        rd.REGISTRY["np_fedavg"].fit(fd, {"R": 1, "K": 1, "eta": 0.5}, None)


# --------------------------------------------------------------------- ledgers
@pytest.mark.parametrize("name", rd.PRIVATE)
@pytest.mark.parametrize("mu", [6.0, 2.0, 0.37])
def test_every_private_ledger_composes_to_mu(name, mu):
    p = rd.resolve({"mu": [mu]})
    fd = _fold(Multinomial(3), sizes=(23, 30, 17, 41, 8), mu=mu, B=1.3, tau1=0.5)
    fit = rd.get_method(name).fit(fd, p.method_settings[name], np.random.default_rng(0))
    composed = fit.ledger.composed_mu()
    assert composed.shape == (1, fd.m)
    assert np.allclose(composed, mu, rtol=0, atol=1e-12)


def test_dp_scaffold_ledger_is_fedavgs():
    fd = _fold(BINARY_LOGISTIC, mu=2.0, B=1.0)
    s = {"R": 4, "K": 5, "eta": 0.3, "eta_g": 1.0}
    led = rd.REGISTRY["dp_scaffold"].fit(fd, s, np.random.default_rng(0)).ledger
    ref = rd.REGISTRY["fedavg"].fit(fd, {k: s[k] for k in ("R", "K", "eta")}, np.random.default_rng(0)).ledger
    assert [(r.stage, r.count) for r in led.releases] == [("local step", 20)]
    assert np.array_equal(led.releases[0].sigma, ref.releases[0].sigma)
    assert np.array_equal(led.releases[0].sensitivity, ref.releases[0].sensitivity)
    assert abs(led.composed_mu().max() - 2.0) < 1e-12


def test_non_private_methods_have_empty_ledgers_and_no_noise():
    fd = _fold(BINARY_LOGISTIC)
    for name in rd.NONPRIVATE:
        s = rd.resolve().method_settings[name]
        fit = rd.get_method(name).fit(fd, s, None)
        assert np.all(np.isfinite(fit.theta))
        # no release, or releases with sigma = 0 and sensitivity = inf (the package's mu = inf)
        assert all((r.sigma == 0).all() and np.isinf(r.sensitivity).all() for r in fit.ledger.releases)
    assert rd.REGISTRY["np_localfit"].fit(fd, {"ridge": 1e-3, "maxiter": 50}, None).theta.shape == (fd.m, fd.d, 1)


# ----------------------------------------------------------------- parameters
def test_resolve_defaults_inheritance_and_errors():
    p = rd.resolve({"method_settings": {"fedavg": {"eta": 0.2}}})
    assert p.methods == rd.PRIVATE + rd.NONPRIVATE      # fednewton_certified on request
    assert p.method_settings["np_fedavg"] == {"R": 2, "K": 50, "eta": 0.2}
    assert p.method_settings["dp_scaffold"] == {"R": 2, "K": 50, "eta": 0.2, "eta_g": 1.0}
    assert p.method_settings["np_scaffold"] == p.method_settings["dp_scaffold"]
    assert rd.resolve({"mu": "6,inf"}).mu == [6.0, math.inf]
    bad = [({"task": "ternary"}, "unknown task 'ternary'"), ({"mu": [0]}, "mu must be > 0"),
           ({"methods": "fedsgd,fedprox"}, "unknown real-data method 'fedprox'"),
           ({"m": -5}, "m must be an integer >= 1, got m=-5"), ({"dataset": "mnist"}, "needs path"),
           ({"method_settings": {"fedsgd": {"eta": 0}}}, "fedsgd.eta must be a number > 0"),
           ({"method_settings": {"fedsgd": {"steps": 3}}}, "unknown setting 'steps' for method fedsgd"),
           ({"newton": {"solver": "lu"}}, "newton solver must be"), ({"colour": 1}, "unknown realdata parameter")]
    for over, msg in bad:
        with pytest.raises(ValueError, match=msg):
            rd.resolve(over)


def test_auc_and_accuracy():
    assert rd.auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == 0.75
    assert rd.auc(np.array([1.0, 1.0]), np.array([0, 1])) == 0.5
    assert math.isnan(rd.auc(np.array([0.2, 0.3]), np.array([1, 1])))
    assert rd.accuracy(np.eye(3)[[0, 2, 1]], np.array([0, 1, 1])) == pytest.approx(2 / 3)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_ridge_fit_meets_its_optimality_condition(model):
    """The penalised objective's gradient (computed here from model.gradient, not the
    solver's fused pass) has norm <= gtol at the fit, and the fit is the minimiser:
    nearby points are not lower (strong convexity: within ||g|| / ridge of it)."""
    fd = _fold(model, sizes=(60, 45), d=8, seed=3)
    X, Y = np.vstack(fd.X), np.vstack(fd.Y)
    ridge, gtol = 1e-3, 1e-8
    T = rd.ridge_fit(model, X, Y, ridge=ridge, maxiter=200, gtol=gtol)
    mask = np.ones_like(T)
    mask[0] = 0.0
    g = model.gradient(T, X, Y) + ridge * mask * T
    assert np.linalg.norm(g) <= gtol
    def f(U):
        return model.loss(U, X, Y) + 0.5 * ridge * np.sum((mask * U) ** 2)
    rng = np.random.default_rng(0)
    assert all(f(T + 1e-3 * rng.normal(size=T.shape)) > f(T) for _ in range(5))
    loose = rd.ridge_fit(model, X, Y, ridge=ridge, maxiter=1, gtol=gtol)
    assert np.linalg.norm(model.gradient(loose, X, Y) + ridge * mask * loose) > gtol


# ------------------------------------------------------------------ digits runs
@pytest.fixture(scope="module")
def digits():
    return load_digits()


@pytest.mark.parametrize("task,floor", [("multiclass", 0.90), ("binary", 0.95)])
def test_np_pooled_on_digits_reaches_the_target(digits, task, floor):
    p = rd.resolve({"task": task, "methods": ["np_pooled"]})
    rows = rd.run_split(p, digits, 0)
    values = np.array([r["value"] for r in rows])
    assert len(rows) == p.m and np.median(values) >= floor
    assert {r["metric"] for r in rows} == {rd.METRICS[task]}


def test_run_split_rows_are_complete_and_reproducible(digits):
    over = {"task": "multiclass", "methods": ["fedsgd", "fednewton", "np_localfit"], "mu": [2.0],
            "m": 4, "n_min": 300,
            "method_settings": {"fedsgd": {"K": 5}, "fednewton": {"K": 5}, "np_localfit": {"maxiter": 20}}}
    p = rd.resolve(over)
    rows = rd.run_split(p, digits, 1)
    assert len(rows) == 3 * 4 and all(set(r) == set(rd.COLUMNS) for r in rows)
    by = {(r["method"], r["mu"]) for r in rows}
    assert by == {("fedsgd", 2.0), ("fednewton", 2.0), ("np_localfit", math.inf)}
    for r in rows:
        assert len(r["value_folds"]) == 5 and np.isclose(r["value"], np.mean(r["value_folds"]))
        assert 0 <= r["value"] <= 1 and r["n_client"] >= 300
        assert (abs(r["mu_composed"] - 2.0) < 1e-12) if r["private"] else math.isinf(r["mu_composed"])
    again = rd.run_split(p, digits, 1)
    assert [r["value_folds"] for r in rows] == [r["value_folds"] for r in again]
    other = rd.run_split(p, digits, 2)
    assert [r["value_folds"] for r in rows] != [r["value_folds"] for r in other]


def test_run_split_rows_do_not_depend_on_the_workers(digits):
    """Two forked workers sharing the (fold, method) fits give the rows of one process,
    bit for bit (every value as Python compares it), except the fit times."""
    p = rd.resolve({"task": "multiclass", "methods": ["fedsgd", "np_localfit", "fedavg"], "m": 4, "n_min": 300,
                    "method_settings": {"fedsgd": {"K": 5}, "fedavg": {"R": 1, "K": 3},
                                        "np_localfit": {"maxiter": 20}}})
    one, two = (rd.run_split(p, digits, 0, workers=w) for w in (1, 2))
    for rows in (one, two):
        for r in rows:
            r.pop("elapsed_s")
    assert repr(one) == repr(two)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        rd.run_split(p, digits, 0, workers=0)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_sparse_products_agree_with_dense_ones(model):
    """A tall, wide, sparse design is multiplied as CSR (fedgdp.core.glm.product_design): gradients,
    Hessian-vector products and ridge fits agree with the dense ones to 1e-12 (the same
    sums in another order: rounding, about 1e-16 relative per term), and a narrow or
    dense design and a short one (a client's few hundred rows) are returned as they are."""
    from scipy.sparse import issparse

    from fedgdp.core.glm import SPARSE_MIN_COLUMNS, product_design

    rng = np.random.default_rng(5)
    n, d = 10000, SPARSE_MIN_COLUMNS + 4         # n > ROW_BLOCK_MIN: the dense side goes by blocks
    X = np.where(rng.random((n, d)) < 0.1, rng.random((n, d)), 0.0)
    X[:, 0] = 1.0
    S = product_design(X)
    assert issparse(S) and not issparse(product_design(X[:, :64])) and not issparse(product_design(X[:700]))
    assert not issparse(product_design(np.ones((n, d))))
    Y = model.targets(rng.integers(0, model.k if model.k > 1 else 2, n))
    T, V = rng.normal(size=(d, model.k)) * 0.1, rng.normal(size=(d, model.k))
    value, grad, P = model.loss_gradient(T, X, Y)
    value_s, grad_s, P_s = model.loss_gradient(T, S, Y)
    assert abs(value - value_s) < 1e-12 and np.abs(grad - grad_s).max() < 1e-12 and np.abs(P - P_s).max() < 1e-12
    assert np.abs(model.hvp_at(P, X, V) - model.hvp_at(P, S, V)).max() < 1e-12
    fd_dense = rd.FoldData(model, [X[:5000], X[5000:]], [Y[:5000], Y[5000:]], products=[X[:5000], X[5000:]])
    fd_sparse = rd.FoldData(model, [X[:5000], X[5000:]], [Y[:5000], Y[5000:]])
    assert issparse(fd_sparse.design(0)) and issparse(fd_sparse.design(1, slice(0, 10)))
    assert np.abs(fd_dense.gradient(1, T) - fd_sparse.gradient(1, T)).max() < 1e-12


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_nonzero_column_products_agree_with_dense_ones(model):
    """A client's wide design with all-zero columns is multiplied through its other columns
    (fedgdp.core.glm.NonzeroColumns): scores, gradients, Hessian-vector products, row slices,
    clipped and stacked gradients and the CG Newton step agree with the dense ones to
    1e-12 (the same nonzero terms, grouped otherwise: rounding, about 1e-16 relative per
    term), the rows of the zero columns are exactly zero, and a design with too few zero
    columns, a narrow one or a tall one is not made one."""
    from fedgdp.core.glm import SPARSE_MIN_COLUMNS, ZERO_COLUMNS_MIN, NonzeroColumns, product_design

    rng = np.random.default_rng(11)
    n, d = 300, SPARSE_MIN_COLUMNS + 4
    X = np.where(rng.random((n, d)) < 0.2, rng.random((n, d)), 0.0)
    X[:, 0] = 1.0
    zero = rng.choice(np.arange(1, d), size=int(0.3 * d), replace=False)
    X[:, zero] = 0.0
    C = product_design(X)
    assert isinstance(C, NonzeroColumns) and C.shape == X.shape and set(C.cols) == set(range(d)) - set(zero)
    few = X.copy()
    few[:, zero[: len(zero) - int(ZERO_COLUMNS_MIN * d) + 1]] = 1.0      # one zero column short of the share
    narrow = X[:, :64]
    assert product_design(few) is few and product_design(narrow) is narrow
    assert not isinstance(product_design(np.vstack([X] * 14)), NonzeroColumns)   # tall: dense or CSR
    Y = model.targets(rng.integers(0, model.k if model.k > 1 else 2, n))
    T, V = rng.normal(size=(d, model.k)), rng.normal(size=(d, model.k))

    def close(a, b):
        return np.abs(np.asarray(a) - np.asarray(b)).max() <= 1e-12 * max(1.0, np.abs(b).max())

    value, grad, P = model.loss_gradient(T, X, Y)
    value_c, grad_c, P_c = model.loss_gradient(T, C, Y)
    assert close(value_c, value) and close(grad_c, grad) and close(P_c, P)
    assert np.all(grad_c[zero] == 0.0) and close(model.hvp_at(P, C, V), model.hvp_at(P, X, V))
    assert close(C[10:50] @ T, X[10:50] @ T) and close(C.T @ P, X.T @ P) and close(C @ T[:, 0], X @ T[:, 0])
    dense = rd.FoldData(model, [X, X[:120]], [Y, Y[:120]], B=0.5, mu=2.0, products=[X, X[:120]])
    cols = rd.FoldData(model, [X, X[:120]], [Y, Y[:120]], B=0.5, mu=2.0)
    assert isinstance(cols.design(1), NonzeroColumns) and isinstance(cols.design(0, slice(0, 9)), NonzeroColumns)
    for i, rows in ((0, slice(None)), (1, slice(0, 60))):
        assert close(cols.gradient(i, T, rows), dense.gradient(i, T, rows))
        Ts = np.stack([T, 2 * T])
        assert close(rd.stacked_gradients([cols, cols], i, Ts, rows),
                     rd.stacked_gradients([dense, dense], i, Ts, rows))
    g = dense.gradient(0, T)
    step_c = rd.newton_step(model, T, C[:150], g, 0.5, cg_tol=1e-12)
    step_d = rd.newton_step(model, T, X[:150], g, 0.5, cg_tol=1e-12)
    assert np.abs(step_c - step_d).max() <= 1e-9 * np.abs(step_d).max()     # CG to 1e-12, kappa <= 1 + ||H||/tau1
    # certified: the clipped Hessian reads the entries themselves (np.asarray), the very same numbers
    assert np.array_equal(np.asarray(C), X) and np.array_equal(np.asarray(C[3:9]), X[3:9])
    with pytest.raises(ValueError, match="copy=False"):
        np.asarray(C, copy=False)
    assert np.array_equal(rd.newton_step(model, T, C[:150], g, 0.5, cg_tol=1e-10, hessian_bound=2.0),
                          rd.newton_step(model, T, X[:150], g, 0.5, cg_tol=1e-10, hessian_bound=2.0))
    assert np.array_equal(cols.xnorm[0], dense.xnorm[0])
    only = rd.FoldData(model, [C], [Y], B=0.5, mu=2.0)              # a fold keeping only the nonzero columns
    assert only.design(0) is C and only.d == d and np.array_equal(only.xnorm[0], dense.xnorm[0])


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_nonzero_columns_keep_the_gradient_sensitivity(model):
    """Replacing one record of a wide client, by one whose entries fill the client's
    all-zero columns (so the two designs keep different columns) or by a huge one, moves
    its clipped mean gradient by at most 2 B / n (the recorded sensitivity of a gradient
    release), up to 1e-12 relative for rounding, as the dense products do."""
    from fedgdp.core.glm import SPARSE_MIN_COLUMNS, NonzeroColumns

    rng = np.random.default_rng(12)
    n, d, B = 200, SPARSE_MIN_COLUMNS + 4, 0.7
    X = np.where(rng.random((n, d)) < 0.2, rng.random((n, d)), 0.0)
    X[:, 0] = 1.0
    zero = np.arange(1, d // 3)
    X[:, zero] = 0.0
    Y = model.targets(rng.integers(0, model.k if model.k > 1 else 2, n))
    T = rng.normal(size=(d, model.k))
    base = rd.FoldData(model, [X], [Y], B=B, mu=1.0)
    assert isinstance(base.design(0), NonzeroColumns) and base.design(0).cols.size == d - zero.size
    for record in (np.r_[1.0, np.ones(d - 1)], np.r_[1.0, np.full(d - 1, 1e150)], np.zeros(d)):
        for label in range(model.k if model.k > 1 else 2):
            X2, Y2 = X.copy(), Y.copy()
            X2[7], Y2[7] = record, model.targets(np.array([label]))[0]
            other = rd.FoldData(model, [X2], [Y2], B=B, mu=1.0)
            moved = np.linalg.norm(base.gradient(0, T) - other.gradient(0, T))
            assert moved <= 2 * B / n * (1 + 1e-12)


def test_run_split_through_nonzero_columns_matches_the_dense_products(digits, monkeypatch):
    """A split of wide images (the digits at 16 x 16 in a blank border of 2, d = 401: every
    client has all-zero pixels, as on MNIST) gives the rows of the dense products: the
    gradient methods' values to 1e-12
    (rounding through K steps), FedNewton's CG step and the ridge fits, which stop at a
    tolerance (cg_tol, gtol 1e-8 on the gradient), to 1e-6: a test-fold accuracy moves only
    if an image's two best class scores are within the solvers' tolerance of each other."""
    from fedgdp.common.datasets import Dataset
    from fedgdp.core import glm

    pixels = digits.X[:, 1:].reshape(-1, 8, 8)
    wide = np.pad(np.kron(pixels, np.ones((1, 2, 2))), ((0, 0), (2, 2), (2, 2))).reshape(len(pixels), -1)
    data = Dataset("digits20", np.hstack([np.ones((len(wide), 1)), wide]), digits.labels)
    assert isinstance(glm.product_design(data.X[:500]), glm.NonzeroColumns)
    p = rd.resolve({"task": "multiclass", "m": 3, "n_min": 300, "mu": [2.0],
                    "methods": ["fedsgd", "fedavg", "dp_scaffold", "fednewton", "np_localfit", "np_pooled"],
                    "method_settings": {"fedsgd": {"K": 4}, "fedavg": {"R": 2, "K": 2}, "fednewton": {"K": 3},
                                        "np_localfit": {"maxiter": 50}}})
    from fedgdp.realdata.run import _Split

    folds = _Split(p, data, 0)._fold(0)
    assert all(isinstance(x, glm.NonzeroColumns) for x in folds[2])        # no dense copy kept besides
    rows = rd.run_split(p, data, 0)
    monkeypatch.setattr(glm, "ZERO_COLUMNS_MIN", 2.0)                    # never: the dense products
    dense = rd.run_split(p, data, 0)
    assert [(r["method"], r["client"]) for r in rows] == [(r["method"], r["client"]) for r in dense]
    for r, q in zip(rows, dense):
        tol = 1e-6 if r["method"] in ("fednewton", "np_localfit", "np_pooled") else 1e-12
        assert np.abs(np.subtract(r["value_folds"], q["value_folds"])).max() <= tol, r["method"]
        assert r["B"] == q["B"] and r["mu_composed"] == q["mu_composed"]


def test_pooled_design_from_blocks_is_the_stacked_csr():
    """The pooled design built from the clients' row blocks (fedgdp.core.glm.product_design of a
    list, of dense blocks or of their NonzeroColumns) has the very arrays of
    csr_matrix(np.vstack(blocks)), so NP-Pooled's products are the same to the bit; a
    short or dense stack comes back as the dense np.vstack."""
    from scipy.sparse import csr_matrix, issparse

    from fedgdp.core.glm import SPARSE_MIN_COLUMNS, NonzeroColumns, product_design

    rng = np.random.default_rng(8)
    d = SPARSE_MIN_COLUMNS + 9
    blocks = [np.where(rng.random((n, d)) < 0.15, rng.random((n, d)), 0.0) for n in (700, 1, 2500, 0, 1900)]
    blocks[2][5] = 0.0                                   # an empty row
    S, want = product_design(blocks), csr_matrix(np.vstack(blocks))
    assert issparse(S) and S.shape == want.shape
    for name in ("indptr", "indices", "data"):
        got, ref = getattr(S, name), getattr(want, name)
        assert got.dtype == ref.dtype and np.array_equal(got, ref), name
    V = rng.normal(size=(d, 3))
    assert np.array_equal(S @ V, want @ V) and np.array_equal(S.T @ (want @ V), want.T @ (want @ V))
    clients = [NonzeroColumns.of(b) for b in blocks]                  # blocks through their nonzero columns
    S2 = product_design(clients)
    for name in ("indptr", "indices", "data"):
        got, ref = getattr(S2, name), getattr(want, name)
        assert got.dtype == ref.dtype and np.array_equal(got, ref), name
    small = product_design(blocks[:2])
    assert not issparse(small) and np.array_equal(small, np.vstack(blocks[:2]))
    assert np.array_equal(np.asarray(product_design(clients[:2])), np.vstack(blocks[:2]))
    dense = [np.ones((3000, d)), np.ones((2000, d))]
    assert not issparse(product_design(dense)) and product_design(dense).shape == (5000, d)


def test_cli_realdata_and_plot(tmp_path, digits):
    spec = {"m": 4, "n_min": 300, "method_settings": {"fedsgd": {"K": 3}, "fedavg": {"R": 1, "K": 3},
                                                       "np_localfit": {"maxiter": 10}, "np_pooled": {"maxiter": 10}}}
    files = []
    for split in (0, 1):
        out = tmp_path / f"binary_s{split}.parquet"
        assert main(["realdata", "--spec", json.dumps(spec), "--task", "binary", "--split", str(split),
                     "--mu", "6,2", "--methods", "fedsgd,dp_scaffold,np_fedavg,np_pooled",
                     "--out", str(out)]) == 0
        files.append(str(out))
    df = rd.read_rows(files)
    assert list(df.columns) == rd.COLUMNS and len(df) == 2 * 4 * (2 + 2 + 1 + 1)
    meta = pq.read_metadata(files[0]).metadata
    assert json.loads(meta[b"params"])["m"] == 4 and b"git_commit" in meta
    pdf, png, med = tmp_path / "fig07.pdf", tmp_path / "fig07.png", tmp_path / "fig07.csv"
    assert main(["realdata-plot", *files, "--task", "binary", "--pdf", str(pdf), "--png", str(png),
                 "--medians", str(med)]) == 0
    assert pdf.read_bytes()[:4] == b"%PDF" and png.stat().st_size > 10_000
    import matplotlib.image as mpimg

    assert mpimg.imread(png).shape[2] in (3, 4)
    assert med.read_text().splitlines()[0] == "task,dataset,method,mu,mu_certified,median,q25,q75,count"
    assert main(["realdata-plot", *files, "--task", "multiclass", "--png", str(png)]) == 2


def test_cli_realdata_errors_are_one_line(tmp_path, capsys):
    for argv, msg in ((["--task", "ternary"], "unknown task 'ternary'"),
                      (["--mu", "0"], "mu must be > 0"),
                      (["--spec", "{oops"], "--spec is not valid JSON")):
        assert main(["realdata", "--split", "0", "--out", str(tmp_path / "x.parquet"), *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and msg in err
    assert not (tmp_path / "x.parquet").exists()


def test_medians_table_says_which_mu_is_certified():
    """The medians CSV keeps the nominal mu and adds the certified one (inf unless every
    row of the group is certified), so no table presents a nominal mu as a guarantee."""
    import pandas as pd

    from fedgdp.realdata.plots import realdata_medians

    df = pd.DataFrame({"task": ["binary"] * 4, "dataset": ["digits"] * 4,
                       "method": ["fedsgd", "fedsgd", "np_pooled", "fedsgd"],
                       "mu": [2.0, 2.0, np.inf, 6.0], "value": [0.9, 0.8, 0.95, 0.7],
                       "mu_certified": [np.inf, np.inf, np.inf, 6.0]})
    out = realdata_medians(df).set_index(["method", "mu"])
    assert out.loc[("fedsgd", 2.0), "mu_certified"] == np.inf
    assert out.loc[("fedsgd", 6.0), "mu_certified"] == 6.0
    assert out.loc[("fedsgd", 2.0), "median"] == pytest.approx(0.85)
    assert np.isinf(out.loc[("np_pooled", np.inf), "mu_certified"])


def test_fedhybrid_stage1_rounds_run_as_fedavg_rounds_on_real_data():
    """R1 stage-1 rounds (the CNNs' split) with no stage 2 are FedAvg's R1 rounds: same
    estimate on the same data and generator; the simulation refuses R1 != 1 (its noise is
    drawn for one round)."""
    from fedgdp.simulation.params import resolve as resolve_sim

    hybrid = rd.resolve({"method_settings": {"fedhybrid": {"R1": 2, "K1": 3, "K2": 0, "eta1": 0.4}}})
    s = hybrid.method_settings["fedhybrid"]
    fd = _fold(BINARY_LOGISTIC, mu=2.0, B=1.0)
    a = rd.REGISTRY["fedhybrid"].fit(fd, s, np.random.default_rng(3))
    b = rd.REGISTRY["fedavg"].fit(fd, {"R": 2, "K": 3, "eta": 0.4}, np.random.default_rng(3))
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(a.ledger.composed_mu(), b.ledger.composed_mu(), rtol=1e-12)
    with pytest.raises(ValueError, match="fedhybrid.R1: the simulation runs one stage-1 round, got fedhybrid.R1=2"):
        resolve_sim({"methods": ["fedhybrid"], "method_settings": {"fedhybrid": {"R1": 2}}})


def test_ridge_fit_reaches_a_gtol_the_trust_region_stops_short_of():
    """At ridge 0 on anes96's unscaled softmax (7 classes; the Hessian's smallest non-zero
    eigenvalue about 5e-4) scipy's trust region stops with ||grad|| near 1e-10 ("a bad
    approximation"): a loss of order 1 cannot resolve the decrease. The Newton polish reaches
    gtol = 1e-11 on every row order tried (the order moves where the trust region stops)."""
    import statsmodels.api as sm

    from fedgdp.core.glm import matrix_model

    d = sm.datasets.anes96.load_pandas()
    X = d.exog[["logpopul", "selfLR", "age", "educ", "income"]].values.astype(float)
    y = d.endog.values.astype(int)
    model = matrix_model("multiclass", n_classes=7)
    for seed in range(4):
        order = np.random.default_rng(seed).permutation(len(y))
        X1, Y = np.column_stack([np.ones(len(y)), X[order]]), model.targets(y[order])
        T = rd.ridge_fit(model, X1, Y, ridge=0.0, maxiter=200, gtol=1e-11)
        assert np.linalg.norm(model.gradient(T, X1, Y)) <= 1e-11, seed
