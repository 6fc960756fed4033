"""Flower's waits, shortened: a site's SuperNode and the coordinator's ServerApp without Flower's idle seconds.

Flower (``flwr==1.42.0``) waits in three places where a fedgdp round has nothing to wait for,
each a constant with no option or environment variable:

- a SuperNode that finds no message at the SuperLink sleeps 3 s before it asks again, and
  with a message taken checks every 0.5 s whether its reply is ready
  (``flwr.supernode.start_client_internal``). A round's message is sent as soon as the last
  round's replies are in, so each round waits out most of the 3 s;
- a message is listed before its parts (objects) are uploaded, and whoever pulls a part
  not yet there waits 1 s before asking again (``PULL_INITIAL_BACKOFF``), doubling: the
  SuperNode pulling the coordinator's request, the site's guard pulling it from its
  SuperNode (`fedgdp.federation.guard.pull_task_input`), the ServerApp pulling a reply;
- the SuperLink's SuperExec looks for a new run's ServerApp every 1 s (this one has a
  setting: ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``, docs/federation.md);
- a SuperNode whose task process (the site's guard) stops mid-message fails that message
  only when the task has sent no heartbeat for 60 s (twice ``HEARTBEAT_DEFAULT_INTERVAL``,
  30 s, in ``flwr.supercore.corestate.in_memory_corestate``), and the process beats every
  17-23 s (``flwr.supercore.heartbeat``). Until then the site answers nothing: a restarted
  guard that could not take the message up again left its site locked out for a minute.
  `quick_task_heartbeat` makes both sides count in `TASK_HEARTBEAT` seconds: the guard
  beats every 5.6-7.2 s, and a message whose guard is gone fails after 20 s.

`run_supernode` starts Flower's own SuperNode, with its arguments, in the same process
layout, with its sleeps at most ``poll`` seconds and its pulls first retried after
``poll / 2``; `quick_pulls` does the same for the ServerApp's grid (`fedgdp.federation.app`).
Nothing else of Flower's changes: each is a rebinding of one name in one Flower module,
checked against the pinned version (`FLOWER`). The cost is a request to the SuperLink
every ``poll`` seconds while idle. docs/federation.md, "Speed".
"""
from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from types import ModuleType, SimpleNamespace
from typing import Any

__all__ = ["FLOWER", "TASK_HEARTBEAT", "poll_clock", "quick_pulls", "quick_task_heartbeat", "run_supernode"]

#: the Flower release whose waits this module knows (the version the ``flower`` extra pins)
FLOWER = "1.42.0"

#: seconds of a task's heartbeat interval at a site (Flower's is 30): its SuperNode fails a message whose task
#: (the guard) sent no heartbeat for twice this, and the guard beats every 0.7-0.9 times (this less 2 s)
TASK_HEARTBEAT = 10.0


def _check_version() -> None:
    import flwr

    if flwr.__version__ != FLOWER:
        raise RuntimeError(f"Flower {flwr.__version__} is installed; fedgdp.federation.waits knows the waits of "
                           f"flwr=={FLOWER} only (install the pinned Flower, or use flower-supernode)")


def poll_clock(poll: float) -> SimpleNamespace:
    """A stand-in for the ``time`` module whose ``sleep`` waits at most ``poll`` seconds.

    Parameters
    ----------
    poll : float
        The longest wait, in seconds, in (0, 3].
    """
    if not 0 < poll <= 3:
        raise ValueError(f"poll must be a number of seconds in (0, 3], got {poll!r}")

    def sleep(seconds: float) -> None:
        time.sleep(min(seconds, poll))

    clock = SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if not k.startswith("_")})
    clock.sleep = sleep
    return clock


def quick_pulls(module: ModuleType, backoff: float) -> None:
    """Make ``module``'s ``pull_objects`` (Flower's) first retry a missing part after ``backoff`` seconds.

    The retries double up to ten times ``backoff``; Flower's own limits on tries and time stay.

    Parameters
    ----------
    module : module
        A Flower module that calls ``pull_objects`` by that name.
    backoff : float
        The first wait, in seconds (positive).
    """
    from flwr.supercore.inflatable.inflatable_utils import pull_objects

    _check_version()
    flowers: Callable[..., Any] = pull_objects
    now = getattr(module, "pull_objects", None)
    if isinstance(now, functools.partial):          # shortened before: shortened again from Flower's own
        now = now.func
    if not backoff > 0 or now is not flowers:
        raise RuntimeError(f"{module.__name__}: no Flower pull_objects to shorten (backoff {backoff!r})")
    setattr(module, "pull_objects", functools.partial(flowers, initial_backoff=backoff, backoff_cap=10 * backoff))  # noqa: B010 (typed differently with and without flwr)


def quick_task_heartbeat(side: str) -> None:
    """Count a task's heartbeat in `TASK_HEARTBEAT` seconds: at the SuperNode (``side="supernode"``: a task that
    sent none for twice that fails) or in the guard (``side="task"``: it beats every 0.7-0.9 times that less 2 s).

    Parameters
    ----------
    side : {"supernode", "task"}
        Which process this is.
    """
    import flwr.supercore.corestate.in_memory_corestate as tasks
    import flwr.supercore.heartbeat as beats

    _check_version()
    sides = {"supernode": (tasks, {"HEARTBEAT_DEFAULT_INTERVAL": TASK_HEARTBEAT}),
             "task": (beats, {"HEARTBEAT_DEFAULT_INTERVAL": TASK_HEARTBEAT, "HEARTBEAT_CALL_TIMEOUT": 2.0})}
    if side not in sides:
        raise ValueError(f"side must be 'supernode' or 'task', got {side!r}")
    module, names = sides[side]
    flowers = {"HEARTBEAT_DEFAULT_INTERVAL": 30, "HEARTBEAT_CALL_TIMEOUT": 5}
    for name, value in names.items():
        if getattr(module, name, None) not in (value, flowers[name]):
            raise RuntimeError(f"{module.__name__}.{name} is not Flower {FLOWER}'s {flowers[name]}")
        setattr(module, name, value)


def run_supernode(argv: list[str], poll: float) -> None:    # pragma: no cover - run by .ci/flower.sh
    """Run Flower's SuperNode with ``argv`` (``flower-supernode``'s arguments), its waits at most ``poll`` s.

    Parameters
    ----------
    argv : list of str
        The arguments of ``flower-supernode``.
    poll : float
        The longest idle wait, in seconds.
    """
    clock = poll_clock(poll)
    import flwr.supernode.start_client_internal as loop
    from flwr.supernode.cli import flower_supernode

    _check_version()
    if getattr(loop, "time", None) is not time:
        raise RuntimeError("flwr.supernode.start_client_internal does not wait with the time module")
    quick_pulls(loop, poll / 2)
    quick_task_heartbeat("supernode")
    setattr(loop, "time", clock)             # noqa: B010 (typed differently with and without flwr installed)
    sys.argv = ["flower-supernode", *argv]
    flower_supernode()
