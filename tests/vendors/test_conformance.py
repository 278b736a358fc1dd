"""The four vendor clients against their fakes: the same suite each (conformance.py)."""

from __future__ import annotations

from tests.vendors.conformance import VendorConformance


class TestRunpod(VendorConformance):
    vendor, gpu = "runpod", "A100"


class TestVastai(VendorConformance):
    vendor, gpu = "vastai", "A100"


class TestLambda(VendorConformance):
    vendor, gpu = "lambda", "A100"


class TestPaperspace(VendorConformance):
    vendor, gpu = "paperspace", "A100"
