"""``fedgdp bench --suite``: CPU seconds of every study's cells, and the timing helpers.

`run_suite` times every cell of a config's studies as a simulate job runs it, per cell,
study and method, as JSON. ``scripts/speedup.py`` (fast code against ``tests/oracle.py``)
uses `timed`, `versions` and `write_json` from here.
"""
from __future__ import annotations

import platform
import time
from contextlib import contextmanager
from typing import Any

import numpy as np

__all__ = ["run_suite", "suite_cells", "timed", "versions", "write_json"]


def versions() -> dict:
    """Versions of numpy, numba and Python, the machine and the git commit (for the JSON)."""
    out: dict[str, Any] = {"numpy": np.__version__, "python": platform.python_version(), "machine": platform.machine()}
    try:
        import numba

        out["numba"] = numba.__version__
    except ImportError:
        out["numba"] = None
    from ..common.io import git_commit

    out["git_commit"] = git_commit()
    return out


def timed(func, *args, **kwargs):
    """``(func(*args, **kwargs), CPU seconds of this process, wall seconds)``.

    Parameters
    ----------
    func : callable
        The function to time.
    *args, **kwargs
        Its arguments.
    """
    c0, w0 = time.process_time(), time.perf_counter()
    value = func(*args, **kwargs)
    return value, time.process_time() - c0, time.perf_counter() - w0


def write_json(result: dict, out: str | None) -> None:
    """Write ``result`` to ``out`` atomically as strict JSON (`fedgdp.common.io.dumps_strict`).

    Parameters
    ----------
    result : dict
        A JSON-like result.
    out : str or None
        The file (None or empty: nothing written).
    """
    if out:
        from ..common.io import dumps_strict, write_text

        write_text(out, dumps_strict(result, indent=1) + "\n")


# ------------------------------------------------------------------------ suite
def suite_cells(config: dict, studies=None):
    """``(study, overrides)`` of every cell of the config's studies and models, as the workflow expands them
    (`fedgdp.plan.Plan.cell_overrides`, grid order).

    Parameters
    ----------
    config : dict
        A pipeline config (its ``studies``, ``defaults``, ``beta_true``, ...; ``run`` optional).
    studies : collection of str or None, default=None
        Only these studies (None or empty: all).
    """
    from ..plan.simulation import SimulationPart

    plan = SimulationPart(config, config.get("run", "bench"))
    for s in plan.studies():
        if studies and s.name not in studies:
            continue
        for model in s.models:
            for cell in plan.study_cells(s.name):
                yield s.name, plan.cell_overrides(model, s.name, cell)


@contextmanager
def _cpu_method_clock():
    """Let `fedgdp.simulation.run.run_cell` time each method's fit (its ``elapsed_s``
    per replicate) with the process CPU clock instead of the wall clock."""
    from ..simulation import run as runner

    class _Clock:
        perf_counter = staticmethod(time.process_time)

    saved = runner.time
    runner.time = _Clock
    try:
        yield
    finally:
        runner.time = saved


def run_suite(*, config: str = "config.yaml", replicates: int | None = None, studies=None,
              out: str | None = None) -> dict:
    """CPU seconds of every study's cells at the config's settings: ``config``, ``replicates``, ``cells``,
    ``total_cpu_s``, ``clock``, the `versions` keys, ``studies`` (per study) and ``cell_times`` (per cell).
    ValueError for an unreadable config, one without studies, a bad replicate count, or no cells.

    Parameters
    ----------
    config : str, default="config.yaml"
        Path of the pipeline config.
    replicates : int or None, default=None
        Replicates per cell, seeds 0..n_rep-1 (None: the config's ``replicates``, else 100).
    studies : collection of str or None, default=None
        Names of the studies to time (None or empty: all).
    out : str or None, default=None
        A JSON file to write the result to (None: none).
    """
    import yaml

    from ..simulation.params import resolve
    from ..simulation.run import run_cell

    try:
        with open(config) as fh:
            cfg = yaml.safe_load(fh)
    except OSError as exc:
        raise ValueError(f"--config {config}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        from ..common.arguments import _yaml_problem

        raise ValueError(f"--config {config} is not valid YAML: {_yaml_problem(exc)}") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("studies"), dict) or not cfg["studies"]:
        raise ValueError(f"--config {config} has no studies (a mapping of study -> grid, as in config.yaml)")
    n_rep = cfg.get("replicates", 100) if replicates is None else replicates
    if isinstance(n_rep, bool) or not isinstance(n_rep, int) or n_rep < 1:
        source = "--replicates" if replicates is not None else f"replicates of {config}"
        raise ValueError(f"{source} must be an integer >= 1, got {n_rep!r} (a time of no replicates "
                         "would read as a measurement)")
    cells = [(study, resolve(o)) for study, o in suite_cells(cfg, studies)]
    if not cells:
        raise ValueError(f"no cells: studies {studies} not in {config}")
    run_cell(cells[0][1], [0])                  # warm-up (imports, compiled kernels)
    per_study: dict = {}
    rows_out = []
    for study, p in cells:
        with _cpu_method_clock():
            rows, cpu, wall = timed(run_cell, p, list(range(n_rep)))
        methods: dict = {}
        for row in rows:
            methods[row["method"]] = methods.get(row["method"], 0.0) + row["elapsed_s"]
        st = per_study.setdefault(study, {"cells": 0, "cpu_s": 0.0, "wall_s": 0.0, "methods_cpu_s": {}})
        st["cells"] += 1
        st["cpu_s"] += cpu
        st["wall_s"] += wall
        for name, t in methods.items():
            st["methods_cpu_s"][name] = st["methods_cpu_s"].get(name, 0.0) + t
        rows_out.append({"study": study, "model": p.model, "sizes": p.sizes, "m": p.m,
                         "mu": p.mu, "K": p.K, "cpu_s": round(cpu, 4),
                         "methods_cpu_s": {k: round(v, 4) for k, v in methods.items()}})
    for st in per_study.values():
        st["data_cpu_s"] = st["cpu_s"] - sum(st["methods_cpu_s"].values())
        for key in ("cpu_s", "wall_s", "data_cpu_s"):
            st[key] = round(st[key], 3)
        st["methods_cpu_s"] = {k: round(v, 3) for k, v in st["methods_cpu_s"].items()}
    total = sum(st["cpu_s"] for st in per_study.values())
    result = {"config": str(config), "replicates": n_rep, "cells": len(cells), "total_cpu_s": round(total, 3),
              "clock": "process_time (CPU seconds of this process)", **versions(),
              "studies": per_study, "cell_times": rows_out}
    _print_suite(result)
    write_json(result, out)
    return result


def _print_suite(result: dict) -> None:
    methods = sorted({k for st in result["studies"].values() for k in st["methods_cpu_s"]})
    head = f"{'study':<12}{'cells':>6}{'CPU-s':>9}{'data':>8}" + "".join(f"{m:>11}" for m in methods)
    print(f"suite: {result['config']}, {result['replicates']} replicates per cell, CPU seconds")
    print(head)
    for name, st in result["studies"].items():
        print(f"{name:<12}{st['cells']:>6}{st['cpu_s']:>9.2f}{st['data_cpu_s']:>8.2f}"
              + "".join(f"{st['methods_cpu_s'].get(m, 0.0):>11.2f}" for m in methods))
    print(f"{'total':<12}{result['cells']:>6}{result['total_cpu_s']:>9.2f}")
