"""Notebook platforms as machines: a Colab or Kaggle session this notebook runs in (``up``), and
Kaggle's kernels API driven as a backend (``kaggle``: a job is a kernel version, its files come
back through the kernel's output). The ``%rgt`` line magic that fronts them is ``rgt.notebook``."""
