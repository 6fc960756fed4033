"""The Snakemake pipeline: smoke run end to end, named output sets, dry runs, config
validation (the closed schema, from a file and from --config), lint, report, conda
plans, the gallery target, and interrupted runs that resume to the same outputs.

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

from paths import ROOT

WORKFLOW = ["Snakefile", "config.yaml", "config", "workflow", "environment.yml", "README.md"]
SMOKE = ["--configfile", "config/smoke.yaml"]
PAPER, RUN = "paper", "smoke"     # run names of config.yaml and config/smoke.yaml
SMOKE_JOBS = 20                   # simulate jobs of the smoke run: 24 cells per model, 3 per job

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


def n_jobs(cfg, study) -> int:
    """simulate_cell jobs of one model's study: its cells in groups of cells_per_job."""
    return -(-n_cells(cfg, study) // cfg["cells_per_job"])


def sim_figures(cfg) -> dict:
    return {f: s for f, s in cfg["figures"].items() if s["kind"] == "simulation"}


def outputs(cfg) -> list[str]:
    run = cfg["run"]
    figs = [f"figures/{run}/{f}.{e}" for f in cfg["figures"] if cfg["figures"][f]["kind"] != "nn"
            for e in ("pdf", "png")]
    return figs + [f"tables/{run}/table1.{e}" for e in ("csv", "md", "tex")] + \
        [f"tables/{run}/rates.{e}" for e in ("csv", "md")] + [f"results/{run}/config.resolved.yaml"]


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
    for fig, spec in sim_figures(cfg).items():
        assert (smoke / f"figures/{RUN}/{fig}.pdf").read_bytes()[:5] == b"%PDF-"
        png = smoke / f"figures/{RUN}/{fig}.png"
        img = mpimg.imread(png)
        assert img.ndim == 3 and img.shape[0] > 400 and img.shape[1] > 800
        from PIL import Image

        about = json.loads(Image.open(png).text["Description"])
        assert about["figure"] == fig and len(about["panels"]) == len(spec["panels"])
        assert Image.open(png).text["Title"].endswith(f"[{RUN}, {sha(smoke)}]")    # which run made it
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
    for study in [s for s in cfg["studies"] if not s.startswith("decompose_")]:   # summarised: all but these
        for model in ("logistic", "poisson"):
            s = pd.read_parquet(smoke / f"results/{RUN}/summary/{model}_{study}.parquet")
            methods = cfg["studies"][study]["methods"]
            assert len(s) == len(methods) * n_cells(cfg, study)
            assert (s["replicates"] == cfg["replicates"]).all()
            assert set(s["method"]) == set(methods) >= {"fedsgd", "fedhybrid", "fedavg", "fednewton"}
    t1 = pd.read_csv(smoke / f"tables/{RUN}/table1.csv")
    assert list(t1["method"]) == ["FedSGD", "FedHybrid", "FedAvg", "FedNewton"]
    assert list(t1["rounds"]) == [50, 21, 2, 2]                 # K, 1 + K2, R, 2
    assert list(t1["floats_up"]) == [20 * 50 * 5, 20 * 21 * 5, 20 * 2 * 5, 20 * 2 * 5]
    assert t1["mse"].gt(0).all() and t1["bound_theory"].str.contains("d/N").all()
    md = (smoke / f"tables/{RUN}/table1.md").read_text()
    assert "| Method | Algorithm | Rounds (theory)" in md and md.count("\n| Fed") == 4
    assert f"run {RUN}, config {sha(smoke)}" in md
    assert r"\begin{tabular}" in (smoke / f"tables/{RUN}/table1.tex").read_text()
    rates = pd.read_csv(smoke / f"tables/{RUN}/rates.csv")
    assert set(rates["model"]) == {"logistic", "poisson"}
    fitted = rates[rates["points"] >= 2]          # cells where every replicate diverged drop out
    assert len(fitted) > len(rates) / 2 and fitted["predicted"].notna().all() and fitted["slope"].notna().all()
    assert {"slope", "ci_low", "ci_high", "predicted"} <= set(rates.columns)
    assert "Fitted slope" in (smoke / f"tables/{RUN}/rates.md").read_text()


def test_smoke_claims_report(smoke):
    from fedgdp.reports.claims import CLAIM_COLUMNS, VERDICTS

    claims = pd.read_csv(smoke / f"tables/{RUN}/claims.csv")
    assert list(claims.columns) == CLAIM_COLUMNS
    assert set(claims["verdict"]) <= set(VERDICTS)
    runs = dict(zip(zip(claims["claim"], claims["model"]), claims["verdict"]))
    for claim in ("C1", "C2", "C4"):                       # two values per axis: testable
        for model in ("logistic", "poisson"):
            assert runs[(claim, model)] != "not run", (claim, model)
    assert {("C5", "binary (digits)"), ("C5", "multiclass (digits)")} <= set(runs)
    assert runs[("C6", "CNN")] == "not run"                 # nn not in the default target
    assert "| Z_TIE | 2 |" in (smoke / f"tables/{RUN}/claims.md").read_text()


def test_smoke_run_time_and_report(smoke):
    # Under 2 minutes on an idle 2-core machine: CPU time (Snakemake and every job) under
    # 2 x 120 s, with room to spare. CPU, not wall time, so a busy machine does not fail it.
    assert float((smoke / "cpu_seconds.txt").read_text()) < 2 * 120
    res = snakemake(smoke, *SMOKE, "--report", f"results/{RUN}/report.html")
    assert res.returncode == 0, res.stderr[-2000:]
    html = (smoke / f"results/{RUN}/report.html").read_text(errors="replace")
    for text in ("Figure 3", "Figure 16", "Figure 7", "Tables", "Config", "fig05.png", "table1.csv",
                 "rates.md", "claims.md", "config.resolved.yaml", f"run {RUN}, config {sha(smoke)}"):
        assert text in html, text


def sha(d: Path) -> str:
    """The config hash a run recorded in its resolved config (second header line)."""
    head = (d / f"results/{RUN}/config.resolved.yaml").read_text().splitlines()[1]
    return re.search(r"sha256 prefix ([0-9a-f]{8})", head).group(1)


def test_runs_do_not_overwrite_each_other(smoke):
    """The smoke run's outputs lie beside the default run's: after it, the default run
    still plans its whole grid, and the smoke run has nothing left to do."""
    resolved = yaml.safe_load((smoke / f"results/{RUN}/config.resolved.yaml").read_text())
    assert resolved["run"] == RUN and resolved["replicates"] == 4
    assert {p.name for p in (smoke / "results").iterdir()} == {RUN}
    res = snakemake(smoke, "-n")
    assert job_counts(res.stdout)["simulate_cell"] == 18 and f"results/{RUN}/" not in res.stdout
    assert "Nothing to be done" in snakemake(smoke, *SMOKE, "-n").stdout
    # a changed setting under the same file: a new, hashed run name, not the smoke outputs
    res = snakemake(smoke, *SMOKE, "-n", "--config", "replicates=2", "seeds_per_job=2")
    hashed = re.search(rf"results/({RUN}-[0-9a-f]{{8}})/", res.stdout).group(1)
    assert job_counts(res.stdout)["simulate_cell"] == SMOKE_JOBS and f"results/{RUN}/" not in res.stdout
    assert hashed in res.stderr                                   # announced at the start


def _kill_mid_run(d: Path, sig, *extra: str, after: int = 4) -> int:
    """Start the smoke run (with ``extra`` flags) in ``d``, send ``sig`` to it and its jobs
    once ``after`` cell files exist, wait for it to stop; the cell files then written."""
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", *SMOKE, *extra]
    proc = subprocess.Popen(cmd, cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env=dict(os.environ, MPLBACKEND="Agg"),
                            # SIGINT as in a terminal, even where the tests run with it ignored
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while time.time() < deadline and len(list(d.glob(f"results/{RUN}/cells/**/*.parquet"))) < after:
        time.sleep(0.05)
    os.killpg(proc.pid, sig)                     # snakemake and its running jobs, mid-run
    try:
        proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"snakemake did not stop within 300 s of signal {sig}")
    return len(list(d.glob(f"results/{RUN}/cells/**/*.parquet")))


def _same_outputs(d: Path, smoke: Path):
    cfg = merged_config("config/smoke.yaml")
    for path in outputs(cfg):
        if path.endswith((".csv", ".md", ".tex", ".yaml")):
            assert (d / path).read_bytes() == (smoke / path).read_bytes(), path
    for f in sorted((smoke / f"results/{RUN}/summary").glob("*.parquet")):
        pd.testing.assert_frame_equal(pd.read_parquet(f), pd.read_parquet(d / f"results/{RUN}/summary" / f.name))


def test_interrupted_then_hard_killed_run_resumes_to_the_same_outputs(smoke, tmp_path):
    """The README's advice, both in one run: after Ctrl-C, the same command again with
    --rerun-incomplete (no --unlock: Snakemake released its lock), which is then killed
    hard; after a hard kill, --unlock, then the same command with --rerun-incomplete. The
    outputs are those of the uninterrupted run."""
    d = workdir(tmp_path / "resumed")
    done = _kill_mid_run(d, signal.SIGINT)
    if done + 2 >= SMOKE_JOBS:  # a loaded machine can finish (almost) every job before the signal lands
        pytest.skip(f"the smoke run had written {done} of {SMOKE_JOBS} cell files when SIGINT arrived")
    assert 4 <= done
    again = _kill_mid_run(d, signal.SIGKILL, "--rerun-incomplete", after=done + 2)
    assert done < again < SMOKE_JOBS, (done, again)     # resumed without --unlock, then killed mid-run
    assert snakemake(d, "--unlock", *SMOKE).returncode == 0
    res = snakemake(d, *SMOKE, "--rerun-incomplete")
    assert res.returncode == 0, res.stderr[-3000:]
    _same_outputs(d, smoke)


# -------------------------------------------------------------------- dry runs
def test_default_dry_run_plans_the_whole_paper_grid(tmp_path):
    d = workdir(tmp_path)
    res = snakemake(d, "-n")
    assert res.returncode == 0, res.stderr[-2000:]
    counts = job_counts(res.stdout)
    cfg = merged_config()
    studies = [s for s in cfg["studies"] if not s.startswith("decompose_")]   # the decomposition: its own target
    cells = sum(n_cells(cfg, s) * len(cfg["studies"][s]["models"]) for s in studies)
    jobs = sum(n_jobs(cfg, s) * len(cfg["studies"][s]["models"]) for s in studies)
    assert (cells, jobs) == (230, 18)                                       # 16 cells per job (cells_per_job)
    assert counts["simulate_cell"] == jobs and counts["summarise_study"] == 10
    assert counts["fit_realdata"] == 6 and counts["plot_realdata"] == 2     # Figures 7-8: 2 tasks x 3 splits
    assert counts["plot_figure"] == 12 and counts["save_config"] == 1
    assert counts["assess_claims"] == 1                                     # the claims report
    assert counts["total"] == 18 + 10 + 12 + 2 + 6 + 2 + 1 + 1 + 1       # docs/pipeline.md: 53
    assert f"run {PAPER} " in res.stderr
    paths = set(re.findall(r"(?:output|log|benchmark): (\S+?)[,\n]", res.stdout + "\n"))
    assert paths and all(p.split("/")[1] == PAPER for p in paths), sorted(paths)[:5]


def _figure_jobs(cfg, fig):
    spec = cfg["figures"][fig]
    studies = {p.get("study", spec.get("study")) for p in spec["panels"]}
    return studies, sum(n_jobs(cfg, s) for s in studies)


@pytest.mark.parametrize("fig", list(sim_figures(merged_config())))
def test_dry_run_of_each_figure_plans_only_its_cells(tmp_path, fig):
    d = workdir(tmp_path)
    cfg = merged_config()
    target = f"figures/{PAPER}/{fig}.pdf" if fig != "fig03" else "fig03"     # by file, and by rule name
    res = snakemake(d, "-n", target)
    assert res.returncode == 0, res.stderr[-2000:]
    studies, jobs = _figure_jobs(cfg, fig)
    assert job_counts(res.stdout)["simulate_cell"] == jobs
    model = cfg["figures"][fig]["model"]
    planned = set(re.findall(rf"results/{PAPER}/cells/(\w+)/(\w+)/\S+\.parquet", res.stdout))
    assert planned == {(model, s) for s in studies}


def test_mistyped_targets_are_errors(tmp_path):
    d = workdir(tmp_path)
    base = f"results/{PAPER}/cells/logistic/equal_n/cells~0-11/seeds~0-99.parquet"
    assert snakemake(d, "-n", base).returncode == 0
    for bad in (base.replace("equal_n", "equal_N"), f"figures/{PAPER}/fig99.pdf",
                base.replace("seeds~0-99", "seeds~0-98"), base.replace(f"/{PAPER}/", "/smoke/")):
        res = snakemake(d, "-n", bad)
        assert res.returncode != 0, bad
    res = snakemake(d, "-n", base.replace("0-11", "0-14"))    # 0-14 is a group of compare, not of equal_n
    assert res.returncode != 0 and "not a group of study equal_n" in res.stderr + res.stdout


BAD_CONFIGS = {
    "negative m": ("studies:\n  equal_n:\n    grid: {m: [-5]}\n", "studies.equal_n.grid.m[0]"),
    "unknown method": ("studies:\n  compare:\n    methods: [fedsgd, fedfoo]\n",
                       "studies.compare.methods[1]"),
    "mu zero": ("defaults: {mu: 0}\n", "defaults.mu"),
    "mu zero in a grid": ("studies:\n  iterations:\n    grid: {mu: [0, 2]}\n",
                          "studies.iterations.grid.mu[0]"),
    "size scheme typo": ('studies:\n  compare:\n    grid: {sizes: ["unifrom(100,700)"]}\n',
                         "studies.compare.grid.sizes[0]"),
    "bad size arguments": ('studies:\n  varied_n:\n    grid: {sizes: ["uniform(90,10)"]}\n',
                           "studies.varied_n.grid.sizes[0]"),
    "missing study": ("figures:\n  fig03: {study: compair}\n", "figures.fig03.study"),
    "panel value not in the grid": ("figures:\n  fig03: {panels: [{sizes: \"equal(401)\"}]}\n",
                                    "figures.fig03.panels[0].sizes"),
    "misspelt top-level key": ("replicats: 5\n", "replicats: unknown key 'replicats' (did you mean 'replicates'?)"),
    "misspelt nested key": ("studies:\n  compare:\n    grid: {m: [60], sizse: [\"equal(400)\"]}\n",
                            "studies.compare.grid.sizse: unknown key 'sizse' (did you mean 'sizes'?)"),
}


@pytest.mark.parametrize("case", list(BAD_CONFIGS))
def test_bad_config_fails_at_validation_naming_the_key(tmp_path, case):
    d = workdir(tmp_path)
    text, key = BAD_CONFIGS[case]
    (d / "bad.yaml").write_text(text)
    res = snakemake(d, "--configfile", "bad.yaml")               # a real run, not a dry run
    assert res.returncode != 0
    assert f"invalid config at {key}" in res.stderr + res.stdout, res.stderr[-2000:]
    assert not (d / "results").exists() and not (d / "logs").exists()


@pytest.mark.parametrize("args, key", [
    (["replicats=5"], "replicats: unknown key 'replicats' (did you mean 'replicates'?)"),
    (["defaults={mu: 2, sigma: 1}"], "defaults.sigma: unknown key 'sigma' (did you mean 'sigma_c'?)"),
])
def test_misspelt_config_override_fails_naming_the_key(tmp_path, args, key):
    d = workdir(tmp_path)
    res = snakemake(d, "fig03", "--config", *args)               # targets before --config
    assert res.returncode != 0
    assert f"invalid config at {key}" in res.stderr, res.stderr[-2000:]
    assert not (d / "results").exists() and not (d / "logs").exists()


def test_lint_is_clean(tmp_path):
    d = workdir(tmp_path)
    res = snakemake(d, "--lint")
    assert res.returncode == 0 and "Congratulations" in res.stdout + res.stderr, res.stdout[-3000:]


# ---------------------------------------------------------------- conda, gallery
FAKE_CONDA = """#!/bin/sh
# Stand-in for conda (none on these machines): answers what Snakemake asks before
# it plans; a dry run creates no environment.
case "$*" in
  "info --json") echo '{"conda_prefix": "/nonexistent/conda", "platform": "linux-64"}' ;;
  "--version") echo "conda 24.11.0" ;;
  "config --get channel_priority --json") echo '{"get": {"channel_priority": "strict"}}' ;;
  *) echo "fake conda: $*" >&2; exit 1 ;;
esac
"""


def test_conda_environments_parse_and_plan(tmp_path):
    envs = sorted((ROOT / "workflow" / "envs").glob("*.yaml"))
    assert [e.name for e in envs] == ["fedgdp.yaml", "nn.yaml"]
    for env in envs:
        spec = yaml.safe_load(env.read_text())
        pip = next(x["pip"] for x in spec["dependencies"] if isinstance(x, dict))
        assert pip == ["-e ../.."]                     # the source tree, from .snakemake/conda/
        assert (env.parent / "../..").resolve() == ROOT    # ... and from workflow/envs/
    assert "pytorch>=2.2" in yaml.safe_load((ROOT / "workflow/envs/nn.yaml").read_text())["dependencies"]
    rules = "".join(p.read_text() for p in (ROOT / "workflow" / "rules").glob("*.smk"))
    assert rules.count("shell:") == rules.count("conda:")      # every job rule names its environment
    d = workdir(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "conda").write_text(FAKE_CONDA)
    (bin_dir / "conda").chmod(0o755)
    env = dict(os.environ, MPLBACKEND="Agg", PATH=f"{bin_dir}:{os.environ['PATH']}")
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "-n", "fig03", "fig09",
                          "--sdm", "conda"], cwd=d, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    for env_file in ("workflow/envs/fedgdp.yaml", "workflow/envs/nn.yaml"):
        assert f"Conda environment {env_file} will be created" in res.stdout + res.stderr
    assert job_counts(res.stdout)["train_nn"] == 12


