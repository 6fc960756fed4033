"""Private federated training of CNNs (paper section 5.2, docs/methods.md §6): the optional ``nn`` extra.

Install with ``pip install 'fedgdp[nn]'`` (PyTorch). Only the modules that train
(`models`, `clipping`, `backend`,
`train`, `run_nn`) import torch; settings, the
release plans, data loading and plots work without it.

The four CNN methods are methods of the algorithm core (``fedgdp.methods.registry("nn")``:
FedSGD, FedHybrid, FedAvg and FedNewton-Iter), run on the torch backend. The modules:
docs/ARCHITECTURE.md (``nn/``); `commands` holds the ``fedgdp nn-*`` subcommands.
"""
