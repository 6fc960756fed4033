"""Training a CNN with a method of the algorithm core: devices, client data, evaluation.

`train` runs one method of `fedgdp.methods` (``registry("nn")``) on
`fedgdp.nn.backend.TorchBackend` for one run; clipping is `fedgdp.nn.clipping`.

Conventions
-----------
A model's parameters travel as a dict ``name -> tensor`` (``dict(model.named_parameters())``
detached); a stack of S clients' parameters is ``name -> (S, *shape)``. Clients' images
are padded to ``(S, L, C, H, W)`` with a 0/1 mask ``(S, L)`` (`ClientData.batch`).
The head-only Newton step works on the flattened last layer, ``D = classes * (hidden +
1)`` numbers laid out as ``[head.weight.flatten(), head.bias]``.

Randomness comes in as arguments: a ``numpy.random.Generator`` draws the clients of
every round and a ``torch.Generator`` (on the training device) the Gaussian noise.
"""
from __future__ import annotations

import ctypes
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.func import functional_call
from torch.nn import functional as F

from ..methods import CNN, check_finite_release, get_method
from .backend import TorchBackend, TrainInfo
from .settings import NNSettings, cnn_settings

__all__ = ["resolve_device", "keep_freed_memory", "ClientData", "train", "evaluate", "Trained", "Progress"]

#: glibc's ``mallopt`` parameters (malloc.h): the most blocks served by mmap, and the free
#: memory at the top of the heap above which it is given back to the operating system
_M_MMAP_MAX, _M_TRIM_THRESHOLD = -4, -1


def resolve_device(spec: str | None = "auto") -> torch.device:
    """``auto``: CUDA when available, else CPU; anything else is passed to torch.device (ValueError for a bad
    spec, or CUDA requested but not available). On CUDA, cuDNN is set to deterministic algorithms, so a run is
    repeatable on the same GPU model, driver and torch version (not bit-identical to a CPU run).

    Parameters
    ----------
    spec : str or None
        ``auto`` (or None, ``""``), ``cpu``, ``cuda``, ``cuda:N``.
    """
    if spec in (None, "", "auto"):
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        try:
            dev = torch.device(spec)
        except RuntimeError:
            raise ValueError(f"bad device {spec!r}: use auto, cpu, cuda or cuda:N") from None
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {spec!r} requested but CUDA is not available")
    if dev.type == "cuda":
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    return dev


