"""RGT302 across files when the project defines its own ``DistributedSampler`` with a
``set_epoch`` that nothing calls (2D-TAN: the sampler is built in ``data/__init__.py``, the
epoch loop runs in ``engine/trainer.py``): a definition of ``set_epoch`` is no call of it."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project, project_found

FILES = {
    "setup.py": "",
    "tan/__init__.py": "",
    "tan/data/samplers.py": """
        import torch
        from torch.utils.data import DistributedSampler as _DistributedSampler


        class DistributedSampler(_DistributedSampler):
            def __iter__(self):
                g = torch.Generator()
                g.manual_seed(self.epoch)
                return iter(torch.randperm(len(self.dataset), generator=g).tolist())

            def set_epoch(self, epoch):
                self.epoch = epoch
    """,
    "tan/data/__init__.py": """
        import torch

        from .samplers import DistributedSampler


        def make_data_loader(dataset, distributed):
            if distributed:
                sampler = DistributedSampler(dataset, shuffle=True)
            else:
                sampler = torch.utils.data.RandomSampler(dataset)
            return torch.utils.data.DataLoader(dataset, batch_size=4, sampler=sampler)
    """,
    "tan/engine/__init__.py": "",
    "tan/engine/trainer.py": """
        import torch


        def do_train(model, data_loader, optimizer, max_epoch):
            for epoch in range(max_epoch):
        {call}
                for feats, target in data_loader:
                    optimizer.zero_grad()
                    model(feats, target).backward()
                    optimizer.step()
    """,
    "train_net.py": """
        import torch

        from tan.data import make_data_loader
        from tan.engine.trainer import do_train


        def train(model, dataset):
            optimizer = torch.optim.Adam(model.parameters())
            loader = make_data_loader(dataset, torch.distributed.is_initialized())
            do_train(model, loader, optimizer, 10)
    """,
}


def _files(call: str) -> dict[str, str]:
    return {**FILES, "tan/engine/trainer.py": FILES["tan/engine/trainer.py"].format(call=call)}


def test_a_sampler_whose_set_epoch_is_only_defined(tmp_path: Path) -> None:
    found = project_found(project(tmp_path, _files("")))
    assert found == [("tan/data/__init__.py", "RGT302", 8)]


def test_a_call_of_set_epoch_anywhere_holds_it_back(tmp_path: Path) -> None:
    call = "        data_loader.sampler.set_epoch(epoch)"
    assert project_found(project(tmp_path, _files(call))) == []
