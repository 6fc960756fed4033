"""The one-pass paths of issue 62 against the code they replaced (its oracle, kept here verbatim): FedIRLS's
rounds over all clients at once (`fedgdp.core.segments`), the inference release, the estimator's grouping of rows
by one sort, its label codes by `np.searchsorted` and its column moments in blocks.

Same seeds, same draw order: the noise is the same numbers. Tolerance 1e-10 (relative to the largest entry):
the whitened design is no longer materialised (each client's release is computed on the unwhitened rows and
mapped by the whitening ``Wt``, `fedgdp.methods.fedirls.client_gradients`; the row norms it clips against exceed
the computed whitened rows' by about 1e-14 relative, `whitened_norms`), and the inference curvature of one output
is one weighted product instead of an einsum: the same quantities summed in another order (rounding, about 1e-16
relative, carried through at most a few Newton solves of well-conditioned (d, d) systems)."""
from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pytest

from fedgdp import FederatedGLM
from fedgdp.api import checks, diagnostics, estimator
from fedgdp.api import inference as inference_
from fedgdp.core import privacy, segments
from fedgdp.core.normals import standard_normal
from fedgdp.methods import fedirls
from fedgdp.methods.fedirls import (
    DAMP_FROM,
    EIGEN_FLOOR,
    FedIRLS,
    client_curvature,
    client_second_moments,
    curvature_at_zero,
    hessian_bound,
    moment_bound,
    replayed_noise,
    solve_floored,
    whitening,
)
from fedgdp.realdata.clipping import clip_residuals
from fedgdp.realdata.solvers import clipped_hessian_rows

RTOL = 1e-10


def symmetric(Z):
    U = np.triu(Z)
    return U + np.triu(U, 1).T


# ------------------------------------------------------------ the replaced code (fedgdp 8ce15dc), verbatim
# (but for the noise statement, `replayed_noise` of the released values and public sds: post-processing, the
# same function on both sides, marked "# noise statement")
def _reference_run(self, be, s):
    fd = be.data
    if len(be.fds) != 1 or fd.k != 1:
        raise ValueError(f"FedIRLS fits one-output families (logistic, Poisson), one level at a time; got "
                         f"{fd.k} outputs")
    sigmas, ledgers = be.calibrate(self, s)
    sd = {spec.stage: np.asarray(a, float)[0] for spec, a in zip(self.plan(fd, s), sigmas)}
    noise, w, d = be.noise.take("Z"), fd.weights, fd.d
    draw = (lambda shape: np.zeros(shape)) if noise is None else noise.draw

    sd_m = sd[privacy.SECOND_MOMENTS]
    M = sum(w[i] * (client_second_moments(np.asarray(fd.X[i]), moment_bound(d))
                    + sd_m[i] * symmetric(draw((d, d)))) for i in range(fd.m))
    L = whitening(M, 2.0 * math.sqrt(d) * float(np.sqrt(np.sum((w * sd_m) ** 2))))
    Wt = np.linalg.inv(L).T                               # x~ = L^-1 x, theta = L^-T theta~
    Xw = [np.asarray(x, float) @ Wt for x in fd.X]
    fw = replace(fd, X=Xw, products=None, xnorm=None, trace=None)    # the fold on the whitened design
    Hc, w0 = hessian_bound(fd.model, d) if fd.private else math.inf, curvature_at_zero(fd.model)
    theta, H, var, capped, by_noise = np.zeros((d, 1)), w0 * np.eye(d), [], False, False
    curv_sd = []                                                                           # noise statement
    floor = EIGEN_FLOOR * w0
    rounds = s.T if fd.private else self.EXACT_ROUNDS      # non-private: Newton to convergence, at no cost
    for t in range(1, rounds + 1):
        sd_g = sd.get(f"{privacy.GRADIENT} (round {t})", np.zeros(fd.m))
        g = sum(w[i] * (fw.gradient(i, theta) + sd_g[i] * draw((d, 1))) for i in range(fd.m))
        curv = f"{privacy.CURVATURE} (round {t})"
        curv_sd.append(float(np.sqrt(np.sum((w * sd[curv]) ** 2))) if curv in sd else math.nan)  # noise statement
        if curv in sd or not fd.private:
            H = sum(w[i] * (client_curvature(fd.model, theta, Xw[i], Hc, fd.Y[i], fw.bound)
                            + sd.get(curv, np.zeros(fd.m))[i] * symmetric(draw((d, d)))) for i in range(fd.m))
        step = solve_floored(H, g, floor)
        decrement = math.sqrt(max(float(np.sum(g * step)), 0.0))   # Newton's decrement: far off, damp
        if decrement > DAMP_FROM:
            step /= 1.0 + decrement
        norm = float(np.linalg.norm(step))
        var.append(float(np.sum((w * sd_g) ** 2)))
        if norm > s.radius:
            step *= s.radius / norm
            if t >= rounds - 1:          # the last two steps capped: the estimate is not where Newton lands
                capped = True            # ... and by the noise when its own norm is half the radius or more
                Hinv = solve_floored(H, np.eye(d), floor)
                by_noise = by_noise or math.sqrt(var[-1] * float(np.sum(Hinv ** 2))) >= s.radius / 2
        theta = theta - step
        if not fd.private and norm <= 1e-13 * max(1.0, float(np.linalg.norm(theta))):
            break
    Hinv = solve_floored(H, np.eye(d), floor)
    spread = Wt @ Hinv @ Hinv @ Wt.T                      # a gradient noise of unit variance, in theta
    fit = be.finish((Wt @ theta)[None], ledgers, self.comm(s, fd.m, d))[0]
    noise_cov, step_cov = var[-1] * spread, (var[-1] + var[-2 if len(var) > 1 else -1]) * spread  # noise statement
    if fd.private:                                                                         # noise statement
        noise_cov, step_cov = (Wt @ c @ Wt.T for c in                                      # noise statement
                               replayed_noise(H, theta[:, 0], var, curv_sd, w0, floor, s.radius))
    fit.info = {"noise_cov": noise_cov, "last_step": (Wt @ step)[:, 0], "last_step_cov": step_cov,
                "capped": capped, "capped_by_noise": by_noise, "rounds": t}
    return [fit]


