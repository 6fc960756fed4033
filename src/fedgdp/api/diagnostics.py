"""Convergence diagnostics of a [`FederatedGLM`][fedgdp.api.estimator.FederatedGLM] fit: its ``fit_info_``.

A private fit's diagnosis reads only its released noisy iterates and the ledger's public
noise sds: it costs no privacy (docs/real-data.md, "Does the fit converge?"). Since a step's
change ``Delta_t = -eta g_t + N_t`` has ``E ||Delta_t||^2 = ||eta g_t||^2 + noise2`` with
``noise2`` known, the mean of ``||Delta_t||^2 - noise2`` over the *window* (the last fifth
of a run, at least one step) estimates the noiseless step, and ``||theta_K -
theta_{K-w}||^2 - w noise2`` the noiseless net movement. At ``mu = inf`` both are exact
and the fit is compared with the pooled ridge fit. `judge_noise` then compares the
privacy noise itself with the estimate.

The verdict (``fit_info_["status"]``):

- ``converged``: the noiseless part has stopped moving (its net movement over the
  window is below what the noise alone moves, or below ``1e-3 max(1, ||theta||)``;
  without noise, also when the mean clipped gradient's norm is at most 1e-3) and, at
  mu = inf, it lies within 1e-2 (relative) of the pooled ridge fit;
- ``not converged``: it still moves (FedNewton's first stage need not: its Newton step
  finishes it, and only the mu = inf comparison below can say it did not): a
  [`ConvergenceWarning`][fedgdp.api.diagnostics.ConvergenceWarning] naming the setting to
  raise (the steps ``K``, or the step size ``eta``);
- ``unstable``: the noiseless steps stay large while the estimate goes nowhere (they
  oscillate), grow over the run, or FedNewton's Newton step moves the estimate far
  beyond where its first stage went: a warning naming the setting to lower;
- ``noise-dominated``: FedNewton's Newton release carries noise larger than the
  estimate's scale, or (`judge_noise`) the privacy noise's RMS over the coefficients
  exceeds `NOISE_RATIO` of the estimate's: a
  [`NoiseDominatedWarning`][fedgdp.api.diagnostics.NoiseDominatedWarning] naming the mu
  that would do; such a fit is never ``converged``;
- a non-finite estimate is refused ([`check_finite`][fedgdp.api.diagnostics.check_finite]).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

__all__ = ["ConvergenceWarning", "NoiseDominatedWarning", "ClipWarning", "FeatureScaleWarning", "check_scale",
           "SCALE_TOLERANCE", "diagnose", "judge_noise", "check_finite",
           "warn", "format_info", "Z_SIGNIFICANT", "TOL_EXACT", "GTOL_EXACT", "UNSTABLE_FACTOR", "NOISE_RATIO",
           "STANDARDISE", "check_clip_bias", "CLIP_BIAS_MAX_PARAMS"]

#: A noise-corrected movement counts as real when it exceeds this many of its standard deviations
Z_SIGNIFICANT = 3.0
#: Net movement over the window, relative to ``max(1, ||theta||)``, that counts as stopped
TOL_EXACT = 1e-3
#: Without noise, a mean clipped gradient of at most this norm counts as stationary
GTOL_EXACT = 1e-3
#: A noiseless Newton step this many times longer than stage 1's path counts as unstable
UNSTABLE_FACTOR = 10.0
#: A private fit is noise-dominated when its privacy noise's RMS over the coefficients exceeds
#: this share of the estimate's RMS (then at least about half of what the estimate shows is noise)
NOISE_RATIO = 0.5
#: The advice of an unstable fit: the defaults' step sizes assume standardised features
STANDARDISE = ("the defaults assume standardised features (mean 0, variance 1, from public or data-independent "
               "scaling): standardise them; if they are, lower the step size")


class ConvergenceWarning(UserWarning):
    """The fit's noiseless part did not converge or was unstable (``fit_info_["status"]``);
    the message names the setting to change. (fedgdp's own class: scikit-learn's
    ``ConvergenceWarning`` is not imported by the estimator.)"""


class NoiseDominatedWarning(ConvergenceWarning):
    """The fit's privacy noise is comparable to the estimate (``fit_info_["status"]`` is
    ``noise-dominated``; `judge_noise`), or the forecast says it will be before any record
    is read (`fedgdp.api.forecast`); the message names the mu that would do."""


class FeatureScaleWarning(UserWarning):
    """The features do not look standardised, which the defaults (step sizes, the public
    clipping bound, the forecast) assume: a check of the data holder's own rows, shown to
    them only, like the label check (`check_scale`)."""


#: A feature column counts as (near enough) standardised when its mean is within this of 0 and its sd
#: within a factor of 10 of 1 (features scaled to [0, 1] by public bounds pass; raw units rarely do)
SCALE_TOLERANCE = 1.0


def column_moments(X: np.ndarray, block: int = 1 << 16) -> tuple[np.ndarray, np.ndarray]:
    """Each column's mean and sd (``ddof=0``), summed a block of rows at a time (no temporary of X's size;
    the sums' order differs from ``X.mean(axis=0)``'s by rounding only).

    Parameters
    ----------
    X : ndarray of shape (n, p)
    block : int
        Rows a block.
    """
    n = X.shape[0]
    mean = sum(np.sum(X[lo:lo + block], axis=0) for lo in range(0, n, block)) / n
    ss = sum(np.sum((X[lo:lo + block] - mean) ** 2, axis=0) for lo in range(0, n, block))
    return mean, np.sqrt(ss / n)


def check_scale(X: np.ndarray) -> bool:
    """A `FeatureScaleWarning` when a column's mean exceeds `SCALE_TOLERANCE` or its sd leaves [1/10, 10].

    The data holder's own check on the rows, not a release: do not publish it (docs/privacy.md).

    Parameters
    ----------
    X : ndarray of shape (n, p)
        The features (without the intercept).

    Returns
    -------
    bool
        Whether it warned.
    """
    if X.shape[0] < 2:
        return False
    mean, sd = column_moments(X)
    bad = np.flatnonzero((np.abs(mean) > SCALE_TOLERANCE) | (sd < 0.1) | (sd > 10.0))
    if bad.size:
        j = int(bad[0])
        warnings.warn(f"{bad.size} of {X.shape[1]} feature column(s) are not standardised (column {j}: mean "
                      f"{mean[j]:.3g}, sd {sd[j]:.3g}); the defaults (step sizes, the public clipping bound, the "
                      f"noise forecast) assume mean 0 and variance 1: standardise your features, with public or "
                      f"data-independent centring and scaling (a check of your own rows, shown to you only)",
                      FeatureScaleWarning, stacklevel=3)
    return bool(bad.size)


class ClipWarning(UserWarning):
    """A private clipping rule landed on its public grid's top: B, and with it the noise,
    is as large as the rule allows (the message names the rule)."""


#: `check_clip_bias` solves with the dense Hessian only up to this many coefficients (d k)
CLIP_BIAS_MAX_PARAMS = 2000


def check_clip_bias(model, D: np.ndarray, Y: np.ndarray, theta: np.ndarray, B: float, noise_rmse: float,
                    status: str = "", scaled: bool = True, se: np.ndarray | None = None) -> None:
    """A `ClipWarning` when the clip biases a Poisson fit, a `NoiseDominatedWarning` when noise moved it far.

    The clip's shift is about one Newton step ``H^{-1} (g - g_B)`` (``g_B`` the mean clipped
    gradient; ridge 1e-3 added); it warns when the shift's RMS exceeds `NOISE_RATIO` of the
    estimate's, or, coefficient by coefficient, when a coefficient's shift exceeds its standard
    error ``se`` (its interval is then centred on the clipped estimator's target, more than one se
    from the unclipped one's). The noise's displacement is about ``H_B^{-1} g_B`` (``H_B`` over the unclipped
    rows), an overstatement, so it warns only above the estimate's RMS and twice
    ``noise_rmse`` (and not when ``status`` is already ``noise-dominated`` or the features
    are not ``scaled``). The data holder's own check on the rows, shown to them only:
    nothing enters ``fit_info_``. Poisson only (bounded residuals elsewhere); skipped above
    `CLIP_BIAS_MAX_PARAMS` coefficients. Measurements: docs/real-data.md, "The clip's bias
    on counts".

    Parameters
    ----------
    model : fedgdp.core.glm.GLM
        The family (its ``name``; other than ``poisson``: no check).
    D : ndarray of shape (n, d)
        The design (intercept included), all clients' rows.
    Y : ndarray of shape (n, k)
        The responses.
    theta : ndarray of shape (d, k)
        The released estimate.
    B : float
        The clipping bound.
    noise_rmse : float
        The fit's privacy-noise RMS per coefficient (`judge_noise`), named in the message.
    status : str
        The fit's ``fit_info_["status"]``.
    scaled : bool
        False when `check_scale` warned.
    se : ndarray of shape (d, k), optional
        The coefficients' standard errors (sampling and noise; one output only).
    """
    from ..core import privacy

    d, k = theta.shape
    if getattr(model, "bounded_residuals", True) or not math.isfinite(B) or d * k > CLIP_BIAS_MAX_PARAMS \
            or D.shape[0] < 2:
        return
    R = np.asarray(model.residuals(theta, D, Y), float).reshape(len(D), k)
    norms = privacy.row_norms(D) * privacy.row_norms(R)
    lost = 1.0 - privacy.clip_factors(norms, B, d * k)
    if not np.any(lost > 0) or not np.all(np.isfinite(norms)):
        return
    gap = D.T @ (lost[:, None] * R) / len(D)                   # g - g_B, (d, k)
    H = model.hessian(theta, D) + 1e-3 * np.eye(d * k)
    try:
        step = np.linalg.solve(H, gap.reshape(-1)).reshape(d, k)
    except np.linalg.LinAlgError:
        return
    est = np.asarray(theta, float)
    if k > 1:
        step, est = step - step.mean(axis=1, keepdims=True), est - est.mean(axis=1, keepdims=True)
    bias, scale = float(np.sqrt(np.mean(step ** 2))), float(np.sqrt(np.mean(est ** 2)))
    with np.errstate(divide="ignore", invalid="ignore"):
        off = (np.abs(step) / np.asarray(se, float).reshape(step.shape) if se is not None and k == 1
               else np.zeros_like(step)).ravel()
    far = np.flatnonzero(off > 1.0)
    if math.isfinite(bias) and (bias > NOISE_RATIO * scale or far.size):
        where = (f"comparable to the estimate (RMS {scale:.3g}" if bias > NOISE_RATIO * scale else
                 f"more than the standard error of {far.size} of {off.size} coefficient(s) (up to {off.max():.3g} se, "
                 f"coefficient {int(np.argmax(off))}, 0 the intercept): their intervals are centred on the clipped "
                 f"target (estimate RMS {scale:.3g}")
        warnings.warn(f"the clipping bound B = {B:.3g} clips {np.mean(lost > 0):.0%} of the rows' gradients at the "
                      f"estimate and moves the fit by about {bias:.3g} per coefficient (RMS; one Newton step to where "
                      f"the unclipped gradient vanishes), {where}; privacy noise "
                      f"{noise_rmse:.3g}): give a larger public bound (clip=B; for counts from their known range) or "
                      f"clip='private_quantile' (a check of your own rows, shown to you only)", ClipWarning,
                      stacklevel=3)
    if status == "noise-dominated" or not scaled:
        return
    # the noise's own displacement: one Newton step of the clipped gradient (a clipped row adds no curvature)
    kept = (lost == 0).astype(float)
    try:
        moved = np.linalg.solve(model.hessian(theta, D, scale=kept) + 1e-3 * np.eye(d * k),
                                (D.T @ ((1.0 - lost)[:, None] * R) / len(D)).reshape(-1))
    except np.linalg.LinAlgError:
        return
    noise = float(np.sqrt(np.mean(moved ** 2)))
    if math.isfinite(noise) and noise > max(scale, 2.0 * noise_rmse):
        warnings.warn(
            f"the fit lies of order {noise:.3g} per coefficient (RMS; one Newton step of the clipped gradient on "
            f"your rows; it overstates) from where its noiseless iteration stops, more than twice the privacy "
            f"noise's linear forecast ({noise_rmse:.3g}, fit_info_['noise_se']) and more than the estimate (RMS "
            f"{scale:.3g}): "
            f"the noise dominates it (clipped rows pull back less than the forecast assumes); raise mu, or fit more "
            f"rows per client (a check of your own rows, shown to you only)", NoiseDominatedWarning, stacklevel=3)


def _runs(trace: list) -> list[dict]:
    """The trace's runs: consecutive iterates of one stage and client, from step 0."""
    runs: list[dict] = []
    for stage, client, step, eta, theta, noise2 in trace:
        if step == 0:
            runs.append({"stage": stage, "client": client, "eta": float(eta), "noise2": float(noise2[0]),
                         "thetas": []})
        runs[-1]["thetas"].append(np.asarray(theta[0], float))
    return [r for r in runs if len(r["thetas"]) > 1]


@dataclass(frozen=True)
class _RunSummary:
    """One run's noiseless step (as a gradient norm), net movement and their significance (`_run_summary`)."""

    steps: int
    window: int
    eta: float
    grad_norm: float
    step_significant: bool
    steps_grew: bool
    change: float
    change_noise: float
    moving: bool
    oscillating: bool


def _run_summary(run: dict) -> _RunSummary:
    """One run's noiseless step (as a gradient norm), net movement and their significance."""
    T = np.stack(run["thetas"])
    K, dk, eta, noise2 = len(T) - 1, T[0].size, run["eta"], run["noise2"]
    w = max(1, math.ceil(K / 5))
    d2 = np.sum((T[1:] - T[:-1]) ** 2, axis=tuple(range(1, T.ndim)))
    sd_step = noise2 * math.sqrt(2.0 / (dk * w))          # sd of the window's mean ||N||^2
    last, first = float(np.mean(d2[-w:])) - noise2, float(np.mean(d2[:w])) - noise2
    move2 = float(np.sum((T[-1] - T[-1 - w]) ** 2)) - w * noise2
    sd_move = w * noise2 * math.sqrt(2.0 / dk)
    scale = max(1.0, float(np.linalg.norm(T[-1])))
    flat = noise2 == 0 and math.sqrt(max(last, 0.0)) / eta <= GTOL_EXACT      # exact and (near) stationary
    return _RunSummary(
        steps=K, window=w, eta=eta,
        grad_norm=math.sqrt(max(last, 0.0)) / eta,
        step_significant=bool(last > Z_SIGNIFICANT * sd_step) if noise2 > 0 else bool(last > 0),
        steps_grew=bool(last > 4.0 * max(first, 0.0) and last > max(noise2, Z_SIGNIFICANT * sd_step)),
        change=math.sqrt(max(move2, 0.0)) / scale,
        change_noise=math.sqrt(w * noise2) / scale,
        # still travelling: beyond what the noise alone moves (and its sd), and not negligible
        moving=bool(move2 > max(w * noise2, Z_SIGNIFICANT * sd_move)
                    and math.sqrt(max(move2, 0.0)) > TOL_EXACT * scale and not flat),
        # steps larger than their noise (a stable iteration pulls back against the noise with
        # ||eta g||^2 about eta lambda / 2 noise2, below noise2) that go nowhere: they oscillate
        oscillating=bool(last > max(noise2, Z_SIGNIFICANT * sd_step) and w * math.sqrt(max(last, 0.0))
                         > 3.0 * math.sqrt(max(move2, 0.0)) + TOL_EXACT * scale))


def step_settings(names) -> tuple[str, str]:
    """The method's own step-count and step-size settings, as advice names them: of its setting
    ``names``, those starting with ``K`` (its steps) and ``eta`` (its step sizes), e.g.
    ``("K1 or K2", "eta1 or eta2")`` for FedHybrid, ``("K", "eta")`` for FedSGD.

    Parameters
    ----------
    names : iterable of str
        The method's setting names (`fedgdp.methods.Method.setting_names`).
    """
    names = list(names)
    steps = [n for n in names if n.startswith("K")] or ["K"]
    sizes = [n for n in names if n.startswith("eta")] or ["eta"]
    return " or ".join(steps), " or ".join(sizes)


def diagnose(trace: list, *, theta: np.ndarray, weights: np.ndarray, ledger, newton: bool,
             reference: np.ndarray | None = None, settings=("K", "eta")) -> dict:
    """The fit's ``fit_info_`` from its trace (module docstring).

    Parameters
    ----------
    trace : list
        The fit's iterates (``FoldData.trace``), as tuples ``(stage, client, step, eta,
        Theta (1, d, k), noise2 (1,))``.
    theta : ndarray of shape (d, k)
        The released estimate.
    weights : ndarray of shape (m,)
        The aggregation weights (stage 1 of FedNewton is their average).
    ledger : fedgdp.core.privacy.Ledger
        The fit's ledger (the Newton release's noise sds).
    newton : bool
        Whether the fit ends with FedNewton's Newton release.
    reference : ndarray of shape (d, k) or None
        The pooled ridge fit, np_pooled (only at ``mu = inf``).
    settings : sequence of str
        The method's setting names (the advice names its own steps and step sizes, `step_settings`).

    Returns
    -------
    dict
        ``status``, ``n_iter`` (gradient steps per client), ``grad_norm`` and ``change``
        (noiseless, over the window, worst client; ``change`` relative to ``max(1, ||theta||)``),
        ``change_noise``, ``basis``, ``advice`` (or ""), ``newton_step`` / ``newton_noise``
        (FedNewton) and ``distance_to_mle`` (``mu = inf``).
    """
    runs = [(r, _run_summary(r)) for r in _runs(trace)]
    private = any(r["noise2"] > 0 for r, _ in runs)
    info: dict = {"basis": ("released iterates, the noise's known variance removed: a statement about the noiseless "
                            "part (costs no privacy)") if private else "exact (no noise)"}
    if runs:
        last_stage = runs[-1][0]["stage"]
        final = [s for r, s in runs if r["stage"] == last_stage and r is not None]
        final = final[-(len(weights) if last_stage == "local" else 1):]
        per_client: dict[int, int] = {}
        for r, s in runs:
            per_client[r["client"]] = per_client.get(r["client"], 0) + s.steps
        server = per_client.pop(-1, 0)
        info["n_iter"] = int(server + (max(per_client.values()) if per_client else 0))
        info["grad_norm"] = max(s.grad_norm for s in final)
        info["change"] = max(s.change for s in final)
        info["change_noise"] = max(s.change_noise for s in final)
        moving = any(s.moving for s in final) and not newton     # FedNewton's step finishes stage 1
        unstable = any(s.oscillating or s.steps_grew for s in final)
        eta = final[-1].eta
    else:
        info.update(n_iter=0, grad_norm=math.nan, change=math.nan, change_noise=math.nan)
        moving = unstable = False
        eta = math.nan
    advice, noisy = "", False
    K, ETA = step_settings(settings)
    if unstable:
        advice = f"the steps oscillate or grow: {STANDARDISE} (method_settings {ETA}, now {eta:g})"
    elif moving:
        advice = f"the estimate is still moving: raise the steps (method_settings {K}) or the step size {ETA}"
    if newton and runs:
        ends = [r["thetas"][-1] for r, _ in runs if r["stage"] == "local"][-len(weights):]
        theta1 = sum(w * t for w, t in zip(weights, ends))
        path = max(1.0, float(np.linalg.norm(theta1)))
        sig = [np.ravel(r.sigma)[: len(weights)] for r in ledger.releases if r.stage == "newton"]
        noise2 = float(np.sum(np.asarray(weights) ** 2 * sig[0] ** 2)) * theta.size if sig else 0.0
        step2 = float(np.sum((theta - theta1) ** 2))
        info["newton_step"] = math.sqrt(step2)
        info["newton_noise"] = math.sqrt(noise2)
        if math.sqrt(max(step2 - noise2, 0.0)) > UNSTABLE_FACTOR * path:
            unstable = True
            advice = (f"the Newton step moved the estimate {math.sqrt(step2):.3g} from stage 1's {path:.3g} "
                      "(beyond its noise): raise tau1, or use method='fedhybrid'")
        elif math.sqrt(noise2) > path and not unstable:
            noisy = True
            advice = (f"the Newton release's noise (norm {math.sqrt(noise2):.3g}) exceeds the estimate's scale "
                      f"({path:.3g}): raise mu or tau1, or use method='auto' (the lowest forecast noise)")
    if reference is not None:
        dist = float(np.linalg.norm(theta - reference)) / max(1.0, float(np.linalg.norm(reference)))
        info["distance_to_mle"] = dist
        if dist > 1e-2 and not unstable:
            moving = True
            advice = advice or (f"{dist:.3g} (relative) from the pooled ridge fit (np_pooled): raise the steps "
                                f"(method_settings {K})")
    info["status"] = ("unstable" if unstable else "noise-dominated" if noisy else "not converged" if moving
                      else "converged")
    info["advice"] = advice
    return info


#: FedIRLS's last step is taken as noise alone when no coefficient moved more than this many of its sds
Z_STEP = 4.0
#: At mu = inf FedIRLS has converged when its last step is at most this, relative to ``max(1, ||theta||)``
TOL_IRLS = 1e-8


def diagnose_irls(fit_info: dict, theta: np.ndarray, *, private: bool, rounds: int) -> dict:
    """``fit_info_`` of a FedIRLS fit: converged when, coefficient by coefficient, its last Newton
    step is within `Z_STEP` sds of the noise the step carries (the noiseless movement left is small
    next to the noise; at mu = inf, below `TOL_IRLS`) and no step hit the trust radius.

    Parameters
    ----------
    fit_info : dict
        The method's ``Fit.info``: ``last_step`` (d,), ``last_step_cov`` and ``noise_cov`` (d, d), ``capped``.
    theta : ndarray of shape (d, 1)
        The released estimate.
    private : bool
        Whether the fit added noise.
    rounds : int
        The Newton rounds run.
    """
    step = np.asarray(fit_info["last_step"], float)
    sd = np.sqrt(np.maximum(np.diag(fit_info["last_step_cov"]), 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.abs(step) / sd if private else np.zeros_like(step)
    change = float(np.linalg.norm(step)) / max(1.0, float(np.linalg.norm(theta)))
    moving = bool(np.max(z) > Z_STEP) if private else change > TOL_IRLS
    noisy = bool(fit_info.get("capped_by_noise", False))
    moving = (moving or bool(fit_info["capped"])) and not noisy
    status = "noise-dominated" if noisy else "not converged" if moving else "converged"
    info = {"status": status, "n_iter": int(rounds), "change": change,
            "step_z": float(np.max(z)) if private else math.nan,
            "basis": ("the last Newton step against the noise it carries (costs no privacy)" if private
                      else "exact (no noise)"),
            "advice": ("a Newton step hit the step limit (radius) with noise of about its size: the noise drowns "
                       "the steps; raise mu or the rows per client" if noisy else
                       "" if not moving else (f"the last Newton step moved a coefficient {float(np.max(z)):.3g} sds "
                                              "of its noise (or hit the step limit): raise the rounds "
                                              "(method_settings={'T': ...}) or the radius"))}
    return info


def check_finite(theta: np.ndarray, method: str, settings: dict, private: bool = True) -> None:
    """Refuse a non-finite estimate, naming the setting to change.

    Parameters
    ----------
    theta : ndarray
        The estimate.
    method : str
        The method's name.
    settings : dict
        Its resolved settings (the step sizes named in the message).
    private : bool
        Whether the fit added noise (only then is raising mu advice).

    Raises
    ------
    ValueError
        ``theta`` has a NaN or an infinity.
    """
    if np.all(np.isfinite(theta)):
        return
    steps = ", ".join(f"{k}={v:g}" for k, v in settings.items() if k.startswith("eta"))
    raise ValueError(f"{method} diverged (its estimate is not finite): {STANDARDISE} in method_settings "
                     f"({steps or 'eta'})" + (", or raise mu" if private else ""))


def warn(info: dict, method: str, stacklevel: int = 3) -> None:
    """A [`ConvergenceWarning`][fedgdp.api.diagnostics.ConvergenceWarning] (one line) unless the fit converged.

    Parameters
    ----------
    info : dict
        The fit's ``fit_info_`` ([`diagnose`][fedgdp.api.diagnostics.diagnose]).
    method : str
        The method's name.
    stacklevel : int
        Passed to ``warnings.warn``.
    """
    if info["status"] != "converged":
        kind = NoiseDominatedWarning if info["status"] == "noise-dominated" else ConvergenceWarning
        warnings.warn(f"{method}: {info['status']} (fit_info_): {info['advice']}", kind, stacklevel=stacklevel)



def swamped(theta: np.ndarray, se_noise: np.ndarray, se_sampling: np.ndarray) -> np.ndarray:
    """Coefficients the noise swamps: noise sd above both the coefficient's size and twice its
    sampling sd (the interval is then mostly noise around a value it cannot tell from 0), same shape.

    Parameters
    ----------
    theta, se_noise, se_sampling : ndarray of shape (d, k)
        The coefficients, their noise sds and their sampling sds.
    """
    return np.asarray(se_noise) > np.maximum(np.abs(theta), 2.0 * np.asarray(se_sampling))


def judge_noise(info: dict, theta: np.ndarray, se: np.ndarray, *, mu: float, se_sampling: np.ndarray | None = None,
                intercept: bool = True) -> dict:
    """Add the privacy noise's standard errors to ``info`` and judge them coefficient by coefficient (in place).

    Sets ``noise_se`` (d, k), its RMS ``noise_rmse`` and ``noise_swamped`` (d, k), the coefficients
    `swamped` by the noise (against their own size, so a large intercept cannot hide useless
    slopes; without ``se_sampling``, a noise sd above `NOISE_RATIO` times the coefficient). When
    every slope is swamped the status becomes ``noise-dominated`` (an ``unstable`` or ``not
    converged`` fit stays so) and the advice names the mu that would do (the noise is
    proportional to 1/mu); when only some are, ``noise_advice`` names them (no warning: the fit is
    useful for the others, and `summary` withholds the swamped ones' z, p and intervals).

    Parameters
    ----------
    info : dict
        The fit's ``fit_info_`` so far (`diagnose`).
    theta : ndarray of shape (d, k)
        The released estimate (softmax: compared centred across the classes).
    se : ndarray of shape (d, k)
        The noise sds.
    mu : float
        The fit's mu.
    se_sampling : ndarray of shape (d, k) or None
        The sampling sds (`fedgdp.api.inference`), when known.
    intercept : bool
        Whether row 0 is the intercept (not counted among the slopes).
    """
    se = np.asarray(se, float)
    rmse = float(np.sqrt(np.mean(se ** 2)))
    theta = np.asarray(theta, float)
    if theta.shape[1] > 1:          # softmax: centred across the classes, as noise_se is
        theta = theta - theta.mean(axis=1, keepdims=True)
    mask = (swamped(theta, se, se_sampling) if se_sampling is not None
            else se > NOISE_RATIO * np.abs(theta))
    info["noise_se"] = se
    info["noise_rmse"] = rmse
    info["noise_swamped"] = mask
    slopes = mask[1:] if intercept and len(mask) > 1 else mask
    scale = float(np.sqrt(np.mean(theta ** 2)))
    overall = rmse > NOISE_RATIO * scale            # the noise against the estimate as a whole
    if overall and info["status"] == "converged":
        need = mu * rmse / (NOISE_RATIO * max(scale, 1e-300))
        info["status"] = "noise-dominated"
        info["advice"] = (f"the privacy noise (RMS {rmse:.3g} per coefficient, fit_info_['noise_se']) is comparable "
                          f"to the estimate (RMS {scale:.3g}): "
                          + (f"mu >= {need:.3g} would bring it to {NOISE_RATIO:g} of it, " if math.isfinite(need)
                             else "")
                          + "or more rows per client; fedgdp.forecast compares the methods")
    if not mask.any():
        return info
    worst = float(np.max(se[mask] / np.maximum(np.abs(theta[mask]), 1e-300)))
    need = mu * worst / NOISE_RATIO
    what = (f"the privacy noise swamps {int(mask.sum())} of {mask.size} coefficients (fit_info_['noise_swamped']: "
            f"noise sd above the coefficient and twice its sampling sd; up to {worst:.3g} times the coefficient): "
            + (f"mu >= {need:.3g} would bring it to {NOISE_RATIO:g} of them, " if math.isfinite(need) else "")
            + "or more rows per client")
    if slopes.all() and info["status"] == "converged":
        info["status"], info["advice"] = "noise-dominated", what
    elif info["status"] == "converged":
        info["noise_advice"] = what
    return info


def format_info(info: dict) -> str:
    """``fit_info_`` as one line (``fedgdp fit`` prints it).

    Parameters
    ----------
    info : dict
        The fit's ``fit_info_``.
    """
    if "gtol" in info:          # NP-Pooled's ridge fit (Newton-CG): no iterates to read
        parts = [f"fit: {info['status']} (Newton-CG: gradient norm {info['grad_norm']:.3g}, gtol {info['gtol']:g})"]
    elif "step_z" in info:      # FedIRLS: its last Newton step against its noise
        parts = [f"fit: {info['status']} ({info['n_iter']} Newton rounds; {info['basis']}: last step "
                 f"{info['step_z']:.3g} sds of its noise at most, change {info['change']:.3g})"]
    else:
        parts = [f"fit: {info['status']} ({info['n_iter']} steps; noiseless part: gradient norm "
                 f"{info['grad_norm']:.3g}, change over the last steps {info['change']:.3g}, noise alone "
                 f"{info['change_noise']:.3g})"]
    if "newton_step" in info:
        parts.append(f"Newton step {info['newton_step']:.3g} (noise {info['newton_noise']:.3g})")
    if "noise_rmse" in info:
        parts.append(f"privacy noise {info['noise_rmse']:.3g} per coefficient (RMS)")
    if "distance_to_mle" in info:
        parts.append(f"{info['distance_to_mle']:.3g} from the pooled ridge fit")
    if "ridge" in info:
        parts.append(f"ridge {info['ridge']:g}")
    return "; ".join(parts) + (f": {info['advice']}" if info["advice"] else "")
