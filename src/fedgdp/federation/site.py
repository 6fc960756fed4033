"""A site of a fit across sites: one client's rows, its own noise, its own ledger, its guard.

A `Site` holds its checked rows, the public settings and the method's plan calibrated on
its own n_i (noise sds, ledger composing to its mu). It is the backend of its one client
(`fedgdp.realdata.RealBackend` on its own `fedgdp.realdata.FoldData`), so every release
is the in-process code's. The guard answers only the next request of the *script* that the
method's own ``run`` makes against a `fedgdp.federation.coordinator.Recorder`; anything else
is refused in one logged line. With a `fedgdp.federation.ledger.SiteLedger` (the site's
lifetime ledger on its own disk) every release is written and fsynced there before it
leaves, a site rebuilt for the same run takes up its place from it, and a run that would
take the site's rows past their lifetime mu is refused. With a key the greeting is signed
(`fedgdp.federation.identity`). Noise is fresh entropy, or with a test seed the in-process
fit's stream (guarantee void). docs/federation.md, "The site is the guardian".
"""
from __future__ import annotations

import hashlib
import json
import logging
import math

import numpy as np

from ..core import privacy
from ..realdata import RealBackend
from ..realdata.backend import gradient_release
from .coordinator import PublicFold, Recorder, run_method
from .settings import check_settings, resolve, same_settings

__all__ = ["Refused", "Site", "STAGES", "read_site"]

LOG = logging.getLogger("fedgdp.federation")

#: The ledger stage of each request (its ``part`` for local steps) and how many releases it makes.
STAGES = {("local", "full"): privacy.LOCAL_STEP, ("local", "half1"): privacy.LOCAL_STEP_HALF1,
          ("gradient", None): privacy.GRADIENT, ("newton", None): privacy.NEWTON}


class Refused(ValueError):
    """A request the site refuses (the message is its one logged line)."""


def read_site(path: str, settings):
    """The site's features X (n, p), a DataFrame, and targets y (n,) from its file, checked.

    Parameters
    ----------
    path : str
        A ``.csv`` or ``.parquet`` file with the settings' ``target`` and ``features`` columns.
    settings : dict or SiteSettings
        Public settings (`fedgdp.federation.settings.check_settings`).
    """
    from ..api.fitting import feature_columns, read_table

    checked = check_settings(settings)
    df = read_table(path)
    cols = feature_columns(df, checked.target, checked.target, checked.features)
    return df[cols], df[checked.target].to_numpy()


