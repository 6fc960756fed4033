"""The commands, the top floor: the ``fedgdp`` command line (`cli`; ``python -m fedgdp``),
and what runs over a whole config: the privacy audit and the empirical lower bound on mu
(`audit`, `empirical`), the suite benchmark (`bench`) and the comparison of two runs'
outputs (`rundiff`, ``python -m fedgdp.commands.rundiff``).
"""
