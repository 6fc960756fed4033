"""A site's guard: the site's own long-lived process, the only one that holds its data, ledger and key.

A Flower SuperNode started with ``--isolation process`` runs no ClientApp itself: it waits
for a process on its Runtime API to take each message. The guard is that process
(`serve`): it takes every message addressed to the site and answers it with fedgdp's
`fedgdp.federation.site.Site`, never with code from the app bundle (FAB) the coordinator
submitted, so whatever app a coordinator runs, the site's reply is the guard's. The data
file's path, the ledger and the key are in the guard's own configuration file
(`read_config`), not in the SuperNode's ``--node-config``. An app whose bundle's SHA-256
is not on the site's list (``apps``) gets one refusal line per message and one log line
per run (`Guard.answer`). docs/federation.md, "What a site trusts".

The configuration (TOML)::

    name = "a"                      # the site's name in the run's list of sites
    data = "/srv/site/a.csv"        # its rows (read by the guard only)
    settings = "/srv/site/settings.json"  # the public settings it serves (read at each new run)
    ledger = "/srv/site/ledger"     # its lifetime ledger (fedgdp.federation.ledger)
    lifetime_mu = 2.0               # the most any of its records may spend over all runs
    key = "/srv/site/a_key"         # the SuperNode's private key: the greeting is signed with it
    apps = ["<sha256 of the FAB>"]  # the app bundles it serves (python -m fedgdp.federation app-hash APP)
    runtime = "127.0.0.1:9094"      # the SuperNode's Runtime API (its --port)
    poll = 0.1                      # optional: seconds between its asks for a task when idle
    backoff = 0.05                  # optional: first wait for a message's part not yet at the SuperNode
"""
from __future__ import annotations

import json
import os
import pickle
import time
import tomllib
from dataclasses import dataclass

import numpy as np

from ..api.budget import record_keys
from .ledger import SiteLedger
from .site import LOG, Site, read_site

__all__ = ["Guard", "SiteConfig", "read_config", "serve"]


@dataclass
class SiteConfig:
    """A site's configuration (module docstring); ``test_seed``, ``test_index``, ``test_sites`` in tests only."""

    name: str
    data: str
    settings: str
    ledger: str
    lifetime_mu: float
    apps: list
    key: str | None = None
    runtime: str = "127.0.0.1:9094"
    root_certificates: str | None = None
    poll: float = 0.1
    backoff: float = 0.05
    test_seed: int | None = None
    test_index: int | None = None
    test_sites: int | None = None


