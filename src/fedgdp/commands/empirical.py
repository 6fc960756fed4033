"""An empirical lower bound on mu: run the full mechanism on a neighbouring pair and
distinguish (docs/methods.md §2, "The empirical lower bound on mu"; the test is `distinguish`).

Arrays: estimates ``(trials, d)``; the pair's data ``X`` (n, d), ``y`` (n,).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..core.solvers import NEWTON_DEFAULTS

__all__ = ["EmpiricalRow", "empirical_mu", "distinguish", "gdp_lower_bound", "clopper_pearson_upper", "run_empirical",
           "plot_empirical", "write_rows"]


@dataclass(frozen=True)
class EmpiricalRow:
    """One method's distinguishing test: nominal mu, the lower bound at ``confidence``,
    the counts it rests on, and the release whose worst pair was used."""

    method: str
    model: str
    mode: str
    certified: bool
    mu_nominal: float
    mu_lower: float
    confidence: float
    trials: int
    false_positives: int
    false_negatives: int
    release: str
    K: int
    n: int


def clopper_pearson_upper(k: int, n: int, level: float) -> float:
    """One-sided Clopper-Pearson upper bound on a binomial proportion (k of n) at ``level``: the ``level``
    quantile of Beta(k + 1, n - k), 1 when ``k >= n``.

    Parameters
    ----------
    k : int
        Successes.
    n : int
        Trials.
    level : float
        Confidence level, in (0, 1).
    """
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(level, k + 1, n - k))


def gdp_lower_bound(fp: int, fn: int, trials: int, alpha: float) -> float:
    """``Phi^-1(1 - FPR_U) - Phi^-1(FNR_U)`` with Clopper-Pearson upper bounds at level
    ``1 - alpha/2`` each (so both hold together with probability >= 1 - alpha); 0 when
    the bound is negative (mu >= 0 always holds).

    Parameters
    ----------
    fp : int
        False positives (D called D').
    fn : int
        False negatives (D' called D).
    trials : int
        Runs on each data set.
    alpha : float
        Total error probability of the two bounds.
    """
    from scipy.stats import norm

    a = clopper_pearson_upper(fp, trials, 1 - alpha / 2)
    b = clopper_pearson_upper(fn, trials, 1 - alpha / 2)
    return max(0.0, float(norm.ppf(1 - a) - norm.ppf(b)))


def _fits(meth, s, X, y, glm, *, mu: float, B: float, tau1: float, privacy: dict, trials: int, rng):
    """``trials`` independent runs of the whole method on one client's data, (trials, d)."""
    from ..simulation.backend import FitData
    from ..simulation.data import Replicate

    rep = Replicate(np.asarray(X, float), np.asarray(y, float), np.array([X.shape[0]]))
    fd = FitData([rep] * trials, glm, np.full(trials, B), mu, tau1, privacy=privacy,
                 clip={"rule": "fixed", "value": B})
    d = X.shape[1]
    draws = [meth.draw_noise(rng, s, 1, d, True) for _ in range(trials)]
    noise = {k: np.stack([z[k] for z in draws]) for k in draws[0]}
    with np.errstate(all="ignore"):
        return meth.fit(fd, s, noise).theta


def _best_threshold(a: np.ndarray, b: np.ndarray, alpha: float) -> float:
    """The threshold on scores (D: ``a``, D': ``b``, D' scoring higher) with the largest
    plug-in bound on the calibration runs."""
    grid = np.quantile(np.concatenate([a, b]), np.linspace(0.01, 0.99, 99))
    best, t_best = -math.inf, float(np.median(np.concatenate([a, b])))
    for t in grid:
        value = gdp_lower_bound(int((a > t).sum()), int((b <= t).sum()), a.size, alpha)
        if value > best:
            best, t_best = value, float(t)
    return t_best


def empirical_mu(meth, s, pair, glm, *, mu: float, B: float, tau1: float, privacy: dict,
                 trials: int = 2000, calibration: int = 500, alpha: float = 0.05, seed: int = 0):
    """The lower bound on mu of ``meth`` from the pair ``((X, y), (X', y'))``:
    ``(mu_lower, false positives, false negatives)`` of `distinguish`.

    Parameters
    ----------
    meth : fedgdp.methods.Method
        A simulation method (`fedgdp.simulation.backend.get_method`).
    s : dict
        Its method settings (``method_settings[name]`` of a resolved cell).
    pair : tuple
        ``((X, y), (X', y'))``: one client's data sets, ``X`` of shape (n, d) and ``y`` of
        shape (n,), differing in one record (`fedgdp.audit.worst_pair`).
    glm : fedgdp.core.glm.SingleOutput
        The model (`fedgdp.core.glm.get_model`).
    mu : float
        The nominal mu-GDP budget the noise is calibrated on.
    B : float
        The public clipping bound.
    tau1 : float
        FedNewton's tau1.
    privacy : dict
        ``mode`` and ``hessian_clip``.
    trials : int, default=2000
        Evaluation runs on each data set.
    calibration : int, default=500
        Calibration runs on each data set.
    alpha : float, default=0.05
        The bound holds with probability at least ``1 - alpha``.
    seed : int, default=0
        Seed of the runs' noise.
    """
    (X, y), (X2, y2) = pair
    kw: dict[str, Any] = dict(mu=mu, B=B, tau1=tau1, privacy=privacy)
    data = ((X, y), (X2, y2))

    def run(which, k, rng):
        return _fits(meth, s, *data[which], glm, trials=k, rng=rng, **kw)
    return distinguish(run, trials=trials, calibration=calibration, alpha=alpha, seed=seed)


def distinguish(run, *, trials: int, calibration: int, alpha: float, seed: int) -> tuple[float, int, int]:
    """The distinguishing test on a mechanism ``run(which, k, rng)`` (``k`` independent outputs ``(k, d)`` on
    data set D, ``which = 0``, or D', 1): ``calibration`` runs on each of D and D' fix a direction ``v`` and a
    threshold ``t``; ``trials`` fresh runs count the false positives and negatives of ``<theta, v> > t``, and
    `gdp_lower_bound` makes them ``mu_lower``, at most the true mu with probability ``1 - alpha``. Returns
    ``(mu_lower, false positives, false negatives)``.

    Parameters
    ----------
    run : callable
        ``run(which, k, rng) -> ndarray (k, d)``.
    trials, calibration : int
        Evaluation and calibration runs on each data set.
    alpha : float
        The bound holds with probability at least ``1 - alpha``.
    seed : int
        Seed of the runs' generator.
    """
    rng = np.random.default_rng(seed)
    c0, c1 = run(0, calibration, rng), run(1, calibration, rng)
    v = c1.mean(axis=0) - c0.mean(axis=0)
    v = v / (np.linalg.norm(v) or 1.0)
    t = _best_threshold(c0 @ v, c1 @ v, alpha)
    e0, e1 = run(0, trials, rng) @ v, run(1, trials, rng) @ v
    fp, fn = int((e0 > t).sum()), int((e1 <= t).sum())
    return gdp_lower_bound(fp, fn, trials, alpha), fp, fn


def _robust_pair(meth, s, target, pair, glm, B):
    """The pair with its replaced record shrunk to the smallest norm (powers of 2) that
    keeps 99% of the change of the audited release at the public state 0, times 3: an
    extreme record (norm 1e100) moves the release at state 0 only, since its linear
    predictor saturates at any other state, and the mechanism's state is noisy."""
    from ..audit.glm import _sim_fitdata, _sim_release, change
    from ..simulation.data import Replicate

    (X, y), (X2, y2) = pair
    j = int(np.flatnonzero(np.any(X != X2, axis=1) | (y != y2))[0])
    stage = meth.tags.tested_release
    theta = np.zeros(X.shape[1])

    def moved(scale):
        Z = X2.copy()
        Z[j] = X2[j] * scale
        a = _sim_release(meth, stage, _sim_fitdata(Replicate(X, y, np.array([len(y)])), glm, B, target), s, theta)
        b = _sim_release(meth, stage, _sim_fitdata(Replicate(Z, y2, np.array([len(y)])), glm, B, target), s, theta)
        return change(a, b), Z

    full, _ = moved(1.0)
    norm = float(np.max(np.abs(X2[j]))) or 1.0
    for e in range(-4, 60):
        scale = 2.0 ** e / norm
        if scale >= 1.0:
            break
        value, _ = moved(scale)
        if math.isfinite(full) and value >= 0.99 * full:
            _, Z = moved(min(1.0, 3.0 * scale))
            return (X, y), (Z, y2)
    return pair


#: The Newton solver of a real-data target that names none (the audit's).
NEWTON_CG = dict(NEWTON_DEFAULTS)

def _real_row(t, *, mu, trials, calibration, alpha, seed, B, n) -> EmpiricalRow:
    """A real-data method (DP-SCAFFOLD and any method without a simulation test): its
    audit (main client ``n``) gives the worst pair of its first release; the whole method
    runs on a one-client fold of that pair at public bound B."""
    from ..audit import AuditTarget
    from ..audit.glm import _real_client, audit_real, worst_pair
    from ..realdata import FoldData, get_method, resolve

    t = AuditTarget("realdata", t.method, t.model, t.mode, t.tau1, t.hessian_clip, {"rule": "fixed", "value": B},
                    t.newton)
    meth = get_method(t.method)
    s = meth.settings(resolve({"methods": [t.method], "task": t.model}).method_settings[t.method])
    with np.errstate(all="ignore"):
        audited = audit_real(t, n, seed, local_iters=10)
    stage = audited[0].release
    model = _real_client(t.model, 2, np.random.default_rng(0))[0]
    kw = dict(mu=mu, B=B, tau1=float(t.tau1 or 0.5), privacy={"mode": t.mode, "hessian_clip": t.hessian_clip},
              newton=dict(t.newton or NEWTON_CG), clip={"rule": "fixed", "value": B})
    folds = [FoldData(model, [np.asarray(X, float)], [np.asarray(Y, float)], **kw)
             for X, Y in worst_pair(t, stage)]

    def run(which, k, rng):
        with np.errstate(all="ignore"):
            return np.array([np.asarray(meth.fit(folds[which], s, rng).theta).ravel() for _ in range(k)])
    low, fp, fn = distinguish(run, trials=trials, calibration=calibration, alpha=alpha, seed=seed)
    return EmpiricalRow(t.method, t.model, "any" if len(meth.privacy_modes()) == 1 else t.mode,
                        all(r.certified for r in audited), mu, low, 1 - alpha, trials, fp, fn, stage,
                        int(getattr(s, "K", 0)), n)


#: The CNN cell of the distinguishing test: one client of ``NN_N`` identical images, the
#: pair's replaced image relabelled (the audit's worst gradient pair), 2 rounds of 2 steps.
NN_N = 5


def _nn_row(t, *, mu, trials, calibration, alpha, seed) -> EmpiricalRow:
    """A CNN method: the whole training (`fedgdp.nn.train.train`, a tiny float32
    ConvNet, one client drawn every round) on D (``NN_N`` identical images, label 0) and
    D' (the first relabelled 1), at the target's settings with 2 rounds of 2 local steps.
    Under ``accounting: schedule`` a second client of the same images (in D and D') is
    drawn instead in about half of 4 rounds, so the audited client's noise is calibrated
    to the rounds of each run's own schedule (a new one per run)."""
    import torch

    from ..nn.models import ConvNet
    from ..nn.settings import release_plan, resolve
    from ..nn.train import ClientData, train

    schedule = (t.nn or {}).get("accounting") == "schedule"
    p = resolve({**(t.nn or {}), "figure": "fig09", "m": 2 if schedule else 1, "n": NN_N,
                 "q": 0.5 if schedule else 1.0, "rounds": 4 if schedule else 2, "local_epochs": 2,
                 "newton_cycles": 1, "mu": mu, "methods": [t.method]})
    torch.manual_seed(seed)
    net = ConvNet(in_shape=(1, 4, 4), channels=(2,), hidden=3, classes=3)
    params0 = {k: v.detach() for k, v in net.named_parameters()}
    x = torch.randn((1, 1, 4, 4), generator=torch.Generator().manual_seed(seed)).expand(NN_N, 1, 4, 4).clone()
    y0 = torch.zeros(NN_N, dtype=torch.int64)
    y1 = y0.clone()
    y1[0] = 1
    xs, ys = ([x], [y0]) if schedule else ([], [])              # the second client, the same in D and D'
    clients = (ClientData([x, *xs], [y0, *ys]), ClientData([x, *xs], [y1, *ys]))

    def run(which, k, rng):
        out = []
        for _ in range(k):
            a, b = (int(v) for v in rng.integers(0, 2 ** 62, size=2))
            fit = train(t.method, params0, clients[which], p, np.random.default_rng(a),
                        torch.Generator().manual_seed(b))
            out.append(torch.cat([v.flatten() for v in fit.params.values()]).double().numpy())
        return np.array(out)
    low, fp, fn = distinguish(run, trials=trials, calibration=calibration, alpha=alpha, seed=seed)
    stage = release_plan(t.method, p, np.ones(1))[0].stage
    return EmpiricalRow(f"nn:{t.method}", "cnn", "any", True, mu, low, 1 - alpha, trials, fp, fn, stage,
                        p.rounds * p.local_epochs, NN_N)


def run_empirical(targets, *, mu: float = 2.0, K: int = 5, n: int = 200, trials: int = 2000,
                  calibration: int = 500, alpha: float = 0.05, seed: int = 0, B: float = 1.0,
                  real_methods=("dp_scaffold",), n_real: int = 60, nn_trials: int = 200) -> list[EmpiricalRow]:
    """`empirical_mu` of every target on the audit's worst pair (one client, K steps, bound B).

    Parameters
    ----------
    targets : iterable of fedgdp.audit.AuditTarget
        Targets; simulation ones only for a method in `PAIR_RELEASE` (clipped at ``B``).
    mu : float, default=2.0
        The nominal mu.
    K : int, default=5
        Iterations of the method's cell.
    n : int, default=200
        Size of the audited client (of the pair).
    trials : int, default=2000
        Evaluation runs on each data set.
    calibration : int, default=500
        Calibration runs on each data set.
    alpha : float, default=0.05
        The bounds hold with probability at least ``1 - alpha``.
    seed : int, default=0
        Seed of the audit and of the runs.
    B : float, default=1.0
        The public clipping bound.
    real_methods : tuple of str, default=("dp_scaffold",)
        The real-data targets' methods tested (the others share the simulation methods' releases).
    n_real : int, default=60
        Size of the audited real-data client.
    nn_trials : int, default=200
        Evaluation runs of a CNN target (half as many calibration runs); skipped without torch.
    """
    from ..audit import AuditTarget
    from ..audit.glm import audit_sim, worst_pair
    from ..core.glm import get_model
    from ..simulation.backend import get_method
    from ..simulation.params import resolve

    rows = []
    for t in targets:
        if t.kind == "nn":
            try:
                import torch  # noqa: F401  (the nn extra)
            except ImportError:
                continue
            rows.append(_nn_row(t, mu=mu, trials=min(trials, nn_trials), calibration=min(calibration, nn_trials // 2),
                                alpha=alpha, seed=seed))
            continue
        if t.kind == "inference":       # the sensitivity search alone (fedgdp.audit.glm.audit_inference)
            continue
        if t.kind == "realdata":
            if t.method in real_methods:
                rows.append(_real_row(t, mu=mu, trials=trials, calibration=calibration, alpha=alpha, seed=seed, B=B,
                                      n=n_real))
            continue
        if get_method(t.method).tags.tested_release is None:
            continue
        t = AuditTarget("simulation", t.method, t.model, t.mode, t.tau1, t.hessian_clip, {"rule": "fixed", "value": B})
        meth, glm = get_method(t.method), get_model(t.model)
        s = meth.settings(resolve({"model": t.model, "methods": [t.method], "K": K}).method_settings[t.method])
        with np.errstate(all="ignore"):
            audited = audit_sim(t, n, seed, local_iters=10)
        stage = str(meth.tags.tested_release)          # a tested method (checked above)
        s10 = meth.settings(resolve({"model": t.model, "methods": [t.method], "K": 10}).method_settings[t.method])
        pair = _robust_pair(meth, s10, t, worst_pair(t, stage), glm, B)
        privacy = {"mode": t.mode, "hessian_clip": t.hessian_clip}
        low, fp, fn = empirical_mu(meth, s, pair, glm, mu=mu, B=B, tau1=t.tau1, privacy=privacy, trials=trials,  # type: ignore[arg-type]  # simulation targets set tau1
                                   calibration=calibration, alpha=alpha, seed=seed)
        certified = all(r.certified for r in audited)
        mode = t.mode if len(meth.privacy_modes()) > 1 else "any"     # "any": the same releases in every mode
        rows.append(EmpiricalRow(t.method, t.model, mode, certified, mu, low, 1 - alpha, trials, fp, fn, stage, K, n))
    return rows


def write_rows(rows: list[EmpiricalRow], csv: str) -> None:
    """The rows as CSV (atomically).

    Parameters
    ----------
    rows : list of EmpiricalRow
        The rows (none: the header alone).
    csv : str
        The CSV file; columns the fields of `EmpiricalRow`.
    """
    from ..common.io import write_text

    head = list(asdict(rows[0])) if rows else list(EmpiricalRow.__dataclass_fields__)
    lines = [",".join(head)] + [",".join(str(v) for v in asdict(r).values()) for r in rows]
    write_text(csv, "\n".join(lines) + "\n")


def plot_empirical(rows: list[EmpiricalRow], pdf: str | None = None, png: str | None = None) -> None:
    """Nominal mu against the empirical lower bound, one point per method, mode and model
    (spread sideways around their nominal mu; a black bar marks each one's nominal mu), the
    diagonal dashed: a certified method must lie on or below its bar (at the stated confidence).

    Parameters
    ----------
    rows : list of EmpiricalRow
        The rows to draw.
    pdf, png : str or None, default=None
        Where to write each format (None: not written).
    """
    from ..common.figures import method_style, pyplot, save_figure
    from ..methods import REGISTRY

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    top = max([r.mu_nominal for r in rows] + [r.mu_lower for r in rows] + [1.0]) * 1.15
    ax.plot([0, top], [0, top], ls="--", color="0.4", lw=1, label="mu_lower = nominal mu")
    models = sorted({r.model for r in rows})
    width = 0.6 * min([r.mu_nominal for r in rows] + [1.0])
    for k, r in enumerate(rows):
        base = r.method.removeprefix("nn:")
        st = method_style(base)
        x = r.mu_nominal + width * ((k + 0.5) / max(len(rows), 1) - 0.5)
        name = REGISTRY[base].label if base in REGISTRY else base
        if r.mode != "any":             # a method whose releases differ by privacy mode
            name += ", paper mode (nominal mu)" if r.mode == "paper" else f", {r.mode} mode"
        filled = r.model == models[0]
        ax.plot([x - 0.02 * top, x + 0.02 * top], [r.mu_nominal] * 2, color="k", lw=1.2)
        ax.scatter(x, r.mu_lower, color=st["color"], marker=st["marker"], s=50, zorder=3,
                   facecolor=st["color"] if filled else "none", label=f"{name}, {r.model}")
    conf = rows[0].confidence if rows else 0.95
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("nominal mu (the calibration's target; points spread sideways)")
    ax.set_ylabel(f"empirical lower bound on mu ({conf:.0%} confidence)")
    trials = rows[0].trials if rows else 0
    ax.set_title(f"Distinguishing test on each method's worst pair ({trials} runs per data set, "
                 f"one-sided Clopper-Pearson, {conf:.0%})", fontsize=8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    save_figure(fig, pdf, png, title="Empirical lower bound on mu", bbox_inches="tight",
                about="Clopper-Pearson bounds on FPR/FNR of a threshold test on the full mechanism's output")
