"""The audit of the GLM releases (`fedgdp.audit`): the simulations', the real data's, the
private clipping histogram and a `FederatedGLM` fit's inference releases, each computed
by the study's own code (`fedgdp.simulation.backend.ClientBlock`, ``FedNewton.newton_update``,
`fedgdp.realdata.FoldData.gradient`, `fedgdp.realdata.local_descent`,
`fedgdp.core.privacy.clip_histogram`, `fedgdp.realdata.moments.client_moments`).
"""
from __future__ import annotations

import math

import numpy as np

from ..core import privacy
from ..core.solvers import NEWTON_DEFAULTS
from .search import (
    AUDIT_B,
    SCALES,
    AuditRow,
    AuditTarget,
    _candidates,
    _fmt_x,
    _local_search,
    _mode_label,
    _Search,
    change,
)

__all__ = ["audit_sim", "audit_real", "audit_inference", "worst_pair", "TAU1", "SIM_Y", "INFERENCE_FAMILIES"]

SIM_Y = {"logistic": (0.0, 1.0), "poisson": (0.0, 1.0, 30.0, 1e4)}


# ---------------------------------------------------------------- simulations
def _sim_client(model: str, n: int, rng: np.random.Generator):
    from ..core.families import get_family
    from ..simulation.data import Replicate

    d = 5
    X = np.column_stack([np.ones(n), rng.standard_normal((n, d - 1))])
    eta = X @ np.array([0.2, 1.0, -0.5, 0.5, 0.0])
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float) if get_family(model).labelled \
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


def _sim_release(meth, kind: str, fd, s, theta: np.ndarray) -> np.ndarray:
    """The pre-noise release ``kind`` of simulation method ``meth`` at public ``theta`` (d,)."""
    at = theta[None, None, :]
    if kind == "gradient":
        return fd.full.gradients(at, fd.bounds(fd.full))[0, 0]
    if kind == privacy.LOCAL_STEP:
        return fd.full.local_steps(at, K=1, eta=meth.local_step_size(s), bounds=fd.bounds(fd.full), sigma=0.0,
                                   Z=None)[0, 0]
    if kind == privacy.LOCAL_STEP_HALF1:
        h1 = fd.halves[0]
        return h1.local_steps(at, K=1, eta=s.eta, bounds=fd.bounds(h1), sigma=0.0, Z=None)[0, 0]
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
        B = target.B or privacy.clip_bound(glm, rep, dict(privacy.DEFAULT_CLIP)) or AUDIT_B   # 0: a tiny client
        states = _sim_states(d, rng) if n == n_main else [np.zeros(d)]
        out.append((f"random n={n}", rep, B, states))
    kinds = ["aligned"] + (["hessian"] if stage == "newton" else [])
    for kind in kinds:
        for n in sizes:
            X, y = _adversarial_base(kind, n, d, 0.0)
            out.append((f"{kind} n={n}", Replicate(X, y, np.array([n])), target.B or AUDIT_B, [np.zeros(d)]))
    return out