def read_config(path: str) -> SiteConfig:
    """The site's configuration from its TOML file, checked (ValueError naming the key).

    Parameters
    ----------
    path : str
        The file.
    """
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"site configuration {path}: {exc}") from None
    known = set(SiteConfig.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"site configuration {path}: unknown key(s) {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(known))}")
    for k in ("name", "data", "settings", "ledger", "lifetime_mu", "apps"):
        if k not in raw:
            raise ValueError(f"site configuration {path}: {k!r} is required")
    apps = raw["apps"]
    if not isinstance(apps, list) or not all(isinstance(a, str) and len(a) == 64 for a in apps):
        raise ValueError(f"site configuration {path}: apps must list the SHA-256 (64 hex digits) of each app "
                         f"bundle the site serves (python -m fedgdp.federation app-hash APP), got apps={apps!r}")
    for k in ("poll", "backoff"):
        v = raw.get(k, 1.0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 10:
            raise ValueError(f"site configuration {path}: {k} must be a number of seconds in (0, 10], got {k}={v!r}")
    return SiteConfig(**raw)


class Guard:
    """The site's answers, run by run (the transport-free half of `serve`).

    Parameters
    ----------
    config : SiteConfig
        The site's configuration.
    """

    def __init__(self, config: SiteConfig):
        from .identity import load_private_key

        self.config = config
        self.key = None if config.key is None else load_private_key(config.key)
        self.sites: dict = {}                  # run -> Site (or a refusal line)
        self.logged: set = set()
        self._settings()                       # the site's file and settings checked before it joins

    def _settings(self) -> tuple:
        """The settings, rows and ledger as they are now (read at each new run)."""
        with open(self.config.settings) as fh:
            settings = json.load(fh)
        X, y = read_site(self.config.data, settings)
        ledger = SiteLedger(self.config.ledger, record_keys(np.asarray(X, dtype=float), y), self.config.lifetime_mu)
        return settings, X, y, ledger

    def _site(self, run: str):
        if run not in self.sites:
            c = self.config
            try:
                settings, X, y, ledger = self._settings()
                self.sites[run] = Site(X, y, settings, name=c.name, test_seed=c.test_seed, test_index=c.test_index,
                                       test_sites=c.test_sites, ledger=ledger, run=run, key=self.key)
            except (OSError, ValueError) as exc:
                self.sites[run] = f"site {c.name}: refused: cannot serve run {run}: {exc}"
        return self.sites[run]

    def _refuse(self, run: str, line: str) -> dict:
        if run not in self.logged:             # one log line per run
            self.logged.add(run)
            LOG.warning(line)
        return {"refused": line}

    def answer(self, run: str, app: str, kind: str, request: dict | None) -> dict:
        """The site's reply to one message: a release, a greeting, or ``{"refused": line}``.

        Parameters
        ----------
        run : str
            The run's id.
        app : str
            The SHA-256 of the run's app bundle (FAB).
        kind : str
            The message's type (fedgdp's are ``query``).
        request : dict or None
            The decoded request (None: the message is not one of fedgdp's).
        """
        c = self.config
        if app not in c.apps:
            return self._refuse(run, f"site {c.name}: refused: run {run}'s app (FAB sha256 {app[:16]}...) is not "
                                     f"one this site serves; nothing was read or released")
        if kind != "query" or request is None:
            return self._refuse(run, f"site {c.name}: refused: run {run} sent a {kind!r} message that is not a "
                                     f"fedgdp request")
        site = self._site(run)
        if isinstance(site, str):
            return self._refuse(run, site)
        return site.handle(request)


def _pushed(path: str, token: str) -> bool:
    """Whether the reply of the task with ``token`` is noted as pushed (`_save` of the token at ``path``)."""
    if not os.path.exists(path):
        return False
    with open(path, "rb") as fh:
        return pickle.load(fh) == token


def _save(path: str, record) -> None:
    """Write the message in flight (pickled), fsynced, replacing the last."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        pickle.dump(record, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def pull_task_input(client, backoff: float):    # pragma: no cover - run by .ci/flower.sh
    """Flower's ``pull_task_input`` (``flwr.supernode.runtime.run_clientapp``, 1.42.0) with a shorter backoff.

    The SuperNode hands out a task before it has pulled the message's objects from the
    SuperLink; Flower's own ClientApp then waits 1 s (``PULL_INITIAL_BACKOFF``) before it asks
    again for an object not yet there. The guard asks again after ``backoff`` seconds
    (doubling, at most 10 times that). Returns ``(message, context, run, fab)`` as Flower's does.

    Parameters
    ----------
    client : flwr.supercore.runtime.RuntimeHttpClient
        The task's client of the SuperNode's Runtime API.
    backoff : float
        The first wait, in seconds, for an object not yet at the SuperNode.
    """
    from flwr.app import Message
    from flwr.common.serde import context_from_proto, fab_from_proto, run_from_proto
    from flwr.proto.node_pb2 import Node
    from flwr.proto.runtime_pb2 import PullAppMessagesRequest, PullTaskInputRequest
    from flwr.supercore.inflatable.inflatable_protobuf_utils import (
        make_confirm_message_received_fn_protobuf,
        make_pull_object_fn_protobuf,
    )
    from flwr.supercore.inflatable.inflatable_utils import pull_and_inflate_object_from_tree
    from flwr.supercore.task_identity import TaskIdentity

    res = client.PullTaskInput(PullTaskInputRequest())
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = res.task_id, res.run.run_id, res.context.node_id
    context, run, fab = context_from_proto(res.context), run_from_proto(res.run), fab_from_proto(res.fab)
    pulled = client.PullMessages(PullAppMessagesRequest())
    if not pulled.messages_list:
        raise RuntimeError("No messages received from Runtime API")
    node, tree = Node(node_id=context.node_id), pulled.message_object_trees[0]
    message = pull_and_inflate_object_from_tree(
        tree, make_pull_object_fn_protobuf(client.PullObject, node, context.run_id),
        make_confirm_message_received_fn_protobuf(client.ConfirmMessageReceived, node, context.run_id),
        return_type=Message, initial_backoff=backoff, backoff_cap=10 * backoff)
    message.metadata.__dict__["_message_id"] = tree.object_id
    return message, context, run, fab


def serve(config: SiteConfig, *, once: bool = False) -> None:    # pragma: no cover - run by .ci/flower.sh
    """Take every message of the SuperNode at ``config.runtime`` and answer it with `Guard.answer` (needs flwr).

    The message in flight is kept on disk (``inflight.pickle`` in the ledger's directory)
    with its task's token, and with the reply message once it is made (after its ledger
    line): a guard killed before its reply left finishes that message when it restarts,
    pushing the same reply message when it was made (no second release; a push cut short
    is completed) and otherwise answering it from the ledger's place, so the SuperNode is
    not left waiting for a task that no one holds. A reply noted as pushed
    (``inflight.pushed``, its task's token, written after the push) is not pushed again:
    Flower's SuperNode would keep the copy and send it as the reply to the next message,
    and every later reply would come one message late. A guard killed between the push
    and that note still pushes it twice.

    Parameters
    ----------
    config : SiteConfig
        The site's configuration.
    once : bool
        Return after one message (tests).
    """
    from flwr.app import Message
    from flwr.common.constant import SubStatus
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore.constant import TaskType
    from flwr.supercore.heartbeat import HeartbeatSender, make_task_heartbeat_fn_http
    from flwr.supercore.interceptors import RuntimeTokenHttpInterceptor, RuntimeVersionHttpInterceptor
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient
    from flwr.supercore.task_identity import TaskIdentity
    from flwr.supernode.runtime.run_clientapp import push_message, push_task_output

    from .app import decode, encode

    guard = Guard(config)
    inflight = os.path.join(config.ledger, "inflight.pickle")
    pushed = os.path.join(config.ledger, "inflight.pushed")       # the token of a reply pushed
    certificates = None
    if config.root_certificates:
        with open(config.root_certificates, "rb") as fh:
            certificates = fh.read()

    def client(component: str, *more):
        return RuntimeHttpClient.from_server_address(
            server_address=config.runtime, insecure=certificates is None, root_certificates=certificates,
            interceptors=[RuntimeVersionHttpInterceptor(component_name=component), *more],
            retry_invoker=make_simple_http_retry_invoker())

    def finish(record: dict) -> None:
        """Answer the message of ``record`` (its reply made once, kept on disk before it leaves)."""
        task = client("flwr-clientapp", RuntimeTokenHttpInterceptor(record["token"]))
        beat = HeartbeatSender(make_task_heartbeat_fn_http(task))
        beat.start()
        try:
            if "msg" not in record:
                msg, context, run, fab = pull_task_input(task, config.backoff)
                record.update(msg=msg, context=context, run=str(run.run_id), app=fab.hash_str,
                              ids=(TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id))
                _save(inflight, record)
            TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = record["ids"]
            msg = record["msg"]
            if "reply" not in record:
                try:
                    request = decode(msg.content)
                except Exception:               # not fedgdp's message: refused, never run
                    request = None
                reply = Message(encode(guard.answer(record["run"], record["app"], msg.metadata.message_type,
                                                    request)), reply_to=msg)
                record["reply"] = reply         # the same message (its id, its objects) if pushed again
                _save(inflight, record)         # after the ledger's line, before the reply leaves
            if not _pushed(pushed, record["token"]):   # a reply pushed twice is sent again for the next message
                push_message(task, record["reply"], record["context"])
                _save(pushed, record["token"])          # its own file: the pushed message no longer pickles
            push_task_output(task, record["context"], SubStatus.COMPLETED, "")
        finally:
            beat.stop()
            task.close()
            for path in (pushed, inflight):
                if os.path.exists(path):
                    os.remove(path)

    if os.path.exists(inflight):
        with open(inflight, "rb") as fh:
            left = pickle.load(fh)
        LOG.warning(f"site {config.name}: finishing the message in flight when the guard stopped")
        try:
            finish(left)
        except Exception as exc:            # its token expired: the SuperNode fails that message itself
            LOG.warning(f"site {config.name}: could not finish it ({type(exc).__name__}: {exc})")
    tasks = client("SuperExec")
    LOG.warning(f"site {config.name}: guard serving the SuperNode at {config.runtime}")
    while True:
        got = tasks.AcquireTask(AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP]))
        if not (got.HasField("task") and got.token):
            time.sleep(config.poll)
            continue
        taken = time.perf_counter()
        record = {"token": got.token}
        _save(inflight, record)
        finish(record)
        LOG.info(f"site {config.name}: a message of run {record.get('run')} answered in "
                 f"{time.perf_counter() - taken:.3f} s")
        if once:
            return
