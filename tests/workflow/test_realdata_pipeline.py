"""The real-data stage of the pipeline (workflow/rules/realdata.smk): the paper's MNIST
layout planned by a dry run, the smoke configuration end to end, config validation.

Like tests/workflow/test_pipeline.py, every test works on a copy of the workflow files."""
import json
import re

import matplotlib.image as mpimg
import pandas as pd
import pytest

from test_pipeline import job_counts, snakemake, workdir

pytestmark = pytest.mark.slow


def test_mnist_config_plans_the_papers_layout(tmp_path):
    d = workdir(tmp_path)
    res = snakemake(d, "-n", "-p", "fig07", "fig08", "--configfile", "config/mnist.yaml")
    assert res.returncode == 0, res.stderr[-2000:]
    counts = job_counts(res.stdout)
    assert counts["fetch_mnist"] == 1 and counts["fit_realdata"] == 6 and counts["plot_realdata"] == 2
    assert "simulate_cell" not in counts
    specs = re.findall(r"fedgdp realdata --spec '(\{.*?\})' --task (\w+) --split (\d)", res.stdout)
    assert sorted((t, int(s)) for _, t, s in specs) == [(t, s) for t in ("binary", "multiclass") for s in range(3)]
    spec = json.loads(specs[0][0])
    assert (spec["dataset"], spec["m"], spec["n_min"], spec["folds"], spec["mu"]) == ("mnist", 80, 800, 5, [6, 2])
    assert spec["method_settings"]["fedavg"] == {"R": 2, "K": 50, "eta": 0.1}   # merged over config.yaml
    assert "splits" not in spec and "figures" not in spec


def test_mnist_files_in_place_need_no_fetch(tmp_path):
    from fedgdp.common.datasets import MNIST_FILES

    d = workdir(tmp_path)
    (d / "data/mnist").mkdir(parents=True)
    for name in MNIST_FILES:
        (d / "data/mnist" / name).write_bytes(b"")
    res = snakemake(d, "-n", "fig07", "--configfile", "config/mnist.yaml")
    assert res.returncode == 0 and "fetch_mnist" not in job_counts(res.stdout)


def test_smoke_figures_7_and_8_end_to_end(tmp_path):
    d = workdir(tmp_path)
    res = snakemake(d, "fig07", "fig08", "--configfile", "config/smoke.yaml")
    assert res.returncode == 0, res.stderr[-3000:]
    for fig, task in (("fig07", "binary"), ("fig08", "multiclass")):
        assert (d / f"figures/smoke/{fig}.pdf").read_bytes()[:5] == b"%PDF-"
        img = mpimg.imread(d / f"figures/smoke/{fig}.png")
        assert img.ndim == 3 and img.shape[1] > 1000
        med = pd.read_csv(d / f"tables/smoke/{fig}_medians.csv")
        assert len(med) == 5 * 2 + 4 and set(med["task"]) == {task}
        assert (med["count"] == 4).all()                   # m x S = 4 x 1 clients per box
        assert med.loc[med["method"] == "np_pooled", "median"].item() > 0.9
    rows = pd.read_parquet(d / "results/smoke/realdata/digits/binary/split~0.parquet")
    assert set(rows["method"]) == {"fedsgd", "fedavg", "fedhybrid", "fednewton", "dp_scaffold",
                                   "np_scaffold", "np_fedavg", "np_localfit", "np_pooled"}


BAD = {
    "layout too big": ("realdata: {n_min: 500}\n", "realdata.n_min"),
    "unknown method": ("realdata: {methods: [fedsgd, fedprox]}\n", "unknown real-data method 'fedprox'"),
    "bad step": ("realdata: {method_settings: {fedsgd: {eta: -1}}}\n", "fedsgd.eta must be a number > 0"),
    "task typo": ("realdata: {tasks: [binary, ternary]}\n", "realdata.tasks[1]"),
    "figure of a missing task": ("realdata: {tasks: [binary]}\n", "figures.fig08.task"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_realdata_config_fails_before_any_job(tmp_path, case):
    text, key = BAD[case]
    d = workdir(tmp_path)
    (d / "bad.yaml").write_text(text)
    res = snakemake(d, "-n", "fig07", "--configfile", "bad.yaml")
    assert res.returncode != 0 and key in res.stdout + res.stderr, (res.stdout + res.stderr)[-1500:]
    assert not (d / "results").exists()
