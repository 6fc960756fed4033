"""`FederatedGLM`'s families as declared objects: what each family is to the estimator and the forecast.

A family names its model (`fedgdp.core.glm`: targets, link, curvature), its outputs, its public
clipping rule, its step-size rule, whether FedIRLS fits it (and by default), and the forecast's
public curvature model (`fedgdp.api.forecast`, "The curvature model"; its noise response registers per
family there), the code of its compiled simulation kernel (`fedgdp.simulation.kernels`), and how the
coverage study draws its known-truth responses. Code outside this module asks the family
(``get_family(name).attr``), as statsmodels' GLM asks its ``Family``, instead of testing the family's name.

A new family is a `Family` subclass registered with `register_family` (from outside the package too:
tests/api/test_toy_family.py adds a probit and fits it with `FederatedGLM`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Family", "Logistic", "Multinomial", "Poisson", "FAMILIES", "get_family", "register_family"]


@dataclass(frozen=True)
class Family:
    """One family of `FederatedGLM` (the module docstring).

    Attributes
    ----------
    name : str
        ``FederatedGLM(family=name)``.
    task : str
        The real-data task (`fedgdp.realdata`): ``binary``, ``multiclass`` or ``poisson``.
    clip_factor : float
        The public clipping bound's multiple of ``sqrt(d)`` (`fedgdp.api.forecast.public_clip`).
    clip_doubles : bool
        Whether that bound doubles while the forecast noise allows (a residual with no public bound).
    irls : bool
        Whether FedIRLS fits it (one output).
    irls_default : bool
        Whether ``method="auto"`` fits it with FedIRLS where its curvature release is not mostly noise.
    classes : bool
        Whether it takes ``n_classes`` (several outputs); the one-output families' forecast follows
        the noise through the iterates (`fedgdp.api.forecast.response`).
    labelled : bool
        Whether its responses are labels of a public domain (``classes``): a classifier; else counts
        (a regressor: ``coef_`` (p,), predictions the mean).
    max_classes : int or None
        The most classes it takes (2 for logistic; None: no limit).
    scaled_steps : bool
        Whether its default step sizes follow the clipping bound (`default_steps`).
    kernel : int or None
        The code of its model in the compiled simulation kernels (`fedgdp.simulation.kernels.MODEL_CODES`;
        None: no kernel, the family is fitted on real data only).
    """

    name: str
    task: str
    clip_factor: float = 1.0
    clip_doubles: bool = False
    irls: bool = True
    irls_default: bool = False
    classes: bool = False
    labelled: bool = True
    max_classes: int | None = None
    scaled_steps: bool = False
    kernel: int | None = None

    def outputs(self, n_classes: int | None = None) -> int:
        """The outputs k (columns of theta): 1, or the classes.

        Parameters
        ----------
        n_classes : int or None
            The classes (families with ``classes`` only).
        """
        return 1

    def model(self, n_classes: int | None = None):
        """The `fedgdp.core.glm` model (targets, link, curvature).

        Parameters
        ----------
        n_classes : int or None
            The classes (families with ``classes`` only).
        """
        raise NotImplementedError

    def curvature_at_zero(self, k: int, b: float) -> np.ndarray:
        """The forecast's public curvature ``W`` (k, k) at theta = 0 (`fedgdp.api.forecast.curvature`).

        Parameters
        ----------
        k : int
            Outputs.
        b : float
            The residual a typical row keeps unclipped, ``B / sqrt(d)``.
        """
        raise NotImplementedError

    def curvature_at(self, S: np.ndarray, b: float) -> np.ndarray:
        """The forecast's curvature ``W`` (k, k), the mean of ``b''`` over the public predictors ``S`` (draws, k).

        Parameters
        ----------
        S : ndarray of shape (draws, k)
            Linear predictors at an estimate (`fedgdp.api.forecast`'s fixed public draws).
        b : float
            As in `curvature_at_zero`.
        """
        raise NotImplementedError

    def default_steps(self, s: dict, given: dict, d: int, B: float) -> None:
        """The estimator's default step sizes and steps the user did not set, in place (none but Poisson's).

        Parameters
        ----------
        s : dict
            The method's resolved settings (changed in place).
        given : dict
            The user's settings of the method (left as given).
        d : int
            Design columns, the intercept included.
        B : float
            The clipping bound (finite).
        """

    def draw(self, rng: np.random.Generator, eta: np.ndarray) -> np.ndarray:
        """Responses drawn at the linear predictors ``eta`` (n,): the coverage study's known-truth data
        (`fedgdp.api.coverage`).

        Parameters
        ----------
        rng : numpy.random.Generator
            The replicate's generator.
        eta : ndarray of shape (n,)
            Linear predictors.
        """
        raise NotImplementedError(f"family {self.name!r} draws no responses")


class Logistic(Family):
    """Logistic regression: residuals at most 1, curvature 1/4 at 0."""

    def model(self, n_classes=None):
        """The binary task's logistic model."""
        from .glm import matrix_model

        return matrix_model("binary")

    def curvature_at_zero(self, k, b):
        """``1/4``."""
        return np.array([[0.25]])

    def curvature_at(self, S, b):
        """The mean of ``p (1 - p)``."""
        p = 1.0 / (1.0 + np.exp(-S[:, 0]))
        return np.array([[float(np.mean(p * (1.0 - p)))]])

    def draw(self, rng, eta):
        """0/1 labels (int), one at probability ``1 / (1 + e^-eta)``."""
        return (rng.random(len(eta)) < 1.0 / (1.0 + np.exp(-eta))).astype(int)



