"""A site's lifetime ledger on its own disk: every release of its records, in every run, before it leaves.

The privacy unit is one record (a row: its features and its label, as
`fedgdp.api.budget.record_keys` keys it). The ledger
keeps one append-only file, ``ledger.jsonl``, in a directory of the site's choosing, and
one file per set of rows, ``rows/<digest>.npy`` (the records' sorted digests; the set's
digest names it, so the same rows in another file, format or order are the same set).

Before a release leaves, the site appends one line (the run, the request's place in the
run's script, the run's composed mu after it) and fsyncs it, under a lock (``fcntl``) so
that runs served at once cannot pass the budget together. The spend of a set of rows is
``sqrt(sum_r mu_r^2)`` over every run ``r`` whose rows share a record with it (each run
counted at its composed mu, its last line): runs on other files, or on an earlier version
of this file, count whenever they share one record. A release that would bring it past the
site's lifetime mu is refused. A site killed between the line and the release has counted
a release that never left, which is safe; one killed before the line released nothing. A
restarted site reads its place in a run from the ledger (`SiteLedger.position`). A torn
last line (a crash inside a write) stops the site until its operator looks
(fail closed). docs/federation.md, "The ledger".
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os

import numpy as np

__all__ = ["SiteLedger", "UNIT"]

#: The privacy unit the ledger counts: one record of the site's data.
UNIT = "record"
_TOL = 1e-12          # relative slack of the comparison with the lifetime mu (float sums)


class SiteLedger:
    """The lifetime ledger of one site's rows (module docstring).

    Parameters
    ----------
    path : str
        The ledger's directory (created if absent; keep it on the site's own disk, mode 0700).
    keys : list of bytes
        One 16-byte key per record (`fedgdp.api.budget.record_keys` of the site's features and labels).
    lifetime_mu : float
        The most any record of the site may spend over all runs (a site setting).
    """

    def __init__(self, path: str, keys: list, lifetime_mu: float):
        lifetime_mu = float(lifetime_mu)
        if not (math.isfinite(lifetime_mu) and lifetime_mu > 0):
            raise ValueError(f"lifetime_mu must be a finite positive number, got lifetime_mu={lifetime_mu!r}")
        self.path, self.lifetime_mu = str(path), lifetime_mu
        self.rows = np.unique(np.frombuffer(b"".join(keys), np.uint8).reshape(-1, 16), axis=0)
        self.digest = hashlib.sha256(UNIT.encode() + b"\0" + self.rows.tobytes()).hexdigest()
        os.makedirs(os.path.join(self.path, "rows"), mode=0o700, exist_ok=True)
        self.file = os.path.join(self.path, "ledger.jsonl")
        self._overlap: dict[str, bool] = {self.digest: True}
        rows_file = os.path.join(self.path, "rows", self.digest + ".npy")
        if not os.path.exists(rows_file):
            tmp = rows_file + f".{os.getpid()}.tmp"
            with open(tmp, "wb") as fh:
                np.save(fh, self.rows)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, rows_file)
            _fsync_dir(os.path.dirname(rows_file))
        self.read()         # a torn or foreign ledger fails here, before the site joins

    # ------------------------------------------------------------ reading
    def read(self) -> list[dict]:
        """Every line of the ledger (a torn line: ValueError naming it)."""
        if not os.path.exists(self.file):
            return []
        out = []
        with open(self.file, "rb") as fh:
            for i, line in enumerate(fh, 1):
                try:
                    entry = json.loads(line)
                    if not line.endswith(b"\n") or entry.get("unit") != UNIT:
                        raise ValueError
                except ValueError:
                    raise ValueError(f"ledger {self.file}: line {i} is torn or not a fedgdp ledger line; the site "
                                     f"stops until its operator looks (a crash inside a write?)") from None
                out.append(entry)
        return out

    def _shares(self, digest: str) -> bool:
        """Whether the rows set ``digest`` shares a record with this site's rows."""
        if digest not in self._overlap:
            try:
                other = np.load(os.path.join(self.path, "rows", digest + ".npy"))
            except OSError:
                other = None        # its rows file is gone: count it (conservative)
            self._overlap[digest] = True if other is None else bool(
                len(np.intersect1d(_as_void(other), _as_void(self.rows))))
        return self._overlap[digest]

    def runs(self, lines: list[dict] | None = None) -> dict:
        """Each run that shares a record with these rows: its composed mu (its last line's).

        Parameters
        ----------
        lines : list of dict or None
            The ledger's lines (None: read them).
        """
        out: dict = {}
        for e in self.read() if lines is None else lines:
            if self._shares(e["rows"]):
                out[e["run"]] = max(out.get(e["run"], 0.0), float(e["mu_run"]))
        return out

    def spent(self, lines: list[dict] | None = None, *, without: str | None = None) -> float:
        """The composed mu these rows have spent over all runs, ``sqrt(sum_r mu_r^2)`` (optionally without a run).

        Parameters
        ----------
        lines : list of dict or None
            The ledger's lines (None: read them).
        without : str or None
            A run left out (the one being charged).
        """
        return math.sqrt(sum(mu * mu for run, mu in self.runs(lines).items() if run != without))

    def position(self, run: str) -> tuple[int, set]:
        """How many of the run's requests these rows have answered (its last line's place; 0 for a new run),
        and the digests of the settings its lines name.

        Parameters
        ----------
        run : str
            The run's id.
        """
        lines = [e for e in self.read() if e["run"] == run and e["rows"] == self.digest]
        return max((int(e["request"]) for e in lines), default=0), {e["settings"] for e in lines}

    def room(self, run: str, mu_run: float) -> str | None:
        """Why a run spending ``mu_run`` in all would pass the lifetime mu (None when it fits).

        Parameters
        ----------
        run : str
        mu_run : float
        """
        before = self.spent(without=run)
        if before ** 2 + mu_run ** 2 > self.lifetime_mu ** 2 * (1 + _TOL):
            return (f"these rows have spent mu = {before:.6g} of their lifetime mu = {self.lifetime_mu:g} in earlier "
                    f"runs; a run at mu = {mu_run:g} would bring them to {math.hypot(before, mu_run):.6g}")
        return None

    # ------------------------------------------------------------ charging
    def charge(self, run: str, request: int, stage: str, mu_run: float, settings: str) -> None:
        """Append and fsync the line of one release, or refuse (ValueError) past the lifetime mu; under the lock.

        Parameters
        ----------
        run : str
            The run's id.
        request : int
            The request's place in the run's script (1-based).
        stage : str
            Its ledger stage.
        mu_run : float
            The run's composed mu once this release is made.
        settings : str
            The digest of the run's settings.
        """
        with self._locked():
            lines = self.read()
            before = self.spent(lines, without=run)
            total = math.hypot(before, mu_run)
            if not total <= self.lifetime_mu * (1 + _TOL):
                raise ValueError(f"release {request} of run {run} would bring these rows to mu = {total:.6g}, past "
                                 f"their lifetime mu = {self.lifetime_mu:g} (spent {before:.6g} in other runs)")
            entry = {"unit": UNIT, "rows": self.digest, "run": run, "request": int(request), "stage": stage,
                     "mu_run": float(mu_run), "settings": settings}
            new = not os.path.exists(self.file)
            fd = os.open(self.file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, (json.dumps(entry, sort_keys=True) + "\n").encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            if new:
                _fsync_dir(self.path)

    @contextlib.contextmanager
    def _locked(self):
        fd = os.open(os.path.join(self.path, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _as_void(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(np.asarray(a, np.uint8).reshape(-1, 16))
    return a.view(np.dtype((np.void, 16))).ravel()


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
