"""What the studies and the commands share, floor 1 (beside `fedgdp.methods`): the files
every output goes through (`io`), the figures' style (`figures`), the image data sets
and their client layout (`datasets`) and the command lines' parsing (`arguments`).
Imports only the core.
"""
