"""FedIRLS: private federated Newton (IRLS) on a privately whitened design, `FederatedGLM`'s logistic and
Poisson default, and its per-client releases (shared with the audit, `fedgdp.audit.glm.audit_real`, so the
audit moves records through the very code that releases them; docs/default-estimator.md)."""

from __future__ import annotations

import math

import numpy as np

from ..core import privacy
from ..core.glm import Poisson
from ..core.segments import by_blocks, client_groups, cross_means, grams, stacked
from .base import REALDATA, Method, MethodTags
from .settings import IRLSSettings


class FedIRLS(Method):
    """Private federated Newton for one-output GLMs (docs/methods.md §2, "FedIRLS").

    Round 0: every client releases its clipped second moments ``mean_j x_j x_j'``; the server
    whitens the design with them (``x~ = L^-1 x``, ``L L'`` the moments shrunk toward I; the clients
    whiten on the fly, `client_gradients`). Rounds
    1..T: every client releases its clipped gradient at the broadcast ``theta~`` (and in rounds
    2..T-1 its clipped curvature); the server takes the (damped) Newton step ``theta~ -= H^-1 g`` (round 1:
    the public curvature ``W_0 I`` at 0; the last round: round T-1's). The estimate is ``L^-T
    theta~``. Counts (Poisson) first release their count scale (`count_moments`, `count_scales`): the
    curvatures are then clipped to ``H_c W`` and released in units of W, the gradients clipped to ``B s`` and
    released in units of s, and the rounds start at the intercept ``log W`` (curvature ``W I``). Every release's
    sensitivity holds for all inputs (`fedgdp.core.privacy.plan_fedirls`), and the noise of the last gradient,
    most of the budget, is the estimate's.
    """

    name, label, algorithm = "fedirls", "FedIRLS", "private Newton on whitened features"
    tags = MethodTags(backends=frozenset({REALDATA}), stacks_levels=False, single_output=True)
    settings_class = IRLSSettings
    #: The most Newton rounds of a non-private fit (mu = inf), which stops once a step is below 1e-13
    EXACT_ROUNDS = 100

    def rounds(self, s):
        """Communication rounds: the second moments, then ``T`` Newton rounds."""
        return s.T + 1

    def plan(self, data, s):
        """The releases (`fedgdp.core.privacy.plan_fedirls`): second moments, T gradients, T - 2 curvatures."""
        return privacy.plan_fedirls(B=data.plan_B, n=data.plan_n, T=s.T, moment_bound=moment_bound(data.d),
                                    hessian_bound=hessian_bound(data.model, data.d),
                                    count_clip=COUNT_CLIP if counts(data.model) else None)

    def run(self, be, s):
        """The rounds of the class docstring on the one fold of ``be``.

        Parameters
        ----------
        be : fedgdp.methods.Backend
            A real-data backend of one level (its ``data`` is read: the clients' rows).
        s : IRLSSettings

        Returns
        -------
        list of Fit
            One fit; its ``info`` holds the estimate's noise covariance and the last step
            (`fedgdp.api.diagnostics.diagnose_irls`).
        """
        fd = be.data
        if len(be.fds) != 1 or fd.k != 1:
            raise ValueError(f"FedIRLS fits one-output families (logistic, Poisson), one level at a time; got "
                             f"{fd.k} outputs")
        sigmas, ledgers = be.calibrate(self, s)
        sd = {spec.stage: np.asarray(a, float)[0] for spec, a in zip(self.plan(fd, s), sigmas)}
        noise, w, d = be.noise.take("Z"), fd.weights, fd.d
        draw = (lambda shape: np.zeros(shape)) if noise is None else noise.draw

        sd_m, C = sd[privacy.SECOND_MOMENTS], moment_bound(d)
        X, Y = stacked([np.asarray(x, float) for x in fd.X]), stacked([np.asarray(y, float) for y in fd.Y])
        groups = client_groups(fd.sizes)
        scale, spread_y = 1.0, 1.0              # counts: the count scale W and the residuals' scale s (public)
        counted = fd.private and privacy.COUNT_SCALE in sd
        if counted:
            released = released_sum(groups, w, sd[privacy.COUNT_SCALE], draw, (2, 1),
                                    lambda lo, hi, ends: count_moments(Y[lo:hi], ends, COUNT_CLIP))
            scale, spread_y = count_scales(released[:, 0], weighted_sd(w, sd[privacy.COUNT_SCALE]))
        M = released_sum(groups, w, sd_m, draw, (d, d),
                         lambda lo, hi, ends: grams(second_moment_rows(X[lo:hi], C), ends))
        L = whitening(M, 2.0 * math.sqrt(d) * weighted_sd(w, sd_m))
        Wt = np.linalg.inv(L).T                               # x~ = L^-1 x = Wt' x, theta = L^-T theta~
        xnorm, B = whitened_norms(X, Wt), fd.bound * spread_y  # whitening on the fly: no whitened copy
        Hc, w0 = hessian_bound(fd.model, d) * scale if fd.private else math.inf, curvature_at_zero(fd.model)
        theta, H, var, capped, by_noise = np.zeros((d, 1)), w0 * np.eye(d), [], False, False
        if counted and fd.intercept:            # counts: start at the intercept-only fit, where the curvature is W I
            theta, H = L.T @ np.r_[math.log(scale), np.zeros(d - 1)][:, None], scale * np.eye(d)
        start, H0 = theta[:, 0].copy(), float(H[0, 0])         # where the replays of `replayed_noise` start
        curv_sd: list[float] = []                             # each round's curvature noise sd per entry (nan: none)
        floor = EIGEN_FLOOR * w0
        rounds = s.T if fd.private else self.EXACT_ROUNDS      # non-private: Newton to convergence, at no cost

        def gradients(lo, hi, ends):
            return round_gradients(fd, theta, Wt, X[lo:hi], Y[lo:hi], xnorm[lo:hi], ends, B, spread_y)

        def curvatures(lo, hi, ends):
            return round_curvatures(fd.model, theta, Wt, X[lo:hi], Y[lo:hi], xnorm[lo:hi], ends, B, Hc, scale)

        for t in range(1, rounds + 1):
            sd_g = sd.get(f"{privacy.GRADIENT} (round {t})", np.zeros(fd.m))
            g = spread_y * released_sum(groups, w, sd_g, draw, (d, 1), gradients)
            curv = f"{privacy.CURVATURE} (round {t})"
            curv_sd.append(scale * weighted_sd(w, sd[curv]) if curv in sd else math.nan)
            if curv in sd or not fd.private:
                H = scale * released_sum(groups, w, sd.get(curv, np.zeros(fd.m)), draw, (d, d), curvatures)
            step = solve_floored(H, g, floor)
            decrement = math.sqrt(max(float(np.sum(g * step)), 0.0))   # Newton's decrement: far off, damp
            if decrement > DAMP_FROM:
                step /= 1.0 + decrement
            norm = float(np.linalg.norm(step))
            var.append(spread_y ** 2 * float(np.sum((w * sd_g) ** 2)))
            if norm > s.radius:
                step *= s.radius / norm
                if t >= rounds - 1:          # the last two steps capped: the estimate is not where Newton lands
                    capped = True            # ... and by the noise when its own norm is half the radius or more
                    Hinv = solve_floored(H, np.eye(d), floor)
                    by_noise = by_noise or math.sqrt(var[-1] * float(np.sum(Hinv ** 2))) >= s.radius / 2
            theta = theta - step
            if not fd.private and norm <= 1e-13 * max(1.0, float(np.linalg.norm(theta))):
                break
        Hinv = solve_floored(H, np.eye(d), floor)
        spread = Wt @ Hinv @ Hinv @ Wt.T                      # a gradient noise of unit variance, in theta
        fit = be.finish((Wt @ theta)[None], ledgers, self.comm(s, fd.m, d))[0]
        noise_cov, step_cov = var[-1] * spread, (var[-1] + var[-2 if len(var) > 1 else -1]) * spread
        if fd.private:                                        # the rounds replayed: what the noise does to them
            noise_cov, step_cov = (Wt @ c @ Wt.T for c in
                                   replayed_noise(H, theta[:, 0], var, curv_sd, H0, floor, s.radius, start))
        fit.info = {"noise_cov": noise_cov, "last_step": (Wt @ step)[:, 0], "last_step_cov": step_cov,
                    "capped": capped, "capped_by_noise": by_noise, "rounds": t, "clip": B,
                    "count_scale": scale}
        return [fit]

    def comm(self, s, m, dk):
        """Floats up per client: the moments' and curvatures' upper triangles, T gradients; down: T broadcasts."""
        tri = dk * (dk + 1) // 2
        return {"rounds": self.rounds(s), "floats_up": m * (tri * (s.T - 1) + dk * s.T),
                "floats_down": m * dk * s.T}


