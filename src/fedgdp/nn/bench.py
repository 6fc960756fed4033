"""``fedgdp nn-bench``: one client-step of the paper's CNNs, timed against a plain gradient.

Methods (`step_methods`): ``plain`` (the unclipped gradient, the reference of every
ratio), ``fedgdp`` (`fedgdp.nn.clipping.clipped_grad_sums`), ``vmap`` (materialised
per-sample gradients) and opacus' hooks and ghost clipping when installed (on
`fedgdp.nn.models.module_twin`, the network with its layers called as modules, whose
hooks opacus needs; the same weights). Each time is
the minimum over calls, methods measured in turn; the ratios are the result
(docs/cnns.md, "The private step: `fedgdp nn-bench`").
"""
from __future__ import annotations

import importlib.util
import json
import os
import platform
import time
from typing import Any

import numpy as np

__all__ = ["run_nn_bench", "estimate_runs", "step_methods", "format_markdown"]

SHAPES = {"mnist": (1, 28, 28), "cifar10": (3, 32, 32), "digits": (1, 8, 8)}


def _vmap_clipped_mean(model, params, x, y, B):
    """The former path: materialised per-sample gradients, clipped, averaged."""
    import torch
    from torch.func import functional_call, grad, vmap
    from torch.nn import functional as F

    def loss(p, xi, yi):
        return F.nll_loss(functional_call(model, p, (xi[None],)), yi[None])

    g = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    norm = torch.sqrt(sum(v.flatten(1).pow(2).sum(1) for v in g.values()))
    c = torch.clamp(B / norm.clamp_min(1e-30), max=1.0)
    return {k: torch.tensordot(c, v, dims=1) / x.shape[0] for k, v in g.items()}


def step_methods(dataset: str, x, y, B: float) -> dict:
    """name -> a function computing one client's clipped mean gradient ``name -> Tensor (*shape)``: ``plain``
    (unclipped), ``fedgdp``, ``vmap`` (``opacus_hooks``, ``opacus_ghost``).

    Parameters
    ----------
    dataset : str
        The network (`fedgdp.nn.models.build_model`, seed 0).
    x : torch.Tensor of shape (n, C, H, W)
        The client's images, on the device to time.
    y : torch.Tensor of shape (n,)
        Its labels (int64).
    B : float
        Clipping bound.
    """
    import torch
    from torch.nn import functional as F

    from .clipping import clipped_grad_sums
    from .models import build_model

    model = build_model(dataset, seed=0).to(x.device)
    params = {k: v.detach() for k, v in model.named_parameters()}
    n = x.shape[0]
    ones = torch.ones((1, n), dtype=x.dtype, device=x.device)

    def plain():
        model.zero_grad(set_to_none=True)
        F.nll_loss(model(x), y).backward()
        return {k: v.grad for k, v in model.named_parameters()}

    def fedgdp():
        total, _ = clipped_grad_sums(params, x[None], y[None], ones, B, shared=True)
        return {k: v[0] / n for k, v in total.items()}

    out = {"plain": plain, "fedgdp": fedgdp, "vmap": lambda: _vmap_clipped_mean(model, params, x, y, B)}
    if importlib.util.find_spec("opacus") is not None:     # absent: not timed; present: any failure is raised
        out.update(_opacus_methods(dataset, x, y, B))
    return out


def _opacus_methods(dataset, x, y, B) -> dict:
    import torch
    from opacus import GradSampleModule
    from opacus.grad_sample import GradSampleModuleFastGradientClipping
    from opacus.optimizers import DPOptimizer, DPOptimizerFastGradientClipping
    from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping

    from .models import build_model, module_twin

    n = x.shape[0]
    # opacus collects per-sample gradients by module hooks: its networks are ConvNet's module twins, same weights
    hooks = GradSampleModule(module_twin(build_model(dataset, seed=0).to(x.device)))
    opt_h = DPOptimizer(torch.optim.SGD(hooks.parameters(), lr=0.0), noise_multiplier=0.0, max_grad_norm=B,
                        expected_batch_size=n)
    ghost = GradSampleModuleFastGradientClipping(module_twin(build_model(dataset, seed=0).to(x.device)),
                                                 max_grad_norm=B, use_ghost_clipping=True)
    opt_g = DPOptimizerFastGradientClipping(torch.optim.SGD(ghost.parameters(), lr=0.0), noise_multiplier=0.0,
                                            max_grad_norm=B, expected_batch_size=n)
    crit = DPLossFastGradientClipping(ghost, opt_g, torch.nn.NLLLoss())

    def with_hooks():
        opt_h.zero_grad(set_to_none=True)
        torch.nn.functional.nll_loss(hooks(x), y).backward()
        opt_h.step()
        return {k.removeprefix("_module."): v.grad for k, v in hooks.named_parameters()}

    def with_ghost():
        opt_g.zero_grad(set_to_none=True)
        crit(ghost(x), y).backward()
        opt_g.step()
        return {k.removeprefix("_module."): v.grad for k, v in ghost.named_parameters()}

    return {"opacus_hooks": with_hooks, "opacus_ghost": with_ghost}


