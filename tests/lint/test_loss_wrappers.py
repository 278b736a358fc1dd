"""A sigmoid (softmax) output handed to a loss wrapper: a helper function, a method around a
loss kept by reference, or a loss class of another file whose ``forward`` calls
``binary_cross_entropy_with_logits`` (``cross_entropy``) on its argument."""

from __future__ import annotations

from pathlib import Path

from tests.lint._lint import project
from tests.lint._lint import project_found as found

HELPER = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(16, 1)
        self.act = nn.Sigmoid()

    def forward(self, x):
        score = self.head(x)
        score = {last}
        return score


def objective(scores, targets):
    per_item = F.binary_cross_entropy_with_logits(scores, targets, reduction="none")
    return per_item.mean()


model = Scorer()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in [(torch.rand(4, 16), torch.rand(4))]:
    opt.zero_grad()
    loss = objective(model(x), y)
    loss.backward()
    opt.step()
"""


def test_a_sigmoid_output_into_a_helper_that_applies_bce_with_logits(tmp_path: Path) -> None:
    code = HELPER.format(last="self.act(score).squeeze(-1)")
    assert found(project(tmp_path, {"train.py": code})) == [("train.py", "RGT103", 27)]


def test_raw_scores_into_the_same_helper_are_clean(tmp_path: Path) -> None:
    code = HELPER.format(last="score.squeeze(-1)")
    assert found(project(tmp_path, {"train.py": code})) == []


METHOD = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(16, 1)
        self.criterion = F.binary_cross_entropy_with_logits

    def forward(self, x):
        return {out}

    def compute_loss(self, predicted, wanted):
        return self.criterion(input=predicted, target=wanted)

    def fit_batch(self, x, y, opt):
        opt.zero_grad()
        loss = self.compute_loss(self.forward(x), y)
        loss.backward()
        opt.step()
"""


def test_a_method_around_a_loss_function_kept_by_reference(tmp_path: Path) -> None:
    code = METHOD.format(out="torch.sigmoid(self.body(x))")
    assert found(project(tmp_path, {"detector.py": code})) == [("detector.py", "RGT103", 20)]
    clean = METHOD.format(out="self.body(x)")
    assert found(project(tmp_path / "clean", {"detector.py": clean})) == []


ACROSS = {
    "setup.py": "",
    "nets/__init__.py": "",
    "nets/ranker.py": """
        import torch
        import torch.nn as nn


        class Ranker(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 5)

            def forward(self, x):
                logits = self.fc(x)
                return {first}, logits.argmax(1)
    """,
    "objectives.py": """
        import torch.nn as nn
        import torch.nn.functional as F


        class SmoothedCE(nn.Module):
            def __init__(self, eps=0.1):
                super().__init__()
                self.eps = eps

            def forward(self, scores, labels):
                return F.cross_entropy(scores, labels, label_smoothing=self.eps)
    """,
    "train.py": """
        import torch
        from nets.ranker import Ranker
        from objectives import SmoothedCE


        net = Ranker()
        crit = SmoothedCE(eps=0.05).cuda()
        opt = torch.optim.Adam(net.parameters())
        for x, y in [(torch.rand(2, 8), torch.tensor([0, 1]))]:
            probs, _ = net(x)
            probs = torch.squeeze(probs)
            loss = crit(probs.type(torch.float32), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    """,
}


def test_a_softmax_tuple_part_into_another_files_loss_class(tmp_path: Path) -> None:
    files = {**ACROSS, "nets/ranker.py": ACROSS["nets/ranker.py"].format(first="logits.softmax(1)")}
    assert found(project(tmp_path, files)) == [("train.py", "RGT101", 12)]


def test_logits_into_another_files_loss_class_are_clean(tmp_path: Path) -> None:
    files = {**ACROSS, "nets/ranker.py": ACROSS["nets/ranker.py"].format(first="logits")}
    assert found(project(tmp_path, files)) == []


