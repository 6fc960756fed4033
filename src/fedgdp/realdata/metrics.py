"""Per-client metrics of the real-data study: AUC (binary) and accuracy (multiclass)."""
from __future__ import annotations

import numpy as np

from ..core.glm import GLM

__all__ = ["auc", "accuracy", "client_metric"]


def auc(scores: np.ndarray, y: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney, ties count half); NaN if one class is absent.

    Parameters
    ----------
    scores : ndarray of shape (n,)
        Scores (higher: more likely positive).
    y : ndarray of shape (n,)
        Labels, 0/1 or bool.
    """
    from scipy.stats import rankdata

    y = np.asarray(y).astype(bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def accuracy(P: np.ndarray, labels: np.ndarray) -> float:
    """Share of rows whose most probable class is the label (NaN when n = 0).

    Parameters
    ----------
    P : ndarray of shape (n, k)
        Class probabilities.
    labels : ndarray of shape (n,)
        Class indices in ``0..k-1``.
    """
    return float(np.mean(np.argmax(P, axis=1) == np.asarray(labels)))


def client_metric(task: str, model: GLM, Theta, X, labels) -> float:
    """A client's metric of ``Theta`` on its test rows: AUC (``binary``) or accuracy; NaN when n = 0.

    Parameters
    ----------
    task : str
        ``binary`` (AUC of the first column of the fitted means), else multiclass.
    model, Theta
        The model and the estimate (d, k).
    X : ndarray of shape (n, d)
        The client's test rows.
    labels : ndarray of shape (n,)
        0/1 labels (binary) or class indices.
    """
    if labels.shape[0] == 0:
        return float("nan")
    P = model.predict(Theta, X)
    return auc(P[:, 0], labels) if task == "binary" else accuracy(P, labels)