class Multinomial(Family):
    """Softmax regression over C classes: ``I/C - 11'/C^2`` at 0; residuals taken as unclipped."""

    def outputs(self, n_classes=None):
        """The classes."""
        return int(n_classes)

    def model(self, n_classes=None):
        """The multiclass task's softmax model."""
        from .glm import matrix_model

        return matrix_model("multiclass", int(n_classes))

    def curvature_at_zero(self, k, b):
        """``I/k - 11'/k^2``."""
        return np.eye(k) / k - np.ones((k, k)) / k ** 2

    def curvature_at(self, S, b):
        """The mean of ``diag(p) - p p'``."""
        E = np.exp(S - S.max(axis=1, keepdims=True))
        P = E / E.sum(axis=1, keepdims=True)
        return np.diag(P.mean(axis=0)) - P.T @ P / len(P)


class Poisson(Family):
    """Poisson regression: curvature 1 at 0; a count's residual has no public bound, so a row counts with the
    chance its residual is not clipped (normal approximation)."""

    def model(self, n_classes=None):
        """The Poisson model."""
        from .glm import POISSON

        return POISSON

    def curvature_at_zero(self, k, b):
        """``erf(b / sqrt(2))``: curvature 1 where the residual is not clipped."""
        return np.array([[float(unclipped(np.ones(1), b)[0])]])

    def curvature_at(self, S, b):
        """The mean of ``lambda erf(b / sqrt(2 lambda))``."""
        return np.array([[float(np.mean(unclipped(np.exp(np.minimum(S[:, 0], 700.0)), b)))]])

    def draw(self, rng, eta):
        """Counts (int) at means ``e^eta``."""
        return rng.poisson(np.exp(eta))

    def default_steps(self, s, given, d, B):
        """Step sizes at most ``1 / (max(B, 1) sqrt(d) + d)``, step counts 4 times the preset (docs/real-data.md)."""
        eta = 1.0 / (max(B, 1.0) * math.sqrt(d) + d)
        for key in ("eta", "eta1", "eta2"):
            if key in s and key not in given:
                s[key] = min(s[key], eta)
        for key in ("K", "K1", "K2"):
            if key in s and key not in given:
                s[key] = 4 * s[key]


def unclipped(lam: np.ndarray, b: float) -> np.ndarray:
    """Poisson curvature ``lambda`` times the chance its residual is within ``b`` (normal approximation).

    Parameters
    ----------
    lam : ndarray
        Means.
    b : float
        The residual a row keeps unclipped (inf: all).
    """
    from scipy.special import erf

    if not math.isfinite(b):
        return lam
    return lam * erf(b / np.sqrt(2.0 * np.maximum(lam, 1e-300)))


#: The families by name, in `FederatedGLM`'s order (softmax is ``multinomial``; FedIRLS is the logistic and
#: Poisson default, Poisson's after its count-scale release, docs/default-estimator.md)
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Logistic("logistic", "binary", irls_default=True, max_classes=2, kernel=0),
    Multinomial("multinomial", "multiclass", irls=False, classes=True),
    Poisson("poisson", "poisson", clip_factor=2.0, clip_doubles=True, labelled=False, scaled_steps=True,
            irls_default=True, kernel=1),
)}


def get_family(name) -> Family:
    """The family named ``name`` (ValueError naming the choices).

    Parameters
    ----------
    name : str
        ``logistic``, ``multinomial``, ``poisson``, or a name given to `register_family`.
    """
    try:
        return FAMILIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got family={name!r}") from None


def register_family(family: Family) -> Family:
    """Add a family under its name, so that ``FederatedGLM(family=family.name)`` fits it (the forecast and
    the inference find it too); returns it.

    The family's `Family.model` must be a `fedgdp.core.glm.GLM` whose residuals ``R`` make the per-sample
    gradients ``x_j r_j'`` (a non-canonical link overrides `GLM.residuals` and `GLM.loss_gradient`, and
    its curvature is then the expected information). Its forecast noise response may register in
    `fedgdp.api.forecast` by its type; without one the forecast takes its curvature as constant in the noise.

    Parameters
    ----------
    family : Family
        The family (a name not taken; ValueError otherwise).
    """
    if not isinstance(family, Family):
        raise ValueError(f"register_family takes a Family, got {family!r}")
    if family.name in FAMILIES:
        raise ValueError(f"family {family.name!r} is registered already")
    FAMILIES[family.name] = family
    return family
