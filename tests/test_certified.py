"""Certified means proved (docs/methods.md §2): settings the proofs do not cover are
refused with one line naming key and value; the certified CG solve records its error."""
import math

import numpy as np
import pytest

from fedgdp.privacy import MU_FLOOR, parse_mu, plan_fednewton
from fedgdp.solvers import certified_cg_iterations, cg_solve, check_certified_cg


@pytest.mark.parametrize("value", [5e-324, 1e-7, "1e-9"])
def test_mu_below_the_floor_is_refused(value):
    with pytest.raises(ValueError, match="mu must be at least 1e-06"):
        parse_mu(value)
    assert parse_mu(MU_FLOOR) == MU_FLOOR and parse_mu("inf") == math.inf


@pytest.mark.parametrize("sizes", ["equal(1)", "uniform(0,5)", "uniform(1,9)"])
def test_fednewton_needs_two_samples_per_client(sizes, tmp_path, capsys):
    from fedgdp.cli import main
    from fedgdp.simulation.params import resolve

    with pytest.raises(ValueError, match=rf"sizes '{sizes[:5]}.*fednewton needs n_i >= 2"):
        resolve({"sizes": sizes, "m": 4})
    assert resolve({"sizes": sizes, "m": 4, "methods": ["fedsgd"]})["sizes"] == sizes   # halves unused
    with pytest.raises(ValueError, match="needs n_i >= 2"):
        resolve({"sizes": "lognormal(1,1)", "n_floor": 1, "methods": ["fednewton_certified"]})
    try:
        rc = main(["simulate", "--sizes", sizes, "--m", "4", "--seeds", "0", "--out", str(tmp_path / "x.parquet")])
    except SystemExit as exc:
        rc = exc.code
    assert rc == 2 and "needs n_i >= 2" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()


def test_the_pipeline_config_check_refuses_empty_halves():
    from pathlib import Path

    import yaml

    from fedgdp.plan.config import ConfigError
    from fedgdp.plan.core import load

    root = Path(__file__).resolve().parents[1]
    config = yaml.safe_load((root / "config.yaml").read_text())
    config["studies"]["equal_n"]["grid"]["sizes"] = ["equal(1)"]
    with pytest.raises((ConfigError, ValueError), match=r"equal_n.*needs n_i >= 2"):
        load(config, root / "workflow/schemas/config.schema.yaml", [])


@pytest.mark.parametrize("newton,match", [({"cg_maxiter": 1}, "newton.cg_maxiter >= 21"),
                                          ({"cg_maxiter": 2}, "got newton.cg_maxiter=2"),
                                          ({"cg_tol": math.inf}, "newton.cg_tol in \\(0, 1\\)"),
                                          ({"cg_tol": 1.0}, "got newton.cg_tol=1.0")])
def test_certified_realdata_refuses_truncated_cg(newton, match):
    from fedgdp.realdata import resolve

    for over in ({"privacy": {"mode": "certified"}, "clip": 1.0}, {"methods": ["fednewton_certified"]}):
        with pytest.raises(ValueError, match=match):
            resolve({**over, "newton": newton})
    resolve({"newton": newton})                                        # paper mode: uncertified anyway
    resolve({"privacy": {"mode": "certified"}, "clip": 1.0, "newton": {**newton, "solver": "ridge"}})


def test_cg_iteration_bound_holds_on_the_worst_spectrum():
    """The bound of certified_cg_iterations on diagonal systems whose spectrum fills
    [tau1, (1 + c) tau1], the case the Chebyshev bound is tight for (tolerance: the
    residual must meet cg_tol exactly; exact-arithmetic theory, float64 CG)."""
    rng = np.random.default_rng(0)
    for c, tol in ((4.0, 1e-8), (16.0, 1e-6), (4.0, 1e-3)):
        lam = 0.3 * np.concatenate([[1.0, 1.0 + c], 1.0 + c * rng.random(200)])
        b = rng.standard_normal(lam.shape)
        k = certified_cg_iterations(tol, c)
        x, _ = cg_solve(lambda v, lam=lam: lam * v, b, tol=0.0, maxiter=k)
        assert np.linalg.norm(b - lam * x) <= tol * np.linalg.norm(b)
    check_certified_cg(1e-8, 21, 4.0)


def test_recorded_sensitivity_adds_the_solve_error():
    base = plan_fednewton(B=1.0, n1=50.0, n2=50.0, eta=0.5, K=5, tau1=0.5, hessian_bound=2.0)[1]
    cg = plan_fednewton(B=1.0, n1=50.0, n2=50.0, eta=0.5, K=5, tau1=0.5, hessian_bound=2.0, solve_tol=1e-3)[1]
    assert float(cg.sensitivity) == pytest.approx(float(base.sensitivity) + 2 * 1e-3 * 1.0 / 0.5, rel=1e-15)
    assert cg.certified


def test_truncated_cg_moves_the_release_beyond_the_exact_bound_and_is_refused_at_run_time():
    """The issue's case: 1 CG iteration. The run-time residual check refuses it even
    when the settings check is bypassed (a FoldData built by hand)."""
    from fedgdp.glm import matrix_model
    from fedgdp.realdata import FoldData, get_method

    rng = np.random.default_rng(0)
    model = matrix_model("binary")
    X = np.column_stack([np.ones(40), rng.random((40, 5))])
    Y = model.targets(rng.integers(0, 2, 40))
    fd = FoldData(model, [X], [Y], mu=2.0, B=1.0, tau1=0.5, newton={"solver": "cg", "cg_tol": 1e-8, "cg_maxiter": 1},
                  privacy={"mode": "certified", "hessian_clip": 4.0}, clip={"rule": "fixed", "value": 1.0})
    meth = get_method("fednewton")
    with pytest.raises(ValueError, match="CG residual .* above cg_tol"):
        meth.newton_update(fd.backend(None), np.zeros((1, 6, 1)))
