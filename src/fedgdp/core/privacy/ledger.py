"""The ledger: every Gaussian release of every client, composed in mu-GDP (``sqrt(sum mu_j^2)``; docs/methods.md §2)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .gdp import compose

#: What a ledger's mu means, printed with every client's report (docs/methods.md §2).
GUARANTEE = ("record-level mu-GDP at each client, against everything that client releases, in this one fit "
             "(one record of this client's data is protected, not its whole data set; mu_certified; mu is nominal when "
             "mu_certified is inf); not across fits: FedNewton and certified FedNewton share noise, fits at "
             "different mu reuse it, a real-data record enters several CV fits; test metrics are released "
             "without noise; float64 sampling (Mironov 2012) is not covered")


@dataclass(frozen=True, eq=False)
class Release:
    """``count`` identical Gaussian releases by every client.

    Attributes
    ----------
    stage : str
    count : int or ndarray of int of shape (n_rep, m)
        Releases per client: one for all, or each client's own (`calibrate_schedule`).
    sensitivity, sigma : ndarray of shape (n_rep, m)
        ``sigma = 0`` with ``sensitivity = inf`` is non-private.
    certified : bool
        Whether the sensitivity holds for every input, else it rests on ``assumption``.
    """

    stage: str
    count: int | np.ndarray
    sensitivity: np.ndarray
    sigma: np.ndarray
    certified: bool = True
    assumption: str = ""

    @property
    def mu(self) -> np.ndarray:
        """mu of one release, ``sensitivity / sigma``, shape (n_rep, m)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.divide(self.sensitivity, self.sigma)
        return np.where(self.sigma == 0, np.inf, out)


@dataclass
class Ledger:
    """Every Gaussian release of every client, with GDP composition.

    ``unaccounted`` lists data-dependent choices outside the ledger (e.g. a data-driven clipping
    bound); with any, or an uncertified release, mu is nominal and `certified_mu` is inf.
    """

    releases: list[Release] = field(default_factory=list)
    unaccounted: list[str] = field(default_factory=list)

    def add(self, stage: str, count, sensitivity, sigma, *, certified: bool = True,
            assumption: str = "") -> None:
        """Record ``count`` releases of one stage (sensitivity and sigma broadcast together and copied).

        Parameters
        ----------
        stage : str
        count : int or ndarray of int
            Releases per client: one number, or each client's own, broadcastable to (n_rep, m).
        sensitivity, sigma : float or ndarray
            One release's L2 sensitivity (inf: non-private) and noise sd, broadcastable to (n_rep, m).
        certified : bool
        assumption : str
            The condition it rests on when not certified.
        """
        sens, sig = np.broadcast_arrays(np.asarray(sensitivity, float), np.asarray(sigma, float))
        if np.ndim(count):
            sens, sig, c = np.broadcast_arrays(sens, sig, np.asarray(count, np.int64))
            count = c.copy()
        else:
            count = int(count)
        self.releases.append(Release(stage, count, sens.copy(), sig.copy(), bool(certified),
                                     str(assumption)))

    def composed_mu(self, stages=None) -> np.ndarray:
        """Composed (nominal) mu of each client, ``sqrt(sum_j mu_j^2)`` (`compose`), shape (n_rep, m).

        Parameters
        ----------
        stages : collection of str, optional
            Only the releases of these stages (None: all).
        """
        chosen = (r for r in self.releases if stages is None or r.stage in stages)
        return np.asarray(compose((r.mu, r.count) for r in chosen))

    @property
    def certified(self) -> bool:
        """True when every release is certified and nothing is unaccounted."""
        return all(r.certified for r in self.releases) and not self.unaccounted

    def spent_mu(self, counts: dict) -> np.ndarray:
        """Composed mu of the releases actually made, shape (n_rep, m): at most `composed_mu`, which allows for all.

        Parameters
        ----------
        counts : dict
            Stage -> releases made per client, broadcastable to (n_rep, m); a stage absent counts 0.
        """
        return np.asarray(compose((rel.mu, counts.get(rel.stage, 0)) for rel in self.releases))

    def certified_mu(self) -> np.ndarray:
        """`composed_mu` where the ledger is certified, inf otherwise, shape (n_rep, m)."""
        mu = self.composed_mu()
        return mu if self.certified else np.full_like(np.asarray(mu, float), np.inf)

    def client_report(self, replicate: int = 0) -> list[dict]:
        """JSON-ready list: for each client, its releases, composed mu and certified mu.

        Parameters
        ----------
        replicate : int
            The replicate (row of the (n_rep, m) arrays) reported.

        Returns
        -------
        list of dict
            Per client: ``client``, ``releases`` (one entry each), ``mu``, ``mu_certified``, ``guarantee``.
        """
        mu = self.composed_mu()[replicate]
        mu_cert = self.certified_mu()[replicate]
        out = []
        for i in range(mu.shape[0]):
            rel = []
            for r in self.releases:
                entry = {"stage": r.stage, "sensitivity": float(r.sensitivity[replicate, i]),
                         "sigma": float(r.sigma[replicate, i]), "certified": r.certified,
                         "assumption": r.assumption}
                rel.extend([entry] * int(np.broadcast_to(r.count, r.sigma.shape)[replicate, i]))
            out.append({"client": i, "releases": rel, "mu": float(mu[i]), "mu_certified": float(mu_cert[i]),
                        "guarantee": GUARANTEE})
        return out

    def to_dp_event(self, client: int = 0, replicate: int = 0) -> Any:
        """One client's releases as a ``dp_accounting`` event, for Google's accountants
        (needs the ``dp-accounting`` package).

        Each stage is ``count`` ``GaussianDpEvent`` of noise multiplier ``sigma / sensitivity`` (0:
        non-private), all in one ``ComposedDpEvent``; nominal, like `composed_mu`, unless `certified`.

        Parameters
        ----------
        client, replicate : int
            The column and row of the (n_rep, m) arrays.
        """
        import dp_accounting

        events = []
        for r in self.releases:
            count = int(np.broadcast_to(r.count, r.sigma.shape)[replicate, client])
            sens, sigma = float(r.sensitivity[replicate, client]), float(r.sigma[replicate, client])
            if count == 0 or (sens == 0 and sigma > 0):       # nothing released, or nothing leaks
                continue
            z = sigma / sens if sigma > 0 else 0.0
            event = dp_accounting.GaussianDpEvent(noise_multiplier=z)
            events.append(event if count == 1 else dp_accounting.SelfComposedDpEvent(event, count))
        return dp_accounting.ComposedDpEvent(events)
