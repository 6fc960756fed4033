"""The privacy audit's search: it flags the paper's FedNewton Newton step, reaches >= 0.9
of the recorded sensitivity on the certified Newton step, finds every certified release
within its recorded sensitivity, counts a non-finite change as inf, audits a run's
settings; the empirical lower bound on mu puts paper-mode FedNewton above its nominal mu.

The fast lane searches a representative set of releases (about 6 CPU-s); the full
default audit (every registered method, every solver), the CNN releases and the command
line on the full audit are marked slow."""
import dataclasses
import json
import math
import sys

import numpy as np
import pytest
import yaml

from fedgdp.audit import RATIO_TOL, AuditTarget, audit_nn, change, nn_targets, run_audit
from fedgdp.commands.audit import config_targets, read_run_config
from fedgdp.commands.cli import main
from fedgdp.core.privacy import Quantile, clip_rule
from fedgdp.realdata import REGISTRY as REAL
from fedgdp.simulation.backend import REGISTRY
from shipped_configs import ROOT

NEWTON_CG = {"solver": "cg", "cg_tol": 1e-8, "cg_maxiter": 500}
FAST = ([AuditTarget("simulation", name, model, mode, {"logistic": 0.081, "poisson": 1.13}[model])
         for model in ("logistic", "poisson")
         for name, mode in (("fedsgd", "paper"), ("fednewton", "paper"), ("fednewton", "certified"))]
        + [AuditTarget("realdata", "fednewton", "binary", mode, 0.5, newton=NEWTON_CG)
           for mode in ("paper", "certified")]
        + [AuditTarget("realdata", "fednewton_certified", "multiclass", "paper", 0.5,
                       newton={"solver": "ridge", "cg_tol": 1e-8, "cg_maxiter": 500}),
           AuditTarget("realdata", "dp_scaffold", "multiclass", "paper", 0.5, newton=NEWTON_CG)])


@pytest.fixture(scope="module")
def rows():
    return run_audit(quick=True, targets=FAST, nn=False)


@pytest.fixture(scope="module")
def all_rows():
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "torch", None)
        return run_audit(quick=True)


def _newton(rows, mode_or_method):
    return [r for r in rows if r.release == "newton" and mode_or_method in (r.mode, r.method)]


def test_certified_releases_stay_within_their_sensitivity(rows):
    bad = [r for r in rows if r.certified and not r.ratio <= 1 + RATIO_TOL]
    assert not bad, bad
    assert all(r.observed > 0 and r.budget > 100 and r.pair for r in rows)


def test_search_reaches_the_certified_newton_bound(rows):
    """The adversarial base (zero-curvature half 1, aligned clipped half 2) and one
    Hessian-shaping record reach 1/(1 + H_c/(tau1 n1)) of the bound: 0.962 at n1 = 100
    (simulation), 0.926 at n1 = 50 (real data); the issue asks >= 0.9."""
    cert = _newton(rows, "certified") + _newton(rows, "fednewton_certified")
    assert {r.model for r in cert} == {"logistic", "poisson", "binary", "multiclass"}
    assert all(0.9 <= r.ratio <= 1 + RATIO_TOL for r in cert), [(r.model, r.ratio) for r in cert]
    assert any("hessian" in r.pair for r in cert)


def test_paper_newton_step_is_flagged(rows):
    # the paper-mode Newton releases of a method whose releases differ by mode
    paper = [r for r in _newton(rows, "paper") if len(REAL[r.method].privacy_modes()) > 1]
    assert len(paper) == 3 and all(not r.certified for r in paper)
    assert all(r.ratio > 2 and r.ratio_finite > 2 for r in paper), paper   # well above noise level
    sims = [r for r in paper if r.model in ("logistic", "poisson")]
    assert all(r.ratio_finite >= 20 for r in sims)      # about n/8 = 25 at n = 200


def test_tiny_clients_and_extreme_records_are_searched(rows):
    r = next(r for r in rows if (r.method, r.model) == (FAST[0].method, FAST[0].model))
    assert r.budget > 1000
    from fedgdp.audit.search import SCALES

    assert max(SCALES) == np.finfo(float).max


