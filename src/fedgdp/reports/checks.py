"""The checks and verdict rules of the claims report (`fedgdp.reports.claims`).

Every check ends in one of three outcomes (`OUTCOMES`):

- ``agree``: the data favour the claim beyond Monte Carlo error;
- ``contradict``: the data favour the opposite beyond Monte Carlo error;
- ``tie``: neither (a difference within `Z_TIE` combined standard errors, or
  a confidence interval that covers both readings).

Verdicts (`VERDICTS`) follow from the counts by fixed rules (`subclaim_verdict`,
`combine`). The thresholds are module constants (`THRESHOLDS`), chosen once, before the
default run was read, and printed in the report.

Statistics: `z_diff` of two cells' means with their Monte Carlo SEs
(`fedgdp.simulation.summary`); the methods of a cell share their replicate data, so their
errors are positively correlated and this independent-samples SE is conservative (a tie
is called more often, never less). `trend` over the cells of a group; `median_diff_z`
for real data (the same clients and splits for every method; a fixed seed).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

__all__ = ["VERDICTS", "OUTCOMES", "THRESHOLDS", "Z_TIE", "CI_LEVEL", "HOLDS_SHARE", "PARTLY_SHARE",
           "FLAT_SLOPE", "ACC_TOL", "BOOT_REPS", "BOOT_SEED", "Check", "Trend", "z_diff", "compare_less",
           "trend", "subclaim_verdict", "combine", "median_diff_z"]

VERDICTS = ("holds", "partly", "fails", "not run")
OUTCOMES = ("agree", "tie", "contradict")

# ------------------------------------------------------------------ thresholds
Z_TIE = 2.0
"""A difference counts only beyond this many combined standard errors (about a 95%
two-sided level for one comparison)."""
CI_LEVEL = 0.95
"""Confidence level of OLS slopes."""
HOLDS_SHARE = 0.9
"""A sub-claim holds when at least this share of its checks agree and none contradicts."""
PARTLY_SHARE = 0.5
"""A sub-claim fails when fewer than this share of its checks agree, or more checks
contradict than agree; otherwise (between the two rules) it holds partly."""
FLAT_SLOPE = 0.25
"""|log-log slope| below which MSE counts as flat: less than a factor 10^0.25 = 1.8
over a tenfold range of x. A sharp rise is a slope significantly above it."""
ACC_TOL = 0.01
"""C6: accuracy within this (absolute) of another method's counts as competitive."""
BOOT_REPS = 2000
"""Bootstrap resamples for the standard error of a difference of medians (C5)."""
BOOT_SEED = 20260511
"""Fixed seed of the bootstrap (results do not depend on the clock)."""

THRESHOLDS = {
    "Z_TIE": (Z_TIE, "a difference (of means, medians or slopes) counts only beyond this many "
                     "combined standard errors; otherwise it is a tie"),
    "CI_LEVEL": (CI_LEVEL, "confidence level of OLS slopes (log MSE on log x)"),
    "HOLDS_SHARE": (HOLDS_SHARE, "a sub-claim holds when at least this share of its checks "
                                 "agree and none contradicts"),
    "PARTLY_SHARE": (PARTLY_SHARE, "a sub-claim fails when fewer than this share of its checks "
                                   "agree or more contradict than agree; otherwise it holds partly"),
    "FLAT_SLOPE": (FLAT_SLOPE, "flat: the slope's CI lies inside (-FLAT_SLOPE, FLAT_SLOPE); sharp "
                               "rise: CI above FLAT_SLOPE (MSE x1.8 per tenfold x)"),
    "ACC_TOL": (ACC_TOL, "C6: an accuracy within this of another method's counts as competitive"),
    "BOOT_REPS": (BOOT_REPS, "C5: paired bootstrap resamples of clients for the SE of a median "
                             "difference (seed BOOT_SEED)"),
}



@dataclass(frozen=True)
class Check:
    """One comparison: its outcome (one of `OUTCOMES`) and a short text with its numbers."""

    outcome: str
    text: str




