"""Clipping, the clipping-bound rule, GDP conversions and ledger composition."""
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import integrate, stats

from fedgdp.core import privacy
from fedgdp.core.glm import get_model
from fedgdp.simulation.data import parse_sizes, simulate_replicate
from oracle import (
    clip_bound_reference,
    newton_sensitivity,
    sigma_fedavg,
    sigma_fedhybrid,
    sigma_fednewton,
    sigma_fedsgd,
)


def test_clip_rows_bounds_norms_and_keeps_directions():
    rng = np.random.default_rng(0)
    G = rng.standard_normal((200, 5)) * rng.uniform(0.1, 4, (200, 1))
    C = privacy.clip_rows(G, 1.5)
    norms, new = np.linalg.norm(G, axis=1), np.linalg.norm(C, axis=1)
    assert np.all(new <= 1.5 + 1e-12)
    np.testing.assert_allclose(C[norms <= 1.5], G[norms <= 1.5])
    big = norms > 1.5
    np.testing.assert_allclose(C[big] / new[big, None], G[big] / norms[big, None], atol=1e-14)
    assert privacy.clip_rows(G, np.inf) is G


@pytest.mark.parametrize("model", ["logistic", "poisson"])
@pytest.mark.parametrize("sizes", ["equal(50)", "uniform(5,90)", "lognormal(3,1)"])
@pytest.mark.parametrize("q", [0.9, 0.5, 1.0])
def test_clip_bound_matches_numpy_quantile_loop(model, sizes, q):
    rep = simulate_replicate(np.random.default_rng(1), model=model, scheme=parse_sizes(sizes), m=12,
                             beta_true=np.array([0.5, -0.5, 1.0]), sigma_c=1.0)
    glm = get_model(model)
    rule = {"rule": "quantile", "q": q}
    assert privacy.clip_bound(glm, rep, rule) == pytest.approx(clip_bound_reference(glm, rep, rule),
                                                               rel=1e-14)
    assert privacy.clip_bound(glm, rep, {"rule": "fixed", "value": 2.5}) == 2.5


def _delta_by_integration(mu, eps):
    """delta(eps) = E[(1 - exp(eps - L))_+], L ~ N(mu^2/2, mu^2) the privacy-loss variable."""
    def f(loss):
        return (1 - math.exp(eps - loss)) * stats.norm.pdf(loss, mu ** 2 / 2, mu)
    return integrate.quad(f, eps, np.inf, epsabs=1e-13)[0]


@pytest.mark.parametrize("mu,eps", [(0.5, 0.1), (1.0, 1.0), (2.0, 0.5), (2.0, 3.0), (6.0, 5.0)])
def test_gdp_delta_matches_privacy_loss_integral(mu, eps):
    assert privacy.gdp_delta(mu, eps) == pytest.approx(_delta_by_integration(mu, eps), abs=1e-10)


def test_gdp_delta_known_value():
    # mu = 1, eps = 0: Phi(1/2) - Phi(-1/2)
    assert privacy.gdp_delta(1.0, 0.0) == pytest.approx(0.3829249225480262, rel=1e-12)


@pytest.mark.parametrize("mu", [0.3, 1.0, 2.0, 6.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-3])
def test_gdp_round_trips(mu, delta):
    eps = privacy.gdp_epsilon(mu, delta)
    assert privacy.gdp_delta(mu, eps) == pytest.approx(delta, rel=1e-8)
    assert privacy.gdp_mu(eps, delta) == pytest.approx(mu, rel=1e-8)


def _epsilon_closed_form(mu, delta):
    """The former gdp_epsilon, the oracle where it does not overflow: a root in epsilon of
    Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) = delta (e^eps overflows at eps > 709)."""
    from scipy.optimize import brentq

    def d(eps):
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)

    if d(0.0) <= delta:
        return 0.0
    hi = 1.0
    while d(hi) > delta:
        hi *= 2
    return brentq(lambda e: d(e) - delta, 0.0, hi, xtol=1e-14, rtol=1e-14)


