"""``scripts/speedup.py`` (the fast code against the oracle), ``fedgdp bench --suite``
and the pandas-free cell writer."""
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import yaml

from fedgdp.commands.bench import suite_cells
from fedgdp.commands.cli import main
from fedgdp.simulation.params import resolve
from fedgdp.simulation.run import _schema, read_cell, rows_to_table, run_cell, write_cell
from paths import ROOT

SPEEDUP = ROOT / "scripts" / "speedup.py"


def _speedup_module():
    """``scripts/speedup.py`` loaded as a module (it is a script, not on the path)."""
    spec = importlib.util.spec_from_file_location("speedup", SPEEDUP)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_single_cell_speedup_json(tmp_path):
    out = tmp_path / "bench.json"
    result = _speedup_module().run_speedup(replicates=2, m=4, n=30, out=str(out))
    saved = json.loads(out.read_text())
    assert saved == json.loads(json.dumps(result))
    for key in ("cell", "reference_s", "fast_s", "ratio", "reference_wall_s", "fast_wall_s", "clock",
                "max_abs_diff", "numpy", "numba", "python", "git_commit"):
        assert key in saved, key
    assert saved["fast_s"] > 0 and saved["ratio"] > 0
    assert saved["max_abs_diff"] < 1e-10
    assert saved["cell"].startswith("logistic, m=4, equal(30),") and "2 replicates" in saved["cell"]


