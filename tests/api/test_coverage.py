"""The coverage study of FederatedGLM's intervals (fedgdp.api.coverage, target `coverage`):
the smoke grid runs through its two commands, the table's arithmetic and columns, derived
seeds, the plan's target and checks, and coverage at mu = inf near 0.95."""
import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml

from fedgdp.api import coverage as cv
from fedgdp.commands.cli import main
from fedgdp.plan import ConfigError, load
from shipped_configs import ROOT

SMOKE = {"families": {"logistic": [-0.5, 0.8, -0.4, 0.2], "poisson": [0.5, 0.3, -0.2, 0.1]}, "m": [3], "n": [40],
         "mu": [2, "inf"], "methods": ["auto"], "replicates": 2, "base_seed": 5, "alpha": 0.05, "cov_type": "model"}


def test_the_smoke_grid_runs_through_its_commands(tmp_path):
    """Every cell through `fedgdp coverage-cell`, then `fedgdp coverage`: the table has
    `TABLE_COLUMNS`, a row per (cell, coefficient), R = 2 each; the figure is written."""
    names = [cv.cell_name(c) for c in cv.cells(cv.check_settings(SMOKE))]
    assert names == ["logistic_m3_n40_mu2_auto", "logistic_m3_n40_muinf_auto", "poisson_m3_n40_mu2_auto",
                     "poisson_m3_n40_muinf_auto"]
    files = []
    for name in names:
        files.append(str(tmp_path / f"{name}.parquet"))
        assert main(["coverage-cell", "--spec", json.dumps({"settings": SMOKE, "cell": name}), "--out", files[-1]]) == 0
    out = {ext: str(tmp_path / f"coverage.{ext}") for ext in ("csv", "md", "pdf", "png")}
    assert main(["coverage", *files, "--spec", json.dumps({"settings": SMOKE, "caption": "C."}),
                 *[a for ext, p in out.items() for a in (f"--{ext}", p)]]) == 0
    t = pd.read_csv(out["csv"])
    assert tuple(t.columns) == cv.TABLE_COLUMNS
    assert len(t) == 4 * 4 and set(t["replicates"] + t["failed"]) == {2}
    assert list(t["term"][:4]) == ["(intercept)", "x0", "x1", "x2"]
    assert t["coverage"].between(0, 1).all() and (t["mean_width"] > 0).all()
    assert (t.loc[t["mu"] == math.inf, "mean_se_noise"] == 0).all() and (t.loc[t["mu"] == 2, "mean_se_noise"] > 0).all()
    md = open(out["md"]).read()
    assert md.startswith("C.\n\n| family | m | n | mu |") and md.count("\n| logistic |") == 8
    assert all(open(p, "rb").read(4) for p in (out["pdf"], out["png"]))


def test_the_table_arithmetic_and_failed_fits():
    """Coverage over the fits that returned, its MC SE sqrt(c (1 - c) / R), width, bias, sd."""
    base = {"family": "logistic", "m": 2, "n": 5, "mu": 2.0, "method": "auto", "term": "x0", "truth": 1.0,
            "se_sampling": 0.1, "se_noise": 0.05, "method_used": "fedsgd", "status": "converged", "failed": False}
    rows = [base | {"replicate": r, "coef": c, "ci_low": c - 0.5, "ci_high": c + 0.5, "covered": abs(c - 1) <= 0.5}
            for r, c in enumerate([1.0, 1.2, 2.0, 0.8])]
    rows.append(base | {"replicate": 4, "coef": math.nan, "ci_low": math.nan, "ci_high": math.nan, "covered": False,
                        "status": "failed: x", "failed": True, "method_used": ""})
    (row,) = cv.coverage_table(pd.DataFrame(rows)).to_dict("records")
    assert row["replicates"] == 4 and row["failed"] == 1 and row["coverage"] == 0.75
    assert row["mc_se"] == pytest.approx(math.sqrt(0.75 * 0.25 / 4)) and row["mean_width"] == pytest.approx(1.0)
    assert row["bias"] == pytest.approx(0.25) and row["sd_coef"] == pytest.approx(np.std([1, 1.2, 2, 0.8], ddof=1))
    assert row["method_used"] == "fedsgd" and row["converged"] == 1.0


