"""fedgdp.FederatedGLM: the pipeline's real-data estimate reproduced, scikit-learn's
common checks, input validation, the privacy report and the seeds."""
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

from fedgdp import FederatedGLM
from fedgdp.api.estimator import PrivacyLeakWarning, estimator_rng
from fedgdp.core.seeds import CLIP_STREAM, seed_sequence


# ----------------------------------------------------------- the pipeline's fit, rebuilt
def _pipeline_fits(task: str, name: str, over: dict, split: int = 1, fold: int = 2):
    """What `fedgdp realdata` (realdata.run.run_split) fits on one split and fold of digits:
    the same layout, fold rows, clipping bound, FoldData and noise generators, at every mu."""
    from fedgdp.common.datasets import layout_key, load_digits, split_layout
    from fedgdp.core.glm import matrix_model
    from fedgdp.realdata import FoldData, clip_bound_real, get_method, noise_rng, resolve

    p = resolve({"task": task, "methods": [name], **over})
    data = load_digits()
    key = layout_key(p.dataset, data.N, p.m, p.n_min, p.alpha, p.folds)
    layout = split_layout(p.base_seed, key, split)
    model = matrix_model(task)
    labels = data.targets(task)
    Yall = model.targets(labels)
    parts = [layout.train_test(i, fold) for i in range(layout.m)]
    Xtr, Ytr = [data.X[tr] for tr, _ in parts], [Yall[tr] for tr, _ in parts]
    meth = get_method(name)
    fds = [FoldData(model, Xtr, Ytr, mu=mu, tau1=p.tau1, newton=p.newton, privacy=p.privacy, clip=p.clip,
                    B=clip_bound_real(model, Xtr, Ytr, p.clip, mu=mu,
                                      rng=noise_rng(p, key, split, fold, CLIP_STREAM)))
           for mu in p.mu]
    rngs = [noise_rng(p, key, split, fold, meth.noise_stream) for _ in fds]
    with np.errstate(over="ignore", under="ignore"):
        fits = meth.fit_many(fds, p.method_settings[name], rngs)
    rows = {
        "X": np.vstack(Xtr)[:, 1:],                       # the estimator adds the intercept column
        "y": np.concatenate([labels[tr] for tr, _ in parts]),
        "clients": np.repeat(np.arange(layout.m), [len(tr) for tr, _ in parts]),
        "seed": seed_sequence(p.base_seed, {**key, "task": task}, split, fold),
    }
    return p, fits, rows


CASES = [   # (task, method, pipeline overrides): paper defaults, certified, private clip, stacked levels
    ("binary", "fednewton", {}),
    ("binary", "fednewton", {"privacy": {"mode": "certified"}, "clip": {"rule": "fixed", "value": 2.0}}),
    ("binary", "fedhybrid", {"clip": {"rule": "private_quantile", "q": 0.9, "share": 0.1}}),
    ("binary", "fedsgd", {"method_settings": {"fedsgd": {"K": 20}}}),
    ("multiclass", "fedhybrid", {"method_settings": {"fedhybrid": {"K1": 8, "K2": 4}}}),
]


@pytest.mark.parametrize("task,name,over", CASES, ids=[f"{t}-{n}-{i}" for i, (t, n, _) in enumerate(CASES)])
def test_fit_reproduces_the_pipeline_estimate(task, name, over):
    p, fits, rows = _pipeline_fits(task, name, over)
    for j, mu in enumerate(p.mu):                      # the pipeline fits mu = 6 and 2 (stacked where it can)
        est = FederatedGLM(family="logistic" if task == "binary" else "multinomial", method=name, mu=mu,
                           classes=[0, 1] if task == "binary" else list(range(10)),     # digits' label domain
                           privacy_mode=p.privacy["mode"], clip=p.clip.as_dict(), tau1=p.tau1,
                           method_settings=over.get("method_settings", {}).get(name), shuffle=False,
                           random_state=rows["seed"], inference_share=0)   # the pipeline spends none on inference
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            est.fit(rows["X"], rows["y"], rows["clients"])
        np.testing.assert_allclose(est.theta_, fits[j].theta, rtol=0, atol=1e-12)
        np.testing.assert_allclose(est.privacy_.mu_composed, fits[j].ledger.composed_mu()[0], rtol=0, atol=1e-12)
        assert est.privacy_.certified == fits[j].ledger.certified
        assert est.communication_["rounds"] == fits[j].rounds


