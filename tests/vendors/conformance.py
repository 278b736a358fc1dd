"""One suite every vendor client passes against its local fake (like fsspec's abstract tests).

A vendor's test class sets ``vendor``, ``gpu`` (a family its fake offers with 1 GPU) and
inherits every test here; ``tests/vendors/test_conformance.py`` holds the four classes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from rgt.errors import KeyRefusedError, UsageError, VendorError
from rgt.vendors import client_for
from rgt.vendors._model import PROVISIONING, RUNNING, STOPPED, CreateRequest, family
from rgt.vendors._rest import VendorClient
from tests.vendors.conftest import SSH_PORT
from tests.vendors.fakes import KEY_VARIABLES
from tests.vendors.fakes._server import FakeVendor, Fault


class VendorConformance:
    vendor: str
    gpu: str

    @pytest.fixture
    def fake(self, fake_for: object) -> FakeVendor:
        return fake_for(self.vendor, boot_polls=2, gone_polls=2)  # type: ignore[operator,no-any-return]

    @pytest.fixture
    def client(self, fake: FakeVendor) -> Iterator[VendorClient]:
        client = client_for(self.vendor)
        client.backoff_s = 0.01
        yield client
        client.close()

    def _create(self, client: VendorClient, name: str = "box-1") -> str:
        offer = client.offers(f"{self.gpu}:1")[0]
        made = client.create(CreateRequest(name=name, offer=offer, image="img", disk_gb=20))
        assert made.name == name and made.state == PROVISIONING
        return made.id

    def _wait(self, client: VendorClient, instance_id: str, state: str) -> int:
        for polls in range(1, 30):
            got = client.get(instance_id)
            if got is not None and got.state == state:
                return polls
        raise AssertionError(f"{instance_id} never became {state}")

    def test_offers_are_the_family_cheapest_first(self, client: VendorClient) -> None:
        offers = client.offers(f"{self.gpu}:1")
        assert offers and all(family(o.gpu) == self.gpu and o.count == 1 for o in offers)
        prices = [o.price_per_hour for o in offers]
        assert prices == sorted(prices) and all(p > 0 for p in prices)

    def test_unknown_gpu_lists_the_valid_names(self, client: VendorClient) -> None:
        with pytest.raises(UsageError) as caught:
            client.offers("Z9000:1")
        assert self.gpu in str(caught.value.fix)

    def test_create_becomes_running_after_polls_with_ssh(
        self, client: VendorClient, fake: FakeVendor
    ) -> None:
        instance_id = self._create(client)
        assert self._wait(client, instance_id, RUNNING) > 1  # not at the first poll
        got = client.get(instance_id)
        assert got is not None and got.reachable
        assert (got.ssh_host, got.ssh_port) in (("127.0.0.1", SSH_PORT), ("127.0.0.1", 22))
        assert client.find("box-1") == got or client.find("box-1").id == instance_id  # type: ignore[union-attr]

    def test_list_sees_every_instance(self, client: VendorClient, fake: FakeVendor) -> None:
        ids = {self._create(client, f"box-{n}") for n in range(5)}
        assert {i.id for i in client.list()} == ids

    def test_terminate_is_confirmed_only_when_gone(
        self, client: VendorClient, fake: FakeVendor
    ) -> None:
        instance_id = self._create(client)
        client.terminate(instance_id)
        polls = 1
        while not client.gone(client.get(instance_id)):
            polls += 1
            assert polls < 20
        assert polls > 1 or not client.gone_only_when_absent
        assert fake.billed() == [] and client.find("box-1") is None

    def test_stop_then_start(self, client: VendorClient, fake: FakeVendor) -> None:
        instance_id = self._create(client)
        if not client.can_stop:
            with pytest.raises(UsageError):
                client.stop(instance_id)
            return
        client.stop(instance_id)
        self._wait(client, instance_id, STOPPED)
        client.start(instance_id)
        self._wait(client, instance_id, RUNNING)

    def test_429_is_retried_after_retry_after(self, client: VendorClient, fake: FakeVendor) -> None:
        fake.faults.append(Fault(429, {"error": "slow down"}, {"Retry-After": "1"}))
        started = time.monotonic()
        assert client.list() == []
        assert time.monotonic() - started >= 1.0

    def test_500s_are_retried_on_reads(self, client: VendorClient, fake: FakeVendor) -> None:
        fake.faults.extend([Fault(500, None), Fault(503, None)])
        assert client.list() == []
        assert len(fake.requests) == 3

    def test_a_create_that_got_a_500_is_not_repeated(
        self, client: VendorClient, fake: FakeVendor
    ) -> None:
        offer = client.offers(f"{self.gpu}:1")[0]
        fake.faults.append(Fault(500, None, method="PUT" if self.vendor == "vastai" else "POST"))
        with pytest.raises(VendorError) as caught:
            client.create(CreateRequest(name="x", offer=offer, image="img", disk_gb=20))
        assert caught.value.code == "ambiguous"
        writes = [r for r in fake.requests if r[0] in ("POST", "PUT") and "graphql" not in r[1]]
        assert len(writes) == 1

    def test_a_create_past_the_deadline_is_ambiguous(
        self, client: VendorClient, fake: FakeVendor
    ) -> None:
        offer = client.offers(f"{self.gpu}:1")[0]
        client._http.timeout = httpx.Timeout(0.3)
        fake.faults.append(
            Fault(200, {}, hang_s=1.0, method="PUT" if self.vendor == "vastai" else "POST")
        )
        with pytest.raises(VendorError) as caught:
            client.create(CreateRequest(name="x", offer=offer, image="img", disk_gb=20))
        assert caught.value.code == "ambiguous"

    def test_a_refused_key_is_not_retried_nor_shown(
        self, fake: FakeVendor, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv(KEY_VARIABLES[self.vendor], "wrong-key-s3cr3t-value")
        client = client_for(self.vendor)
        with pytest.raises(KeyRefusedError) as caught:
            client.list()
        assert "the key was refused" in caught.value.message
        assert "s3cr3t" not in str(caught.value.to_dict())
        assert len(fake.requests) == 1