def _reference_client_moments(model, theta, X, Y, B):
    X = np.asarray(X, float)
    n, d = X.shape
    with np.errstate(over="ignore", invalid="ignore"):
        R = np.array(model.residuals(theta, X, Y), float).reshape(n, -1)
    k = R.shape[1]
    clip_residuals(R, privacy.row_norms(X), B, d)
    G = (X[:, :, None] * R[:, None, :]).reshape(n, d * k)
    S = G.T @ G
    if math.isfinite(B):
        aX, P = clipped_hessian_rows(model, theta, X, B * B)
        H = model.hessian(theta, aX, P=P) * n
    else:
        H = model.hessian(theta, X) * n
    return S, H


def _reference_release(model, Xc, Yc, theta, B, mu, rng):
    from fedgdp.realdata import moments as _moments

    d, k = theta.shape
    D = d * k
    sizes = np.array([len(x) for x in Xc], dtype=np.int64)
    private = 0 < mu < math.inf and math.isfinite(B)
    ledger, sds = None, [np.zeros(len(Xc)), np.zeros(len(Xc))]
    if private:
        cal = privacy.calibrate(_moments.release_plan(np.full((1, len(Xc)), B), k), mu=mu)
        ledger, sds = cal.ledger, [np.asarray(s, float).reshape(-1) for s in cal.sigmas]
    S, H = np.zeros((D, D)), np.zeros((D, D))
    for i, (X, Y) in enumerate(zip(Xc, Yc)):
        Si, Hi = _reference_client_moments(model, theta, X, Y, B)
        if private:
            Si = Si + sds[0][i] * symmetric(standard_normal(rng, (D, D)))
            Hi = Hi + sds[1][i] * symmetric(standard_normal(rng, (D, D)))
        S += Si
        H += Hi
    return inference_.Moments(S, H, sizes, d, k, "private release" if private else "exact",
                              float(np.sqrt(np.sum(sds[0] ** 2))), float(np.sqrt(np.sum(sds[1] ** 2))),
                              mu if private else 0.0), ledger


