"""The simulation study (paper section 4, docs/methods.md §1-4, §9): federated GLM data
drawn afresh per replicate, every method fitted on it, and the summaries, figures and
tables drawn from the results.

Modules, lower first (each imports only the ones above it, and the shared core):

- `data`: size schemes, `Replicate`, ``simulate_replicate``,
  the replicate's data and noise generators;
- `kernels`: the fused numba kernels of the gradient steps;
- `backend`: ``ClientBlock``, ``FitData`` and ``SimBackend``, the
  methods' simulation backend; ``REGISTRY``, the simulation's view of the methods;
- `params`: ``CellSettings`` and ``resolve`` (a cell's parameters);
- `run`: ``run_cell`` and the cell file (its schema, writer, reader);
- `summary`: cell files -> one row per (cell, method);
- `plots`: every simulation figure from summaries.

Nothing is imported here, so ``import fedgdp.simulation.data`` costs only that module.
"""
