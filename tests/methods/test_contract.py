"""Contract tests over the method registry (issue 21): every registered method, on every
backend it lists, with no branch on a method's name (scikit-learn's check_estimator
shape). What a method must satisfy follows from its declaration: its settings resolve
on each experiment it runs on, its ledger composes to mu, the simulation and the
real-data backends agree on shared data, the audit has a target for each backend it
runs on, and a figure draws it (a style of its own or the fallback)."""
import numpy as np
import pandas as pd
import pytest

from conftest import make_block, stacked_noise
from fedgdp import methods
from fedgdp.common.figures import METHOD_STYLE, method_style
from fedgdp.core.glm import BINARY_LOGISTIC, matrix_model
from fedgdp.methods import REALDATA, SIMULATION

SIM = [n for n, m in methods.REGISTRY.items() if SIMULATION in m.tags.backends]
REAL = [n for n, m in methods.REGISTRY.items() if REALDATA in m.tags.backends]
SHARED = [n for n in SIM if n in REAL]
REAL_PRIVATE = [n for n in REAL if methods.REGISTRY[n].tags.private]


def _clients(seed=0, sizes=(20, 31, 25)):
    rng = np.random.default_rng(seed)
    X = [np.column_stack([np.ones(n), rng.standard_normal((n, 3))]) for n in sizes]
    Y = [BINARY_LOGISTIC.targets(rng.integers(0, 2, x.shape[0])) for x in X]
    return X, Y


class _PlanData:
    """What a plan reads, for a plan without data: a bound, sizes, halves, tau1, the mode, the design's
    width and the model (FedIRLS's clips)."""

    plan_B, plan_n, tau1, privacy = 0.7, np.array([[20.0, 30.0]]), 0.5, {"mode": "paper", "hessian_clip": 4.0}
    solve_tol = 0.0
    d = 3
    model = matrix_model("binary")

    def plan_halves(self):
        return self.plan_n // 2, self.plan_n - self.plan_n // 2


def _real_settings(name):
    from fedgdp.realdata import resolve as resolve_realdata

    return methods.REGISTRY[name].settings(resolve_realdata({"methods": [name]}).method_settings[name])


@pytest.mark.parametrize("name", list(methods.REGISTRY))
def test_settings_are_declared_and_resolve_on_every_backend(name):
    """The method declares its settings (a MethodSettings dataclass); each resolved key
    is one of them, and an unknown key is refused on every experiment it runs on."""
    from fedgdp.simulation.params import resolve

    meth = methods.REGISTRY[name]
    names = meth.setting_names()
    resolved = []
    if SIMULATION in meth.tags.backends:
        resolved.append(resolve({"methods": [name]}).method_settings[name])
        with pytest.raises(ValueError, match="unknown setting 'bogus'"):
            resolve({"methods": [name], "method_settings": {name: {"bogus": 1}}})
    if REALDATA in meth.tags.backends:
        from fedgdp.realdata import resolve as resolve_realdata

        resolved.append(resolve_realdata({"methods": [name]}).method_settings[name])
        with pytest.raises(ValueError, match="unknown setting 'bogus'"):
            resolve_realdata({"methods": [name], "method_settings": {name: {"bogus": 1}}})
    for s in resolved:
        assert set(s) <= set(names), set(s) - set(names)


