"""Flower's ServerApp and ClientApp of a fit across sites (the extra ``flower``; docs/federation.md).

The ServerApp (``server``) is the coordinator: it greets every connected node with a
one-time nonce, takes a node for a site of the run's list (``sites``: names and public
keys) only when its greeting is signed with that site's key (`fedgdp.federation.identity`),
refuses the others in one line each, and runs `fedgdp.federation.sites.fit_across` with
Flower messages as its transport (message type ``query``; every site of a step asked at
once). A message carries the request's public part as JSON text (``ConfigRecord``
``request``) and one (d, k) array (``ArrayRecord`` ``arrays``: ``theta`` down, ``release`` up).

The ClientApp (``client``) answers nothing: a site answers through its own guard
(`fedgdp.federation.guard`, a SuperNode with ``--isolation process``), never through code
in the app bundle. A SuperNode that runs the bundle's ClientApp gets a refusal line.

Run config of the ServerApp: ``settings`` (the public settings, JSON text), ``sites`` (the
run's sites, JSON text: ``[{"name": ..., "public_key": ...}, ...]``), ``out`` (where to
write the result, JSON; its progress lines go to ``out`` + ``.progress``), ``timeout``
(seconds a step waits for replies, and the sites to connect), ``extra`` (1: after the fit,
ask every site for one more release, the budget check of .ci/flower.sh). A run that fails
writes ``{"error": ...}`` and ends with an exception, so Flower marks it failed.
"""
from __future__ import annotations

import json
import os
import secrets
import sys
import time

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from ..common.io import dumps_strict
from .identity import identify, read_sites
from .settings import SiteSettings, check_settings
from .site import LOG
from .sites import SiteLostError, fit_across
from .waits import quick_pulls

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

#: What a SuperNode that runs the bundle's ClientApp (no guard) replies.
NO_GUARD = ("refused: a fedgdp site answers through its own guard (python -m fedgdp.federation site, beside a "
            "SuperNode started with --isolation process), never through the app bundle's ClientApp")


@client.query()
def answer(msg: Message, context: Context) -> Message:
    """A refusal: the bundle's ClientApp holds no data and answers nothing (module docstring).

    Parameters
    ----------
    msg : flwr.app.Message
        The request.
    context : flwr.app.Context
        The SuperNode's context (not read).
    """
    LOG.warning(NO_GUARD)
    return Message(encode({"refused": NO_GUARD}), reply_to=msg)


# ---------------------------------------------------------------- the coordinator
server = ServerApp()


#: Seconds between the coordinator's polls for replies (Flower's `send_and_receive` waits 3 s).
POLL = 0.1


def _greetings(grid: Grid, sites: dict, settings: SiteSettings, timeout: float, note) -> tuple[list, list, dict]:
    """Greet every node that connects until each listed site has proved its key: the nodes in the list's order,
    their greetings, and the refused nodes (``{node: why}``); `SiteLostError` naming the missing sites."""
    nonce = secrets.token_hex(16)
    hello = {"op": "hello", "settings": settings.as_dict(), "nonce": nonce}
    greetings: dict = {}
    pending: dict = {}                    # message id -> node
    until = time.monotonic() + timeout
    while True:
        new = [n for n in grid.get_node_ids() if n not in greetings and n not in pending.values()]
        if new:
            ids = grid.push_messages([Message(encode(hello), dst_node_id=n, message_type="query") for n in new])
            pending.update(zip(ids, new))
        for r in grid.pull_messages(list(pending)):
            node = pending.pop(r.metadata.reply_to_message_id, r.metadata.src_node_id)
            greetings[node] = ({"refused": f"Flower error {r.error.code}: {r.error.reason}"} if r.has_error()
                               else decode(r.content))
        found, refused = identify(greetings, sites, nonce)
        missing = [name for name in sites if name not in found]
        if not missing:
            break
        if time.monotonic() > until or (refused and not pending):
            connected = ", ".join(f"{name} (node {node})" for name, node in found.items()) or "none"
            why = "; ".join(f"node {node}: {w}" for node, w in refused.items()) or "none"
            raise SiteLostError(f"site(s) {', '.join(missing)} of the run's list did not prove their key within "
                                f"{timeout:g} s (connected: {connected}; refused: {why})")
        time.sleep(POLL)
    for node, why in refused.items():
        note(f"unknown node {node}: refused ({why})")
    return [found[name] for name in sites], [greetings[found[name]] for name in sites], refused


