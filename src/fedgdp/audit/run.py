"""The whole audit (`fedgdp.audit`): its default targets, the targets of a run's plan, the
run over every target, and its table and files."""
from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np

from ..core.solvers import NEWTON_DEFAULTS
from .glm import (
    INFERENCE_FAMILIES,
    TAU1,
    _audit_count_scale,
    _audit_fedirls_counts,
    _audit_histogram,
    audit_inference,
    audit_real,
    audit_sim,
)
from .nn import audit_nn, nn_targets
from .search import _BUDGET, RANDOM_DIRECTIONS, AuditRow, AuditTarget

__all__ = ["INFERENCE_METHOD", "default_targets", "audit_targets", "run_audit", "format_table", "write_audit",
           "as_dicts"]


#: The method name of the inference releases' rows (`fedgdp.realdata.moments`)
INFERENCE_METHOD = "federated_glm"


# ------------------------------------------------------------------------- all
def default_targets() -> list[AuditTarget]:
    """Every registered private method at the default settings (FedNewton in both modes and
    with every solver) and the inference releases of a `FederatedGLM` fit.
    """
    from ..realdata import REGISTRY as REAL
    from ..simulation.backend import REGISTRY

    out = []
    for model in ("logistic", "poisson"):
        for name, meth in REGISTRY.items():
            for mode in meth.privacy_modes():
                out.append(AuditTarget("simulation", name, model, mode, TAU1[model]))
    for task in ("binary", "multiclass"):
        for name, meth in REAL.items():
            if not meth.tags.private or (meth.tags.single_output and task != "binary"):
                continue
            for mode in meth.privacy_modes():
                for solver in (("cg", "ridge", "floor") if meth.tags.solves_newton else ("cg",)):
                    out.append(AuditTarget("realdata", name, task, mode, 0.5,
                                           newton=dict(NEWTON_DEFAULTS, solver=solver)))
    out += [AuditTarget("inference", INFERENCE_METHOD, family, "certified") for family in INFERENCE_FAMILIES]
    return out


def audit_targets(plan) -> list[AuditTarget]:
    """The distinct releases of one run's settings: each simulation study's models, methods,
    privacy mode, tau1, Hessian clip and clipping rule, and the real-data section's.

    Parameters
    ----------
    plan : fedgdp.plan.Plan
        Any object with ``config``, ``cell_overrides``, ``study_cells``, ``realdata_settings``;
        sensitivity studies (``sens_*``) and non-private cells and releases are skipped.
    """
    from ..realdata import REGISTRY as REAL
    from ..realdata import resolve as resolve_real
    from ..simulation.params import resolve

    seen, out = set(), []

    def add(t: AuditTarget):
        key = (t.kind, t.method, t.model, t.mode, t.tau1, t.hessian_clip, repr(t.clip), repr(t.newton))
        if key not in seen:
            seen.add(key)
            out.append(t)

    for study in plan.config["studies"]:
        if study.startswith("sens_"):
            continue
        for model in plan.config["studies"][study]["models"]:
            p = resolve(plan.cell_overrides(model, study, plan.study_cells(study)[0]))
            if not math.isfinite(p.mu) or p.release != "private":
                continue
            for name in p.methods:
                add(AuditTarget("simulation", name, model, p.privacy["mode"], float(p.tau1),
                                float(p.privacy["hessian_clip"]), p.clip))
    if plan.config.get("realdata"):
        r = resolve_real(plan.realdata_settings())
        for task in plan.config["realdata"].get("tasks", [r.task]):
            for name in r.methods:
                if REAL[name].tags.private:
                    add(AuditTarget("realdata", name, task, r.privacy["mode"], float(r.tau1),
                                    float(r.privacy["hessian_clip"]), r.clip, dict(r.newton)))
    return out