def _num(x: float) -> str:
    """A number with 3 significant digits (scientific notation when small or large)."""
    if x is None or not np.isfinite(x):
        return "nan" if x is None or np.isnan(x) else ("inf" if x > 0 else "-inf")
    return f"{x:.3g}"


def _outcome(z: float, sign: int = 1) -> str:
    """``agree`` when ``sign * z > Z_TIE``, ``contradict`` when ``sign * z < -Z_TIE``, else ``tie``."""
    if np.isnan(z):
        return "tie"
    if sign * z > Z_TIE:
        return "agree"
    if sign * z < -Z_TIE:
        return "contradict"
    return "tie"


def z_diff(a: float, se_a: float, b: float, se_b: float) -> float:
    """``(a - b) / sqrt(se_a^2 + se_b^2)``; NaN when ``a`` or ``b`` is not finite or a standard error is
    missing; when both SEs are zero, 0 if the values are equal, else +-inf.

    Parameters
    ----------
    a, b : float
        The two means.
    se_a, se_b : float
        Their standard errors.
    """
    if not (np.isfinite(a) and np.isfinite(b)) or np.isnan(se_a) or np.isnan(se_b):
        return float("nan")
    se = math.hypot(se_a, se_b)
    if se == 0:
        return 0.0 if a == b else math.copysign(math.inf, a - b)
    return (a - b) / se


def compare_less(a: float, se_a: float, b: float, se_b: float) -> str:
    """Outcome of the claim ``a < b`` (means with Monte Carlo SEs): ``agree`` when ``z < -Z_TIE``,
    ``contradict`` when ``z > Z_TIE``, ``tie`` otherwise (and when z is NaN).

    Parameters
    ----------
    a, b : float
        The two means.
    se_a, se_b : float
        Their Monte Carlo standard errors.
    """
    return _outcome(z_diff(a, se_a, b, se_b), sign=-1)


@dataclass(frozen=True)
class Trend:
    """OLS slope of log y on log x: estimate, its SE, CI, and the number of points."""

    slope: float
    se: float
    lo: float
    hi: float
    points: int

    def text(self) -> str:
        if np.isnan(self.lo):
            return f"{_num(self.slope)} ({self.points} pts)"
        return f"{self.slope:+.2f} [{self.lo:+.2f}, {self.hi:+.2f}]"


