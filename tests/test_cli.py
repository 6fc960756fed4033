"""The command line: outputs, metadata, the ledger command, and one-line errors."""
import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from fedgdp.cli import main
from fedgdp.runner import COLUMNS, read_cell

CELL = ["--model", "logistic", "--sizes", "uniform(20,40)", "--m", "5", "--mu", "2", "--K", "6"]


def test_simulate_writes_rows_and_metadata(tmp_path):
    out = tmp_path / "cell.parquet"
    assert main(["simulate", *CELL, "--methods", "fedsgd,fednewton", "--seeds", "0-3", "--study", "demo",
                 "--out", str(out)]) == 0
    df = read_cell(out)
    assert list(df.columns) == COLUMNS and len(df) == 8
    assert set(df["method"]) == {"fedsgd", "fednewton"} and set(df["replicate"]) == {0, 1, 2, 3}
    assert (df["study"] == "demo").all() and np.allclose(df["mu_composed"], 2.0, atol=1e-12)
    assert df["N"].between(100, 200).all() and (df["n_min"] >= 20).all() and (df["n_max"] <= 40).all()
    meta = pq.read_metadata(out).metadata
    params = json.loads(meta[b"params"])
    assert params["m"] == 5 and params["sizes"] == "uniform(20,40)" and params["tau1"] > 0
    assert meta[b"fedgdp_version"] == b"0.1.0"
    assert not list(tmp_path.glob(".*tmp"))


def test_params_file_and_flags(tmp_path):
    cfg = tmp_path / "p.yaml"
    cfg.write_text("m: 4\nsizes: equal(25)\nmethod_settings:\n  fedsgd: {eta: 0.25}\n")
    out = tmp_path / "c.parquet"
    assert main(["simulate", "--params", str(cfg), "--m", "3", "--methods", "fedsgd", "--K", "3",
                 "--seeds", "0", "--out", str(out)]) == 0
    params = json.loads(pq.read_metadata(out).metadata[b"params"])
    assert params["m"] == 3 and params["sizes"] == "equal(25)"
    assert params["method_settings"]["fedsgd"] == {"K": 3, "eta": 0.25}


def test_ledger_command_prints_every_release(capsys):
    assert main(["ledger", *CELL, "--seed", "3", "--method", "fednewton"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["clients"]) == 5
    for client in report["clients"]:
        assert len(client["releases"]) == 6 + 1                      # K local steps + Newton
        mu = np.sqrt(sum((r["sensitivity"] / r["sigma"]) ** 2 for r in client["releases"]))
        assert mu == pytest.approx(2.0, abs=1e-12) and client["mu"] == pytest.approx(2.0, abs=1e-12)
        assert {"sensitivity", "sigma"} <= set(client["releases"][0])


BAD = [
    (["--m", "0"], "m=0"),
    (["--mu", "0"], "mu=0"),
    (["--mu", "-2"], "mu=-2"),
    (["--methods", "fedsgd,fedprox"], "'fedprox'"),
    (["--sizes", "unifrom(1,5)"], "'unifrom(1,5)'"),
    (["--sizes", "uniform(9,3)"], "a=9 > b=3"),
    (["--seeds", "9-3"], "'9-3'"),
    (["--model", "probit"], "'probit'"),
    (["--K", "0"], "K=0"),
    (["--m", "ten"], "'ten'"),
]


@pytest.mark.parametrize("args,named", BAD)
def test_bad_input_exits_with_one_line_and_no_file(tmp_path, args, named):
    out = tmp_path / "never.parquet"
    proc = subprocess.run([sys.executable, "-m", "fedgdp", "simulate", *CELL, *args, "--out", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], proc.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_corrupt_cell_file_is_named(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(ValueError, match="bad.parquet"):
        read_cell(bad)
