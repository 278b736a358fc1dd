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
from typing import Any

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

    def error_detail(self, body: Any) -> tuple[str | None, str | None]:
        if isinstance(body, dict) and body.get("message"):
            code = body.get("code") or body.get("status")
            return (str(code) if code is not None else None), str(body["message"])
        return None, None

    def catalog(self, count: int, spot: bool) -> list[Offer]:
        if spot:
            return []  # Paperspace sells no spot capacity
        offers = []
        for kind in self._pages("/machine-types"):
            if int(kind.get("gpuCount") or 0) != count or not kind.get("isAvailable", True):
                continue
            for region in kind.get("regions") or [None]:
                offers.append(
                    Offer(
                        id=str(kind["label"]),
                        gpu=str(kind.get("gpu") or kind["label"]),
                        count=count,
                        price_per_hour=float(kind.get("hourlyRate") or 0.0),
                        spot=False,
                        region=region,
                    )
                )
        return offers

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
        )
        return _instance(body.get("data", body), self, request.offer.price_per_hour)

    def get(self, instance_id: str) -> Instance | None:
        body = self.call("GET", f"/machines/{instance_id}", missing_ok=True)
        return None if body is None else _instance(body.get("data", body), self)

    def list(self) -> list[Instance]:
        return [_instance(m, self) for m in self._pages("/machines")]

    def stop(self, instance_id: str) -> None:
        self.call("PATCH", f"/machines/{instance_id}/stop")

    def start(self, instance_id: str) -> None:
        self.call("PATCH", f"/machines/{instance_id}/start")

    def terminate(self, instance_id: str) -> None:
        self.call("DELETE", f"/machines/{instance_id}", missing_ok=True)

    def _pages(self, path: str) -> builtins.list[dict[str, Any]]:
        items: builtins.list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": PAGE}
        while True:
            body = self.call("GET", path, params=params) or {}
            items += body.get("items") or []
            if not body.get("hasMore") or not body.get("nextPage"):
                return items
            params = {"limit": PAGE, "after": body["nextPage"]}


def _instance(m: dict[str, Any], client: PaperspaceClient, price: float | None = None) -> Instance:
    raw = str(m.get("state") or "provisioning")
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
