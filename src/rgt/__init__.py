"""rgt (remote-gpu-trainer): run, verify and deliver experiments on rented GPU machines.

Kept free of third-party imports (and of Python > 3.8 syntax: the agent bundle includes it).
"""

__version__ = "0.1.0"
