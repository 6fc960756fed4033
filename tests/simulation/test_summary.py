"""Summaries of cell files and the tables built from them."""
import numpy as np
import pandas as pd
import pytest

from fedgdp.commands.cli import main
from fedgdp.reports.tables import (
    RATES_HEADERS,
    TABLE1_HEADERS,
    column_styles,
    rates,
    table1,
    write_csv,
    write_latex,
    write_markdown,
)
from fedgdp.simulation.run import read_cell
from fedgdp.simulation.summary import SUMMARY_COLUMNS, normalise, read_cells, read_summaries, summarise, theory_bounds

CELL = ["--model", "logistic", "--sizes", "equal(20)", "--m", "4", "--mu", "2", "--K", "5",
        "--study", "demo"]


def _rows(sq, diverged, **cell):
    base = dict(model="logistic", study="s", method="fedsgd", sizes="equal(10)", m=5, mu=2.0, K=50)
    base.update(cell)
    n = len(sq)
    return pd.DataFrame({**{k: [v] * n for k, v in base.items()}, "replicate": range(n),
                         "N": [50] * n, "n_min": [10] * n, "n_max": [10] * n, "B": [1.0] * n,
                         "sq_error": sq, "rounds": [50] * n, "floats_up": [1250] * n,
                         "floats_down": [1250] * n, "mu_composed": [2.0] * n, "diverged": diverged})


def test_summary_counts_diverged_and_averages_finite_replicates():
    """Flagged-but-finite estimates stay in the mean; non-finite ones cannot."""
    sq = [1.0, 2.0, 3.0, 6.0, np.inf]
    s = summarise(_rows(sq, [False, False, False, True, True]))
    assert list(s.columns) == SUMMARY_COLUMNS and len(s) == 1
    row = s.iloc[0]
    assert row["replicates"] == 5 and row["diverged"] == 2 and row["n_ok"] == 4
    assert row["mse"] == pytest.approx(3.0) and row["median"] == pytest.approx(2.5)
    assert row["se"] == pytest.approx(np.std([1, 2, 3, 6], ddof=1) / np.sqrt(4))
    assert row["rounds"] == 50 and row["floats_up"] == 1250


def test_summary_one_row_per_cell_and_method_in_order():
    df = pd.concat([_rows([1.0, 2.0], [False] * 2, m=10), _rows([3.0, 5.0], [False] * 2, m=5),
                    _rows([4.0, 4.0], [False] * 2, m=10, method="fedavg")])
    s = summarise(df)
    assert list(zip(s["method"], s["m"])) == [("fedsgd", 10), ("fedsgd", 5), ("fedavg", 10)]
    assert list(s["mse"]) == [1.5, 4.0, 4.0]


def test_seed_blocks_give_the_same_summary_as_one_job(tmp_path):
    whole, a, b = tmp_path / "w.parquet", tmp_path / "a.parquet", tmp_path / "b.parquet"
    assert main(["simulate", *CELL, "--seeds", "0-3", "--out", str(whole)]) == 0
    assert main(["simulate", *CELL, "--seeds", "0-1", "--out", str(a)]) == 0
    assert main(["simulate", *CELL, "--seeds", "2-3", "--out", str(b)]) == 0
    one, two = summarise(read_cells([whole])), summarise(read_cells([a, b]))
    pd.testing.assert_frame_equal(one, two)
    assert len(one) == 4 and (one["replicates"] == 4).all()
    # the summary agrees with the full cell file read by the runner
    full = read_cell(whole)
    ok = full[np.isfinite(full["sq_error"])]
    assert one.set_index("method")["mse"].to_dict() == pytest.approx(
        ok.groupby("method")["sq_error"].mean().to_dict())


def test_overlapping_blocks_and_corrupt_files_are_named(tmp_path):
    a = tmp_path / "a.parquet"
    assert main(["simulate", *CELL, "--methods", "fedsgd", "--seeds", "0-1", "--out", str(a)]) == 0
    with pytest.raises(ValueError, match="appears twice"):
        read_cells([a, a])
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(ValueError, match="bad.parquet"):
        read_cells([a, bad])
    with pytest.raises(ValueError, match="missing.parquet"):
        read_cells([tmp_path / "missing.parquet"])


