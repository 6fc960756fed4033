"""``fedgdp nn-bench``: time paper-sized CNN steps on synthetic images and extrapolate.

A paper-scale run cannot be executed offline (no MNIST here), and takes long on
a CPU, so this measures its building blocks on random images of the dataset's shape
with the paper's network and extrapolates:

- ``t_step(n)``: one private local step of a round (per-sample gradients, clipping,
  noise, aggregation) for ``k = round(q m) = 10`` drawn clients of ``n`` training
  images each, trained together as in :func:`fedgdp.nn.train.train`; timed for a few
  ``n`` and fitted by a line ``a + b k n`` in the number of images ``k n``.
- ``t_newton``: one client's head-only Newton step (at the largest n, scaled
  linearly in n); ``t_eval``: accuracy on 10,000 images.

Extrapolation. Every round draws ``k = round(q m)`` clients; every method makes
``R K`` gradient steps per run on its drawn clients (compute-matched: FedAvg R rounds
of K steps, FedSGD R K rounds of one), FedNewton-Iter also ``C`` Newton rounds. So
one method of one setting costs about ``R K t_step(n_train) + 3 t_eval`` and a run
(all four methods) four times that, with ``n_train = 0.8 n`` (10% validation, 10%
local test); for Figure 10 ``n = N / m`` and ``k = round(q m)``, i.e. about
``0.08 N`` images per step whatever m. Assumptions: the step time is linear in the
number of images of the drawn clients; FedSGD's steps cost FedAvg's; no GPU;
the machine is otherwise idle (timings on a busy machine overstate).
"""
from __future__ import annotations

import json
import os
import platform
import time

import numpy as np

__all__ = ["run_nn_bench"]


def run_nn_bench(*, dataset: str = "mnist", sizes=(40, 160, 480), repeats: int = 3, device: str = "auto",
                 threads: int | None = None, out: str | None = None) -> dict:
    """Measure the step times and extrapolate the paper's grid; print and return them.

    ``sizes``: training images per client at which a step of 10 clients is timed.
    """
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

    k = 10                                                   # round(q m) of the paper's m = 100
    p = resolve({"dataset": dataset, "figure": "fig09", "m": k, "n": 100, "rounds": 1, "local_epochs": 1,
                 "q": 1.0, "methods": ["fedavg"]})
    step, cpu, newton = {}, {}, {}
    for n in sizes:
        data = [images(n) for _ in range(k)]
        clients = ClientData([x for x, _ in data], [y for _, y in data])
        cal = calibrate("fedavg", p, clients.n)
        rng = np.random.default_rng(0)
        gen = torch.Generator(device=dev).manual_seed(0)
        train("fedavg", model, params, clients, p, cal, rng, gen)          # warm-up
        sync()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(repeats):
            train("fedavg", model, params, clients, p, cal, rng, gen)
        sync()
        step[n] = (time.perf_counter() - t0) / repeats
        cpu[n] = (time.process_time() - c0) / repeats
        t0 = time.perf_counter()
        head_newton_step(model, params, *data[0], B=1.0, lam=1.0, alpha=1.0)
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
    defaults = resolve({"dataset": dataset, "figure": "fig09", "m": 100, "n": 100})
    R, K, q, C = defaults["rounds"], defaults["local_epochs"], defaults["q"], defaults["newton_cycles"]
    n_big = max(sizes)
    N = 60_000 if dataset == "mnist" else 50_000 if dataset == "cifar10" else 1437
    grid = PAPER_GRID
    n9 = grid["fig09"]["n"].get(dataset, [])

    def extrapolate(times):
        b, a = np.polyfit(k * ns, [times[int(n)] for n in ns], 1)

        def run_seconds(m, n_client):
            drawn = max(1, round(q * m))
            n_train = 0.8 * n_client
            per_method = R * K * max(a + b * drawn * n_train, 1e-6) + 3 * t_eval
            return 4 * per_method + C * drawn * newton[n_big] * n_train / n_big

        fig09 = {int(n): round(run_seconds(grid["fig09"]["m"], n), 1) for n in n9}
        fig10 = {int(m): round(run_seconds(m, N / m), 1) for m in grid["fig10"]["m"]}
        total = grid["fig09"]["runs"] * sum(fig09.values()) + grid["fig10"]["runs"] * sum(fig10.values())
        return {"fit": {"a_s": a, "b_s_per_image": b}, "run_s_fig09": fig09, "run_s_fig10": fig10,
                "paper_grid_total_h": round(total / 3600, 2)}

    result = {
        "dataset": dataset, "device": str(dev), "threads": torch.get_num_threads(),
        "torch": torch.__version__, "machine": platform.machine(), "processor": platform.processor(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "n_params": sum(v.numel() for v in params.values()), "clients_per_step": k,
        "step_wall_s": {int(n): round(v, 4) for n, v in step.items()},
        "step_cpu_s": {int(n): round(v, 4) for n, v in cpu.items()},
        "newton_s": {int(n): round(v, 4) for n, v in newton.items()}, "eval_10k_s": round(t_eval, 3),
        "settings": {"R": R, "K": K, "q": q, "cycles": C},
        "from_wall": extrapolate(step),
        "from_cpu": extrapolate(cpu),
    }
    print(json.dumps(result, indent=1))
    if out:
        with open(out, "w") as fh:
            json.dump(result, fh, indent=1)
    return result
