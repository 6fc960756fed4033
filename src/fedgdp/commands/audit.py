"""Empirical privacy audit: a search for the worst neighbouring pair of every release,
its change beside the sensitivity its ledger records.

For every private method (simulations: both GLMs, FedNewton in both privacy modes;
real data: binary and softmax regression, every Newton solver; the private clipping
rule's histogram; the CNN methods of the extra ``nn`` when torch imports),
`run_audit` searches for a pair of neighbouring client data sets (one record
replaced) that moves the release *before noise* the most, at a public state, by
calling the package's own code paths (`fedgdp.simulation.backend.ClientBlock`,
its local steps, ``FedNewton.newton_update`` on each backend,
`fedgdp.realdata.FoldData.gradient`, `fedgdp.core.privacy.clip_histogram`).

The search (docs/methods.md §2, "The audit"):

- *base data sets*: random designs (Gaussian or pixel-like), and adversarial ones: every
  gradient aligned and clipped (``aligned``), and for FedNewton a half 1 of zero
  curvature with a half 2 whose clipped gradients all point one way (``hessian``), the
  data set on which one record of half 1 moves the ridge inverse the most;
- *client sizes*: the main size and the tiny, odd ones n = 2 and 3;
- *replaced records*: rows of norm 0 to the float maximum along the axes, random
  directions and the release's own direction, every response (label flips), the
  Hessian-shaping records of half 1 (``c u`` along the direction of the gradient);
  for FedNewton one record of each half;
- *random restarts and local search*: random records, then hill climbing on the best
  record found (multiplicative and additive perturbations).

``observed`` is the largest change found (a change that is not finite counts as inf:
a violation), ``recorded`` the sensitivity the method's plan declares (what its ledger
records and its noise is calibrated on), ``ratio = observed / recorded``; ``budget``
is the number of neighbouring pairs evaluated and ``pair`` describes the best one.

An audit is a lower bound on the true sensitivity: a ratio above ``1 + RATIO_TOL``
proves that the recorded sensitivity is too small (a privacy leak), a ratio at most
that only says the search found no leak (the tolerance is the float64 rounding of the
release itself, docs/methods.md §2, "The audit": every clipped contribution is within
its bound exactly, the clip margin); it cannot prove there is none. The certified releases'
bounds are proved in docs/methods.md §2. ``config`` audits the releases of one run's
settings (methods, privacy mode, tau1, H_c, clipping rule, Newton solver) instead of
the defaults (`audit_targets`).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ..core import privacy

__all__ = ["RATIO_TOL", "AuditRow", "AuditTarget",
           "run_audit", "audit_targets", "default_targets", "change", "read_run_config",
           "config_targets", "nn_targets", "nn_settings_of", "audit_nn", "NN_KEYS", "write_audit", "format_table",
           "as_dicts", "worst_pair"]

BIG = float(np.finfo(float).max)
#: Row norms the adversary tries, up to the float maximum.
SCALES = (0.0, 1.0, 3.0, 30.0, 1e3, 1e100, 1e300, BIG)
SIM_Y = {"logistic": (0.0, 1.0), "poisson": (0.0, 1.0, 30.0, 1e4)}
#: The audit's criterion is ``ratio <= 1 + RATIO_TOL``: a release is a sum over n records in float64 and
#: the audit subtracts two, so a few units of 2^-53 of the release (up to n/2 sensitivities) show.
RATIO_TOL = 1e-12
#: The public clipping bound of the audit's adversarial bases (any value: the releases scale with it).
AUDIT_B = 1.0


@dataclass(frozen=True)
class AuditRow:
    """One release of one method: the largest change found beside the recorded
    sensitivity (``ratio = observed / recorded``; inf when a release was not finite),
    the number of neighbouring pairs evaluated (``budget``), the best pair found
    (``pair``), the settings audited and the largest ratio among pairs whose releases
    are finite (``ratio_finite``)."""

    method: str
    model: str
    release: str
    certified: bool
    observed: float
    recorded: float
    ratio: float
    mode: str = "paper"
    budget: int = 0
    pair: str = ""
    setting: str = ""
    ratio_finite: float = math.nan


@dataclass(frozen=True)
class AuditTarget:
    """The settings of one audited method: ``kind`` ``simulation``, ``realdata`` or
    ``nn``, ``model`` (GLM or task; ``cnn``), privacy mode, tau1, the Hessian clip
    factor, the clipping rule (the audit holds B public: a fixed value, else
    `AUDIT_B`), on real data the Newton solver settings, and for a CNN method its
    run settings (``nn``, the keys `NN_KEYS`)."""

    kind: str
    method: str
    model: str
    mode: str = "paper"
    tau1: float | None = None
    hessian_clip: float = 4.0
    clip: dict = field(default_factory=lambda: {"rule": "quantile", "q": 0.9})
    newton: dict | None = None
    nn: dict | None = None

    @property
    def B(self) -> float | None:
        """The public bound of a fixed clipping rule, or None (the audit chooses one)."""
        return float(self.clip["value"]) if self.clip.get("rule") == "fixed" else None

    def label(self) -> str:
        """The settings audited, as text (tau1, H_c, clipping rule and, on real data, the
        solver; a CNN target's settings of `NN_KEYS`)."""
        if self.kind == "nn":
            return ", ".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}"
                             for k, v in (self.nn or {}).items())
        parts = [f"tau1={self.tau1:g}", f"H_c={self.hessian_clip:g} tau1", f"clip={self.clip.get('rule')}"]
        if self.newton:
            parts.append(f"solver={self.newton['solver']}")
            if self.newton["solver"] == "cg":
                parts.append(f"cg_tol={self.newton['cg_tol']:g}")
        return ", ".join(parts)


