"""Lambda Cloud: REST at ``https://cloud.lambdalabs.com/api/v1`` with a Bearer key.

Every success is ``{"data": ...}`` and every failure ``{"error": {"code", "message",
"suggestion"}}``: the code (``global/invalid-api-key``,
``instance-operations/launch/insufficient-capacity``, ``global/object-does-not-exist``) is what
rgt branches on, never the message. Offers come from ``GET /instance-types`` (one offer per
region with capacity); ``POST /instance-operations/launch`` and ``…/terminate`` act;
``GET /instances[/{id}]`` reads. Lambda has no stop: terminate is the only meter-stop verb.
"""

from __future__ import annotations

from typing import Any

from rgt.errors import UsageError
from rgt.vendors._answer import dicts, field
from rgt.vendors._model import (
    ERROR,
    PROVISIONING,
    RUNNING,
    TERMINATED,
    CreateRequest,
    Instance,
    Offer,
)
from rgt.vendors._rest import VendorClient

_STATES = {
    "booting": PROVISIONING,
    "active": RUNNING,
    "terminating": PROVISIONING,
    "terminated": TERMINATED,
    "unhealthy": ERROR,
}


class LambdaClient(VendorClient):
    vendor = "lambda"
    default_url = "https://cloud.lambdalabs.com/api/v1"
    can_stop = False
    # The API gives only ``ip``/``hostname``: the login is the image's, port 22, user ubuntu
    # (D:lam-manage). `rgt up lambda --ssh-user/--ssh-port` overrides them.
    ssh_user, ssh_port = "ubuntu", 22
    default_image = ""  # a Lambda instance is its type's Ubuntu + Lambda Stack: no image choice
    console_url = "https://cloud.lambda.ai/instances"

    def error_detail(self, body: Any) -> tuple[str | None, str | None]:
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict):
            return None, None
        message = str(error.get("message") or error.get("code"))
        if error.get("suggestion"):
            message += f" ({error['suggestion']})"
        return error.get("code"), message

    def is_not_found(self, body: Any) -> bool:
        return self.error_detail(body)[0] == "global/object-does-not-exist"

    def catalog(self, count: int, spot: bool) -> list[Offer]:
        if spot:
            return []  # Lambda sells no spot capacity
        return self.call(  # type: ignore[no-any-return]
            "GET", "/instance-types", expect=lambda b: _offers(field(b, "data", dict), count)
        )

    def create(self, request: CreateRequest) -> Instance:
        keys = self.call(
            "GET", "/ssh-keys", expect=lambda b: [str(k["name"]) for k in dicts(b.get("data"))]
        )
        if not keys:
            raise UsageError(
                "this Lambda account has no SSH key",
                fix="add your public key at cloud.lambda.ai → SSH keys, then run `rgt up` again",
            )
        body = self.call(
            "POST",
            "/instance-operations/launch",
            json={
                "region_name": request.offer.region,
                "instance_type_name": request.offer.id,
                "ssh_key_names": keys[:1],
                "quantity": 1,
                "name": request.name,
            },
            idempotent=False,
            expect=lambda b: str(field(field(b, "data", dict), "instance_ids", list)[0]),
        )
        instance_id = str(body)
        found = self.get(instance_id)
        return found or Instance(instance_id, request.name, PROVISIONING, "booting")

    def get(self, instance_id: str) -> Instance | None:
        return self.call(  # type: ignore[no-any-return]
            "GET",
            f"/instances/{instance_id}",
            missing_ok=True,
            expect=lambda b: _instance(field(b, "data", dict), self),
        )

    def list(self) -> list[Instance]:
        return self.call(  # type: ignore[no-any-return]
            "GET", "/instances", expect=lambda b: [_instance(i, self) for i in dicts(b["data"])]
        )

    def stop(self, instance_id: str) -> None:
        raise UsageError(
            "Lambda instances cannot be stopped, only terminated",
            fix="run `rgt down NAME` without --keep-volume (a filesystem keeps your files)",
        )

    start = stop

    def terminate(self, instance_id: str) -> None:
        self.call(
            "POST",
            "/instance-operations/terminate",
            json={"instance_ids": [instance_id]},
            missing_ok=True,  # already gone (an earlier terminate whose answer was lost)
            expect=lambda b: field(field(b, "data", dict), "terminated_instances", list),
        )


def _offers(types: dict[str, Any], count: int) -> list[Offer]:
    """One offer per instance type with ``count`` GPUs and per region with capacity."""
    offers = []
    for entry in types.values():
        kind = entry["instance_type"]
        specs = kind.get("specs") or {}
        if int(specs.get("gpus") or 0) != count:
            continue
        for region in dicts(entry.get("regions_with_capacity_available") or []):
            offers.append(
                Offer(
                    id=str(kind["name"]),
                    gpu=str(kind.get("gpu_description") or kind.get("description") or "?"),
                    count=count,
                    price_per_hour=int(kind.get("price_cents_per_hour") or 0) / 100,
                    spot=False,
                    disk_gb=specs.get("storage_gib"),
                    region=str(region["name"]),
                )
            )
    return offers


def _instance(i: dict[str, Any], client: LambdaClient) -> Instance:
    raw = str(i.get("status") or "booting")
    state = _STATES.get(raw, ERROR)
    kind = i.get("instance_type") or {}
    cents = kind.get("price_cents_per_hour")
    return Instance(
        id=str(i["id"]),
        name=str(i.get("name") or ""),
        state=state if state != RUNNING or i.get("ip") else PROVISIONING,
        raw_state=raw,
        price_per_hour=int(cents) / 100 if cents is not None else None,
        ssh_host=i.get("ip"),
        ssh_port=client.ssh_port,
        ssh_user=client.ssh_user,
        gpu=kind.get("gpu_description") or kind.get("description"),
    )
