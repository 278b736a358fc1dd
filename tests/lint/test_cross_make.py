"""Objects followed through the project's factories and hand-overs (``_flow_make``,
``_join_data``): a Dataset built by a factory function of another module, handed to a function
that builds the DataLoader over its parameter, drawing in a helper function of a third module."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project, project_found

AUGMENT = """
    import numpy as np
    import torch


    def jitter(points):
        return points + np.random.uniform(-0.1, 0.1)
"""
DATASET = """
    from torch.utils.data import Dataset

    from datasets.augment import jitter


    class PointDataset(Dataset):
        def __init__(self, cfg):
            self.items = list(range(cfg["n"]))

        def __len__(self):
            return len(self.items)

        def __getitem__(self, idx):
            return jitter(self.items[idx])
"""
INIT = """
    from torch.utils.data import DataLoader

    from datasets.point_dataset import PointDataset


    def build_dataset(cfg):
        return PointDataset(cfg)


    def get_loader(dataset, workers):
        return DataLoader(dataset, batch_size=32, num_workers=workers, shuffle=True)
"""
UTILS = """
    import torch

    from datasets import build_dataset, get_loader


    def build_dataloader(cfg, workers):
        dataset = build_dataset(cfg)
        return get_loader(dataset=dataset, workers=workers)
"""
MAIN = """
    import torch
    {spawn}
    from utils import build_dataloader


    def main(cfg):
        loader = build_dataloader(cfg, 8)
        for epoch in range(10):
            for batch in loader:
                pass
"""


def _write(root: Path, pin: str = "torch==1.4.0", spawn: str = "") -> Path:
    return project(
        root,
        {
            "setup.py": "from setuptools import setup\n",
            "requirements.txt": pin + "\n",
            "datasets/__init__.py": INIT,
            "datasets/augment.py": AUGMENT,
            "datasets/point_dataset.py": DATASET,
            "utils.py": UTILS,
            "main.py": MAIN.format(spawn=spawn),
        },
    )


def test_a_factory_made_dataset_handed_to_a_loader_function_is_followed(tmp_path: Path) -> None:
    found = project_found(_write(tmp_path))
    assert ("datasets/__init__.py", "RGT305", 11) in found


def test_the_finding_names_every_end_it_followed(tmp_path: Path) -> None:
    from rgt.lint import lint_paths

    report = lint_paths([str(_write(tmp_path))], cache=False)
    (finding,) = [f for f in report.findings if f.code == "RGT305"]
    said = finding.message
    assert "PointDataset" in said and "datasets/point_dataset.py:6" in said
    assert "get_loader" in said and "utils.py:8," in said
    assert "jitter" in said and "datasets/augment.py:6" in said


def test_the_spawn_start_method_gives_each_worker_fresh_numpy_state(tmp_path: Path) -> None:
    spawn = 'torch.multiprocessing.set_start_method("spawn")'
    found = project_found(_write(tmp_path, spawn=spawn))
    assert [f for f in found if f[1] == "RGT305"] == []


def test_a_torch_that_reseeds_numpy_in_workers_is_left_alone(tmp_path: Path) -> None:
    found = project_found(_write(tmp_path, pin="torch>=1.10"))
    assert [f for f in found if f[1] == "RGT305"] == []


def test_a_model_built_by_a_factory_of_another_module_is_followed_to_the_loss(
    tmp_path: Path,
) -> None:
    root = project(
        tmp_path,
        {
            "setup.py": "from setuptools import setup\n",
            "models/net.py": """
                import torch.nn as nn


                class Net(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(8, 3)

                    def forward(self, x):
                        return self.fc(x).softmax(dim=1)
            """,
            "models/__init__.py": """
                from .net import Net


                def build_model(cfg):
                    model = Net()
                    return model
            """,
            "train.py": """
                import torch
                import torch.nn as nn

                from models import build_model

                model = build_model({})
                criterion = nn.CrossEntropyLoss()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
        },
    )
    assert ("train.py", "RGT101", 11) in project_found(root)


def test_a_factory_module_with_nothing_else_the_rules_need_is_still_followed(
    tmp_path: Path,
) -> None:
    root = project(
        tmp_path,
        {
            "setup.py": "",
            "models/__init__.py": "",
            "models/net.py": """
                import torch.nn as nn


                class Net(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.fc = nn.Linear(8, 3)

                    def forward(self, x):
                        return self.fc(x).softmax(dim=1)
            """,
            "models/builder.py": """
                import torch

                from models.net import Net


                def build_model(cfg):
                    return Net()
            """,
            "train.py": """
                import torch
                import torch.nn as nn

                from models.builder import build_model

                model = build_model({})
                criterion = nn.CrossEntropyLoss()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
        },
    )
    assert ("train.py", "RGT101", 11) in project_found(root)
