"""VERIFY: is the number real? Artifact load checks, run comparisons, integrity probes.

Submodules import their heavy dependencies (torch, numpy, scipy) lazily, so importing any of
them is cheap: ``rgt pull`` and ``rgt --help`` stay fast.
"""
