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
import signal
import time
import tomllib
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..api.budget import record_keys
from .ledger import SiteLedger
from .site import LOG, Site, read_site

__all__ = ["Guard", "SiteConfig", "Unanswerable", "read_config", "serve", "take"]


@dataclass
class SiteConfig:
    """A site's configuration (module docstring); ``test_seed``, ``test_index``, ``test_sites``, ``test_kill_at``
    (`KILL_POINTS`: the guard kills itself there once) in tests only."""

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
    test_kill_at: str | None = None


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
    kill = raw.get("test_kill_at")
    if kill is not None and not (isinstance(kill, str) and kill.partition("@")[0] in KILL_POINTS
                                 and kill.partition("@")[2].isdigit()):
        raise ValueError(f"site configuration {path}: test_kill_at must be POINT@N (POINT one of "
                         f"{', '.join(KILL_POINTS)}; N the message's number), got test_kill_at={kill!r}")
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


class Unanswerable(RuntimeError):
    """A message in flight that a restarted guard cannot take again: the reason, sent back as the reply's error."""


#: The test-only points where a guard kills itself (SIGKILL), each just after Flower's call and before its note.
KILL_POINTS = ("input", "header", "message", "answered")


def _kill_at(config: SiteConfig, point: str, record: dict) -> None:
    """Kill the guard (SIGKILL) at ``point`` of its ``n``-th message when the test-only ``test_kill_at`` is
    ``"point@n"`` (once: a flag file in the ledger's directory)."""
    if config.test_kill_at == f"{point}@{record.get('n')}":
        flag = os.path.join(config.ledger, f"killed-at-{config.test_kill_at}")
        if not os.path.exists(flag):             # once: the restarted guard goes on
            open(flag, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)


def take(client, record: dict, save, backoff: float, config: SiteConfig):    # pragma: no cover - .ci/flower.sh
    """The task's message, taken from the SuperNode's Runtime API in steps, each noted on disk as it comes.

    Flower's own ClientApp (``flwr.supernode.runtime.run_clientapp.pull_task_input``, 1.42.0)
    takes a message in one go: the task's input (which starts the task, once), the message's
    header (handed out once), its parts, then a confirmation (which deletes the parts at
    the SuperNode). A guard killed inside that left no one able to take the message again,
    and the SuperNode waited out Flower's task heartbeat (60 s) before it failed it. Here
    each step is noted in ``record`` (``save``: fsynced) before the next, and the parts
    are confirmed only once the message is on disk, so a restarted guard goes on from its
    last note: it answers the message when it has the run's app hash and the message's
    header, and otherwise raises `Unanswerable` with the reason (the caller replies with
    that error at once: the coordinator's run fails naming it). Only a guard killed in
    the milliseconds between the header's arrival and its note leaves the SuperNode to
    Flower's heartbeat. The parts are pulled after ``backoff`` seconds when not yet there
    (Flower's first wait is 1 s), doubling, at most 10 times that.

    Parameters
    ----------
    client : flwr.supercore.runtime.RuntimeHttpClient
        The task's client of the SuperNode's Runtime API.
    record : dict
        The message in flight (``token``; filled here: ``context``, ``run``, ``app``, ``ids``,
        ``header``, ``msg``).
    save : callable
        Writes ``record`` to disk (fsynced).
    backoff : float
        The first wait, in seconds, for a part not yet at the SuperNode.
    config : SiteConfig
        The site's configuration (its test-only kill point).
    """
    from flwr.app import Message
    from flwr.common.serde import context_from_proto, fab_from_proto, message_from_proto
    from flwr.proto.message_pb2 import Message as ProtoMessage
    from flwr.proto.message_pb2 import ObjectTree
    from flwr.proto.node_pb2 import Node
    from flwr.proto.runtime_pb2 import PullAppMessagesRequest, PullTaskInputRequest
    from flwr.supercore.inflatable.inflatable_protobuf_utils import (
        make_confirm_message_received_fn_protobuf,
        make_pull_object_fn_protobuf,
    )
    from flwr.supercore.inflatable.inflatable_utils import pull_and_inflate_object_from_tree

    lost = None
    if "ids" not in record:
        try:
            res = client.PullTaskInput(PullTaskInputRequest())
        except Exception as exc:        # started before a kill: Flower starts a task once
            lost = (f"the site's guard was restarted after it started this message's task and before it noted the "
                    f"run's app ({type(exc).__name__}); it cannot check the app, so it answers nothing")
        else:
            _kill_at(config, "input", record)
            record.update(context=context_from_proto(res.context), run=str(res.run.run_id),
                          app=fab_from_proto(res.fab).hash_str, ids=(res.task_id, res.run.run_id, res.context.node_id))
            save()
    if "header" not in record:
        pulled = client.PullMessages(PullAppMessagesRequest())
        if not pulled.messages_list:
            raise RuntimeError("the SuperNode handed this task's message out before the guard stopped, and holds "
                               "no copy; it fails the message itself when the task's heartbeat lapses (20 s with "
                               "python -m fedgdp.federation supernode, 60 s with flower-supernode)")
        _kill_at(config, "header", record)
        record["header"] = (pulled.messages_list[0].SerializeToString(),
                            pulled.message_object_trees[0].SerializeToString())
        save()
    proto, tree = ProtoMessage.FromString(record["header"][0]), ObjectTree.FromString(record["header"][1])
    header = message_from_proto(proto)
    if lost:
        raise Unanswerable(lost, header)
    if "msg" not in record:
        node, run_id = Node(node_id=record["ids"][2]), record["ids"][1]
        try:
            message = pull_and_inflate_object_from_tree(
                tree, make_pull_object_fn_protobuf(client.PullObject, node, run_id), lambda _: None,
                return_type=Message, initial_backoff=backoff, backoff_cap=10 * backoff)
        except Exception as exc:
            raise Unanswerable(f"the site's guard could not pull this message's parts from its SuperNode "
                               f"({type(exc).__name__}: {exc}); nothing was read or released", header) from None
        message.metadata.__dict__["_message_id"] = tree.object_id
        _kill_at(config, "message", record)
        record["msg"] = message
        save()
    if "ids" in record:                 # the parts deleted at the SuperNode once the message is on disk
        node, run_id = Node(node_id=record["ids"][2]), record["ids"][1]
        try:
            make_confirm_message_received_fn_protobuf(client.ConfirmMessageReceived, node, run_id)(tree.object_id)
        except Exception:               # confirmed before a kill
            pass
    return record["msg"]