def _mode_label(meth, mode: str) -> str:
    """The privacy mode of a row: ``any`` for a method that is the same in both."""
    return mode if len(meth.privacy_modes()) > 1 else "any"


def change(a, b) -> float:
    """``||a - b||``, or inf when either release is not finite (a violation: a release
    that is not finite is never an output).

    Parameters
    ----------
    a, b : array-like
        Two releases of the same shape.

    Returns
    -------
    float
        The Euclidean (Frobenius) norm of ``a - b``; inf when either holds a value that is
        not finite, or when the norm overflows.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return math.inf
    with np.errstate(over="ignore"):
        out = float(np.linalg.norm(a - b))
    return out if math.isfinite(out) else math.inf


class _Search:
    """The best neighbouring pair found so far, and the number of pairs evaluated."""

    def __init__(self):
        self.best, self.pair, self.evals, self.record = 0.0, "", 0, None
        self.finite_best, self.finite_record = -1.0, None     # the best pair whose releases are finite

    def see(self, value: float, pair, record=None) -> bool:
        self.evals += 1
        if math.isfinite(value) and value > self.finite_best:
            self.finite_best, self.finite_record = value, record
        if value > self.best or (self.evals == 1 and value >= self.best):
            self.best, self.pair, self.record = value, pair, record
            return True
        return False


def _fmt_x(x) -> str:
    x = np.asarray(x, float).ravel()
    nz = np.flatnonzero(x)
    if nz.size <= 2:
        return "[" + ", ".join(f"x{j}={x[j]:.3g}" for j in nz) + "]" if nz.size else "[0]"
    return f"[norm {privacy.row_norms(x[None])[0]:.3g} along {np.round(x / max(np.abs(x).max(), 1e-300), 2)}]"


#: Random directions per candidate set (the quick audit of the test suite uses fewer).
RANDOM_DIRECTIONS = {"full": 4, "quick": 1}
_BUDGET = {"random": RANDOM_DIRECTIONS["full"]}


def _directions(d: int, rng: np.random.Generator, extra=()) -> list[np.ndarray]:
    """Unit vectors: the axes (both signs), a few random ones and ``extra``."""
    out = [s * np.eye(d)[j] for j in range(d) for s in (1.0, -1.0)]
    out += [v / np.linalg.norm(v) for v in rng.standard_normal((_BUDGET["random"], d))]
    out += [v / np.linalg.norm(v) for v in extra if np.all(np.isfinite(v)) and np.linalg.norm(v) > 0]
    return out


def _candidates(d: int, ys, rng, extra=(), intercept=True):
    """Replacement records ``(x, y)``: intercept 1 (when ``intercept``), then ``c u`` for
    the scales c (up to the float maximum) and directions u of the covariates, with
    every response (label flips)."""
    k = 1 if intercept else 0
    for u in _directions(d - k, rng, [e[k:] for e in extra]):
        for c in SCALES:
            x = np.concatenate([[1.0] * k, c * u])
            for y in ys:
                yield x, y


def _local_search(evaluate, search: _Search, rng, iters: int) -> None:
    """Hill climbing on the best record found: ``evaluate(x, y)`` returns the change and
    a pair label; multiplicative and additive perturbations of x, kept when better."""
    if search.record is None or iters <= 0:
        return
    for t in range(iters):
        x, y = search.record
        if t % 2 == 0:
            x = x * np.exp(0.3 * rng.standard_normal(x.shape))
        else:
            x = x + 0.1 * max(float(privacy.row_norms(np.atleast_2d(x))[0]), 1.0) * rng.standard_normal(x.shape)
        if not np.all(np.isfinite(x)):
            continue
        value, pair = evaluate(x, y)
        search.see(value, pair + " (local search)", (x, y))


# ---------------------------------------------------------------- simulations
def _sim_client(model: str, n: int, rng: np.random.Generator):
    from ..simulation.data import Replicate

    d = 5
    X = np.column_stack([np.ones(n), rng.standard_normal((n, d - 1))])
    eta = X @ np.array([0.2, 1.0, -0.5, 0.5, 0.0])
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float) if model == "logistic" \
        else rng.poisson(np.exp(np.clip(eta, -5, 2))).astype(float)
    return Replicate(X, y, np.array([n]))


def _adversarial_base(kind: str, n: int, d: int, y_push: float):
    """An adversarial base data set (X (n, d), y (n,)): ``aligned`` every row
    ``10 e_1`` with response ``y_push`` (every clipped gradient the same); ``hessian``
    (FedNewton) half 1 all zero rows (zero curvature), half 2 the aligned rows, so that
    one Hessian-shaping record of half 1 moves the ridge inverse along the gradient."""
    X = np.zeros((n, d))
    X[:, 1] = 10.0
    if kind == "hessian":
        X[: n // 2] = 0.0
    return X, np.full(n, float(y_push))


def _sim_release(meth, kind: str, fd, s: dict, theta: np.ndarray) -> np.ndarray:
    """The pre-noise release ``kind`` of simulation method ``meth`` at public ``theta`` (d,)."""
    at = theta[None, None, :]
    if kind == "gradient":
        return fd.full.gradients(at, fd.bounds(fd.full))[0, 0]
    if kind == "local step":
        return fd.full.local_steps(at, K=1, eta=meth.local_step_size(s), bounds=fd.bounds(fd.full), sigma=0.0,
                                   Z=None)[0, 0]
    if kind == "local step (half 1)":
        h1 = fd.halves[0]
        return h1.local_steps(at, K=1, eta=s["eta"], bounds=fd.bounds(h1), sigma=0.0, Z=None)[0, 0]
    if kind == "newton":
        return meth.newton_update(fd.backend({}), theta[None])[0, 0]
    raise ValueError(f"no audit for release {kind!r}")


#: tau1 of the default audit (the config's auto values for the paper's beta_true, rounded)
TAU1 = {"logistic": 0.081, "poisson": 1.13}


def _sim_fitdata(rep, glm, B, target: AuditTarget):
    from ..simulation.backend import FitData

    return FitData([rep], glm, np.array([B]), 1.0, target.tau1,  # type: ignore[arg-type]  # simulation targets set tau1
                   privacy={"mode": target.mode, "hessian_clip": target.hessian_clip},
                   clip={"rule": "fixed", "value": B})


def _sim_states(d: int, rng) -> list[np.ndarray]:
    """Public states: 0, the design's slope, a far point and a random one."""
    return [np.zeros(d), np.array([0.2, 1.0, -0.5, 0.5, 0.0]), np.array([3.0, 0.0, 0.0, 0.0, 0.0]),
            0.5 * rng.standard_normal(d)]


