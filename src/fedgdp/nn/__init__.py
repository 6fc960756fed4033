"""Private federated training of CNNs (paper section 5.2, docs/methods.md §6): the optional ``nn`` extra.

Install with ``pip install 'fedgdp[nn]'`` (PyTorch). Only the modules that train
(:mod:`~fedgdp.nn.models`, :mod:`~fedgdp.nn.clipping`, :mod:`~fedgdp.nn.backend`,
:mod:`~fedgdp.nn.train`, :func:`~fedgdp.nn.run.run_nn`) import torch; settings, the
release plans, data loading and plots work without it.

The four CNN methods are methods of the algorithm core (``fedgdp.methods.registry("nn")``:
FedSGD, FedHybrid, FedAvg and FedNewton-Iter), run on the torch backend.

- :mod:`~fedgdp.nn.settings`     paper and offline defaults, validation, grids; the methods' labels and plans
- :mod:`~fedgdp.nn.data`         digits / MNIST / CIFAR-10 loaders, checked fetch
- :mod:`~fedgdp.nn.models`       the CNNs
- :mod:`~fedgdp.nn.clipping`     exact per-sample clipping without per-sample gradients of the Linear layers
- :mod:`~fedgdp.nn.backend`      ``TorchBackend`` (client sampling, server lr, noise), head-only Newton
- :mod:`~fedgdp.nn.train`        devices, client data, one method's training, evaluation
- :mod:`~fedgdp.nn.run`          one run -> Parquet
- :mod:`~fedgdp.nn.plots`        Figures 9 and 10 from summaries
- :mod:`~fedgdp.nn.bench`        one client-step against a plain gradient and opacus; run-time estimates
- :mod:`~fedgdp.nn.commands`     the ``fedgdp nn-*`` subcommands
"""
