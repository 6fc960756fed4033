"""The calibration core, the privacy modes, certified FedNewton and the private clipping rule."""
import math
from fractions import Fraction

import numpy as np
import pytest

from conftest import make_block, stacked_noise
from fedgdp.core import privacy
from fedgdp.simulation.backend import REGISTRY, get_method
from fedgdp.simulation.params import resolve
from fedgdp.simulation.run import run_cell
from oracle import clip_bound_reference, reference_fit, sigma_fedavg, sigma_fedhybrid, sigma_fednewton, sigma_fedsgd

REPS = (0, 1, 2)
PRIVATE_CLIP = {"rule": "private_quantile", "q": 0.9, "share": 0.1, "grid": [0.01, 100, 64]}


# ------------------------------------------------------------ calibration core
def test_core_reproduces_the_paper_table_bit_for_bit():
    """The plans give today's formulas, in the same floating-point order (so cell
    files of FedSGD, FedHybrid and FedAvg are unchanged to the last bit)."""
    rng = np.random.default_rng(3)
    B, n, mu = rng.uniform(0.3, 3, (4, 1)), rng.integers(10, 900, (4, 7)).astype(float), 1.7
    K, R, eta, K1, K2 = 37, 3, 0.37, 22, 15
    assert np.array_equal(sigma_fedsgd(B=B, n=n, mu=mu, K=K), 2.0 * B * math.sqrt(K) / (mu * n))
    assert np.array_equal(sigma_fedavg(B=B, n=n, mu=mu, eta=eta, R=R, K=K),
                          2.0 * B * eta * math.sqrt(R * K) / (mu * n))
    a1, a2 = sigma_fedhybrid(B=B, n=n, mu=mu, eta1=eta, K1=K1, K2=K2)
    assert np.array_equal(a1, 2.0 * B * eta * math.sqrt(2 * K1) / (mu * n))
    assert np.array_equal(a2, 2.0 * B * math.sqrt(2 * K2) / (mu * n))
    s1, s2 = sigma_fednewton(B=B, n=n, mu=mu, eta=eta, K=K, tau1=0.08)
    assert np.array_equal(s1, 4.0 * B * eta * math.sqrt(2 * K) / (mu * n))
    # the Newton sd is 8 sqrt(2) B/(tau1 mu n), now as (8B/tau1) sqrt(2)/(mu n): equal within 2 ulp
    np.testing.assert_allclose(s2, 2.0 * (4.0 * math.sqrt(2.0) * B / 0.08) / (mu * n), rtol=5e-16, atol=0)


def test_calibrate_shares_counts_and_nonprivate():
    plan = (privacy.ReleaseSpec("a", 4, 2.0, np.array([[10.0, 20.0]]), Fraction(1, 3)),
            privacy.ReleaseSpec("b", 1, 1.0, 1.0, Fraction(2, 3), certified=False, assumption="x"))
    cal = privacy.calibrate(plan, mu=2.0)
    np.testing.assert_allclose(cal.sigmas[0], 2.0 / np.array([[10.0, 20.0]]) * math.sqrt(12) / 2.0)
    np.testing.assert_allclose(cal.ledger.composed_mu(), 2.0, atol=1e-12)
    assert not cal.ledger.certified and np.all(np.isinf(cal.ledger.certified_mu()))
    assert cal.ledger.releases[1].assumption == "x"
    off = privacy.calibrate(plan, mu=math.inf)
    assert np.all(off.sigmas[0] == 0) and np.all(np.isinf(off.ledger.composed_mu()))


def test_certified_newton_sensitivity_equals_the_paper_at_hc_4tau1_even_n():
    B, tau1, n = 1.3, 0.2, np.array([[40.0, 100.0]])
    paper = privacy.plan_fednewton(B=B, n1=n / 2, n2=n / 2, eta=0.5, K=5, tau1=tau1)[1]
    cert = privacy.plan_fednewton(B=B, n1=n / 2, n2=n / 2, eta=0.5, K=5, tau1=tau1, hessian_bound=4 * tau1)[1]
    np.testing.assert_allclose(cert.sensitivity, paper.sensitivity, rtol=1e-15)
    assert cert.certified and not paper.certified and paper.assumption == privacy.NEWTON_ASSUMPTION
    big = privacy.plan_fednewton(B=B, n1=n / 2, n2=n / 2, eta=0.5, K=5, tau1=tau1, hessian_bound=40 * tau1)[1]
    np.testing.assert_allclose(big.sensitivity, 10 * paper.sensitivity, rtol=1e-15)   # noise ~ H_c


