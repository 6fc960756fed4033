"""``FederatedGLM``: the package's federated methods as a scikit-learn style estimator.

``fit`` runs the method's own ``fit_many`` on a `fedgdp.realdata.FoldData` of the clients'
rows (`fedgdp.realdata.RealBackend`, the code that makes Figures 7-8), with the bound of
`fedgdp.realdata.clip_bound_real` and the defaults of `fedgdp.realdata.resolve`, those of
the pipeline's real-data fits (docs/ARCHITECTURE.md, ``api/estimator``).

Conventions
-----------
``X`` (n, p) features (an intercept column is added first when ``fit_intercept``);
``y`` (n,) 0/1-type labels (``logistic``), class labels (``multinomial``) or counts
(``poisson``); ``clients`` (n,) one label per row. Internally the parameter is
``theta_`` (d, k) with ``d = p + 1`` (intercept row first) and ``k`` = 1 (logistic,
Poisson) or the number of classes (softmax, `fedgdp.core.glm`'s convention). The
fitted ``coef_`` and ``intercept_`` follow scikit-learn's shapes: ``(1, p)`` and
``(1,)`` for logistic, ``(C, p)`` and ``(C,)`` for multinomial, ``(p,)`` and a float
for Poisson.

Randomness
----------
``random_state=None`` (the default) draws a fresh root ``numpy.random.SeedSequence()``
from the operating system's entropy at every ``fit``: the noise of a release on your own
data is secret. A fixed ``random_state`` reproduces an analysis, but anyone who knows it
can regenerate the noise and remove it, so the privacy report marks the guarantee void
while the seed is known (``privacy_.noise_secret`` is False; docs/privacy.md, "A release
of your own data"). Every generator comes from `fedgdp.core.seeds.derived_rng`. An int ``random_state``
``r`` gives stream ``S`` the generator ``SeedSequence([r, stable_hash(ESTIMATOR_KEY),
stable_hash(S)])``; a `numpy.random.SeedSequence` ``q`` gives
``SeedSequence([*q.entropy, stable_hash(S)])``, so ``random_state =
fedgdp.core.seeds.seed_sequence(base_seed, key, split, fold)`` draws exactly what the
pipeline's real-data fit of that split and fold draws. Streams: the method's noise
(`fedgdp.methods.Method.noise_stream`), the private clipping histogram
(`fedgdp.core.seeds.CLIP_STREAM`) and the order of each client's rows (``row_order``).

scikit-learn is not imported by this module: the estimator implements the
estimator protocol itself (``get_params``, ``set_params``, ``__sklearn_tags__``,
which imports scikit-learn only when scikit-learn asks for it).
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import privacy
from ..core.families import FAMILIES as _FAMILY_OF
from ..core.families import get_family
from ..core.seeds import CLIP_STREAM, derived_rng, stable_hash
from ..core.segments import by_blocks
from . import budget as budgets
from . import diagnostics
from . import inference as inference_
from .checks import (
    _feature_names,
    _not_fitted_error,
    _numeric,
    _poisson_deviance,
    check_features,
    column_or_1d,
)
from .diagnostics import ConvergenceWarning, NoiseDominatedWarning
from .forecast import (
    CANDIDATES,
    CLIP_RULE,
    IRLS,
    IRLS_FAMILIES,
    NOISE_LIMIT,
    NOISE_SE_METHODS,
    forecast,
    irls_default,
    noise_se,
)
from .report import FIT_SCOPE, REFUSAL_RULE, PrivacyReport
from .routing import ClientsRouting, SingleClientWarning, client_labels, refuse_metadata
from .spec import design, fit_spec, resolve_settings, targets

if TYPE_CHECKING:
    from ..realdata.parameters import RealdataSettings

__all__ = ["FederatedGLM", "PrivacyReport", "PrivacyLeakWarning", "SingleClientWarning", "ConvergenceWarning",
           "NoiseDominatedWarning",
           "FAMILIES", "ESTIMATOR_KEY", "FIT_SCOPE", "REFUSAL_RULE", "estimator_rng"]

#: The model families: ``logistic`` (binary), ``multinomial`` (softmax), ``poisson`` (counts)
FAMILIES = tuple(_FAMILY_OF)

#: The seed key of the estimator's generators (module docstring, Randomness)
ESTIMATOR_KEY = {"estimator": "fedgdp.FederatedGLM"}

ROW_STREAM = "row_order"

#: ``privacy_.label_domain`` of a classifier fitted without ``classes``
LABELS_FROM_DATA = "from data (not covered)"

#: The ledger's ``unaccounted`` entry of that label set
LABELS_UNACCOUNTED = ("label set: classes_ is np.unique(y), taken from the data and accounted by no ledger "
                      "(one record with a label nobody else has adds a class); pass classes=[...], a public "
                      "label domain")


class PrivacyLeakWarning(UserWarning):
    """The fit's privacy guarantee is nominal: a release or the clipping bound is not
    accounted for all inputs (the warning names the certified alternatives)."""


def estimator_rng(random_state, stream: str) -> np.random.Generator:
    """The generator of one stream (module docstring, Randomness).

    Parameters
    ----------
    random_state : None, int, numpy.random.SeedSequence or numpy.random.RandomState
        None: fresh entropy (not reproducible); a RandomState gives an int seed drawn
        from it (scikit-learn's convention of consuming the caller's generator).
    stream : str
        The stream's name.

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    ValueError
        Any other ``random_state`` (a negative int, a bool, ...).
    """
    if isinstance(random_state, np.random.SeedSequence):
        entropy = random_state.entropy
        entropy = list(entropy) if isinstance(entropy, (list, tuple)) else [int(entropy)]  # type: ignore[arg-type]
        return np.random.default_rng(np.random.SeedSequence([*entropy, stable_hash(stream)],
                                                            spawn_key=random_state.spawn_key))
    if random_state is None:
        random_state = int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(1))
    elif isinstance(random_state, np.random.RandomState):
        random_state = int(random_state.randint(np.iinfo(np.int32).max))
    elif not isinstance(random_state, numbers.Integral) or isinstance(random_state, bool) or random_state < 0:
        raise ValueError(f"random_state must be None, an int >= 0, a numpy SeedSequence or RandomState, "
                         f"got random_state={random_state!r}")
    return derived_rng(int(random_state), ESTIMATOR_KEY, stream=stream)


class _AvailableIf:
    """A method that exists only when ``check(self)`` holds (hasattr is False otherwise),
    as scikit-learn's ``available_if``."""

    def __init__(self, fn, check):
        self.fn, self.check = fn, check
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.fn
        if not self.check(obj):
            raise AttributeError(f"{type(obj).__name__} with family={obj.family!r} has no {self.fn.__name__}")
        return self.fn.__get__(obj, owner)


