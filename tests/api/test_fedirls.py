"""FedIRLS, `FederatedGLM`'s default for logistic and Poisson: its loop oracle, its privacy plan and
audit, its statistics (the MLE plus noise), and what the summary withholds."""
from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

from fedgdp import FederatedGLM
from fedgdp.api.diagnostics import ConvergenceWarning, FeatureScaleWarning
from fedgdp.core import privacy
from fedgdp.core.glm import POISSON, matrix_model
from fedgdp.realdata import FoldData, get_method


def _data(family="logistic", N=4000, m=8, p=4, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((N, p))
    truth = np.r_[0.2 if family == "logistic" else -1.0, np.linspace(0.5, -0.5, p)]
    eta = truth[0] + Z @ truth[1:]
    y = (rng.random(N) < 1 / (1 + np.exp(-eta))).astype(int) if family == "logistic" else rng.poisson(np.exp(eta))
    return Z * scale, y, np.repeat(np.arange(m), N // m), truth


# ------------------------------------------------------------------ the oracle
def _reference(model, Xc, Yc, mu, B, T, radius, rng):
    """FedIRLS written out plainly (client loops, each formula restated), drawing the same noise in
    the same order: the oracle of `fedgdp.methods.FedIRLS` (the design's first column the intercept)."""
    m, d = len(Xc), Xc[0].shape[1]
    n = np.array([len(x) for x in Xc], float)
    w = n / n.sum()
    counts = model is POISSON
    early = [1.5 ** t for t in range(T - 1)]
    later = [1.5 ** t for t in range(1, T - 1)]
    g_share = [0.2 * e / sum(early) for e in early]
    c_share = {t + 2: 0.2 * e / sum(later) for t, e in enumerate(later)}
    g_share.append(1 - 0.05 - 0.2 - (0.2 if later else 0.0) - (0.05 if counts else 0.0))
    C = 4.0 * d
    w0 = 0.25 if model.k == 1 and model is not POISSON else 1.0
    Hc = 2.25 * w0 * d * (5.0 if counts else 1.0)
    W, s = 1.0, 1.0                 # counts: the released count scale and the residuals' scale
    if counts:
        c, mom, noise_var = 20.0, np.zeros(2), 0.0
        for i in range(m):
            y = np.clip(Yc[i][:, 0], 0.0, c)
            sd = c * math.sqrt(1 + c * c) / (n[i] * mu * math.sqrt(0.05))
            mom += w[i] * (np.array([y.mean(), (y * y).mean()]) + sd * rng.standard_normal((2, 1))[:, 0])
            noise_var += (w[i] * sd) ** 2
        # the mean count at least twice its noise sd (unresolved below)
        W, s = min(max(mom[0], 0.01, 2 * math.sqrt(noise_var)), c), min(max(1.0, math.sqrt(max(mom[1], 0.0))), c)

    def sym(Z):
        U = np.triu(Z)
        return U + np.triu(U, 1).T

    M = np.zeros((d, d))
    for i in range(m):
        norms = np.linalg.norm(Xc[i], axis=1)
        a = privacy.clip_factors(norms, math.sqrt(C), d)
        A = Xc[i] * a[:, None]
        sd = math.sqrt(2) * C / (n[i] * mu * math.sqrt(0.05))
        M += w[i] * (A.T @ A / n[i] + sd * sym(rng.standard_normal((d, d))))
    nu = 2 * math.sqrt(d) * math.sqrt(sum((w[i] * math.sqrt(2) * C / (n[i] * mu * math.sqrt(0.05))) ** 2
                                         for i in range(m)))
    lam = nu / (nu + 0.5)
    Ms = (1 - lam) * (M + M.T) / 2 + lam * np.eye(d)
    ev, V = np.linalg.eigh(Ms)
    L = np.linalg.cholesky((V * np.maximum(ev, 0.05)) @ V.T)
    Wt = np.linalg.inv(L).T
    theta, H = np.zeros((d, 1)), w0 * np.eye(d)
    if counts:                          # start at the intercept-only fit, curvature W I there
        theta, H = L.T @ np.r_[math.log(W), np.zeros(d - 1)][:, None], W * np.eye(d)
    for t in range(1, T + 1):
        g = np.zeros((d, 1))
        for i in range(m):              # per-sample gradients clipped to B s, released in units of s
            X = Xc[i] @ Wt
            r = model.residuals(theta, X, Yc[i]).reshape(-1, 1)
            f = privacy.clip_factors(np.linalg.norm(X, axis=1) * np.abs(r[:, 0]), B * s, d)
            sd = 2 * B / (n[i] * mu * math.sqrt(g_share[t - 1]))
            g += w[i] * s * ((X * (r * f[:, None])).sum(0)[:, None] / (n[i] * s) + sd * rng.standard_normal((d, 1)))
        if t in c_share:
            H = np.zeros((d, d))
            for i in range(m):          # per-sample curvatures clipped to H_c W, released in units of W
                X = Xc[i] @ Wt
                r = model.residuals(theta, X, Yc[i]).reshape(-1)
                unclipped = privacy.clip_factors(np.linalg.norm(X, axis=1) * np.abs(r), B * s, d) == 1.0
                aX, P = model.clipped_hessian_rows(theta, X * unclipped[:, None], Hc * W)
                sd = math.sqrt(2) * Hc / (n[i] * mu * math.sqrt(c_share[t]))
                H += w[i] * W * (model.hessian(theta, aX, P=P) / W + sd * sym(rng.standard_normal((d, d))))
        ev, V = np.linalg.eigh((H + H.T) / 2)
        step = V @ ((V.T @ g) / np.maximum(ev, 0.05 * w0)[:, None])
        decrement = math.sqrt(max(float(g[:, 0] @ step[:, 0]), 0.0))
        if decrement > 1.0:                     # damped Newton far from the MLE
            step /= 1 + decrement
        if np.linalg.norm(step) > radius:
            step *= radius / np.linalg.norm(step)
        theta = theta - step
    return Wt @ theta


@pytest.mark.parametrize("family, extra", [("logistic", 0.0), ("poisson", 0.0), ("poisson", 6.0)])
@pytest.mark.parametrize("group_rows", [1 << 16, 500])
def test_fedirls_matches_its_loop_oracle(monkeypatch, family, extra, group_rows):
    """The method's estimate equals the plain loops' within 1e-10, drawing the same noise (float64); counts
    of mean about 0.5 and, with ``extra``, about 6.5 (the residuals' scale s above 1); clients in one group
    of rows and one by one (`GROUP_ROWS` 500, clients of 300)."""
    from fedgdp.core import segments

    monkeypatch.setattr(segments, "GROUP_ROWS", group_rows)
    Z, y, clients, _ = _data(family, N=900, m=3, p=3)
    y = y + np.random.default_rng(1).poisson(extra, len(y))
    model = matrix_model("binary") if family == "logistic" else POISSON
    X = np.column_stack([np.ones(len(Z)), Z])
    Y = model.targets(y) if family == "logistic" else POISSON.targets(y.astype(float))
    Xc, Yc = [X[clients == i] for i in range(3)], [Y[clients == i] for i in range(3)]
    B = 3.0
    fd = FoldData(model, Xc, Yc, mu=1.5, B=B, clip={"rule": "fixed", "value": B}, intercept=True)
    meth = get_method("fedirls")
    fit = meth.fit(fd, {"T": 5, "radius": 4.0}, np.random.default_rng(7))
    ref = _reference(model, Xc, Yc, 1.5, B, 5, 4.0, np.random.default_rng(7))
    np.testing.assert_allclose(fit.theta, ref, rtol=0, atol=1e-10)


def test_the_plan_composes_to_mu_and_its_shares_sum_to_one():
    """The shares of mu^2 are exact fractions summing to 1, later rounds get more, and the ledger
    composes to mu for every client."""
    for T, counts in [(T, c) for T in (2, 3, 5, 8) for c in (False, True)]:
        mom, grads, curvs = privacy.irls_shares(T, counts)
        assert mom + sum(grads) + sum(curvs) + privacy.count_share(counts) == Fraction(1)
        assert len(grads) == T and len(curvs) == max(T - 2, 0)
        assert all(a < b for a, b in zip(grads[:-1], grads[1:]))
    Z, y, clients, _ = _data(N=600, m=3)
    est = FederatedGLM(classes=[0, 1], mu=1.7, inference_share=0).fit(Z, y, clients)
    assert est.method_ == "fedirls"
    assert est.privacy_.certified
    mus = np.sqrt(sum(r.count * np.asarray(r.mu, float) ** 2 for r in est.privacy_.ledger.releases))
    np.testing.assert_allclose(mus, 1.7, rtol=1e-12)


def test_the_poisson_default_is_fedirls_where_its_curvature_is_not_noise_and_spends_mu():
    """Poisson's ``auto``: FedIRLS on large clients, its ledger holding the count scale at its recorded
    sensitivity ``c sqrt(1 + c^2) / n_i`` and composing to mu; the paper's methods on small clients, where the
    count-scaled curvature would be mostly noise (`fedgdp.api.forecast.irls_default`, public inputs)."""
    from fedgdp.api.forecast import irls_default
    from fedgdp.methods import fedirls

    Z, y, clients, _ = _data("poisson", N=20000, m=4)
    est = FederatedGLM("poisson", mu=2.0, inference_share=0, random_state=0).fit(Z, y, clients)
    assert est.method_ == "fedirls" and est.fit_info_["status"] == "converged"
    (scale,) = [r for r in est.privacy_.ledger.releases if r.stage == privacy.COUNT_SCALE]
    c = fedirls.COUNT_CLIP
    np.testing.assert_allclose(np.ravel(scale.sensitivity), c * math.sqrt(1 + c * c) / 5000, rtol=1e-12)
    mus = np.sqrt(sum(r.count * np.asarray(r.mu, float) ** 2 for r in est.privacy_.ledger.releases))
    np.testing.assert_allclose(mus, 2.0, rtol=1e-12)
    assert not irls_default("poisson", np.array([93, 159, 417, 556, 886, 1047, 213, 129]), 10, 2.0)


def test_every_fedirls_release_is_audited_within_its_sensitivity():
    """The audit searches each FedIRLS release (second moments, gradients, curvatures) and finds no
    pair above its recorded sensitivity, and reaches it (ratio >= 0.99: the bound is tight)."""
    from fedgdp.audit.glm import audit_real
    from fedgdp.audit.run import default_targets

    (target,) = [t for t in default_targets() if t.method == "fedirls"]
    rows = audit_real(target, 12, 0, local_iters=5)
    stages = {r.release for r in rows}
    assert privacy.SECOND_MOMENTS in stages and "curvature (round 2)" in stages and "gradient (round 5)" in stages
    for r in rows:
        assert r.certified and r.ratio <= 1 + 1e-9, r
        assert r.ratio >= 0.99, r


# ------------------------------------------------------------------ statistics
@pytest.mark.slow
def test_the_default_fit_is_the_mle_plus_noise():
    """Logistic, 20 clients of 2,000 rows, d = 6, mu = 2, 8 seeds: the fits' mean lies within 0.35 of
    the MLE's se of it on every coefficient (the noise alone moves a mean of 8 by about 0.5 / sqrt(8)
    = 0.18 se here, so 0.35 is 2 of its sds), every fit converged, and the 95% intervals cover the
    truth in 0.85-1 of the (coefficient, fit) pairs (binomial sd about 0.03 over 48 pairs)."""
    import statsmodels.api as sm

    Z, y, clients, truth = _data(N=40000, m=20, p=5, seed=3)
    res = sm.GLM(y, sm.add_constant(Z), family=sm.families.Binomial()).fit()
    fits, cover = [], []
    for r in range(8):
        est = FederatedGLM(classes=[0, 1], mu=2, random_state=r).fit(Z, y, clients)
        assert est.fit_info_["status"] == "converged"
        s = est.summary()
        fits.append(est.theta_[:, 0])
        cover.append((s["ci_low"] <= truth) & (truth <= s["ci_high"]))
    bias = np.abs(np.mean(fits, axis=0) - res.params) / res.bse
    assert bias.max() <= 0.35, bias
    assert 0.85 <= np.mean(cover) <= 1.0


@pytest.mark.parametrize("family", ["logistic", "poisson"])
def test_at_mu_inf_the_default_is_fedirls_and_the_mle(family):
    """Non-private, ``auto`` runs FedIRLS, Newton to convergence, for both families: statsmodels' MLE
    to 1e-8 (both solve the same score equations to 1e-12)."""
    import statsmodels.api as sm

    Z, y, clients, _ = _data(family, N=3000, m=5, seed=1)
    est = FederatedGLM(family, classes=[0, 1] if family == "logistic" else None, mu=math.inf).fit(Z, y, clients)
    assert est.method_ == "fedirls"
    fam = sm.families.Binomial() if family == "logistic" else sm.families.Poisson()
    res = sm.GLM(y, sm.add_constant(Z), family=fam).fit(tol=1e-12)
    np.testing.assert_allclose(est.theta_[:, 0], res.params, atol=1e-8)
    assert est.fit_info_["status"] == "converged"


# ------------------------------------------------------------------ what is withheld
def test_an_unconverged_fit_withholds_z_p_and_intervals_and_says_why():
    """FedSGD with K = 2 stops far short: every z, p and interval is NaN, the note and the header
    say why, and withheld='show' prints them with the note kept."""
    Z, y, clients, _ = _data(N=2000, m=4)
    with pytest.warns(ConvergenceWarning):
        est = FederatedGLM(classes=[0, 1], method="fedsgd", method_settings={"K": 2}, mu=2,
                           random_state=0).fit(Z, y, clients)
    s = est.summary()
    assert s[["z", "p", "ci_low", "ci_high"]].isna().all().all()
    assert s["note"].str.startswith("fit not converged").all()
    assert "WITHHELD" in s.header and "not converged" in s.header
    assert np.isfinite(est.conf_int(withheld="show").to_numpy()).all()
    shown = est.summary(withheld="show")
    assert np.isfinite(shown["p"]).all() and (shown["note"] != "").all()


def test_raw_unit_features_withhold_every_z():
    """Features in raw units (sd 40) fail the scale check: no finite z, p or interval."""
    Z, y, clients, _ = _data(N=2000, m=4, scale=40.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = FederatedGLM(classes=[0, 1], mu=2, random_state=0).fit(Z, y, clients)
    with pytest.warns(FeatureScaleWarning):
        FederatedGLM(classes=[0, 1], mu=2, random_state=0).fit(Z, y, clients)
    s = est.summary()
    assert not np.isfinite(s[["z", "p", "ci_low", "ci_high"]].to_numpy()).any()
    assert s["note"].str.contains("features not standardised").all()


def test_noise_that_swamps_one_coefficient_withholds_that_one_only():
    """A large intercept cannot hide a useless slope: the note is per coefficient."""
    from fedgdp.api.diagnostics import swamped

    theta = np.array([[2.0], [0.05], [0.8]])
    se_n = np.array([[0.1], [0.3], [0.1]])
    se_s = np.array([[0.05], [0.05], [0.05]])
    assert swamped(theta, se_n, se_s)[:, 0].tolist() == [False, True, False]


def test_the_advice_names_settings_the_method_accepts_and_following_it_works():
    """A FedIRLS fit cut to T = 2 rounds on a strong signal does not converge; its advice names T,
    which FedIRLS accepts, and the fit with the T it names... more rounds converges."""
    Z, y, clients, _ = _data(N=20000, m=4, p=4, seed=2)
    Z = Z * 2.0                  # strong signal (linear predictor sd about 2): two Newton rounds stop short
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = FederatedGLM(classes=[0, 1], method="fedirls", method_settings={"T": 2}, mu=50,
                           random_state=0).fit(Z, y, clients)
    assert est.fit_info_["status"] == "not converged"
    assert "'T'" in est.fit_info_["advice"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = FederatedGLM(classes=[0, 1], method="fedirls", method_settings={"T": 6}, mu=50,
                             random_state=0).fit(Z, y, clients)
    assert again.fit_info_["status"] == "converged"


def test_fewer_rows_than_coefficients_is_refused_before_any_release():
    """A one-row data set names the counts; the budget is not charged."""
    from fedgdp.api.budget import PrivacyBudget

    budget = PrivacyBudget(mu=2)
    with pytest.raises(ValueError, match="too few rows: 1 row"):
        FederatedGLM(classes=[0, 1], mu=2, budget=budget).fit(np.ones((1, 3)), [1], "single")
    assert budget.spent == 0


def test_the_paper_methods_advice_names_their_own_steps_and_following_it_works():
    """FedHybrid stopped after 1 + 1 steps (mu = inf: compared with the pooled fit) names K1 or K2, the
    settings it accepts (not K, which it refuses), and with K2 = 400 the same fit converges."""
    Z, y, clients, _ = _data(N=2000, m=4, seed=5)
    with pytest.warns(ConvergenceWarning) as rec:
        FederatedGLM(classes=[0, 1], method="fedhybrid", method_settings={"K1": 1, "K2": 1},
                     mu=math.inf).fit(Z, y, clients)
    advice = [str(w.message) for w in rec if issubclass(w.category, ConvergenceWarning)][0]
    assert "K1 or K2" in advice and "method_settings K)" not in advice
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = FederatedGLM(classes=[0, 1], method="fedhybrid", method_settings={"K1": 1, "K2": 400},
                           mu=math.inf).fit(Z, y, clients)
    assert est.fit_info_["status"] == "converged"


def test_fedirls_poisson_releases_stay_within_their_sensitivity():
    """The audit searches FedIRLS on the binary task (and the count scale); Poisson's releases (a count's residual
    and curvature have no bound but the clips) are checked here, at the count scale 1 and in the units of a count
    scale W = 3, s = 4: one record of a random client replaced by extreme ones (huge counts, huge or tiny
    features) moves each release by at most its recorded sensitivity (float slack 1e-9)."""
    from fedgdp.methods import fedirls

    rng = np.random.default_rng(0)
    n, d, B = 20, 4, 3.0
    X = np.column_stack([np.ones(n), rng.standard_normal((n, d - 1))])
    Y = POISSON.targets(rng.poisson(1.0, n).astype(float))
    plan = {s.stage: float(np.ravel(s.sensitivity)[0]) for s in privacy.plan_fedirls(
        B=B, n=float(n), T=5, moment_bound=fedirls.moment_bound(d), hessian_bound=fedirls.hessian_bound(POISSON, d),
        count_clip=fedirls.COUNT_CLIP)}
    fd = FoldData(POISSON, [X], [Y], mu=1.0, B=B, clip={"rule": "fixed", "value": B})
    Hc = fedirls.hessian_bound(POISSON, d)
    W, s = 3.0, 4.0                     # a count scale and residuals' scale (public: released before)

    def releases(Xr, Yr, theta):
        f = FoldData(POISSON, [Xr], [Yr], mu=1.0, B=B, clip={"rule": "fixed", "value": B})
        from fedgdp.realdata.clipping import clipped_residuals

        scaled = clipped_residuals(POISSON, theta, Xr, Yr, B * s)
        return {privacy.SECOND_MOMENTS: fedirls.client_second_moments(Xr, fedirls.moment_bound(d)),
                privacy.COUNT_SCALE: fedirls.count_moments(Yr, [n], fedirls.COUNT_CLIP),
                "gradient (round 1)": f.gradient(0, theta),
                "gradient (round 2)": Xr.T @ scaled / n / s,            # in units of s: clipped to B s, over s
                "curvature (round 2)": fedirls.client_curvature(POISSON, theta, Xr, Hc, Yr, f.bound),
                "curvature (round 3)": fedirls.client_curvature(POISSON, theta, Xr, Hc * W, Yr, B * s) / W}

    worst = 0.0
    for theta in (np.zeros((d, 1)), 0.5 * rng.standard_normal((d, 1)), np.r_[[[3.0]], np.zeros((d - 1, 1))]):
        base = releases(X, Y, theta)
        for scale in (1e-3, 1.0, 30.0, 1e6):
            for y in (0.0, 1.0, 77.0, 1e6):
                Xr, Yr = X.copy(), Y.copy()
                Xr[0] = np.r_[1.0, scale * rng.standard_normal(d - 1)]
                Yr[0] = y
                with np.errstate(all="ignore"):
                    moved = releases(Xr, Yr, theta)
                for stage, value in moved.items():
                    diff = value - base[stage]
                    norm = np.linalg.norm(np.triu(diff)) if diff.ndim == 2 and diff.shape[0] == diff.shape[1] \
                        and diff.shape[1] > 1 else np.linalg.norm(diff)
                    worst = max(worst, norm / plan[stage])
    assert fd.bound == B
    assert worst <= 1 + 1e-9 and worst > 0.5, worst


def test_the_summary_says_what_small_clients_contribute():
    """Four clients of 20 rows beside eight of 490: each adds the noise variance of any client (its noise sd
    scales as 1/n_i, its weight as n_i), so the header says 4 of 12 clients carry 2.0% of the rows and 33% of
    the noise variance; equal clients get no such line."""
    Z, y, _, _ = _data(N=4000, p=3)
    clients = np.r_[np.repeat(np.arange(8), 490), np.repeat([8, 9, 10, 11], 20)]
    head = FederatedGLM(classes=[0, 1], mu=2).fit(Z, y, clients).summary().header
    assert "small clients: 4 of 12" in head and "carry 2.0% of the rows and 33% of the noise variance" in head
    equal = FederatedGLM(classes=[0, 1], mu=2).fit(Z, y, np.repeat(np.arange(8), 500))
    assert "small clients" not in equal.summary().header
    assert "small clients" not in FederatedGLM(classes=[0, 1], mu=math.inf).fit(Z, y, clients).summary().header


def test_the_replayed_noise_is_the_last_gradients_where_newton_is_exact():
    # A = w0 I and no curvature noise: every replayed step lands on the surrogate's minimum but for that
    # round's gradient noise, so the estimate's covariance is the last round's variance over w0^2. Tolerance:
    # 400 replays give each diagonal entry a relative sd of sqrt(2 / 400) = 7%; 25% is over 3 sds.
    from fedgdp.methods.fedirls import REPLAYS, replayed_noise

    d, w0 = 6, 0.25
    theta = np.linspace(-0.5, 0.5, d)
    var = [1e-3, 2e-3, 4e-4]
    C, S = replayed_noise(w0 * np.eye(d), theta, var, [math.nan] * 3, w0, 0.0125, radius=4.0)
    assert REPLAYS >= 400
    np.testing.assert_allclose(np.diag(C), var[-1] / w0 ** 2, rtol=0.25)
    # the last step undoes round 2's noise and adds round 3's: variance (v_2 + v_3) / w0^2
    np.testing.assert_allclose(np.diag(S), (var[-2] + var[-1]) / w0 ** 2, rtol=0.25)
    again = replayed_noise(w0 * np.eye(d), theta, var, [math.nan] * 3, w0, 0.0125, 4.0)
    assert np.array_equal(C, again[0]) and np.array_equal(S, again[1])


def test_the_replayed_noise_sees_a_curvature_the_noise_swamps():
    # One curvature direction at 0.02. Without curvature noise the replay states the last gradient's noise
    # through H (within 25%: 400 replays, 7% relative sd per entry); with curvature noise of sd 0.02 per entry
    # the noisy steps along that direction swing (down to the floor, 0.0125), which that formula misses: the
    # replay must state more than twice it there (measured 6.8 times).
    from fedgdp.methods.fedirls import replayed_noise

    d, w0 = 5, 0.25
    H = np.diag([0.02, 0.2, 0.2, 0.2, 0.2])
    theta = np.full(d, 0.3)
    var = [1e-5] * 5
    formula = var[-1] / np.diag(H) ** 2
    exact = replayed_noise(H, theta, var, [math.nan, 0.0, 0.0, 0.0, math.nan], w0, 0.0125, radius=4.0)[0]
    np.testing.assert_allclose(np.diag(exact), formula, rtol=0.25)
    noisy = replayed_noise(H, theta, var, [math.nan, 0.02, 0.02, 0.02, math.nan], w0, 0.0125, radius=4.0)[0]
    assert noisy[0, 0] > 2 * formula[0]