def test_speedup_script_runs_from_anywhere(tmp_path):
    """As a user runs it (``python scripts/speedup.py``), from another folder: it finds
    the oracle itself, and refuses a bad --out before any work."""
    bad = subprocess.run([sys.executable, str(SPEEDUP), "--out", str(tmp_path / "b.csv")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert bad.returncode == 2 and "must end in .json" in bad.stderr and "Traceback" not in bad.stderr
    ok = subprocess.run([sys.executable, str(SPEEDUP), "--replicates", "1", "--m", "3", "--n", "20"],
                        capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert ok.returncode == 0, ok.stderr
    assert "ratio" in ok.stdout and "max |diff|" in ok.stdout


def test_bench_without_suite_points_at_the_speedup_script(capsys):
    assert main(["bench"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--suite" in err and "python scripts/speedup.py" in err


def test_no_package_module_imports_the_oracle():
    """The loop oracle is a test module: importing every module of the package loads
    neither ``oracle`` nor a ``fedgdp.reference``, and no source file names them."""
    code = ("import importlib, pkgutil, sys, fedgdp\n"
            "for m in pkgutil.walk_packages(fedgdp.__path__, 'fedgdp.'):\n"
            "    if m.name.endswith('__main__'): continue\n"           # it runs the command line
            "    try: importlib.import_module(m.name)\n"
            "    except ModuleNotFoundError as exc:\n"                 # the optional extras nn and flower
            "        if exc.name not in ('torch', 'flwr'): raise\n"
            "print('fedgdp.simulation.run' in sys.modules,\n"
            "      sorted(n for n in sys.modules if n == 'oracle' "
            "or (n.startswith('fedgdp.') and n.endswith('.reference'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True []"
    src = ROOT / "src" / "fedgdp"
    assert not (src / "reference.py").exists()
    offenders = [str(f.relative_to(src)) for f in src.rglob("*.py")
                 if any(t in f.read_text() for t in ("import oracle", "from oracle", "fedgdp.reference",
                                                     "from .reference", "from ..reference"))]
    assert offenders == []


def _tiny_config(tmp_path) -> Path:
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["studies"] = {"tiny": {"models": ["logistic", "poisson"], "methods": ["fedsgd", "fednewton"],
                               "schedule": "paper", "grid": {"m": [3], "sizes": ["equal(20)"], "K": [2, 3]}}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_suite_json_has_cpu_seconds_per_study_method_and_cell(tmp_path):
    out = tmp_path / "suite.json"
    assert main(["bench", "--suite", "--config", str(_tiny_config(tmp_path)), "--replicates", "2",
                 "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["replicates"] == 2 and res["cells"] == 4 and len(res["cell_times"]) == 4
    st = res["studies"]["tiny"]
    assert st["cells"] == 4 and set(st["methods_cpu_s"]) == {"fedsgd", "fednewton"}
    assert st["cpu_s"] > 0 and all(v >= 0 for v in st["methods_cpu_s"].values())
    # the methods' and the data's CPU seconds add up to the study's (rounding to 1e-3)
    assert math.isclose(st["data_cpu_s"] + sum(st["methods_cpu_s"].values()), st["cpu_s"], abs_tol=5e-3)
    assert math.isclose(sum(c["cpu_s"] for c in res["cell_times"]), res["total_cpu_s"], abs_tol=5e-3)
    assert ({(c["model"], c["K"]) for c in res["cell_times"]}
            == {(m, k) for m in ("logistic", "poisson") for k in (2, 3)})
    for key in ("numpy", "numba", "python", "git_commit", "clock", "config"):
        assert key in res


def test_suite_covers_every_cell_of_the_default_config():
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cells = list(suite_cells(cfg))
    expected = sum(len(s["models"]) * len(s["grid"]["m"]) * len(s["grid"]["sizes"])
                   * len(s["grid"].get("mu", [1])) * len(s["grid"].get("K", [1])) for s in cfg["studies"].values())
    assert len(cells) == expected
    study, p = next(c for c in cells if c[0] == "iterations")
    assert resolve(p).schedule == "budget" and p["beta_true"] == cfg["beta_true"][p["model"]]


def test_cell_table_without_pandas_equals_pyarrows_own_conversion(tmp_path):
    p = resolve({"m": 3, "sizes": "equal(20)", "K": 2, "methods": ["fedsgd"]})
    rows = run_cell(p, [0, 1])
    rows[0]["sq_error"], rows[1]["diverged"] = float("inf"), True
    table = rows_to_table(rows, _schema())
    table.validate(full=True)
    assert table.equals(pa.Table.from_pylist(rows, schema=_schema()))
    rows[1]["mu"] = float("nan")
    write_cell(rows, p, tmp_path / "c.parquet")
    df = read_cell(tmp_path / "c.parquet")
    assert np.isinf(df["sq_error"][0]) and np.isnan(df["mu"][1]) and df["diverged"].tolist() == [False, True]
    assert [list(t) for t in df["theta_hat"]] == [r["theta_hat"] for r in rows]


def test_simulate_does_not_import_pandas(tmp_path):
    code = ("import sys; from fedgdp.commands.cli import main; "
            f"main(['simulate', '--m', '3', '--sizes', 'equal(20)', '--K', '2', '--seeds', '0', "
            f"'--out', {str(tmp_path / 'c.parquet')!r}]); print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    assert len(read_cell(tmp_path / "c.parquet")) == 4


def test_suite_errors_name_the_config_and_the_studies(tmp_path, capsys):
    assert main(["bench", "--suite", "--config", str(tmp_path / "none.yaml")]) == 2
    assert capsys.readouterr().err.strip() == (f"fedgdp: error: --config {tmp_path / 'none.yaml'}"
                                               ": No such file or directory")
    assert main(["bench", "--suite", "--config", str(_tiny_config(tmp_path)), "--studies", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope" in err


def test_profile_realdata_on_digits(tmp_path, capsys):
    """``scripts/profile_realdata.py`` on the bundled digits: one split profiled, its
    method and phase tables printed, the rows written and compared (equal to themselves;
    a changed value is reported and fails the comparison)."""
    import pandas as pd

    spec = importlib.util.spec_from_file_location("profile_realdata", ROOT / "scripts" / "profile_realdata.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "rows.parquet"
    result = module.profile_split(str(ROOT / "config.yaml"), "binary", 0, "fedsgd,np_pooled", str(out))
    printed = capsys.readouterr().out
    assert set(result["methods"]) == {"fedsgd", "np_pooled"} and result["cpu_s"] > 0
    assert "| np_pooled |" in printed and "ridge fits" in printed
    assert result["phases"]["ridge fits (NP-LocalFit, NP-Pooled: trust-region Newton-CG)"] > 0
    assert module.compare(str(out), str(out)) == 0
    changed = pd.read_parquet(out)
    changed.loc[0, "value"] += 1e-6
    changed.to_parquet(tmp_path / "changed.parquet")
    assert module.compare(str(out), str(tmp_path / "changed.parquet")) == 1


def test_profile_draws_prints_identical_draws(capsys):
    """``scripts/profile_draws.py``: numpy's and fedgdp.core.normals' draws timed side by side,
    every draw identical (exit status 0), one table row per shape."""
    spec = importlib.util.spec_from_file_location("profile_draws", ROOT / "scripts" / "profile_draws.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--rounds", "1", "--repeat", "1"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("| True |") == len(module.SHAPES) and "False" not in printed