# ------------------------------------------------------------ the comparisons
def _data(family, sizes, p=5, seed=0):
    rng = np.random.default_rng(seed)
    N = int(np.sum(sizes))
    X = rng.standard_normal((N, p))
    eta = 0.3 + X @ np.linspace(0.6, -0.6, p)
    y = (rng.random(N) < 1 / (1 + np.exp(-eta))).astype(int) if family == "logistic" else rng.poisson(np.exp(eta - 1))
    clients = rng.permutation(np.repeat(np.arange(len(sizes)), sizes))     # rows of a client scattered
    return X, y, clients


def _fit(family, X, y, clients, mu, **kw):
    est = FederatedGLM(family, classes=[0, 1] if family == "logistic" else None, mu=mu, method="fedirls",
                       random_state=7, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, y, clients)


def _close(a, b, scale=None):
    a, b = np.asarray(a, float), np.asarray(b, float)
    scale = max(float(np.max(np.abs(b))) if scale is None else scale, 1e-300)
    np.testing.assert_allclose(a, b, rtol=0, atol=RTOL * scale)


#: Private Poisson fits release their count scale first, which the replaced code did not: their one-pass code
#: is held to the loop oracle (tests/api/test_fedirls.py), in groups of every size; here at mu = inf only
CASES = [("logistic", [300] * 6, 2.0), ("logistic", [40, 700, 90, 1500, 60], 2.0), ("logistic", [2000], 2.0),
         ("logistic", [25] * 200, 8.0), ("poisson", [400, 900, 250, 1200], math.inf),
         ("logistic", [300] * 6, math.inf)]


@pytest.mark.parametrize("family,sizes,mu", CASES)
@pytest.mark.parametrize("group_rows", [1 << 16, 500])
def test_one_pass_fedirls_matches_the_replaced_code(monkeypatch, family, sizes, mu, group_rows):
    """Estimate, noise covariance, last step, rounds and the inference moments: the one-pass fit against
    the client-by-client code it replaced, on the same rows and seed (groups of clients of every size:
    `GROUP_ROWS` 500 puts several small clients in a group and a large one alone)."""
    X, y, clients = _data(family, sizes)
    monkeypatch.setattr(segments, "GROUP_ROWS", group_rows)
    new = _fit(family, X, y, clients, mu)
    with monkeypatch.context() as mp:
        mp.setattr(FedIRLS, "run", _reference_run)
        mp.setattr(inference_, "release", _reference_release)
        old = _fit(family, X, y, clients, mu)
    assert new.method_ == old.method_ == "fedirls"
    _close(new.theta_, old.theta_)
    for key, value in old.fit_info_.items():          # the last step, its z-scores, the rounds, ...
        if isinstance(value, (float, np.ndarray)) and np.all(np.isfinite(value)):
            # a step (``change``) against the estimate's scale: at mu = inf Newton runs to a step of rounding
            # size (about 1e-16), which the two codes' roundings set
            _close(new.fit_info_[key], value, float(np.max(np.abs(old.theta_))) if key == "change" else None)
        else:
            assert str(new.fit_info_[key]) == str(value), key
    if old.noise_cov_ is not None:
        _close(new.noise_cov_, old.noise_cov_)
    assert new.fit_info_["status"] == old.fit_info_["status"]
    assert new.communication_ == old.communication_
    _close(new.inference_.S, old.inference_.S)
    _close(new.inference_.H, old.inference_.H)
    assert new.inference_.source == old.inference_.source
    np.testing.assert_array_equal(new.client_sizes_, old.client_sizes_)


def test_groups_cover_every_client_once():
    """`client_groups`: consecutive runs covering every row and client once, none above the limit
    unless one client alone."""
    sizes = np.array([5, 70000, 3, 3, 65536, 1, 40000, 40000])
    groups = segments.client_groups(sizes)
    ends = np.cumsum(sizes)
    got = np.concatenate([lo + e for lo, _, e in groups])
    np.testing.assert_array_equal(got, ends)
    for lo, hi, e in groups:
        assert hi - lo <= segments.GROUP_ROWS or len(e) == 1
        assert lo + e[-1] == hi