# ------------------------------------------------ the per-client releases and the server's algebra
#: The raw design's rows are clipped to ``||x||^2 <= MOMENT_CLIP d`` for the second moments (standardised
#: features have ``E ||x||^2 = d``; four times it keeps correlated designs' long tails)
MOMENT_CLIP = 4.0
#: A Newton step whose decrement ``sqrt(g' H^-1 g)`` exceeds this is damped by ``1 / (1 + decrement)``
#: (damped Newton: globally convergent where the likelihood is self-concordant; near the MLE the decrement
#: is the noise's, below it, and the steps are full)
DAMP_FROM = 1.0
#: `hessian_bound`'s multiple of ``W_0 d``
HESSIAN_CLIP = 2.25
#: For counts, `hessian_bound` is this many times larger (in count-scale units): a count's curvature
#: ``mu_j ||x~_j||^2`` keeps its rows of a rare binary feature (a few per cent of the rows, far out in
#: standardised units) unclipped, whose curvature the Newton steps need
COUNT_HESSIAN_ROOM = 5.0
#: Counts: the clip ``c`` of y in the count-scale release (`count_moments`)
COUNT_CLIP = 20.0
#: Counts: the released mean count is floored at this (public), so the count scale is positive
COUNT_FLOOR = 0.01
#: The released second moments' and curvatures' eigenvalues are floored at this share of their public scale
EIGEN_FLOOR = 0.05
#: The released second moments are shrunk toward the identity (the public model) with weight
#: ``nu / (nu + SHRINK_AT)``, ``nu`` the forecast operator norm of their noise
SHRINK_AT = 0.5


