"""`fedgdp fit`: the worked example of the docs (breast cancer over five clients) and
each bad input refused with one line and exit status 2."""
import json
import re
import runpy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedgdp.commands.cli import main
from paths import ROOT

EXAMPLE = ROOT / "docs" / "examples" / "breast_cancer.py"
# the commands of docs/real-data.md ("Your own data"), after `python docs/examples/breast_cancer.py`:
# a release (fresh noise), and its reproduction with a known seed (the numbers the page shows)
# --method fednewton: the default became "auto" (issue 46); the worked example names its method
COMMAND = ("fit breast_cancer.csv --target malignant --client client --classes 0,1 --method fednewton --mu 2 "
           "--clip 3.32 --out coef.csv")
REPRO = COMMAND + " --seed 0"


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    d = tmp_path_factory.mktemp("bc")
    table = runpy.run_path(str(EXAMPLE))["breast_cancer_table"]()
    table.to_csv(d / "breast_cancer.csv", index=False)
    table.to_parquet(d / "breast_cancer.parquet")
    return d


def _run(argv, capsys):
    """The command's status and output; stderr without the one FeatureScaleWarning line the
    example's [0, 1] features (sd 0.09-0.2) draw since issue 46: asserted here, then set aside.
    A release without ``--seed`` draws fresh noise, and on some draws its iteration ends
    "not converged" or "noise-dominated" (fit_info_'s status, one warning line): that line is
    a correct outcome of the draw, set aside too (the seeded reproduction keeps it)."""
    rc = main(argv)
    out = capsys.readouterr()
    err = [line for line in out.err.splitlines(keepends=True) if "are not standardised" not in line]
    assert len(err) >= len(out.err.splitlines()) - 1
    if "--seed" not in argv:
        err = [line for line in err if not re.match(r"fedgdp fit: warning: \w+: [a-z -]+ \(fit_info_\): ", line)]
    return rc, out.out, "".join(err)


def test_the_docs_show_this_command():
    page = (ROOT / "docs" / "real-data.md").read_text()
    assert f"fedgdp {COMMAND}" in page and f"fedgdp {REPRO}" in page
    assert "python docs/examples/breast_cancer.py breast_cancer.csv" in page


def test_worked_example_table_json_and_coefficients(example, capsys, monkeypatch):
    monkeypatch.chdir(example)
    rc, out, err = _run(COMMAND.split(), capsys)          # a release: fresh noise, the guarantee holds
    assert rc == 0 and err == "", err
    assert "fednewton (certified), family logistic: 569 rows, 5 clients (sizes 113-114), mu = 2" in out
    assert "guarantee: record-level mu-GDP at each client, mu = 2 (certified)" in out
    assert "noise: fresh (operating system entropy); label domain: public" in out
    assert "certified mu (max) 2;" in out and "(certified)" in out and "B = 3.32 (rule fixed)" in out
    fresh = pd.read_csv(example / "coef.csv")
    assert list(fresh.columns) == ["term", "coef"] and len(fresh) == 11 and fresh.term[0] == "(intercept)"

    rc, out, err = _run(REPRO.split(), capsys)            # the reproduction: void while the seed is known
    assert rc == 0 and err == "", err
    assert _page_output() == out.rstrip("\n")            # the page shows this output, character for character
    assert "guarantee: void while the seed is known" in out and "NOT secret" in out
    coef = pd.read_csv(example / "coef.csv")
    assert not np.allclose(coef.coef, fresh.coef)

    rc, out, err = _run(REPRO.replace("--out coef.csv", "--json").split(), capsys)
    rep = json.loads(out)
    assert rc == 0 and rep["n_clients"] == 5 and rep["classes"] == [0, 1]
    assert rep["privacy"]["certified"] and rep["privacy"]["epsilon"] == pytest.approx(10.0, abs=0.01)
    assert rep["privacy"]["noise_secret"] is False and rep["privacy"]["guarantee_holds"] is False
    assert rep["privacy"]["label_domain"] == "public"
    np.testing.assert_allclose(rep["privacy"]["mu_certified"], 2.0, atol=1e-12)
    np.testing.assert_allclose([r["coef"] for r in rep["coefficients"]], coef.coef, rtol=0, atol=0)

    # the same numbers as the estimator on the same table, and from the Parquet copy
    from fedgdp import FederatedGLM

    df = pd.read_csv(example / "breast_cancer.csv")
    feats = [c for c in df.columns if c not in ("malignant", "client")]
    est = FederatedGLM(method="fednewton", mu=2, clip=3.32, classes=[0, 1], random_state=0).fit(
        df[feats], df.malignant, df.client)
    np.testing.assert_allclose(est.theta_[:, 0], coef.coef, rtol=0, atol=1e-15)
    rc, out, _ = _run(REPRO.replace(".csv --target", ".parquet --target").replace("--out coef.csv", "--json").split(),
                      capsys)
    assert rc == 0 and json.loads(out)["coefficients"] == rep["coefficients"]
    assert est.score(df[feats], df.malignant) > 0.75