class Site:
    """One site: its rows, its settings, its noise and its ledger.

    Parameters
    ----------
    X : array-like of shape (n, p)
        The site's features (the settings' ``features``, in that order).
    y : array-like of shape (n,)
        Its labels or counts.
    settings : dict
        The public settings it was started with (`fedgdp.federation.settings.check_settings`).
    name : str
        The site's name in its log lines.
    test_seed : int or None
        None: noise from the operating system's entropy. An int: the stream of
        ``FederatedGLM(random_state=test_seed)`` (the guarantee is void).
    test_index, test_sites : int or None
        With a test seed: this site's place among the ``test_sites`` clients of the in-process fit.
    ledger : fedgdp.federation.ledger.SiteLedger or None
        The site's lifetime ledger of these rows (None: the run's releases are counted in memory only).
    run : str
        The run's id in the ledger (a site rebuilt for the same run takes up its place there).
    key : EllipticCurvePrivateKey or None
        The site's key: its greeting is signed (`fedgdp.federation.identity.sign`).
    """

    def __init__(self, X, y, settings: dict, *, name: str = "site", test_seed: int | None = None,
                 test_index: int | None = None, test_sites: int | None = None, ledger=None, run: str = "run",
                 key=None):
        from ..api.checks import check_features, column_or_1d
        from ..api.estimator import estimator_rng
        from ..api.spec import design, targets

        self.settings, self.name = check_settings(settings), str(name)
        if test_seed is not None and not (isinstance(test_index, int) and isinstance(test_sites, int)
                                          and 0 <= test_index < test_sites):
            raise ValueError(f"a test seed needs test_index in [0, test_sites), got test_index={test_index!r}, "
                             f"test_sites={test_sites!r}")
        s = self.settings
        p = len(s.features)
        r = resolve(s, p + bool(s.fit_intercept))
        X = check_features(X)
        if X.shape[1] != p:
            raise ValueError(f"site {self.name}: {X.shape[1]} feature columns, the settings name {p}")
        Y, model, _ = targets(s.family, s.classes, column_or_1d(y, len(X)))
        need = 2 if r.meth.tags.halves else 1
        if len(X) < need:
            raise ValueError(f"site {self.name} has {len(X)} row(s); method {r.meth.name} needs at least {need}")
        self.meth, self.s, self.model = r.meth, r.method_settings, model
        # C order, as `FederatedGLM.fit` takes a client's rows (by index): the products' sums run in the same order
        self.fold = r.fold([np.ascontiguousarray(design(X, bool(s.fit_intercept)))], [Y])
        self.test = None if test_seed is None else (int(test_index), int(test_sites))  # type: ignore[arg-type]
        rng = (np.random.default_rng(np.random.SeedSequence()) if test_seed is None
               else estimator_rng(test_seed, r.meth.noise_stream))
        self.backend = RealBackend([self.fold], rng)
        sigmas, ledgers = self.backend.calibrate(self.meth, self.s)     # (1, 1) sds per stage; the site's ledger
        self.sigmas = {spec.stage: sig for spec, sig in zip(self.meth.plan(self.fold, self.s), sigmas)}
        self.ledger = ledgers[0]
        self.script = self._script()
        self.done: list = []
        self.counts: dict = {}
        self.disk, self.run, self.key = ledger, str(run), key
        self.digest = hashlib.sha256(json.dumps(s.as_dict(), sort_keys=True).encode()).hexdigest()
        self.broken = ""
        if ledger is not None:
            done, digests = ledger.position(self.run)
            if digests - {self.digest}:
                self.broken = f"run {self.run} was begun on these rows with other settings"
            self._take_up(done)

    # ------------------------------------------------------------ what the site says
    @property
    def n(self) -> int:
        return int(self.fold.sizes[0])

    @property
    def guarantee(self) -> str:
        """The site's guarantee, one line."""
        mu = float(self.settings.mu)
        if self.test is not None:
            return (f"void: test seed given, anyone who knows it can remove the noise (planned mu = {mu:g} per "
                    f"record of this site)")
        return f"{mu:g}-GDP for one record of this site (noise from the operating system's entropy)"

    def spent_mu(self) -> float:
        """The composed mu of the releases made so far (at most the settings' mu)."""
        return float(np.ravel(self.ledger.spent_mu(self.counts))[0])

    def hello(self, nonce: str = "") -> dict:
        """What the site sends once: its name, size n_i (public to the mechanism), the design's
        columns, the outputs, its test place (-1: none), its guarantee, the digest of its settings
        and the coordinator's ``nonce``; signed when the site has a key.

        Parameters
        ----------
        nonce : str
            The coordinator's one-time value of this run's hello (the signature covers it).
        """
        from .identity import sign

        index = -1 if self.test is None else self.test[0]
        out = {"name": self.name, "n": self.n, "d": self.fold.d, "k": self.fold.k, "index": index,
               "guarantee": self.guarantee, "settings": self.digest, "nonce": str(nonce)}
        if self.key is not None:
            out["signature"] = sign(self.key, out)
        return out

    def _take_up(self, done: int) -> None:
        """Take up the run at its ``done``-th request (a site rebuilt mid-run, from its ledger)."""
        self.done, self.counts = list(self.script[:done]), {}
        for want in self.done:
            stage = STAGES[(want["op"], want.get("part"))]
            self.counts[stage] = self.counts.get(stage, 0) + want.get("K", 1)

    # ------------------------------------------------------------ the guard
    def _script(self) -> list:
        """The requests the settings make, checked to spend exactly the site's plan."""
        fold = PublicFold(self.model, [], [], mu=self.fold.mu, B=self.fold.B, tau1=self.fold.tau1,
                          newton=self.fold.newton, privacy=self.fold.privacy, clip=self.fold.clip,
                          n=(self.n,), dim=self.fold.d)
        rec = Recorder()
        run_method(self.meth, fold, self.s, rec)
        counts: dict = {}
        for req in rec.requests:
            stage = STAGES[(req["op"], req.get("part"))]
            counts[stage] = counts.get(stage, 0) + req.get("K", 1)
        plan = {r.stage: r.count for r in self.ledger.releases}
        if counts != plan:
            raise ValueError(f"site {self.name}: the settings' requests make releases {counts}, the plan {plan}")
        return rec.requests

    def _check(self, request: dict) -> dict:
        """The script's next request, or `Refused`."""
        public = {k: v for k, v in request.items() if k != "theta"}
        step = len(self.done)
        if self.broken:
            raise Refused(self.broken)
        if step >= len(self.script):
            raise Refused(f"request {step + 1} ({public}) is past the {len(self.script)} the settings allow: it "
                          f"would spend past mu = {self.settings.mu:g} (spent {self.spent_mu():.6g})")
        want = self.script[step]
        if public != want:
            raise Refused(f"request {step + 1} ({public}) changes a setting: the settings the site was started "
                          f"with ask {want}")
        theta = np.asarray(request.get("theta"), dtype=float)
        if theta.shape != (self.fold.d, self.fold.k) or not np.all(np.isfinite(theta)):
            raise Refused(f"request {step + 1}: theta must be finite of shape ({self.fold.d}, {self.fold.k}), got "
                          f"shape {theta.shape}")
        return want

    def _skip(self, draws: int) -> None:
        """With a test seed: the draws of the other sites in the in-process order."""
        for _ in range(draws):
            self.backend.noise.draw((self.fold.d, self.fold.k))

    def _release(self, want: dict, theta: np.ndarray) -> np.ndarray:
        """The release the request asks, computed on the site's rows with its own noise."""
        be, noise, T = self.backend, self.backend.noise.take("Z"), theta[None]
        K = want.get("K", 1)
        before, after = (0, 0) if self.test is None else (self.test[0] * K, (self.test[1] - 1 - self.test[0]) * K)
        stage = STAGES[(want["op"], want.get("part"))]
        sigma = self.sigmas[stage]
        self._skip(before)
        if want["op"] == "local":
            out = be.local_steps(T, K=K, eta=want["eta"], sigma=sigma, noise=noise, part=want["part"])[:, 0]
        elif want["op"] == "gradient":
            out = gradient_release([self.fold], 0, T, sigma[:, 0], noise)
        else:
            local = be.newton_release(T, hessian_bound=want["hessian_bound"])
            if not np.isfinite(local).all():
                raise Refused(f"the Newton release is not finite at this theta (method {self.meth.name})")
            out = be.add_noise(local, sigma, noise)[:, 0]
        self._skip(after)
        return out[0]

    def handle(self, request: dict) -> dict:
        """The reply to one request: ``{"release": (d, k)}``, a hello, or ``{"refused": line}``.

        Parameters
        ----------
        request : dict
            ``{"op": "hello", "settings": ...}``, or a client step (`fedgdp.federation.coordinator`).
        """
        try:
            if request.get("op") == "hello":
                theirs = request.get("settings")
                try:
                    theirs = check_settings(theirs)
                except ValueError as exc:
                    raise Refused(f"the coordinator's settings are invalid: {exc}") from None
                if not same_settings(theirs, self.settings):
                    mine, other = self.settings.as_dict(), theirs.as_dict()
                    diff = sorted(k for k in mine if other.get(k) != mine[k])
                    raise Refused(f"the coordinator's settings differ from this site's in {', '.join(diff)}")
                if self.disk is not None and self.done == []:
                    why = self.disk.room(self.run, float(self.settings.mu))
                    if why is not None:
                        raise Refused(f"lifetime budget: {why}")
                return self.hello(str(request.get("nonce", "")))
            want = self._check(request)
            release = self._release(want, np.asarray(request["theta"], dtype=float))
            stage = STAGES[(want["op"], want.get("part"))]
            counts = {**self.counts, stage: self.counts.get(stage, 0) + want.get("K", 1)}
            spent = float(np.ravel(self.ledger.spent_mu(counts))[0])
            if self.disk is not None:          # on the site's disk, fsynced, before the release leaves
                try:
                    self.disk.charge(self.run, len(self.done) + 1, stage, spent, self.digest)
                except ValueError as exc:
                    raise Refused(str(exc)) from None
        except Refused as exc:
            line = f"site {self.name}: refused: {exc}"
            LOG.warning(line)
            return {"refused": line}
        self.done.append(want)
        self.counts = counts            # the script forbids more; checked all the same
        if not spent <= float(self.settings.mu) * (1 + 1e-12) or not math.isfinite(spent):
            raise AssertionError(f"site {self.name}: spent mu {spent} past {self.settings.mu}")
        return {"release": release}