def moment_bound(d: int) -> float:
    """``C = MOMENT_CLIP d``, the clip of ``||x||^2`` for the second moments.

    Parameters
    ----------
    d : int
        Design columns.
    """
    return MOMENT_CLIP * d


def curvature_at_zero(model) -> float:
    """``W_0``, the family's curvature at theta = 0 (1/4 logistic, 1 Poisson).

    Parameters
    ----------
    model : fedgdp.core.glm.GLM
    """
    return float(model.curvature_bound(model.mean(np.zeros((1, model.k))))[0])


def hessian_bound(model, d: int) -> float:
    """``H_c = HESSIAN_CLIP W_0 d``: the per-sample curvature clip on the whitened design (whose
    rows have ``E ||x~||^2 = d``), so a row up to 1.5 times the typical norm keeps its curvature at 0;
    for counts `COUNT_HESSIAN_ROOM` times it, in count-scale units (the curvature released is divided
    by the released count scale W, so ``H_c W`` clips it).

    Parameters
    ----------
    model : fedgdp.core.glm.GLM
    d : int
        Design columns.
    """
    return HESSIAN_CLIP * (COUNT_HESSIAN_ROOM if counts(model) else 1.0) * curvature_at_zero(model) * d


def counts(model) -> bool:
    """Whether ``model`` is a count model (Poisson), whose FedIRLS releases its count scale first.

    Parameters
    ----------
    model : fedgdp.core.glm.GLM
    """
    return isinstance(model, Poisson)