def _page_output() -> str:
    """The output block docs/real-data.md shows under the reproduction command."""
    page = (ROOT / "docs" / "real-data.md").read_text()
    after = page.split(f"fedgdp {REPRO}\n```\n\n```\n", 1)[1]
    return after.split("\n```\n", 1)[0]


def test_the_docs_reading_of_the_summary_uses_the_printed_numbers(example, monkeypatch):
    """The numbers of the statistician's reading on docs/real-data.md: the seeded fit's
    se_noise, se_sampling and p values (from the block above it) and the MLE's standard
    errors from the python -c command the page shows."""
    import subprocess
    import sys

    page = (ROOT / "docs" / "real-data.md").read_text()
    block = _page_output()
    for word in ("curvature noise-dominated in 11 of 11 directions", "noise's scale (517)", "0.04577    0.4957"):
        assert word in block, word
    assert "`se_noise` (0.4957 for every" in page and "`se_sampling` (0.04577 for every" in page
    snippet = page.split('python -c "', 1)[1].split('"\n', 1)[0]
    monkeypatch.chdir(example)
    out = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    rows = lines[next(i for i, line in enumerate(lines) if line.startswith("term")) + 1:]     # under the header
    se = {line.split()[0]: float(line.split()[-1]) for line in rows}
    assert (se["mean_texture"], se["mean_radius"]) == (min(se.values()), max(se.values())) == (2.5, 104.5)
    assert "from 2.5 (`mean_texture`) to 104.5 (`mean_radius`)" in page


def test_features_family_and_json_out(example, capsys, monkeypatch):
    monkeypatch.chdir(example)
    rc, out, err = _run(["fit", "breast_cancer.csv", "--target", "malignant", "--client", "client", "--features",
                         "mean_radius,mean_concavity", "--method", "fedhybrid", "--mu", "inf", "--json",
                         "--out", "c.json"], capsys)
    rep = json.loads(out)
    assert rc == 0 and rep["features"] == ["mean_radius", "mean_concavity"] and rep["method"] == "fedhybrid"
    assert rep["privacy"]["epsilon"] == "inf" and len(json.loads((example / "c.json").read_text())) == 3


def test_two_releases_of_the_same_data_draw_different_noise(example, capsys, monkeypatch):
    """The neighbour distinguisher: with the former default --seed 0 anyone could rerun the
    command on each candidate neighbour and match the printed coefficients exactly. Without
    --seed every run draws fresh noise: the same command on the same file gives other numbers."""
    monkeypatch.chdir(example)
    argv = COMMAND.replace("--out coef.csv", "--json").split()
    runs = []
    for _ in range(2):
        rc, out, err = _run(argv, capsys)
        assert rc == 0 and err == "", err
        runs.append(json.loads(out))
    a, b = ([r["coef"] for r in rep["coefficients"]] for rep in runs)
    assert not np.allclose(a, b)
    assert all(rep["privacy"]["noise_secret"] and rep["privacy"]["guarantee_holds"] for rep in runs)


