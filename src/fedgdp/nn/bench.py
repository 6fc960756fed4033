"""``fedgdp nn-bench``: time paper-sized CNN steps on synthetic images and extrapolate.

A paper-scale run cannot be executed offline (no MNIST here), and takes long on
a CPU, so this measures its building blocks on random images of the dataset's shape
with the paper's network and extrapolates:

- ``t_step(n)``: one private full-batch local step (per-sample gradients, clipping,
  noise) on a client with ``n`` training images, for a few ``n``; a line
  ``a + b n`` is fitted to the timings.
- ``t_newton(n)``: one head-only Newton step; ``t_eval``: accuracy on 10,000 images.

Extrapolation. In every method a round draws ``k = round(q m)`` clients, and each
method makes ``R K`` client gradient steps per drawn client over the run
(compute-matched), FedNewton-Iter plus ``C`` Newton steps. So one method of one
setting costs about ``R K k t_step(n_train) + 3 t_eval`` and a run (all four
methods) four times that. ``n_train = 0.8 n`` (10% validation, 10% local test).
Assumptions: the step time is linear in n; the four methods cost the same (they
are compute-matched; FedSGD's extra server steps are negligible); no GPU.
"""
from __future__ import annotations

import json
import platform
import time

import numpy as np

__all__ = ["run_nn_bench"]


def run_nn_bench(*, dataset: str = "mnist", sizes=(40, 160, 480), repeats: int = 3, device: str = "auto",
                 threads: int | None = None, out: str | None = None) -> dict:
    """Measure the step times and extrapolate the paper's grid; print and return them."""
    import torch

    from .calibration import calibrate
    from .models import build_model
    from .settings import PAPER_GRID, resolve
    from .train import ClientData, evaluate, head_newton_step, resolve_device, train

    if threads:
        torch.set_num_threads(int(threads))
    dev = resolve_device(device)
    model = build_model(dataset, seed=0).to(dev)
    params = {k: v.detach() for k, v in model.named_parameters()}
    shape = model.convs[0].in_channels, *{"mnist": (28, 28), "cifar10": (32, 32), "digits": (8, 8)}[dataset]
    g = torch.Generator(device="cpu").manual_seed(0)

    def images(n):
        x = torch.randn((n, *shape), generator=g).to(dev)
        y = torch.randint(0, 10, (n,), generator=g).to(dev)
        return x, y

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    p = resolve({"dataset": dataset, "figure": "fig09", "m": 1, "n": 100, "rounds": 1, "local_epochs": 1,
                 "q": 1.0, "methods": ["fedavg"]})
    step, newton = {}, {}
    for n in sizes:
        x, y = images(n)
        clients = ClientData([x], [y])
        cal = calibrate("fedavg", p, clients.n)
        rng = np.random.default_rng(0)
        gen = torch.Generator(device=dev).manual_seed(0)
        train("fedavg", model, params, clients, p, cal, rng, gen)          # warm-up
        sync()
        t0 = time.perf_counter()
        for _ in range(repeats):
            train("fedavg", model, params, clients, p, cal, rng, gen)
        sync()
        step[n] = (time.perf_counter() - t0) / repeats
        t0 = time.perf_counter()
        head_newton_step(model, params, x, y, B=1.0, lam=1.0, alpha=1.0)
        sync()
        newton[n] = time.perf_counter() - t0
    xt, yt = images(10_000)
    evaluate(model, params, xt, yt)
    sync()
    t0 = time.perf_counter()
    evaluate(model, params, xt, yt)
    sync()
    t_eval = time.perf_counter() - t0
    ns = np.array(sorted(step), dtype=float)
    b, a = np.polyfit(ns, [step[int(n)] for n in ns], 1)

    def t_step(n):
        return max(a + b * n, 1e-6)

    defaults = resolve({"dataset": dataset, "figure": "fig09", "m": 100, "n": 100})
    R, K, q, C = defaults["rounds"], defaults["local_epochs"], defaults["q"], defaults["newton_cycles"]

    def run_seconds(m, n_client):
        k = max(1, round(q * m))
        n_train = int(round(0.8 * n_client))
        per_method = R * K * k * t_step(n_train) + 3 * t_eval
        return 4 * per_method + C * k * newton[sizes[-1]] * n_train / sizes[-1]

    N = 60_000 if dataset == "mnist" else 50_000
    grid = PAPER_GRID
    n9 = grid["fig09"]["n"].get(dataset, []) if isinstance(grid["fig09"]["n"], dict) else grid["fig09"]["n"]
    fig09 = {n: run_seconds(grid["fig09"]["m"], n) for n in n9}
    fig10 = {m: run_seconds(m, N / m) for m in grid["fig10"]["m"]}
    total = grid["fig09"]["runs"] * sum(fig09.values()) + grid["fig10"]["runs"] * sum(fig10.values())
    result = {
        "dataset": dataset, "device": str(dev), "threads": torch.get_num_threads(),
        "torch": torch.__version__, "machine": platform.machine(), "processor": platform.processor(),
        "n_params": sum(v.numel() for v in params.values()),
        "step_s": {int(k): round(v, 4) for k, v in step.items()},
        "step_fit": {"a_s": a, "b_s_per_image": b},
        "newton_s": {int(k): round(v, 4) for k, v in newton.items()}, "eval_10k_s": round(t_eval, 3),
        "settings": {"R": R, "K": K, "q": q, "cycles": C},
        "run_s_fig09": {int(k): round(v, 1) for k, v in fig09.items()},
        "run_s_fig10": {int(k): round(v, 1) for k, v in fig10.items()},
        "paper_grid_total_h": round(total / 3600, 2),
    }
    print(json.dumps(result, indent=1))
    if out:
        with open(out, "w") as fh:
            json.dump(result, fh, indent=1)
    return result