ROWS = """
import torch
import torch.nn as nn


class PairLoss(nn.Module):
    def __init__(self, loss=nn.CrossEntropyLoss()):
        super().__init__()
        self.loss = loss

    def forward(self, similarity):
        scores = {scores}
        total = 0
        for row in scores:
            total = total + self.loss(row, torch.arange(row.shape[0]))
        return total
"""


def test_rows_of_a_softmax_output_into_cross_entropy(tmp_path: Path) -> None:
    code = ROWS.format(scores="torch.softmax(similarity, -1)")
    assert found(project(tmp_path, {"pairs.py": code})) == [("pairs.py", "RGT101", 14)]
    clean = ROWS.format(scores="similarity")
    assert found(project(tmp_path / "clean", {"pairs.py": clean})) == []


CHOICE = {
    "setup.py": "",
    "nets.py": """
        import torch.nn as nn
        import torch.nn.functional as F


        class Conv(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Conv2d(1, 4, 3)

            def forward(self, x):
                return F.log_softmax(self.body(x).flatten(1), dim=1)


        class Dense(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(16, 4)

            def forward(self, x):
                return F.{last}(self.body(x.flatten(1)), dim=1)
    """,
    "client.py": """
        import torch
        import torch.nn as nn


        class Client:
            def __init__(self, batches):
                self.batches = batches
                self.criterion = nn.NLLLoss()

            def local_round(self, model):
                opt = torch.optim.SGD(model.parameters(), lr=0.01)
                for x, y in self.batches:
                    opt.zero_grad()
                    loss = self.criterion(model(x), y)
                    loss.backward()
                    opt.step()
                return model.state_dict()
    """,
    "server.py": """
        import copy
        import sys

        import torch
        from client import Client
        from nets import Conv, Dense

        if sys.argv[1] == "conv":
            shared = Conv()
        else:
            shared = Dense()
        shared.train()
        for round_ in range(10):
            client = Client([])
            state = client.local_round(model=copy.deepcopy(shared))
            shared.load_state_dict(state)
    """,
}


def test_a_softmax_model_among_the_choices_handed_as_a_copy(tmp_path: Path) -> None:
    files = {**CHOICE, "nets.py": CHOICE["nets.py"].format(last="softmax")}
    assert found(project(tmp_path, files)) == [("client.py", "RGT102", 14)]
    clean = {**CHOICE, "nets.py": CHOICE["nets.py"].format(last="log_softmax")}
    assert found(project(tmp_path / "clean", clean)) == []


WRAPPED = {
    "setup.py": "",
    "parts/__init__.py": "",
    "parts/head.py": """
        import torch
        import torch.nn as nn


        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 1)
                self.out = nn.Sigmoid()

            def forward(self, x):
                score = self.fc(x)
                return {last}
    """,
    "parts/stack.py": """
        import torch.nn as nn


        class Stack(nn.Module):
            def __init__(self, trunk, head):
                super().__init__()
                self.trunk = trunk
                self.head = head

            def forward(self, x):
                return self.head(self.trunk(x))
    """,
    "train.py": """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from parts.head import Head
        from parts.stack import Stack


        def objective(scores, labels):
            return F.binary_cross_entropy_with_logits(scores, labels)


        trunk = nn.Linear(8, 8)
        head = Head()
        model = Stack(trunk, head).to("cpu")
        opt = torch.optim.Adam(model.parameters())
        for x, y in [(torch.rand(2, 8), torch.rand(2))]:
            opt.zero_grad()
            loss = objective(model(x), y)
            loss.backward()
            opt.step()
    """,
}


def test_a_wrapper_models_head_ends_in_sigmoid_before_a_local_bce_helper(tmp_path: Path) -> None:
    files = {**WRAPPED, "parts/head.py": WRAPPED["parts/head.py"].format(last="self.out(score)")}
    assert found(project(tmp_path, files)) == [("train.py", "RGT103", 18)]
    clean = {**WRAPPED, "parts/head.py": WRAPPED["parts/head.py"].format(last="score")}
    assert found(project(tmp_path / "clean", clean)) == []