def test_a_non_finite_change_counts_as_inf(monkeypatch):
    assert change([1.0, np.nan], [1.0, 0.0]) == math.inf
    assert change([np.finfo(float).max], [-np.finfo(float).max]) == math.inf
    assert change([3.0, 0.0], [0.0, 4.0]) == 5.0
    import fedgdp.audit.glm as audit

    real = audit._sim_release

    def broken(meth, kind, fd, s, theta):       # a release that goes NaN on one record
        out = real(meth, kind, fd, s, theta)
        return out * np.nan if np.abs(fd.reps[0].X).max() > 1e200 else out

    monkeypatch.setattr(audit, "_sim_release", broken)
    (row,) = run_audit(quick=True, targets=[FAST[0]], nn=False, histogram=False)
    assert row.ratio == math.inf and row.certified


@pytest.mark.slow
def test_the_inference_releases_reach_and_stay_within_their_sensitivity():
    """A FederatedGLM fit's inference releases (score outer products, curvature; every
    family): the aligned base and one orthogonal record reach the recorded sensitivity
    (within 1e-6: the clip margin) and the search finds nothing above it."""
    from fedgdp.audit.glm import INFERENCE_FAMILIES
    from fedgdp.realdata.moments import STAGES

    targets = [AuditTarget("inference", "federated_glm", f, "certified") for f in INFERENCE_FAMILIES]
    rows = run_audit(quick=True, targets=targets, nn=False, histogram=False)
    assert [(r.model, r.release) for r in rows] == [(f, s) for f in INFERENCE_FAMILIES for s in STAGES]
    assert all(r.certified and 1 - 1e-6 <= r.ratio <= 1 + RATIO_TOL and r.budget > 500 for r in rows), rows


def test_the_count_scale_release_reaches_and_stays_within_its_sensitivity(monkeypatch):
    """FedIRLS's count-scale release (Poisson): a zero count replaced by one at the clip reaches the recorded
    ``c sqrt(1 + c^2) / n`` (ratio 1 within float rounding), nothing passes it; recorded at 0.6 of it, the
    audit flags it (ratio about 1/0.6)."""
    from fedgdp.audit.glm import _audit_count_scale
    from fedgdp.core import privacy

    row = _audit_count_scale(100, 0)
    assert row.release == privacy.COUNT_SCALE and row.certified
    assert 1 - 1e-9 <= row.ratio <= 1 + RATIO_TOL, row
    real = privacy.plan_fedirls

    def understated(**kw):
        return tuple(dataclasses.replace(s, scale=0.6 * np.asarray(s.scale)) if s.stage == privacy.COUNT_SCALE
                     else s for s in real(**kw))

    monkeypatch.setattr(privacy, "plan_fedirls", understated)
    assert _audit_count_scale(100, 0).ratio == pytest.approx(1 / 0.6, rel=1e-6)


def test_fedirls_count_releases_are_audited_through_the_fits_round_functions(monkeypatch):
    """FedIRLS on counts: its gradient and curvature releases, moved through the fit's own round functions
    with the fit's clips ``B s`` and ``H_c W`` in units of s and W, stay within their recorded sensitivities
    (the gradient reaches 0.9 of it); released without the division by s (a unit slip: at s = 4 the terms reach
    4 times the plan's clip), the audit flags the gradient."""
    from fedgdp.audit.glm import _audit_fedirls_counts
    from fedgdp.methods import fedirls

    rows = _audit_fedirls_counts(100, 0)
    assert [r.release for r in rows] == ["gradient (every round)", "curvature (every round)"]
    assert all(r.certified and r.ratio <= 1 + RATIO_TOL for r in rows), rows
    assert rows[0].ratio >= 0.9, rows[0]
    monkeypatch.setattr(fedirls, "round_gradients",
                        lambda fd, theta, Wt, X, Y, xnorm, ends, B, s=1.0:
                        fedirls.client_gradients(fd, theta, Wt, X, Y, xnorm, ends, B))
    assert _audit_fedirls_counts(100, 0)[0].ratio > 2.0