def _sim_bases(target: AuditTarget, stage: str, n_main: int, rng):
    """The base data sets of one release: (label, Replicate, B, public states)."""
    from ..core.glm import get_model
    from ..simulation.data import Replicate

    glm = get_model(target.model)
    d = 5
    sizes = [n_main, 2, 3]
    out = []
    for n in sizes:
        rep = _sim_client(target.model, n, rng)
        B = target.B or privacy.clip_bound(glm, rep, {"rule": "quantile", "q": 0.9}) or AUDIT_B   # 0: a tiny client
        states = _sim_states(d, rng) if n == n_main else [np.zeros(d)]
        out.append((f"random n={n}", rep, B, states))
    kinds = ["aligned"] + (["hessian"] if stage == "newton" else [])
    for kind in kinds:
        for n in sizes:
            X, y = _adversarial_base(kind, n, d, 0.0)
            out.append((f"{kind} n={n}", Replicate(X, y, np.array([n])), target.B or AUDIT_B, [np.zeros(d)]))
    return out


def audit_sim(target: AuditTarget, n: int, seed: int, *, local_iters: int = 30) -> list[AuditRow]:
    """Search every release of one simulation method (see the module docstring).

    Parameters
    ----------
    target : AuditTarget
        A simulation target (``kind="simulation"``; ``model`` a GLM name).
    n : int
        Size of the main client (the tiny clients n = 2 and 3 are always searched too).
    seed : int
        Seed of the search's generator.
    local_iters : int, default=30
        Hill-climbing steps from the best pair found.

    Returns
    -------
    list of AuditRow
        One row per release of the method's plan (stages with a count of zero skipped).
    """
    from ..core.glm import get_model
    from ..simulation.backend import get_method
    from ..simulation.params import resolve

    glm = get_model(target.model)
    meth = get_method(target.method)
    rng = np.random.default_rng(seed)
    s = resolve({"model": target.model, "methods": [target.method], "K": 10})["method_settings"][target.method]
    rows = []
    probe = _sim_fitdata(_sim_client(target.model, n, rng), glm, target.B or AUDIT_B, target)
    for spec in meth.plan(probe, s):
        if spec.count == 0:
            continue
        search = _Search()
        for label, rep, B, states in _sim_bases(target, spec.stage, n, rng):
            size = int(rep.sizes[0])
            fd = _sim_fitdata(rep, glm, B, target)
            plan = {sp.stage: sp for sp in meth.plan(fd, s)}
            recorded = float(np.asarray(plan[spec.stage].sensitivity).ravel()[0])
            half = size // 2
            js = [0, size - 1] if meth.halves else [0]   # a record of half 1 and one of half 2
            for si, theta in enumerate(states):
                base = _sim_release(meth, spec.stage, fd, s, theta)

                def evaluate(x, y, j, theta=theta, base=base, rep=rep, B=B, recorded=recorded, label=label, si=si):
                    X, Y = rep.X.copy(), rep.y.copy()
                    X[j], Y[j] = x, y
                    other = _sim_fitdata(type(rep)(X, Y, rep.sizes), glm, B, target)
                    value = change(_sim_release(meth, spec.stage, other, s, theta), base) / recorded  # noqa: B023
                    return value, (f"base {label}, state {si}, record {j} (half {1 if j < half else 2}) -> "  # noqa: B023
                                   f"x={_fmt_x(x)}, y={y:g}")

                for j in js:
                    if spec.stage == "local step (half 1)" and j >= half:
                        continue
                    extra = [base - theta, theta] if np.all(np.isfinite(base)) else [theta]
                    cands = list(_candidates(5, SIM_Y[target.model], rng, extra=extra))
                    if label.startswith("hessian"):       # Hessian-shaping records along the gradient
                        cands += [(c * np.eye(5)[1], y) for c in SCALES for y in SIM_Y[target.model]]
                    for x, y in cands:
                        search.see(*evaluate(x, y, j), (x, y, j, evaluate, recorded, (rep.X, rep.y)))  # type: ignore[call-arg]  # evaluate returns (value, pair)
        rows.append(_finish_row(search, rng, local_iters, target, meth, spec))
    return rows


