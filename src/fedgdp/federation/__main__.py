"""``python -m fedgdp.federation``: the commands of a site and of the coordinator (docs/federation.md).

    check DATA SETTINGS      a site's file checked against the settings before it joins
    site CONFIG              a site's guard: answers its SuperNode's messages (fedgdp.federation.guard)
    supernode [--poll S] -- ARGS...
                             a site's SuperNode: ``flower-supernode ARGS``, its waits at most S s (default 0.1;
                             fedgdp.federation.waits)
    app-hash APP             the SHA-256 of the app bundle Flower builds from the folder APP (a site's ``apps``)
    run APP FEDERATION --settings S --sites L --out OUT [--timeout T] [--extra] [--wait W]
                             the coordinator: ``flwr run``, its progress, its result; exit 1 when the run fails

Exit status 0 on success, 1 with one line on stderr on failure, 2 for a usage error.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time


def check(data: str, settings_path: str) -> int:
    """Check a site's file against the public settings; print its size and guarantee.

    Parameters
    ----------
    data, settings_path : str
        The site's file and the settings' JSON file.
    """
    from .site import Site, read_site  # here: the coordinator's command starts without the estimators

    try:
        with open(settings_path) as fh:
            settings = json.load(fh)
        X, y = read_site(data, settings)
        site = Site(X, y, settings, name=data)
    except (OSError, ValueError) as exc:
        print(f"site {data}: cannot join: {exc}", file=sys.stderr)
        return 1
    print(f"site {data}: n = {site.n} rows, {site.guarantee}; requests it will answer: {len(site.script)}")
    return 0


def app_hash(app: str) -> str:
    """The SHA-256 of the bundle (FAB) that ``flwr run`` builds from the app folder (needs flwr).

    Parameters
    ----------
    app : str
        The app's folder (``pyproject.toml`` and its module).
    """
    import hashlib
    from pathlib import Path

    from flwr.cli.build import build_fab_from_disk

    return hashlib.sha256(build_fab_from_disk(Path(app))).hexdigest()


def _status(run_id: str, federation: str) -> str:
    """The run's status as ``flwr ls`` gives it ('' when it cannot say)."""
    try:
        got = subprocess.run(["flwr", "ls", federation, "--run-id", run_id, "--format", "json"],
                             capture_output=True, text=True, timeout=60)
        runs = json.loads(got.stdout).get("runs", [])
    except (OSError, ValueError, subprocess.SubprocessError, AttributeError):
        return ""
    return str(runs[0].get("status", "")) if runs else ""


def run(args) -> int:
    """The coordinator's command (module docstring): 0 with the fit written, 1 with the error on stderr.

    Parameters
    ----------
    args : argparse.Namespace
        ``app``, ``federation``, ``settings``, ``sites``, ``out``, ``timeout``, ``extra``, ``wait``.
    """
    with open(args.settings) as fh:
        settings = fh.read()
    with open(args.sites) as fh:
        sites = fh.read()
    out = os.path.abspath(args.out)
    for path in (out, out + ".progress"):
        if os.path.exists(path):
            os.remove(path)
    config = (f"settings='{json.dumps(json.loads(settings))}' sites='{json.dumps(json.loads(sites))}' "
              f"out='{out}' timeout={args.timeout:g} extra={int(args.extra)}")
    started = subprocess.run(["flwr", "run", args.app, args.federation, "--run-config", config],
                             capture_output=True, text=True)
    found = re.search(r"run (\d+)", started.stdout)
    if started.returncode != 0 or not found:
        print(f"flwr run failed (exit {started.returncode}): {(started.stderr or started.stdout).strip()}",
              file=sys.stderr)
        return 1
    # `flwr ls` (a CLI process of its own, about 1.4 CPU-s) only after 10 s with no progress line: never beside
    # the ServerApp's start, nor beside the rounds of a run that goes on (on 2 cores it slowed them)
    run_id, shown, until, checked = found.group(1), 0, time.monotonic() + args.wait, time.monotonic()
    print(f"run {run_id} started")
    while not os.path.exists(out):
        if os.path.exists(out + ".progress"):
            with open(out + ".progress") as fh:
                lines = fh.read().splitlines()
            for line in lines[shown:]:
                print(line, flush=True)
            if len(lines) > shown:
                checked = time.monotonic()
            shown = len(lines)
        if time.monotonic() > until:
            status = _status(run_id, args.federation) or "unknown: the SuperLink does not answer"
            print(f"run {run_id}: no result within {args.wait:g} s (status: {status})", file=sys.stderr)
            return 1
        if time.monotonic() - checked > 10:
            checked = time.monotonic()
            status = _status(run_id, args.federation)
            if status.startswith("finished") and not os.path.exists(out):
                print(f"run {run_id} ended ({status}) without writing {out}: see flwr log {run_id}", file=sys.stderr)
                return 1
            if status == "":
                print(f"run {run_id}: the SuperLink does not answer `flwr ls` (stopped?); no result", file=sys.stderr)
                return 1
        time.sleep(0.2)
    with open(out) as fh:
        result = json.load(fh)
    if os.path.exists(out + ".progress"):
        with open(out + ".progress") as fh:
            for line in fh.read().splitlines()[shown:]:
                print(line)
    if "error" in result:
        print(f"run {run_id} failed: {result['error']}", file=sys.stderr)
        return 1
    print(f"run {run_id}: result in {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The command line (module docstring).

    Parameters
    ----------
    argv : list of str or None
        The arguments (None: the command line's).
    """
    parser = argparse.ArgumentParser(prog="python -m fedgdp.federation")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="check a site's file against the settings")
    p.add_argument("data")
    p.add_argument("settings")
    p = sub.add_parser("site", help="a site's guard (its configuration file, TOML)")
    p.add_argument("config")
    p = sub.add_parser("supernode", help="a site's SuperNode: flower-supernode, its waits at most --poll s")
    p.add_argument("--poll", type=float, default=0.1)
    p.add_argument("flower_args", nargs=argparse.REMAINDER)
    p = sub.add_parser("app-hash", help="the SHA-256 of the app bundle built from a folder")
    p.add_argument("app")
    p = sub.add_parser("run", help="the coordinator: run the app across the listed sites")
    p.add_argument("app")
    p.add_argument("federation")
    p.add_argument("--settings", required=True)
    p.add_argument("--sites", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--extra", action="store_true")
    p.add_argument("--wait", type=float, default=1800.0)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    if args.command == "check":
        return check(args.data, args.settings)
    if args.command == "app-hash":
        print(app_hash(args.app))
        return 0
    if args.command == "supernode":
        from .waits import run_supernode

        try:
            rest = args.flower_args[1:] if args.flower_args[:1] == ["--"] else args.flower_args
            run_supernode(rest, args.poll)
        except (ImportError, RuntimeError, ValueError) as exc:
            print(f"supernode: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.command == "run":
        try:
            return run(args)
        except (OSError, ValueError) as exc:
            print(f"run: {exc}", file=sys.stderr)
            return 1
    import logging

    from .guard import read_config, serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)      # not a line per poll of the SuperNode
    try:
        config = read_config(args.config)
        serve(config)
    except (OSError, ValueError) as exc:
        print(f"site {args.config}: cannot serve: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
