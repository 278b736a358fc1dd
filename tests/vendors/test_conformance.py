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


def test_every_vendor_rgt_can_rent_from_runs_the_suite_and_the_hostile_answers() -> None:
    """A vendor added to ``rgt.vendors.VENDORS`` without a fake of its API and a class above
    fails here: its lifecycle and every hostile answer would otherwise go untested."""
    from rgt.vendors import VENDORS
    from tests.vendors.fakes import FAKES

    suited = {
        cls.vendor
        for cls in globals().values()
        if isinstance(cls, type)
        and issubclass(cls, VendorConformance)
        and cls is not VendorConformance
    }
    assert set(VENDORS) == suited, f"vendors without the conformance suite: {set(VENDORS) - suited}"
    assert set(VENDORS) <= set(FAKES), f"vendors without a fake: {set(VENDORS) - set(FAKES)}"