def _finish_row(search: _Search, rng, local_iters: int, target: AuditTarget, meth, spec) -> AuditRow:
    """Local search from the best pair, then the row (observed and recorded of that pair's base)."""
    finite = search.finite_record
    x, y, j, ev, recorded, base = search.record
    if math.isfinite(search.best):
        search.record = (x, y)
        _local_search(lambda x, y: ev(x, y, j), search, rng, local_iters)
        x, y = search.record
        finite = (x, y, j, ev, recorded, base)
    if finite is not None:                    # the pair of the empirical test: finite releases
        x, y, j, _, _, base = finite
        X, Y = base[0].copy(), base[1].copy()
        X[j], Y[j] = x, y
        _PAIRS[(repr(target), spec.stage)] = (base, (X, Y))
    return AuditRow(target.method, target.model, spec.stage, spec.certified, search.best * recorded, recorded,
                    search.best, _mode_label(meth, target.mode), search.evals, search.pair, target.label(),
                    max(search.finite_best, 0.0))


#: The best pair of every release audited in this process: ``(target, stage) -> ((X, Y), (X', Y'))``
#: (`worst_pair`).
_PAIRS: dict = {}


def worst_pair(target: AuditTarget, stage: str):
    """The best neighbouring pair with finite releases the last audit of ``target``
    found for release ``stage``: ``((X, Y), (X', Y'))``, one client's data each (the
    empirical test's pair).

    Parameters
    ----------
    target : AuditTarget
        An audited target (of this process).
    stage : str
        A release of its plan (``gradient``, ``local step``, ``newton``, ...).

    Returns
    -------
    tuple
        ``((X, Y), (X', Y'))``: ``X`` of shape (n, d); ``Y`` of shape (n,) (simulations) or
        (n, k) (real data, the model's targets); the two differ in one row. KeyError when
        that release was not audited.
    """
    return _PAIRS[(repr(target), stage)]


def _audit_histogram(model: str, n: int, seed: int) -> AuditRow:
    """The private clipping rule's histogram, on the simulation's per-sample norms."""
    from ..core.glm import get_model

    glm = get_model(model)
    rng = np.random.default_rng(seed)
    rule = {"rule": "private_quantile", "q": 0.9, "share": 0.1, "grid": [0.01, 100.0, 64]}
    d = 5
    search = _Search()

    def release(X, y):
        with np.errstate(all="ignore"):
            return privacy.clip_histogram(privacy.row_norms(glm.per_sample_gradients(np.zeros(d), X, y)), rule)

    for size in (n, 2, 3):
        rep = _sim_client(model, size, rng)
        base = release(rep.X, rep.y)
        for x, y in _candidates(d, SIM_Y[model], rng):
            X, Y = rep.X.copy(), rep.y.copy()
            X[0], Y[0] = x, y
            recorded = float(privacy.plan_clip_histogram(n=float(size), share=rule["share"])[0].sensitivity)
            search.see(change(release(X, Y), base) / recorded, f"random n={size}, record 0 -> x={_fmt_x(x)}, y={y:g}")
    spec = privacy.plan_clip_histogram(n=float(n), share=rule["share"])[0]
    recorded = float(spec.sensitivity)
    return AuditRow("clip_private_quantile", model, spec.stage, spec.certified, search.best * recorded, recorded,
                    search.best, "any", search.evals, search.pair, "grid [0.01, 100, 64]", max(search.finite_best, 0.0))


# ------------------------------------------------------------------- real data
def _real_client(task: str, n: int, rng):
    from ..core.glm import matrix_model

    model = matrix_model(task, n_classes=4)
    d = 6
    X = np.column_stack([np.ones(n), rng.random((n, d - 1))])       # image-like: pixels in [0, 1]
    labels = rng.integers(0, 2 if task == "binary" else model.k, n)
    return model, X, model.targets(labels)