def count_moments(Y: np.ndarray, ends, c: float) -> np.ndarray:
    """Each client's ``(mean_j min(y_j, c), mean_j min(y_j, c)^2)`` (clients, 2, 1), y first clipped to
    ``[0, c]`` (a non-finite y to the nearer end, NaN to 0): the count-scale release, sensitivity
    ``c sqrt(1 + c^2) / n`` (`fedgdp.core.privacy.plan_fedirls`).

    Parameters
    ----------
    Y : ndarray of shape (n, 1)
        The counts of consecutive clients.
    ends : sequence of int
        Each client's end row.
    c : float
        The clip.
    """
    y = np.clip(np.nan_to_num(np.asarray(Y, float)[:, 0], nan=0.0, posinf=c, neginf=0.0), 0.0, c)
    out, lo = np.empty((len(ends), 2, 1)), 0
    for i, hi in enumerate(ends):
        out[i, :, 0] = np.mean(y[lo:hi]), np.mean(y[lo:hi] ** 2)
        lo = hi
    return out


def count_scales(released: np.ndarray, noise_sd: float = 0.0) -> tuple[float, float]:
    """The count scale ``W`` (the released mean count, within ``[COUNT_FLOOR, COUNT_CLIP]`` and at least twice
    its noise sd: a mean below that is unresolved, and a curvature taken too small makes the Newton steps
    blow up, one taken too large only shortens them) and the
    residuals' scale ``s = max(1, sqrt(released mean square count))``, from the released count moments
    (public): the curvature is about ``W`` at the intercept-only fit, and counts of root mean square s
    have residuals of about s, so B s clips the gradients of overdispersed counts no harder than B
    clips those of counts near 1.

    Parameters
    ----------
    released : ndarray of shape (2,)
        The weighted sum of the clients' released count moments.
    noise_sd : float
        The released mean's noise sd, ``sqrt(sum_i w_i^2 sigma_i^2)`` (public).
    """
    mean, square = float(released[0]), float(released[1])
    return (min(max(mean, COUNT_FLOOR, 2.0 * noise_sd), COUNT_CLIP),
            min(max(1.0, math.sqrt(max(square, 0.0))), COUNT_CLIP))


def client_second_moments(X: np.ndarray, C: float) -> np.ndarray:
    """``mean_j a_j^2 x_j x_j'`` (d, d), rows scaled by the one clipping rule to ``||a_j x_j|| <= sqrt(C)``
    (`fedgdp.core.privacy.clip_factors`; zero when not finite).

    Parameters
    ----------
    X : ndarray of shape (n, d)
    C : float
        The bound on ``||a_j x_j||^2``.
    """
    A = second_moment_rows(X, C)
    return A.T @ A / A.shape[0]


def second_moment_rows(X: np.ndarray, C: float) -> np.ndarray:
    """The rows ``a_j x_j`` of `client_second_moments` (n, d).

    Parameters
    ----------
    X : ndarray of shape (n, d)
    C : float
        The bound on ``||a_j x_j||^2``.
    """
    X = np.asarray(X, float)
    a = privacy.clip_factors(privacy.row_norms(X), math.sqrt(C), X.shape[1])
    with np.errstate(over="ignore", invalid="ignore"):
        A = X * a[:, None]
    A[a == 0] = 0.0                     # inf * 0 is NaN: the rule says zero
    return A


def client_curvature(model, theta: np.ndarray, X: np.ndarray, Hc: float, Y=None, B: float = math.inf) -> np.ndarray:
    """The mean of per-sample Hessians at ``theta`` clipped to operator norm ``Hc``
    (`fedgdp.core.glm.GLM.clipped_hessian_rows`): sensitivity ``sqrt(2) Hc / n``.

    Parameters
    ----------
    model : fedgdp.core.glm.GLM
    theta : ndarray of shape (d, k)
    X : ndarray of shape (n, d)
    Hc : float
    Y, B : ndarray of shape (n, k) and float, optional
        With both, a row whose gradient the clip B scales is left out: the clipped gradient's
        derivative there is 0 (its size is fixed at B), so the released curvature is the Jacobian
        of the gradient the rounds release, and the Newton step does not overshoot.
    """
    aX, c = curvature_rows(model, theta, X, Hc, Y, B)
    if c.shape[1] != 1:
        with np.errstate(over="ignore", invalid="ignore"):
            return model.hessian(theta, aX, P=c)
    return grams(aX, [aX.shape[0]], c[:, 0])[0]