#: Flower's error code of a reply the SuperNode made for a silent task (``ErrorCode.CLIENT_APP_CRASHED``)
CRASHED = 8


def _exchange(grid: Grid, msgs: list, timeout: float) -> dict:
    """Push ``msgs`` and pull their replies every `POLL` seconds until all came or ``timeout``: ``{node: reply}``."""
    pending = set(grid.push_messages(msgs))
    until, got = time.monotonic() + timeout, {}
    while pending and time.monotonic() < until:
        for r in grid.pull_messages(list(pending)):
            pending.discard(r.metadata.reply_to_message_id)
            got[r.metadata.src_node_id] = r
        if pending:
            time.sleep(POLL)
    return got


def _transport(grid: Grid, nodes: list, names: list, timeout: float):
    def ask(pairs: list) -> list:
        msgs = [Message(encode(request), dst_node_id=nodes[j], message_type="query") for j, request in pairs]
        got = _exchange(grid, msgs, timeout)
        out = []
        for j, _ in pairs:
            r, who = got.get(nodes[j]), f"site {names[j]} (node {nodes[j]})"
            if r is None:
                if nodes[j] in set(grid.get_node_ids()):
                    raise ConnectionError(f"{who} sent no reply within {timeout:g} s though its SuperNode is "
                                          f"connected: its guard is stopped or stuck")
                raise ConnectionError(f"{who} left the federation: its SuperNode is no longer connected")
            if r.has_error():
                lost = (" (its guard stopped while answering and was not back within its SuperNode's task "
                        "heartbeat: restart it, then start a new run)" if r.error.code == CRASHED else "")
                raise ConnectionError(f"{who} failed: Flower error {r.error.code}: {r.error.reason}{lost}")
            out.append(decode(r.content))
        return out
    return ask


def _write(path: str, result: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        fh.write(dumps_strict(result))
    os.replace(tmp, path)         # never a half-written result


@server.main()
def main(grid: Grid, context: Context) -> None:
    """Run the fit across the run's sites; write the result (or the error) to the run config's ``out``.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
        The connected SuperNodes.
    context : flwr.app.Context
        The run config (module docstring).
    """
    cfg = context.run_config
    out = str(cfg["out"])
    result: dict = {}

    def note(line: str) -> None:
        LOG.warning(line)
        with open(out + ".progress", "a") as fh:
            fh.write(line + "\n")

    try:
        grids = sys.modules[type(grid).__module__]
        if hasattr(grids, "pull_objects"):         # a SuperLink's grid: a reply's parts pulled without 1 s waits
            quick_pulls(grids, POLL / 2)
        settings = check_settings(json.loads(str(cfg["settings"])))
        sites, timeout = read_sites(str(cfg["sites"])), float(cfg.get("timeout", 120))
        names = list(sites)
        note(f"run {context.run_id}: waiting for site(s) {', '.join(names)}")
        nodes, hellos, refused = _greetings(grid, sites, settings, timeout, note)
        note(f"sites {', '.join(f'{a} (node {b})' for a, b in zip(names, nodes))} proved their keys")
        ask = _transport(grid, nodes, names, timeout)
        fit = fit_across(ask, len(names), settings, hellos=hellos, progress=note)
        result = {"theta": fit.theta.tolist(), "sizes": fit.sizes.tolist(), "guarantees": fit.guarantees,
                  "rounds": fit.rounds, "sites": [names[j] for j in fit.order],
                  "refused_nodes": {str(k): v for k, v in refused.items()}}
        if int(cfg.get("extra", 0)):
            theta = np.asarray(fit.theta, float)
            replies = ask([(j, {**fit.last, "theta": theta}) for j in range(len(names))])
            result["extra"] = [r.get("refused", "released") for r in replies]
        note(f"run {context.run_id}: done")
    except Exception as exc:          # every failure is the run's result, and the run fails
        result["error"] = f"{type(exc).__name__}: {exc}"
        note(f"run {context.run_id}: failed: {result['error']}")
    _write(out, result)
    if "error" in result:
        raise RuntimeError(result["error"])