def _real_release(meth, kind: str, fd, s: dict, Theta: np.ndarray, drift) -> np.ndarray:
    from ..realdata import local_descent

    if kind == "gradient":
        return fd.gradient(0, Theta)
    if kind == "local step":
        return local_descent(fd, 0, Theta, K=1, eta=meth.local_step_size(s), sigma=0.0, rng=None,
                             drift=drift if meth.drifts else None)
    if kind == "local step (half 1)":
        return local_descent(fd, 0, Theta, K=1, eta=s["eta"], sigma=0.0, rng=None,
                             rows=slice(0, fd.sizes[0] // 2))
    if kind == "newton":
        try:
            return meth.newton_update(fd.backend(None), Theta[None])[0, 0]
        except ValueError:          # a release refused from its public inputs (docs/methods.md §2) releases nothing
            return np.zeros_like(Theta)
    raise ValueError(f"no audit for release {kind!r}")


def audit_real(target: AuditTarget, n: int, seed: int, *, local_iters: int = 30) -> list[AuditRow]:
    """Search every release of one real-data method (see the module docstring).

    Parameters
    ----------
    target : AuditTarget
        A real-data target (``kind="realdata"``; ``model`` the task, ``binary`` or
        ``multiclass``).
    n : int
        Size of the main client (the tiny clients n = 2 and 3 are always searched too).
    seed : int
        Seed of the search's generator.
    local_iters : int, default=30
        Hill-climbing steps from the best pair found.

    Returns
    -------
    list of AuditRow
        One row per release of the method's plan (stages with a count of zero skipped).
    """
    from ..realdata import FoldData, get_method, resolve

    meth = get_method(target.method)
    rng = np.random.default_rng(seed)
    task = target.model
    s = resolve({"methods": [target.method], "task": task})["method_settings"][target.method]
    priv = {"mode": target.mode, "hessian_clip": target.hessian_clip}
    newton = dict(target.newton or {"solver": "cg", "cg_tol": 1e-8, "cg_maxiter": 500})
    model, X0, Y0 = _real_client(task, n, rng)
    d, k = X0.shape[1], model.k

    def fold(Xc, Yc, B):
        return FoldData(model, [Xc], [Yc], mu=1.0, B=B, tau1=target.tau1, privacy=priv, newton=newton,
                        clip={"rule": "fixed", "value": B})

    def quantile_B(X, Y):
        norms = privacy.row_norms(X) * privacy.row_norms(model.residuals(np.zeros((d, k)), X, Y))
        return float(np.quantile(norms, 0.9))

    drift = 0.1 * rng.standard_normal((d, k))
    ys = [model.targets(np.array([c]))[0] for c in ((0, 1) if task == "binary" else range(model.k))]
    far = np.zeros((d, k))
    far[0, 0] = 3.0                  # favours class 0: large residuals, small curvature
    bases = []
    for size in (n, 2, 3):
        _, X, Y = (model, X0, Y0) if size == n else _real_client(task, size, rng)
        states = [np.zeros((d, k)), rng.standard_normal((d, k)), far] if size == n else [np.zeros((d, k))]
        bases.append((f"random n={size}", X, Y, target.B or quantile_B(X, Y) or AUDIT_B, states))
    rows = []
    for spec in meth.plan(fold(X0, Y0, target.B or AUDIT_B), s):
        if spec.count == 0:
            continue
        extra_bases = []
        for kind in ["aligned"] + (["hessian"] if spec.stage == "newton" else []):
            for size in (n, 2, 3):
                X, _ = _adversarial_base(kind, size, d, 0.0)
                extra_bases.append((f"{kind} n={size}", X, model.targets(np.zeros(size, dtype=np.int64)),
                                    target.B or AUDIT_B, [np.zeros((d, k))]))
        search = _Search()
        for label, X, Y, B, states in bases + extra_bases:
            size = X.shape[0]
            fd = fold(X, Y, B)
            recorded = float(np.asarray({sp.stage: sp for sp in meth.plan(fd, s)}[spec.stage].sensitivity).ravel()[0])
            for si, Theta in enumerate(states):
                base = _real_release(meth, spec.stage, fd, s, Theta, drift)

                def evaluate(x, yj, j, Theta=Theta, base=base, X=X, Y=Y, B=B, recorded=recorded, label=label, si=si,
                             size=size):
                    Xc, Yc = X.copy(), Y.copy()
                    Xc[j], Yc[j] = x, yj
                    with np.errstate(all="ignore"):
                        moved = _real_release(meth, spec.stage, fold(Xc, Yc, B), s, Theta, drift)  # noqa: B023
                    return change(moved, base) / recorded, (
                        f"base {label}, state {si}, record {j} (half {1 if j < size // 2 else 2}) -> x={_fmt_x(x)}, "
                        f"y={np.argmax(yj) if k > 1 else float(yj[0]):g}")

                step = (base - Theta).sum(axis=1) if np.all(np.isfinite(base)) else np.zeros(d)
                for j in ([0, size - 1] if meth.halves else [0]):
                    if spec.stage == "local step (half 1)" and j >= size // 2:
                        continue
                    cands = list(_candidates(d, ys, rng, extra=[step]))
                    if label.startswith("hessian"):
                        cands += [(c * np.eye(d)[1], yj) for c in SCALES for yj in ys]
                    for x, yj in cands:
                        search.see(*evaluate(x, yj, j), (x, yj, j, evaluate, recorded, (X, Y)))  # type: ignore[call-arg]  # evaluate returns (value, pair)
        rows.append(_finish_row(search, rng, local_iters, target, meth, spec))
    return rows
# ------------------------------------------------------------------------- CNNs
#: The CNN settings an audit reads (those its releases and plans depend on).
NN_KEYS = ("mu", "clip", "lr", "server_lr", "ridge", "damping", "rounds", "local_epochs", "hybrid_local_share",
           "newton_cycles", "reduction", "local_batch", "accounting", "clip_unit")


def _nn_states(seed: int, torch) -> list:
    """Public parameter points ``(label, params, classes)``: two random tiny ConvNets (3
    classes) and one whose zero head splits every image 50/50 between 2 classes (there a
    label flip reverses an image's head gradient: the Newton release's worst case)."""
    from ..nn.models import ConvNet

    out = []
    for label, s, classes in (("random 0", seed, 3), ("random 1", seed + 1, 3), ("50/50 head", seed + 2, 2)):
        torch.manual_seed(s)
        net = ConvNet(in_shape=(1, 4, 4), channels=(2,), hidden=3, classes=classes)
        params = {k: v.detach().clone() for k, v in net.named_parameters()}
        if classes == 2:
            params["head.weight"].zero_()
            params["head.bias"].zero_()
        out.append((label, params, classes))
    return out


def _nn_search(p: dict, seed: int, n: int) -> dict:
    """The worst neighbouring pair of each CNN release at settings ``p``: ``stage ->
    _Search`` of ratios ``change / recorded`` (recorded at the client's size).

    Releases: the clipped mean gradient, or sum under ``reduction: sum`` (`fedgdp.nn.clipping.clipped_grad_sums`;
    under ``clip_unit: client`` the unclipped mean or sum clipped as one vector,
    `fedgdp.nn.backend.clip_client_vectors`; ``gradient``, and ``local step`` is
    ``lr`` times it, or under ``update`` the update of ``local_epochs`` unclipped steps,
    clipped) and the head-only Newton step of
    Algorithm 5 (`fedgdp.nn.backend.head_newton_step`; ``newton``), on bases of
    random or identical images, client sizes ``n``, 2 and 1, in float64 and (size 1: one
    image's contribution, no sum to round) float32. Replaced records: zero, NaN,
    float-maximum and scaled images, every label, and the base's own image relabelled."""
    import torch

    from ..nn.backend import clip_client_vectors, head_newton_step
    from ..nn.clipping import clipped_grad_sums
    from ..nn.settings import release_plan

    B, lr, lam, alpha = float(p["clip"]), float(p["lr"]), float(p["ridge"]), float(p["damping"])
    sens = {}
    for size in (n, 2, 1):
        for spec in release_plan("fedhybrid", p, np.array([float(size)])) + release_plan("fednewton_iter", p,
                                                                                          np.array([float(size)])):
            sens[(spec.stage, size)] = float(spec.sensitivity[0, 0])

    unit = p.get("clip_unit", "sample")
    by_client = unit != "sample"
    summed = p.get("reduction", "mean") == "sum"                          # nn.settings.reduced_plan

    def plain_grad(params, xs, ys):
        total, _ = clipped_grad_sums(params, xs[None], ys[None], torch.ones((1, len(ys)), dtype=xs.dtype),
                                     math.inf, shared=True)
        return total if summed else {k: v / len(ys) for k, v in total.items()}

    def update(params, xs, ys):
        """clip_unit update: local_epochs unclipped, noiseless steps, the update clipped at B."""
        local = dict(params)
        for _ in range(int(p["local_epochs"])):
            local = {k: local[k] - lr * v[0] for k, v in plain_grad(local, xs, ys).items()}
        delta, _ = clip_client_vectors({k: (local[k] - params[k])[None] for k in params}, B)
        return torch.cat([v[0].flatten() for v in delta.values()]).double()

    def releases(params, xs, ys):
        if by_client:                                                     # as TorchBackend._release
            total, _ = clip_client_vectors(plain_grad(params, xs, ys), B)
            g = torch.cat([v[0].flatten() for v in total.values()]).double()
        else:
            total, _ = clipped_grad_sums(params, xs[None], ys[None], torch.ones((1, len(ys)), dtype=xs.dtype), B,
                                         shared=True)
            g = torch.cat([v[0].flatten() for v in total.values()]).double()
            g = g if summed else g / len(ys)
        step, _ = head_newton_step(params, xs, ys, B=B, lam=lam, alpha=alpha)
        local = update(params, xs, ys) if unit == "update" else lr * g
        return {"gradient": g, "local step": local, "newton": step}

    gen = torch.Generator().manual_seed(seed)
    searches = {stage: _Search() for stage in ("gradient", "local step", "newton")}
    for dtype in (torch.float64, torch.float32):
        big = float(torch.finfo(dtype).max)
        for slabel, params64, classes in _nn_states(seed, torch):
            params = {k: v.to(dtype) for k, v in params64.items()}
            for size in ((n, 2, 1) if dtype == torch.float64 else (1,)):
                for blabel in ("random", "identical"):
                    x = torch.randn((size, 1, 4, 4), generator=gen).to(dtype)
                    y = torch.randint(0, classes, (size,), generator=gen)
                    if blabel == "identical":
                        x, y = x[:1].expand_as(x).clone(), torch.zeros_like(y)
                    base = releases(params, x, y)
                    images = [("base image", x[0]), ("zeros", torch.zeros_like(x[0])),
                              ("NaN", torch.full_like(x[0], float("nan"))), ("float max", torch.full_like(x[0], big))]
                    for c in (1.0, 10.0, 1e3):
                        images += [(f"{c:g} ones", torch.full_like(x[0], c)),
                                   (f"{c:g} random", c * torch.randn(x[0].shape, generator=gen).to(dtype))]
                    for ilabel, img in images:
                        for label in range(classes):
                            xs, ys = x.clone(), y.clone()
                            xs[0], ys[0] = img, label
                            new = releases(params, xs, ys)
                            pair = (f"{slabel} state, {blabel} base n={size}, {str(dtype)[6:]}: record 0 -> "
                                    f"{ilabel}, y={label}")
                            for stage, search in searches.items():
                                moved = float((new[stage] - base[stage]).norm())
                                moved = moved if math.isfinite(moved) else math.inf
                                search.see(moved / sens[(stage, size)], pair, (size, moved))
    return searches


def nn_settings_of(config: dict | None) -> list[dict]:
    """The distinct private CNN settings of a run config's ``nn`` section (each data
    set's, `NN_KEYS`), with its methods; the digits defaults when there is none.

    Parameters
    ----------
    config : dict or None
        A merged run config (`read_run_config`); None: the default settings.

    Returns
    -------
    list of dict
        Resolved CNN settings (`fedgdp.nn.settings.resolve`), non-private ones skipped.
    """
    from ..nn.settings import resolve

    nn = (config or {}).get("nn")
    if config is not None and not nn:
        return []
    nn = nn or {}
    out = []
    for dataset in nn.get("datasets", ["digits"]):
        over = dict(nn.get("settings", {}))
        over.update(nn.get("dataset_settings", {}).get(dataset) or {})
        over.update(dataset=dataset, n=30)
        if "methods" in nn:
            over["methods"] = nn["methods"]
        p = resolve(over)
        if math.isfinite(p["mu"]) and p not in out:
            out.append(p)
    return out


def nn_targets(config: dict | None = None) -> list[AuditTarget]:
    """One target per CNN method and distinct setting of `nn_settings_of`.

    Parameters
    ----------
    config : dict or None
        A merged run config; None: the default settings.

    Returns
    -------
    list of AuditTarget
        ``kind="nn"``, ``model="cnn"``, the settings of `NN_KEYS` in ``nn``.
    """
    out = []
    for p in nn_settings_of(config):
        keep = {k: p[k] for k in NN_KEYS}
        out += [AuditTarget("nn", method, "cnn", nn=keep) for method in p["methods"]]
    return out


def audit_nn(targets: list[AuditTarget], seed: int, *, n: int = 20) -> list[AuditRow]:
    """Search every release of CNN targets (``kind="nn"``; one search per distinct
    setting, `_nn_search`) against each method's plan
    (`fedgdp.nn.settings.release_plan`). A non-finite change counts as inf.

    Parameters
    ----------
    targets : list of AuditTarget
        CNN targets (`nn_targets`).
    seed : int
        Seed of the images and the networks.
    n : int, default=20
        Size of the main client (the tiny clients 2 and 1 are searched too).

    Returns
    -------
    list of AuditRow
        One row per release of each target's plan.
    """
    from ..nn.settings import release_plan

    done: dict = {}
    rows = []
    for t in targets:
        p = dict(t.nn or {})
        key = repr(sorted(p.items()))
        if key not in done:
            done[key] = _nn_search(p, seed, n)
        for stage in dict.fromkeys(spec.stage for spec in release_plan(t.method, p, np.ones(1))):   # plan order
            search = done[key][stage]
            size, moved = search.record
            (spec,) = [sp for sp in release_plan(t.method, p, np.array([float(size)])) if sp.stage == stage]
            recorded = float(spec.sensitivity[0, 0])
            rows.append(AuditRow(f"nn:{t.method}", "cnn", stage, spec.certified, moved, recorded, moved / recorded,
                                 "any", search.evals, search.pair, t.label(), max(search.finite_best, 0.0)))
    return rows


# ------------------------------------------------------------------------- all
def default_targets() -> list[AuditTarget]:
    """Every registered private method at the default settings: simulations (both
    GLMs; FedNewton in both modes), real data (both tasks; FedNewton in both modes and
    with every Newton solver)."""
    from ..realdata import REGISTRY as REAL
    from ..simulation.backend import REGISTRY

    out = []
    for model in ("logistic", "poisson"):
        for name, meth in REGISTRY.items():
            for mode in meth.privacy_modes():
                out.append(AuditTarget("simulation", name, model, mode, TAU1[model]))
    for task in ("binary", "multiclass"):
        for name, meth in REAL.items():
            if not meth.private:
                continue
            for mode in meth.privacy_modes():
                for solver in (("cg", "ridge", "floor") if meth.solves_newton else ("cg",)):
                    out.append(AuditTarget("realdata", name, task, mode, 0.5,
                                           newton={"solver": solver, "cg_tol": 1e-8, "cg_maxiter": 500}))
    return out


def audit_targets(plan) -> list[AuditTarget]:
    """The releases of one run's settings (a `fedgdp.plan.Plan`): every
    simulation study's models, methods, privacy mode, tau1 (``auto`` computed), Hessian
    clip and clipping rule (one target per distinct setting), and the real-data
    section's methods with its privacy mode, tau1, clipping rule and Newton solver.

    Parameters
    ----------
    plan : fedgdp.plan.Plan
        Any object with the plan's simulation and real-data parts (``config``,
        ``cell_overrides``, ``study_cells``, ``realdata_settings``). Generated sensitivity
        studies (``sens_*``), non-private cells and non-private releases are skipped.

    Returns
    -------
    list of AuditTarget
        Distinct targets, in config order.
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
            if not math.isfinite(p["mu"]) or p.get("release", "private") != "private":
                continue
            for name in p["methods"]:
                add(AuditTarget("simulation", name, model, p["privacy"]["mode"], float(p["tau1"]),
                                float(p["privacy"]["hessian_clip"]), p["clip"]))
    if plan.config.get("realdata"):
        r = resolve_real(plan.realdata_settings())
        for task in plan.config["realdata"].get("tasks", [r["task"]]):
            for name in r["methods"]:
                if REAL[name].private:
                    add(AuditTarget("realdata", name, task, r["privacy"]["mode"], float(r["tau1"]),
                                    float(r["privacy"]["hessian_clip"]), r["clip"], dict(r["newton"])))
    return out


def read_run_config(files: list) -> dict:
    """One run's config from its files, merged in order as ``snakemake --configfile``
    merges them (mappings key by key, anything else replaced); the first file must be a
    whole config (``config.yaml``, or a run's ``results/<run>/config.resolved.yaml``).
    ValueError naming the file for a missing or unreadable one.

    Parameters
    ----------
    files : list of str or path-like
        YAML files, the first a whole config.

    Returns
    -------
    dict
        The merged config.
    """
    import yaml

    def merge(a: dict, b: dict) -> dict:
        out = dict(a)
        for k, v in b.items():
            out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        return out

    config: dict = {}
    for f in files:
        try:
            with open(f) as fh:
                part = yaml.safe_load(fh) or {}
        except OSError as exc:
            raise ValueError(f"--configfile {f}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise ValueError(f"--configfile {f}: not YAML ({str(exc).splitlines()[0]})") from None
        if not isinstance(part, dict):
            raise ValueError(f"--configfile {f}: not a mapping")
        config = merge(config, part)
    if "studies" not in config or "defaults" not in config:
        raise ValueError(f"--configfile {files[0]}: not a whole config (no studies/defaults); give config.yaml "
                         "first, then the run's files, or the run's results/<run>/config.resolved.yaml")
    return config


def config_targets(config: dict) -> list[AuditTarget]:
    """`audit_targets` of a merged run config (`read_run_config`), then the
    CNN targets of its ``nn`` section (`nn_targets`).

    Parameters
    ----------
    config : dict
        A merged run config; its ``run`` names the plan (default ``audit``).

    Returns
    -------
    list of AuditTarget
    """
    from ..plan.realdata import RealdataPart
    from ..plan.simulation import SimulationPart

    class _Parts(SimulationPart, RealdataPart):
        pass

    return audit_targets(_Parts(config, config.get("run", "audit"))) + nn_targets(config)


def run_audit(*, quick: bool = False, seed: int = 0, targets: list[AuditTarget] | None = None,
              histogram: bool = True, nn: bool = True) -> list[AuditRow]:
    """Search every release of every target (`default_targets` when None; see the
    module docstring).

    ``quick``: smaller main clients and a shorter local search (the test suite). Rows in
    the order of the targets, then the clipping histogram (``histogram``), then the CNN
    methods when torch imports (``nn``).

    Parameters
    ----------
    quick : bool, default=False
        Main clients of 200 (simulation) and 100 (real data) instead of 400 and 120, 10
        local-search steps instead of 30, fewer random directions.
    seed : int, default=0
        Seed of every search.
    targets : list of AuditTarget or None, default=None
        What to audit; None: `default_targets` and `nn_targets`.
    histogram : bool, default=True
        Also audit the private clipping rule's histogram (per simulation model of the
        targets; both models when there is none).
    nn : bool, default=True
        Audit the CNN targets (``kind="nn"``: those of ``targets``, or `nn_targets`'
        defaults when ``targets`` is None), when torch imports; False leaves them out.

    Returns
    -------
    list of AuditRow
    """
    n_sim, n_real, iters = (200, 100, 10) if quick else (400, 120, 30)
    targets = default_targets() + nn_targets() if targets is None else targets
    cnn = [t for t in targets if t.kind == "nn"] if nn else []
    rows: list[AuditRow] = []
    _BUDGET["random"] = RANDOM_DIRECTIONS["quick" if quick else "full"]
    with np.errstate(all="ignore"):     # extreme candidates overflow; a non-finite change is a violation (inf)
        for t in targets:
            if t.kind != "nn":
                rows += (audit_sim(t, n_sim, seed, local_iters=iters) if t.kind == "simulation"
                         else audit_real(t, n_real, seed, local_iters=iters))
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
    """A plain text table of audit rows.

    Parameters
    ----------
    rows : list of AuditRow
        The audit's rows.

    Returns
    -------
    str
        A header line, then one line per row (columns method, model, mode, release,
        certified, observed, recorded, ratio, finite, budget, setting).
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
    """The rows as ``prefix.csv`` and ``prefix.md`` (atomically): every field, a note
    that the audit is a lower bound and that a non-finite change counts as inf.

    Parameters
    ----------
    rows : list of AuditRow
        The audit's rows.
    prefix : str
        Path without extension; ``.csv`` and ``.md`` are appended.
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
    """JSON-ready rows (inf and NaN as strings).

    Parameters
    ----------
    rows : list of AuditRow
        The audit's rows.

    Returns
    -------
    list of dict
        One dict per row, keys the fields of `AuditRow`; non-finite ``observed``,
        ``recorded``, ``ratio`` and ``ratio_finite`` as ``'inf'`` or ``'nan'``.
    """
    out = []
    for r in rows:
        d = asdict(r)
        for key in ("observed", "recorded", "ratio", "ratio_finite"):
            if not math.isfinite(d[key]):
                d[key] = str(d[key])
        out.append(d)
    return out