def whitened_norms(X: np.ndarray, Wt: np.ndarray) -> np.ndarray:
    """Upper bounds on the whitened rows' norms ``||Wt' x_j||`` (n,), a block of rows at a time (no copy of X's
    size): the norm of the computed row ``fl(Wt' x_j)`` plus twice ``gamma_d ||Wt||_F ||x_j||``.

    A computed product's error is at most ``gamma_d |Wt|' |x_j|`` entrywise (``gamma_d = d u / (1 - d u)``,
    u = 2^-53, any summation order; Higham, *Accuracy and Stability of Numerical Algorithms*, 2002, §3.1), whose
    norm is at most ``gamma_d ||Wt||_F ||x_j||``; doubling it covers the two roundings of the bound itself.
    So the exact whitened row's norm is below the bound, and a factor clipped against it clips the exact
    per-row gradient and curvature (`client_gradients`). A non-finite row gives inf or NaN (clipped to zero).

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The design, unwhitened.
    Wt : ndarray of shape (d, d)
        The whitening, ``x~ = Wt' x``.
    """
    d = Wt.shape[0]
    gamma = d * privacy.U64 / (1.0 - d * privacy.U64)
    extra = 2.0 * gamma * float(np.linalg.norm(Wt))

    def norms(A):                          # overflow-free where the plain sum of squares is not finite
        return privacy.row_norms(A, np.sqrt(np.einsum("nd,nd->n", A, A)))

    def bound(A):
        with np.errstate(over="ignore", invalid="ignore"):
            return norms(A @ Wt) + extra * norms(A)

    return by_blocks(bound, X)


def round_gradients(fd, theta: np.ndarray, Wt: np.ndarray, X: np.ndarray, Y: np.ndarray, xnorm: np.ndarray, ends,
                    B: float, s: float = 1.0) -> np.ndarray:
    """A Newton round's gradient releases before noise (clients, d, 1), as the fit computes them: clipped to
    ``B`` (the clip times the residuals' scale s; counts) on the whitened design (`client_gradients`), in units
    of s, so each row's term has norm at most ``B / s``, the plan's clip (the audit moves records through this).

    Parameters
    ----------
    fd, theta, Wt, X, Y, xnorm, ends
        As `client_gradients`'.
    B : float
        The gradients' clip (``fd.bound`` times s).
    s : float
        The residuals' scale (1 but for counts; `count_scales`).
    """
    return client_gradients(fd, theta, Wt, X, Y, xnorm, ends, B) / s


def round_curvatures(model, theta: np.ndarray, Wt: np.ndarray, X: np.ndarray, Y: np.ndarray, xnorm: np.ndarray,
                     ends, B: float, Hc: float, W: float = 1.0) -> np.ndarray:
    """A Newton round's curvature releases before noise (clients, d, d), as the fit computes them: each row's
    term clipped to ``Hc`` (the plan's bound times the count scale W; counts) on the whitened design, the rows
    whose gradient ``B`` clips left out (`client_curvatures`), in units of W (each term at most ``Hc / W``, the
    plan's bound; the audit moves records through this).

    Parameters
    ----------
    model, theta, Wt, X, Y, xnorm, ends, B
        As `client_curvatures`'.
    Hc : float
        The curvature's clip (`hessian_bound` times W).
    W : float
        The count scale (1 but for counts; `count_scales`).
    """
    return client_curvatures(model, theta, Wt, X, Hc, Y, B, xnorm, ends) / W