def test_mu_30_reports_a_finite_epsilon(example, capsys, monkeypatch):
    """mu = 30 ended in an OverflowError of the (epsilon, delta) conversion."""
    monkeypatch.chdir(example)
    rc, out, err = _run(COMMAND.replace("--mu 2", "--mu 30").replace("--out coef.csv", "--json").split(), capsys)
    assert rc == 0 and err == "", err
    assert json.loads(out)["privacy"]["epsilon"] == pytest.approx(577.01, abs=0.01)


def test_classes_typed_like_the_target_column(example, capsys, tmp_path):
    """--classes are numbers for a numeric target, text otherwise; a label outside the
    domain stops the command before anything is printed; without --classes the label set
    is from the data, a warning on stderr, and the report is not certified."""
    df = pd.read_csv(example / "breast_cancer.csv")
    df["diagnosis"] = np.where(df.malignant == 1, "malignant", "benign")
    path = tmp_path / "text.csv"
    df.drop(columns="malignant").to_csv(path, index=False)
    # seeded: fresh noise can leave a fit "not converged" on stderr, which this test does not judge
    base = ["fit", str(path), "--target", "diagnosis", "--client", "client", "--clip", "3.32", "--json", "--seed", "0"]
    rc, out, err = _run([*base, "--classes", "benign, malignant"], capsys)
    rep = json.loads(out)
    assert rc == 0 and err == "" and rep["classes"] == ["benign", "malignant"] and rep["privacy"]["certified"]
    rc, out, err = _run([*base, "--classes", "benign,malignant,unknown", "--family", "multinomial"], capsys)
    assert rc == 0 and json.loads(out)["classes"] == ["benign", "malignant", "unknown"]
    assert len(json.loads(out)["coefficients"]) == 3 * 11          # a class no record has still has its row
    rc, out, err = _run(base, capsys)
    rep = json.loads(out)
    assert rc == 0 and "warning: the label set is taken from the data" in err
    assert rep["privacy"]["label_domain"] == "from data (not covered)" and not rep["privacy"]["certified"]
    assert rep["privacy"]["epsilon"] == "inf"


BAD = [   # (arguments after DATA, file change, what the one line says)
    (["--target", "nope", "--client", "client"], None, "--target column 'nope' is not in the data"),
    (["--target", "malignant", "--client", "site"], None, "--client column 'site' is not in the data"),
    (["--target", "malignant", "--client", "client", "--features", "mean_radius,x"], None,
     "feature column 'x' is not in the data"),
    (["--target", "malignant", "--client", "client"], "text", "feature column 'note' is not numeric"),
    (["--target", "malignant", "--client", "client", "--method", "fednewton"], "one_row",
     "client 'lonely' has 1 row"),
    (["--target", "malignant", "--client", "client"], "nan", "feature column 'mean_area' has 1 missing value"),
    (["--target", "malignant", "--client", "client", "--mu", "0"], None, "mu must be > 0"),
    (["--target", "malignant", "--client", "client", "--method", "fedx"], None, "unknown method 'fedx'"),
    (["--target", "malignant", "--client", "client", "--clip", "quantile"], None,
     "privacy mode 'certified' needs a public or private clipping bound"),
    (["--target", "malignant", "--client", "client", "--settings", "{K: 3}"], None, "--settings is not valid JSON"),
    (["--target", "malignant", "--client", "client", "--classes", "0,1"], "extra_label",
     "y holds the label 2 at row 3 (from 0; 1 row(s) in all), which is not in classes=[0, 1]"),
    (["--target", "malignant", "--client", "client", "--classes", "no,yes"], None,
     "the target column 'malignant' holds int64 values, so each class must be an integer, got 'no'"),
    (["--target", "malignant", "--client", "client", "--classes", "0,,1"], None, "bad --classes '0,,1'"),
    (["--target", "malignant", "--client", "client", "--classes", "0,1,2"], None,
     "family 'logistic' needs exactly 2 classes"),
]


