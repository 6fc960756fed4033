"""The client labels through scikit-learn's tools: metadata routing and a loud default.

[`FederatedGLM`][fedgdp.api.estimator.FederatedGLM] inherits [`ClientsRouting`][fedgdp.api.routing.ClientsRouting]:
scikit-learn's metadata-routing protocol, written here so that importing fedgdp imports no
scikit-learn (docs/real-data.md, "Clients through scikit-learn's tools").

A fit without client labels treats all rows as one client (m = 1): a different
guarantee from the federated one, so it warns ([`SingleClientWarning`][fedgdp.api.routing.SingleClientWarning])
unless the caller says so with ``clients="single"`` ([`client_labels`][fedgdp.api.routing.client_labels]).
"""
from __future__ import annotations

import math
import warnings

import numpy as np

__all__ = ["ClientsRouting", "SingleClientWarning", "SINGLE", "SAMPLE_WEIGHT_REFUSAL", "client_labels",
           "refuse_metadata"]

#: The ``clients`` value that asks for one client holding every row, without a warning
SINGLE = "single"

_UNCHANGED = "$UNCHANGED$"        # scikit-learn's sentinel of set_*_request (sklearn.utils.metadata_routing)

#: Why ``fit`` and ``score`` refuse ``sample_weight`` (docs/privacy.md, "Row weights")
SAMPLE_WEIGHT_REFUSAL = (
    "sample_weight is not supported: a record's weight w would scale its clipped gradient by w and enter the "
    "sensitivity every release is calibrated on (for weight 1), so fit refuses it, and score refuses it alike, "
    "so that no search scores weights its fits never used; drop sample_weight (docs/privacy.md, 'Row weights')")


def refuse_metadata(params: dict, owner: str, method: str) -> None:
    """Refuse the extra keyword arguments of ``fit`` or ``score`` (`SAMPLE_WEIGHT_REFUSAL` for ``sample_weight``).

    Parameters
    ----------
    params : dict
        The extra keyword arguments.
    owner : str
        The estimator's name.
    method : str
        ``fit`` or ``score``.

    Raises
    ------
    ValueError
        ``sample_weight`` given (not None).
    TypeError
        Another keyword.
    """
    for name, value in params.items():
        if name != "sample_weight":
            raise TypeError(f"{owner}.{method}() got an unexpected keyword argument {name!r}")
        if value is not None:
            raise ValueError(f"{owner}.{method}: {SAMPLE_WEIGHT_REFUSAL}")


class SingleClientWarning(UserWarning):
    """``fit`` got no client labels, so one client holds every row (m = 1): the whole data set is one party.

    Pass ``clients=`` (one label per row), or ``clients="single"`` to fit one client on purpose."""


def client_labels(clients, n: int, owner: str = "FederatedGLM") -> np.ndarray:
    """The client label of each row, checked; a `SingleClientWarning` when none are given.

    Parameters
    ----------
    clients : array-like of shape (n,), ``"single"`` or None
        One label per row (any hashable values); ``"single"``: one client holding every
        row; None: the same, with a [`SingleClientWarning`][fedgdp.api.routing.SingleClientWarning].
    n : int
        Rows of X.
    owner : str
        The estimator's name (in the warning).

    Returns
    -------
    ndarray of shape (n,)
        The labels (object labels as str).

    Raises
    ------
    ValueError
        Not one label per row, or a missing label (NaN, None).
    """
    if isinstance(clients, str) and clients == SINGLE:
        return np.zeros(n, dtype=np.int64)
    if clients is None:
        warnings.warn(f"{owner}.fit got no clients: one client holds all {n} rows (m = 1), so the guarantee "
                      "is record-level mu-GDP of the whole data set as one client; pass clients=<one label per "
                      "row> (with scikit-learn's tools: docs/real-data.md), or clients='single' to mean it",
                      SingleClientWarning, stacklevel=3)
        return np.zeros(n, dtype=np.int64)
    c = np.asarray(clients)
    if c.ndim != 1 or c.shape[0] != n:
        raise ValueError(f"clients must hold one label per row: {n} rows, got clients of shape {c.shape}")
    if c.dtype.kind == "f" and not np.all(np.isfinite(c)):
        raise ValueError("clients contains NaN or infinity: every row needs a client label")
    if c.dtype.kind == "O":
        if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in c):
            raise ValueError("clients contains missing labels: every row needs a client label")
        c = c.astype(str)
    return c


