"""The privacy settings of every experiment, checked, and one range per public value (docs/methods.md §2, "Public
ranges, one per value" and "No refusal depends on a record").
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from ..settings import as_float, is_bool, number

#: ``paper``: the algorithms as printed; ``certified``: every sensitivity holds for all inputs.
PRIVACY_MODES = ("paper", "certified")
#: Certified FedNewton's default per-sample Hessian clip, ``H_c = HESSIAN_CLIP tau1``.
HESSIAN_CLIP = 4.0
#: The default privacy setting (`check_privacy`). Read-only: copy it.
DEFAULT_PRIVACY: Mapping[str, Any] = MappingProxyType({"mode": "paper", "hessian_clip": HESSIAN_CLIP})
#: What a fit releases: private, clipped without noise, or neither (docs/methods.md §9).
RELEASES = ("private", "clip_only", "plain")
#: The smallest mu accepted: below it the noise sds overflow towards inf.
MU_FLOOR = 1e-6
#: The largest finite mu: its epsilon (about mu^2/2) and the composition stay finite in float64.
MU_MAX = 1e100
#: The largest clipping bound B (a fixed value, a private grid's top): B^2 (CG's scale) stays finite.
CLIP_MAX = 1e100
#: The smallest clipping bound B on every path: every sd and sensitivity a normal float64, B^2 a normal float32.
CLIP_MIN = 1e-10
#: The range of a fraction q, (0, 1]: a clipping quantile and the CNN's share of clients per round.
parse_fraction = number(0, 1, closed="high")
#: The range of certified FedNewton's ``hessian_clip`` (a multiple of tau1): CG's rate stays inside (0, 1).
HESSIAN_CLIP_RANGE = (1e-8, 1e8)
#: The largest entry a certified release may reach by its public bound (``2^24`` below float64's maximum).
RELEASE_MAX = 2.0 ** 1000
#: A bound on every standard normal the noise streams draw (numpy's ziggurat: ``|z| < 13.71``).
NOISE_BOUND = 14.0


def adds_noise(mu: float, release: str = "private") -> bool:
    """Whether a fit's releases carry noise: a finite ``mu`` and release ``private`` (the one noise rule).

    Parameters
    ----------
    mu : float
    release : str
        ``private``, ``clip_only`` or ``plain``.
    """
    return bool(np.isfinite(mu)) and release == "private"


def clips(mu: float, release: str = "private") -> bool:
    """Whether per-sample gradients are clipped: a finite ``mu`` and release not ``plain`` (the one clip rule).

    Parameters
    ----------
    mu : float
    release : str
        ``private``, ``clip_only`` or ``plain``.
    """
    return bool(np.isfinite(mu)) and release != "plain"


def iterate_bound(count, eta, B, sd, *, on_gradient: bool = False, z: float = NOISE_BOUND):
    """The most ``count`` noisy clipped steps move an iterate's entry: ``K (eta B + z sd)``, or ``K eta (B + z sd)``.

    The second with the noise on the gradient; public inputs only.

    Parameters
    ----------
    count : int
    eta : float
    B, sd : float or ndarray
        The clipping bound (drifted for DP-SCAFFOLD) and a step's noise sd.
    on_gradient : bool, default=False
        The noise is added to the gradient, not to the iterate.
    z : float, default=NOISE_BOUND
        A bound on every standard normal of the noise (`NOISE_BOUND`: numpy's streams; torch's:
        `fedgdp.nn.settings.Z_MAX`).
    """
    return count * (eta * (B + z * sd) if on_gradient else eta * B + z * sd)


def check_release_bound(name: str, bound, fix: str) -> None:
    """Refuse a certified fit whose release could overflow: the public ``bound``'s max must be <= `RELEASE_MAX`.

    Parameters
    ----------
    name : str
        The method (for the message).
    bound : float or ndarray
        The largest entry any release can take, from public inputs only.
    fix : str
        The settings that lower it, with their values (for the message).
    """
    top = float(np.max(bound))
    if not top <= RELEASE_MAX:
        raise ValueError(f"method {name}: a release could reach {top:.3g}, above {RELEASE_MAX:.3g} (float64 "
                         f"overflow); lower or raise the settings that set it: {fix}")


def parse_mu(value, key: str = "mu") -> float:
    """mu in [`MU_FLOOR`, `MU_MAX`] or ``inf``, the one range of mu on every path; else ValueError naming ``key``.

    Parameters
    ----------
    value : float or str
        A number or ``inf`` (a boolean is refused).
    key : str
    """
    mu = as_float(key, value, "a positive number or 'inf'")
    if not mu > 0 or math.isnan(mu):
        raise ValueError(f"{key} must be > 0 (or 'inf' for no privacy), got {key}={value}")
    if mu < MU_FLOOR:
        raise ValueError(f"{key} must be at least {MU_FLOOR:g} (smaller values make the noise sd overflow), "
                         f"got {key}={value}")
    if math.isfinite(mu) and mu > MU_MAX:
        raise ValueError(f"{key} must be at most {MU_MAX:g} or 'inf' (larger values make epsilon overflow), "
                         f"got {key}={value}")
    return mu


#: the keys of each clipping rule's dict form, in its order (`fedgdp.core.privacy.rules`' ``as_dict``)
_CLIP_KEYS = {"fixed": ("rule", "value"), "quantile": ("rule", "q"), "private_quantile": ("rule", "q", "share", "grid")}


def check_clip(clip) -> dict:
    """The clipping rule as a dict (a number means ``{"rule": "fixed", "value": B}``); ValueError otherwise.

    Rules: ``quantile`` (``q`` in (0, 1]), ``fixed`` (``value`` >= `CLIP_MIN`),
    ``private_quantile`` (``q``, ``share`` in (0, 1), ``grid: [lo, hi, bins]``, ``lo >= CLIP_MIN``;
    defaults share 0.1, grid [0.01, 100, 64]). The checked form is the rule's own (``clip_rule(...).as_dict()``):
    its keys in its order; a key of another rule is dropped (a config file laid over another merges the two
    rules key by key), a key of no rule is refused.

    Parameters
    ----------
    clip : dict, float or rule
        The rule (its dict form or a `Fixed`, `Quantile` or `PrivateQuantile`), or a fixed bound (a boolean
        is not a number).

    Returns
    -------
    dict
        The checked rule.
    """
    if hasattr(clip, "as_dict"):        # a rule object (`clip_rule`): checked in its dict form
        clip = clip.as_dict()
    if isinstance(clip, numbers.Real) and not is_bool(clip):
        clip = {"rule": "fixed", "value": float(clip)}
    if not isinstance(clip, dict):
        raise ValueError(f"clip must be a mapping with a rule or a number, got clip={clip!r}")
    rule = clip.get("rule")
    if rule not in ("quantile", "fixed", "private_quantile"):
        raise ValueError(f"clip rule must be 'quantile', 'fixed' or 'private_quantile', got {rule!r}")
    unknown = sorted(set(clip) - {key for keys in _CLIP_KEYS.values() for key in keys})
    if unknown:        # (another rule's key is dropped: `snakemake --configfile` merges an overlaid rule key by key)
        raise ValueError(f"unknown clip key(s) {unknown} for rule {rule!r}; known: {', '.join(_CLIP_KEYS[rule])}")
    if rule in ("quantile", "private_quantile"):
        parse_fraction("clip q", clip.get("q"))
    if rule == "fixed":                  # (the value is kept as given: it enters the seeds' parameters)
        what = f"a number >= {CLIP_MIN:g} (CLIP_MIN)"
        if not as_float("fixed clip value", clip.get("value"), what) >= CLIP_MIN:
            raise ValueError(f"fixed clip value must be {what}, got value={clip.get('value')!r}")
    if rule == "private_quantile":
        share, grid = clip.get("share", 0.1), clip.get("grid", [0.01, 100.0, 64])
        clip = {"rule": rule, "q": float(clip["q"]), "share": number(0, 1)("clip share", share), "grid": grid}
        ok = isinstance(grid, (list, tuple)) and len(grid) == 3
        if ok:
            lo, hi, bins = grid
            try:
                ok = (CLIP_MIN <= as_float("clip grid", lo) < as_float("clip grid", hi)
                      and isinstance(bins, int) and not is_bool(bins) and bins >= 1)
            except ValueError:
                ok = False
        if not ok:
            raise ValueError(f"clip grid must be [lo, hi, bins] with {CLIP_MIN:g} (CLIP_MIN) <= lo < hi and an "
                             f"integer bins >= 1, got grid={grid!r}")
        clip["grid"] = [float(grid[0]), float(grid[1]), int(grid[2])]
    from .rules import clip_rule

    return clip_rule(clip).as_dict()    # the canonical form: the rule's keys in its order


def check_clip_bound(clip) -> None:
    """Refuse a private fit's bound above `CLIP_MAX` (a fixed value or a grid's top; inf and NaN too).

    Parameters
    ----------
    clip : Fixed, Quantile or PrivateQuantile, or its dict form
    """
    from .rules import clip_rule  # (rules imports calibration, which imports this module)

    rule = clip_rule(clip)
    if rule.rule == "fixed" and not float(rule.value) <= CLIP_MAX:  # type: ignore[union-attr]
        raise ValueError(f"fixed clip value must be a number in (0, {CLIP_MAX:g}] (docs/methods.md §2), "
                         f"got clip={rule.value!r}")  # type: ignore[union-attr]
    if rule.rule == "private_quantile" and not float(rule.grid[1]) <= CLIP_MAX:  # type: ignore[union-attr]
        raise ValueError(f"clip grid's top must be at most {CLIP_MAX:g} (docs/methods.md §2), "
                         f"got grid={list(rule.grid)!r}")  # type: ignore[union-attr]


def check_privacy(privacy, clip, release: str = "private") -> dict:
    """The privacy setting ``{"mode": "paper" | "certified", "hessian_clip": c}``, checked.

    ``certified`` needs a ``fixed`` or ``private_quantile`` bound, and clips FedNewton's
    per-sample Hessians to ``c tau1`` (docs/privacy.md, "Privacy modes, certified FedNewton and the audit").

    Parameters
    ----------
    privacy : dict
        ``mode`` and ``hessian_clip``.
    clip : Fixed, Quantile or PrivateQuantile, or its dict form
        The clipping rule.
    release : str
        What the fits release (`RELEASES`); ``private`` checks the bound (`check_clip_bound`).

    Returns
    -------
    dict
        The checked setting.
    """
    if not isinstance(privacy, dict):
        raise ValueError(f"privacy must be a mapping with mode and hessian_clip, got privacy={privacy!r}")
    unknown = set(privacy) - {"mode", "hessian_clip"}
    if unknown:
        raise ValueError(f"unknown privacy key(s) {sorted(unknown)}; known: hessian_clip, mode")
    out: dict[str, Any] = dict(DEFAULT_PRIVACY) | privacy
    if out["mode"] not in PRIVACY_MODES:
        raise ValueError(f"privacy mode must be 'paper' or 'certified', got mode={out['mode']!r}")
    try:
        out["hessian_clip"] = as_float("privacy hessian_clip", out["hessian_clip"])
    except ValueError:
        out["hessian_clip"] = math.nan
    if release == "private":
        check_clip_bound(clip)
    low, high = HESSIAN_CLIP_RANGE
    if not low <= out["hessian_clip"] <= high:
        raise ValueError(f"privacy hessian_clip must be a number in [{low:g}, {high:g}] (docs/methods.md §2), got "
                         f"hessian_clip={privacy.get('hessian_clip')!r}")
    from .rules import clip_rule

    if out["mode"] == "certified" and clip_rule(clip).rule == "quantile":
        raise ValueError("privacy mode 'certified' needs a public or private clipping bound: set clip to "
                         "{rule: private_quantile, ...} or {rule: fixed, value: B}, got clip rule 'quantile'")
    return out
