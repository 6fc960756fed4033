"""Where the CPU time of one clipped CNN step goes, and what chunking a client's images buys.

    python scripts/profile_nn_step.py [--images 480 96] [--chunk 124] [--repeats 6] [--no-keep-memory] [--pool]

One MNIST network, one client (``fedgdp.nn.clipping.clipped_grad_sums``, one thread), at
each number of images: the best of ``--repeats`` calls, whole and in chunks of
``--chunk`` images (the clipped sums added chunk by chunk, as a chunked call would), then
the ``torch.profiler`` table of the whole call by operator. By default the process keeps
freed memory (``fedgdp.nn.train.keep_freed_memory``, as ``fedgdp nn-run`` does);
``--no-keep-memory`` measures without it, where every large tensor is a fresh ``mmap``
(docs/performance.md). ``--pool`` also times the first layer's max-pool and ReLU, forward
and backward, at each number of images: as the network computes them (NCHW), through a
``channels_last`` copy (PyTorch's faster pooling kernel, plus the copies there and back)
and compiled by ``torch.compile`` (its compile time printed).
"""
from __future__ import annotations

import argparse
import functools
import time


def best_of(f, repeats: int) -> float:
    """The fastest of ``repeats`` calls after two warm-up calls, in milliseconds."""
    for _ in range(2):
        f()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return 1000 * best


def clipped_sums(params, X, Y, M, chunk):
    """The clipped sums of one client's images, whole (``chunk`` None) or chunk by chunk."""
    from fedgdp.nn.clipping import clipped_grad_sums

    L = Y.shape[1]
    total: dict = {}
    for i in range(0, L, chunk or L):
        j = slice(i, i + (chunk or L))
        part = clipped_grad_sums(params, X[:, j], Y[:, j], M[:, j], 1.0)[0]
        total = part if not total else {k: total[k] + v for k, v in part.items()}
    return total


def pool_variants(L: int, repeats: int) -> None:
    """Forward and backward of ``relu(max_pool2d(z, 2))`` on the first layer's ``z`` (L, 32, 28, 28)."""
    import torch
    from torch.nn import functional as F

    def eager(z):
        return F.relu(F.max_pool2d(z, 2))

    def via_channels_last(z):
        return F.relu(F.max_pool2d(z.contiguous(memory_format=torch.channels_last), 2)).contiguous()

    z = torch.randn((L, 32, 28, 28), generator=torch.Generator().manual_seed(1), requires_grad=True)
    up = torch.randn((L, 32, 14, 14))

    def both(f):
        return torch.autograd.grad(f(z), z, up)[0]

    t0 = time.perf_counter()
    compiled = torch.compile(eager, dynamic=False)
    want = both(eager)
    same = all(torch.equal(want, both(f)) for f in (via_channels_last, compiled))
    setup = time.perf_counter() - t0
    ms = [best_of(lambda f=f: both(f), repeats) for f in (eager, via_channels_last, compiled)]
    print(f"  pool + ReLU of {L} images, forward and backward: NCHW {ms[0]:.1f} ms, through channels_last "
          f"{ms[1]:.1f} ms, compiled {ms[2]:.1f} ms (compiling and first calls {setup:.0f} s); "
          f"the same gradients: {same}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, nargs="+", default=[480, 96], help="images of the client")
    ap.add_argument("--chunk", type=int, default=124, help="images per chunk")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--no-keep-memory", action="store_true", help="leave glibc's mmap threshold alone")
    ap.add_argument("--pool", action="store_true", help="also time the first layer's pooling three ways")
    args = ap.parse_args(argv)
    import torch
    from torch.profiler import ProfilerActivity, profile

    from fedgdp.nn.models import build_model
    from fedgdp.nn.train import keep_freed_memory

    torch.set_num_threads(1)
    kept = False if args.no_keep_memory else keep_freed_memory()
    params = {k: v.detach()[None] for k, v in build_model("mnist", seed=0).named_parameters()}
    gen = torch.Generator().manual_seed(0)
    print(f"torch {torch.__version__}, 1 thread, freed memory kept: {kept}")
    for L in args.images:
        X = torch.randn((1, L, 1, 28, 28), generator=gen).clamp(min=0)
        Y = torch.randint(0, 10, (1, L), generator=gen)
        M = torch.ones((1, L))

        batch = (params, X, Y, M)
        whole = functools.partial(clipped_sums, *batch, None)
        chunked = functools.partial(clipped_sums, *batch, args.chunk)
        a, b = whole(), chunked()
        diff = max(float((b[k] - a[k]).abs().max() / a[k].abs().max()) for k in a)
        print(f"{L} images: whole {best_of(whole, args.repeats):.1f} ms, chunks of {args.chunk} "
              f"{best_of(chunked, args.repeats):.1f} ms (largest difference {diff:.1e} of an entry's scale)")
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                whole()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
        if args.pool:
            pool_variants(L, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
