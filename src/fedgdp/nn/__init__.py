"""Private federated training of CNNs (paper section 5.2, docs/methods.md §6): the optional ``nn`` extra.

Install with ``pip install 'fedgdp[nn]'`` (PyTorch). Only the modules that train
(`models`, `clipping`, `backend`,
`train`, `run_nn`) import torch; settings, the
release plans, data loading and plots work without it.

The four CNN methods are methods of the algorithm core (``fedgdp.methods.registry("nn")``:
FedSGD, FedHybrid, FedAvg and FedNewton-Iter), run on the torch backend.

- `settings`     paper and offline defaults, validation, grids; the methods' labels and plans
- `data`         digits / MNIST / CIFAR-10 loaders, checked fetch
- `models`       the CNNs
- `clipping`     exact per-sample clipping without per-sample gradients of the Linear layers
- `backend`      ``TorchBackend`` (client sampling, server lr, noise), head-only Newton
- `train`        devices, client data, one method's training, evaluation
- `run`          one run -> Parquet
- `plots`        Figures 9 and 10 from summaries
- `bench`        one client-step against a plain gradient and opacus; run-time estimates
- `commands`     the ``fedgdp nn-*`` subcommands
"""
