"""The claims report (fedgdp.reports.claims): each claim's test on small synthetic results built
to hold, to fail and to tie (a difference within Monte Carlo error is never a win),
the verdict rules, and the `fedgdp claims` command."""
import itertools
import math

import numpy as np
import pandas as pd
import pytest

from fedgdp.reports import claims
from fedgdp.reports.claims import VERDICTS, Check
from fedgdp.simulation.summary import SUMMARY_COLUMNS

FOUR = ["fedsgd", "fedhybrid", "fedavg", "fednewton"]


def summary_rows(model, study, cells, mse_fn, se_rel=0.01):
    """Summary rows: ``cells`` are dicts (sizes, m, mu, K, n), ``mse_fn(method, cell)`` the
    mean MSE; the Monte Carlo SE is ``se_rel * mse``."""
    out = []
    for cell in cells:
        for method in FOUR:
            mse = mse_fn(method, cell)
            out.append({"model": model, "study": study, "method": method, "sizes": cell["sizes"],
                        "m": cell["m"], "mu": float(cell.get("mu", 2.0)), "K": cell.get("K", 50),
                        "replicates": 100, "diverged": 0, "n_ok": 100, "mse": mse, "se": se_rel * mse,
                        "median": mse, "rounds": 1.0, "floats_up": 1.0, "floats_down": 1.0,
                        "N_mean": float(cell["m"] * cell["n"]), "n_min": cell["n"], "n_max": cell["n"],
                        "B_mean": 1.0, "mu_composed_max": float(cell.get("mu", 2.0))})
    return pd.DataFrame(out, columns=SUMMARY_COLUMNS)


def grid_cells(ms, ns, **extra):
    return [dict(sizes=f"equal({n})", m=m, n=n, **extra) for n, m in itertools.product(ns, ms)]


# ------------------------------------------------------------------ building blocks
def test_compare_less_win_loss_and_tie():
    assert claims.compare_less(1.0, 0.1, 2.0, 0.1) == "agree"         # z = -7.1
    assert claims.compare_less(2.0, 0.1, 1.0, 0.1) == "contradict"
    # a difference of 2 combined SE exactly is still a tie (the rule is |z| > Z_TIE)
    se = 0.1
    diff = claims.Z_TIE * math.hypot(se, se)
    assert claims.compare_less(1.0, se, 1.0 + diff, se) == "tie"
    assert claims.compare_less(1.0, se, 1.0 + 1.01 * diff, se) == "agree"
    assert claims.compare_less(1.0, float("nan"), 5.0, 0.1) == "tie"  # no SE: never a win


def test_trend_ols_and_two_points():
    x = np.array([20, 30, 40, 50, 60])
    t = claims.trend(x, 3.0 / x)
    assert t.slope == pytest.approx(-1.0) and t.hi < 0
    # two points: slope through the ends, CI from the delta-method SE
    t2 = claims.trend([10, 20], [1.0, 0.5], [0.01, 0.005])
    assert t2.slope == pytest.approx(-1.0) and t2.points == 2
    assert t2.hi < 0
    t3 = claims.trend([10, 20], [1.0, 0.9], [0.5, 0.5])  # within noise
    assert t3.lo < 0 < t3.hi


def test_verdict_rules():
    a, t, c = Check("agree", ""), Check("tie", ""), Check("contradict", "")
    assert claims.subclaim_verdict([a] * 10) == "holds"
    assert claims.subclaim_verdict([a] * 9 + [t]) == "holds"          # 90% agree, none against
    assert claims.subclaim_verdict([a] * 9 + [c]) == "partly"         # one contradiction
    assert claims.subclaim_verdict([a] * 5 + [t] * 5) == "partly"
    assert claims.subclaim_verdict([a] * 4 + [t] * 6) == "fails"      # under half agree
    assert claims.subclaim_verdict([t] * 10) == "fails"               # ties are not wins
    assert claims.subclaim_verdict([]) == "not run"
    assert claims.combine(["holds", "holds"]) == "holds"
    assert claims.combine(["holds", "fails"]) == "partly"
    assert claims.combine(["fails", "fails", "not run"]) == "fails"
    assert claims.combine(["not run"]) == "not run"


