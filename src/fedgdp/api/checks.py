"""The estimator's checks of its inputs: ``clip``, ``classes``, ``X`` and ``y``.

`FederatedGLM` reads its users' arguments through these (the underscored ones private to the
estimator API, `fedgdp.api.estimator` and `fedgdp.api.spec`; `check_features` and `column_or_1d`
also a site's, `fedgdp.federation`; scikit-learn's error types where it is installed, without
importing it otherwise).
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ..core.families import get_family


class _NotFittedError(ValueError, AttributeError):
    """Raised by a method that needs a fitted estimator (scikit-learn's NotFittedError
    when scikit-learn is installed)."""


def _not_fitted_error():
    try:
        from sklearn.exceptions import NotFittedError
    except ImportError:
        return _NotFittedError
    return NotFittedError


def _data_conversion_warning():
    try:
        from sklearn.exceptions import DataConversionWarning
    except ImportError:
        return UserWarning
    return DataConversionWarning


def _clip_rule(clip):
    """The estimator's ``clip`` as a real-data clipping rule (checked by the resolver);
    None: the public rule (`fedgdp.api.forecast.public_clip`), which needs the design's columns."""
    if clip is None:
        return None
    if isinstance(clip, str):
        if clip in ("quantile", "private_quantile"):
            return {"rule": clip, "q": 0.9} | ({"share": 0.1} if clip == "private_quantile" else {})
        raise ValueError(f"clip must be None, a number, 'quantile', 'private_quantile' or a dict, got clip={clip!r}")
    if isinstance(clip, numbers.Real) and not isinstance(clip, bool):
        return float(clip)
    if isinstance(clip, dict):
        return dict(clip)
    raise ValueError(f"clip must be None, a number, 'quantile', 'private_quantile' or a dict, got clip={clip!r}")


def _check_missing(y: np.ndarray) -> None:
    """ValueError naming ``y`` and the first row when a label is missing (None or NaN)."""
    if y.dtype.kind != "O":
        return
    for i, v in enumerate(y.tolist()):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            raise ValueError(f"y contains a missing label (None or NaN) at row {i}: every row needs a label")


def _label_domain(classes, family: str) -> np.ndarray:
    """``classes`` checked (a 1-d list of distinct, non-missing labels, 2 for logistic, >= 2
    otherwise) and sorted as ``np.unique`` sorts: the order of ``classes_``, whatever order
    was given (a public domain, so sorting it is post-processing of public information)."""
    if isinstance(classes, (str, bytes)) or np.ndim(classes) != 1:
        raise ValueError(f"classes must be a list of labels, e.g. classes=[0, 1], got classes={classes!r}")
    dom = np.asarray(classes)
    if dom.dtype.kind == "O":
        _check_missing(dom.astype(object))
    elif dom.dtype.kind == "f" and not np.all(np.isfinite(dom)):
        raise ValueError(f"classes must hold finite labels, got classes={list(classes)!r}")
    if dom.dtype.kind not in "biufUSO":
        raise ValueError(f"classes must hold numbers or strings, got dtype {dom.dtype}")
    values = dom.tolist()
    if len(set(values)) != len(values):
        raise ValueError(f"classes must be distinct, got classes={values!r}")
    top = get_family(family).max_classes
    need = "exactly 2" if top == 2 else "at least 2"
    if len(values) < 2 or (top is not None and len(values) > top):
        raise ValueError(f"family {family!r} needs {need} classes, got classes={values!r}")
    try:        # scikit-learn's order (np.unique): its scorers read predict_proba's columns so
        return np.unique(dom)
    except TypeError:        # e.g. numbers and strings mixed in an object array
        kinds = sorted({type(v).__name__ for v in values})
        raise ValueError(f"classes must hold labels of one type that sort, got {', '.join(kinds)} in "
                         f"classes={values!r}") from None


def _public_codes(y: np.ndarray, domain: np.ndarray):
    """(classes, codes (n,)) against the public domain; a label outside it is refused.

    Numbers against numbers, or strings against strings: `np.searchsorted` in the sorted domain; other
    kinds (objects, mixed) by Python equality, label by label."""
    if (y.dtype.kind in "biuf" and domain.dtype.kind in "biuf") or (y.dtype.kind == domain.dtype.kind == "U"):
        at = np.minimum(np.searchsorted(domain, y), len(domain) - 1)
        codes = np.where(domain[at] == y, at, -1).astype(np.int64)
    else:
        index = {v: i for i, v in enumerate(domain.tolist())}
        codes = np.fromiter((index.get(v, -1) for v in y.tolist()), dtype=np.int64, count=len(y))
    bad = np.flatnonzero(codes < 0)
    if len(bad):
        raise ValueError(f"y holds the label {y[bad[0]].tolist()!r} at row {bad[0]} (from 0; {len(bad)} row(s) in "
                         f"all), "
                         f"which is not in classes={domain.tolist()!r}: a label outside the public domain is "
                         "refused before anything is released")
    return domain, codes