# ----------------------------------------------------------- scikit-learn's common checks
@pytest.mark.parametrize("family", ["logistic", "multinomial", "poisson"])
def test_scikit_learn_common_checks(family):
    """Every check of check_estimator passes (clients=None: one client); the array-API check
    skips itself without SCIPY_ARRAY_API. Poisson is tagged poor_score (module docs)."""
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(FederatedGLM(family=family, random_state=0), on_fail=None, on_skip=None)
    failed = [(r["check_name"], repr(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert not failed, failed
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert skipped <= {"check_array_api_input"}, skipped
    assert sum(r["status"] == "passed" for r in results) >= 50


def test_clone_and_pipeline_compose():
    from sklearn.base import clone
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, clients = _toy()
    est = FederatedGLM(mu=4, clip=2.0, method_settings={"K": 30}, random_state=3)
    c = clone(est)
    assert c.get_params() == est.get_params() and repr(c) == repr(est)
    # standardised, as the defaults assume (issue 46: with MinMaxScaler's [0, 1] features the default
    # method, now chosen by the forecast, moves slowly: 0.56)
    pipe = make_pipeline(StandardScaler(), FederatedGLM(clip=2.0, random_state=0))
    assert cross_val_score(pipe, X, y, cv=3, params={"federatedglm__clients": clients}).mean() > 0.6


# ----------------------------------------------------------- behaviour
def _toy(n=600, m=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] - 0.5 * X[:, 1] + rng.logistic(size=n) > 0).astype(int)
    return X, y, np.repeat([f"c{i}" for i in range(m)], n // m)


def test_fitted_attributes_shapes_and_predictions():
    X, y, clients = _toy()
    est = FederatedGLM(mu=2, clip=2.0, random_state=0).fit(X, y, clients)
    assert est.coef_.shape == (1, 3) and est.intercept_.shape == (1,) and est.theta_.shape == (4, 1)
    assert list(est.clients_) == [f"c{i}" for i in range(6)] and list(est.client_sizes_) == [100] * 6
    proba = est.predict_proba(X)
    assert proba.shape == (600, 2) and np.allclose(proba.sum(axis=1), 1)
    np.testing.assert_array_equal(est.predict(X), est.classes_[(est.decision_function(X) > 0).astype(int)])
    np.testing.assert_allclose(est.decision_function(X), X @ est.coef_[0] + est.intercept_[0])
    assert est.score(X, y) > 0.65
    assert est.coef_[0, 0] > 0 > est.coef_[0, 1]          # the signs of the true coefficients

    yc = np.random.default_rng(1).poisson(np.exp(0.2 + 0.3 * X[:, 0]))
    pois = FederatedGLM(family="poisson", mu=2, clip=3.0, random_state=0).fit(X, yc, clients)
    assert pois.coef_.shape == (3,) and isinstance(pois.intercept_, float)
    assert not hasattr(pois, "predict_proba") and not hasattr(pois, "decision_function")
    np.testing.assert_allclose(pois.predict(X), np.exp(pois.linear_predictor(X)))

    ym = np.digitize(X[:, 0], [-0.5, 0.5])
    soft = FederatedGLM(family="multinomial", mu=2, clip=2.0, random_state=0).fit(X, ym, clients)
    assert soft.coef_.shape == (3, 3) and soft.predict_proba(X).shape == (600, 3)
    assert soft.score(X, ym) > 0.7


def test_privacy_report_composes_to_mu_and_converts_to_epsilon():
    from fedgdp.core.privacy import gdp_epsilon

    X, y, clients = _toy()
    for method in ("fednewton", "fedhybrid", "fedsgd", "fedavg"):
        est = FederatedGLM(method=method, mu=2, classes=[0, 1], clip="private_quantile").fit(X, y, clients)
        rep = est.privacy_
        assert rep.certified and rep.ledger.releases[0].stage == "clip histogram"
        np.testing.assert_allclose(rep.mu_certified, 2.0, rtol=0, atol=1e-12)
        assert rep.epsilon(1e-5) == pytest.approx(gdp_epsilon(2.0, 1e-5)) == pytest.approx(10.0, abs=0.01)
        d = rep.as_dict(1e-5)
        assert d["certified"] and len(d["mu_certified"]) == 6 and d["clients"] == list(est.clients_)
    plain = FederatedGLM(method="np_pooled", mu=math.inf).fit(X, y, clients)
    assert not plain.privacy_.certified and plain.privacy_.epsilon(1e-5) == math.inf


def test_leaking_bounds_warn_naming_the_certified_alternatives():
    X, y, clients = _toy()
    with pytest.warns(PrivacyLeakWarning, match="certified alternatives") as rec:
        est = FederatedGLM(method="fednewton", privacy_mode="paper", clip="quantile", random_state=0).fit(X, y, clients)
    assert any("clip=None (the public rule)" in str(w.message) for w in rec)
    assert any("method='fednewton_certified'" in str(w.message) for w in rec)
    assert not est.privacy_.certified and est.privacy_.epsilon(1e-5) == math.inf
    assert est.privacy_.epsilon(1e-5, nominal=True) == pytest.approx(10.0, abs=0.01)
    assert any("not accounted" in a for a in est.privacy_.assumptions)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)       # the certified defaults warn about nothing
        FederatedGLM(classes=[0, 1]).fit(X, y, clients)


@pytest.mark.parametrize("params,data,match", [
    ({}, "nan", "NaN or infinity"),
    ({"method": "fednewton"}, "one_row_client", "client 'c5' has 1 row .* needs at least 2 rows"),
    ({"clip": "quantile"}, None, "privacy mode 'certified' needs a public or private clipping bound"),
    ({"method": "np_pooled"}, None, "non-private: set mu=inf"),
    ({"method": "np_localfit"}, None, "unknown method 'np_localfit'"),
    ({"method": "fedsgd", "method_settings": {"K1": 3}}, None, "unknown setting 'K1' .* for method fedsgd"),
    ({"family": "gamma"}, None, "family must be one of"),
    ({"mu": 0}, None, "mu must be > 0"),
    ({"hessian_clip": 1e-300}, None, r"hessian_clip must be a number in \[1e-08, 1e\+08\].*hessian_clip=1e-300"),
    ({"hessian_clip": 1e300}, None, r"hessian_clip=1e\+300"),
    ({"clip": math.inf}, None, r"clip value must be a number in \(0, 1e\+100\].*clip=inf"),
    ({"newton": {"cg_tol": 2e-16}}, None, r"newton.cg_tol in \[4.55e-12, 1\).*cg_tol=2e-16"),
    ({"method": "fednewton_certified", "clip": 1.0, "tau1": 1e-300}, None, "a release could reach .* tau1=1e-300"),
    ({}, "three_classes", "Only binary classification is supported"),
    ({}, "short_clients", "clients must hold one label per row"),
])
def test_bad_input_is_refused_naming_it(params, data, match):
    X, y, clients = _toy()
    if data == "nan":
        X[3, 1] = np.nan
    elif data == "one_row_client":
        clients = clients.copy()
        clients[500:] = "c4"
        clients[599] = "c5"
    elif data == "three_classes":
        y = np.arange(600) % 3
    elif data == "short_clients":
        clients = clients[:-1]
    with pytest.raises(ValueError, match=match):
        FederatedGLM(**params).fit(X, y, clients)


def test_fedsgd_accepts_one_row_clients_but_fednewton_does_not():
    X, y, clients = _toy()
    clients = clients.astype(object)
    clients[-1] = "solo"
    FederatedGLM(method="fedsgd", clip=2.0, random_state=0).fit(X, y, clients)
    with pytest.raises(ValueError, match="client 'solo'"):
        FederatedGLM(method="fednewton", clip=2.0, random_state=0).fit(X, y, clients)


def test_random_state_reproduces_and_streams_follow_the_seed_derivation():
    X, y, clients = _toy()
    a = FederatedGLM(clip=2.0, random_state=7).fit(X, y, clients).theta_
    b = FederatedGLM(clip=2.0, random_state=7).fit(X, y, clients).theta_
    c = FederatedGLM(clip=2.0, random_state=8).fit(X, y, clients).theta_
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    from fedgdp.core.seeds import derived_rng

    want = derived_rng(7, {"estimator": "fedgdp.FederatedGLM"}, stream="fednewton").standard_normal(3)
    np.testing.assert_array_equal(estimator_rng(7, "fednewton").standard_normal(3), want)
    want = derived_rng(5, {"k": 1}, 2, 3, stream="fedsgd").standard_normal(3)
    np.testing.assert_array_equal(estimator_rng(seed_sequence(5, {"k": 1}, 2, 3), "fedsgd").standard_normal(3), want)


def test_shuffle_keeps_fednewton_halves_off_a_sorted_order():
    """Rows sorted by y: without shuffling half 1 of each client is all one class."""
    X, y, clients = _toy()
    order = np.lexsort((y, clients))
    X, y, clients = X[order], y[order], clients[order]
    good = FederatedGLM(mu=math.inf, method="fednewton", random_state=0).fit(X, y, clients).score(X, y)
    bad = FederatedGLM(mu=math.inf, method="fednewton", shuffle=False, random_state=0).fit(X, y, clients).score(X, y)
    pooled = FederatedGLM(mu=math.inf, method="np_pooled").fit(X, y, clients).score(X, y)
    assert good > pooled - 0.02 and bad < pooled - 0.05


def test_importing_fedgdp_imports_no_sklearn():
    code = ("import sys, fedgdp, fedgdp.api.estimator, fedgdp.api.fitting, fedgdp.commands.cli; "
            "assert 'sklearn' not in sys.modules, 'sklearn imported'; print(fedgdp.FederatedGLM.__name__)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "FederatedGLM", res.stderr[-1500:]


def test_docstring_example_runs():
    import doctest

    import fedgdp.api.estimator

    assert doctest.testmod(fedgdp.api.estimator).failed == 0


def test_docstring_says_which_fedhybrid():
    doc = FederatedGLM.__doc__
    assert "Algorithm 2 of Peng, Paul & Auddy" in doc and "not* the" in doc and "Niu & Wei" in doc
