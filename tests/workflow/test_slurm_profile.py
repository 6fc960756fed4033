"""The SLURM profile (workflow/profiles/slurm): what `snakemake -n --profile ...` plans
for the paper's grid, and that its settings name the workflow's rules.

Needs snakemake-executor-plugin-slurm (`pip install -e '.[slurm]'`) and the SLURM
client commands (the plugin looks for them); skipped without either. The profile
against a running SLURM is .ci/slurm.sh, which also runs this file.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from paths import ROOT

PROFILE = ROOT / "workflow" / "profiles" / "slurm" / "config.yaml"
WORKFLOW = ["Snakefile", "config.yaml", "config", "workflow", "environment.yml"]
MAX_SUBMISSIONS = 60  # issue 6: the paper's grid in at most about 60 submissions
# Local rules run on the login node; a dry run under the slurm executor still prints them
# as "rule NAME:" (the SLURM CI run shows they are not submitted).
LOCAL_RULES = {"all", "save_config"}

pytest.importorskip("snakemake_executor_plugin_slurm")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("sbatch") is None,
                                 reason="SLURM client commands (sbatch) not installed")]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("slurm-profile")
    for name in WORKFLOW:
        src = ROOT / name
        if src.exists():
            (shutil.copytree if src.is_dir() else shutil.copy)(src, path / name)
    return path


def snakemake(cwd: Path, *args) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd,
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, MPLBACKEND="Agg"))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def plan(workdir) -> str:
    """Dry run of the default config (the paper's grid) through the SLURM profile."""
    return snakemake(workdir, "-n", "--profile", "workflow/profiles/slurm").stdout


@pytest.fixture(scope="module")
def profile() -> dict:
    return yaml.safe_load(PROFILE.read_text())


def submissions(plan: str) -> dict[str, int]:
    """What would go to sbatch: one per group job, one per ungrouped job of a rule that
    is not local. Group jobs print "Group job NAME"; ungrouped jobs "rule NAME:" at
    the start of a line (the jobs of a group are indented; local rules print
    "localrule NAME:"; `all` has no shell command and runs on the login node)."""
    counts: dict[str, int] = {}
    for line in plan.splitlines():
        line = re.sub(r"^\[[^\]]*\] ", "", line)
        hit = re.match(r"Group job (\S+)", line) or re.match(r"rule (\w+):$", line)
        if hit and hit.group(1) not in LOCAL_RULES:
            key = ("group " if line.startswith("Group") else "") + hit.group(1)
            counts[key] = counts.get(key, 0) + 1
    return counts


def test_default_grid_fits_in_few_submissions(plan):
    counts = submissions(plan)
    total = sum(counts.values())
    print(f"snakemake -n --profile workflow/profiles/slurm: {total} submissions {counts}")
    assert "simulate_cell" not in counts, "cells must be grouped"
    assert counts.get("group cells", 0) >= 1
    assert total <= MAX_SUBMISSIONS, counts
    assert counts == {"group cells": 18, "fit_realdata": 6, "group post": 1}    # docs/cluster.md's 25


def cell_resources(plan: str) -> dict[str, dict]:
    """simulate_cell jobs (a group of cells each) of the plan: output path -> {mem_mb, runtime}."""
    cells = {}
    for block in re.split(r"\n\s*(?=rule simulate_cell:)", plan)[1:]:
        out = re.search(r"output: (\S+)", block).group(1)
        res = re.search(r"resources: (.*)", block).group(1)
        cells[out] = {k: int(re.search(rf"\b{k}=(\d+)", res).group(1)) for k in ("mem_mb", "runtime")}
    return cells


def test_cell_resources_grow_with_the_cells(plan):
    cells = cell_resources(plan)
    assert len(cells) == 18                                      # 230 cells, up to 16 per job
    big = next(r for p, r in cells.items() if "logistic/compare/cells~0-14/" in p)   # m up to 140, N ~ 56,000
    small = next(r for p, r in cells.items() if "logistic/equal_n/cells~0-11/" in p)  # equal(30)-(70), m 20-60
    assert big["runtime"] > small["runtime"] >= 2 and big["mem_mb"] > small["mem_mb"] >= 1000
    assert all(r["runtime"] <= 60 and r["mem_mb"] <= 4000 for r in cells.values())


def test_profile_names_only_rules_of_the_workflow(workdir, profile):
    rules = set(snakemake(workdir, "--list-rules").stdout.split())
    named = set(profile["groups"]) | set(profile.get("set-resources") or {}) | set(profile["set-threads"])
    assert named <= rules, f"the profile names rules the workflow lacks: {named - rules}"


def test_profile_holds_no_code(profile):
    # the per-rule requests are the rules' own (fedgdp.plan), not code in strings
    assert "__import__" not in PROFILE.read_text()
    assert "simulate_cell" not in (profile.get("set-resources") or {})


def test_status_and_memory_settings(profile):
    # squeue only sees a job for MinJobAge seconds after it ends (SLURM's default 300);
    # the plugin wants MinJobAge >= 3 x the first status check.
    assert profile["slurm-status-command"] == "squeue"
    assert 3 * profile["slurm-init-seconds-before-status-checks"] <= 300
    # without a memory request a job takes the whole node's memory
    assert "mem_mb" in profile["default-resources"]
    assert profile["cores"] == 1  # group jobs run their jobs one after another (see profile)
