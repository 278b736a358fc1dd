"""Local fakes of the four vendor APIs, one loopback HTTP server each (see _server.py)."""

from __future__ import annotations

from tests.vendors.fakes._server import FakeVendor
from tests.vendors.fakes.lambdalabs import FakeLambda
from tests.vendors.fakes.paperspace import FakePaperspace
from tests.vendors.fakes.runpod import FakeRunpod
from tests.vendors.fakes.vastai import FakeVastai

FAKES: dict[str, type[FakeVendor]] = {
    "runpod": FakeRunpod,
    "vastai": FakeVastai,
    "lambda": FakeLambda,
    "paperspace": FakePaperspace,
}
URL_VARIABLES = {
    "runpod": "RGT_RUNPOD_API_URL",
    "vastai": "RGT_VASTAI_API_URL",
    "lambda": "RGT_LAMBDA_API_URL",
    "paperspace": "RGT_PAPERSPACE_API_URL",
}
KEY_VARIABLES = {
    "runpod": "RUNPOD_API_KEY",
    "vastai": "VAST_API_KEY",
    "lambda": "LAMBDA_API_KEY",
    "paperspace": "PAPERSPACE_API_KEY",
}
