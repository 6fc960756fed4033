"""Private federated training of CNNs (paper section 5.2, docs/methods.md §6): the optional ``nn`` extra.

Install with ``pip install 'fedgdp[nn]'`` (PyTorch). Only the modules that train
(:mod:`~fedgdp.nn.models`, :mod:`~fedgdp.nn.train`, :func:`~fedgdp.nn.run.run_nn`)
import torch; settings, calibration, data loading and plots work without it.

- :mod:`~fedgdp.nn.settings`     paper and offline defaults, validation, grids
- :mod:`~fedgdp.nn.calibration`  schedules of the four methods, noise, ledger
- :mod:`~fedgdp.nn.data`         digits / MNIST / CIFAR-10 loaders, checked fetch
- :mod:`~fedgdp.nn.models`       the CNNs
- :mod:`~fedgdp.nn.train`        per-sample clipping, head-only Newton, the methods
- :mod:`~fedgdp.nn.run`          one run -> Parquet
- :mod:`~fedgdp.nn.plots`        Figures 9 and 10 from summaries
- :mod:`~fedgdp.nn.bench`        paper-scale step timings and their extrapolation
- :mod:`~fedgdp.nn.commands`     the ``fedgdp nn-*`` subcommands
"""