# ------------------------------------------------------------------ C1
@pytest.mark.parametrize("mse_fn, verdict", [
    (lambda meth, c: 5.0 / (c["m"] * c["n"]), "holds"),
    (lambda meth, c: 1e-3 * c["m"] * c["n"], "fails"),
    # flat: every slope is within noise of zero (alternating +-0.5 SE): ties, so it fails
    (lambda meth, c: 0.01 * (1 + 0.005 * (-1) ** (c["m"] // 10 + c["n"] // 20)), "fails"),
])
def test_c1(mse_fn, verdict):
    s = summary_rows("logistic", "equal_n", grid_cells([20, 30, 40, 50, 60], [30, 50, 70]), mse_fn)
    row = claims.claim_c1(s, "logistic", ["equal_n", "varied_n"])
    assert row["verdict"] == verdict
    assert len(row["evidence"]) == 8                                   # 4 methods x (m, n_i)


def test_c1_one_method_rising_is_partly():
    def mse(meth, c):
        rising = {"fedavg": 1e-4 * c["m"]}        # the claim's data: FedAvg's MSE rises with m
        return rising.get(meth, 5.0 / (c["m"] * c["n"]))
    s = summary_rows("poisson", "equal_n", grid_cells([20, 30, 40, 50, 60], [30, 50, 70]), mse)
    row = claims.claim_c1(s, "poisson", ["equal_n"])
    assert row["verdict"] == "partly"
    assert any(line.startswith("FedAvg falls with m: fails") for line in row["evidence"])


# ------------------------------------------------------------------ C2
ORDER = {"fednewton": 1.0, "fedhybrid": 2.0, "fedsgd": 3.0, "fedavg": 4.0}


def c2_summary(mse_fn, se_rel=0.01):
    return summary_rows("logistic", "compare", grid_cells([60, 100, 140], [400]), mse_fn, se_rel)


def test_c2_holds():
    row = claims.claim_c2(c2_summary(lambda meth, c: ORDER[meth]), "logistic", ["compare"])
    assert row["verdict"] == "holds"


def test_c2_fails_when_reversed():
    row = claims.claim_c2(c2_summary(lambda meth, c: 5.0 - ORDER[meth]), "logistic", ["compare"])
    assert row["verdict"] == "fails"


def test_c2_tie_within_mc_error_is_not_a_win():
    # the claimed order, but every gap is 0.5 combined SE: all checks tie, nothing holds
    def mse(meth, c):
        return 1.0 + 0.005 * ORDER[meth]
    row = claims.claim_c2(c2_summary(mse, se_rel=0.007), "logistic", ["compare"])
    assert row["verdict"] == "fails"
    assert all("0/3 agree, 3 tie, 0 contradict" in line for line in row["evidence"][:4])


def test_c2_reports_certified_newton_as_extra():
    s = c2_summary(lambda meth, c: ORDER[meth])
    cert = s[s["method"] == "fednewton"].assign(method="fednewton_certified", mse=0.5, se=0.005)
    row = claims.claim_c2(pd.concat([s, cert]), "logistic", ["compare"])
    assert row["verdict"] == "holds"
    assert any(line.startswith("extra, not part of the claim") for line in row["evidence"])


# ------------------------------------------------------------------ C3
KS = [10, 25, 50, 100, 150, 200, 300]


def c3_summary(curve):
    cells = [dict(sizes="equal(100)", m=50, n=100, mu=mu, K=K) for mu in (2.0, 6.0, math.inf) for K in KS]
    return summary_rows("logistic", "iterations", cells, lambda meth, c: curve(c["K"], c["mu"]))


def test_c3_holds_for_a_u_shape_above_the_others():
    def curve(K, mu):
        base = 0.01 + 1.0 / K
        return base + (K / 1000.0 if mu == 2.0 else 0.0)              # min near K = 32 at mu = 2
    row = claims.claim_c3(c3_summary(curve), "logistic", ["iterations"])
    assert row["verdict"] == "holds", row["evidence"]


def test_c3_fails_for_a_falling_curve_below_the_others():
    def curve(K, mu):
        return (0.01 + 1.0 / K) * (0.5 if mu == 2.0 else 1.0)
    row = claims.claim_c3(c3_summary(curve), "logistic", ["iterations"])
    assert row["verdict"] == "fails"


def test_c3_tie_within_mc_error():
    # a shallow U whose ends are within 1 combined SE of the minimum: not a U-shape
    def curve(K, mu):
        return 1.0 + 0.001 * abs(math.log(K / 50.0))
    row = claims.claim_c3(c3_summary(curve), "logistic", ["iterations"])
    assert row["verdict"] == "fails"
    assert "U-shape at mu=2: fails (0/1 agree, 1 tie" in row["evidence"][0]


# ------------------------------------------------------------------ C4
def c4_summary(slopes):
    cells = [dict(sizes="total(20000,equal)", m=m, n=20000 // m) for m in (20, 40, 80, 100, 200)]
    return summary_rows("logistic", "fixed_N", cells, lambda meth, c: 1e-3 * (c["m"] / 20.0) ** slopes[meth]
                        * (1 + 0.002 * (-1) ** (c["m"] // 20)))


def test_c4_holds():
    row = claims.claim_c4(c4_summary({"fedavg": 1.5, "fedsgd": 0.0, "fedhybrid": 0.05, "fednewton": -0.05}),
                          "logistic", ["fixed_N"])
    assert row["verdict"] == "holds", row["evidence"]


def test_c4_fails_when_all_rise_alike():
    row = claims.claim_c4(c4_summary(dict.fromkeys(FOUR, 1.0)), "logistic", ["fixed_N"])
    # FedAvg rises sharply (holds) but is not steeper and the others are not flat
    assert row["verdict"] == "partly"
    assert "others flat: fails" in row["evidence"][2]
    assert "FedAvg steeper than each other method: fails (0/3 agree, 3 tie" in row["evidence"][1]


def test_c4_fails_when_fedavg_flat():
    row = claims.claim_c4(c4_summary(dict.fromkeys(FOUR, 1.0) | {"fedavg": 0.0}), "logistic", ["fixed_N"])
    assert row["verdict"] == "fails"


# ------------------------------------------------------------------ C5
def real_rows(values: dict, n_clients=60, noise=0.0, task="binary"):
    rng = np.random.default_rng(1)
    out = []
    for (method, mu), v in values.items():
        private = np.isfinite(mu)
        for client in range(n_clients):
            out.append({"task": task, "dataset": "digits", "method": method, "private": private,
                        "mu": mu, "split": client % 3, "client": client // 3, "metric": "auc",
                        "value": v + noise * rng.standard_normal()})
    return pd.DataFrame(out)


def c5_values(newton, localfit):
    vals = {}
    for mu in (6.0, 2.0):
        for i, m in enumerate(["fedsgd", "fedavg", "fedhybrid", "dp_scaffold"]):
            vals[(m, mu)] = 0.90 + 0.001 * i
        vals[("fednewton", mu)] = newton
    vals[("np_fedavg", math.inf)] = 0.905
    vals[("np_localfit", math.inf)] = localfit
    vals[("np_pooled", math.inf)] = 0.95
    return vals


def test_c5_holds_fails_and_ties():
    # values vary by client (noise) so the bootstrap has a spread
    hold = claims.claim_c5(real_rows(c5_values(0.93, 0.85), noise=0.005))
    assert [r["verdict"] for r in hold] == ["holds"]
    fail = claims.claim_c5(real_rows(c5_values(0.85, 0.99), noise=0.005))
    assert [r["verdict"] for r in fail] == ["fails"]
    # FedNewton 0.0005 above the best other private method, within the noise: a tie
    tie = claims.claim_c5(real_rows(c5_values(0.9035, 0.85), noise=0.02))
    assert "FedNewton highest median AUC among private methods: fails" in tie[0]["evidence"][0]
    assert tie[0]["verdict"] == "partly"


# ------------------------------------------------------------------ C6
def nn_summary(slope9, slope10):
    out, lead = [], {"fednewton_iter": 0.001}      # the claim's data: FedNewton-Iter just ahead
    for fig, xs, slope in (("fig09", [30, 60, 100, 140], slope9), ("fig10", [5, 10, 20, 40], slope10)):
        for method in ["fedsgd", "fedhybrid", "fedavg", "fednewton_iter"]:
            for x in xs:
                acc = 0.7 + slope * math.log(x) + lead.get(method, 0.0)
                out.append({"figure": fig, "dataset": "digits", "method": method, "label": method, "x": x,
                            "median_accuracy": acc, "min_accuracy": acc - 0.01, "max_accuracy": acc + 0.01})
    return pd.DataFrame(out)


def test_c6_holds_and_fails():
    assert claims.claim_c6(nn_summary(0.05, -0.05))[0]["verdict"] == "holds"
    assert claims.claim_c6(nn_summary(-0.05, 0.05))[0]["verdict"] == "partly"  # Newton still competitive


# ------------------------------------------------------------------ report and command
def full_summary():
    eq = summary_rows("logistic", "equal_n", grid_cells([20, 40, 60], [30, 60]),
                      lambda meth, c: 5.0 / (c["m"] * c["n"]))
    cmp_ = c2_summary(lambda meth, c: ORDER[meth])
    return pd.concat([eq, cmp_], ignore_index=True)


def test_assess_rows_and_vocabulary():
    df = claims.assess(full_summary(), None, None)
    assert list(df.columns) == claims.CLAIM_COLUMNS
    assert set(df["verdict"]) <= set(VERDICTS)
    verdict = dict(zip(df["claim"], df["verdict"]))
    assert verdict["C1"] == "holds" and verdict["C2"] == "holds"
    assert verdict["C3"] == verdict["C4"] == verdict["C5"] == verdict["C6"] == "not run"


def test_cli_writes_csv_and_markdown(tmp_path):
    from fedgdp.commands.cli import main
    from fedgdp.realdata import COLUMNS
    from fedgdp.simulation.summary import write_summary

    summ = tmp_path / "s.parquet"
    write_summary(full_summary(), summ)
    real = real_rows(c5_values(0.93, 0.85), noise=0.005)
    for col in COLUMNS:
        if col not in real:
            real[col] = [[0.0]] * len(real) if col == "value_folds" else (
                "x" if col == "label" else 0)
    real_path = tmp_path / "r.parquet"
    real[COLUMNS].to_parquet(real_path)
    csv, md = tmp_path / "claims.csv", tmp_path / "claims.md"
    assert main(["claims", "--summaries", str(summ), "--realdata", str(real_path),
                 "--csv", str(csv), "--md", str(md)]) == 0
    df = pd.read_csv(csv)
    assert list(df.columns) == claims.CLAIM_COLUMNS
    assert set(df["verdict"]) <= set(VERDICTS)
    assert dict(zip(df["claim"], df["verdict"]))["C5"] == "holds"
    text = md.read_text()
    for name in claims.THRESHOLDS:
        assert f"| {name} |" in text
    assert "## C2:" in text and "**not run**" in text


def test_cli_needs_an_output(tmp_path, capsys):
    from fedgdp.commands.cli import main

    assert main(["claims", "--summaries"]) == 2
    assert "give at least one of --csv, --md" in capsys.readouterr().err


def test_c4_reports_certified_newton_as_extra():
    s = c4_summary({"fedavg": 1.5, "fedsgd": 0.0, "fedhybrid": 0.05, "fednewton": -0.05})
    cert = s[s["method"] == "fednewton"].assign(method="fednewton_certified")
    row = claims.claim_c4(pd.concat([s, cert]), "logistic", ["fixed_N"])
    assert row["verdict"] == "holds"                         # the extra method never enters a check
    assert row["evidence"][-1].startswith("extra, not part of the claim: total(20000,equal): ")