def _available_if(check):
    """Decorate a method that exists only when ``check(self)`` holds (scikit-learn's
    ``available_if``); the method keeps its name, signature and docstring."""
    return lambda fn: _AvailableIf(fn, check)


#: Rows gathered (or summed, `fedgdp.api.diagnostics.check_scale`) at a time: a bounded temporary
ROW_BLOCK = 1 << 16


def client_rows(index: np.ndarray, m: int) -> list:
    """Each client's row numbers in increasing order (``np.flatnonzero(index == i)``), from one stable sort.

    Parameters
    ----------
    index : ndarray of shape (n,)
        Each row's client, 0..m-1.
    m : int
        Clients.
    """
    perm = np.argsort(index, kind="stable")
    ends = np.cumsum(np.bincount(index, minlength=m))
    return [perm[e - c:e] for e, c in zip(ends.tolist(), np.diff(ends, prepend=0).tolist())]


def client_blocks(A: np.ndarray, order: list) -> list:
    """The consecutive row blocks of ``A`` (views) of the clients' sizes, ``len(order[i])`` each.

    Parameters
    ----------
    A : ndarray of shape (n, ...)
        Rows in client order.
    order : list of ndarray
        Each client's rows (only their counts are read).
    """
    ends = np.cumsum([len(r) for r in order]).tolist()
    return [A[e - len(r):e] for e, r in zip(ends, order)]


def _is_classifier(est) -> bool:
    return get_family(est.family).labelled


