"""Empirical privacy audit: the largest observed change of every release beside the
sensitivity its ledger records.

For every registered private method (simulations: both GLMs, FedNewton in both
privacy modes; real data: binary and softmax regression; the private clipping
rule's histogram; the CNN methods of the extra ``nn`` when torch imports), :func:`run_audit` builds a small client data set, replaces one
record by adversarial candidates (rows of large norm along several directions,
extreme responses for the model; for FedNewton one record of each half), and
recomputes the release *before noise* at the same public state, by calling the
package's own code paths (:class:`fedgdp.simulation.backend.ClientBlock`,
its local steps, ``FedNewton.newton_update`` on each backend,
:meth:`fedgdp.realdata.FoldData.gradient`, :func:`fedgdp.privacy.clip_histogram`).
The largest change over the candidates is ``observed``; ``recorded`` is the
sensitivity the method's plan declares (what its ledger records and its noise is
calibrated on); ``ratio = observed / recorded``.

An audit is a lower bound on the true sensitivity: a ratio above 1 proves that the
recorded sensitivity is too small (a privacy leak), a ratio at most 1 only says that
these candidates found no leak; it cannot prove there is none. The certified
releases' bounds are proved in :func:`fedgdp.privacy.plan_fednewton` and the
module docstring of :mod:`fedgdp.privacy`.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from . import privacy

__all__ = ["AuditRow", "run_audit", "format_table"]

#: Row norms and response values the adversary tries.
SCALES = (0.0, 1.0, 3.0, 30.0, 1e3)
SIM_Y = {"logistic": (0.0, 1.0), "poisson": (0.0, 1.0, 30.0, 1e4)}


@dataclass(frozen=True)
class AuditRow:
    """One release of one method: the largest observed change beside the recorded
    sensitivity (``ratio = observed / recorded``)."""

    method: str
    model: str
    release: str
    certified: bool
    observed: float
    recorded: float
    ratio: float
    mode: str = "paper"


def _mode_label(meth, mode: str) -> str:
    """The privacy mode of a row: ``any`` for a method that is the same in both."""
    return mode if meth.name == "fednewton" else "any"


def _directions(d: int, rng: np.random.Generator, extra=()) -> list[np.ndarray]:
    """Unit vectors: the axes (both signs), a few random ones and ``extra``."""
    out = [s * np.eye(d)[j] for j in range(d) for s in (1.0, -1.0)]
    out += [v / np.linalg.norm(v) for v in rng.standard_normal((4, d))]
    out += [v / np.linalg.norm(v) for v in extra if np.linalg.norm(v) > 0]
    return out


def _candidates(d: int, ys, rng, extra=()):
    """Replacement records ``(x, y)``: intercept 1, then ``c u`` for the scales c and
    directions u of the covariates, with every extreme response."""
    for u in _directions(d - 1, rng, [e[1:] for e in extra]):
        for c in SCALES:
            x = np.concatenate([[1.0], c * u])
            for y in ys:
                yield x, y


# ---------------------------------------------------------------- simulations
def _sim_client(model: str, n: int, rng: np.random.Generator):
    from .simulation.data import Replicate

    d = 5
    X = np.column_stack([np.ones(n), rng.standard_normal((n, d - 1))])
    eta = X @ np.array([0.2, 1.0, -0.5, 0.5, 0.0])
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float) if model == "logistic" \
        else rng.poisson(np.exp(np.clip(eta, -5, 2))).astype(float)
    return Replicate(X, y, np.array([n]))


def _sim_release(meth, kind: str, fd, s: dict, theta: np.ndarray) -> np.ndarray:
    """The pre-noise release ``kind`` of simulation method ``meth`` at public ``theta`` (d,)."""
    at = theta[None, None, :]
    if kind == "gradient":
        return fd.full.gradients(at, fd.bounds(fd.full))[0, 0]
    if kind == "local step":
        eta = s.get("eta1", s.get("eta"))
        return fd.full.local_steps(at, K=1, eta=eta, bounds=fd.bounds(fd.full), sigma=0.0, Z=None)[0, 0]
    if kind == "local step (half 1)":
        h1 = fd.halves[0]
        return h1.local_steps(at, K=1, eta=s["eta"], bounds=fd.bounds(h1), sigma=0.0, Z=None)[0, 0]
    if kind == "newton":
        return meth.newton_update(fd.backend({}), theta[None])[0, 0]
    raise ValueError(f"no audit for release {kind!r}")


def _sim_fitdata(rep, glm, B, mode):
    from .simulation.backend import FitData

    return FitData([rep], glm, np.array([B]), 1.0, TAU1[glm.name], privacy={"mode": mode, "hessian_clip": 4.0},
                   clip={"rule": "fixed", "value": B})


#: tau1 of the audit (the config's auto values for the paper's beta_true, rounded)
TAU1 = {"logistic": 0.081, "poisson": 1.13}


def _sim_states(d: int, rng) -> list[np.ndarray]:
    """Public states: 0, the design's slope, a far point and a random one."""
    return [np.zeros(d), np.array([0.2, 1.0, -0.5, 0.5, 0.0]), np.array([3.0, 0.0, 0.0, 0.0, 0.0]),
            0.5 * rng.standard_normal(d)]


