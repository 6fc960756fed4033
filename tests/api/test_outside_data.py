"""Each family's default private fit on data no one here wrote (issue 46): bundled with
scikit-learn and statsmodels, loaded, standardised and split as scripts/outside_data_defaults.py
does (its table is in docs/real-data.md). At mu = 5 the default fit is useful or says why
not; a setting whose fits are useless warns.

Tolerance: "useful" is the issue's (AUC >= 0.6, accuracy >= 0.5, mean deviance at most twice
the non-private fit's) and, for counts, no worse than the intercept-only model. Measured over
20 fresh-noise fits per cell (the script): at mu = 5 the median AUC is 0.996, accuracy 0.95 and
the counts' mean deviance 4.26 (non-private 4.18, intercept only 4.59), far from their thresholds,
so 3 seeded fits decide. With the bound for modest counts, 2 sqrt(d), the counts' fits are useless
by the intercept-only reading in 20 of 20 (the clip's bias), and each carries a ClipWarning.
"""
import math
import runpy
import warnings

import numpy as np
import pytest

from fedgdp import FederatedGLM
from fedgdp.api.diagnostics import ClipWarning
from paths import ROOT

pytest.importorskip("sklearn.datasets")
pytest.importorskip("statsmodels.datasets")

SCRIPT = runpy.run_path(str(ROOT / "scripts" / "outside_data_defaults.py"))
SEEDS = range(3)


def _load(name):
    X, y, cl, family, classes = SCRIPT["load"](name)
    ref = FederatedGLM(family=family, classes=classes, method="np_pooled", mu=math.inf).fit(X, y, cl)
    return name, X, y, cl, family, classes, SCRIPT["score"](ref, X, y), SCRIPT["null_score"](family, y)


@pytest.fixture(scope="module", params=["breast_cancer", "digits", "randhie"])
def data(request):
    return _load(request.param)


def _fit(data, mu, seed, **kw):
    """(score, useless, the reasons its warnings give) of one fit with the defaults."""
    name, X, y, cl, family, classes, ref, null = data
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = FederatedGLM(family=family, classes=classes, mu=mu, random_state=seed, **kw).fit(X, y, cl)
    value = SCRIPT["score"](est, X, y)
    return value, SCRIPT["useless"](family, value, ref, null), {SCRIPT["_why"](w) for w in caught} - {None}


def test_default_fit_at_mu_5_is_useful_or_says_why(data):
    """Useful, with no warning; randhie's counts may carry the ClipWarning, whose per-coefficient check is
    about the intervals, not the fit's use: the default bound moves its intercept 8-10 se
    (test_the_default_clip_that_moves_a_coefficient_past_its_se_warns_naming_it)."""
    name = data[0]
    allowed = {"clip"} if name == "randhie" else set()
    for seed in SEEDS:
        value, useless, why = _fit(data, 5.0, seed)
        assert not useless and why <= allowed, (name, value, why)


def test_counts_the_bound_for_modest_counts_is_useless_and_says_so():
    data = _load("randhie")
    floor = 2 * math.sqrt(data[1].shape[1] + 1)       # the Poisson rule before its doublings
    for seed in SEEDS[:2]:
        value, useless, why = _fit(data, 5.0, seed, clip=floor)
        assert useless and "clip" in why, (value, why)


#: a setting per data set whose fits are useless (measured: AUC 0.46-0.5 at mu = 0.01, accuracy 0.12-0.29
#: and deviance 9-20 against 4.18 at mu = 0.05), and the reasons that must be among the warnings
USELESS = {"breast_cancer": (0.01, {"forecast", "noise"}), "digits": (0.05, {"forecast", "noise"}),
           "randhie": (0.05, {"noise", "clip"})}


def test_a_useless_setting_warns(data):
    mu, reasons = USELESS[data[0]]
    found = []
    for seed in SEEDS[:2]:
        value, useless, why = _fit(data, mu, seed)
        assert useless, (data[0], value)
        assert why & reasons, (data[0], why)
        found.append(why)
    assert set().union(*found) >= reasons, found


def test_clip_warning_is_the_data_holders_own_check_not_in_fit_info():
    X, y, cl, family, classes = SCRIPT["load"]("randhie")
    with pytest.warns(ClipWarning, match="a check of your own rows"):
        est = FederatedGLM(family=family, mu=5, clip=2 * math.sqrt(X.shape[1] + 1), random_state=0).fit(X, y, cl)
    assert not any("clip" in str(k) for k in est.fit_info_) and np.all(np.isfinite(est.theta_))


def test_the_default_clip_that_moves_a_coefficient_past_its_se_warns_naming_it():
    """randhie at mu = 2 with the default bound (the doubled rule, about 25): the clip moves the intercept
    about 0.1 (one Newton step on the rows; the non-private clipped fit's intercept is 0.88 against the
    MLE's 0.98), 8-10 of its standard errors (0.014), while the RMS rule (half the estimate's RMS, 0.29)
    does not fire: the per-coefficient check names it."""
    X, y, cl, family, classes = SCRIPT["load"]("randhie")
    with pytest.warns(ClipWarning, match=r"more than the standard error of \d+ of 10 coefficient") as rec:
        FederatedGLM(family=family, mu=2, random_state=0).fit(X, y, cl)
    assert any("coefficient 0, 0 the intercept" in str(w.message) for w in rec)


def test_low_counts_under_the_default_clip_do_not_warn():
    """Counts of mean 0.17 (the reference problem's model, 20,000 rows): at the default bound few rows are
    clipped and the shift is a small share of an se, so no ClipWarning (no false alarm)."""
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((20000, 10))
    y = rng.poisson(np.exp(-2.0 + Z @ np.full(10, 0.2)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClipWarning)
        FederatedGLM("poisson", mu=2, random_state=0).fit(Z, y, np.repeat(np.arange(20), 1000))