def test_an_understated_inference_sensitivity_fails_the_audit(monkeypatch):
    """The mutation: the inference releases' plan records 0.6 of their sensitivities (what
    the fit's ledger would record and calibrate its noise on); the audit flags both releases
    (ratio about 1/0.6)."""
    import fedgdp.realdata.moments as moments

    real = moments.release_plan

    def understated(B, k):
        return tuple(dataclasses.replace(s, scale=0.6 * np.asarray(s.scale)) for s in real(B, k))

    monkeypatch.setattr(moments, "release_plan", understated)
    rows = run_audit(quick=True, targets=[AuditTarget("inference", "federated_glm", "logistic", "certified")],
                     nn=False, histogram=False)
    assert len(rows) == 2 and all(r.ratio > 1.5 for r in rows), rows


@pytest.mark.slow
def test_every_registered_method_release_and_solver_is_audited(all_rows):
    seen = {(r.method, r.model) for r in all_rows}
    for name in REGISTRY:
        assert {(name, "logistic"), (name, "poisson")} <= seen
    for name, meth in REAL.items():
        if meth.tags.private:        # a one-output method (FedIRLS) on the binary task only
            assert {(name, "binary")} | (set() if meth.tags.single_output else {(name, "multiclass")}) <= seen
    assert {("clip_private_quantile", "logistic"), ("clip_private_quantile", "poisson")} <= seen
    assert {("federated_glm", f) for f in ("logistic", "poisson", "multinomial")} <= seen
    releases = {(r.method, r.model, r.release) for r in all_rows}
    assert {("fedirls", "poisson", "count scale"), ("fedirls", "poisson", "gradient (every round)"),
            ("fedirls", "poisson", "curvature (every round)")} <= releases
    solvers = {r.setting.split("solver=")[1].split(",")[0] for r in all_rows if "solver=" in r.setting}
    assert solvers == {"cg", "ridge", "floor"}
    bad = [r for r in all_rows if r.certified and not r.ratio <= 1 + RATIO_TOL]
    assert not bad, bad
    assert all(r.ratio >= 0.9 for r in all_rows if r.certified and r.release == "newton")


