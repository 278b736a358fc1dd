"""RGT103 across files when the criterion is ``CrossEntropyLoss`` for many classes and
``BCEWithLogitsLoss`` for one (UNet 3+'s ``train_net``) and the one-class model handed in ends
in a sigmoid: logits are what either branch expects."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project, project_found

FILES = {
    "setup.py": "",
    "unet/__init__.py": "from .model import UNet\n",
    "unet/model.py": """
        import torch.nn as nn
        import torch.nn.functional as F


        class UNet(nn.Module):
            def __init__(self, n_classes):
                super().__init__()
                self.n_classes = n_classes
                self.conv = nn.Conv2d(3, n_classes, 1)

            def forward(self, x):
                return {head}
    """,
    "train.py": """
        import torch
        import torch.nn as nn

        from unet import UNet


        def train_net(net, loader):
            optimizer = torch.optim.RMSprop(net.parameters())
            if net.n_classes > 1:
                criterion = nn.CrossEntropyLoss()
            else:
                criterion = nn.BCEWithLogitsLoss()
            for imgs, masks in loader:
                pred = net(imgs)
                loss = criterion(pred, masks)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            train_net(UNet(n_classes=1), [])
    """,
}


def _files(head: str) -> dict[str, str]:
    return {**FILES, "unet/model.py": FILES["unet/model.py"].format(head=head)}


def test_a_sigmoid_model_into_a_criterion_chosen_by_class_count(tmp_path: Path) -> None:
    found = project_found(project(tmp_path, _files("F.sigmoid(self.conv(x))")))
    assert found == [("train.py", "RGT103", 15)]


def test_a_logits_model_is_what_both_branches_expect(tmp_path: Path) -> None:
    assert project_found(project(tmp_path, _files("self.conv(x)"))) == []