def run_audit(*, quick: bool = False, seed: int = 0, targets: list[AuditTarget] | None = None,
              histogram: bool = True, nn: bool = True) -> list[AuditRow]:
    """Search every release of every target; rows in the targets' order, then the clipping
    histogram, then the CNN methods.

    Parameters
    ----------
    quick : bool, default=False
        Main clients of 200 (simulation) and 100 (real data) instead of 400 and 120, a
        shorter local search (the test suite).
    seed : int, default=0
        Seed of every search.
    targets : list of AuditTarget or None, default=None
        ``kind`` ``simulation``, ``realdata``, ``inference`` or ``nn``; None: `default_targets`
        and `nn_targets`.
    histogram : bool, default=True
        Also audit the private clipping rule's histogram (per simulation model of the targets).
    nn : bool, default=True
        Audit the CNN targets when torch imports.
    """
    n_sim, n_real, iters = (200, 100, 10) if quick else (400, 120, 30)
    targets = default_targets() + nn_targets() if targets is None else targets
    cnn = [t for t in targets if t.kind == "nn"] if nn else []
    rows: list[AuditRow] = []
    _BUDGET["random"] = RANDOM_DIRECTIONS["quick" if quick else "full"]
    with np.errstate(all="ignore"):     # extreme candidates overflow; a non-finite change is a violation (inf)
        for t in targets:
            if t.kind == "simulation":
                rows += audit_sim(t, n_sim, seed, local_iters=iters)
            elif t.kind == "realdata":
                rows += audit_real(t, n_real, seed, local_iters=iters)
            elif t.kind == "inference":
                rows += audit_inference(t, n_real, seed, local_iters=iters)
        if any(t.kind == "realdata" and t.method == "fedirls" for t in targets):   # its count scale (Poisson)
            rows.append(_audit_count_scale(n_real, seed))
            rows += _audit_fedirls_counts(n_real, seed)          # its gradients and curvatures on counts
        if histogram:
            for model in sorted({t.model for t in targets if t.kind == "simulation"} or {"logistic", "poisson"}):
                rows.append(_audit_histogram(model, n_sim, seed))
    if not cnn:
        return rows
    try:
        import torch  # noqa: F401  (the nn extra)
    except ImportError:
        return rows
    return rows + audit_nn(cnn, seed)


def format_table(rows: list[AuditRow]) -> str:
    """A plain text table of audit rows: a header, then one line per row.

    Parameters
    ----------
    rows : list of AuditRow
        The audit's rows.
    """
    head = ("method", "model", "mode", "release", "certified", "observed", "recorded", "ratio", "finite", "budget",
            "setting")
    body = [(r.method, r.model, r.mode, r.release, "yes" if r.certified else "NO",
             f"{r.observed:.4g}", f"{r.recorded:.4g}", f"{r.ratio:.3f}", f"{r.ratio_finite:.3f}", str(r.budget),
             r.setting) for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [head, *body]]
    return "\n".join(lines)


def write_audit(rows: list[AuditRow], prefix: str) -> None:
    """The rows as ``prefix.csv`` and ``prefix.md`` (atomically), with a note that the audit is
    a lower bound and that a non-finite change counts as inf.

    Parameters
    ----------
    rows : list of AuditRow
        The audit's rows.
    prefix : str
        Path without extension.
    """
    import csv
    import io

    from ..common.io import write_text

    dicts = as_dicts(rows)
    head = list(AuditRow.__dataclass_fields__)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=head, lineterminator="\n")
    w.writeheader()
    w.writerows(dicts)
    write_text(f"{prefix}.csv", buf.getvalue())
    cols = ("method", "model", "mode", "release", "certified", "observed", "recorded", "ratio", "ratio_finite",
            "budget", "setting", "pair")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [r.method, r.model, r.mode, r.release, "yes" if r.certified else "NO", f"{r.observed:.4g}",
                 f"{r.recorded:.4g}", f"{r.ratio:.3f}", f"{r.ratio_finite:.3f}", str(r.budget), r.setting, r.pair]
        lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
    note = ("Audit: the largest change found of each release (before noise) over the searched neighbouring pairs, "
            "beside its recorded sensitivity; a lower bound on the true sensitivity (ratio > 1 + 1e-12 proves a "
            "leak, the tolerance being the releases' float64 rounding; ratio <= 1 + 1e-12 finds none). A change "
            "that is not finite counts as inf. ratio_finite: the largest ratio "
            "among pairs with finite releases. docs/methods.md §2.")
    write_text(f"{prefix}.md", note + "\n\n" + "\n".join(lines) + "\n")


def as_dicts(rows: list[AuditRow]) -> list[dict]:
    """JSON-ready rows, one dict per `AuditRow`; non-finite ratios and changes as ``'inf'`` or ``'nan'``.

    Parameters
    ----------
    rows : list of AuditRow
        The audit's rows.
    """
    out = []
    for r in rows:
        d = asdict(r)
        for key in ("observed", "recorded", "ratio", "ratio_finite"):
            if not math.isfinite(d[key]):
                d[key] = str(d[key])
        out.append(d)
    return out