def test_summarise_command_and_errors(tmp_path, capsys):
    a, out = tmp_path / "a.parquet", tmp_path / "sum" / "s.parquet"
    assert main(["simulate", *CELL, "--methods", "fedsgd", "--seeds", "0-2", "--out", str(a)]) == 0
    assert main(["summarise", str(a), "--out", str(out)]) == 0
    s = read_summaries([out])
    assert len(s) == 1 and s["replicates"].iloc[0] == 3
    bad = tmp_path / "bad.parquet"
    bad.write_text("garbage")
    assert main(["summarise", str(a), str(bad), "--out", str(tmp_path / "x.parquet")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.parquet" in err[0]
    assert not (tmp_path / "x.parquet").exists()
    with pytest.raises(ValueError, match="summary file"):
        read_summaries([bad])


def test_normalise_grid_values():
    assert normalise("sizes", "uniform( 100, 700 )") == "uniform(100,700)"
    assert normalise("mu", "inf") == np.inf and normalise("mu", 2) == 2.0
    assert normalise("m", "20") == 20 and normalise("method", "fedsgd") == "fedsgd"


def _power_law_summary(exponent=-1.0):
    rows = []
    for method in ("fedsgd", "fedhybrid", "fedavg", "fednewton"):
        for n in (50, 100):
            for m in (10, 20, 40, 80):
                mse = 300.0 * (m * n) ** exponent * (1 + 0.01 * np.sin(m + n))
                rows.append(dict(model="logistic", study="s", method=method, sizes=f"equal({n})", m=m,
                                 mu=2.0, K=50, replicates=10, diverged=0, n_ok=10, mse=mse, se=mse / 10,
                                 median=mse, rounds=50, floats_up=m * 250, floats_down=m * 250,
                                 N_mean=float(m * n), n_min=n, n_max=n, B_mean=1.0, mu_composed_max=2.0))
    return pd.DataFrame(rows)


def test_rates_recover_a_known_slope_and_predict_from_the_bounds():
    s = _power_law_summary(-1.0)
    spec = {"models": ["logistic"], "fits": [{"study": "s", "x": "m", "by": "sizes"},
                                              {"study": "s", "x": "N"}],
            "studies": {"s": {"methods": ["fedsgd", "fedhybrid", "fedavg", "fednewton"],
                              "schedule": "paper"}}, "d": {"logistic": 5}}
    r = rates(s, spec)
    assert len(r) == 4 * 2 + 4
    assert r["slope"].to_numpy() == pytest.approx(-1.0, abs=0.02)
    assert (r["ci_low"] < r["slope"]).all() and (r["slope"] < r["ci_high"]).all()
    # the prediction is the local exponent of the bound over the same cells, by default in
    # the K-explicit form (Remark 3.4): with K fixed and n fixed every term is 1/m, exponent -1
    cells = s[(s["method"] == "fedsgd") & (s["sizes"] == "equal(50)")]
    bound = theory_bounds(cells, "fedsgd", d=5, form="k_explicit")
    slope = np.polyfit(np.log(cells["m"]), np.log(bound), 1)[0]
    row = r[(r["method"] == "FedSGD") & (r["group"] == "equal(50)")].iloc[0]
    assert row["predicted"] == pytest.approx(slope) == pytest.approx(-1.0)
    assert row["bound_form"] == "K-explicit (Remark 3.4): d/N + m K d^2 / (mu^2 N^2); K = 50"
    hybrid = r[(r["method"] == "FedHybrid") & (r["group"] == "equal(50)")].iloc[0]
    assert hybrid["predicted"] == pytest.approx(-1.0) and hybrid["bound_form"].endswith("K2 = 20")
    newton = r[(r["method"] == "FedNewton") & (r["group"] == "equal(50)")].iloc[0]
    assert newton["predicted"] == pytest.approx(-1.0) and bool(newton["within_ci"])
    # Table 1's form (K = Theta(log N)) adds the log N term's spurious slope
    t1 = rates(s, {**spec, "bound_form": "table1"})
    row = t1[(t1["method"] == "FedSGD") & (t1["group"] == "equal(50)")].iloc[0]
    assert -1.0 < row["predicted"] < -0.5 and row["bound_form"].startswith("Table 1: ")


def test_theory_bounds_follow_the_simulated_schedule():
    cells = _power_law_summary().query("method == 'fedavg' and sizes == 'equal(50)'")
    paper = theory_bounds(cells, "fedavg", d=5, schedule="paper", method_settings={"fedavg": {"R": 2}})
    budget = theory_bounds(cells, "fedavg", d=5, schedule="budget", method_settings={"fedavg": {"R": 2}})
    assert (budget < paper).all()   # budget: ceil(K/2) local steps per round, less noise


def test_table1_rows_and_writers(tmp_path):
    s = _power_law_summary()
    spec = {"model": "logistic", "study": "s", "cell": {"sizes": "equal(100)", "m": 20, "mu": 2, "K": 50},
            "methods": ["fedsgd", "fedhybrid", "fedavg", "fednewton"]}
    t = table1(s, spec)
    assert list(t["method"]) == ["FedSGD", "FedHybrid", "FedAvg", "FedNewton"]
    assert list(t["rounds_theory"])[3] == "2" and (t["floats_up"] == 20 * 250).all()
    assert t["mse"].to_numpy() == pytest.approx(300.0 / 2000, rel=0.02)
    write_markdown(t, tmp_path / "t.md", TABLE1_HEADERS, title="T")
    write_latex(t, tmp_path / "t.tex", TABLE1_HEADERS, math_cols=("bound_theory",))
    md = (tmp_path / "t.md").read_text().splitlines()
    assert md[0] == "# T" and md[2].startswith("| Method | Algorithm") and len(md) == 3 + 1 + 4
    tex = (tmp_path / "t.tex").read_text()
    assert r"\toprule" in tex and r"$d/N + m d^2 \log N / (\mu ^2 N^2)$" in tex
    with pytest.raises(ValueError, match="reference cell"):
        table1(s, dict(spec, cell={"sizes": "equal(7)", "m": 20}))


def _md_column(path, header):
    rows = [line.strip("|").split(" | ") for line in path.read_text().splitlines() if line.startswith("| ")]
    k = [c.strip() for c in rows[0]].index(header)
    return [r[k].strip() for r in rows[1:]]


def test_table1_one_number_format_per_column(tmp_path):
    """MSE and MC SE of very different sizes (0.027 beside 0.001123) share one format:
    3 significant digits in scientific notation (Markdown, LaTeX), 7 in CSV."""
    import re

    s = _power_law_summary()
    spec = {"model": "logistic", "study": "s", "cell": {"sizes": "equal(100)", "m": 20, "mu": 2, "K": 50}}
    t = table1(s, spec)
    t["mse"] = [0.027, 0.001123456, 12345.6, 0.5][:len(t)]
    t["se"] = [0.0101, 3.3e-5, 250.0, 0.0][:len(t)]
    write_csv(t, tmp_path / "t.csv")
    write_markdown(t, tmp_path / "t.md", TABLE1_HEADERS)
    write_latex(t, tmp_path / "t.tex", TABLE1_HEADERS, math_cols=("bound_theory",))
    md_mse = _md_column(tmp_path / "t.md", "Empirical MSE")
    assert md_mse == ["2.70e-02", "1.12e-03", "1.23e+04", "5.00e-01"]
    assert _md_column(tmp_path / "t.md", "MC SE") == ["1.01e-02", "3.30e-05", "2.50e+02", "0.00e+00"]
    assert _md_column(tmp_path / "t.md", "Rounds") == [str(int(r)) for r in t["rounds"]]
    csv = pd.read_csv(tmp_path / "t.csv", dtype=str)
    assert all(re.fullmatch(r"-?\d\.\d{6}e[+-]\d\d", v) for v in csv["mse"]) and csv["mse"][1] == "1.123456e-03"
    assert pd.read_csv(tmp_path / "t.csv")["mse"].tolist() == pytest.approx(list(t["mse"]), rel=1e-6)
    tex = (tmp_path / "t.tex").read_text()
    assert r"$2.70 \times 10^{-2}$" in tex and r"$1.12 \times 10^{-3}$" in tex and "0.027" not in tex


def test_rates_slopes_fixed_point_and_styles():
    df = pd.DataFrame({"method": ["a", "b"], "points": [3, 4], "slope": [-1.23456, 0.004],
                       "ci_low": [np.nan, -0.5], "predicted": [-1.0, -2.0], "other": [0.5, 2e-4],
                       "big": [1.5, 20.0], "within_ci": [True, pd.NA]})
    styles = column_styles(df)
    assert styles == {"method": "auto", "points": "auto", "slope": "fixed", "ci_low": "fixed",
                      "predicted": "fixed", "other": "sci", "big": "fixed", "within_ci": "auto"}


def test_rates_markdown_keeps_small_slopes_fixed(tmp_path):
    df = pd.DataFrame({"model": ["logistic"] * 2, "method": ["FedSGD", "FedAvg"], "points": [5, 5],
                       "slope": [-0.004, -1.5], "ci_low": [-0.1, -1.7], "ci_high": [0.09, -1.3],
                       "predicted": [-1.0, -1.2], "within_ci": [False, True]})
    write_markdown(df, tmp_path / "r.md", RATES_HEADERS)
    assert _md_column(tmp_path / "r.md", "Fitted slope") == ["-0.004", "-1.500"]
    assert _md_column(tmp_path / "r.md", "Prediction in CI") == ["no", "yes"]


def test_upper_bound_forms():
    from fedgdp.core.theory import upper_bound

    n = np.full(20, 50.0)                       # m = 20, N = 1000
    N, m, d, mu = 1000.0, 20, 5, 2.0
    priv = m * d ** 2 / (mu ** 2 * N ** 2)
    assert upper_bound("fedsgd", n, d=d, mu=mu, K=50, form="k_explicit") == pytest.approx(d / N + 50 * priv)
    assert upper_bound("fedsgd", n, d=d, mu=mu, K=50) == pytest.approx(d / N + np.log(N) * priv)
    assert upper_bound("fedhybrid", n, d=d, mu=mu, K2=20, form="k_explicit") == pytest.approx(d / N + 20 * priv)
    for method in ("fedavg", "fednewton"):      # already K-explicit (or K-free) in Table 1
        assert upper_bound(method, n, d=d, mu=mu, form="k_explicit") == upper_bound(method, n, d=d, mu=mu)
    with pytest.raises(ValueError, match="needs K2"):
        upper_bound("fedhybrid", n, d=d, mu=mu, form="k_explicit")
    with pytest.raises(ValueError, match="unknown bound form 'log'"):
        upper_bound("fedsgd", n, d=d, mu=mu, form="log")