@pytest.mark.parametrize("args,change,message", BAD, ids=[b[2][:30] for b in BAD])
def test_bad_input_stops_with_one_line(example, capsys, tmp_path, args, change, message):
    df = pd.read_csv(example / "breast_cancer.csv")
    if change == "text":
        df["note"] = "x"
    elif change == "one_row":
        df.loc[0, "client"] = "lonely"
    elif change == "nan":
        df.loc[7, "mean_area"] = np.nan
    elif change == "extra_label":
        df.loc[3, "malignant"] = 2
    path = tmp_path / "data.csv"
    df.to_csv(path, index=False)
    rc, out, err = _run(["fit", str(path), *args], capsys)
    assert rc == 2 and out == ""
    assert len(err.splitlines()) == 1, err
    assert re.match(r"fedgdp( fit)?: error: ", err) and message in err, err


def test_bad_file_stops_with_one_line(tmp_path, capsys):
    for name, text, message in (("a.txt", "x", "must end in .csv, .parquet or .pq"),
                                ("missing.csv", None, "no such file")):
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        rc, _, err = _run(["fit", str(path), "--target", "y", "--client", "c"], capsys)
        assert rc == 2 and len(err.splitlines()) == 1 and message in err, err


# --standardize: public numbers (covered) or the data's own means and sds (declared not covered)
STD = ["--target", "malignant", "--client", "client", "--classes", "0,1", "--mu", "2", "--seed", "3", "--json"]


def _public_scaling(df: pd.DataFrame, path: Path) -> dict:
    cols = [c for c in df.columns if c not in ("malignant", "client")]
    spec = {c: {"mean": 0.5, "sd": 0.25} for c in cols}        # numbers fixed without the data
    path.write_text(json.dumps(spec))
    return spec


@pytest.mark.filterwarnings("ignore:.*are not standardised")
def test_standardize_public_file_is_covered_and_scales_the_features(example, capsys, tmp_path):
    from fedgdp import FederatedGLM

    df = pd.read_csv(example / "breast_cancer.csv")
    spec = _public_scaling(df, tmp_path / "scale.json")
    rc, out, err = _run(["fit", str(example / "breast_cancer.csv"), *STD, "--standardize",
                         str(tmp_path / "scale.json")], capsys)
    assert rc == 0 and "are not standardised" not in err, err
    rep = json.loads(out)
    assert rep["standardize"]["covered"] is True and rep["standardize"]["columns"] == spec
    assert rep["privacy"]["certified"] is True and rep["privacy"]["assumptions"] == []
    # the same fit as the estimator on (x - 0.5) / 0.25, with the same seed (to 1e-12)
    cols = list(spec)
    est = FederatedGLM(family="logistic", classes=[0, 1], mu=2, random_state=3).fit(
        (df[cols] - 0.5) / 0.25, df["malignant"].to_numpy(), df["client"].to_numpy())
    got = np.array([r["coef"] for r in rep["coefficients"]])
    np.testing.assert_allclose(got, est.theta_[:, 0], rtol=0, atol=1e-12)