def trend(x, y, y_se=None, *, log_y: bool = True) -> Trend:
    """Slope of ``log y`` (or ``y``) on ``log x`` by OLS with a `CI_LEVEL` CI.

    With three or more distinct x: statsmodels OLS (t interval, ``points - 2`` df).
    With two: the slope through the two means at the ends; its SE from ``y_se`` by the
    delta method (``se(log y) = se / y``), the CI ``slope +- Z_TIE se``. Fewer, or a
    non-positive y on the log scale: NaN slope.

    Parameters
    ----------
    x : array-like of shape (n,)
        The x values (positive; others are dropped, with their y).
    y : array-like of shape (n,)
        The y values (positive when ``log_y``; others are dropped).
    y_se : array-like of shape (n,), or None, default=None
        Standard errors of ``y``, used only with two points (None: NaN SE and CI then).
    log_y : bool, default=True
        Regress ``log y``; False: ``y`` itself.
    """
    import statsmodels.api as sm

    x, y = np.asarray(x, float), np.asarray(y, float)
    se_y = np.full_like(y, np.nan) if y_se is None else np.asarray(y_se, float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & ((y > 0) if log_y else True)
    x, y, se_y = x[ok], y[ok], se_y[ok]
    nan = Trend(float("nan"), float("nan"), float("nan"), float("nan"), int(x.size))
    lx, ly = np.log(x), (np.log(y) if log_y else y)
    if np.unique(x).size < 2:
        return nan
    if np.unique(x).size == 2 and x.size == 2:
        i, j = np.argmin(x), np.argmax(x)
        slope = (ly[j] - ly[i]) / (lx[j] - lx[i])
        s = se_y / y if log_y else se_y
        se = math.hypot(s[i], s[j]) / (lx[j] - lx[i])
        return Trend(float(slope), float(se), float(slope - Z_TIE * se), float(slope + Z_TIE * se), 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sm.OLS(ly, sm.add_constant(lx)).fit()
    lo, hi = (float(v) for v in res.conf_int(1 - CI_LEVEL)[1])
    return Trend(float(res.params[1]), float(res.bse[1]), lo, hi, int(x.size))


def _trend_outcome(t: Trend, direction: int) -> str:
    """Outcome of "the slope has the sign of ``direction``" (+1 rises, -1 falls)."""
    if np.isnan(t.lo):
        return "tie"
    lo, hi = sorted((direction * t.lo, direction * t.hi))
    if lo > 0:
        return "agree"
    if hi < 0:
        return "contradict"
    return "tie"


def subclaim_verdict(checks: list[Check]) -> str:
    """Verdict of one sub-claim from its checks (rules in `THRESHOLDS`): one of `VERDICTS`, ``not run`` when
    there are no checks.

    Parameters
    ----------
    checks : list of Check
        The sub-claim's checks.
    """
    if not checks:
        return "not run"
    n = len(checks)
    agree = sum(c.outcome == "agree" for c in checks)
    contra = sum(c.outcome == "contradict" for c in checks)
    if agree / n >= HOLDS_SHARE and contra == 0:
        return "holds"
    if agree / n < PARTLY_SHARE or contra > agree:
        return "fails"
    return "partly"


def combine(verdicts: list[str]) -> str:
    """Verdict of a claim from its sub-claims': holds when all hold, fails when all fail,
    partly otherwise; sub-claims not run are left out (all not run: not run).

    Parameters
    ----------
    verdicts : list of str
        The sub-claims' verdicts (of `VERDICTS`).
    """
    run = [v for v in verdicts if v != "not run"]
    if not run:
        return "not run"
    if all(v == "holds" for v in run):
        return "holds"
    if all(v == "fails" for v in run):
        return "fails"
    return "partly"


def _tally(checks: list[Check]) -> str:
    n = len(checks)
    count = {o: sum(c.outcome == o for c in checks) for o in OUTCOMES}
    return f"{count['agree']}/{n} agree, {count['tie']} tie, {count['contradict']} contradict"


def _subclaim_line(name: str, checks: list[Check], detail: str = "", show: str = "not_agree",
                   limit: int = 16) -> tuple[str, str]:
    """(verdict, evidence line) of a sub-claim: the tally, the detail, and the checks that
    did not agree (or all of them with ``show="all"``), at most ``limit``."""
    verdict = subclaim_verdict(checks)
    if not checks:
        return verdict, f"{name}: not run (no cells to test{'; ' + detail if detail else ''})"
    shown = checks if show == "all" else [c for c in checks if c.outcome != "agree"]
    parts = [f"{name}: {verdict} ({_tally(checks)})"]
    if detail:
        parts.append(detail)
    if shown:
        head = "; ".join(c.text for c in shown[:limit])
        more = f"; +{len(shown) - limit} more" if len(shown) > limit else ""
        parts.append(("checks: " if show == "all" else "not agreeing: ") + head + more)
    return verdict, ". ".join(parts)


def median_diff_z(a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """(median(a) - median(b), z) with a paired bootstrap SE over the positions of a and b; z is 0 or +-inf when
    the bootstrap SD is zero.

    Parameters
    ----------
    a, b : ndarray of shape (n,)
        Paired values (the same clients in the same order); positions where either is not
        finite are dropped.
    rng : numpy.random.Generator
        Draws the `BOOT_REPS` resamples.
    """
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    diff = float(np.median(a) - np.median(b))
    idx = rng.integers(0, a.size, size=(BOOT_REPS, a.size))
    boot = np.median(a[idx], axis=1) - np.median(b[idx], axis=1)
    sd = float(np.std(boot, ddof=1))
    if sd == 0:
        return diff, (0.0 if diff == 0 else math.copysign(math.inf, diff))
    return diff, diff / sd
