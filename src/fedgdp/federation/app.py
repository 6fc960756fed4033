"""Flower's ServerApp and ClientApp of a fit across sites (the extra ``flower``; docs/federation.md).

The ServerApp (``server``) is the coordinator: `fedgdp.federation.sites.fit_across` with
Flower messages as its transport (message type ``query``; every site of a step asked at
once). The ClientApp (``client``) is a site: it reads its file and settings from the
SuperNode's ``--node-config`` (``data``, ``settings``, ``name``; ``test-seed``,
``test-index``, ``test-sites`` in tests only), answers with `fedgdp.federation.site.Site`,
and keeps the site's state (requests answered, releases made, its noise generator) in the
run's ``context.state``, which stays on the SuperNode. A message carries the request's
public part as JSON text (``ConfigRecord`` ``request``) and one (d, k) array
(``ArrayRecord`` ``arrays``: ``theta`` down, ``release`` up).

Run config of the ServerApp: ``settings`` (the public settings, JSON text), ``sites`` (how
many), ``out`` (where to write the result, JSON), ``timeout`` (seconds a step waits for
replies), ``extra`` (1: after the fit, ask every site for one more release, the budget
check of .ci/flower.sh).
"""
from __future__ import annotations

import json
import time

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from ..common.io import dumps_strict
from .coordinator import RefusedError
from .site import LOG, Site, read_site
from .sites import SiteLostError, fit_across

__all__ = ["client", "decode", "encode", "server"]

STATE = "fedgdp"


def encode(message: dict) -> RecordDict:
    """A request or reply as Flower records: arrays in ``arrays``, the rest as JSON text.

    Parameters
    ----------
    message : dict
        A request or reply (`fedgdp.federation.coordinator`): arrays of shape (d, k), JSON values.
    """
    arrays = {k: Array(np.ascontiguousarray(v, dtype=float)) for k, v in message.items() if isinstance(v, np.ndarray)}
    rest = {k: v for k, v in message.items() if not isinstance(v, np.ndarray)}
    return RecordDict({"request": ConfigRecord({"json": json.dumps(rest)}), "arrays": ArrayRecord(arrays)})


def decode(records: RecordDict) -> dict:
    """The dict `encode` wrote.

    Parameters
    ----------
    records : flwr.app.RecordDict
    """
    out = json.loads(str(records.config_records["request"]["json"]))
    out.update({k: v.numpy() for k, v in records.array_records["arrays"].items()})
    return out


# ---------------------------------------------------------------- the site
client = ClientApp()


def _site(node: dict) -> Site:
    with open(str(node["settings"])) as fh:
        settings = json.load(fh)
    X, y = read_site(str(node["data"]), settings)
    seed = node.get("test-seed")
    return Site(X, y, settings, name=str(node.get("name", "site")),
                test_seed=None if seed is None else int(seed),
                test_index=None if seed is None else int(node["test-index"]),
                test_sites=None if seed is None else int(node["test-sites"]))


@client.query()
def answer(msg: Message, context: Context) -> Message:
    """The site's reply to one request (its state kept in ``context.state``).

    Parameters
    ----------
    msg : flwr.app.Message
        The request.
    context : flwr.app.Context
        The SuperNode's ``node_config`` (``data``, ``settings``, ``name``, test keys) and the run's state.
    """
    try:
        site = _site(dict(context.node_config))
    except (OSError, ValueError) as exc:
        line = f"site {context.node_config.get('name', '?')}: cannot join: {exc}"
        LOG.warning(line)
        return Message(encode({"refused": line}), reply_to=msg)
    if STATE in context.state.config_records:
        site.restore(str(context.state.config_records[STATE]["site"]))
    reply = site.handle(decode(msg.content))
    context.state.config_records[STATE] = ConfigRecord({"site": site.state()})
    return Message(encode(reply), reply_to=msg)


# ---------------------------------------------------------------- the coordinator
server = ServerApp()


def _nodes(grid: Grid, m: int, timeout: float) -> list:
    until = time.monotonic() + timeout
    while True:
        nodes = sorted(grid.get_node_ids())
        if len(nodes) >= m:
            return nodes[:m]
        if time.monotonic() > until:
            raise SiteLostError(f"{len(nodes)} site(s) connected within {timeout:g} s, the run needs {m}")
        time.sleep(0.5)


def _transport(grid: Grid, nodes: list, timeout: float):
    def ask(pairs: list) -> list:
        msgs = [Message(encode(request), dst_node_id=nodes[j], message_type="query") for j, request in pairs]
        got = {r.metadata.src_node_id: r for r in grid.send_and_receive(msgs, timeout=timeout)}
        out = []
        for j, _ in pairs:
            r = got.get(nodes[j])
            if r is None:
                raise ConnectionError(f"site {j} (node {nodes[j]}) sent no reply within {timeout:g} s")
            if r.has_error():
                raise ConnectionError(f"site {j} (node {nodes[j]}) failed: {r.error.reason}")
            out.append(decode(r.content))
        return out
    return ask


@server.main()
def main(grid: Grid, context: Context) -> None:
    """Run the fit across the connected sites; write the result to the run config's ``out``.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
        The connected SuperNodes.
    context : flwr.app.Context
        The run config (module docstring).
    """
    cfg = context.run_config
    settings, m, timeout = json.loads(str(cfg["settings"])), int(cfg["sites"]), float(cfg.get("timeout", 120))
    result: dict = {}
    try:
        nodes = _nodes(grid, m, timeout)
        ask = _transport(grid, nodes, timeout)
        fit = fit_across(ask, m, settings)
        result = {"theta": fit.theta.tolist(), "sizes": fit.sizes.tolist(), "guarantees": fit.guarantees,
                  "rounds": fit.rounds}
        if int(cfg.get("extra", 0)):
            theta = np.asarray(fit.theta, float)
            replies = ask([(j, {**fit.last, "theta": theta}) for j in range(m)])
            result["extra"] = [r.get("refused", "released") for r in replies]
    except (RefusedError, SiteLostError, ValueError) as exc:
        result["error"] = str(exc)
    with open(str(cfg["out"]), "w") as fh:
        fh.write(dumps_strict(result))
