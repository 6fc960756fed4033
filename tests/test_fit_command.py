"""`fedgdp fit`: the worked example of the docs (breast cancer over five clients) and
each bad input refused with one line and exit status 2."""
import json
import re
import runpy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedgdp.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "breast_cancer.py"
# the command of docs/real-data.md ("Your own data"), after `python docs/examples/breast_cancer.py`
COMMAND = "fit breast_cancer.csv --target malignant --client client --mu 2 --clip 3.32 --out coef.csv"


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    d = tmp_path_factory.mktemp("bc")
    table = runpy.run_path(str(EXAMPLE))["breast_cancer_table"]()
    table.to_csv(d / "breast_cancer.csv", index=False)
    table.to_parquet(d / "breast_cancer.parquet")
    return d


def _run(argv, capsys):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_the_docs_show_this_command():
    page = (ROOT / "docs" / "real-data.md").read_text()
    assert f"fedgdp {COMMAND}" in page and "python docs/examples/breast_cancer.py breast_cancer.csv" in page


def test_worked_example_table_json_and_coefficients(example, capsys, monkeypatch):
    monkeypatch.chdir(example)
    rc, out, err = _run(COMMAND.split(), capsys)
    assert rc == 0 and err == "", err
    assert "fednewton (certified), family logistic: 569 rows, 5 clients (sizes 113-114), mu = 2" in out
    assert "certified mu (max) 2;" in out and "(certified)" in out and "B = 3.32 (rule fixed)" in out
    coef = pd.read_csv(example / "coef.csv")
    assert list(coef.columns) == ["term", "coef"] and len(coef) == 11 and coef.term[0] == "(intercept)"

    rc, out, err = _run(COMMAND.replace("--out coef.csv", "--json").split(), capsys)
    rep = json.loads(out)
    assert rc == 0 and rep["n_clients"] == 5 and rep["classes"] == [0, 1]
    assert rep["privacy"]["certified"] and rep["privacy"]["epsilon"] == pytest.approx(10.0, abs=0.01)
    np.testing.assert_allclose(rep["privacy"]["mu_certified"], 2.0, atol=1e-12)
    np.testing.assert_allclose([r["coef"] for r in rep["coefficients"]], coef.coef, rtol=0, atol=0)

    # the same numbers as the estimator on the same table, and from the Parquet copy
    from fedgdp import FederatedGLM

    df = pd.read_csv(example / "breast_cancer.csv")
    feats = [c for c in df.columns if c not in ("malignant", "client")]
    est = FederatedGLM(mu=2, clip=3.32, random_state=0).fit(df[feats], df.malignant, df.client)
    np.testing.assert_allclose(est.theta_[:, 0], coef.coef, rtol=0, atol=1e-15)
    rc, out, _ = _run(COMMAND.replace(".csv --target", ".parquet --target").replace("--out coef.csv", "--json").split(),
                      capsys)
    assert rc == 0 and json.loads(out)["coefficients"] == rep["coefficients"]
    assert est.score(df[feats], df.malignant) > 0.75


def test_features_family_and_json_out(example, capsys, monkeypatch):
    monkeypatch.chdir(example)
    rc, out, err = _run(["fit", "breast_cancer.csv", "--target", "malignant", "--client", "client", "--features",
                         "mean_radius,mean_concavity", "--method", "fedhybrid", "--mu", "inf", "--json",
                         "--out", "c.json"], capsys)
    rep = json.loads(out)
    assert rc == 0 and rep["features"] == ["mean_radius", "mean_concavity"] and rep["method"] == "fedhybrid"
    assert rep["privacy"]["epsilon"] == "inf" and len(json.loads((example / "c.json").read_text())) == 3


BAD = [   # (arguments after DATA, file change, what the one line says)
    (["--target", "nope", "--client", "client"], None, "--target column 'nope' is not in the data"),
    (["--target", "malignant", "--client", "site"], None, "--client column 'site' is not in the data"),
    (["--target", "malignant", "--client", "client", "--features", "mean_radius,x"], None,
     "feature column 'x' is not in the data"),
    (["--target", "malignant", "--client", "client"], "text", "feature column 'note' is not numeric"),
    (["--target", "malignant", "--client", "client"], "one_row", "client 'lonely' has 1 row"),
    (["--target", "malignant", "--client", "client"], "nan", "feature column 'mean_area' has 1 missing value"),
    (["--target", "malignant", "--client", "client", "--mu", "0"], None, "mu must be > 0"),
    (["--target", "malignant", "--client", "client", "--method", "fedx"], None, "unknown method 'fedx'"),
    (["--target", "malignant", "--client", "client", "--clip", "quantile"], None,
     "privacy mode 'certified' needs a public or private clipping bound"),
    (["--target", "malignant", "--client", "client", "--settings", "{K: 3}"], None, "--settings is not valid JSON"),
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
