"""The core, floor 0: the models, the privacy arithmetic, the solves, the seeds, the
settings mechanism and the paper's bounds. Imports nothing else of the package.

Modules: `glm`, `privacy`, `solvers`, `normals` (on `compiled`), `seeds`, `settings`,
`theory` (docs/ARCHITECTURE.md, "The package, floor by floor").
"""