@pytest.mark.parametrize("mu", [1e-3, 0.1, 0.5, 1.0, 2.0, 6.0, 15.0, 25.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-8, 1e-5, 1e-2, 0.3])
def test_gdp_epsilon_in_log_space_matches_the_closed_form(mu, delta):
    """Relative 1e-10: both roots are found to about 1e-14; the log-space delta differs
    from the closed form only by rounding."""
    assert privacy.gdp_epsilon(mu, delta) == pytest.approx(_epsilon_closed_form(mu, delta), rel=1e-10, abs=1e-300)


@pytest.mark.parametrize("mu", [30.0, 40.0, 1e3, 1e6, 1e12, 1e50, 1e100])   # 1e100: MU_MAX
def test_gdp_epsilon_is_finite_for_every_accepted_mu(mu):
    """The former formula overflowed (OverflowError) from mu = 30 at delta = 1e-5; now every
    mu up to MU_MAX gives a finite epsilon of about mu^2/2 + mu Phi^-1(1 - delta)."""
    for delta in (1e-5, 1e-300):
        eps = privacy.gdp_epsilon(mu, delta)
        assert math.isfinite(eps) and eps >= mu ** 2 / 2
        assert eps == pytest.approx(mu ** 2 / 2 - mu * stats.norm.ppf(delta), rel=0.01)
    if mu <= 1e3:       # the round trip (for larger mu, eps/mu rounds away the digits of a)
        assert privacy.gdp_delta(mu, privacy.gdp_epsilon(mu, 1e-5)) == pytest.approx(1e-5, rel=1e-8)
    assert privacy.gdp_epsilon(mu, 1e-5) > privacy.gdp_epsilon(mu / 2, 1e-5)


def test_mu_above_the_maximum_is_refused():
    assert privacy.parse_mu(privacy.MU_MAX) == privacy.MU_MAX and privacy.parse_mu("inf") == math.inf
    with pytest.raises(ValueError, match="mu must be at most 1e[+]100 .* got mu=1e200"):
        privacy.parse_mu("1e200")


def test_gdp_errors_quote_the_value():
    with pytest.raises(ValueError, match="mu=-1"):
        privacy.gdp_delta(-1, 0.1)
    with pytest.raises(ValueError, match="delta=2"):
        privacy.gdp_epsilon(1.0, 2)


def test_ledger_composes_by_root_sum_of_squares():
    led = privacy.Ledger()
    led.add("a", 3, np.full((2, 4), 1.0), np.full((2, 4), 2.0))   # 3 x (1/2)^2 = 0.75
    led.add("b", 1, np.full((2, 4), 0.5), np.full((2, 4), 1.0))   # 0.25
    np.testing.assert_allclose(led.composed_mu(), 1.0)
    report = led.client_report(1)
    assert len(report) == 4 and len(report[0]["releases"]) == 4 and report[0]["mu"] == pytest.approx(1.0)
    nonprivate = privacy.Ledger()
    nonprivate.add("g", 5, np.inf, np.zeros((1, 2)))
    assert np.all(np.isinf(nonprivate.composed_mu()))


def test_a_split_mu_composes_back():
    """`apportion` splits mu into parts that `compose` to it (1e-15), and `share_of` reads a part's share back."""
    est, inf = privacy.apportion(2.0, 0.1)
    assert privacy.compose([(est, 1), (inf, 1)]) == pytest.approx(2.0, rel=1e-15)
    assert privacy.share_of(inf, 2.0) == pytest.approx(0.1, rel=1e-14) and privacy.share_of(1.0, 0.0) == 0.0
    assert privacy.apportion(3.0, 0.0) == (3.0, 0.0)