def test_gallery_target_makes_the_pngs_the_gallery_page_shows(tmp_path):
    page = (ROOT / "docs" / "gallery.md").read_text()           # its links are relative to docs/
    shown = ["docs/" + png for png in re.findall(r"\]\((gallery/[^)]+\.png)\)", page)]
    d = workdir(tmp_path)
    res = snakemake(d, "-n", "gallery")
    assert res.returncode == 0, res.stderr[-2000:]
    made = set(re.findall(r"output: (docs/gallery/\S+\.png)", res.stdout))
    assert shown and set(shown) == made, (sorted(shown), sorted(made))
    for png in shown:                                  # committed, and small
        assert 0 < (ROOT / png).stat().st_size < 100_000, png


def test_smoke_decomposition_target_and_report(smoke):
    """`snakemake decompose` (not in the default target) on the smoke config: the table and
    the figure, terms adding up to the private MSE, and the report of `all decompose`."""
    import numpy as np

    from fedgdp.reports.decomposition import COLUMNS, TERMS

    res = snakemake(smoke, "decompose", *SMOKE)
    assert res.returncode == 0, res.stderr[-3000:]
    t = pd.read_csv(smoke / f"tables/{RUN}/decomposition.csv")
    assert list(t.columns) == COLUMNS and len(t) == 2 * 5 * 2          # models x methods x K
    np.testing.assert_allclose(t[list(TERMS)].sum(axis=1), t["mse_private"], rtol=1e-5)
    assert (t.loc[t["K"] == 40, "optimisation"] == 0).all()             # K_conv = 40 in smoke.yaml
    assert (smoke / f"figures/{RUN}/decomposition.pdf").read_bytes()[:5] == b"%PDF-"
    res = snakemake(smoke, "--report", f"results/{RUN}/report-all.html", "all", "decompose", *SMOKE)
    assert res.returncode == 0, res.stderr[-2000:]
    html = (smoke / f"results/{RUN}/report-all.html").read_text(errors="replace")
    for text in ("decomposition.png", "decomposition.md", "Decomposition", "fig03.png", "claims.md",
                 "privacy noise = e_private(K) - e_clip_only(K)"):
        assert text in html, text

