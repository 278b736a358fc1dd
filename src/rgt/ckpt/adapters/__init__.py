"""Adapters that plug rgt.ckpt's exact resume into the places users train.

Each one is imported lazily and needs its framework installed (``pip install
remote-gpu-trainer[ckpt-adapters]``); ``rgt.ckpt`` itself never imports them.

- ``rgt.ckpt.adapters.accelerate.accelerate_loop``: a ``TrainLoop`` over objects prepared by
  HF accelerate (unwrapped model, the accelerated optimizer/scheduler, the GradScaler).
"""