def _time(fn, sync, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def estimate_runs(step_s: dict, *, dataset: str = "mnist", cpu_cores: int | None = None) -> dict:
    """Seconds of one paper-scale run (four methods) per grid point, about ``4 R K round(q m) t(0.8 n)``:
    ``run_s_fig09`` (n -> seconds), ``run_s_fig10`` (m -> seconds) and ``paper_grid_total_h`` (hours of every
    run of both figures).

    ``t`` is the clipped step, interpolated linearly in n; evaluation and Newton rounds are left out.

    Parameters
    ----------
    step_s : dict int -> float
        Seconds of one clipped step per measured client size n.
    dataset : str
        The network, for its paper settings (``rounds``, ``local_epochs``, ``q``) and grid.
    cpu_cores : int, optional
        Unused.
    """
    from .settings import PAPER_GRID, resolve

    p = resolve({"dataset": dataset, "figure": "fig10"})
    R, K, q = p.rounds, p.local_epochs, p.q
    ns = np.array(sorted(step_s), dtype=float)
    ts = np.array([step_s[int(n)] for n in ns])

    def t(n):
        if n <= ns[0]:
            return ts[0] * n / ns[0]
        if n >= ns[-1]:
            return ts[-1] * n / ns[-1]
        return float(np.interp(n, ns, ts))

    def run_s(m, n):
        return 4 * R * K * max(1, round(q * m)) * t(0.8 * n)

    N = {"mnist": 60_000, "cifar10": 50_000}.get(dataset, 1437)
    grid: dict[str, Any] = PAPER_GRID
    fig09 = {int(n): round(run_s(grid["fig09"]["m"], n), 1) for n in grid["fig09"]["n"].get(dataset, [])}
    fig10 = {int(m): round(run_s(m, N / m), 1) for m in grid["fig10"]["m"]}
    total = grid["fig09"]["runs"] * sum(fig09.values()) + grid["fig10"]["runs"] * sum(fig10.values())
    return {"run_s_fig09": fig09, "run_s_fig10": fig10, "paper_grid_total_h": round(total / 3600, 2)}


def format_markdown(result: dict) -> str:
    """One bench result as a Markdown table: seconds, ratio to ``plain`` and difference to ``fedgdp``.

    Parameters
    ----------
    result : dict
        The result of `run_nn_bench`.
    """
    lines = [f"device {result['device']}, {result['threads']} threads, torch {result['torch']}, "
             f"opacus {result['opacus']}, load average at start {result['load_average']}", "",
             "| network | n | method | seconds | ratio to plain | max rel. diff to fedgdp |",
             "|---|---:|---|---:|---:|---:|"]
    for dataset, net in result["networks"].items():
        for n, row in net["by_n"].items():
            for method, sec in row["seconds"].items():
                diff = row["max_rel_diff_to_fedgdp"].get(method)
                lines.append(f"| {dataset} | {n} | {method} | {sec:.4f} | {row['ratio_to_plain'][method]:.2f} | "
                             f"{'' if diff is None else f'{diff:.1e}'} |")
    return "\n".join(lines) + "\n"


def run_nn_bench(*, datasets=("mnist", "cifar10"), sizes=(100, 600), repeats: int = 3, rounds: int = 2,
                 clip: float = 1.0, device: str = "cpu", threads: int | None = None, out: str | None = None,
                 md: str | None = None) -> dict:
    """Time one client-step of every method (module docstring); print and return the JSON.

    Parameters
    ----------
    datasets : sequence of str
        Networks to time (``mnist``, ``cifar10``, ``digits``).
    sizes : sequence of int
        Client sizes n.
    repeats : int
        Timed calls per method and round (the minimum is kept).
    rounds : int
        Passes over the methods, in turn.
    clip : float
        Clipping bound B.
    device : str
        ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
    threads : int, optional
        torch CPU threads.
    out : str, optional
        A JSON file to write the result to.
    md : str, optional
        A Markdown file to write `format_markdown` of the result to.
    """
    import torch

    from .models import build_model
    from .train import resolve_device

    if threads:
        torch.set_num_threads(int(threads))
    dev = resolve_device(device)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    result: dict[str, Any] = {"device": str(dev), "threads": torch.get_num_threads(), "torch": torch.__version__,
              "machine": platform.machine(), "processor": platform.processor(), "clip": clip,
              "repeats": repeats, "rounds": rounds,
              "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None, "networks": {}}
    try:
        import opacus

        result["opacus"] = opacus.__version__
    except ImportError:
        result["opacus"] = None
    for dataset in datasets:
        per_n = {}
        for n in sizes:
            g = torch.Generator(device="cpu").manual_seed(n)
            x = torch.randn((n, *SHAPES[dataset]), generator=g).to(dev)
            y = torch.randint(0, 10, (n,), generator=g).to(dev)
            fns = step_methods(dataset, x, y, clip)
            ref = fns["fedgdp"]()
            diffs = {}
            for name, fn in fns.items():
                got = fn()                                   # warm-up, and the result to compare
                if name != "plain":
                    diffs[name] = max(float((got[k] - ref[k]).abs().max() / ref[k].abs().max().clamp_min(1e-30))
                                      for k in ref)
            best = {name: float("inf") for name in fns}
            for _ in range(rounds):
                for name, fn in fns.items():
                    best[name] = min(best[name], _time(fn, sync, repeats))
            per_n[int(n)] = {"seconds": {k: round(v, 5) for k, v in best.items()},
                             "ratio_to_plain": {k: round(v / best["plain"], 3) for k, v in best.items()},
                             "max_rel_diff_to_fedgdp": diffs}
        step = {n: v["seconds"]["fedgdp"] for n, v in per_n.items()}
        n_params = sum(v.numel() for v in build_model(dataset, seed=0).parameters())
        result["networks"][dataset] = {"n_params": n_params, "by_n": per_n,
                                       "estimate": estimate_runs(step, dataset=dataset)}
    text = json.dumps(result, indent=1)
    print(text)
    from ..common.io import write_text

    if out:
        write_text(out, text + "\n")
    if md:
        write_text(md, format_markdown(result))
    return result
