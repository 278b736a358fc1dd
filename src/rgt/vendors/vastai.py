"""vast.ai: a marketplace REST API at ``https://console.vast.ai/api/v0`` with a Bearer key.

Offers ``GET /bundles/?q=<json>``; create ``PUT /asks/{offer}/`` (``{"success": true,
"new_contract": ID}``); instances ``GET /instances/?owner=me``; one instance
``GET /instances/{id}/`` (``{"instances": {...}}``, ``null`` once destroyed); stop/start
``PUT /instances/{id}/`` with ``{"state": ...}``; destroy ``DELETE /instances/{id}/``.
A create can fail *and* make an instance: a too-low spot bid answers an error that carries
``new_contract``. That id is raised in ``VendorError.instance_id`` so it is recorded (it bills
disk from creation), never orphaned. The official SDK swallows HTTP errors into an empty list,
hence plain httpx.
"""

from __future__ import annotations

import json
from typing import Any

from rgt.errors import VendorError
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
    "running": RUNNING,
    "loading": PROVISIONING,
    "created": PROVISIONING,
    "scheduling": PROVISIONING,
    "rebooting": PROVISIONING,
    "stopped": STOPPED,
    "exited": STOPPED,
    "frozen": STOPPED,
    "offline": ERROR,
    "unknown": ERROR,
}


class VastaiClient(VendorClient):
    vendor = "vastai"
    default_url = "https://console.vast.ai/api/v0"
    console_url = "https://cloud.vast.ai/instances/"

    def error_detail(self, body: Any) -> tuple[str | None, str | None]:
        if isinstance(body, dict) and (body.get("success") is False or "error" in body):
            code = body.get("error")
            return (str(code) if code else None), str(body.get("msg") or code or body)
        return None, None

    def catalog(self, count: int, spot: bool) -> list[Offer]:
        query = {
            "rentable": {"eq": True},
            "num_gpus": {"eq": count},
            "type": "bid" if spot else "on-demand",
            "order": [["dph_total", "asc"]],
        }
        return self.call(  # type: ignore[no-any-return]
            "GET",
            "/bundles/",
            params={"q": json.dumps(query)},
            expect=lambda b: [_offer(o, spot) for o in dicts(field(b, "offers", list))],
        )

    def create(self, request: CreateRequest) -> Instance:
        payload: dict[str, Any] = {
            "client_id": "me",
            "image": request.image,
            "disk": request.disk_gb,
            "label": request.name,
            "runtype": "ssh_direct",
            "env": {},
        }
        if request.ssh_public_key:
            payload["env"] = {"PUBLIC_KEY": request.ssh_public_key}
        if request.offer.spot:
            payload["price"] = (
                request.bid if request.bid is not None else request.offer.price_per_hour
            )
        body = self.call(
            "PUT",
            f"/asks/{request.offer.id}/",
            json=payload,
            idempotent=False,
            expect=obj,
        )
        contract = body.get("new_contract")
        if not body.get("success") or contract is None:
            code, message = self.error_detail(body)
            raise VendorError(
                f"vastai: {message or 'create failed'}",
                backend=self.vendor,
                status=200,
                code=code,
                instance_id=self.error_instance(body),
            )
        found = self.get(str(contract))
        return found or Instance(str(contract), request.name, PROVISIONING, "created")

    def get(self, instance_id: str) -> Instance | None:
        return self.call(  # type: ignore[no-any-return]
            "GET",
            f"/instances/{instance_id}/",
            params={"owner": "me"},
            missing_ok=True,
            expect=_shown,
        )

    def list(self) -> list[Instance]:
        return self.call(  # type: ignore[no-any-return]
            "GET",
            "/instances/",
            params={"owner": "me"},
            expect=lambda b: [_instance(i) for i in dicts(field(b, "instances", list))],
        )

    def stop(self, instance_id: str) -> None:
        self.call("PUT", f"/instances/{instance_id}/", json={"state": "stopped"}, expect=self._done)

    def start(self, instance_id: str) -> None:
        self.call("PUT", f"/instances/{instance_id}/", json={"state": "running"}, expect=self._done)

    def terminate(self, instance_id: str) -> None:
        self.call("DELETE", f"/instances/{instance_id}/", missing_ok=True, expect=self._done)

    def _done(self, body: Any) -> None:
        """A verb's answer: ``{"success": true}``; ``false`` is the vendor's refusal."""
        if field(body, "success", bool) is not True:
            code, message = self.error_detail(body)
            raise VendorError(f"vastai: {message}", backend=self.vendor, status=200, code=code)

    def error_instance(self, body: Any) -> str | None:
        """An error answer that still names a ``new_contract``: that instance exists, bills."""
        if isinstance(body, dict) and body.get("new_contract") is not None:
            return str(body["new_contract"])
        return None


def _offer(o: dict[str, Any], spot: bool) -> Offer:
    price = o.get("min_bid") if spot else o.get("dph_total")
    return Offer(
        id=str(o["id"]),
        gpu=str(o.get("gpu_name") or "?"),
        count=int(o.get("num_gpus") or 1),
        price_per_hour=float(price or 0.0),
        spot=spot,
        disk_gb=o.get("disk_space"),
        region=o.get("geolocation"),
        reliability=o.get("reliability2", o.get("reliability")),
    )


def _shown(body: Any) -> Instance | None:
    """``GET /instances/{id}/``: ``{"instances": {...}}``, or ``{"instances": null}`` once
    destroyed (the one 200 that means gone); any other shape is garbled."""
    data = field(body, "instances", (dict, type(None)))
    return None if data is None else _instance(data)


def _instance(i: dict[str, Any]) -> Instance:
    raw = str(i.get("actual_status") or "loading")
    host, port = i.get("ssh_host"), i.get("ssh_port")
    direct = ((i.get("ports") or {}).get("22/tcp") or [{}])[0]
    if i.get("public_ipaddr") and direct.get("HostPort"):  # direct ssh beats the slow proxy
        host, port = i["public_ipaddr"], direct["HostPort"]
    state = _STATES.get(raw, ERROR)
    return Instance(
        id=str(i["id"]),
        name=str(i.get("label") or ""),
        state=state if state != RUNNING or (host and port) else PROVISIONING,
        raw_state=raw,
        price_per_hour=i.get("dph_total"),
        ssh_host=str(host).strip() if host else None,
        ssh_port=int(port) if port else None,
        gpu=i.get("gpu_name"),
    )
