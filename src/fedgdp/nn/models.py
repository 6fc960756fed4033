"""The CNNs of docs/methods.md §6 (paper section 5.2.2), with a named last layer ``head``.

Every model maps images ``(n, C, H, W)`` to log-probabilities ``(n, 10)``
(log-softmax; the loss is the negative log-likelihood). A convolutional *block* is
a 3x3 convolution (padding 1), ReLU and 2x2 max pooling, computed as pooling then
ReLU (the same numbers bit for bit: ReLU is monotone; docs/performance.md). ``features(x)`` returns
the penultimate activations ``(n, h)`` and ``head`` is the last ``nn.Linear(h, 10)``:
the layer that DP-FedNewton-Iter refines (Algorithm 5).

=========  =========================================================  ==========
name       layers                                                     parameters
=========  =========================================================  ==========
mnist      block 32 -> block 64 -> fc 128 -> fc 10 (28x28x1 input)    421,642
cifar10    block 32 -> block 64 -> block 128 -> fc 256 -> fc 10       620,362
digits     block 8 -> block 16 -> fc 32 -> fc 10 (8x8x1 input)        3,658
=========  =========================================================  ==========

No dropout or batch normalisation: one image's output depends on no other image.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .settings import INITS

__all__ = ["ConvNet", "ModuleConvNet", "build_model", "module_twin", "convnet_forward", "layer_names",
           "ARCHITECTURES", "HEAD"]

HEAD = "head"

#: dataset -> (input shape (C, H, W), conv channels, hidden fc width)
ARCHITECTURES = {
    "mnist": ((1, 28, 28), (32, 64), 128),
    "cifar10": ((3, 32, 32), (32, 64, 128), 256),
    "digits": ((1, 8, 8), (8, 16), 32),
}


def layer_names(params: dict) -> list[str]:
    """The parametrised layers of a ConvNet, input to output: ``convs.0, ..., fc, head``.

    Parameters
    ----------
    params : dict name -> Tensor
        The ConvNet's parameters (keys ``convs.i.weight``, ..., ``head.bias``).
    """
    convs = sorted({k.rsplit(".", 1)[0] for k in params if k.startswith("convs.")},
                   key=lambda s: int(s.split(".")[1]))
    return [*convs, "fc", HEAD]


def convnet_forward(params: dict, x: torch.Tensor, *, stacked: bool = False, record: list | None = None,
                    head: bool = True, layers: dict | None = None) -> torch.Tensor:
    """The ConvNet's forward pass, written once, for `ConvNet` and for a stack (`fedgdp.nn.clipping`):
    log-probabilities (n, classes), or (S, L, classes) with ``stacked`` (the penultimate activations with
    ``head=False``).

    Parameters
    ----------
    params : dict name -> Tensor
        The parameters (``convs.i.*``, ``fc.*``, ``head.*``): ``(*shape)``, or ``(S,
        *shape)`` with ``stacked``.
    x : Tensor of shape (n, C, H, W), or (S, L, C, H, W) with ``stacked``
        Images.
    stacked : bool, default=False
        ``S`` clients, each with its own parameters (a grouped convolution, batched products).
    record : list or None
        Appended with ``(input, output)`` of every layer (conv: ``(L, S C, H, W)``;
        Linear: ``(S, L, features)``, or unstacked shapes).
    head : bool, default=True
        False: return the head's input (the penultimate activations) instead.
    layers : dict name -> nn.Module, optional
        Unstacked only: the layers to call as modules (``convs.i``, ``fc``, ``head``) in place of
        ``F.conv2d`` / ``F.linear`` on ``params`` (the same numbers; `ModuleConvNet`, for module hooks).
    """
    S, L = x.shape[:2] if stacked else (1, x.shape[0])
    h = x.transpose(0, 1).reshape(L, S * x.shape[2], *x.shape[3:]) if stacked else x
    for name in layer_names(params):
        W, b = params[f"{name}.weight"], params[f"{name}.bias"]
        if name.startswith("convs."):
            z = (F.conv2d(h, W.reshape(-1, *W.shape[2:]), b.reshape(-1), padding=1, groups=S) if stacked
                 else layers[name](h) if layers else F.conv2d(h, W, b, padding=1))
            if record is not None:
                record.append((h, z))
            h = F.relu(F.max_pool2d(z, 2))       # = max_pool(relu(.)) exactly, on a 4x smaller tensor
            continue
        if h.dim() == 4:                         # (L, S C, H, W) -> (S, L, C H W); (n, C, H, W) -> (n, C H W)
            h = h.view(L, S, -1).transpose(0, 1) if stacked else h.flatten(1)
        if name == HEAD and not head:
            return h
        z = (torch.baddbmm(b[:, None, :], h, W.transpose(1, 2)) if stacked
             else layers[name](h) if layers else F.linear(h, W, b))
        if record is not None:
            record.append((h, z))
        h = z if name == HEAD else F.relu(z)
    return F.log_softmax(h, dim=-1)


def _reinit(net: nn.Module, init: str) -> None:
    """Redraw the weights of ``net``'s conv and linear layers under ``init`` (biases 0),
    from the current torch generator; ``default`` keeps PyTorch's draw."""
    if init == "default":
        return
    for layer in net.modules():
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            if init == "he":
                nn.init.kaiming_uniform_(layer.weight, nonlinearity="relu")
            else:
                nn.init.xavier_uniform_(layer.weight)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)


