"""fedgdp.forecast (fedgdp.api.forecast): the privacy noise of each method from public inputs,
against the noise a fit actually carries; method="auto", the public clip and the noise warnings."""
import functools
import math
import warnings

import numpy as np
import pytest

import fedgdp
from fedgdp import FederatedGLM
from fedgdp.api import forecast as fc
from fedgdp.api.diagnostics import ClipWarning, FeatureScaleWarning, NoiseDominatedWarning
from fedgdp.core import privacy, theory

#: The noiseless reference: the same fit, same data, same clipping bound, mu so large that its noise
#: is 1e-8 of mu = 1's. (At mu = inf nothing is clipped, so the difference would add the clipping's bias,
#: which is not noise: at mu = 5 on 400-row clients that bias is as large as the noise.)
MU_REF = 1e8


def _data(family: str, sizes, p: int, rng):
    """Standardised features, modest effects (the curvature model's setting: Poisson means about 1)."""
    n = sum(sizes)
    X = rng.standard_normal((n, p))
    beta = np.full(p, 0.5 / math.sqrt(p))
    eta = X @ beta
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int) if family == "logistic" else rng.poisson(np.exp(eta))
    return X, y, np.repeat(np.arange(len(sizes)), sizes)


def _fit(family, sizes: tuple, p, mu, seed, method, B):
    """One fit's coefficients on `_data` of ``seed`` (all of mu to the fit)."""
    X, y, cl = _data(family, sizes, p, np.random.default_rng(seed))
    kw = dict(family=family, method=method, clip=B, random_state=seed, inference_share=0)
    if family == "logistic":
        kw["classes"] = [0, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return FederatedGLM(mu=mu, **kw).fit(X, y, cl).theta_


#: The noiseless fit, the same at every mu of a grid row (same data, method and bound): fitted once.
_noiseless = functools.lru_cache(maxsize=None)(lambda family, sizes, p, seed, method, B:
                                               _fit(family, sizes, p, MU_REF, seed, method, B))


def _observed(family, sizes, p, mu, seeds, bounds):
    """RMS over coefficients and seeds of (private fit - the noiseless fit) per method, each at its clipping
    bound (``bounds``: method -> B)."""
    out = {m: [] for m in bounds}
    for seed in seeds:
        for m, B in bounds.items():
            a = _fit(family, tuple(sizes), p, mu, seed, m, B)
            out[m].append(np.mean((a - _noiseless(family, tuple(sizes), p, seed, m, B)) ** 2))
    return {m: math.sqrt(np.mean(v)) for m, v in out.items()}


def _grid_check(grid, seeds):
    bad = []
    for family, sizes, mu in grid:
        table = fedgdp.forecast(family, sizes, 4, mu)
        # each method at the bound its forecast row assumes: the paper methods' default rule's (Poisson: doubled
        # while the least forecast noise stays small), FedIRLS's own
        obs = _observed(family, sizes, 4, mu, seeds, dict(zip(table.method, map(float, table.clip_bound))))
        for m, f in zip(table.method, table.noise_rmse):
            top = 2.0 if f <= LINEAR_RANGE else math.inf
            if not 0.5 <= obs[m] / f <= top:
                bad.append((family, sizes[0], len(sizes), mu, m, round(f, 4), round(obs[m], 4)))
    return bad


#: Where the forecast is trusted both ways: beyond this forecast noise the iterates wander far from a
#: Gaussian cloud around the noiseless fit, which the model's pull-back assumes (module docstring of
#: fedgdp.api.forecast), and the forecast can be low (Poisson FedHybrid, 10 clients of 50 rows, mu = 0.5:
#: forecast 0.33, observed 0.67: python scripts/forecast_ratios.py); there only the lower side is
#: asserted
LINEAR_RANGE = 0.3

# Tolerance: a factor of 2 either way (the issue's) within LINEAR_RANGE. Measured at the commit of this test
# (python scripts/forecast_ratios.py), observed / forecast lies in 0.77-1.40 on this grid and 0.55-1.52 on the
# larger one within LINEAR_RANGE (0.84-1.49 and 0.83-2.06 beyond it); 4 seeds leave a sampling error of about
# 25% on an RMS of 5 coefficients.
FAST_GRID = [(family, sizes, mu) for family in ("logistic", "poisson") for sizes in ([100] * 5, [400] * 4)
             for mu in (1.0, 5.0)]
LARGER_GRID = [(family, sizes, mu) for family in ("logistic", "poisson")
               for sizes in ([50] * 10, [200] * 5, [1000] * 3, [60, 120, 240, 480]) for mu in (0.5, 1.0, 2.0, 5.0)]


def test_forecast_within_a_factor_two_of_the_observed_noise():
    assert _grid_check(FAST_GRID, range(4)) == []


@pytest.mark.slow
def test_forecast_within_a_factor_two_on_a_larger_grid():
    # 10 clients of 50 rows: each client's local iterates carry its own noise, sqrt(10) times the average's,
    # which flattens the logistic curvature and biases the Poisson intercept (the model's pull-back); with
    # theta = 0's fixed curvature 5 cells missed here (observed 2.3-3.6 times the forecast)
    assert _grid_check(LARGER_GRID, range(4)) == []


def test_forecast_table_columns_and_recommendation():
    t = fedgdp.forecast("logistic", [100] * 5, 4, 2.0)
    assert list(t.method) == list(fc.CANDIDATES)
    assert {"method", "noise_rmse", "rounds", "floats_sent", "recommended"} <= set(t.columns)
    assert t.recommended.sum() == 1
    best = t.loc[t.recommended].iloc[0]
    assert best.method == t.attrs["recommended"] and best.noise_rmse == t.noise_rmse.min()
    # communication: d = 5 floats a round each way per client
    newton = t.set_index("method").loc["fednewton"]
    assert newton.rounds == 2 and newton.floats_sent == 2 * 2 * 5 * 5
    one = fedgdp.forecast("logistic", [100] * 5, 4, 2.0, method="fedsgd")
    assert list(one.method) == ["fedsgd"] and one.noise_rmse[0] == t.noise_rmse[0]
    inf = fedgdp.forecast("logistic", [100] * 5, 4, math.inf)    # no noise: FedIRLS, Newton to the MLE, joins
    assert (inf.noise_rmse == 0).all() and inf.attrs["recommended"] == "fedirls"
    assert "fedirls" not in set(t.method)        # at mu = 2 its curvature here is mostly noise: not a candidate


def test_forecast_uses_the_packages_calibration():
    """FedSGD's noise at a fixed curvature c is eta^2 sum_j a^2j sum_i w_i^2 sigma_i^2 with the plan's sigma;
    the forecast bends c = 1/4 with the noise the iterates carry, which at this small noise adds under 1%."""
    sizes, mu, p = np.array([100, 200, 300]), 2.0, 4
    s = {"K": 20, "eta": 0.3}
    t = fedgdp.forecast("logistic", sizes, p, mu, method="fedsgd", method_settings=s, inference_share=0)
    shared = fedgdp.forecast("logistic", sizes, p, mu, method="fedsgd", method_settings=s)   # mu sqrt(0.9) left
    assert shared.noise_rmse[0] / t.noise_rmse[0] == pytest.approx(1 / math.sqrt(0.9), rel=0.01)
    B = fc.public_clip("logistic", p + 1)
    sigma = privacy.calibrate(privacy.plan_fedsgd(B=B, n=sizes.astype(float), K=20), mu=mu).sigmas[0]
    w = sizes / sizes.sum()
    a2 = (1 - 0.3 * 0.25) ** 2
    var = 0.3 ** 2 * (1 - a2 ** 20) / (1 - a2) * np.sum(w ** 2 * sigma ** 2)
    frozen = fedgdp.realdata.get_method("fedsgd").settings(s)
    fixed = fc.noise_variances("fedsgd", frozen, [sigma], w, np.array([0.25]), tau1=0.5, certified=True)
    assert fixed[0] == pytest.approx(var, rel=1e-12)
    assert math.sqrt(var) <= t.noise_rmse[0] <= 1.01 * math.sqrt(var)


def test_response_is_the_curvature_the_noise_leaves():
    """Logistic: E[sigma'(s)] over s ~ N(0, d V), 1/4 at V = 0 (Monte Carlo, 2e5 draws: sd about 1e-4, so
    rel 2e-3); Poisson: the intercept is pulled until the mean count is back, at M = -d V / 2."""
    d, V = 5, 0.3
    r = fc.response("logistic", d, 1.0)
    assert r.curvature(1e-12, 0.0) == pytest.approx(0.25, rel=1e-6)
    s = np.random.default_rng(0).standard_normal(200_000) * math.sqrt(d * V)
    mc = np.mean(np.exp(-s) / (1 + np.exp(-s)) ** 2)
    assert r.curvature(V, 0.0) == pytest.approx(mc, rel=2e-3) and r.pull(V, 0.0) == 0
    q = fc.response("poisson", d, math.inf)
    assert q.pull(V, -d * V / 2) == pytest.approx(0.0, abs=1e-12) and q.curvature(V, -d * V / 2) == pytest.approx(1.0)
    assert q.pull(V, 0.0) > 0                      # the noise raises the mean count: the intercept falls


def test_forecast_follows_table_1_orders():
    """Noise variance ~ m d^2 / (mu^2 N^2) per coordinate times d (Table 1's privacy term is a sum
    over d coefficients), where the noise is small (mu = 5: RMS below 0.04, the curvature the iterates
    see within 1% of 1/4): doubling every client's size halves the RMS, doubling mu halves it, and
    FedNewton's is larger than FedHybrid's at the presets (its Newton release carries 1/tau1). Where
    the noise is larger (mu = 1) it flattens the curvature, and the local-step methods lose more than
    the linear orders say."""
    a = fedgdp.forecast("logistic", [200] * 5, 4, 5.0).set_index("method").noise_rmse
    b = fedgdp.forecast("logistic", [400] * 5, 4, 5.0).set_index("method").noise_rmse
    c = fedgdp.forecast("logistic", [200] * 5, 4, 10.0).set_index("method").noise_rmse
    for m in fc.CANDIDATES:
        assert b[m] == pytest.approx(a[m] / 2, rel=0.02)
        assert c[m] == pytest.approx(a[m] / 2, rel=0.02)
    assert a["fednewton"] > a["fedhybrid"]
    a1 = fedgdp.forecast("logistic", [200] * 5, 4, 1.0).set_index("method").noise_rmse
    b1 = fedgdp.forecast("logistic", [400] * 5, 4, 1.0).set_index("method").noise_rmse
    for m in ("fedavg", "dp_scaffold", "fednewton"):
        assert a1[m] > 1.02 * 2 * b1[m]
    # m clients of N/m rows: Table 1's FedNewton term m d^2 / (mu^2 N^2) grows like m at fixed N
    m5 = fedgdp.forecast("logistic", [400] * 5, 4, 5.0, method="fednewton").noise_rmse[0]
    m20 = fedgdp.forecast("logistic", [100] * 20, 4, 5.0, method="fednewton").noise_rmse[0]
    ratio = (m20 / m5) ** 2
    bound = theory.upper_bound("fednewton", [100] * 20, d=5, mu=5.0) - 5 / 2000
    bound /= theory.upper_bound("fednewton", [400] * 5, d=5, mu=5.0) - 5 / 2000
    assert ratio == pytest.approx(bound, rel=0.05)


@pytest.mark.parametrize("bad,match", [
    (dict(family="gaussian"), "family"), (dict(sizes=[0, 5]), "sizes"), (dict(n_features=0), "n_features"),
    (dict(mu=-1), "mu"), (dict(method="np_pooled"), "np_pooled"), (dict(clip="quantile"), "clip"),
    (dict(cg=1), "unknown forecast setting 'cg'"), (dict(family="multinomial"), "n_classes"),
    (dict(method="fedsgd", method_settings={"eta": 1e300}), "not finite: .*eta=1e\\+300")])
def test_forecast_refuses_bad_input_in_one_line(bad, match):
    args = dict(family="logistic", sizes=[10, 10], n_features=3, mu=1.0) | bad
    with pytest.raises(ValueError, match=match) as exc:
        fedgdp.forecast(**args)
    assert "\n" not in str(exc.value)


def test_auto_picks_the_lowest_forecast_and_the_public_clip():
    rng = np.random.default_rng(0)
    X, y, cl = _data("logistic", [150] * 4, 3, rng)
    est = FederatedGLM(mu=2, classes=[0, 1], random_state=0).fit(X, y, cl)
    table = fedgdp.forecast("logistic", [150] * 4, 3, 2.0)
    assert est.method_ == table.attrs["recommended"] == "fedirls" and est.privacy_.method == est.method_
    B = fc.irls_clip("logistic", 4)                 # FedIRLS's own public bound, 1.5 sqrt(d)
    assert est.clip_bound_ == pytest.approx(B) and est.privacy_.clip == {"rule": "fixed", "value": B}
    assert est.privacy_.certified
    assert est.fit_info_["noise_se"].shape == est.theta_.shape
    assert est.fit_info_["noise_rmse"] == pytest.approx(float(np.sqrt(np.mean(est.fit_info_["noise_se"] ** 2))))
    with pytest.raises(ValueError, match="method_settings are a method's own"):
        FederatedGLM(method_settings={"K": 5}).fit(X, y, cl)


@pytest.mark.parametrize("family", ["logistic", "multinomial", "poisson"])
def test_public_default_clip_on_each_family(family):
    """B = sqrt(d) (classifiers) or 2 sqrt(d) (Poisson), whatever the data: the bound depends on no record."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 4))
    y = {"logistic": rng.integers(0, 2, 300), "multinomial": rng.integers(0, 3, 300),
         "poisson": rng.poisson(1.0, 300)}[family]
    kw = {"classes": sorted(set(y.tolist()))} if family != "poisson" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = FederatedGLM(family=family, mu=1, random_state=0, **kw).fit(X, y, np.arange(300) % 3)
        b = FederatedGLM(family=family, mu=1, random_state=0, **kw).fit(X * 0.9, y[::-1], np.arange(300) % 3)
    assert a.clip_bound_ == b.clip_bound_ == pytest.approx((2 if family == "poisson" else 1) * math.sqrt(5))
    assert a.privacy_.certified


def test_noise_warnings_before_and_after_the_fit():
    """Tiny clients at a small mu: the forecast warns before any record is read (naming the mu that
    would do), and the fit is noise-dominated, never 'converged'."""
    rng = np.random.default_rng(2)
    X, y, cl = _data("logistic", [30] * 4, 3, rng)
    with pytest.warns(NoiseDominatedWarning) as rec:
        est = FederatedGLM(mu=0.3, classes=[0, 1], random_state=0).fit(X, y, cl)
    msgs = [str(w.message) for w in rec if issubclass(w.category, NoiseDominatedWarning)]
    assert any(m.startswith("forecast (client sizes") and "mu >= " in m for m in msgs)
    assert est.fit_info_["status"] == "noise-dominated" and "mu >= " in est.fit_info_["advice"]
    forecast_mu = float(msgs[0].split("mu >= ")[1].split(" ")[0])
    assert fedgdp.forecast("logistic", [30] * 4, 3, forecast_mu).noise_rmse.min() <= fc.NOISE_LIMIT * 1.01


def test_private_quantile_on_its_grid_top_warns_naming_the_rule():
    rng = np.random.default_rng(3)
    X, y, cl = _data("logistic", [20] * 3, 3, rng)
    X = X * 50.0                      # per-sample norms beyond the grid's top: the quantile lands there
    with pytest.warns(ClipWarning, match="private_quantile"):
        FederatedGLM(mu=1, classes=[0, 1], clip="private_quantile", random_state=0).fit(X, y, cl)


def test_unstandardised_features_warn_standardise():
    rng = np.random.default_rng(4)
    X, y, cl = _data("logistic", [100] * 3, 3, rng)
    with pytest.warns(FeatureScaleWarning, match="standardise your features"):
        FederatedGLM(mu=2, classes=[0, 1], random_state=0).fit(X * 10 + 3, y, cl)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FeatureScaleWarning)
        FederatedGLM(mu=2, classes=[0, 1], random_state=0).fit(X, y, cl)


def test_fit_forecast_reads_only_the_header_and_the_client_column(tmp_path, capsys, monkeypatch):
    import pandas as pd

    from fedgdp.api import fitting
    from fedgdp.commands.cli import main

    rng = np.random.default_rng(5)
    df = pd.DataFrame(rng.standard_normal((300, 4)), columns=list("abcd")).assign(
        y=rng.integers(0, 2, 300), site=np.arange(300) % 3)
    df.to_csv(tmp_path / "d.csv", index=False)
    read = []
    real = pd.read_csv
    monkeypatch.setattr(pd, "read_csv", lambda *a, **k: read.append(k.get("usecols", k.get("nrows"))) or real(*a, **k))
    monkeypatch.setattr(fitting, "read_table", lambda *a: pytest.fail("read the whole table"))
    assert main(["fit", str(tmp_path / "d.csv"), "--target", "y", "--client", "site", "--mu", "1", "--forecast"]) == 0
    out = capsys.readouterr().out
    assert read == [0, ["site"]]          # the header, then the client column
    assert "read only the header and the client column" in out
    best = fedgdp.forecast("logistic", [100] * 3, 4, 1.0).attrs["recommended"]
    assert f"recommended: {best}" in out
    args = ["fit", str(tmp_path / "d.csv"), "--target", "y", "--client", "site", "--mu", "1"]
    assert main(args + ["--forecast", "--outcome-mean", "0.2", "--signal-sd", "1.5"]) == 0
    planned = fedgdp.forecast("logistic", [100] * 3, 4, 1.0, outcome_mean=0.2, signal_sd=1.5)
    out = capsys.readouterr().out
    assert "planned outcome mean 0.2 and linear predictor sd 1.5" in out
    assert f"{planned.noise_rmse.iloc[0]:.4g}" in out
    assert main(args + ["--outcome-mean", "0.2"]) != 0
    assert "a plan's guesses for --forecast" in capsys.readouterr().err


def test_poisson_default_bound_doubles_while_the_forecast_noise_stays_small():
    """The Poisson default: 2 sqrt(d), doubled while the least forecast noise at the doubled bound is at
    most CLIP_NOISE_TARGET, at most CLIP_DOUBLINGS times; the named method's forecast gives the same bound."""
    d, large, small = 10, [400] * 8, [30] * 5
    floor = 2 * math.sqrt(d)
    for sizes, mu in [(large, 1.0), (large, 5.0), (small, 1.0), (small, 0.1), (large, math.inf)]:
        t = fedgdp.forecast("poisson", sizes, d - 1, mu)
        B = float(t.clip_bound.iloc[0])
        doublings = round(math.log2(B / floor))
        assert B == pytest.approx(floor * 2 ** doublings) and 0 <= doublings <= fc.CLIP_DOUBLINGS
        if math.isfinite(mu) and doublings < fc.CLIP_DOUBLINGS:     # the next doubling would be too noisy
            nxt = fedgdp.forecast("poisson", sizes, d - 1, mu, clip=2 * B)
            assert nxt.noise_rmse.min() > fc.CLIP_NOISE_TARGET
        if doublings:
            assert fedgdp.forecast("poisson", sizes, d - 1, mu, clip=B).noise_rmse.min() <= fc.CLIP_NOISE_TARGET
        best = t.attrs["recommended"]            # (FedIRLS at mu = inf: its own rule's bound, unused there)
        own = float(t.loc[t.method == best, "clip_bound"].iloc[0])
        assert fedgdp.forecast("poisson", sizes, d - 1, mu, method=best).clip_bound.iloc[0] == own
        assert best != "fedirls" or not math.isfinite(mu)
    assert fedgdp.forecast("poisson", large, d - 1, 5.0).clip_bound.iloc[0] == pytest.approx(4 * floor)
    assert fedgdp.forecast("poisson", small, d - 1, 0.1).clip_bound.iloc[0] == pytest.approx(floor)
    assert fedgdp.forecast("poisson", large, d - 1, math.inf).clip_bound.iloc[0] == pytest.approx(floor)
    assert fedgdp.forecast("logistic", large, d - 1, 5.0).clip_bound.iloc[0] == pytest.approx(math.sqrt(d))
    # the estimator fits at the same bound, whatever the rows
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((3200, d - 1)), rng.poisson(2.0, 3200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = FederatedGLM(family="poisson", mu=5.0, random_state=0).fit(X, y, np.repeat(np.arange(8), 400))
    assert est.clip_bound_ == pytest.approx(4 * floor) and est.privacy_.certified


def test_planned_theta_gives_the_outcome_mean_over_the_public_draws():
    for family, mean, sd in (("logistic", 0.2, 1.5), ("logistic", 0.5, 0.0), ("poisson", 0.17, 0.6)):
        theta = fc.planned_theta(family, 6, mean, sd)
        s = fc._predictors(theta, 1)[:, 0]
        got = np.mean(1 / (1 + np.exp(-s))) if family == "logistic" else np.mean(np.exp(s))
        assert got == pytest.approx(mean, rel=1e-9)
        assert np.count_nonzero(theta[1:]) == (1 if sd else 0)
    assert fc.planned_theta("logistic", 6, None) is None


def test_a_plan_at_theta_zero_is_the_default_forecast():
    # a balanced outcome with no signal is theta = 0: the same numbers, to the last bit
    a = fedgdp.forecast("logistic", [200] * 5, 4, 1.0)
    b = fedgdp.forecast("logistic", [200] * 5, 4, 1.0, outcome_mean=0.5)
    assert np.array_equal(a.noise_rmse.to_numpy(), b.noise_rmse.to_numpy())


@pytest.mark.parametrize("bad,match", [
    (dict(outcome_mean=1.0), "outcome_mean must be in \\(0, 1\\)"), (dict(outcome_mean=0), "outcome_mean"),
    (dict(signal_sd=1.0), "signal_sd needs outcome_mean"), (dict(outcome_mean=0.3, signal_sd=-1), "signal_sd"),
    (dict(family="poisson", outcome_mean=-2.0), "mean count"),
    (dict(family="multinomial", n_classes=3, outcome_mean=0.3), "one-output")])
def test_a_plan_refuses_bad_guesses_in_one_line(bad, match):
    args = dict(family="logistic", sizes=[10, 10], n_features=3, mu=1.0) | bad
    with pytest.raises(ValueError, match=match) as exc:
        fedgdp.forecast(**args)
    assert "\n" not in str(exc.value)


def test_a_planned_signal_forecasts_the_noise_of_a_strong_logistic_signal():
    # Linear predictor sd 2.5 (slopes 2.5 / sqrt(p)) at a share of ones near 0.5: the curvature is about 0.11
    # against theta = 0's 0.25, so the theta = 0 forecast is low by about 2 (observed / forecast 1.70 on seeds
    # 0-3, 2.56 on seeds 4-11, measured with this test's code at its commit). Given the planned mean and
    # sd the forecast must be within a factor of 2 of the observed RMS of (private fit - the noiseless fit), the
    # tolerance of the grid test above (4 seeds: about 25% sampling error on 7 coefficients); measured 0.88 and
    # 1.32 on those seeds.
    p, sizes, mu = 6, (2000,) * 5, 2.0
    obs = []
    for seed in range(4):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((sum(sizes), p))
        eta = X @ np.full(p, 2.5 / math.sqrt(p))
        y = (rng.random(len(X)) < 1 / (1 + np.exp(-eta))).astype(int)
        cl = np.repeat(np.arange(len(sizes)), sizes)
        fits = []
        for m in (mu, MU_REF):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fits.append(FederatedGLM("logistic", classes=[0, 1], mu=m, method="fedirls", random_state=seed,
                                         inference_share=0).fit(X, y, cl).theta_)
        obs.append(np.mean((fits[0] - fits[1]) ** 2))
    observed = math.sqrt(np.mean(obs))
    at_zero = fedgdp.forecast("logistic", list(sizes), p, mu, method="fedirls", inference_share=0).noise_rmse[0]
    planned = fedgdp.forecast("logistic", list(sizes), p, mu, method="fedirls", inference_share=0,
                              outcome_mean=0.5, signal_sd=2.5).noise_rmse[0]
    assert observed / at_zero > 1.5            # the case the plan is for: theta = 0 is well off
    assert 0.5 <= observed / planned <= 2.0


def test_auto_keeps_the_paper_methods_for_counts_whose_count_scale_is_noise():
    # FedIRLS scales its Newton steps by a released mean count; on 4 clients of 300 rows at mu = 2 that
    # release's noise sd is 1.57 (the count clip 20 makes its sensitivity 20 sqrt(401) / n_i), so `auto`
    # keeps FedHybrid there, and fits FedIRLS on 50 clients of 2,000 rows (sd 0.067)
    small, large = np.array([300] * 4), np.array([2000] * 50)
    c = 20.0
    sd = c * math.sqrt(1 + c * c) / (300 * 2.0 * math.sqrt(0.05))
    assert fc.irls_count_noise(small, 2.0) == pytest.approx(sd / 2, rel=1e-12)     # 4 equal clients: sd / sqrt(4)
    assert fc.irls_count_noise(small, math.inf) == 0.0
    assert not fc.irls_default("poisson", small, 3, 2.0)
    assert fc.irls_default("poisson", large, 11, 2.0)
    assert fc.irls_default("logistic", small, 3, 2.0)      # a label needs no count scale
    assert fedgdp.forecast("poisson", small, 2, 2.0).attrs["recommended"] != "fedirls"
