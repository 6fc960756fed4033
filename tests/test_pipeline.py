"""The Snakemake pipeline: smoke run end to end, dry runs, config validation, lint,
report, and an interrupted run that resumes to the same outputs.

Every test works on a copy of the workflow files in a temporary directory, so the
checkout's results/ and figures/ are never touched.
"""
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.image as mpimg
import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ["Snakefile", "config.yaml", "config", "workflow", "environment.yml"]
SMOKE = ["--configfile", "config/smoke.yaml"]

pytestmark = pytest.mark.slow


def workdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW:
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, path / name)
    return path


def snakemake(cwd: Path, *args, timeout=300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, MPLBACKEND="Agg"))


def job_counts(output: str) -> dict:
    """The 'Job stats' table of a (dry) run: rule -> count."""
    table = output[output.index("Job stats:"):].splitlines()[3:]
    counts = {}
    for line in table:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


def merged_config(*files) -> dict:
    from snakemake.utils import update_config

    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    for f in files:
        update_config(cfg, yaml.safe_load((ROOT / f).read_text()))
    return cfg


def n_cells(cfg, study) -> int:
    g = cfg["studies"][study]["grid"]
    return len(g["m"]) * len(g["sizes"]) * len(g.get("mu", [1])) * len(g.get("K", [1]))