def audit_sim(target: AuditTarget, n: int, seed: int, *, local_iters: int = 30) -> list[AuditRow]:
    """Search every release of one simulation method: one row per release of its plan.

    Parameters
    ----------
    target : AuditTarget
        A simulation target (``model`` a GLM name).
    n : int
        Size of the main client (n = 2 and 3 are searched too).
    seed, local_iters
        Seed of the search's generator; hill-climbing steps from the best pair found (default 30).
    """
    from ..core.glm import get_model
    from ..simulation.backend import get_method
    from ..simulation.params import resolve

    glm = get_model(target.model)
    meth = get_method(target.method)
    rng = np.random.default_rng(seed)
    s = meth.settings(resolve({"model": target.model, "methods": [target.method], "K": 10}).method_settings[
        target.method])
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
            js = [0, size - 1] if meth.tags.halves else [0]   # a record of half 1 and one of half 2
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
                    if spec.stage == privacy.LOCAL_STEP_HALF1 and j >= half:
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
    """The best finite pair ``((X, Y), (X', Y'))`` the last audit of ``target`` found for release ``stage`` (the
    empirical test's pair; X (n, d), Y (n,) or (n, k), differing in one row); KeyError when not audited.

    Parameters
    ----------
    target : AuditTarget
        An audited target (of this process).
    stage : str
        A release of its plan (``gradient``, ``local step``, ``newton``, ...).
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



def _audit_count_scale(n: int, seed: int) -> AuditRow:
    """FedIRLS's count-scale release for counts (`fedgdp.methods.fedirls.count_moments`): random Poisson
    clients and clients of all-zero and all-``c`` counts, record 0 replaced by counts from 0 to 1e9 and
    non-finite ones (a count is validated before any release; the release's bound holds regardless)."""
    from ..methods import fedirls as irls

    rng = np.random.default_rng(seed)
    c = irls.COUNT_CLIP
    search = _Search()
    ys = (0.0, 1.0, c / 2, c, 30.0, 1e4, 1e9, math.inf, -1.0, math.nan)
    for size in (n, 2, 3):
        recorded = float(privacy.plan_fedirls(B=1.0, n=float(size), T=5, moment_bound=1.0, hessian_bound=1.0,
                                              count_clip=c)[0].sensitivity)
        for label, y in (("random", rng.poisson(2.0, size).astype(float)), ("zeros", np.zeros(size)),
                         (f"all {c:g}", np.full(size, c))):
            base = irls.count_moments(y[:, None], [size], c)
            for yj in ys:
                moved = y.copy()
                moved[0] = yj
                search.see(change(irls.count_moments(moved[:, None], [size], c), base) / recorded,
                           f"{label} n={size}, record 0 -> y={yj:g}")
    spec = privacy.plan_fedirls(B=1.0, n=float(n), T=5, moment_bound=1.0, hessian_bound=1.0, count_clip=c)[0]
    recorded = float(spec.sensitivity)
    return AuditRow("fedirls", "poisson", spec.stage, spec.certified, search.best * recorded, recorded,
                    search.best, "any", search.evals, search.pair, f"c={c:g}", max(search.finite_best, 0.0))

def _audit_fedirls_counts(n: int, seed: int) -> list[AuditRow]:
    """FedIRLS's gradient and curvature releases for counts, through the fit's own round functions
    (`fedgdp.methods.fedirls.round_gradients`, `round_curvatures`) with the fit's finite clip ``B s`` and
    curvature clip ``H_c W`` in units of s and W, on a public whitening, at public count scales (W, s) of
    (1, 1) and (3, 4): random standardised clients (counts of mean 2) of n, 2 and 3 rows and an all-zero
    one of 2, at theta = 0 and the intercept-only start ``log W`` (and a random theta on n rows); record 0
    replaced by rows of every scale and direction (`_candidates`) with counts from 0 to 1e9."""
    from ..core.glm import POISSON
    from ..methods import fedirls as irls
    from ..realdata import FoldData

    rng = np.random.default_rng(seed)
    d = 6
    Wt = _public_whitening(d)
    ys = [np.array([v]) for v in (0.0, 1.0, 5.0, 20.0, 1e3, 1e9)]
    rows = []
    for kind in (privacy.GRADIENT, privacy.CURVATURE):
        search = _Search()
        for W, s in ((1.0, 1.0), (3.0, 4.0)):
            for size in (n, 2, 3):
                X = np.column_stack([np.ones(size), rng.standard_normal((size, d - 1))])
                for label, y in (("random", rng.poisson(2.0, size)),) + ((("zeros", np.zeros(size)),) if size == 2
                                                                          else ()):
                    Y = np.asarray(y, float)[:, None]
                    fd = FoldData(POISSON, [X], [Y], mu=1.0, B=AUDIT_B, tau1=0.5, privacy={"mode": "certified"},
                                  newton=dict(NEWTON_DEFAULTS),
                                  clip={"rule": "fixed", "value": AUDIT_B})
                    B, Hc = AUDIT_B * s, irls.hessian_bound(POISSON, d) * W
                    plan = {sp.stage.split(" (")[0]: sp for sp in
                            irls.FedIRLS().plan(fd, irls.FedIRLS.settings_class())}
                    recorded = float(np.asarray(plan[kind].sensitivity).ravel()[0])

                    def release(Xc, Yc, Theta, kind=kind, fd=fd, B=B, Hc=Hc, W=W, s=s):
                        xnorm = irls.whitened_norms(Xc, Wt)
                        if kind == privacy.GRADIENT:
                            return irls.round_gradients(fd, Theta, Wt, Xc, Yc, xnorm, [len(Xc)], B, s)[0]
                        return irls.round_curvatures(POISSON, Theta, Wt, Xc, Yc, xnorm, [len(Xc)], B, Hc, W)[0]

                    start = np.linalg.inv(Wt) @ np.r_[math.log(W), np.zeros(d - 1)]      # theta~ of the start
                    states = [np.zeros((d, 1)), start[:, None]] + ([0.3 * rng.standard_normal((d, 1))]
                                                                    if size == n else [])
                    for si, Theta in enumerate(states):
                        base = release(X, Y, Theta)
                        for x, yj in _candidates(d, ys, rng):
                            Xc, Yc = X.copy(), Y.copy()
                            Xc[0], Yc[0] = x, yj
                            search.see(change(release(Xc, Yc, Theta), base) / recorded,
                                       f"{label} n={size}, (W, s) = ({W:g}, {s:g}), state {si}, record 0 -> "
                                       f"x={_fmt_x(x)}, y={float(yj[0]):g}")
        rows.append(AuditRow("fedirls", "poisson", f"{kind} (every round)", True, search.best * recorded, recorded,
                             search.best, "any", search.evals, search.pair, f"B={AUDIT_B:g} s, H_c W",
                             max(search.finite_best, 0.0)))
    return rows


# ------------------------------------------------------------------- real data
def _real_client(task: str, n: int, rng):
    from ..core.glm import matrix_model

    model = matrix_model(task, n_classes=4)
    d = 6
    X = np.column_stack([np.ones(n), rng.random((n, d - 1))])       # image-like: pixels in [0, 1]
    labels = rng.integers(0, 2 if task == "binary" else model.k, n)
    return model, X, model.targets(labels)


def _real_release(meth, kind: str, fd, s, Theta: np.ndarray, drift) -> np.ndarray:
    from ..methods import fedirls as irls
    from ..realdata import local_descent

    if kind == "gradient":
        return fd.gradient(0, Theta)
    if kind == privacy.SECOND_MOMENTS:
        return irls.client_second_moments(np.asarray(fd.X[0]), irls.moment_bound(fd.d))
    X, Y = np.asarray(fd.X[0], float), np.asarray(fd.Y[0], float)
    Wt = _public_whitening(fd.d)       # FedIRLS's rounds on a public whitening, whitened on the fly as in its fit
    if kind.startswith(f"{privacy.GRADIENT} (round"):
        return irls.round_gradients(fd, Theta, Wt, X, Y, irls.whitened_norms(X, Wt), [len(X)], fd.bound)[0]
    if kind.startswith(f"{privacy.CURVATURE} (round"):
        # B = inf: every row kept (the fit leaves out the rows whose gradient is clipped, which only removes terms;
        # the fit's own B is audited on counts, `_audit_fedirls_counts`)
        return irls.round_curvatures(fd.model, Theta, Wt, X, Y, irls.whitened_norms(X, Wt), [len(X)], math.inf,
                                     irls.hessian_bound(fd.model, fd.d))[0]
    if kind == privacy.LOCAL_STEP:
        return local_descent(fd, 0, Theta, K=1, eta=meth.local_step_size(s), sigma=0.0, rng=None,
                             drift=drift if meth.tags.drifts else None)
    if kind == privacy.LOCAL_STEP_HALF1:
        return local_descent(fd, 0, Theta, K=1, eta=s.eta, sigma=0.0, rng=None,
                             rows=slice(0, fd.sizes[0] // 2))
    if kind == "newton":
        try:
            return meth.newton_update(fd.backend(None), Theta[None])[0, 0]
        except ValueError:          # a release refused from its public inputs (docs/methods.md §2) releases nothing
            return np.zeros_like(Theta)
    raise ValueError(f"no audit for release {kind!r}")


def _public_whitening(d: int) -> np.ndarray:
    """A fixed whitening ``Wt`` (d, d) for FedIRLS's rounds: ``L^-T`` of the moments ``I + 11'/2`` (correlated
    features), public as the broadcast one is; the sensitivities hold for every whitening."""
    return np.linalg.inv(np.linalg.cholesky(np.eye(d) + 0.5 * np.ones((d, d)))).T


def audit_real(target: AuditTarget, n: int, seed: int, *, local_iters: int = 30) -> list[AuditRow]:
    """Search every release of one real-data method: one row per release of its plan.

    Parameters
    ----------
    target : AuditTarget
        A real-data target (``model`` ``binary`` or ``multiclass``).
    n, seed, local_iters
        As in `audit_sim`.
    """
    from ..realdata import FoldData, get_method, resolve
    from ..realdata.clipping import clip_bound_real

    meth = get_method(target.method)
    rng = np.random.default_rng(seed)
    task = target.model
    s = meth.settings(resolve({"methods": [target.method], "task": task}).method_settings[target.method])
    priv = {"mode": target.mode, "hessian_clip": target.hessian_clip}
    newton = dict(target.newton or NEWTON_DEFAULTS)
    model, X0, Y0 = _real_client(task, n, rng)
    d, k = X0.shape[1], model.k

    def fold(Xc, Yc, B):
        return FoldData(model, [Xc], [Yc], mu=1.0, B=B, tau1=target.tau1, privacy=priv, newton=newton,
                        clip={"rule": "fixed", "value": B})

    def quantile_B(X, Y):
        return clip_bound_real(model, [X], [Y], dict(privacy.DEFAULT_CLIP))     # the core rule, one client

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
                for j in ([0, size - 1] if meth.tags.halves else [0]):
                    if spec.stage == privacy.LOCAL_STEP_HALF1 and j >= size // 2:
                        continue
                    cands = list(_candidates(d, ys, rng, extra=[step]))
                    if label.startswith("hessian"):
                        cands += [(c * np.eye(d)[1], yj) for c in SCALES for yj in ys]
                    for x, yj in cands:
                        search.see(*evaluate(x, yj, j), (x, yj, j, evaluate, recorded, (X, Y)))  # type: ignore[call-arg]  # evaluate returns (value, pair)
        rows.append(_finish_row(search, rng, local_iters, target, meth, spec))
    return rows


# ------------------------------------------------------------------ inference
#: The families of `FederatedGLM` whose inference releases are audited (softmax with 3 classes)
INFERENCE_FAMILIES = ("logistic", "poisson", "multinomial")
_INFERENCE_Y = {"logistic": (0, 1), "poisson": (0.0, 1.0, 30.0, 1e4), "multinomial": (0, 1, 2)}


def _inference_model(family: str):
    from ..core.families import get_family

    if family not in INFERENCE_FAMILIES:
        raise ValueError(f"no inference audit for family {family!r}; choose one of {', '.join(INFERENCE_FAMILIES)}")
    return get_family(family).model(3)


def _inference_targets(model, family: str, y) -> np.ndarray:
    from ..core.families import get_family

    return model.targets(np.asarray(y, np.int64 if get_family(family).labelled else float))


def audit_inference(target: AuditTarget, n: int, seed: int, *, local_iters: int = 30) -> list[AuditRow]:
    """Search both inference releases of a `FederatedGLM` fit (``S_i`` and ``H_i`` of
    `fedgdp.realdata.moments`) against `fedgdp.realdata.moments.release_plan`: random bases
    at the estimates 0, random and far, and the ``aligned`` bases, with the other GLM audits'
    replaced records. One row per release.

    Parameters
    ----------
    target : AuditTarget
        ``kind="inference"``, ``model`` a family of `INFERENCE_FAMILIES`.
    n, seed, local_iters
        As in `audit_sim` (no tiny clients).
    """
    from ..realdata import moments

    model = _inference_model(target.model)
    rng = np.random.default_rng(seed)
    d, k = 5, model.k
    B = target.B or AUDIT_B
    ys = [_inference_targets(model, target.model, [v])[0] for v in _INFERENCE_Y[target.model]]
    far = np.zeros((d, k))
    far[0, 0] = 3.0
    bases = []
    for size in (n, 2, 3):
        X = np.column_stack([np.ones(size), rng.standard_normal((size, d - 1))])
        y = rng.choice(np.asarray(_INFERENCE_Y[target.model][:3]), size)
        states = [np.zeros((d, k)), 0.5 * rng.standard_normal((d, k)), far] if size == n else [np.zeros((d, k))]
        bases.append((f"random n={size}", X, _inference_targets(model, target.model, y), states))
    for size in (n, 2, 3):
        X, y = _adversarial_base("aligned", size, d, 0.0)
        bases.append((f"aligned n={size}", X, _inference_targets(model, target.model, y), [np.zeros((d, k))]))
    rows = []
    for which, spec in enumerate(moments.release_plan(B, k)):
        search = _Search()
        recorded = float(np.asarray(spec.sensitivity).ravel()[0])
        for label, X, Y, states in bases:
            for si, theta in enumerate(states):
                with np.errstate(all="ignore"):
                    base = moments.client_moments(model, theta, X, Y, B)[which]

                def evaluate(x, yj, j, theta=theta, base=base, X=X, Y=Y, label=label, si=si, recorded=recorded):
                    Xc, Yc = X.copy(), Y.copy()
                    Xc[j], Yc[j] = x, yj
                    with np.errstate(all="ignore"):
                        moved = moments.client_moments(model, theta, Xc, Yc, B)[which]  # noqa: B023
                    shown = np.argmax(yj) if k > 1 else float(yj[0])
                    return change(moved, base) / recorded, (f"base {label}, state {si}, record {j} -> "
                                                           f"x={_fmt_x(x)}, y={shown:g}")

                step = np.zeros(d)
                step[1:] = theta[1:, 0]
                for x, yj in _candidates(d, ys, rng, extra=[step]):
                    search.see(*evaluate(x, yj, 0), (x, yj, 0, evaluate, recorded, (X, Y)))  # type: ignore[call-arg]  # evaluate returns (value, pair)
        rows.append(_finish_row(search, rng, local_iters, target, _InferenceMethod, spec))
    return rows


class _InferenceMethod:
    """What `_finish_row` reads of a method, for the inference releases (the same in both modes)."""

    @staticmethod
    def privacy_modes() -> tuple:
        return ("certified",)