class ConvNet(nn.Module):
    """Conv blocks, one hidden fully connected layer and the linear ``head``.

    Parameters
    ----------
    in_shape : (C, H, W)
    channels : tuple of int
        Output channels of the successive conv blocks.
    hidden : int
        Width of the hidden fully connected layer.
    classes : int
    """

    def __init__(self, in_shape=(1, 28, 28), channels=(32, 64), hidden=128, classes=10):
        super().__init__()
        self.spec = (tuple(in_shape), tuple(channels), hidden, classes)     # the architecture, for a twin
        c, h, w = in_shape
        convs = []
        for out in channels:
            convs.append(nn.Conv2d(c, out, kernel_size=3, padding=1))
            c, h, w = out, h // 2, w // 2
        self.convs = nn.ModuleList(convs)
        self.fc = nn.Linear(c * h * w, hidden)
        self.head = nn.Linear(hidden, classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Penultimate activations, shape ``(n, hidden)``.

        Parameters
        ----------
        x : torch.Tensor of shape (n, C, H, W)
            Images.
        """
        return convnet_forward(self._params(), x, head=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Log-probabilities, shape ``(n, classes)``.

        Parameters
        ----------
        x : torch.Tensor of shape (n, C, H, W)
            Images.
        """
        return convnet_forward(self._params(), x)

    def _params(self) -> dict:
        """The parameters by name, read as attributes (so ``functional_call``'s are seen)."""
        out = {}
        for name, layer in self._layers().items():
            out[f"{name}.weight"], out[f"{name}.bias"] = layer.weight, layer.bias
        return out

    def _layers(self) -> dict:
        """The parametrised layers by name, input to output (`layer_names`' names)."""
        return {**{f"convs.{i}": conv for i, conv in enumerate(self.convs)}, "fc": self.fc, HEAD: self.head}


class ModuleConvNet(ConvNet):
    """`ConvNet` with its conv and linear layers called as modules, so per-module hooks see them.

    `ConvNet` applies its layers as functions of its parameters (`convnet_forward`), which
    ``torch.func`` and `fedgdp.nn.clipping` read but module hooks never see; libraries that
    collect per-sample gradients by hooks (opacus' ``GradSampleModule``) need the layers called.
    This twin runs the same `convnet_forward` calling them (the same numbers), for `fedgdp
    nn-bench`'s comparison with opacus; `module_twin` gives it a ConvNet's weights.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Log-probabilities, shape ``(n, classes)``.

        Parameters
        ----------
        x : torch.Tensor of shape (n, C, H, W)
            Images.
        """
        return convnet_forward(self._params(), x, layers=self._layers())


def module_twin(model: ConvNet) -> ModuleConvNet:
    """A `ModuleConvNet` of ``model``'s architecture with a copy of its weights (same names, dtype, device).

    Parameters
    ----------
    model : ConvNet
    """
    twin = ModuleConvNet(*model.spec).to(next(model.parameters()))
    twin.load_state_dict(model.state_dict())
    return twin


def build_model(dataset: str, *, seed: int, classes: int = 10, init: str = "default") -> ConvNet:
    """The dataset's CNN, on the CPU in float32, with its initial weights (each in [-1, 1]) drawn from ``seed``
    by a forked generator: the global torch RNG is untouched, the weights the same in any process, and
    independent of the data.

    Parameters
    ----------
    dataset : str
        A key of `ARCHITECTURES` (``mnist``, ``cifar10``, ``digits``).
    seed : int
        Seeds the initial weights.
    classes : int
        Outputs of the head.
    init : str
        One of `fedgdp.nn.settings.INITS`: ``default`` (PyTorch's), ``he`` or ``xavier``.
    """
    if dataset not in ARCHITECTURES:
        raise ValueError(f"no CNN for dataset {dataset!r}; known: {', '.join(ARCHITECTURES)}")
    if init not in INITS:
        raise ValueError(f"nn setting init={init!r}: known: {', '.join(INITS)}")
    in_shape, channels, hidden = ARCHITECTURES[dataset]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = ConvNet(in_shape, channels, hidden, classes)
        _reinit(net, init)
    largest = max(float(v.detach().abs().max()) for v in net.parameters())
    if not largest <= 1.0:           # parameter_bound's starting magnitude
        raise ValueError(f"init={init!r} drew a parameter of magnitude {largest:.3g} > 1")
    return net