class FederatedGLM(ClientsRouting):
    """A generalised linear model fitted by a differentially private federated method.

    The guarantee is record-level mu-GDP at each client, against everything that client
    releases (federated GDP, Definition 2.2 of Peng, Paul & Auddy): whatever a client
    sends is Gaussian-noised and calibrated so that its releases compose to ``mu`` for
    one record of its data (`privacy_`), with fresh noise (``random_state=None``) and a
    public label domain (``classes``); it is not client-level (user-level) DP of a
    client's whole data set (docs/privacy.md). The methods are those of the
    package (`fedgdp.methods`), run on the real-data backend:

    - ``fednewton`` (default; Algorithm 4): FedAvg (one round of K noisy local steps)
      on half of each client's rows, then one private local Newton step, averaged;
      with ``privacy_mode="certified"`` per-sample Hessians are clipped and the Newton
      release's sensitivity holds for all inputs (the paper's version, mode ``paper``,
      rests on an assumption that fails on unbounded covariates; ``fedgdp audit``).
    - ``fedhybrid`` (Algorithm 2 of Peng, Paul & Auddy): K1 noisy local gradient steps
      on every client, averaged once, then K2 noisy FedSGD steps. This is *not* the
      FedHybrid of Niu & Wei (IEEE TSP 2023), an unrelated primal-dual method of
      the same name.
    - ``fedsgd`` (Algorithm 1), ``fedavg`` (Algorithm 3), ``fednewton_certified``,
      ``dp_scaffold``; the non-private ``np_fedavg``, ``np_scaffold``, ``np_pooled``
      (``mu=inf``).

    The non-private baselines are not the MLE by default: ``np_pooled`` is a ridge fit
    (``ridge = 1e-3``; ``method_settings={"ridge": 0}`` gives the MLE where it exists) and
    ``np_fedavg``, ``np_scaffold`` run their rounds of steps (docs/real-data.md).

    Parameters
    ----------
    family : {"logistic", "multinomial", "poisson"}, default="logistic"
        Binary logistic, softmax or Poisson regression (canonical links).
    classes : array-like of shape (C,) or None, default=None
        The public label domain of a classifier (two labels for ``logistic``, two or more
        for ``multinomial``), in any order: ``classes_`` is it sorted (scikit-learn's
        order, that of ``predict_proba``'s columns). A label of ``y`` outside it is refused
        before anything is released (docs/privacy.md, "The label domain"). None: the labels
        are ``np.unique(y)``, not covered by the guarantee (a
        [`PrivacyLeakWarning`][fedgdp.api.estimator.PrivacyLeakWarning]; ``privacy_.certified``
        is False). Refused with ``poisson``.
    method : str, default="auto"
        ``"auto"``: FedIRLS (docs/default-estimator.md) for logistic wherever its curvature
        release is not mostly noise, and for Poisson at mu = inf (the exact MLE); otherwise the
        private method with the lowest forecast noise
        ([`fedgdp.api.forecast.forecast`][fedgdp.api.forecast.forecast], from the client
        sizes, the dimension and mu alone; FedNewton at mu = inf), named in ``method_``.
        Otherwise a real-data method of `fedgdp.realdata.REGISTRY` other than
        ``np_localfit``.
    mu : float, default=2
        mu-GDP budget of every client (``math.inf``: non-private, no clipping or noise;
        the ``np_*`` methods need it).
    privacy_mode : {"certified", "paper"}, default="certified"
        ``certified``: every release's sensitivity holds for all inputs (needs a public
        or private clipping bound); ``paper``: the algorithms as printed.
    clip : None, float, str or dict, default=None
        The clipping rule of per-sample gradients. None: the public rule for standardised
        features (`fedgdp.api.forecast.CLIP_RULE`, docs/real-data.md). ``"private_quantile"``:
        ``{"rule": "private_quantile", "q": 0.9, "share": 0.1}`` (a noisy histogram of the
        gradient norms spends 10% of mu^2). A number: a public bound B in ``[1e-10, 1e100]``
        (`fedgdp.core.privacy.CLIP_MIN`, `CLIP_MAX`). ``"quantile"``: the paper's
        data-driven 0.9 quantile, not accounted (a `PrivacyLeakWarning`; refused in mode
        ``certified``). A dict: any rule of `fedgdp.core.privacy.check_clip`. No number
        parameter may be a boolean (``mu=True`` is refused).
    hessian_clip : float, default=4
        Certified FedNewton's per-sample Hessian bound, as a multiple of ``tau1``, in
        ``[1e-8, 1e8]`` (`fedgdp.core.privacy.HESSIAN_CLIP_RANGE`).
    tau1 : float, default=0.5
        FedNewton's eigenvalue floor / ridge.
    method_settings : dict or None, default=None
        The method's settings over the real-data defaults (the method's real-data
        preset, `fedgdp.realdata.parameters.PRESETS`), e.g. ``{"K": 50, "eta": 0.5}`` for
        ``fednewton``, ``{"K1": 30, "eta1": 0.5, "K2": 20, "eta2": 0.5}`` for
        ``fedhybrid``. (scikit-learn estimators take no ``**kwargs``, so the settings
        are one parameter.)
    newton : dict or None, default=None
        FedNewton's solver over the defaults ``{"solver": "cg", "cg_tol": 1e-8,
        "cg_maxiter": 500}``. Certified, ``cg_tol`` lies in ``[2^-40 (1 + hessian_clip),
        1)`` (`fedgdp.core.solvers.cg_tol_floor`), and a CG solve that misses it releases
        the exact solve instead (docs/methods.md §2, "No refusal depends on a record").
    fit_intercept : bool, default=True
        Add an intercept column (first) to X.
    shuffle : bool, default=True
        Put each client's rows in a random order (stream ``row_order``) before the fit:
        FedNewton's two halves are each client's first and second half of rows, which
        must not follow a sorted order. False keeps the given order (as the pipeline's
        folds, whose rows are already in random order).
    random_state : None, int, numpy.random.SeedSequence or RandomState, default=None
        The root of every random draw (module docstring, Randomness). None: fresh noise,
        what a release of your own data needs. A given seed reproduces a fit, but voids
        the guarantee while it is known (``privacy_.noise_secret`` is False).
    budget : PrivacyBudget or None, default=None
        A [`PrivacyBudget`][fedgdp.api.budget.PrivacyBudget] charged by every fit (and
        every clone's: ``clone`` keeps the same budget), as a ``with budget:`` block
        charges the fits inside it: each record of the fit spends ``mu`` of its total, and
        a fit that would pass it is refused before anything is computed.
    inference_share : float, default=0.1
        The share of ``mu^2`` spent after the estimate on the private moments behind
        `summary`'s ``se_sampling`` (`fedgdp.api.inference`, ledger stages ``inference:
        ...``); the estimation runs at ``mu sqrt(1 - inference_share)``, so the total is mu.
        0: no release (``se_sampling`` from the public curvature model, which ignores the
        data's own curvature). In [0, 1).

    Attributes
    ----------
    theta_ : ndarray of shape (d, k)
        The estimate in `fedgdp.core.glm`'s convention (intercept row first).
    coef_ : ndarray of shape (1, p), (C, p) or (p,)
    intercept_ : ndarray of shape (1,) or (C,), or float
    classes_ : ndarray of shape (C,)
        The class labels, sorted (classifiers only). Logistic's positive class, the one
        ``coef_``, ``decision_function > 0`` and ``predict_proba[:, 1]`` speak for, is
        ``classes_[1]``, the larger label, as in scikit-learn.
    privacy_ : PrivacyReport
        The ledger, each client's composed and certified mu, epsilon at a delta.
    clients_ : ndarray of shape (m,)
        The client labels, sorted; ``client_sizes_`` (m,) their rows.
    n_clients_ : int
    clip_bound_ : float
        The clipping bound B used.
    communication_ : dict
        ``rounds``, ``floats_up``, ``floats_down`` of the fit.
    fit_info_ : dict
        Whether and how the fit converged ([`fedgdp.api.diagnostics.diagnose`][fedgdp.api.diagnostics.diagnose]):
        ``status``, ``n_iter``, ``grad_norm``, ``change``, ``advice``; at mu = inf
        ``distance_to_mle``; NP-Pooled's ``status``, ``grad_norm``, ``advice``, ``ridge``, ``gtol``,
        ``maxiter`` (its Newton-CG's stopping rule checked at the estimate); a private fit's
        ``noise_se`` (d, k) and ``noise_rmse`` (`fedgdp.api.forecast.noise_se`). A fit not ``converged`` warns
        (`fedgdp.api.diagnostics.ConvergenceWarning`, `NoiseDominatedWarning`); a
        non-finite estimate is refused.
    estimation_mu_ : float
        The mu the estimation spent (``mu`` less the inference share).
    inference_ : fedgdp.api.inference.Moments
        The moments behind `summary` (private, exact at mu = inf, or the public model).
    method_ : str
        The method that ran (``method``, or the one ``"auto"`` chose).
    n_features_in_ : int
    feature_names_in_ : ndarray of str of shape (p,)
        Only when X had string column names.

    Notes
    -----
    ``fit(X, y)`` without ``clients`` treats all rows as one client (m = 1): the
    guarantee is then record-level mu-GDP on the whole data set. Features enter the
    clipping through ``||x||``; scale them with public bounds (a scaling computed from
    the data is itself a release that no ledger accounts for).

    Examples
    --------
    >>> import numpy as np
    >>> from fedgdp import FederatedGLM
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 3)); y = (X[:, 0] + rng.logistic(size=600) > 0).astype(int)
    >>> clients = np.repeat(np.arange(6), 100)
    >>> est = FederatedGLM(mu=2, clip=2.0, classes=[0, 1]).fit(X, y, clients)   # fresh noise
    >>> est.coef_.shape, est.privacy_.certified, est.privacy_.noise_secret
    ((1, 3), True, True)
    """

    def __init__(self, family="logistic", classes=None, method="auto", mu=2.0, privacy_mode="certified", clip=None,
                 hessian_clip=privacy.HESSIAN_CLIP, tau1=0.5, method_settings=None, newton=None, fit_intercept=True,
                 shuffle=True, random_state=None, budget=None, inference_share=inference_.DEFAULT_SHARE):
        self.family = family
        self.classes = classes
        self.method = method
        self.mu = mu
        self.privacy_mode = privacy_mode
        self.clip = clip
        self.hessian_clip = hessian_clip
        self.tau1 = tau1
        self.method_settings = method_settings
        self.newton = newton
        self.fit_intercept = fit_intercept
        self.shuffle = shuffle
        self.random_state = random_state
        self.budget = budget
        self.inference_share = inference_share

    # ------------------------------------------------------------ estimator protocol
    @classmethod
    def _get_param_names(cls) -> list[str]:
        import inspect

        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict:
        """The constructor's parameters, as given (scikit-learn's protocol).

        Parameters
        ----------
        deep : bool, default=True
            Ignored (no parameter is an estimator); kept for scikit-learn's protocol.

        Returns
        -------
        dict
            Parameter name -> value.
        """
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params):
        """Set constructor parameters; ValueError naming an unknown one.

        Parameters
        ----------
        **params
            Constructor parameters by name.

        Returns
        -------
        self
        """
        valid = self._get_param_names()
        for key, value in params.items():
            if key not in valid:
                raise ValueError(f"Invalid parameter {key!r} for estimator {type(self).__name__}; "
                                 f"valid parameters: {', '.join(valid)}")
            setattr(self, key, value)
        return self

    def __repr__(self) -> str:
        import inspect

        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        shown = []
        for name, value in self.get_params().items():
            default = defaults[name]
            same = value is default or repr(value) == repr(default)
            if not same:
                shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags, InputTags, RegressorTags, Tags, TargetTags

        classifier = _is_classifier(self)
        return Tags(
            estimator_type="classifier" if classifier else "regressor",
            target_tags=TargetTags(required=True, positive_only=not classifier),        # counts
            classifier_tags=ClassifierTags(multi_class=get_family(self.family).classes) if classifier else None,
            # Poisson at the real-data defaults (eta 0.5 from 0) is unstable on large counts: no score check
            regressor_tags=None if classifier else RegressorTags(poor_score=True),
            input_tags=InputTags(allow_nan=False, sparse=False, two_d_array=True),
            non_deterministic=self.random_state is None,
        )

    @property
    def _estimator_type(self) -> str:
        return "classifier" if _is_classifier(self) else "regressor"

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "theta_")

    def __getstate__(self) -> dict:
        # pickled inside a `with PrivacyBudget` block: marked, so a fit in another process is refused
        return budgets.pickle_state(self.__dict__.copy())

    # ------------------------------------------------------------ the fit
    def fit(self, X, y, clients=None, **params):
        """Fit the method on the clients' rows.

        Parameters
        ----------
        X : array-like of shape (n, p)
            Features (finite numbers; a DataFrame's string column names are kept).
        y : array-like of shape (n,)
            Labels (``logistic``: two classes; ``multinomial``: two or more) or
            non-negative counts (``poisson``).
        clients : array-like of shape (n,), "single" or None
            The client of each row (any labels). ``"single"``: one client holding every
            row; None: the same, with a `SingleClientWarning` (the guarantee is then of
            the whole data set as one client). Through scikit-learn's tools: metadata
            routing (`set_fit_request`) or the spellings of docs/real-data.md.
        **params
            ``sample_weight`` is refused (`fedgdp.api.routing.SAMPLE_WEIGHT_REFUSAL`),
            as by `score`; there is no other.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            A bad parameter, non-finite, missing or non-numeric values, mismatched
            lengths, a client with fewer rows than the method needs, one class only
            (without ``classes``), a label outside ``classes``, a ``sample_weight``.
        """
        from ..realdata import clip_bound_real, get_method

        refuse_metadata(params, type(self).__name__, "fit")
        p = resolve_settings(self)      # every parameter checked, before the data
        budgets.check_public(self, p.mu[0])          # a budget's refusal from public inputs, before the data
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        X = self._check_X(X, reset=True)
        y = column_or_1d(y, len(X))
        groups = client_labels(clients, X.shape[0], type(self).__name__)
        Y, model = self._targets(y)

        labels, index = np.unique(groups, return_inverse=True)
        order = client_rows(index.reshape(-1), len(labels))
        # public inputs only (the client column, the dimension, the settings): the method and the forecast
        sizes, d = np.array([len(r) for r in order], dtype=np.int64), X.shape[1] + bool(self.fit_intercept)
        if X.shape[0] < d * model.k:           # before any release: the counts are the caller's own
            raise ValueError(f"too few rows: {X.shape[0]} row(s) for {d * model.k} coefficients (n_samples="
                             f"{X.shape[0]} < {d * model.k}); a model needs at least one row per coefficient")
        share = inference_.check_share(self.inference_share)
        mu_est, mu_inf = inference_.split_mu(p.mu[0], share, d, model.k)   # one total mu (api/inference)
        self.method_, bound, row = self._choose_method(sizes, X.shape[1], model.k, mu_est)
        p = resolve_settings(self, self.method_, d, bound)
        meth = get_method(self.method_)
        need = 2 if meth.tags.halves else 1
        for lab, rows in zip(labels, order):
            if len(rows) < need:
                raise ValueError(f"client {lab.item() if hasattr(lab, 'item') else lab!r} has {len(rows)} row "
                                 f"(n_samples={len(rows)}); method "
                                 f"{self.method_} needs at least {need} rows per client (its two halves)")
        self._warn_forecast(p, sizes, X.shape[1], model.k, row)
        self.scale_warned_ = diagnostics.check_scale(X)
        scaled = not self.scale_warned_
        charged = budgets.charge(self, p.mu[0], X, y, groups)    # or refused: before any release
        # fresh entropy per fit unless a seed is given (module docstring, Randomness)
        root = np.random.SeedSequence() if self.random_state is None else self.random_state
        if self.shuffle:
            rng = estimator_rng(root, ROW_STREAM)
            order = [rows[rng.permutation(len(rows))] for rows in order]
        # the rows in client order, each client's a slice (a view) of one copy
        perm = np.concatenate(order)
        D, Y = self._design_rows(X, perm), Y[perm]
        Xc, Yc = client_blocks(D, order), client_blocks(Y, order)

        mu = mu_est
        B = clip_bound_real(model, Xc, Yc, p.clip, mu=mu, rng=estimator_rng(root, CLIP_STREAM))
        if p.clip.rule == "private_quantile" and privacy.adds_noise(mu) \
                and B >= float(privacy.histogram_grid(p.clip)[-1]):
            warnings.warn(f"the private quantile landed on its grid's top, B = {B:g} (clip rule private_quantile, "
                          f"q={p.clip.q}, grid {list(p.clip.grid)}): some client's noisy histogram never "
                          f"reached q, and B is the largest over clients, so the noise is that large; use the public "
                          f"default (clip=None: {CLIP_RULE}) or a public bound", diagnostics.ClipWarning,
                          stacklevel=2)
        spec = fit_spec(self, p, model, D.shape[1], B, mu=mu, Xc=Xc, Yc=Yc)
        p = spec.settings
        fd = spec.fold(Xc, Yc, xnorm=client_blocks(by_blocks(privacy.row_norms, D), order),
                       intercept=bool(self.fit_intercept))
        noise = estimator_rng(root, meth.noise_stream) if fd.private else None
        self._warn_leaks(p, meth, fd)
        fd.trace = []                     # the noisy iterates, for fit_info_ (fedgdp.api.diagnostics)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):    # a non-finite estimate is refused
            fit = meth.fit_many([fd], spec.method_settings, [noise])[0]
        theta = np.asarray(fit.theta, float)
        diagnostics.check_finite(theta, self.method_, p.method_settings[self.method_], private=fd.private)
        self.noise_cov_ = fit.info.get("noise_cov") if fd.private else None
        info = self._fit_info(fd, fit, p, meth, model)
        if (privacy.adds_noise(mu) and not mu_inf) or d * model.k > inference_.MAX_DIM:   # no release: public
            self.inference_, spent = inference_.public_moments(self.family, theta, sizes, fd.bound), None
        else:        # the clients' moments at the estimate, noisy under mu_inf (api/inference)
            self.inference_, spent = inference_.release(model, Xc, Yc, theta, fd.bound, mu_inf,
                                                        estimator_rng(root, "inference") if mu_inf else None)
        self.estimation_mu_ = mu
        self.theta_ = theta
        self.settings_ = p
        self.clients_, self.client_sizes_ = labels, np.array([len(r) for r in order], dtype=np.int64)
        self.n_clients_ = len(labels)
        self.clip_bound_ = float(fd.bound)
        self.communication_ = {"rounds": int(fit.rounds), "floats_up": int(fit.floats_up),
                               "floats_down": int(fit.floats_down)}
        self.privacy_ = PrivacyReport(self.method_, p.mu[0], p.privacy["mode"], p.clip.as_dict(), float(fd.bound),
                                      labels, self._label_ledger(inference_.merge_ledgers(fit.ledger, spent), fd),
                                      noise_secret=self.random_state is None,
                                      label_domain=self._label_domain_mode())
        if fd.private and self.method_ in NOISE_SE_METHODS:   # the noise's own diagnosis, coefficient by coefficient
            se_s = np.sqrt(np.maximum(np.diag(inference_.covariance(self.inference_, method=self.method_,
                                                                      settings=p)), 0.0))
            se_n = noise_se(self)
            diagnostics.judge_noise(info, theta, se_n, mu=mu, se_sampling=se_s.reshape(-1, theta.shape[1])
                                    if theta.shape[1] == 1 else None, intercept=bool(self.fit_intercept))
            # the clip's bias: the data holder's own check of their rows (no release, not in fit_info_)
            se = np.sqrt(se_s ** 2 + np.asarray(se_n, float).reshape(-1) ** 2) if theta.shape[1] == 1 else None
            clip = float((getattr(fit, "info", None) or {}).get("clip", fd.bound))   # FedIRLS on counts: B s
            diagnostics.check_clip_bias(model, D, Y, theta, clip, info["noise_rmse"], info["status"], scaled, se)
        self.fit_info_ = info
        diagnostics.warn(self.fit_info_, self.method_)
        budgets.settle(charged, self.privacy_)
        start = 1 if self.fit_intercept else 0
        intercept = theta[0] if self.fit_intercept else np.zeros(theta.shape[1])
        if not get_family(self.family).labelled:       # a regressor: scikit-learn's shapes
            self.coef_, self.intercept_ = theta[start:, 0].copy(), float(intercept[0])
        else:
            self.coef_, self.intercept_ = theta[start:].T.copy(), np.array(intercept, dtype=float)
        return self

    def _choose_method(self, sizes: np.ndarray, p: int, k: int, mu: float) -> tuple[str, float | None, Any]:
        """The method of the fit, the one given or (``"auto"``) the lowest noise forecast,
        and, when ``clip`` is None, the public rule's bound (`fedgdp.api.forecast.forecast`,
        from public inputs only; None: the rule without the sizes), and the method's forecast
        row at that bound where one was made (None otherwise; `_warn_forecast` reads it)."""
        auto = self.method == "auto"
        d = p + bool(self.fit_intercept)
        irls_auto = auto and irls_default(self.family, sizes, d, mu)
        if irls_auto or self.method == IRLS:     # FedIRLS: its own public clip
            if not get_family(self.family).irls:
                raise ValueError(f"method 'fedirls' fits one-output families ({', '.join(IRLS_FAMILIES)}), got "
                                 f"family={self.family!r}")
            if self.clip is not None:
                return IRLS, None, None
            table = forecast(self.family, sizes, p, mu, IRLS, **self._forecast_settings(k))
            return IRLS, float(table["clip_bound"].iloc[0]), table.iloc[0]
        if not auto and (self.clip is not None or self.method not in CANDIDATES + ("fednewton_certified",)):
            return self.method, None, None
        try:
            table = forecast(self.family, sizes, p, mu, None if auto else self.method,
                             **self._forecast_settings(k, with_method=not auto))
        except ValueError:        # a named method's steps whose noise overflows: the fit's own refusal follows
            if auto:
                raise
            return self.method, None, None
        best = str(table.attrs["recommended"])
        row = table.loc[table["method"] == best].iloc[0]
        return best, float(row["clip_bound"]), row

    def _forecast_settings(self, k: int, with_method: bool = True) -> dict:
        """This estimator's settings as `fedgdp.api.forecast.forecast` takes them."""
        clip = self.clip if isinstance(self.clip, numbers.Real) and not isinstance(self.clip, bool) else None
        if isinstance(self.clip, dict) and self.clip.get("rule") == "fixed":
            clip = self.clip.get("value")
        out = {"clip": clip, "privacy_mode": self.privacy_mode, "tau1": self.tau1,
               "hessian_clip": self.hessian_clip, "newton": self.newton, "fit_intercept": bool(self.fit_intercept),
               "n_classes": k if get_family(self.family).classes else None,
               "inference_share": 0.0}          # mu is the estimation's already (api/inference.split_mu)
        if with_method:
            out["method_settings"] = self.method_settings
        return out

    def _warn_forecast(self, p: RealdataSettings, sizes: np.ndarray, n_features: int, k: int, row=None) -> None:
        """A `NoiseDominatedWarning` before any record is read when the forecast noise of the
        fit (public clipping bound only) exceeds `fedgdp.api.forecast.NOISE_LIMIT`, naming a
        mu, or client sizes, that would do (the noise falls as 1/mu, and as 1/n when every
        client grows by one factor, where it is small, and faster where it bends the curvature:
        the mu named suffices, and is the smallest where the noise is small). ``row``: the
        method's forecast at this bound and the estimate's mu, made when the method was chosen
        (`_choose_method`; the same numbers), so that the forecast runs once per fit."""
        mu = p.mu[0]
        if not privacy.adds_noise(mu) or p.clip.rule != "fixed" or self.method_ not in NOISE_SE_METHODS:
            return
        if row is None:
            try:
                row = forecast(self.family, sizes, n_features, mu, self.method_,
                               **{**self._forecast_settings(k), "clip": p.clip.value,
                                  "inference_share": inference_.check_share(self.inference_share)}).iloc[0]
            except ValueError:       # steps whose noise overflows: the fit's own refusal follows, naming them
                return
        rmse = float(row["noise_rmse"])
        if not rmse > NOISE_LIMIT or not math.isfinite(rmse):      # inf: the fit's own refusal follows
            return
        factor = rmse / NOISE_LIMIT
        warnings.warn(
            f"forecast (client sizes, features and mu only; no record read): {self.method_}'s privacy noise is "
            f"{rmse:.3g} per coefficient (RMS) on standardised features, above {NOISE_LIMIT:g}, the size of the "
            f"effects one can hope to estimate: the fit will be mostly noise. mu >= {mu * factor:.3g} would do, or "
            f"clients {factor:.3g} times larger (the smallest with >= {math.ceil(factor * int(sizes.min()))} rows); "
            f"fedgdp.forecast compares the methods", NoiseDominatedWarning, stacklevel=3)

    def _fit_info(self, fd, fit, p: RealdataSettings, meth, model) -> dict:
        """``fit_info_`` ([`fedgdp.api.diagnostics.diagnose`][fedgdp.api.diagnostics.diagnose]); at
        mu = inf the comparison with the pooled ridge fit (no privacy to spend)."""
        from ..core.glm import product_design
        from ..realdata.solvers import ridge_fit, ridge_grad_norm

        s = meth.settings(p.method_settings[self.method_])
        if self.method_ == IRLS:
            return diagnostics.diagnose_irls(fit.info, np.asarray(fit.theta, float), private=fd.private,
                                             rounds=int(fit.info.get("rounds", s.T)))
        if hasattr(s, "ridge"):    # the pooled ridge fit: Newton-CG, its stopping rule ||grad|| <= gtol checked
            ridge, gtol, maxiter = float(s.ridge), float(s.gtol), int(s.maxiter)
            norm = ridge_grad_norm(model, product_design(list(fd.X)), np.vstack(fd.Y), np.asarray(fit.theta, float),
                                   ridge=ridge)
            done = norm <= gtol
            return {"status": "converged" if done else "not converged", "grad_norm": norm,
                    "basis": "exact (no noise)", "ridge": ridge, "gtol": gtol, "maxiter": maxiter,
                    "advice": "" if done else (f"gradient norm {norm:.3g} above gtol {gtol:g} after at most {maxiter} "
                                               "Newton steps: raise method_settings maxiter (or ridge)"),
                    "objective": f"mean loss + ridge/2 ||coef||^2 with ridge {ridge:g} (the MLE "
                                 "only as ridge -> 0: method_settings={'ridge': ...})"}
        reference = None
        if not fd.private:

            ref = resolve_np_pooled()
            reference = ridge_fit(model, product_design(list(fd.X)), np.vstack(fd.Y), ridge=ref["ridge"],
                                  maxiter=ref["maxiter"], gtol=ref["gtol"])
        return diagnostics.diagnose(fd.trace, theta=np.asarray(fit.theta, float), weights=fd.weights,
                                    ledger=fit.ledger, newton=bool(meth.tags.solves_newton), reference=reference,
                                    settings=meth.setting_names())

    def _targets(self, y: np.ndarray):
        """Responses Y (n, k) and the model of the family (`fedgdp.api.spec.targets`); sets ``classes_``."""
        if not get_family(self.family).labelled and hasattr(self, "classes_"):   # from an earlier fit as a classifier
            del self.classes_  # type: ignore[has-type]
        Y, model, classes = targets(self.family, self.classes, y)
        if classes is not None:
            self.classes_ = classes
        return Y, model

    def _label_domain_mode(self) -> str | None:
        """``privacy_.label_domain``: public (``classes`` given), from the data, or None (Poisson)."""
        if not get_family(self.family).labelled:
            return None
        return "public" if self.classes is not None else LABELS_FROM_DATA

    def _label_ledger(self, ledger, fd):
        """The fit's ledger; a private classifier without ``classes`` lists its label set
        as unaccounted (so the ledger is not certified)."""
        if not fd.private or self._label_domain_mode() != LABELS_FROM_DATA:
            return ledger
        return dataclasses.replace(ledger, unaccounted=[*ledger.unaccounted, LABELS_UNACCOUNTED])

    def _warn_leaks(self, p: RealdataSettings, meth, fd) -> None:
        """A `PrivacyLeakWarning` for a data-driven clipping bound or an uncertified release."""
        if not fd.private:
            return
        if p.clip.rule == "quantile":
            warnings.warn(
                f"the clipping bound is data-driven (clip rule 'quantile', q={p.clip.q}) and no ledger "
                "accounts for it, so the fit is not mu-GDP (privacy_.certified is False); certified "
                "alternatives: clip=None (the public rule), a public bound B or clip='private_quantile', with "
                "privacy_mode='certified'", PrivacyLeakWarning, stacklevel=3)
        if self._label_domain_mode() == LABELS_FROM_DATA:
            warnings.warn(
                "the label set is taken from the data (classes_ = np.unique(y)) and no ledger accounts for it: "
                "one record with a label nobody else has shows in classes_ and coef_.shape, so the fit is not "
                "covered (privacy_.certified is False, privacy_.label_domain is 'from data (not covered)'); "
                "certified alternative: classes=[...], the public label domain (fedgdp fit --classes)",
                PrivacyLeakWarning, stacklevel=3)
        for spec in meth.plan(fd, meth.settings(p.method_settings[self.method_])):
            if not spec.certified:
                warnings.warn(
                    f"{meth.label} in privacy_mode={p.privacy['mode']!r} calibrates its {spec.stage} release on "
                    f"an assumption ({spec.assumption}) that fails for some inputs, e.g. unbounded covariates "
                    f"(fedgdp audit); certified alternatives: {meth.tags.certified_alternatives}",
                    PrivacyLeakWarning, stacklevel=3)

    # ------------------------------------------------------------ prediction
    def _check_fitted(self) -> None:
        if not hasattr(self, "theta_"):
            raise _not_fitted_error()(f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with "
                                      "appropriate arguments before using this estimator.")

    def _check_X(self, X, reset: bool) -> np.ndarray:
        names = _feature_names(X)
        arr = check_features(X, type(self).__name__)
        if reset:
            self.n_features_in_ = arr.shape[1]
            if names is not None:
                self.feature_names_in_ = names
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
            return arr
        fitted = getattr(self, "feature_names_in_", None)
        if fitted is not None and names is None:
            warnings.warn(f"X does not have valid feature names, but {type(self).__name__} was fitted with "
                          "feature names", UserWarning, stacklevel=3)
        elif fitted is None and names is not None:
            warnings.warn(f"X has feature names, but {type(self).__name__} was fitted without feature names",
                          UserWarning, stacklevel=3)
        elif fitted is not None and (len(fitted) != len(names) or np.any(fitted != names)):
            raise ValueError("The feature names should match those that were passed during fit: "
                             f"fitted with {list(fitted)}, got {list(names)}")
        if arr.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {arr.shape[1]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input.")
        return arr

    def _design(self, X: np.ndarray) -> np.ndarray:
        return design(X, bool(self.fit_intercept))

    def _design_rows(self, X: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``self._design(X)[rows]``, made in one copy, gathered a block of rows at a time through one reused
        buffer (``np.take``; ``mode="clip"`` skips the bounds check of ``rows``, a permutation of X's rows)."""
        start = int(bool(self.fit_intercept))
        D = np.empty((len(rows), X.shape[1] + start))
        if start:
            D[:, 0] = 1.0
        buf = np.empty((min(ROW_BLOCK, len(rows)), X.shape[1]), dtype=X.dtype)
        for lo in range(0, len(rows), ROW_BLOCK):
            r = rows[lo:lo + ROW_BLOCK]
            np.take(X, r, axis=0, out=buf[:len(r)], mode="clip")
            D[lo:lo + len(r), start:] = buf[:len(r)]
        return D

    def linear_predictor(self, X) -> np.ndarray:
        """The linear predictor ``[1, x] theta`` of every row (log-odds, softmax scores or log mean).

        Parameters
        ----------
        X : array-like of shape (n, p)

        Returns
        -------
        ndarray of shape (n,) (logistic, Poisson) or (n, C) (multinomial)
        """
        self._check_fitted()
        S = self._design(self._check_X(X, reset=False)) @ self.theta_
        budgets.note_evaluation(self)           # exact scores inside a budget: reported, not covered
        return S[:, 0] if S.shape[1] == 1 else S

    @_available_if(_is_classifier)
    def decision_function(self, X) -> np.ndarray:
        """Confidence scores, classifiers only (Poisson has none: `linear_predictor`):
        positive for ``classes_[1]`` with two classes.

        Parameters
        ----------
        X : array-like of shape (n, p)

        Returns
        -------
        ndarray of shape (n,) with two classes (the log-odds), else (n, C) (softmax scores)
        """
        S = self.linear_predictor(X)
        if S.ndim == 2 and S.shape[1] == 2:       # softmax over two classes: scikit-learn's binary shape
            return S[:, 1] - S[:, 0]
        return S

    @_available_if(_is_classifier)
    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities, classifiers only.

        Parameters
        ----------
        X : array-like of shape (n, p)

        Returns
        -------
        ndarray of shape (n, C)
            Columns in the order of ``classes_``; for logistic ``[1 - p, p]``.
        """
        S = self.linear_predictor(X)
        fam = get_family(self.family)
        if not fam.classes:                     # one output: the second class's probability
            p1 = fam.model().mean(S)
            return np.column_stack([1.0 - p1, p1])
        return fam.model(len(self.classes_)).mean(S)

    @_available_if(_is_classifier)
    def predict_log_proba(self, X) -> np.ndarray:
        """The logarithm of `predict_proba`, classifiers only.

        Parameters
        ----------
        X : array-like of shape (n, p)

        Returns
        -------
        ndarray of shape (n, C)
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X) -> np.ndarray:
        """The predicted class (classifiers) or mean count (Poisson).

        Parameters
        ----------
        X : array-like of shape (n, p)

        Returns
        -------
        ndarray of shape (n,)
        """
        S = self.linear_predictor(X)
        fam = get_family(self.family)
        if not fam.labelled:                    # a regressor: the mean
            return fam.model().mean(S)
        if not fam.classes:                     # one output: the second class where its score is positive
            return self.classes_[(S > 0).astype(int)]
        if S.shape[1] == 2:
            return self.classes_[(S[:, 1] - S[:, 0] > 0).astype(int)]
        return self.classes_[np.argmax(S, axis=1)]

    # ------------------------------------------------------------ inference (api/inference)
    def summary(self, alpha: float = 0.05, cov_type: str = "model", withheld: str = "hide"):
        """Coefficients with standard errors, z, p and intervals (`fedgdp.api.inference`).

        Parameters
        ----------
        alpha : float, default=0.05
            The intervals' level is ``1 - alpha``.
        cov_type : {"model", "robust"}, default="model"
            ``se_sampling`` from the inverse information ``H^-1`` (statsmodels' default) or
            the sandwich ``H^-1 S H^-1`` (statsmodels' ``HC0``).
        withheld : {"hide", "show"}, default="hide"
            ``hide``: z, p and the interval are NaN for a coefficient the fit cannot back
            (not converged, features not standardised, noise that swamps it; the ``note``
            column and the header say why); ``show``: printed anyway, the note kept.

        Returns
        -------
        pandas.DataFrame
            One row per coefficient (intercept first; for multinomial a block per class,
            centred across the classes): ``coef``, ``se``, ``z``, ``p``, ``ci_low``,
            ``ci_high``, ``se_sampling``, ``se_noise``, ``note``; printed under a header (family,
            method, m, N, mu spent and inference's share, guarantee, noise secret, what is withheld).
        """
        self._check_fitted()
        return inference_.summary(self, alpha, cov_type, withheld)

    def conf_int(self, alpha: float = 0.05, cov_type: str = "model", withheld: str = "hide"):
        """The ``1 - alpha`` confidence intervals of `summary` alone.

        Parameters
        ----------
        alpha : float, default=0.05
        cov_type : {"model", "robust"}, default="model"
        withheld : {"hide", "show"}, default="hide"
            As in `summary`.

        Returns
        -------
        pandas.DataFrame
            Columns ``ci_low``, ``ci_high``; `summary`'s rows.
        """
        self._check_fitted()
        return inference_.conf_int(self, alpha, cov_type, withheld)

    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy (classifiers) or the fraction of Poisson deviance explained, D^2 (Poisson).

        Parameters
        ----------
        X : array-like of shape (n, p)
        y : array-like of shape (n,)
        sample_weight : None, default=None
            A weight is refused, as by `fit` (`fedgdp.api.routing.SAMPLE_WEIGHT_REFUSAL`).

        Returns
        -------
        float
        """
        refuse_metadata({"sample_weight": sample_weight}, type(self).__name__, "score")
        pred = self.predict(X)
        y = column_or_1d(y, len(pred))
        if _is_classifier(self):
            return float(np.mean(pred == y))
        y = _numeric(y, "y")
        null = np.full_like(pred, np.mean(y))
        return 1.0 - _poisson_deviance(y, pred) / _poisson_deviance(y, null)


# ------------------------------------------------------------------ helpers
def resolve_np_pooled() -> dict:
    """NP-Pooled's resolved settings (the reference of a mu = inf fit's ``fit_info_``)."""
    from ..realdata import resolve

    return resolve({"methods": ["np_pooled"], "mu": [math.inf]}).method_settings["np_pooled"]