class ClientsRouting:
    """scikit-learn's metadata-routing protocol for ``fit``'s ``clients``.

    With ``sklearn.set_config(enable_metadata_routing=True)``, a meta-estimator
    (``Pipeline``, ``GridSearchCV``, ``cross_validate(..., params=...)``) passes
    ``clients`` to ``fit`` only when the estimator asks for it:
    ``FederatedGLM(...).set_fit_request(clients=True)``. The request is kept in
    ``_metadata_request``, which ``sklearn.base.clone`` copies.
    """

    def set_fit_request(self, *, clients=_UNCHANGED, **refused):
        """Ask for ``clients`` in ``fit`` when metadata routing is enabled (``sample_weight`` is refused).

        Parameters
        ----------
        clients : bool, None or str, default="$UNCHANGED$"
            True: route ``clients`` to ``fit``; False: do not; None: refuse it if given
            (scikit-learn's default); a str: route the metadata of that name as
            ``clients``; unchanged when not given.
        **refused
            ``sample_weight=True`` (or an alias) is refused; any other name is unknown.

        Returns
        -------
        self

        Raises
        ------
        RuntimeError
            Metadata routing is not enabled (``sklearn.set_config(enable_metadata_routing=True)``).
        ValueError
            ``sample_weight`` requested.
        """
        refuse_metadata({k: (v or None) for k, v in refused.items()}, type(self).__name__, "set_fit_request")
        return self._set_request("fit", "clients", clients)

    def set_score_request(self, *, sample_weight=_UNCHANGED):
        """``score``'s side of metadata routing: ``sample_weight`` is known (for ``Pipeline.score``), never requested.

        Parameters
        ----------
        sample_weight : bool, None or str, default="$UNCHANGED$"
            False or None: not requested (None, the default, makes scikit-learn refuse a
            weight passed to a tool); True or an alias: refused
            ([`SAMPLE_WEIGHT_REFUSAL`][fedgdp.api.routing.SAMPLE_WEIGHT_REFUSAL]).

        Returns
        -------
        self

        Raises
        ------
        RuntimeError
            Metadata routing is not enabled.
        ValueError
            ``sample_weight`` requested.
        """
        if not (isinstance(sample_weight, str) and sample_weight == _UNCHANGED):
            refuse_metadata({"sample_weight": sample_weight or None}, type(self).__name__, "set_score_request")
        return self._set_request("score", "sample_weight", sample_weight)

    def _set_request(self, method: str, param: str, alias):
        """Store ``alias`` as the request of ``param`` in ``method`` (unchanged: the sentinel)."""
        from sklearn import get_config

        if not get_config().get("enable_metadata_routing", False):
            raise RuntimeError("This method is only available when metadata routing is enabled. You can enable "
                               "it using sklearn.set_config(enable_metadata_routing=True).")
        request = self._get_metadata_request()
        if not (isinstance(alias, str) and alias == _UNCHANGED):
            getattr(request, method).add_request(param=param, alias=alias)
        self._metadata_request = request
        return self

    def _get_metadata_request(self):
        """The stored request, or the default: ``fit`` knows ``clients`` and ``score``
        knows ``sample_weight`` (neither requested; a weight is refused)."""
        from sklearn.utils.metadata_routing import MetadataRequest

        stored = getattr(self, "_metadata_request", None)
        if stored is not None:
            return stored.__sklearn_clone__()
        request = MetadataRequest(owner=self)
        request.fit.add_request(param="clients", alias=None)
        request.score.add_request(param="sample_weight", alias=None)
        return request

    def get_metadata_routing(self):
        """The metadata this estimator consumes (scikit-learn's protocol).

        Returns
        -------
        sklearn.utils.metadata_routing.MetadataRequest
            ``fit`` consumes ``clients`` as set by
            [`set_fit_request`][fedgdp.api.routing.ClientsRouting.set_fit_request].
        """
        return self._get_metadata_request()