def test_calibration_table_values():
    """the table of docs/methods.md §2 at one point, written out by hand."""
    B, n, mu = 1.5, 40.0, 2.0
    assert sigma_fedsgd(B=B, n=n, mu=mu, K=50) == pytest.approx(2 * 1.5 * math.sqrt(50) / 80)
    assert sigma_fedavg(B=B, n=n, mu=mu, eta=0.5, R=2, K=50) == pytest.approx(2 * 1.5 * 0.5 * 10 / 80)
    a1, a2 = sigma_fedhybrid(B=B, n=n, mu=mu, eta1=0.5, K1=30, K2=20)
    assert (a1, a2) == pytest.approx((1.5 * math.sqrt(60) / 80, 3 * math.sqrt(40) / 80))
    s1, s2 = sigma_fednewton(B=B, n=n, mu=mu, eta=0.5, K=50, tau1=0.1)
    assert (s1, s2) == pytest.approx((4 * 1.5 * 0.5 * 10 / 80, 2 * 4 * math.sqrt(2) * 1.5 / 0.1 / 80))
    assert newton_sensitivity(B=B, n=n, tau1=0.1) == pytest.approx(8 * 1.5 / (0.1 * 40))


@pytest.mark.parametrize("mu", [0.5, 2.0])
def test_ledger_to_dp_event_agrees_with_dp_accounting(mu):
    """A ledger handed to Google's dp_accounting (`Ledger.to_dp_event`) gives mu-GDP's epsilon.

    The ledger's releases are Gaussian mechanisms, so their exact composition is mu-GDP:
    the PLD accountant (exact up to its discretisation, about 1e-8 here) gives the ledger's
    epsilon within 1e-3. The RDP accountant bounds the same composition from above, loose by
    a few per cent (1.06 to 1.09 measured for mu in [0.5, 4] at delta = 1e-5): ledger epsilon
    <= RDP epsilon <= 1.15 x ledger epsilon, while a factor sqrt(2) in one noise multiplier
    moves either accountant's epsilon by more than 15% one way or the other.
    """
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting import pld, rdp

    n = np.array([[40.0, 80.0, 120.0]])
    rule = {"rule": "private_quantile", "q": 0.9, "share": 0.1, "grid": [0.01, 100.0, 64]}
    plan = privacy.plan_fedhybrid(B=1.5, n=n, eta1=0.5, K1=30, K2=20)
    led = privacy.calibrate_with_clip(plan, mu=mu, clip=rule, n=n).ledger
    event = led.to_dp_event(client=1)
    assert isinstance(event, dpa.ComposedDpEvent) and len(event.events) == 3
    eps = privacy.gdp_epsilon(float(led.composed_mu()[0, 1]), 1e-5)
    acc_pld = pld.PLDAccountant(value_discretization_interval=1e-4)
    acc_pld.compose(event)
    assert acc_pld.get_epsilon(1e-5) == pytest.approx(eps, rel=1e-3)
    acc_rdp = rdp.RdpAccountant()
    acc_rdp.compose(event)
    assert eps <= acc_rdp.get_epsilon(1e-5) <= 1.15 * eps


def test_ledger_to_dp_event_reads_each_clients_counts():
    """Under a schedule a client's stage with no release leaves no event; a non-private one has multiplier 0."""
    dpa = pytest.importorskip("dp_accounting")
    plan = privacy.plan_fedsgd(B=1.0, n=np.array([[50.0, 50.0]]), K=4)
    led = privacy.calibrate_schedule(plan, mu=1.0, counts={privacy.GRADIENT: np.array([[3, 0]])}).ledger
    assert led.to_dp_event(client=1).events == []
    (drawn,) = led.to_dp_event(client=0).events
    assert isinstance(drawn, dpa.SelfComposedDpEvent) and drawn.count == 3
    assert drawn.event.noise_multiplier == pytest.approx(math.sqrt(3))   # 3 releases spend mu = 1: 1/sqrt(3) each
    open_ledger = privacy.calibrate(plan, mu=np.inf).ledger
    assert open_ledger.to_dp_event().events[0].event.noise_multiplier == 0.0