# ------------------------------------------------------------------ the modes
CASES = [dict(model="logistic", sizes="uniform(11,61)", m=5, mu=1.5, K=6, clip=1.2),
         dict(model="poisson", sizes="equal(31)", m=4, mu=2.0, K=5, clip=PRIVATE_CLIP, tau1=0.3)]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("method", list(REGISTRY))
def test_certified_mode_ledgers_compose_to_mu_and_are_certified(method, case):
    p, reps, fd = make_block(dict(CASES[case], methods=[method], privacy={"mode": "certified"}), REPS)
    _, noise = stacked_noise(p, method, REPS)
    led = get_method(method).fit(fd, p.method_settings[method], noise).ledger
    np.testing.assert_allclose(led.composed_mu(), p.mu, rtol=0, atol=1e-12)
    assert led.certified and all(r.certified for r in led.releases)
    np.testing.assert_allclose(led.certified_mu(), p.mu, rtol=0, atol=1e-12)
    if p.clip.rule == "private_quantile":
        first = led.releases[0]
        assert first.stage == "clip histogram"
        np.testing.assert_allclose(first.mu, p.mu * math.sqrt(0.1), rtol=1e-12)


def test_paper_mode_fednewton_is_nominal_and_quantile_is_unaccounted():
    p, reps, fd = make_block(dict(m=4, sizes="equal(30)", K=4, methods=["fednewton", "fedsgd"]), REPS)
    for name in ("fednewton", "fedsgd"):
        _, noise = stacked_noise(p, name, REPS)
        led = get_method(name).fit(fd, p.method_settings[name], noise).ledger
        np.testing.assert_allclose(led.composed_mu(), 2.0, atol=1e-12)
        assert led.unaccounted and "data-driven" in led.unaccounted[0]
        assert np.all(np.isinf(led.certified_mu()))
    assert all(r.certified for r in led.releases)       # fedsgd: its own releases are certified


def test_certified_mode_rejects_a_data_driven_clip():
    with pytest.raises(ValueError, match="clip rule 'quantile'"):
        resolve({"privacy": {"mode": "certified"}})
    with pytest.raises(ValueError, match="mode='secret'"):
        resolve({"privacy": {"mode": "secret"}})
    with pytest.raises(ValueError, match="hessian_clip"):
        resolve({"privacy": {"mode": "paper", "hessian_clip": -1}})
    with pytest.raises(ValueError, match="share"):
        resolve({"clip": {"rule": "private_quantile", "q": 0.9, "share": 1.5}})
    with pytest.raises(ValueError, match="grid"):
        resolve({"clip": {"rule": "private_quantile", "q": 0.9, "grid": [1, 0.5, 10]}})


def test_rows_carry_mu_certified_and_mode():
    p = resolve(dict(m=3, sizes="equal(20)", K=3, methods=["fednewton", "fednewton_certified", "fedsgd"],
                     clip=PRIVATE_CLIP))
    rows = run_cell(p, [0])
    cert = {r["method"]: r["mu_certified"] for r in rows}
    assert math.isinf(cert["fednewton"]) and cert["fednewton_certified"] == pytest.approx(2.0, abs=1e-12)
    assert cert["fedsgd"] == pytest.approx(2.0, abs=1e-12)
    assert {r["privacy_mode"] for r in rows} == {"paper"}
    plain = run_cell(resolve(dict(p.as_dict(), clip={"rule": "quantile", "q": 0.9}, method_settings={})), [0])
    assert all(math.isinf(r["mu_certified"]) for r in plain)   # the bound leaks: nothing certified


def test_fednewton_certified_shares_fednewtons_noise():
    assert get_method("fednewton_certified").noise_stream == "fednewton"
    p, reps, fd = make_block(dict(m=3, sizes="equal(20)", K=3, methods=["fednewton", "fednewton_certified"]), REPS)
    a = stacked_noise(p, "fednewton", REPS)[1]
    b = stacked_noise(p, "fednewton_certified", REPS)[1]
    assert all(np.array_equal(a[k], b[k]) for k in a)


# ----------------------------------------------------- fast against reference
@pytest.mark.parametrize("model", ["logistic", "poisson"])
@pytest.mark.parametrize("clip", [0.9, PRIVATE_CLIP])
@pytest.mark.parametrize("hc", [4.0, 0.5])
def test_certified_fednewton_fast_equals_reference(model, clip, hc):
    eta = {"fednewton": {"eta": 0.1}} if model == "poisson" else {}
    p, reps, fd = make_block(dict(model=model, sizes="uniform(8,70)", m=6, mu=2.0, K=8, methods=["fednewton"],
                                  clip=clip, privacy={"mode": "certified", "hessian_clip": hc},
                                  method_settings=eta), REPS)
    s = p.method_settings["fednewton"]
    per_rep, noise = stacked_noise(p, "fednewton", REPS)
    fast = get_method("fednewton").fit(fd, s, noise).theta
    ref = reference_fit("fednewton", reps, fd.glm, s, per_rep, fd.B, p.mu, p.tau1,
                        privacy=p.privacy, clip=p.clip)
    assert np.all(np.isfinite(ref))
    np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-10)