def keep_freed_memory() -> bool:
    """Keep freed memory in the process instead of handing it back to the kernel (glibc only); whether the
    setting took (False off glibc, e.g. macOS or musl). Large blocks are then reused instead of unmapped and
    zeroed by the kernel on every clipped call; results are unchanged, peak memory is kept until exit
    (docs/performance.md, "The CNN run").
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_MAX, 0)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))  # a C int
    except (OSError, AttributeError):
        return False


@dataclass
class Progress:
    """One line per round on a stream: the method, round r of R, elapsed time and an estimate of what is left.

    Parameters
    ----------
    method : str
        The method's name, first on every line.
    total : int
        The method's rounds (`fedgdp.methods.Method.rounds`).
    stream : file, optional
        Where the lines go (default: standard error, which a Snakemake job logs).
    """

    method: str
    total: int
    stream: Any = None
    start: float = field(default_factory=time.perf_counter)

    def __call__(self, done: int) -> None:
        """Report that ``done`` of `total` rounds have finished.

        Parameters
        ----------
        done : int
            Rounds finished so far.
        """
        elapsed = time.perf_counter() - self.start
        left = elapsed / done * max(self.total - done, 0) if done else float("nan")
        print(f"{self.method}: round {done} of {self.total}, {elapsed:.1f} s elapsed, about {left:.0f} s left",
              file=self.stream or sys.stderr, flush=True)


@dataclass
class ClientData:
    """Training images of the m clients, on the training device.

    Attributes
    ----------
    x : list of Tensor, each (n_i, C, H, W)
    y : list of Tensor, each (n_i,)
    n : ndarray of shape (m,)
    """

    x: list
    y: list
    n: np.ndarray = field(init=False)

    def __post_init__(self):
        self.n = np.array([int(t.shape[0]) for t in self.y], dtype=np.int64)
        self.check()

    def check(self) -> None:
        """ValueError, one line, unless there is at least one client, each with at least one
        image and as many labels as images: an empty client has no mean gradient, and its
        releases' sensitivity ``2 B / n_i`` is undefined (`train` checks it again)."""
        if len(self.x) != len(self.y) or not self.y:
            raise ValueError(f"clients need images and labels for each of at least one client, got "
                             f"{len(self.x)} image sets and {len(self.y)} label sets")
        for i, (x, y) in enumerate(zip(self.x, self.y)):
            if int(x.shape[0]) != int(y.shape[0]) or int(y.shape[0]) < 1:
                raise ValueError(f"client {i} has {int(x.shape[0])} images and {int(y.shape[0])} labels: every "
                                 f"client needs at least one image, with one label each (n_i >= 1)")

    @property
    def m(self) -> int:
        return len(self.y)

    def batch(self, clients, index=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Padded images X (S, L, C, H, W), labels Y (S, L) (int64; 0 in padding rows) and mask (S, L) (1 for an
        image, 0 for padding, in the images' dtype) of the given clients; ``L`` is their largest size.

        Parameters
        ----------
        clients : sequence of int, length S
            The clients, in the stack's order.
        index : sequence of int arrays, length S, optional
            Only these images of each client (a minibatch); None: all of them.
        """
        from torch.nn.utils.rnn import pad_sequence

        index = index if index is not None else [slice(None)] * len(clients)
        xs = [self.x[i][ix] for i, ix in zip(clients, index)]
        ys = [self.y[i][ix] for i, ix in zip(clients, index)]
        X = pad_sequence(xs, batch_first=True)
        Y = pad_sequence(ys, batch_first=True)
        mask = pad_sequence([torch.ones(len(t), dtype=X.dtype, device=X.device) for t in ys], batch_first=True)
        return X, Y, mask


@dataclass
class Trained:
    """One method's result on one run.

    Attributes
    ----------
    params : dict name -> Tensor
        The trained network's parameters.
    info : fedgdp.nn.backend.TrainInfo
    ledger : fedgdp.core.privacy.Ledger
        Arrays shaped ``(1, m)``; composes to mu for every client.
    counts : dict stage -> ndarray (m,)
        Releases each client actually made (``ledger.spent_mu(counts)``).
    """

    params: Any
    info: TrainInfo
    ledger: Any
    counts: dict = field(default_factory=dict)


def train(method: str, params0: dict, clients: ClientData, p: NNSettings, rng: np.random.Generator,
          gen: torch.Generator | None, *, stack: bool | None = None,
          progress: bool | Callable[[int], None] = False) -> Trained:
    """Train from ``params0`` with ``method`` (a name of ``fedgdp.methods.registry("nn")``); ValueError when a
    client holds no image (before any work) or a private network's parameter is not finite.

    Parameters
    ----------
    method : str
    params0 : dict name -> Tensor
        Initial weights, on the training device.
    clients : ClientData
    p : NNSettings
        Resolved run settings (`fedgdp.nn.settings.resolve`).
    rng : numpy.random.Generator
        Draws the clients of every round.
    gen : torch.Generator
        Draws the noise (on the training device).
    stack : bool, optional
        Stack a round's clients (see `fedgdp.nn.backend.TorchBackend`).
    progress : bool or callable
        True: a `Progress` line on standard error per round; a callable gets the rounds done.
    """
    clients.check()                      # an empty client: one line, before any work
    meth = get_method(method, CNN)
    s = cnn_settings(meth, p)
    report = Progress(method, meth.rounds(s)) if progress is True else (progress or None)
    be = TorchBackend(params0, clients, p, rng, gen, stack=stack, progress=report)
    fits = meth.run(be, s)  # type: ignore[arg-type]  # the CNN backend has no Newton release (FedNewton is not a CNN method)
    fit = check_finite_release(method, be, fits)[0]
    return Trained(fit.theta, be.info, fit.ledger, be.counts)


@torch.no_grad()
def evaluate(model, params: dict, x: torch.Tensor, y: torch.Tensor, *, batch: int = 2000) -> tuple[float, float]:
    """Accuracy and mean NLL loss of ``params`` on ``(x, y)`` (both NaN when ``N = 0``).

    Parameters
    ----------
    model : ConvNet
        The network whose forward pass is called with ``params`` (``functional_call``).
    params : dict name -> Tensor
        The parameters to evaluate.
    x : torch.Tensor of shape (N, C, H, W)
        Images.
    y : torch.Tensor of shape (N,)
        Labels (int64).
    batch : int
        Images per forward pass.
    """
    if y.shape[0] == 0:
        return float("nan"), float("nan")
    correct, loss = 0, 0.0
    for s in range(0, int(y.shape[0]), batch):
        out = functional_call(model, params, (x[s:s + batch],))
        loss += float(F.nll_loss(out, y[s:s + batch], reduction="sum"))
        correct += int((out.argmax(1) == y[s:s + batch]).sum())
    return correct / int(y.shape[0]), loss / int(y.shape[0])