def client_gradients(fd, theta: np.ndarray, Wt: np.ndarray, X: np.ndarray, Y: np.ndarray, xnorm: np.ndarray,
                     ends, B: float | None = None) -> np.ndarray:
    """Each client's clipped gradient on the whitened design ``x~ = Wt' x`` at the whitened ``theta`` (clients,
    d, 1), computed on the unwhitened rows: ``Wt' mean_j f_j r_j x_j``.

    The privacy argument (whitening on the fly). Row j's clipped gradient on the whitened design is
    ``f_j r_j x~_j``: ``r_j`` its residual at ``x~_j' theta = x_j' (Wt theta)`` and ``f_j`` the one clipping
    rule's factor (`fedgdp.realdata.clipping.clip_residuals`) for the norm ``xnorm_j |r_j|``, ``xnorm_j`` an
    upper bound on ``||x~_j||`` (`whitened_norms`). So every row's term has norm at most B in exact
    arithmetic, as the sensitivity of `fedgdp.core.privacy.plan_fedirls` takes it, and the client's mean
    of them is, by linearity, ``Wt' mean_j f_j r_j x_j``: the release is the same function of the client's
    rows as when the whitened rows were materialised; its computed value differs by the rounding of the sum
    and of the (d, d) product with ``Wt`` (about ``d u`` relative), which the audit's tolerance covers
    (`fedgdp.audit.search.RATIO_TOL`). The audit moves records through this function
    (`fedgdp.audit.glm`).

    Parameters
    ----------
    fd : fedgdp.realdata.FoldData
        The fold (its model and clipping bound).
    theta : ndarray of shape (d, 1)
        The broadcast whitened parameter.
    Wt : ndarray of shape (d, d)
    X, Y : ndarray of shapes (n, d) and (n, 1)
        Consecutive clients' unwhitened rows and targets.
    xnorm : ndarray of shape (n,)
        `whitened_norms` of X.
    ends : sequence of int
        Each client's end row.
    B : float or None
        The clip instead of the fold's bound (FedIRLS on counts: `FoldData.clipped_residuals`).
    """
    res = fd.clipped_residuals(Wt @ theta, X, Y, xnorm, B)
    return Wt.T @ cross_means(X, res, ends)


def client_curvatures(model, theta: np.ndarray, Wt: np.ndarray, X: np.ndarray, Hc: float, Y: np.ndarray, B: float,
                      xnorm: np.ndarray, ends) -> np.ndarray:
    """Each client's clipped curvature (`client_curvature`) on the whitened design at the whitened ``theta``
    (clients, d, d), computed on the unwhitened rows: ``Wt' mean_j w_j a_j^2 x_j x_j' Wt``.

    Row j's factor ``a_j`` clips ``w_j a_j^2 ||x~_j||^2 <= H_c`` against `whitened_norms`' bound, and the rows
    whose gradient is clipped are left out as in `curvature_rows`: each row's whitened term has operator norm
    at most ``H_c`` in exact arithmetic, and by linearity the mean is ``Wt'`` (the unwhitened mean) ``Wt``
    (the argument of `client_gradients`).

    Parameters
    ----------
    model : fedgdp.core.glm.GLM
    theta : ndarray of shape (d, 1)
    Wt : ndarray of shape (d, d)
    X : ndarray of shape (n, d)
    Hc : float
    Y : ndarray of shape (n, 1)
    B : float
        The gradients' clipping bound.
    xnorm : ndarray of shape (n,)
        `whitened_norms` of X.
    ends : sequence of int
        Each client's end row.
    """
    aX, c = curvature_rows(model, Wt @ theta, X, Hc, Y, B, xnorm)
    return congruent(grams(aX, ends, c[:, 0]), Wt)


def congruent(A: np.ndarray, Wt: np.ndarray) -> np.ndarray:
    """``Wt' A_i Wt`` of each (d, d) matrix of a stack (clients, d, d), as two products of the stack's rows.

    Parameters
    ----------
    A : ndarray of shape (clients, d, d)
    Wt : ndarray of shape (d, d)
    """
    c, d = A.shape[0], Wt.shape[0]
    K = (A.reshape(c * d, d) @ Wt).reshape(c, d, d)                      # A_i Wt
    return (K.transpose(0, 2, 1).reshape(c * d, d) @ Wt).reshape(c, d, d).transpose(0, 2, 1)   # (K_i' Wt)'