def _audit_sim(name: str, model: str, mode: str, n: int, seed: int) -> list[AuditRow]:
    from .glm import get_model
    from .simulation.backend import get_method
    from .simulation.params import resolve

    glm = get_model(model)
    meth = get_method(name)
    rng = np.random.default_rng(seed)
    rep = _sim_client(model, n, rng)
    B = privacy.clip_bound(glm, rep, {"rule": "quantile", "q": 0.9})
    s = resolve({"model": model, "methods": [name], "K": 10})["method_settings"][name]
    fd = _sim_fitdata(rep, glm, B, mode)
    plan = meth.plan(fd, s)
    rows = []
    newton = name.startswith("fednewton")
    half = rep.sizes[0] // 2
    for spec in plan:
        if spec.count == 0:
            continue
        recorded = float(np.asarray(spec.sensitivity).ravel()[0])
        worst = 0.0
        targets = [0, n - 1] if newton else [0]     # a record of half 1 and one of half 2
        for theta in _sim_states(rep.X.shape[1], rng):
            base = _sim_release(meth, spec.stage, fd, s, theta)
            for j in targets:
                if spec.stage == "local step (half 1)" and j >= half:
                    continue
                for x, y in _candidates(rep.X.shape[1], SIM_Y[model], rng, extra=[base - theta, theta]):
                    X, Y = rep.X.copy(), rep.y.copy()
                    X[j], Y[j] = x, y
                    other = _sim_fitdata(type(rep)(X, Y, rep.sizes), glm, B, mode)
                    worst = max(worst, float(np.linalg.norm(_sim_release(meth, spec.stage, other, s, theta) - base)))
        rows.append(AuditRow(name, model, spec.stage, spec.certified, worst, recorded, worst / recorded,
                             _mode_label(meth, mode)))
    return rows


def _audit_histogram(model: str, n: int, seed: int) -> AuditRow:
    """The private clipping rule's histogram, on the simulation's per-sample norms."""
    from .glm import get_model

    glm = get_model(model)
    rng = np.random.default_rng(seed)
    rep = _sim_client(model, n, rng)
    rule = {"rule": "private_quantile", "q": 0.9, "share": 0.1, "grid": [0.01, 100.0, 64]}
    d = rep.X.shape[1]

    def release(X, y):
        return privacy.clip_histogram(np.linalg.norm(glm.per_sample_gradients(np.zeros(d), X, y), axis=1), rule)

    base = release(rep.X, rep.y)
    worst = 0.0
    for x, y in _candidates(d, SIM_Y[model], rng):
        X, Y = rep.X.copy(), rep.y.copy()
        X[0], Y[0] = x, y
        worst = max(worst, float(np.linalg.norm(release(X, Y) - base)))
    spec = privacy.plan_clip_histogram(n=float(n), share=rule["share"])[0]
    recorded = float(spec.sensitivity)
    return AuditRow("clip_private_quantile", model, spec.stage, spec.certified, worst, recorded,
                    worst / recorded, "any")


# ------------------------------------------------------------------- real data
def _real_client(task: str, n: int, rng):
    from .glm import matrix_model

    model = matrix_model(task, n_classes=4)
    d = 6
    X = np.column_stack([np.ones(n), rng.random((n, d - 1))])       # image-like: pixels in [0, 1]
    labels = rng.integers(0, 2 if task == "binary" else model.k, n)
    return model, X, model.targets(labels)