@pytest.mark.parametrize("name", SIM)
def test_simulation_ledger_composes_to_mu(name):
    p, reps, fd = make_block(dict(sizes="uniform(12,40)", m=5, mu=2.0, K=6, methods=[name]), (0, 1))
    _, noise = stacked_noise(p, name, (0, 1))
    fit = methods.REGISTRY[name].fit(fd, p.method_settings[name], noise)
    np.testing.assert_allclose(fit.ledger.composed_mu(), 2.0, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", REAL_PRIVATE)
def test_realdata_ledger_composes_to_mu(name):
    from fedgdp.realdata import FoldData

    X, Y = _clients()
    fd = FoldData(BINARY_LOGISTIC, X, Y, mu=2.0, B=0.8, clip={"rule": "fixed", "value": 0.8})
    fit = methods.REGISTRY[name].fit(fd, _real_settings(name), np.random.default_rng(5))
    np.testing.assert_allclose(fit.ledger.composed_mu(), 2.0, rtol=0, atol=1e-12)
    assert np.isfinite(fit.theta).all()


@pytest.mark.parametrize("name", SHARED)
def test_simulation_and_realdata_backends_agree_on_shared_data(name):
    """Non-private, on the same clients (the simulation's replicate split by client), the
    two backends compute the same estimate (floored Newton solve on both)."""
    from fedgdp.realdata import FoldData

    p, reps, fd = make_block(dict(sizes="uniform(12,40)", m=4, mu="inf", K=5, methods=[name]), (0,))
    s = p.method_settings[name]
    _, noise = stacked_noise(p, name, (0,))
    sim = methods.REGISTRY[name].fit(fd, s, noise).theta[0]
    rep = reps[0]
    cuts = np.cumsum(rep.sizes)[:-1]
    X = np.split(rep.X, cuts)
    Y = [BINARY_LOGISTIC.targets(y.astype(np.int64)) for y in np.split(rep.y, cuts)]
    real_fd = FoldData(BINARY_LOGISTIC, X, Y, tau1=p.tau1,
                       newton={"solver": "floor", "cg_tol": 1e-8, "cg_maxiter": 500})
    real = methods.REGISTRY[name].fit(real_fd, s, None).theta[:, 0]
    np.testing.assert_allclose(real, sim, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", [n for n in SIM + REAL_PRIVATE if methods.REGISTRY[n].tags.private])
def test_the_audit_has_a_target_on_every_backend_and_mode_of_a_private_method(name):
    from fedgdp.audit import default_targets

    meth = methods.REGISTRY[name]
    covered = {(t.kind, t.mode) for t in default_targets() if t.method == name}
    assert covered == {(kind, mode) for kind in set(meth.tags.backends) & {SIMULATION, REALDATA}
                       for mode in meth.privacy_modes()}


@pytest.mark.parametrize("name", list(methods.REGISTRY) + ["a_method_without_a_style"])
def test_every_method_has_a_style_or_the_fallback(name):
    style = method_style(name)
    assert {"color", "marker"} <= set(style)
    if name not in METHOD_STYLE:
        assert style == method_style(name)       # derived from the name: stable


@pytest.mark.parametrize("name", REAL_PRIVATE)
def test_a_method_that_declares_halves_is_one_whose_plan_reads_them(name):
    """``halves`` (a client needs two rows; the audit moves a record of each half) says
    what the plan does: it reads the half sizes exactly when declared."""
    from fedgdp.realdata import FoldData

    read = []

    class Probe(FoldData):
        def plan_halves(self):
            read.append(True)
            return super().plan_halves()

    X, Y = _clients()
    meth = methods.REGISTRY[name]
    meth.plan(Probe(BINARY_LOGISTIC, X, Y, mu=2.0, B=0.8, clip={"rule": "fixed", "value": 0.8}), _real_settings(name))
    assert bool(read) == meth.tags.halves


@pytest.mark.parametrize("name", REAL)
def test_a_method_that_declares_a_newton_solve_is_one_whose_fit_calls_the_solver(name, monkeypatch):
    """``solves_newton`` (the Newton solver's settings are checked and audited for it)
    says what the fit does: it calls the configured solver exactly when declared."""
    from fedgdp.realdata import FoldData

    calls = []
    X, Y = _clients()
    fd = FoldData(BINARY_LOGISTIC, X, Y, tau1=0.5, newton={"solver": "floor", "cg_tol": 1e-8, "cg_maxiter": 50})
    be_cls = type(fd.backend(None))
    orig = be_cls.newton_release

    def spy(self, *a, **k):
        calls.append(True)
        return orig(self, *a, **k)

    monkeypatch.setattr(be_cls, "newton_release", spy)
    methods.REGISTRY[name].fit(fd, _real_settings(name), None)
    assert bool(calls) == methods.REGISTRY[name].tags.solves_newton


@pytest.mark.parametrize("name", [n for n in SIM if methods.REGISTRY[n].tags.tested_release is not None])
def test_the_tested_release_is_a_stage_of_the_plan(name):
    """The release the empirical test runs the method on (``tested_release``) is one its plan makes."""
    p, _, fd = make_block(dict(sizes="uniform(12,40)", m=3, mu=2.0, K=4, methods=[name]), (0,))
    meth = methods.REGISTRY[name]
    stages = {spec.stage for spec in meth.plan(fd, meth.settings(p.method_settings[name]))}
    assert meth.tags.tested_release in stages, stages


@pytest.mark.parametrize("name", [n for n in SIM if methods.REGISTRY[n].tags.theory_bound is not None])
def test_the_declared_bound_is_a_row_of_table_1(name):
    from fedgdp.core.theory import TABLE1
    from fedgdp.simulation.summary import theory_bounds

    assert methods.REGISTRY[name].tags.theory_bound in TABLE1
    cells = pd.DataFrame({"m": [10, 20], "N_mean": [1000.0, 1000.0], "mu": [1.0, 1.0], "K": [50, 50]})
    bound = theory_bounds(cells, name, d=5, form="k_explicit")
    assert np.isfinite(bound).all() and (bound > 5 / 1000.0).all()


@pytest.mark.parametrize("name", list(methods.registry(methods.CNN)))
def test_the_cnn_preset_resolves_through_the_declared_settings(name):
    """A CNN method's settings come from its declared preset (``cnn_preset``), resolved
    as the other experiments' (each value checked by its field): the keys are declared,
    and a preset value its field refuses is refused with the method's key."""
    from fedgdp.nn import settings
    from fedgdp.nn.settings import cnn_preset, cnn_settings, resolve

    meth = methods.REGISTRY[name]
    p = resolve({"figure": "fig10"})
    preset = cnn_preset(meth, p)
    assert set(preset) <= set(meth.setting_names()), set(preset) - set(meth.setting_names())
    assert cnn_settings(meth, p) == meth.settings(preset)        # frozen: what the method's hooks receive
    first = next(iter(preset))
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(settings.PRESETS, name, lambda q: dict(preset, **{first: -1}))
        with pytest.raises(ValueError, match=f"^{name}.{first} must be"):
            cnn_settings(meth, p)


@pytest.mark.parametrize("name", REAL)
def test_a_per_client_method_is_one_whose_fit_is_per_client(name):
    """``per_client`` (the estimator refuses such a method) says what the fit is."""
    from fedgdp.realdata import FoldData

    X, Y = _clients()
    fit = methods.REGISTRY[name].fit(FoldData(BINARY_LOGISTIC, X, Y), _real_settings(name), None)
    assert fit.local == methods.REGISTRY[name].tags.per_client
    assert fit.theta.shape == ((len(X),) if fit.local else ()) + (4, 1)


@pytest.mark.parametrize("name", [n for n in REAL_PRIVATE if any(
    spec.stage == "local step" for spec in methods.REGISTRY[n].plan(_PlanData(), _real_settings(n)))])
def test_the_local_step_size_is_the_one_its_plan_calibrates(name):
    """``local_step_size`` (the audit's local-step release) is the step size of the plan's
    local-step sensitivity ``2 B eta / n``."""
    meth, s = methods.REGISTRY[name], _real_settings(name)
    (spec,) = [sp for sp in meth.plan(_PlanData(), s) if sp.stage == "local step"]
    assert float(spec.scale) == 2.0 * _PlanData.plan_B * meth.local_step_size(s)