def curvature_rows(model, theta: np.ndarray, X: np.ndarray, Hc: float, Y=None, B: float = math.inf, xnorm=None):
    """The rows ``a_j x_j`` (n, d) of `client_curvature` and their weights: ``b''(s_j)`` (n, 1) for one
    output (the mean of ``w_j a_j^2 x_j x_j'`` is the curvature), else the fitted means P (n, k).

    Parameters
    ----------
    model, theta, X, Hc, Y, B
        As `client_curvature`'s.
    xnorm : ndarray of shape (n,) or None
        ``privacy.row_norms(X)``, when computed already, or a bound on the norms of the rows in the
        coordinates they are clipped in (`whitened_norms`), used by both clips.
    """
    if Y is not None and math.isfinite(B):
        X = np.asarray(X, float)
        with np.errstate(over="ignore", invalid="ignore"):
            R = np.asarray(model.residuals(theta, X, Y), float).reshape(X.shape[0], -1)
            norms = (privacy.row_norms(X) if xnorm is None else xnorm) * privacy.row_norms(R)
        keep = privacy.clip_factors(norms, B, X.shape[1] * R.shape[1]) == 1.0
        X = X * keep[:, None]
    aX, P = model.clipped_hessian_rows(theta, X, Hc, xnorm)
    if P.shape[1] != 1:
        return aX, P
    with np.errstate(over="ignore", invalid="ignore"):
        return aX, model.curvature(P, np.ones_like(P))            # one output: b''(s_j)


def weighted_sd(w: np.ndarray, sd: np.ndarray) -> float:
    """The noise sd per entry of ``sum_i w_i (R_i + sd_i Z_i)``: ``sqrt(sum_i w_i^2 sd_i^2)`` (`released_sum`).

    Parameters
    ----------
    w, sd : ndarray of shape (m,)
        The clients' weights and noise sds.
    """
    return float(np.sqrt(np.sum((w * sd) ** 2)))


def released_sum(groups: list, w: np.ndarray, sd: np.ndarray, draw, shape: tuple, per_client) -> np.ndarray:
    """``sum_i w_i (R_i + sd_i Z_i)``: each client's release, its noise drawn client by client in order
    (symmetric for a square ``shape``), summed in client order.

    Parameters
    ----------
    groups : list
        `client_groups`.
    w, sd : ndarray of shape (m,)
        The clients' weights and noise sds.
    draw : callable
        Standard normals of a shape.
    shape : tuple
        One release's shape: (d, d) (symmetric noise) or (d, 1).
    per_client : callable
        ``(first row, end row, ends) ->`` the group's releases before noise (clients, *shape).
    """
    total, i = 0, 0
    for lo, hi, ends in groups:
        R = per_client(lo, hi, ends)
        Z = draw((len(ends),) + shape)
        Z = symmetric(Z) if shape[0] == shape[1] else Z
        j = i + len(ends)
        total = sum(w[i:j, None, None] * (R + sd[i:j, None, None] * Z), start=total)   # client by client
        i = j
    return np.asarray(total)


def symmetric(Z: np.ndarray) -> np.ndarray:
    """The symmetric matrix of ``Z``'s upper triangle (the noise of a released symmetric matrix); a stack of
    them for ``Z`` of shape (..., D, D).

    Parameters
    ----------
    Z : ndarray of shape (..., D, D)
    """
    U = np.triu(Z)
    return U + np.swapaxes(np.triu(U, 1), -1, -2)


def whitening(M: np.ndarray, noise_norm: float) -> np.ndarray:
    """The lower-triangular L with ``L L' = M_s``: the released second moments ``M`` shrunk toward
    the identity by ``nu / (nu + SHRINK_AT)`` (``nu = noise_norm``, public) and floored at `EIGEN_FLOOR`.

    Parameters
    ----------
    M : ndarray of shape (d, d)
    noise_norm : float
        The forecast operator norm of M's noise (public).
    """
    lam = noise_norm / (noise_norm + SHRINK_AT)
    Ms = (1.0 - lam) * (M + M.T) / 2.0 + lam * np.eye(len(M))
    w, V = np.linalg.eigh(Ms)
    Ms = (V * np.maximum(w, EIGEN_FLOOR)) @ V.T
    return np.linalg.cholesky((Ms + Ms.T) / 2.0)


#: Replays of the Newton rounds behind `replayed_noise` (each a full run of T rounds on the surrogate)
REPLAYS = 400
#: The public seed of those replays: post-processing of released values, so a known seed costs nothing
REPLAY_SEED = 20261207
#: Above this many coefficients the replays (R T eigendecompositions of d x d) give way to the last
#: gradient's noise through the released curvature
REPLAY_MAX_D = 64


