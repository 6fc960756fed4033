"""The reports, floor 3: what reads the studies' outputs. Table 1 and the rates table
(`tables`), the error decomposition and its figure (`decomposition`,
`plots_decomposition`), the claims report (`claims`) and the sensitivity map
(`sensitivity`). Imports the studies and the floors below; never the estimator API.
"""