def test_stacked_is_a_view_of_consecutive_blocks_only():
    A = np.arange(60.0).reshape(20, 3)
    blocks = [A[2:5], A[5:9], A[9:20]]
    S = fedirls.stacked(blocks)
    assert np.shares_memory(S, A)
    np.testing.assert_array_equal(S, A[2:20])
    gap = [A[0:3], A[4:8]]
    S2 = fedirls.stacked(gap)
    assert not np.shares_memory(S2, A)
    np.testing.assert_array_equal(S2, np.vstack(gap))
    own = [np.ones((2, 3)), np.zeros((1, 3))]
    np.testing.assert_array_equal(fedirls.stacked(own), np.vstack(own))
    D = np.random.default_rng(0).standard_normal((50, 2))          # the estimator's: one copy, blocks of it
    rows = estimator.client_rows(np.repeat([0, 1, 2], [10, 25, 15]), 3)
    S3 = fedirls.stacked(estimator.client_blocks(D, rows))
    assert np.shares_memory(S3, D) and S3.shape == D.shape
    np.testing.assert_array_equal(S3, D)


def test_client_rows_is_flatnonzero_per_client():
    rng = np.random.default_rng(3)
    index = rng.integers(0, 37, size=5000)
    index[index == 11] = 12                # a client with no rows keeps its (empty) place
    rows = estimator.client_rows(index, 37)
    for i in range(37):
        np.testing.assert_array_equal(rows[i], np.flatnonzero(index == i))
    blocks = estimator.client_blocks(np.arange(5000)[np.concatenate(rows)], rows)
    for i in range(37):
        np.testing.assert_array_equal(blocks[i], rows[i])


@pytest.mark.parametrize("y,domain", [(np.array([0, 1, 1, 0]), [0, 1]), (np.array([0.0, 1.0, 1.0]), [0, 1]),
                                      (np.array([True, False]), [0, 1]), (np.array(["b", "a", "b"]), ["a", "b"]),
                                      (np.array([2, 5, 9, 5]), [9, 2, 5]), (np.array([1, 0], dtype=object), [0, 1])])
def test_label_codes_match_the_loop(y, domain):
    """`np.searchsorted` codes against the dictionary lookup they replaced."""
    dom = checks._label_domain(domain, "multinomial" if len(domain) > 2 else "logistic")
    index = {v: i for i, v in enumerate(dom.tolist())}
    expect = [index.get(v, -1) for v in y.tolist()]
    np.testing.assert_array_equal(checks._public_codes(y, dom)[1], expect)


@pytest.mark.parametrize("y", [np.array([0, 2, 1]), np.array([0.5, 1.0]), np.array(["a", "c"]), np.array([-1, 0])])
def test_label_outside_the_domain_is_refused_naming_its_row(y):
    dom = checks._label_domain(["a", "b"] if y.dtype.kind == "U" else [0, 1], "logistic")
    bad = next(i for i, v in enumerate(y.tolist()) if v not in dom.tolist())
    with pytest.raises(ValueError, match=rf"at row {bad} \(from 0"):
        checks._public_codes(y, dom)


