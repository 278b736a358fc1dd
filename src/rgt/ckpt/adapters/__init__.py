"""Adapters that plug rgt.ckpt's exact resume into the places users train.

Each one is imported lazily and needs its framework installed (``pip install
remote-gpu-trainer[ckpt-adapters]``); ``rgt.ckpt`` itself never imports them.

- ``rgt.ckpt.adapters.accelerate.accelerate_loop``: a ``TrainLoop`` over objects prepared by
  HF accelerate (unwrapped model, the accelerated optimizer/scheduler, the GradScaler).
- ``rgt.ckpt.adapters.lightning.RgtCheckpoint``: a Lightning ``Callback`` that saves through a
  ``Checkpointer`` and resumes ``trainer.fit`` mid-epoch, RNG included.
- ``rgt.ckpt.adapters.hf_trainer.RgtTrainerCheckpoint`` + ``resume_folder``: a ``Trainer``
  callback, and the resume through the Trainer's own skip-and-restore path.

Each is tested for exact resume: a run killed with SIGKILL and resumed in a new process gives
the same per-step losses and the same final ``state_digest`` as an uninterrupted one.
"""