def test_seeds_are_derived_from_the_seed_cell_and_replicate():
    """Same (base_seed, cell, replicate): the same rows; data shared across mu and method
    (common random numbers), not across replicates or base seeds."""
    cell = {"family": "logistic", "truth": [0.0, 1.0], "m": 2, "n": 30, "mu": 2.0, "method": "auto"}
    a = cv.replicate(cell, 0, base_seed=1)
    assert a == cv.replicate(cell, 0, base_seed=1)
    assert a[1]["coef"] != cv.replicate(cell, 1, base_seed=1)[1]["coef"]
    assert a[1]["coef"] != cv.replicate(cell, 0, base_seed=2)[1]["coef"]
    X1, y1, _ = cv._data(cell, 0, 1)
    X2, y2, _ = cv._data(cell | {"mu": math.inf, "method": "fedsgd"}, 0, 1)
    assert np.array_equal(X1, X2) and np.array_equal(y1, y2)


def test_the_settings_are_a_frozen_object():
    """`check_settings` returns `CoverageSettings` (attributes, frozen), mu as floats; `as_dict` gives them back."""
    import dataclasses

    s = cv.check_settings(SMOKE)
    assert isinstance(s, cv.CoverageSettings) and s.mu == [2.0, math.inf] and s.replicates == 2
    assert s.families["logistic"] == [-0.5, 0.8, -0.4, 0.2] and s.title is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.alpha = 0.1  # type: ignore[misc]
    assert s.as_dict() == {**SMOKE, "mu": [2.0, math.inf], "title": None}


@pytest.mark.parametrize("key, value, words", [
    ("m", [0], "coverage.m"), ("mu", [-1], "coverage.mu"), ("methods", ["fedx"], "coverage.methods"),
    ("families", {"gamma": [0, 1]}, "unknown family 'gamma'"), ("replicates", 0, "coverage.replicates"),
    ("alpha", 1.5, "coverage.alpha"), ("cov_type", "HC3", "coverage.cov_type")])
def test_bad_settings_name_their_key(key, value, words):
    with pytest.raises(ValueError, match=words.replace(".", r"\.")):
        cv.check_settings(SMOKE | {key: value})


def _paper():
    return yaml.safe_load((ROOT / "config.yaml").read_text())


def test_the_coverage_target_is_not_in_all_and_its_config_is_checked():
    schema = ROOT / "workflow" / "schemas" / "config.schema.yaml"
    p = load(_paper(), schema)
    t = p.targets()
    assert t["coverage"] == ["tables/paper/coverage.csv", "tables/paper/coverage.md", "figures/paper/coverage.pdf",
                             "figures/paper/coverage.png"]
    assert not set(t["coverage"]) & set(t["all"]) and not any("coverage" in f for f in t["all"])
    cells = p.coverage_cells()
    assert len(cells) == 2 * 2 * 2 * 4 * 2 and "logistic_m10_n1000_mu2_auto" in cells
    assert p.coverage_cell_files()[0] == f"results/paper/coverage/{cells[0]}.parquet"
    assert "100 replicates per cell, base_seed 2024" in p.coverage_caption()
    cfg = _paper()
    cfg["coverage"]["m"] = [10, 0]
    with pytest.raises(ConfigError, match="coverage"):
        load(cfg, schema)
    cfg = _paper()
    del cfg["coverage"]
    assert "coverage" not in load(cfg, schema).targets()


def test_coverage_at_mu_inf_is_near_the_nominal_level():
    """Logistic, 10 clients of 200 rows, mu = inf (the default method: FedIRLS, Newton to the MLE), 200
    replicates (base seed 11, not the config's): the pooled coverage of the 4 coefficients'
    95% intervals is within 0.035 of 0.95 (4.5 binomial SEs of 800 intervals, sqrt(0.95 x
    0.05 / 800) = 0.0077, as if independent: their correlation is small) and every
    coefficient's is at least 0.89 (4 SEs of 200, 0.0154, below 0.95)."""
    cell = {"family": "logistic", "truth": [-0.5, 0.8, -0.4, 0.2], "m": 10, "n": 200, "mu": math.inf,
            "method": "auto"}
    t = cv.coverage_table(cv.run_cell(cell, replicates=200, base_seed=11))
    assert (t["replicates"] == 200).all() and set(t["method_used"]) == {"fedirls"}
    assert abs(t["coverage"].mean() - 0.95) <= 0.035, t
    assert (t["coverage"] >= 0.89).all(), t
