"""The CNN stage of the pipeline (workflow/rules/nn.smk): dry runs and config checks.

Planning needs no PyTorch. Works on a copy of the workflow files in a temporary
directory, like tests/workflow/test_pipeline.py.
"""
import os
import shutil
import subprocess
import sys

import pytest

from paths import ROOT

WORKFLOW = ["Snakefile", "config.yaml", "config", "workflow", "environment.yml"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wd(tmp_path_factory):
    path = tmp_path_factory.mktemp("nnflow")
    for name in WORKFLOW:
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, path / name)
    return path


def dry(cwd, *args):
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "-n", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, MPLBACKEND="Agg"))


def counts(out: str) -> dict:
    table = out[out.index("Job stats:"):].splitlines()[3:]
    res = {}
    for line in table:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        res[parts[0]] = int(parts[1])
    return res


def test_default_plan_and_paper_plan(wd):
    r = dry(wd, "fig09", "fig10")
    assert r.returncode == 0, r.stderr
    c = counts(r.stdout)
    assert c["train_nn"] == 4 * 3 + 4 * 3 and c["summarise_nn"] == 2 and c["plot_nn"] == 2
    r = dry(wd, "fig09", "fig10", "--configfile", "config/paper-nn.yaml")
    assert r.returncode == 0, r.stderr
    c = counts(r.stdout)
    # MNIST and CIFAR-10: Figure 9 7 sizes x 5 runs, Figure 10 6 client counts x 4 runs
    assert c["train_nn"] == 2 * (7 * 5 + 6 * 4) and c["summarise_nn"] == 4
    assert "results/paper-nn/nn/mnist/fig09/m~100/n~600/rep~4.parquet" in r.stdout
    assert "results/paper-nn/nn/cifar10/fig09/m~100/n~500/rep~4.parquet" in r.stdout
    assert "figures/paper-nn/fig10.pdf" in r.stdout and "tables/paper-nn/fig10_summary.csv" in r.stdout


def test_default_target_leaves_the_cnn_figures_out(wd):
    r = dry(wd)
    assert r.returncode == 0, r.stderr
    assert "train_nn" not in counts(r.stdout)


@pytest.mark.parametrize("bad,key", [
    ("figures={fig09: {m: 10, n: {digits: [500]}, runs: 3}}", "figures.fig09"),
    ("nn={methods: [fedfoo]}", "fedfoo"),
    ("nn={settings: {q: 0}}", "nn.settings.q"),
    ("figures={fig10: {x: n}}", "figures.fig10.m"),
])
def test_bad_nn_config_fails_before_any_job(wd, bad, key):
    r = dry(wd, "fig09", "--config", bad)
    assert r.returncode != 0
    assert key in r.stdout + r.stderr


def test_the_readings_map_runs_as_a_target(wd):
    """Target nn_readings end to end on digits (two readings, one point, one run): one job
    per piece, then the table, whose rows name the readings and the privacy each gives."""
    pytest.importorskip("torch")
    import pandas as pd

    (wd / "readings.yaml").write_text("dataset: digits\npoints:\n  - {figure: fig10, x: 5}\nruns: 1\n"
                                      "readings:\n  plain: {release: plain}\n  private: {}\n")
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "nn_readings", "--config", "nn={readings: readings.yaml}"]
    res = subprocess.run(cmd, cwd=wd, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, MPLBACKEND="Agg"))
    assert res.returncode == 0, res.stderr[-2000:]
    table = pd.read_csv(next(wd.glob("tables/*/nn_readings/readings.csv")))
    assert sorted(set(table.reading)) == ["plain", "private"] and len(table) == 2 * 4
    assert set(table[table.reading == "private"].certified_mu) == {2.0}
    assert set(table[table.reading == "plain"].privacy) == {"not private: neither clipped nor noisy"}