@pytest.mark.parametrize("given", [2.5, {"rule": "quantile", "q": 0.8}, {"rule": "private_quantile", "q": 0.9},
                                   dict(privacy.DEFAULT_CLIP)])
def test_clip_rule_is_a_typed_view_of_the_dict_form(given):
    """`clip_rule` reads a checked rule into `Fixed`, `Quantile` or `PrivateQuantile` and gives it back
    unchanged; the dict functions (`bound_of_rule`, `clip_share`, `clip_unaccounted`) read the same."""
    rule = privacy.check_clip(given)
    typed = privacy.clip_rule(rule)
    assert repr(typed.as_dict()) == repr(rule)          # the same keys, order and types: the seeds' parameters
    assert privacy.clip_rule(typed) is typed and typed.rule == rule["rule"]
    assert typed.spends == privacy.clip_share(rule) and typed.unaccounted == privacy.clip_unaccounted(rule)
    norms = [np.linspace(0.1, 3.0, 50), np.linspace(0.2, 5.0, 80)]
    got = typed.bound(lambda: norms, mu=1.0, rng=np.random.default_rng(3))
    if rule["rule"] == "fixed":
        assert isinstance(typed, privacy.Fixed) and got == 2.5 and typed.spends == 0 and not typed.unaccounted
    elif rule["rule"] == "quantile":
        assert isinstance(typed, privacy.Quantile) and typed.spends == 0 and len(typed.unaccounted) == 1
        assert got == max(np.quantile(v, rule["q"]) for v in norms)
    else:
        assert isinstance(typed, privacy.PrivateQuantile) and typed.spends == Fraction(0.1)   # the float 0.1, exactly
        assert not typed.unaccounted
        assert got == privacy.private_clip_bound(norms, rule, mu=1.0, rng=np.random.default_rng(3))
    assert got == privacy.bound_of_rule(rule, lambda: norms, mu=1.0, rng=np.random.default_rng(3))


@pytest.mark.parametrize("given, key", [({"rule": "fixed", "value": 1.0, "qq": 0.9}, "'qq'"),
                                        ({"rule": "private_quantile", "q": 0.9, "bins": 64}, "'bins'")])
def test_check_clip_refuses_a_key_no_rule_reads(given, key):
    """A misspelt key would be ignored silently: refused, naming it."""
    with pytest.raises(ValueError, match=f"unknown clip key.*{key}"):
        privacy.check_clip(given)


def test_check_clip_drops_another_rules_key():
    """``--configfile`` merges a fixed rule over the default quantile rule key by key: q is not the bound's."""
    assert privacy.check_clip({"rule": "quantile", "q": 0.9} | {"rule": "fixed", "value": 2.0}) == \
        {"rule": "fixed", "value": 2.0}


def test_check_clip_takes_a_rule_object_and_every_resolver_does():
    """A resolved clip (a rule object) fed back in resolves the same: check_clip reads its dict form."""
    from fedgdp.realdata import resolve as realdata
    from fedgdp.simulation.params import resolve as cell

    rule = privacy.PrivateQuantile(0.8, 0.1, (0.01, 100.0, 64))
    assert privacy.check_clip(rule) == rule.as_dict()
    assert realdata({"clip": rule}).clip == rule and cell({"clip": rule}).clip == rule
    assert realdata({"clip": privacy.Fixed(2.0)}).clip == privacy.Fixed(2.0)


def test_check_clip_gives_the_rules_own_key_order():
    """Whatever order the keys come in, the checked form is the rule's (`as_dict`)."""
    assert list(privacy.check_clip({"q": 0.8, "rule": "private_quantile"})) == ["rule", "q", "share", "grid"]
    assert list(privacy.check_clip({"value": 2, "rule": "fixed"})) == ["rule", "value"]


def test_clip_rule_refuses_an_unknown_rule():
    with pytest.raises(ValueError, match="'median'"):
        privacy.clip_rule({"rule": "median", "q": 0.5})