def test_a_run_config_is_audited_at_its_settings(tmp_path):
    """The run's methods, privacy mode, clip rule and solver become the targets; the
    command runs on a user's config file."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    targets = config_targets(config)
    sim = {(t.method, t.model) for t in targets if t.kind == "simulation"}
    assert ("fednewton_certified", "poisson") in sim and ("fedsgd", "logistic") in sim
    real = [t for t in targets if t.kind == "realdata"]
    assert {t.newton["solver"] for t in real} == {"cg"} and {t.model for t in real} == {"binary", "multiclass"}
    assert all(t.tau1 > 0 and clip_rule(t.clip) == Quantile(0.9) for t in targets if t.kind != "nn")   # a rule or dict
    cnn = [t for t in targets if t.kind == "nn"]          # the nn section: its methods at the digits settings
    assert [t.method for t in cnn] == config["nn"]["methods"] and all(t.nn["clip"] == 1.0 for t in cnn)

    study = dict(config["studies"]["equal_n"], methods=["fednewton"], models=["logistic"])
    user = {"defaults": {"privacy": {"mode": "certified", "hessian_clip": 2}, "clip": {"rule": "fixed", "value": 2.0}},
            "studies": {"equal_n": study}, "realdata": None, "nn": None}
    base = dict(config, studies={})
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    (tmp_path / "user.yaml").write_text(yaml.safe_dump(user))
    (t,) = config_targets(read_run_config([tmp_path / "base.yaml", tmp_path / "user.yaml"]))
    assert (t.method, t.mode, t.hessian_clip, t.B) == ("fednewton", "certified", 2.0, 2.0)
    assert main(["audit", "--quick", "--json", "--configfile", str(tmp_path / "base.yaml"),
                 str(tmp_path / "user.yaml"), "--table", str(tmp_path / "audit")]) == 0
    md = (tmp_path / "audit.md").read_text()
    assert "H_c=2 tau1" in md and "clip=fixed" in md and "lower bound" in md
    (tmp_path / "partial.yaml").write_text(yaml.safe_dump({"defaults": user["defaults"]}))
    with pytest.raises(ValueError, match="not a whole config"):
        read_run_config([tmp_path / "partial.yaml"])
    with pytest.raises(ValueError, match="--configfile .*missing.yaml"):
        read_run_config([tmp_path / "missing.yaml"])


def test_cli_prints_the_audit_as_json_and_as_a_table(rows, capsys, monkeypatch):
    """The command's plumbing on the rows above: `fedgdp audit --quick` is
    run_audit(quick=True) over the default targets (the search itself: the tests above and
    all_rows, without repeating it here)."""
    import fedgdp.audit

    calls = []
    monkeypatch.setattr(fedgdp.audit, "run_audit", lambda **kw: calls.append(kw) or rows)
    assert main(["audit", "--quick", "--json"]) == 0
    assert calls == [{"quick": True, "targets": None, "seed": 0, "histogram": True}]
    out = json.loads(capsys.readouterr().out)
    assert len(out) == len(rows)
    assert {"method", "model", "release", "certified", "observed", "recorded", "ratio", "budget", "pair"} <= set(out[0])
    assert main(["audit", "--quick"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["method", "model", "mode"] and len(table) == len(rows) + 1


# ------------------------------------------------------------ empirical lower bound
def test_gdp_lower_bound_inverts_the_gdp_tradeoff():
    """With no errors out of n the bound is 2 Phi^-1(1 - u), u the Clopper-Pearson bound
    ``1 - (alpha/2)^(1/n)`` (exact formula for k = 0); equal error rates of 1/2 give 0."""
    from scipy.stats import norm

    from fedgdp.commands.empirical import clopper_pearson_upper, gdp_lower_bound

    u = 1 - 0.025 ** (1 / 1000)
    assert clopper_pearson_upper(0, 1000, 0.975) == pytest.approx(u, rel=1e-9)
    assert gdp_lower_bound(0, 0, 1000, 0.05) == pytest.approx(2 * norm.ppf(1 - u), rel=1e-9)
    assert gdp_lower_bound(500, 500, 1000, 0.05) == 0.0


def test_empirical_mu_finds_paper_fednewton_above_its_nominal_mu(tmp_path):
    """On their worst pairs (1000 runs per data set, seed 0): the paper's FedNewton above
    nominal mu = 2 (its Newton step moves about n/8 times its recorded sensitivity), the
    certified FedNewton and FedSGD below. A certified method's bound exceeds its mu with
    probability at most 5% over seeds; seed 0 is fixed, so the test is deterministic."""
    from fedgdp.commands.empirical import plot_empirical, run_empirical

    targets = [AuditTarget("simulation", m, "logistic", mode, 0.081)
               for m, mode in (("fednewton", "paper"), ("fednewton_certified", "paper"), ("fedsgd", "paper"))]
    rows = run_empirical(targets, trials=1000, calibration=250)
    by = {r.method: r for r in rows}
    assert by["fednewton"].mu_lower > 2.0 and not by["fednewton"].certified
    assert by["fednewton_certified"].mu_lower <= 2.0 and by["fedsgd"].mu_lower <= 2.0
    assert all(r.confidence == 0.95 and r.mu_nominal == 2.0 for r in rows)
    assert [by[n].mode for n in ("fednewton", "fednewton_certified", "fedsgd")] == ["paper", "any", "any"]
    plot_empirical(rows, tmp_path / "audit.pdf", tmp_path / "audit.png")
    assert (tmp_path / "audit.png").stat().st_size > 10_000


def test_the_audit_target_is_not_in_all():
    import fedgdp.plan as wp
    from shipped_configs import SCHEMA, merged

    t = wp.load(merged(), SCHEMA, []).targets()
    assert t["audit"] == ["tables/paper/audit.csv", "tables/paper/audit.md", "figures/paper/audit.csv",
                          "figures/paper/audit.pdf", "figures/paper/audit.png"]
    assert not set(t["audit"]) & set(t["all"])


def test_the_cnn_settings_of_a_run_config_are_audit_targets(tmp_path):
    """--configfile covers the CNN settings: each data set's settings (nn.settings, then
    nn.dataset_settings) and methods; non-private settings are left out; no torch needed."""
    config = yaml.safe_load((ROOT / "config.yaml").read_text())
    config["nn"] = dict(config["nn"], datasets=["digits", "mnist"], methods=["fedavg", "fednewton_iter"],
                        settings={"ridge": 0.5}, dataset_settings={"mnist": {"clip": 0.25}})
    targets = [t for t in config_targets(config) if t.kind == "nn"]
    assert [(t.method, t.nn["clip"], t.nn["ridge"], t.nn["lr"]) for t in targets] == [
        ("fedavg", 1.0, 0.5, 0.3), ("fednewton_iter", 1.0, 0.5, 0.3),
        ("fedavg", 0.25, 0.5, 0.01), ("fednewton_iter", 0.25, 0.5, 0.01)]
    assert "clip=0.25" in targets[2].label() and "ridge=0.5" in targets[2].label()
    config["nn"]["settings"] = {"mu": "inf"}
    assert not [t for t in config_targets(config) if t.kind == "nn"]
    assert {t.method for t in nn_targets()} == {"fedsgd", "fedhybrid", "fedavg", "fednewton_iter"}


@pytest.mark.slow
def test_nn_methods_are_audited_when_torch_imports():
    """Every CNN method's releases at the default settings and at B = 1e-5 (where the 50/50
    head's label flip makes the head Newton bound tight): within their recorded
    sensitivities, and the search reaches 0.98 of the gradient bounds and 0.999 of the Newton
    bound at B = 1e-5 (the Fisher term B^2 / lambda of the bound is negligible there)."""
    pytest.importorskip("torch")
    from fedgdp.nn.settings import METHODS

    nn_rows = run_audit(quick=True, targets=nn_targets(), histogram=False)
    assert all(r.model == "cnn" for r in nn_rows)
    assert {f"nn:{m}" for m in METHODS} == {r.method for r in nn_rows}
    assert {"local step", "gradient", "newton"} == {r.release for r in nn_rows}
    assert all(r.observed > 0 and r.budget > 500 and r.pair for r in nn_rows)
    assert all(r.ratio >= 0.98 for r in nn_rows if r.release != "newton")
    (t,) = [t for t in nn_targets() if t.method == "fednewton_iter"]
    small = audit_nn([AuditTarget("nn", t.method, "cnn", nn=dict(t.nn, clip=1e-5))], 0)
    newton = next(r for r in small if r.release == "newton")
    assert newton.ratio >= 0.999 and "50/50" in newton.pair
    bad = [r for r in nn_rows + small if r.certified and r.ratio > 1]
    assert not bad, bad


@pytest.mark.slow
def test_empirical_points_of_dp_scaffold_and_the_cnns(tmp_path):
    """DP-SCAFFOLD (real data, its audited worst pair) and a CNN method (a tiny network's
    whole training on a relabelled image) get their points: certified, below nominal mu
    (with probability 95% each; seed 0 is fixed, so the test is deterministic), drawn."""
    pytest.importorskip("torch")
    from fedgdp.commands.empirical import plot_empirical, run_empirical

    fedavg = next(t for t in nn_targets() if t.method == "fedavg")
    schedule = AuditTarget("nn", "fedavg", "cnn", nn=dict(fedavg.nn, accounting="schedule"))   # its own client draws
    targets = [AuditTarget("realdata", "dp_scaffold", "binary", "paper", 0.5, newton=NEWTON_CG), fedavg, schedule]
    rows = run_empirical(targets, trials=300, calibration=100, nn_trials=60)
    assert [(r.method, r.model, r.trials) for r in rows] == [("dp_scaffold", "binary", 300), ("nn:fedavg", "cnn", 60),
                                                              ("nn:fedavg", "cnn", 60)]
    assert all(r.certified and 0 <= r.mu_lower <= r.mu_nominal for r in rows)
    plot_empirical(rows, tmp_path / "audit.pdf", tmp_path / "audit.png")
    assert (tmp_path / "audit.png").stat().st_size > 10_000


# ------------------------------------------------------------ the CNN releases, run by the backend
def _broken_smallest_batch(monkeypatch):
    """The mutation: the plan records the largest minibatch of a pass instead of the smallest."""
    import fedgdp.nn.settings as nn_settings

    monkeypatch.setattr(nn_settings, "smallest_batch",
                        lambda n, b: np.ceil(np.asarray(n, float) / np.ceil(np.asarray(n, float) / b)))


def test_a_wrong_minibatch_sensitivity_fails_the_cnn_audit(monkeypatch):
    """A pass of minibatches of 3 over a client of 5 images (3, 2): the audit replaces one
    image in each minibatch of the backend's own pass and reads the ledger's sensitivity,
    2 B lr / 2. It reaches 0.9 of it and stays within it; with `smallest_batch` broken to
    return the largest minibatch (the ledger then records 2 B lr / 3), the 2-image minibatch
    moves ~3/2 of the recorded sensitivity: the audit fails (ratio > 1)."""
    pytest.importorskip("torch")
    (t,) = [t for t in nn_targets() if t.method == "fedavg"]
    target = AuditTarget("nn", "fedavg", "cnn", nn=dict(t.nn, local_batch=3))
    (row,) = audit_nn([target], 0, n=5)
    assert row.release == "local step" and row.certified and 0.9 <= row.ratio <= 1, row
    _broken_smallest_batch(monkeypatch)
    (bad,) = audit_nn([target], 0, n=5)
    assert bad.ratio > 1.3 and bad.recorded < row.recorded, bad


def test_a_readings_config_given_as_a_run_config_names_the_readings_flag(capsys):
    assert main(["audit", "--configfile", str(ROOT / "config" / "nn-readings.yaml")]) == 2
    assert "fedgdp audit --readings" in capsys.readouterr().err


@pytest.mark.slow
def test_every_certified_reading_is_audited_at_its_settings(tmp_path, capsys, monkeypatch):
    """`fedgdp audit --readings config/nn-readings.yaml`: every reading that readings.csv
    reports with a finite certified mu has every release of every method audited at its own
    settings (the backend's releases against its ledger), each within its recorded
    sensitivity; with `smallest_batch` broken, the minibatch reading's local steps fail."""
    pytest.importorskip("torch")
    from fedgdp.audit import readings_targets
    from fedgdp.nn.readings import load_readings, privacy_of
    from fedgdp.nn.settings import resolve

    path = ROOT / "config" / "nn-readings.yaml"
    cfg = load_readings(path)
    certified = {name for name, over in cfg.readings.items()
                 if math.isfinite(privacy_of(*(lambda p: (p.release, p.mu, p.accounting, False, p.noise_for))(
                     resolve({"dataset": cfg.dataset, "figure": "fig10", "m": 100, **over})))[0])}
    assert len(certified) == 16
    assert main(["audit", "--readings", str(path), "--json", "--table", str(tmp_path / "audit")]) == 0
    rows = json.loads(capsys.readouterr().out)
    audited = {name for r in rows for name in r["setting"].split(":")[0].removeprefix("reading ").split(", ")}
    assert audited == certified
    assert all(r["model"] == "cnn" and r["certified"] and float(r["ratio"]) <= 1 for r in rows)
    assert {(r["method"], r["release"]) for r in rows} == {("nn:fedsgd", "gradient"), ("nn:fedhybrid", "gradient"),
                                                           ("nn:fedhybrid", "local step"), ("nn:fedavg", "local step"),
                                                           ("nn:fednewton_iter", "local step"),
                                                           ("nn:fednewton_iter", "newton")}
    assert (tmp_path / "audit.md").exists()
    _broken_smallest_batch(monkeypatch)
    mb = [t for t in readings_targets(path) if t.reading == "private_mb32"]
    bad = [r for r in audit_nn(mb, 0) if r.release == "local step"]
    assert len(bad) == 3 and all(r.ratio > 1 for r in bad), bad


def test_the_newton_ridge_reading_is_audited_at_its_ridge(capsys):
    """config/nn-readings-newton.yaml certifies FedNewton-Iter at ridge 30: its releases, the head Newton
    step at that ridge among them, are audited at its settings, each within its recorded sensitivity."""
    pytest.importorskip("torch")
    assert main(["audit", "--readings", str(ROOT / "config" / "nn-readings-newton.yaml"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    ridge30 = [r for r in rows if r["setting"].startswith("reading schedule_B10_lr0.1_ridge30:")]
    assert {r["release"] for r in ridge30} == {"local step", "newton"}
    assert all("ridge=30," in r["setting"] for r in ridge30)
    assert all(r["certified"] and 0 < float(r["ratio"]) <= 1 for r in rows), rows
