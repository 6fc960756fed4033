"""The audit of the CNN releases (`fedgdp.audit`), run by the CNN backend itself.

Each release is `fedgdp.nn.backend.TorchBackend.release` (the training's own operations,
``tests/nn/test_nn_release.py``) with the arguments the method's run passes, against the
sensitivity in the ledger the backend's `calibrate` makes for the audited client, so a
wrong sensitivity in `fedgdp.nn.settings.reduced_plan` shows as a ratio above 1.

The search: public states (`_states`); bases of random or identical images of client
sizes ``n``, 2, 1 and, under ``local_batch`` b, b + 1, in float64 and (size 1) float32;
one image of every minibatch replaced by zeros, NaN, the float maximum, scaled or random
images or the base's own, with every label.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ..core.privacy import LOCAL_STEP
from .search import AuditRow, AuditTarget, _Search, change

if TYPE_CHECKING:
    from ..nn.settings import NNSettings

__all__ = ["NN_KEYS", "CLIENTS", "nn_settings_of", "nn_targets", "readings_targets", "audit_nn"]

#: The CNN settings an audit reads (those its releases, plans and schedule depend on).
NN_KEYS = ("mu", "clip", "lr", "server_lr", "ridge", "damping", "rounds", "local_epochs", "hybrid_local_share",
           "newton_cycles", "reduction", "local_batch", "accounting", "clip_unit", "q")
#: Clients of the audit's backend: client 0 is audited, the others share its schedule's draws.
CLIENTS = 4


def _states(seed: int, torch) -> list:
    """Public points ``(label, params, classes)``: two random tiny ConvNets (3 classes) and one
    whose zero head splits every image 50/50 between 2 classes (a label flip there reverses
    the head gradient: the Newton release's worst case).
    """
    from ..nn.models import ConvNet

    out = []
    for label, s, classes in (("random 0", seed, 3), ("random 1", seed + 1, 3), ("50/50 head", seed + 2, 2)):
        torch.manual_seed(s)
        net = ConvNet(in_shape=(1, 4, 4), channels=(2,), hidden=3, classes=classes)
        params = {k: v.detach().clone() for k, v in net.named_parameters()}
        if classes == 2:
            params["head.weight"].zero_()
            params["head.bias"].zero_()
        out.append((label, params, classes))
    return out


def _search(keep: dict, methods: list, seed: int, n: int) -> dict:
    """The worst neighbouring pair of every release of ``methods`` at a target's settings ``keep`` (`NN_KEYS`,
    resolved with ``release: private`` and clients of ``n`` images):
    ``(method, stage) -> (_Search of ratios change / recorded, certified)``."""
    import torch

    from ..methods import CNN, get_method
    from ..nn.backend import TorchBackend
    from ..nn.settings import cnn_settings, resolve
    from ..nn.train import ClientData

    run = resolve({**keep, "release": "private", "n": n, "methods": methods})
    meths = {name: get_method(name, CNN) for name in methods}
    sets = {name: cnn_settings(meth, run) for name, meth in meths.items()}
    update = run.clip_unit == "update"

    def backend(params, x, y):
        clients = ClientData([x] * CLIENTS, [y] * CLIENTS)
        return TorchBackend(params, clients, run, np.random.default_rng(seed), torch.Generator().manual_seed(seed),
                            stack=False)

    states = _states(seed, torch)
    probe = backend(states[0][1], torch.zeros((1, 1, 4, 4)), torch.zeros(1, dtype=torch.int64))
    jobs: dict = {}                                   # (stage, kwargs) -> methods that release it
    for name, meth in meths.items():
        for stage, calls in probe.release_args(meth, sets[name]).items():
            for kw in calls:
                jobs.setdefault((stage, tuple(sorted(kw.items()))), []).append(name)
    recorded: dict = {}                               # size -> (method, stage) -> (sensitivity, certified)

    def ledger_of(size, params, x, y):
        if size not in recorded:
            recorded[size] = {}
            for name, meth in meths.items():
                _, (ledger,) = backend(params, x, y).calibrate(meth, sets[name])
                for rel in ledger.releases:
                    recorded[size][(name, rel.stage)] = (float(np.asarray(rel.sensitivity)[0, 0]), rel.certified)
        return recorded[size]

    searches = {(name, stage): _Search() for (stage, _kw), names in jobs.items() for name in names}
    missing = {key for key in searches if key not in ledger_of(1, states[0][1], probe.clients.x[0],
                                                                 probe.clients.y[0])}
    if missing:
        raise RuntimeError(f"CNN releases without a ledger entry: {sorted(missing)}")
    gen = torch.Generator().manual_seed(seed)
    sizes = [n, 2, 1]
    b = run.local_batch
    if b is not None and b + 1 not in sizes:
        sizes.append(int(b) + 1)                      # a pass of two unequal minibatches
    for dtype in (torch.float64, torch.float32):
        big = float(torch.finfo(dtype).max)
        for slabel, params64, classes in states:
            params = {k: v.to(dtype) for k, v in params64.items()}
            for size in (sizes if dtype == torch.float64 else [1]):
                for blabel in ("random", "identical"):
                    x = torch.randn((size, 1, 4, 4), generator=gen).to(dtype)
                    y = torch.randint(0, classes, (size,), generator=gen)
                    if blabel == "identical":
                        x, y = x[:1].expand_as(x).clone(), torch.zeros_like(y)
                    sens = ledger_of(size, params, x, y)
                    batches = None if update else backend(params, x, y).pass_batches(0)
                    places = [int(rows[0]) for rows in batches] if batches is not None else [0]

                    def release(stage, kw, xs, ys, params=params, batches=batches):
                        return backend(params, xs, ys).release(stage, params, 0, batches=batches, **dict(kw))

                    base = {(stage, kw): release(stage, kw, x, y) for stage, kw in jobs}
                    images = [("image 0", x[0]), ("zeros", torch.zeros_like(x[0])),
                              ("NaN", torch.full_like(x[0], float("nan"))), ("float max", torch.full_like(x[0], big))]
                    for c in (1.0, 10.0, 1e3):
                        images += [(f"{c:g} ones", torch.full_like(x[0], c)),
                                   (f"{c:g} random", c * torch.randn(x[0].shape, generator=gen).to(dtype))]
                    for (stage, kw), names in jobs.items():
                        for place in (places if stage == LOCAL_STEP else [0]):
                            for ilabel, img in images:
                                for label in range(classes):
                                    xs, ys = x.clone(), y.clone()
                                    xs[place], ys[place] = img, label
                                    moved = change(release(stage, kw, xs, ys).numpy(), base[(stage, kw)].numpy())
                                    pair = (f"{slabel} state, {blabel} base n={size}, {str(dtype)[6:]}: record "
                                            f"{place} -> {ilabel}, y={label}")
                                    for name in names:
                                        rec = sens[(name, stage)][0]
                                        searches[(name, stage)].see(moved / rec, pair, (size, moved, rec))
    certified = {key: cert for (key, (_, cert)) in recorded[1].items()}
    return {key: (search, certified[key]) for key, search in searches.items()}


def nn_settings_of(config: dict | None) -> list[NNSettings]:
    """The distinct private CNN settings of a run config's ``nn`` section (`NN_KEYS`), with
    their methods, resolved (`fedgdp.nn.settings.resolve`); the digits defaults when none.

    Parameters
    ----------
    config : dict or None
        A merged run config (`fedgdp.commands.audit.read_run_config`); None: the defaults.
    """
    from ..nn.settings import resolve

    nn = (config or {}).get("nn")
    if config is not None and not nn:
        return []
    nn = nn or {}
    out = []
    for dataset in nn.get("datasets", ["digits"]):
        over = dict(nn.get("settings", {}))
        over.update(nn.get("dataset_settings", {}).get(dataset) or {})
        over.update(dataset=dataset, n=30)
        if "methods" in nn:
            over["methods"] = nn["methods"]
        p = resolve(over)
        if math.isfinite(p.mu) and p.release == "private" and p not in out:
            out.append(p)
    return out


def nn_targets(config: dict | None = None) -> list[AuditTarget]:
    """One ``kind="nn"`` target per CNN method and distinct setting of `nn_settings_of`.

    Parameters
    ----------
    config : dict or None
        A merged run config; None: the default settings.
    """
    out = []
    for p in nn_settings_of(config):
        keep = {k: getattr(p, k) for k in NN_KEYS}
        out += [AuditTarget("nn", method, "cnn", nn=keep) for method in p.methods]
    return out


def readings_targets(path) -> list[AuditTarget]:
    """One target per method and certified reading (finite certified mu) of a readings config,
    at its own settings; readings differing only in what no release depends on share one.

    Parameters
    ----------
    path : str or path
        A readings config (``config/nn-readings.yaml``).
    """
    from ..nn.readings import load_readings, pieces, privacy_of
    from ..nn.settings import resolve

    out: dict = {}
    for reading, _figure, _x, _run, over in pieces(load_readings(path)):
        p = resolve(over)
        if not math.isfinite(privacy_of(p.release, p.mu, p.accounting, noise_for=p.noise_for)[0]):
            continue
        keep = {k: getattr(p, k) for k in NN_KEYS}
        for method in p.methods:
            key = (method, repr(sorted(keep.items())))
            t = out.setdefault(key, AuditTarget("nn", method, "cnn", nn=keep, reading=reading))
            if reading not in t.reading.split(", "):     # readings whose releases are the same (e.g. init)
                out[key] = replace(t, reading=f"{t.reading}, {reading}")
    return list(out.values())


def audit_nn(targets: list[AuditTarget], seed: int, *, n: int = 20) -> list[AuditRow]:
    """Search every release of CNN targets (one search per distinct setting); a non-finite
    change counts as inf.

    Parameters
    ----------
    targets : list of AuditTarget
        CNN targets (`nn_targets`, `readings_targets`).
    seed : int
        Seed of the images, the networks and the backend's streams.
    n : int, default=20
        Size of the main client (2, 1 and b + 1 under ``local_batch`` b are searched too).
    """
    groups: dict = {}
    for t in targets:
        groups.setdefault(repr(sorted((t.nn or {}).items())), []).append(t)
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)                   # a tiny network: one thread is the fastest (and shares the cores)
    try:
        done = {key: _search(dict(ts[0].nn or {}), list(dict.fromkeys(t.method for t in ts)), seed, n)
                for key, ts in groups.items()}
    finally:
        torch.set_num_threads(threads)
    rows = []
    for t in targets:
        found = done[repr(sorted((t.nn or {}).items()))]
        for (method, stage), (search, certified) in found.items():
            if method != t.method:
                continue
            _, moved, rec = search.record
            rows.append(AuditRow(f"nn:{method}", "cnn", stage, certified, moved, rec, search.best, "any",
                                 search.evals, search.pair, t.label(), max(search.finite_best, 0.0)))
    return rows