def replayed_noise(H: np.ndarray, theta: np.ndarray, grad_var: list, curv_sd: list, w0: float, floor: float,
                   radius: float, start: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The estimate's noise covariance in the whitened coordinates, by replaying the Newton rounds on a
    public surrogate: the quadratic with curvature ``H`` (the last released curvature, floored) whose
    minimum is the released ``theta``, started where the fit started, with every round's noise drawn at
    its public sd (the gradients' and the curvatures', `REPLAYS` times, seed `REPLAY_SEED`) and the same
    floors, damping and radius as the fit. Returns the mean of ``(theta_T - theta)(theta_T - theta)'``
    over the replays, and the covariance of their last steps (the noise a converged fit's last step
    carries, which the status reads: `fedgdp.api.diagnostics.diagnose_irls`). The first holds the last
    gradient's noise, what earlier rounds leave where the noisy curvature does not contract them, and
    the steps along curvature directions the noise swamps (small clients, rare binary features), which
    the last gradient's noise alone (``grad_var[-1] H^-2``) misses. Costs no privacy: it reads released
    values and public sds only.

    Parameters
    ----------
    H : ndarray of shape (d, d)
        The last released curvature (whitened coordinates).
    theta : ndarray of shape (d,)
        The released estimate (whitened coordinates).
    grad_var : list of float
        Each round's gradient noise variance per coordinate, ``sum_i w_i^2 sd_i^2``.
    curv_sd : list of float
        Each round's curvature noise sd per entry (nan: the round reuses the previous curvature).
    w0, floor, radius : float
        The first round's public curvature (a multiple of I), the eigenvalue floor and the step radius of
        the fit.
    start : ndarray of shape (d,) or None
        The fit's start (whitened; counts: the intercept-only fit); None: 0.

    Returns
    -------
    noise_cov, step_cov : ndarray of shape (d, d)
    """
    d = len(theta)
    if d > REPLAY_MAX_D:
        Hinv = solve_floored(H, np.eye(d), floor)
        return grad_var[-1] * Hinv @ Hinv, (grad_var[-1] + grad_var[-2 if len(grad_var) > 1 else -1]) * Hinv @ Hinv
    rng = np.random.default_rng(REPLAY_SEED)
    w, V = np.linalg.eigh((H + H.T) / 2.0)
    A = (V * np.maximum(w, floor)) @ V.T
    R = REPLAYS
    x = np.zeros((R, d)) if start is None else np.tile(np.asarray(start, float), (R, 1))
    ev, U = np.full((R, d), float(w0)), None            # the current curvature's eigenpairs (U None: w0 I)
    for gv, cs in zip(grad_var, curv_sd):
        g = (x - theta) @ A + math.sqrt(gv) * rng.standard_normal((R, d))
        if math.isfinite(cs):                            # a released curvature; else the previous one
            ev, U = np.linalg.eigh(A + cs * symmetric(rng.standard_normal((R, d, d))))
        step = (g / np.maximum(ev, floor) if U is None else
                np.einsum("rij,rj->ri", U, np.einsum("rji,rj->ri", U, g) / np.maximum(ev, floor)))
        dec = np.sqrt(np.maximum(np.sum(g * step, axis=1), 0.0))
        step /= np.where(dec > DAMP_FROM, 1.0 + dec, 1.0)[:, None]
        norm = np.linalg.norm(step, axis=1)
        step *= np.minimum(1.0, radius / np.maximum(norm, 1e-300))[:, None]
        x = x - step
    E, S = x - theta, step - step.mean(axis=0)
    return E.T @ E / R, S.T @ S / R


def solve_floored(H: np.ndarray, g: np.ndarray, floor: float) -> np.ndarray:
    """``H_f^{-1} g``, ``H_f`` the symmetric part of H with eigenvalues floored at ``floor``.

    Parameters
    ----------
    H : ndarray of shape (D, D)
    g : ndarray of shape (D,) or (D, p)
    floor : float
    """
    w, V = np.linalg.eigh((H + H.T) / 2.0)
    return V @ ((V.T @ g) / np.maximum(w, floor)[:, None] if g.ndim == 2 else (V.T @ g) / np.maximum(w, floor))
