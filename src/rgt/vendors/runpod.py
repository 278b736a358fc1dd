"""RunPod: offers and spot rentals through GraphQL, the pod lifecycle through REST v1.

REST ``https://rest.runpod.io/v1`` (``GET/POST /pods``, ``GET/DELETE /pods/{id}``,
``POST /pods/{id}/stop|start``) and GraphQL ``https://api.runpod.io/graphql`` (``gpuTypes``
with ``lowestPrice``, ``podRentInterruptable`` for a spot bid), both with a Bearer key — never
the ``?api_key=`` query string of older examples, which would put the key in URLs and logs.
``RGT_RUNPOD_API_URL`` points both elsewhere: ``<url>/v1`` and ``<url>/graphql``.
Delete is eventually consistent: a pod may still be listed after the 200, so ``down`` polls
until ``GET /pods/{id}`` is a 404 (``gone_only_when_absent``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rgt.errors import VendorError
from rgt.vendors._answer import dicts, field
from rgt.vendors._model import (
    ERROR,
    PROVISIONING,
    RUNNING,
    STOPPED,
    TERMINATED,
    CreateRequest,
    Instance,
    Offer,
)
from rgt.vendors._rest import VendorClient

REST_URL = "https://rest.runpod.io/v1"
GRAPHQL_URL = "https://api.runpod.io/graphql"

GPU_TYPES = """
query GpuTypes($count: Int!) {
  gpuTypes { id displayName memoryInGb secureCloud communityCloud
    lowestPrice(input: {gpuCount: $count}) { minimumBidPrice uninterruptablePrice } }
}"""

RENT_SPOT = """
mutation Rent($input: PodRentInterruptableInput!) {
  podRentInterruptable(input: $input) { id name desiredStatus costPerHr }
}"""

_STATES = {"RUNNING": RUNNING, "EXITED": STOPPED, "TERMINATED": TERMINATED, "CREATED": PROVISIONING}


class RunpodClient(VendorClient):
    vendor = "runpod"
    default_url = REST_URL
    gone_only_when_absent = True
    stopped_disk_per_gb_month = 0.20  # volume disk, twice the running rate (D:rp-price)
    console_url = "https://www.runpod.io/console/pods"

    def __init__(
        self, key: str, base_url: str | None = None, *, backoff_s: float | None = None
    ) -> None:
        root = base_url.rstrip("/") if base_url else None
        super().__init__(key, f"{root}/v1" if root else REST_URL, backoff_s=backoff_s)
        self.graphql_url = f"{root}/graphql" if root else GRAPHQL_URL

    def graphql(
        self,
        query: str,
        variables: dict[str, Any],
        parse: Callable[[dict[str, Any]], Any],
        *,
        idempotent: bool = True,
    ) -> Any:
        """``parse(data)`` of a GraphQL answer; an HTTP 200 that carries ``errors`` is an error
        all the same, and one with neither ``errors`` nor a ``data`` object is garbled."""
        return self.call(
            "POST",
            self.graphql_url,
            json={"query": query, "variables": variables},
            idempotent=idempotent,
            expect=lambda body: parse(self._graphql_data(body)),
        )

    def _graphql_data(self, body: Any) -> dict[str, Any]:
        code, message = self.error_detail(body)
        if message is not None:
            raise VendorError(f"runpod: {message}", backend=self.vendor, status=200, code=code)
        return field(body, "data", dict)  # type: ignore[no-any-return]

    def error_detail(self, body: Any) -> tuple[str | None, str | None]:
        if not isinstance(body, dict):
            return None, None
        errors = body.get("errors")
        if errors:
            first = errors[0] if isinstance(errors, list) and errors else {}
            code = (first.get("extensions") or {}).get("code") if isinstance(first, dict) else None
            return code, str(first.get("message") if isinstance(first, dict) else first)
        error = body.get("error")
        return (None, str(error)) if error else (None, None)

    def catalog(self, count: int, spot: bool) -> list[Offer]:
        def parse(data: dict[str, Any]) -> list[Offer]:
            return [o for g in dicts(data["gpuTypes"]) if (o := _offer(g, count, spot))]

        return self.graphql(GPU_TYPES, {"count": count}, parse)  # type: ignore[no-any-return]

    def create(self, request: CreateRequest) -> Instance:
        env = {"PUBLIC_KEY": request.ssh_public_key} if request.ssh_public_key else {}
        if request.offer.spot:
            return self._create_spot(request, env)
        pod = self.call(
            "POST",
            "/pods",
            json={
                "name": request.name,
                "imageName": request.image,
                "gpuTypeIds": [request.offer.id],
                "gpuCount": request.offer.count,
                "containerDiskInGb": request.disk_gb,
                "ports": ["22/tcp"],
                "supportPublicIp": True,
                "interruptible": False,
                "env": env,
            },
            idempotent=False,
            expect=self._instance,
        )
        return pod  # type: ignore[no-any-return]

    def _create_spot(self, request: CreateRequest, env: dict[str, str]) -> Instance:
        bid = request.bid if request.bid is not None else request.offer.price_per_hour
        return self.graphql(  # type: ignore[no-any-return]
            RENT_SPOT,
            {
                "input": {
                    "name": request.name,
                    "imageName": request.image,
                    "gpuTypeId": request.offer.id,
                    "gpuCount": request.offer.count,
                    "bidPerGpu": round(bid / request.offer.count, 4),
                    "containerDiskInGb": request.disk_gb,
                    "ports": "22/tcp",
                    "supportPublicIp": True,
                    "startSsh": True,
                    "env": [{"key": k, "value": v} for k, v in env.items()],
                }
            },
            lambda data: self._instance(data["podRentInterruptable"]),
            idempotent=False,
        )

    def get(self, instance_id: str) -> Instance | None:
        return self.call(  # type: ignore[no-any-return]
            "GET", f"/pods/{instance_id}", missing_ok=True, expect=self._instance
        )

    def list(self) -> list[Instance]:
        return self.call(  # type: ignore[no-any-return]
            "GET", "/pods", expect=lambda b: [self._instance(p) for p in dicts(b)]
        )

    # The REST verbs answer the pod or nothing: what counts is the state read after them.
    def stop(self, instance_id: str) -> None:
        self.call("POST", f"/pods/{instance_id}/stop", empty_ok=True)

    def start(self, instance_id: str) -> None:
        self.call("POST", f"/pods/{instance_id}/start", empty_ok=True)

    def terminate(self, instance_id: str) -> None:
        self.call("DELETE", f"/pods/{instance_id}", missing_ok=True, empty_ok=True)

    def _instance(self, pod: dict[str, Any]) -> Instance:
        raw = str(pod["desiredStatus"])
        ip, port = pod.get("publicIp"), (pod.get("portMappings") or {}).get("22")
        state = _STATES.get(raw, ERROR)
        if state == RUNNING and not (ip and port):
            state = PROVISIONING  # the container is up, its public port not yet mapped
        price = pod.get("costPerHr")  # a string in REST answers, a number in GraphQL
        return Instance(
            id=str(pod["id"]),
            name=str(pod.get("name") or ""),
            state=state,
            raw_state=raw,
            price_per_hour=float(price) if price not in (None, "") else None,
            ssh_host=str(ip) if ip else None,
            ssh_port=int(port) if port else None,
            gpu=(pod.get("gpu") or {}).get("displayName"),
        )


def _offer(gpu: dict[str, Any], count: int, spot: bool) -> Offer | None:
    """The GPU type's offer for ``count`` of it, None when none is free now."""
    lowest = gpu.get("lowestPrice") or {}
    per_gpu = lowest.get("minimumBidPrice" if spot else "uninterruptablePrice")
    if not per_gpu:
        return None
    return Offer(
        id=str(gpu["id"]),
        gpu=str(gpu.get("displayName") or gpu["id"]),
        count=count,
        price_per_hour=round(float(per_gpu) * count, 4),
        spot=spot,
    )
