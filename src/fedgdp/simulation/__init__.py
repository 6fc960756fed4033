"""The simulation study (paper section 4, docs/methods.md §1-4, §9): data drawn per
replicate (`data`), the fused kernels (`kernels`), the methods' backend (`backend`), a
cell's parameters (`params`), its run and file (`run`), summaries (`summary`) and
figures (`plots`). Nothing is imported here.
"""
