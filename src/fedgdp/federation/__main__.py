"""``python -m fedgdp.federation check DATA SETTINGS``: a site's file and settings checked
before its SuperNode joins (docs/federation.md); exit 1 with one line on stderr otherwise."""
from __future__ import annotations

import json
import sys

from .site import Site, read_site


def main(argv: list[str] | None = None) -> int:
    """Check a site's file against the public settings; print its size and guarantee. Exit status 0 when the
    site may join, 1 when not (one line on stderr), 2 for a usage error.

    Parameters
    ----------
    argv : list of str or None
        ``["check", DATA, SETTINGS]`` (None: the command line's).
    """
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[0] != "check":
        print("usage: python -m fedgdp.federation check DATA SETTINGS.json", file=sys.stderr)
        return 2
    try:
        with open(args[2]) as fh:
            settings = json.load(fh)
        X, y = read_site(args[1], settings)
        site = Site(X, y, settings, name=args[1])
    except (OSError, ValueError) as exc:
        print(f"site {args[1]}: cannot join: {exc}", file=sys.stderr)
        return 1
    print(f"site {args[1]}: n = {site.n} rows, {site.guarantee}; requests it will answer: {len(site.script)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
