"""Renderers: rgt's job description -> a scheduler's native input (sbatch scripts, K8s Jobs).

Pure functions of their inputs (no clock, no randomness), so tests compare them byte for byte
with golden files in ``tests/golden/``.
"""
