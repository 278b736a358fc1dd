"""Sweeps: many cells (overrides x seeds) of one command, launched, reconciled and pulled.

sweep.py    the verbs (run, status, pull) over one reconciliation
_file.py    the sweep file and each cell's stable id
_run.py     in flight per machine, or one Slurm job array
_state.py   what each cell is now, read through the one status path
"""