def outputs(cfg) -> list[str]:
    figs = [f"figures/{f}.{e}" for f in cfg["figures"] for e in ("pdf", "png")]
    return figs + [f"figures/table1.{e}" for e in ("csv", "md", "tex")] + \
        [f"figures/rates.{e}" for e in ("csv", "md")]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One uninterrupted smoke run (config/smoke.yaml), shared by the tests below."""
    d = workdir(tmp_path_factory.mktemp("smoke"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = snakemake(d, *SMOKE)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert res.returncode == 0, res.stderr[-3000:]
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    d.joinpath("cpu_seconds.txt").write_text(f"{cpu:.1f}")
    return d


# ------------------------------------------------------------------ end to end
def test_smoke_run_builds_every_figure_and_table(smoke):
    cfg = merged_config("config/smoke.yaml")
    for path in outputs(cfg):
        assert (smoke / path).stat().st_size > 0, path
    for fig, spec in cfg["figures"].items():
        assert (smoke / f"figures/{fig}.pdf").read_bytes()[:5] == b"%PDF-"
        png = smoke / f"figures/{fig}.png"
        img = mpimg.imread(png)
        assert img.ndim == 3 and img.shape[0] > 400 and img.shape[1] > 800
        from PIL import Image

        about = json.loads(Image.open(png).text["Description"])
        assert about["figure"] == fig and len(about["panels"]) == len(spec["panels"])
        for panel, drawn in zip(spec["panels"], about["panels"]):
            study = cfg["studies"][panel.get("study", spec.get("study"))]
            x = "K" if spec["layout"] == "K_by_mu" else "m"
            if spec["layout"] == "m_by_size":
                expected = len(study["grid"]["sizes"])          # one line per size scheme
            elif spec["layout"] == "m_by_method":
                expected = len(study.get("methods", [0] * 4))    # one line per method
            else:
                expected = len(study["grid"]["mu"])             # one line per mu
            assert len(drawn["lines"]) == expected, (fig, drawn)
            assert drawn["points"] == [len(study["grid"][x])] * expected, (fig, drawn)


def test_smoke_summaries_and_tables(smoke):
    cfg = merged_config("config/smoke.yaml")
    for study in cfg["studies"]:
        for model in ("logistic", "poisson"):
            s = pd.read_parquet(smoke / f"results/summary/{model}_{study}.parquet")
            methods = cfg["studies"][study]["methods"]
            assert len(s) == len(methods) * n_cells(cfg, study)
            assert (s["replicates"] == cfg["replicates"]).all()
            assert set(s["method"]) == set(methods) >= {"fedsgd", "fedhybrid", "fedavg", "fednewton"}
    t1 = pd.read_csv(smoke / "figures/table1.csv")
    assert list(t1["method"]) == ["FedSGD", "FedHybrid", "FedAvg", "FedNewton"]
    assert list(t1["rounds"]) == [50, 21, 2, 2]                 # K, 1 + K2, R, 2
    assert list(t1["floats_up"]) == [20 * 50 * 5, 20 * 21 * 5, 20 * 2 * 5, 20 * 2 * 5]
    assert t1["mse"].gt(0).all() and t1["bound_theory"].str.contains("d/N").all()
    md = (smoke / "figures/table1.md").read_text()
    assert "| Method | Algorithm | Rounds (theory)" in md and md.count("\n| Fed") == 4
    assert r"\begin{tabular}" in (smoke / "figures/table1.tex").read_text()
    rates = pd.read_csv(smoke / "figures/rates.csv")
    assert set(rates["model"]) == {"logistic", "poisson"}
    fitted = rates[rates["points"] >= 2]          # cells where every replicate diverged drop out
    assert len(fitted) > len(rates) / 2 and fitted["predicted"].notna().all() and fitted["slope"].notna().all()
    assert {"slope", "ci_low", "ci_high", "predicted"} <= set(rates.columns)
    assert "Fitted slope" in (smoke / "figures/rates.md").read_text()


def test_smoke_claims_report(smoke):
    from fedgdp.claims import CLAIM_COLUMNS, VERDICTS

    claims = pd.read_csv(smoke / "figures/claims.csv")
    assert list(claims.columns) == CLAIM_COLUMNS
    assert set(claims["verdict"]) <= set(VERDICTS)
    runs = dict(zip(zip(claims["claim"], claims["model"]), claims["verdict"]))
    for claim in ("C1", "C2", "C4"):                       # two values per axis: testable
        for model in ("logistic", "poisson"):
            assert runs[(claim, model)] != "not run", (claim, model)
    assert {("C5", "binary (digits)"), ("C5", "multiclass (digits)")} <= set(runs)
    assert runs[("C6", "CNN")] == "not run"                 # nn not in the default target
    assert "| Z_TIE | 2 |" in (smoke / "figures/claims.md").read_text()


def test_smoke_run_time_and_report(smoke):
    # Under 2 minutes on an idle 2-core machine: CPU time (Snakemake and every job) under
    # 2 x 120 s, with room to spare. CPU, not wall time, so a busy machine does not fail it.
    assert float((smoke / "cpu_seconds.txt").read_text()) < 2 * 120
    res = snakemake(smoke, *SMOKE, "--report", "report.html")
    assert res.returncode == 0, res.stderr[-2000:]
    html = (smoke / "report.html").read_text(errors="replace")
    for text in ("Figure 3", "Figure 16", "Tables", "fig05.png", "table1.csv", "rates.md", "claims.md"):
        assert text in html, text


def test_interrupted_run_resumes_to_the_same_outputs(smoke, tmp_path):
    d = workdir(tmp_path / "killed")
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", *SMOKE]
    proc = subprocess.Popen(cmd, cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env=dict(os.environ, MPLBACKEND="Agg"))
    deadline = time.time() + 300
    while time.time() < deadline and len(list(d.glob("results/cells/**/*.parquet"))) < 12:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)          # snakemake and its running jobs, mid-run
    proc.wait()
    done = len(list(d.glob("results/cells/**/*.parquet")))
    assert 12 <= done < 48
    assert snakemake(d, "--unlock").returncode == 0
    res = snakemake(d, *SMOKE, "--rerun-incomplete")
    assert res.returncode == 0, res.stderr[-3000:]
    cfg = merged_config("config/smoke.yaml")
    for path in outputs(cfg):
        assert (d / path).read_bytes() == (smoke / path).read_bytes(), path
    for f in sorted((smoke / "results/summary").glob("*.parquet")):
        pd.testing.assert_frame_equal(pd.read_parquet(f), pd.read_parquet(d / "results/summary" / f.name))


# -------------------------------------------------------------------- dry runs
def test_default_dry_run_plans_the_whole_paper_grid(tmp_path):
    d = workdir(tmp_path)
    res = snakemake(d, "-n")
    assert res.returncode == 0, res.stderr[-2000:]
    counts = job_counts(res.stdout)
    cfg = merged_config()
    cells = sum(n_cells(cfg, s) * len(cfg["studies"][s]["models"]) for s in cfg["studies"])
    assert cells == 230
    assert counts["simulate_cell"] == cells and counts["summarise_study"] == 10
    assert counts["plot_figure"] == 12 and counts["total"] == 230 + 10 + 12 + 2 + 1 + 6 + 2 + 1
    assert counts["fit_realdata"] == 6 and counts["plot_realdata"] == 2     # Figures 7-8: 2 tasks x 3 splits
    assert counts["assess_claims"] == 1                                     # the claims report


def _figure_cells(cfg, fig):
    spec = cfg["figures"][fig]
    studies = {p.get("study", spec.get("study")) for p in spec["panels"]}
    return studies, sum(n_cells(cfg, s) for s in studies)


@pytest.mark.parametrize("fig", list(merged_config()["figures"]))
def test_dry_run_of_each_figure_plans_only_its_cells(tmp_path, fig):
    d = workdir(tmp_path)
    cfg = merged_config()
    target = f"figures/{fig}.pdf" if fig != "fig03" else "fig03"     # by file, and by rule name
    res = snakemake(d, "-n", target)
    assert res.returncode == 0, res.stderr[-2000:]
    studies, cells = _figure_cells(cfg, fig)
    assert job_counts(res.stdout)["simulate_cell"] == cells
    model = cfg["figures"][fig]["model"]
    planned = set(re.findall(r"results/cells/(\w+)/(\w+)/\S+\.parquet", res.stdout))
    assert planned == {(model, s) for s in studies}


def test_mistyped_targets_are_errors(tmp_path):
    d = workdir(tmp_path)
    base = "results/cells/logistic/equal_n/sizes~equal-30/m~20/mu~2/K~50/seeds~0-99.parquet"
    assert snakemake(d, "-n", base).returncode == 0
    for bad in (base.replace("equal-30", "equal-31"), base.replace("equal_n", "equal_N"),
                "figures/fig99.pdf", base.replace("seeds~0-99", "seeds~0-98")):
        res = snakemake(d, "-n", bad)
        assert res.returncode != 0, bad
    res = snakemake(d, "-n", base.replace("m~20", "m~200"))      # m = 200 exists, not in equal_n
    assert res.returncode != 0 and "not a cell of study equal_n" in res.stderr + res.stdout


BAD_CONFIGS = {
    "negative m": ("studies:\n  equal_n:\n    grid: {m: [-5]}\n", "['studies']['equal_n']['grid']['m']"),
    "unknown method": ("studies:\n  compare:\n    methods: [fedsgd, fedfoo]\n",
                       "studies.compare.methods[1]"),
    "mu zero": ("defaults: {mu: 0}\n", "['defaults']['mu']"),
    "mu zero in a grid": ("studies:\n  iterations:\n    grid: {mu: [0, 2]}\n",
                          "['studies']['iterations']['grid']['mu']"),
    "size scheme typo": ('studies:\n  compare:\n    grid: {sizes: ["unifrom(100,700)"]}\n',
                         "['studies']['compare']['grid']['sizes'][0]"),
    "bad size arguments": ('studies:\n  varied_n:\n    grid: {sizes: ["uniform(90,10)"]}\n',
                           "studies.varied_n.grid.sizes[0]"),
    "missing study": ("figures:\n  fig03: {study: compair}\n", "figures.fig03.study"),
    "panel value not in the grid": ("figures:\n  fig03: {panels: [{sizes: \"equal(401)\"}]}\n",
                                    "figures.fig03.panels[0].sizes"),
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_bad_config_fails_at_validation_naming_the_key(tmp_path, case):
    d = workdir(tmp_path)
    text, key = BAD_CONFIGS[case]
    (d / "bad.yaml").write_text(text)
    res = snakemake(d, "--configfile", "bad.yaml")               # a real run, not a dry run
    assert res.returncode != 0
    assert key in res.stderr + res.stdout, res.stderr[-2000:]
    assert not (d / "results").exists() and not (d / "logs").exists()


def test_lint_is_clean(tmp_path):
    d = workdir(tmp_path)
    res = snakemake(d, "--lint")
    assert res.returncode == 0 and "Congratulations" in res.stdout + res.stderr, res.stdout[-3000:]