def serve(config: SiteConfig, *, once: bool = False) -> None:    # pragma: no cover - run by .ci/flower.sh
    """Take every message of the SuperNode at ``config.runtime`` and answer it with `Guard.answer` (needs flwr).

    The message in flight is kept on disk (``inflight.pickle`` in the ledger's directory)
    with its task's token, the steps of its taking (`take`), and the reply message once it
    is made (after its ledger line): a guard killed before its reply left finishes that
    message when it restarts, or replies at once with an error naming why it cannot,
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
    from flwr.app import Error, Message
    from flwr.common.constant import ErrorCode, SubStatus
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore.constant import TaskType
    from flwr.supercore.heartbeat import HeartbeatSender, make_task_heartbeat_fn_http
    from flwr.supercore.interceptors import RuntimeTokenHttpInterceptor, RuntimeVersionHttpInterceptor
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient
    from flwr.supercore.task_identity import TaskIdentity
    from flwr.supernode.runtime.run_clientapp import push_message, push_task_output

    from .app import decode, encode
    from .waits import quick_task_heartbeat

    quick_task_heartbeat("task")
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
            try:
                msg = take(task, record, lambda: _save(inflight, record), config.backoff, config)
            except Unanswerable as exc:         # the coordinator's run fails at once, naming the cause
                reason, header = exc.args
                LOG.warning(f"site {config.name}: {reason}")
                error = Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=f"site {config.name}: {reason}")
                where: Any = SimpleNamespace(node_id=header.metadata.dst_node_id, run_id=header.metadata.run_id)
                push_message(task, Message(error, reply_to=header), where)    # all push_message reads of a context
                push_task_output(task, None, SubStatus.FAILED, reason)
                return
            TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = record["ids"]
            if "reply" not in record:
                try:
                    request = decode(msg.content)
                except Exception:               # not fedgdp's message: refused, never run
                    request = None
                reply = Message(encode(guard.answer(record["run"], record["app"], msg.metadata.message_type,
                                                    request)), reply_to=msg)
                _kill_at(config, "answered", record)
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
    count = 0
    while True:
        got = tasks.AcquireTask(AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP]))
        if not (got.HasField("task") and got.token):
            time.sleep(config.poll)
            continue
        taken = time.perf_counter()
        count += 1
        record = {"token": got.token, "n": count}
        _save(inflight, record)
        finish(record)
        LOG.info(f"site {config.name}: a message of run {record.get('run')} answered in "
                 f"{time.perf_counter() - taken:.3f} s")
        if once:
            return