def _data_codes(y: np.ndarray):
    """(np.unique(y), codes (n,)): the label set taken from the data (not covered)."""
    try:
        classes, codes = np.unique(y, return_inverse=True)
    except TypeError:        # e.g. numbers and strings mixed
        kinds = sorted({type(v).__name__ for v in y.tolist()})
        raise ValueError(f"y mixes label types ({', '.join(kinds)}): use one type of label") from None
    if len(classes) < 2:
        raise ValueError(f"FederatedGLM needs samples of at least 2 classes in the data, but the data "
                         f"contain only one class: {classes[0]!r}")
    return classes, codes.reshape(-1)


def _feature_names(X):
    cols = getattr(X, "columns", None)
    if cols is None:
        return None
    names = np.asarray(list(cols), dtype=object)
    if len(names) and all(isinstance(c, str) for c in names):
        return names
    if any(isinstance(c, str) for c in names):
        raise TypeError("Feature names are only supported if all input features have string names, "
                        f"got mixed types: {sorted({type(c).__name__ for c in names})}")
    return None


def _numeric(arr, what: str) -> np.ndarray:
    arr = np.asarray(arr)
    if arr.dtype.kind not in "biuf":
        try:
            arr = arr.astype(np.float64)
        except TypeError as exc:       # e.g. a dict among the values
            raise TypeError(f"{what} must hold numbers: {exc}") from None
        except ValueError as exc:      # e.g. a string that is no number
            raise ValueError(f"{what} must hold numbers: {exc}") from None
    arr = arr.astype(np.float64, copy=False)
    flat = np.ravel(arr, order="K")                   # a view of a contiguous array, checked a block at a time
    if not all(np.isfinite(flat[lo:lo + (1 << 20)]).all() for lo in range(0, flat.size, 1 << 20)):
        raise ValueError(f"Input {what} contains NaN or infinity: every value must be finite")
    return arr


def check_features(X, who: str = "FederatedGLM") -> np.ndarray:
    """X as a dense 2-D array of finite numbers with at least one row and one column (scikit-learn's
    messages), or TypeError / ValueError.

    Parameters
    ----------
    X : array-like of shape (n, p)
    who : str
        The estimator's name, for the messages.
    """
    if hasattr(X, "toarray") or type(X).__module__.startswith("scipy.sparse"):
        raise TypeError(f"{who} does not accept sparse input: X is a sparse matrix "
                        "(pass a dense array, e.g. X.toarray())")
    arr = np.asarray(X)
    if np.iscomplexobj(arr):
        raise ValueError("Complex data not supported")
    arr = _numeric(arr, "X")
    if arr.ndim != 2:
        raise ValueError(f"Expected 2D array, got {arr.ndim}D array instead. Reshape your data, e.g. "
                         "X.reshape(-1, 1) for a single feature or X.reshape(1, -1) for a single sample")
    if arr.shape[0] < 1:
        raise ValueError(f"Found array with 0 sample(s) (shape={arr.shape}) while a minimum of 1 is required.")
    if arr.shape[1] < 1:
        raise ValueError(f"Found array with 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
    return arr


def column_or_1d(y, n: int) -> np.ndarray:
    """y as a 1-d array of ``n`` values (a column vector warns, as in scikit-learn), or ValueError.

    Parameters
    ----------
    y : array-like of shape (n,) or (n, 1)
    n : int
        The rows of X.
    """
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn("A column-vector y was passed when a 1d array was expected. Please change the shape "
                      "of y to (n_samples,), for example using ravel().", _data_conversion_warning(), stacklevel=3)
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} instead.")
    if y.shape[0] != n:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: X has {n} rows, "
                         f"y has {y.shape[0]}")
    return y


def _poisson_deviance(y: np.ndarray, mean: np.ndarray) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(y > 0, y * np.log(y / mean), 0.0)
    return float(2 * np.sum(term - (y - mean)))