def test_standardize_data_is_declared_not_covered(example, capsys):
    rc, out, err = _run(["fit", str(example / "breast_cancer.csv"), *STD[:-1], "--standardize", "data"], capsys)
    assert rc == 0
    assert "are not standardised" not in err and "--standardize data" in err and "PrivacyLeak" not in err
    assert "features standardised (10 columns, coefficients on that scale): by the data's own means and sds" in out
    assert "NOT covered by the ledger" in out and "nominal only" in out and "(NOT certified)" in out
    rc, out, _ = _run(["fit", str(example / "breast_cancer.csv"), *STD, "--standardize", "data"], capsys)
    rep = json.loads(out)
    assert rep["standardize"]["covered"] is False and rep["privacy"]["certified"] is False
    assert any("feature scaling" in a for a in rep["privacy"]["assumptions"])
    df = pd.read_csv(example / "breast_cancer.csv")
    assert rep["standardize"]["columns"]["mean_area"] == pytest.approx(
        {"mean": df["mean_area"].mean(), "sd": df["mean_area"].std(ddof=0)}, rel=1e-12)


def test_without_standardize_the_scale_warning_names_it(example, capsys, tmp_path):
    df = pd.read_csv(example / "breast_cancer.csv")
    df["mean_area"] = df["mean_area"] * 1000.0                    # raw units
    df.to_csv(tmp_path / "raw.csv", index=False)
    main(["fit", str(tmp_path / "raw.csv"), *STD])
    err = capsys.readouterr().err
    assert "are not standardised" in err and "(fedgdp fit --standardize FILE.json, or --standardize data)" in err


@pytest.mark.parametrize("text,message", [
    ("[1, 2]", "must hold a JSON object"),
    ("{", "is not JSON"),
    ('{"mean_area": {"mean": 0}}', "column 'mean_area' must be {\"mean\": m, \"sd\": s}"),
    ('{"mean_area": {"mean": 0, "sd": 0}}', "column 'mean_area' has sd 0; it must be a finite number > 0"),
    ('{"mean_area": {"mean": "x", "sd": 1}}', "column 'mean_area' has mean 'x'"),
    ('{"mean_area": {"mean": 0, "sd": 1}}', "feature column 'mean_radius' has no mean and sd in the file"),
    (None, "no such file"),
])
def test_standardize_bad_file_stops_with_one_line(example, capsys, tmp_path, text, message):
    path = tmp_path / "scale.json"
    if text is not None:
        path.write_text(text)
    rc, out, err = _run(["fit", str(example / "breast_cancer.csv"), *STD, "--standardize", str(path)], capsys)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1 and message in err, err


def test_standardize_data_refuses_a_constant_column(example, capsys, tmp_path):
    df = pd.read_csv(example / "breast_cancer.csv")
    df["flat"] = 1.0
    df.to_csv(tmp_path / "flat.csv", index=False)
    rc, out, err = _run(["fit", str(tmp_path / "flat.csv"), *STD, "--standardize", "data"], capsys)
    assert rc == 2 and "feature column 'flat' is constant (sd 0)" in err and len(err.splitlines()) == 1, err


def test_the_docs_diabetes_recipe_and_its_standardize_command(tmp_path, capsys, monkeypatch):
    """docs/real-data.md: every file its commands use has a recipe; the diabetes file and its public
    scaling file made as the page says give a covered fit with no warning."""
    page = (ROOT / "docs" / "real-data.md").read_text()
    assert "python docs/examples/diabetes.py diabetes.csv" in page and "python docs/examples/breast_cancer.py" in page
    snippet = page.split("```python\nimport json, math\n")[1].split("```")[0]
    command = ("fit diabetes.csv --target count --client site --family poisson --mu 1 --standardize diabetes-scale.json"
               " --clip 27")
    assert f"fedgdp {command}" in page
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["diabetes.py", "diabetes.csv"])
    runpy.run_path(str(ROOT / "docs" / "examples" / "diabetes.py"), run_name="__main__")
    exec("import json, math\n" + snippet, {})
    rc, out, err = _run(command.split() + ["--json", "--seed", "0"], capsys)    # seeded: no chance warning
    assert rc == 0 and err == "", err
    rep = json.loads(out)
    assert rep["standardize"]["covered"] and rep["privacy"]["certified"] and rep["client_sizes"] == [89, 89, 88, 88, 88]