def test_private_clip_bound_fast_equals_reference_and_is_on_the_grid():
    from fedgdp.core.glm import get_model
    from fedgdp.simulation.run import clip_bounds

    p, reps, fd = make_block(dict(sizes="uniform(20,60)", m=8, clip=PRIVATE_CLIP), REPS)
    glm = get_model(p.model)
    fast = clip_bounds(p, glm, reps, list(REPS))
    ref = clip_bounds(p, glm, reps, list(REPS), clip_bound_reference)
    np.testing.assert_array_equal(fast, ref)
    edges = privacy.histogram_grid(p.clip)
    assert all(np.any(np.isclose(b, edges[1:], rtol=1e-15)) for b in fast)


def test_private_clip_bound_tracks_the_quantile_at_high_mu():
    """With little noise (mu = 1e6) the private bound is the upper edge of the bin
    holding the largest client q-quantile (up to one bin: the CDF rule and numpy's
    interpolated quantile differ by at most one bin)."""
    from fedgdp.core.glm import get_model

    p, reps, _ = make_block(dict(sizes="equal(200)", m=5, mu=1e6), (0,))
    glm = get_model(p.model)
    rule = dict(PRIVATE_CLIP, grid=[0.01, 100, 400])
    B_priv = privacy.clip_bound(glm, reps[0], rule, mu=1e6, rng=np.random.default_rng(0))
    B_q = privacy.clip_bound(glm, reps[0], {"rule": "quantile", "q": 0.9})
    ratio = (100 / 0.01) ** (1 / 400)
    assert B_q / ratio <= B_priv <= B_q * ratio ** 2


# ----------------------------------------------------------- dp_accounting
def test_certified_ledger_matches_dp_accounting_pld():
    """A certified ledger's Gaussian releases composed by dp_accounting's PLD accountant
    give the epsilon of mu-GDP's conversion at delta = 1e-5. Tolerance: 1e-3 relative,
    far above the PLD discretisation error at interval 1e-4 (measured about 1e-8) and
    far below any calibration mistake (a factor sqrt(2) in one sd moves epsilon by > 5%)."""
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant

    p, reps, fd = make_block(dict(m=3, sizes="uniform(20,60)", K=6, mu=1.0, methods=["fednewton"],
                                  clip=PRIVATE_CLIP, privacy={"mode": "certified"}), (0,))
    _, noise = stacked_noise(p, "fednewton", (0,))
    led = get_method("fednewton").fit(fd, p.method_settings["fednewton"], noise).ledger
    assert led.certified
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    for rel in led.releases:
        mult = float(rel.sigma[0, 0] / rel.sensitivity[0, 0])
        acc.compose(dpa.GaussianDpEvent(noise_multiplier=mult), rel.count)
    eps_pld = acc.get_epsilon(1e-5)
    eps_gdp = privacy.gdp_epsilon(float(led.composed_mu()[0, 0]), 1e-5)
    assert eps_pld == pytest.approx(eps_gdp, rel=1e-3)


# ------------------------------------------------------------------ command line
def test_cli_ledger_reports_certification(capsys):
    import json

    from fedgdp.commands.cli import main

    args = ["ledger", "--method", "fednewton", "--m", "2", "--sizes", "equal(20)", "--K", "2"]
    assert main(args) == 0
    paper = json.loads(capsys.readouterr().out)
    newton = paper["clients"][0]["releases"][-1]
    assert newton["stage"] == "newton" and newton["certified"] is False
    assert newton["assumption"] == privacy.NEWTON_ASSUMPTION
    assert paper["mu_composed_max"] == pytest.approx(2.0, abs=1e-12)
    assert paper["mu_certified_max"] == "inf"   # strict JSON
    assert paper["unaccounted"] and paper["privacy_mode"] == "paper"
    assert main(args + ["--privacy-mode", "certified", "--private-clip", "0.9:0.2"]) == 0
    cert = json.loads(capsys.readouterr().out)
    assert cert["mu_certified_max"] == pytest.approx(2.0, abs=1e-12) and not cert["unaccounted"]
    assert cert["clients"][0]["releases"][0]["stage"] == "clip histogram"
    assert main(args + ["--privacy-mode", "certified"]) == 2
    assert "clip rule 'quantile'" in capsys.readouterr().err
