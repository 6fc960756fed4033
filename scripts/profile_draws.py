"""Time the package's standard normal draws against numpy's, on the shapes the runs draw.

``python scripts/profile_draws.py`` draws, for each shape, the same numbers twice from
two generators of the same seed: once with numpy's ``Generator.standard_normal`` (the
reference) and once with :func:`fedgdp.core.normals.standard_normal`, checks that they are
identical, and prints nanoseconds per number and the ratio (the best of ``--repeat``
rounds, CPU time, in one process: a ratio against the reference in the same run).
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

from fedgdp.core.normals import standard_normal

#: (label, shape): one FedSGD noise draw of the default run (K, m, d), a replicate's
#: covariates of the compare study (N, p - 1), one private real-data step on MNIST (m, d k).
SHAPES = [("FedSGD noise, K=50, m=100, d=5", (50, 100, 5)),
          ("covariates, N=56,000, p-1=4", (56_000, 4)),
          ("MNIST noise, m=80, d k=7,850", (80, 7_850))]


def best_time(draw, rng_seed: int, shape: tuple, rounds: int, repeat: int) -> tuple[float, np.ndarray]:
    """The least CPU seconds of ``repeat`` rounds of ``rounds`` draws, and the first draw.

    Parameters
    ----------
    draw : callable
        ``draw(rng, shape)``.
    rng_seed : int
        The generator's seed (the same for both sides).
    shape : tuple of int
        The shape of one draw.
    rounds : int
        Draws per round.
    repeat : int
        Rounds.

    Returns
    -------
    seconds : float
        The best round's CPU seconds.
    first : ndarray
        The first draw of the first round (for the identity check).
    """
    best, first = math.inf, None
    for _ in range(repeat):
        rng = np.random.default_rng(rng_seed)
        t0 = time.process_time()
        for _ in range(rounds):
            z = draw(rng, shape)
            if first is None:
                first = z
        best = min(best, time.process_time() - t0)
    return best, first


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit status 1 if a draw differs from numpy's.

    Parameters
    ----------
    argv : list of str, optional
        ``--rounds`` (draws per round, default 50) and ``--repeat`` (rounds, default 5).

    Returns
    -------
    int
        0 when every draw equals numpy's.
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    standard_normal(np.random.default_rng(0), (8192,))          # compile or load the cache first
    print("| draw | numpy ns/number | fedgdp.core.normals ns/number | ratio | identical |")
    print("|---|---:|---:|---:|---|")
    same = True
    for label, shape in SHAPES:
        n = math.prod(shape) * args.rounds
        t_np, z_np = best_time(lambda rng, s: rng.standard_normal(s), 7, shape, args.rounds, args.repeat)
        t_fg, z_fg = best_time(standard_normal, 7, shape, args.rounds, args.repeat)
        ok = bool(np.array_equal(z_np, z_fg))
        same &= ok
        print(f"| {label} | {1e9 * t_np / n:.2f} | {1e9 * t_fg / n:.2f} | {t_np / max(t_fg, 1e-12):.2f}x | {ok} |")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
