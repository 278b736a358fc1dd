"""Paperspace (DigitalOcean): REST at ``https://api.paperspace.com/v1`` with a Bearer key.

Machines: ``GET /machines`` pages with ``limit``/``after`` and answers ``{"items": [...],
"hasMore": bool, "nextPage": cursor}``; ``GET /machines/{id}``; ``POST /machines`` (name,
machineType, templateId, diskSize, region); ``PATCH /machines/{id}/stop|start``;
``DELETE /machines/{id}``. The old Core API (api.paperspace.io) was switched off on
15 Jul 2024. Shutting a machine down stops the GPU meter but storage and a static IP keep
billing, so rgt's default after a verified pull is delete. The offers endpoint
(``GET /machine-types``) and its fields are an assumption (see tests/vendors/SOURCES.md).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from rgt.vendors._answer import dicts, field, obj
from rgt.vendors._model import (
    ERROR,
    PROVISIONING,
    RUNNING,
    STOPPED,
    CreateRequest,
    Instance,
    Offer,
)
from rgt.vendors._rest import VendorClient

_STATES = {
    "provisioning": PROVISIONING,
    "starting": PROVISIONING,
    "restarting": PROVISIONING,
    "stopping": PROVISIONING,
    "upgrading": PROVISIONING,
    "serviceready": PROVISIONING,
    "ready": RUNNING,
    "off": STOPPED,
}
DEFAULT_TEMPLATE = "t0nspur5"  # "ML-in-a-Box" Ubuntu template id (override with --image)
PAGE = 20


class PaperspaceClient(VendorClient):
    vendor = "paperspace"
    default_url = "https://api.paperspace.com/v1"
    # The API gives only ``publicIp``: port 22, and the template's user (ML-in-a-Box:
    # paperspace). `rgt up paperspace --ssh-user/--ssh-port` overrides them.
    ssh_user, ssh_port = "paperspace", 22
    default_image = DEFAULT_TEMPLATE  # --image is a template id here
    console_url = "https://console.paperspace.com/machines"

    def error_detail(self, body: Any) -> tuple[str | None, str | None]:
        if isinstance(body, dict) and body.get("message"):
            code = body.get("code") or body.get("status")
            return (str(code) if code is not None else None), str(body["message"])
        return None, None

    def catalog(self, count: int, spot: bool) -> list[Offer]:
        if spot:
            return []  # Paperspace sells no spot capacity
        return self._pages("/machine-types", lambda kind: _offers(kind, count))

    def create(self, request: CreateRequest) -> Instance:
        body = self.call(
            "POST",
            "/machines",
            json={
                "name": request.name,
                "machineType": request.offer.id,
                "templateId": request.image,
                "diskSize": request.disk_gb,
                "region": request.offer.region,
                "publicIpType": "dynamic",
                "startOnCreate": True,
            },
            idempotent=False,
            expect=lambda b: _instance(_machine(b), self, request.offer.price_per_hour),
        )
        return body  # type: ignore[no-any-return]

    def get(self, instance_id: str) -> Instance | None:
        return self.call(  # type: ignore[no-any-return]
            "GET",
            f"/machines/{instance_id}",
            missing_ok=True,
            expect=lambda b: _instance(_machine(b), self),
        )

    def list(self) -> list[Instance]:
        return self._pages("/machines", lambda m: [_instance(m, self)])

    def stop(self, instance_id: str) -> None:
        self.call("PATCH", f"/machines/{instance_id}/stop", expect=obj)

    def start(self, instance_id: str) -> None:
        self.call("PATCH", f"/machines/{instance_id}/start", expect=obj)

    def terminate(self, instance_id: str) -> None:
        self.call("DELETE", f"/machines/{instance_id}", missing_ok=True, expect=obj)

    def _pages(
        self, path: str, parse: Callable[[dict[str, Any]], builtins.list[Any]]
    ) -> builtins.list[Any]:
        """Every page of ``{"items", "hasMore", "nextPage"}``, each item through ``parse``."""
        found: builtins.list[Any] = []
        params: dict[str, Any] = {"limit": PAGE}
        while True:
            items, cursor = self.call(
                "GET",
                path,
                params=params,
                expect=lambda b: (
                    [x for item in dicts(field(b, "items", list)) for x in parse(item)],
                    b.get("nextPage") if b.get("hasMore") else None,
                ),
            )
            found += items
            if not cursor:
                return found
            params = {"limit": PAGE, "after": cursor}


def _machine(body: Any) -> dict[str, Any]:
    """A machine answer: the machine, or ``{"data": machine, "event": …}`` after a verb."""
    body = obj(body)
    return obj(body["data"]) if "data" in body else body


def _offers(kind: dict[str, Any], count: int) -> list[Offer]:
    if int(kind.get("gpuCount") or 0) != count or not kind.get("isAvailable", True):
        return []
    return [
        Offer(
            id=str(kind["label"]),
            gpu=str(kind.get("gpu") or kind["label"]),
            count=count,
            price_per_hour=float(kind.get("hourlyRate") or 0.0),
            spot=False,
            region=region,
        )
        for region in kind.get("regions") or [None]
    ]


def _instance(m: dict[str, Any], client: PaperspaceClient, price: float | None = None) -> Instance:
    raw = str(m["state"])
    state = _STATES.get(raw, ERROR)
    rate = m.get("hourlyRate", price)
    return Instance(
        id=str(m["id"]),
        name=str(m.get("name") or ""),
        state=state if state != RUNNING or m.get("publicIp") else PROVISIONING,
        raw_state=raw,
        price_per_hour=float(rate) if rate is not None else None,
        ssh_host=m.get("publicIp"),
        ssh_port=client.ssh_port,
        ssh_user=client.ssh_user,
        gpu=m.get("machineType"),
    )