def test_column_moments_match_numpy():
    """Mean and sd in blocks against ``X.mean``/``X.std`` (1e-12: only the summation order differs)."""
    X = np.random.default_rng(1).normal(3.0, 2.0, size=(10007, 4))
    mean, sd = diagnostics.column_moments(X, block=1000)
    np.testing.assert_allclose(mean, X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(sd, X.std(axis=0), rtol=1e-12)


def test_fedirls_releases_unchanged_per_client():
    """The per-client releases the audit moves records through: the refactored functions give the
    replaced code's numbers exactly (the same operations)."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((300, 4))
    from fedgdp.core.glm import matrix_model

    model = matrix_model("binary")
    theta = np.array([[0.3], [-0.2], [0.1], [0.5]])
    C = moment_bound(4)
    a = privacy.clip_factors(privacy.row_norms(X), math.sqrt(C), 4)
    A = X * a[:, None]
    np.testing.assert_array_equal(client_second_moments(X, C), A.T @ A / 300)
    Hc = hessian_bound(model, 4)
    aX, P = model.clipped_hessian_rows(theta, X, Hc)
    c = model.curvature(P, np.ones_like(P))
    np.testing.assert_array_equal(client_curvature(model, theta, X, Hc), (aX * c).T @ aX / 300)


def test_by_blocks_gives_the_same_values():
    """A row-wise function block by block: the very values of the whole call (each row's value from its row)."""
    X = np.random.default_rng(4).standard_normal((1003, 7)) * np.exp(np.linspace(-400, 400, 1003))[:, None]
    np.testing.assert_array_equal(segments.by_blocks(privacy.row_norms, X, rows=100), privacy.row_norms(X))


# ------------------------------------------------- whitening on the fly against the materialised whitened design
def _whitened_case(seed=5, n=700, d=6):
    from fedgdp.core.glm import matrix_model
    from fedgdp.realdata import FoldData

    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.standard_normal((n, d - 1)) * np.linspace(0.5, 3.0, d - 1)])
    X[:5] *= 40.0                                              # rows the clips scale
    model = matrix_model("binary")
    Y = model.targets(rng.integers(0, 2, n))
    M = X.T @ X / n + 0.3 * np.eye(d)
    Wt = np.linalg.inv(np.linalg.cholesky(M)).T
    fd = FoldData(model, [X], [Y], mu=1.0, B=1.5, clip={"rule": "fixed", "value": 1.5})
    return model, fd, X, Y, Wt, rng.standard_normal((d, 1)) * 0.5, np.array([100, 350, n])


def test_whitened_norms_bound_the_exact_whitened_rows():
    """The bound is above each row's exact whitened norm (exact rationals on a few rows) and within 1e-13 of
    the computed whitened row's norm."""
    from fractions import Fraction

    _, _, X, _, Wt, _, _ = _whitened_case()
    bound = fedirls.whitened_norms(X, Wt)
    computed = privacy.row_norms(X @ Wt)
    np.testing.assert_allclose(bound, computed, rtol=1e-13)
    assert np.all(bound >= computed)
    for j in (0, 3, 10, 500):
        exact = [sum(Fraction(float(X[j, i])) * Fraction(float(Wt[i, c])) for i in range(X.shape[1]))
                 for c in range(Wt.shape[1])]
        assert Fraction(float(bound[j])) ** 2 >= sum(v * v for v in exact)


def test_on_the_fly_releases_match_the_materialised_whitened_design():
    """`client_gradients` and `client_curvatures` against the code they replace: the whitened rows made
    (``X Wt``) and the clipped releases computed on them (1e-12: the same quantities in another rounding)."""
    model, fd, X, Y, Wt, theta, ends = _whitened_case()
    Xw = X @ Wt
    xw_norm = privacy.row_norms(Xw)
    Hc = hessian_bound(model, X.shape[1])
    xnorm = fedirls.whitened_norms(X, Wt)
    old_g = segments.cross_means(Xw, fd.clipped_residuals(theta, Xw, Y, xw_norm), ends)
    new_g = fedirls.client_gradients(fd, theta, Wt, X, Y, xnorm, ends)
    aX, c = fedirls.curvature_rows(model, theta, Xw, Hc, Y, fd.bound, xw_norm)
    old_h = segments.grams(aX, ends, c[:, 0])
    new_h = fedirls.client_curvatures(model, theta, Wt, X, Hc, Y, fd.bound, xnorm, ends)
    for new, old in ((new_g, old_g), (new_h, old_h)):
        np.testing.assert_allclose(new, old, rtol=0, atol=1e-12 * float(np.max(np.abs(old))))
    clipped = fd.clipped_residuals(theta, Xw, Y, xw_norm)
    assert np.any(np.abs(clipped) < np.abs(model.residuals(theta, Xw, Y)) * 0.9)   # the clip is exercised


def test_congruent_is_wt_a_wt_per_matrix():
    rng = np.random.default_rng(6)
    A, Wt = rng.standard_normal((7, 4, 4)), rng.standard_normal((4, 4))
    np.testing.assert_allclose(fedirls.congruent(A, Wt), np.einsum("ai,nab,bj->nij", Wt, A, Wt), rtol=1e-13)