def _real_release(meth, kind: str, fd, s: dict, Theta: np.ndarray, drift) -> np.ndarray:
    from .realdata import local_descent

    if kind == "gradient":
        return fd.gradient(0, Theta)
    if kind == "local step":
        eta = s.get("eta1", s.get("eta"))
        return local_descent(fd, 0, Theta, K=1, eta=eta, sigma=0.0, rng=None,
                             drift=drift if meth.name == "dp_scaffold" else None)
    if kind == "local step (half 1)":
        return local_descent(fd, 0, Theta, K=1, eta=s["eta"], sigma=0.0, rng=None,
                             rows=slice(0, fd.sizes[0] // 2))
    if kind == "newton":
        return meth.newton_update(fd.backend(None), Theta[None])[0, 0]
    raise ValueError(f"no audit for release {kind!r}")


def _audit_real(name: str, task: str, mode: str, n: int, seed: int) -> list[AuditRow]:
    from .realdata import FoldData, get_method, resolve

    meth = get_method(name)
    rng = np.random.default_rng(seed)
    model, X, Y = _real_client(task, n, rng)
    tau1 = 0.5
    B = float(np.quantile(np.linalg.norm(X, axis=1) * np.linalg.norm(model.residuals(np.zeros((X.shape[1], model.k)),
                                                                                       X, Y), axis=1), 0.9))
    s = resolve({"methods": [name], "task": task})["method_settings"][name]
    priv = {"mode": mode, "hessian_clip": 4.0}

    def fold(Xc, Yc):
        return FoldData(model, [Xc], [Yc], mu=1.0, B=B, tau1=tau1, privacy=priv, clip={"rule": "fixed", "value": B})

    fd = fold(X, Y)
    plan = meth.plan(fd, s)
    drift = 0.1 * rng.standard_normal((X.shape[1], model.k))
    newton = name.startswith("fednewton")
    ys = [model.targets(np.array([c]))[0] for c in ((0, 1) if task == "binary" else range(model.k))]
    rows = []
    d, k = X.shape[1], model.k
    far = np.zeros((d, k))
    far[0, 0] = 3.0                  # favours class 0: large residuals, small curvature
    states = [np.zeros((d, k)), rng.standard_normal((d, k)), far]
    for spec in plan:
        if spec.count == 0:
            continue
        recorded = float(np.asarray(spec.sensitivity).ravel()[0])
        worst = 0.0
        for Theta in states:
            base = _real_release(meth, spec.stage, fd, s, Theta, drift)
            for j in ([0, n - 1] if newton else [0]):
                if spec.stage == "local step (half 1)" and j >= n // 2:
                    continue
                step = (base - Theta).sum(axis=1)
                for x, yj in _candidates(d, ys, rng, extra=[step]):
                    Xc, Yc = X.copy(), Y.copy()
                    Xc[j], Yc[j] = x, yj
                    change = _real_release(meth, spec.stage, fold(Xc, Yc), s, Theta, drift) - base
                    worst = max(worst, float(np.linalg.norm(change)))
        rows.append(AuditRow(name, task, spec.stage, spec.certified, worst, recorded, worst / recorded,
                             _mode_label(meth, mode)))
    return rows


# ------------------------------------------------------------------------- CNNs
def _audit_nn(seed: int) -> list[AuditRow]:
    """The CNN methods' releases (extra ``nn``), on a tiny double-precision ConvNet: the
    package's clipped mean gradient (:func:`fedgdp.nn.clipping.clipped_grad_sums`;
    stage ``gradient``, and ``local step`` is ``lr`` times one) and the head-only Newton
    step of Algorithm 5 (:func:`fedgdp.nn.backend.head_newton_step`; stage ``newton``),
    at two public parameter points, against each method's plan
    (:func:`fedgdp.nn.settings.release_plan`). Candidate images include float-maximum
    and NaN pixels; a non-finite change counts as inf."""
    import torch

    from .nn.backend import head_newton_step
    from .nn.clipping import clipped_grad_sums
    from .nn.models import ConvNet
    from .nn.settings import METHODS, release_plan

    n, classes = 30, 3
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn((n, 1, 4, 4), generator=gen, dtype=torch.float64)
    y = torch.randint(0, classes, (n,), generator=gen)
    p = {"mu": 1.0, "clip": 0.5, "lr": 0.3, "ridge": 0.1, "damping": 1.0, "rounds": 4, "local_epochs": 2,
         "hybrid_local_share": 0.5, "newton_cycles": 2}
    states = []
    for s in (seed, seed + 1):
        torch.manual_seed(s)
        net = ConvNet(in_shape=(1, 4, 4), channels=(2,), hidden=3, classes=classes).double()
        states.append({k: v.detach() for k, v in net.named_parameters()})

    def releases(params, xs, ys):
        """The computed releases by ledger stage (a local step is ``lr`` times a gradient)."""
        ones = torch.ones((1, n), dtype=torch.float64)
        total, _ = clipped_grad_sums(params, xs[None], ys[None], ones, p["clip"], shared=True)
        g = torch.cat([v[0].flatten() for v in total.values()]) / n
        newton, _ = head_newton_step(params, xs, ys, B=p["clip"], lam=p["ridge"], alpha=p["damping"])
        return {"gradient": g, "local step": p["lr"] * g, "newton": newton}

    rng = np.random.default_rng(seed)
    images = [torch.zeros((1, 4, 4), dtype=torch.float64), torch.full((1, 4, 4), float("nan"), dtype=torch.float64),
              torch.full((1, 4, 4), np.finfo(float).max, dtype=torch.float64)]
    for c in (1.0, 10.0, 1e3):
        images += [c * torch.ones((1, 4, 4), dtype=torch.float64),
                   c * torch.from_numpy(rng.standard_normal((1, 4, 4)))]
    worst = {"gradient": 0.0, "local step": 0.0, "newton": 0.0}
    for params in states:
        base = releases(params, x, y)
        for img in images:
            for label in range(classes):
                xs, ys = x.clone(), y.clone()
                xs[0], ys[0] = img, label
                new = releases(params, xs, ys)
                for stage in worst:
                    change = float((new[stage] - base[stage]).norm())
                    worst[stage] = max(worst[stage], change if math.isfinite(change) else math.inf)
    rows = []
    for method in METHODS:
        for spec in release_plan(method, p, np.array([float(n)])):
            recorded = float(spec.sensitivity[0, 0])
            rows.append(AuditRow(f"nn:{method}", "cnn", spec.stage, spec.certified, worst[spec.stage], recorded,
                                 worst[spec.stage] / recorded, "any"))
    return rows


# ------------------------------------------------------------------------- all
def run_audit(*, quick: bool = False, seed: int = 0) -> list[AuditRow]:
    """Audit every release of every registered private method (see the module docstring).

    ``quick``: smaller clients (the test suite). Rows in a fixed order: simulations,
    the clipping histogram, real data, and the CNN methods when torch imports.
    """
    n_sim, n_real = (200, 60) if quick else (400, 120)
    with np.errstate(all="ignore"):     # extreme candidates overflow exp (Poisson); such NaN changes are skipped
        return _run_all(n_sim, n_real, seed)


def _run_all(n_sim: int, n_real: int, seed: int) -> list[AuditRow]:
    from .realdata import REGISTRY as REAL
    from .simulation.backend import REGISTRY

    rows: list[AuditRow] = []
    for model in ("logistic", "poisson"):
        for name in REGISTRY:
            modes = ("paper", "certified") if name == "fednewton" else ("paper",)
            for mode in modes:
                rows += _audit_sim(name, model, mode, n_sim, seed)
        rows.append(_audit_histogram(model, n_sim, seed))
    for task in ("binary", "multiclass"):
        for name, meth in REAL.items():
            if not meth.private:
                continue
            modes = ("paper", "certified") if name == "fednewton" else ("paper",)
            for mode in modes:
                rows += _audit_real(name, task, mode, n_real, seed)
    try:
        import torch  # noqa: F401  (the nn extra)
    except ImportError:
        return rows
    return rows + _audit_nn(seed)


def format_table(rows: list[AuditRow]) -> str:
    """A plain text table of audit rows."""
    head = ("method", "model", "mode", "release", "certified", "observed", "recorded", "ratio")
    body = [(r.method, r.model, r.mode, r.release, "yes" if r.certified else "NO",
             f"{r.observed:.4g}", f"{r.recorded:.4g}", f"{r.ratio:.3f}") for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in [head, *body]]
    return "\n".join(lines)


def as_dicts(rows: list[AuditRow]) -> list[dict]:
    """JSON-ready rows (inf and NaN as strings)."""
    out = []
    for r in rows:
        d = asdict(r)
        for key in ("observed", "recorded", "ratio"):
            if not math.isfinite(d[key]):
                d[key] = str(d[key])
        out.append(d)
    return out
