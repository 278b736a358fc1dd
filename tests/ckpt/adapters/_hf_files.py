"""A tiny HF Trainer run (CPU, a 1-layer GPT-2 built from a config) saved through
``RgtTrainerCheckpoint``, run as a script by test_adapter_files.py:
``python _hf_files.py CKPT_DIR OUTPUT_DIR``."""

from __future__ import annotations

import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

from rgt.ckpt import Checkpointer
from rgt.ckpt.adapters.hf_trainer import RgtTrainerCheckpoint, resume_folder


class Tokens(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        ids = (torch.arange(8) * (index + 1)) % 50
        return {"input_ids": ids, "labels": ids}


def main() -> None:
    config = GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50, n_positions=16)
    args = TrainingArguments(
        output_dir=sys.argv[2], max_steps=4, per_device_train_batch_size=4, save_strategy="no",
        report_to=[], use_cpu=True, seed=0, data_seed=0, logging_steps=2,
    )  # fmt: skip
    ckpt = Checkpointer(sys.argv[1], every_steps=2)
    trainer = Trainer(
        GPT2LMHeadModel(config),
        args,
        train_dataset=Tokens(),
        callbacks=[RgtTrainerCheckpoint(ckpt)],
    )
    with resume_folder(ckpt) as folder:
        trainer.train(resume_from_checkpoint=folder)


if __name__ == "__main__":
    main()
