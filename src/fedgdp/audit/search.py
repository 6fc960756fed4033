"""The audit's search (`fedgdp.audit`): its rows and targets, the change of a release,
the best pair found so far, the replacement records and the local search."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core import privacy

__all__ = ["AuditRow", "AuditTarget", "change", "SCALES", "AUDIT_B", "BIG", "RANDOM_DIRECTIONS", "RATIO_TOL"]

BIG = float(np.finfo(float).max)
#: Row norms the adversary tries, up to the float maximum.
SCALES = (0.0, 1.0, 3.0, 30.0, 1e3, 1e100, 1e300, BIG)
#: The audit's criterion is ``ratio <= 1 + RATIO_TOL``: a release is a sum over n records in float64 and
#: the audit subtracts two, so a few units of 2^-53 of the release (up to n/2 sensitivities) show.
RATIO_TOL = 1e-12
#: The public clipping bound of the audit's adversarial bases (any value: the releases scale with it).
AUDIT_B = 1.0


@dataclass(frozen=True)
class AuditRow:
    """One release of one method: ``observed`` beside ``recorded`` (``ratio``; inf when a release
    was not finite), ``budget`` pairs evaluated, the best ``pair``, the settings, and
    ``ratio_finite`` among pairs with finite releases.
    """

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
    """The settings of one audited method: ``kind`` (``simulation``, ``realdata``, ``nn``,
    ``inference``), ``model``, privacy mode, tau1, Hessian clip, clipping rule (a rule object or its dict form;
    B held public: fixed, else `AUDIT_B`), the Newton solver, a CNN's ``nn`` settings and ``reading``.
    """

    kind: str
    method: str
    model: str
    mode: str = "paper"
    tau1: float | None = None
    hessian_clip: float = privacy.HESSIAN_CLIP
    clip: privacy.Fixed | privacy.Quantile | privacy.PrivateQuantile | dict = field(
        default_factory=lambda: dict(privacy.DEFAULT_CLIP))
    newton: dict | None = None
    nn: dict | None = None
    reading: str = ""

    @property
    def B(self) -> float | None:
        """The public bound of a fixed clipping rule, or None (the audit chooses one)."""
        rule = privacy.clip_rule(self.clip)
        return float(rule.value) if isinstance(rule, privacy.Fixed) else None

    def label(self) -> str:
        """The settings audited, as text."""
        if self.kind == "inference":
            return f"B={self.B or AUDIT_B:g}, H_c=B^2, estimate public"
        if self.kind == "nn":
            text = ", ".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}"
                             for k, v in (self.nn or {}).items())
            return f"reading {self.reading}: {text}" if self.reading else text
        parts = [f"tau1={self.tau1:g}", f"H_c={self.hessian_clip:g} tau1", f"clip={privacy.clip_rule(self.clip).rule}"]
        if self.newton:
            parts.append(f"solver={self.newton['solver']}")
            if self.newton["solver"] == "cg":
                parts.append(f"cg_tol={self.newton['cg_tol']:g}")
        return ", ".join(parts)


def _mode_label(meth, mode: str) -> str:
    """The privacy mode of a row: ``any`` for a method that is the same in both."""
    return mode if len(meth.privacy_modes()) > 1 else "any"


def change(a, b) -> float:
    """``||a - b||`` (Frobenius), or inf when either release is not finite or the norm overflows.

    Parameters
    ----------
    a, b : array-like
        Two releases of the same shape.
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

