"""The project's imports followed as Python would (``_project``): ``from . import models``, a
package's ``from .backbones import *`` of a ``from .net import *``, ``models.net.Net`` through
a package's ``from . import net``, imports inside a function, and the factories a class is
reached through (a registry dictionary, a classmethod returning ``cls(...)``). Each layout
holds a model whose ``forward`` ends in softmax, trained with ``CrossEntropyLoss``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lint._lint import project, project_found

NET = """
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(x).{last}(dim=1)

    @classmethod
    def build(cls, cfg):
        return cls()
"""
LOOP = """
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""


def _train(imported: str, made: str = "Net()") -> str:
    return f"import torch\nimport torch.nn as nn\n{imported}\n\nmodel = {made}\n{LOOP}"


REGISTRY = "from .net import Net\n\nMODELS = {'net': Net}\n\n\ndef build_model(name):\n"
REGISTRY += "    return MODELS[name]()\n"
LAZY = "import torch\nimport torch.nn as nn\n\n\ndef main():\n    from models import Net\n"
LAZY += "    model = Net()\n" + "".join(f"    {line}\n" for line in LOOP.strip().splitlines())
LAYOUTS: dict[str, dict[str, str]] = {
    "from_dot_import": {
        "pkg/__init__.py": "",
        "pkg/train.py": _train("from . import models", "models.Net()"),
        "pkg/models.py": NET,
    },
    "star_of_star": {
        "models/__init__.py": "from .backbones import *\n",
        "models/backbones/__init__.py": "from .net import *\n",
        "models/backbones/net.py": NET,
        "train.py": _train("from models import Net"),
    },
    "package_attribute": {
        "models/__init__.py": "from . import net\n",
        "models/net.py": NET,
        "train.py": _train("import models", "models.net.Net()"),
    },
    "registry": {
        "models/__init__.py": REGISTRY,
        "models/net.py": NET,
        "train.py": _train("from models import build_model", "build_model('net')"),
    },
    "classmethod": {
        "models/__init__.py": "",
        "models/net.py": NET,
        "train.py": _train("from models.net import Net", "Net.build({})"),
    },
    "import_in_function": {"models.py": NET, "train.py": LAZY},
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_model_is_followed_through_the_import(tmp_path: Path, layout: str) -> None:
    files = {k: v.replace("{last}", "softmax") for k, v in LAYOUTS[layout].items()}
    found = [f for f in project_found(project(tmp_path, files)) if f[1] == "RGT101"]
    assert len(found) == 1 and found[0][0].endswith("train.py")


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_model_returning_logits_is_left_alone(tmp_path: Path, layout: str) -> None:
    files = {k: v.replace("{last}", "log_softmax") for k, v in LAYOUTS[layout].items()}
    found = [f for f in project_found(project(tmp_path, files)) if f[1].startswith("RGT10")]
    assert found == []
