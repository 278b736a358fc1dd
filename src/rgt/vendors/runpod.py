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

from typing import Any

from rgt.errors import VendorError
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

    def __init__(self, key: str, base_url: str | None = None, *, backoff_s: float = 0.5) -> None:
        root = base_url.rstrip("/") if base_url else None
        super().__init__(key, f"{root}/v1" if root else REST_URL, backoff_s=backoff_s)
        self.graphql_url = f"{root}/graphql" if root else GRAPHQL_URL

    def graphql(self, query: str, variables: dict[str, Any], *, idempotent: bool = True) -> Any:
        """A GraphQL call; an HTTP 200 that carries ``errors`` is an error all the same."""
        body = self.call(
            "POST",
            self.graphql_url,
            json={"query": query, "variables": variables},
            idempotent=idempotent,
        )
        code, message = self.error_detail(body)
        if message is not None:
            raise VendorError(f"runpod: {message}", backend=self.vendor, status=200, code=code)
        return (body or {}).get("data") or {}

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
        offers = []
        for gpu in self.graphql(GPU_TYPES, {"count": count}).get("gpuTypes") or []:
            lowest = gpu.get("lowestPrice") or {}
            per_gpu = lowest.get("minimumBidPrice" if spot else "uninterruptablePrice")
            if not per_gpu:
                continue  # none free now
            offers.append(
                Offer(
                    id=str(gpu["id"]),
                    gpu=str(gpu.get("displayName") or gpu["id"]),
                    count=count,
                    price_per_hour=round(float(per_gpu) * count, 4),
                    spot=spot,
                )
            )
        return offers

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
        )
        return self._instance(pod)

    def _create_spot(self, request: CreateRequest, env: dict[str, str]) -> Instance:
        bid = request.bid if request.bid is not None else request.offer.price_per_hour
        data = self.graphql(
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
            idempotent=False,
        )
        return self._instance(data["podRentInterruptable"])

    def get(self, instance_id: str) -> Instance | None:
        pod = self.call("GET", f"/pods/{instance_id}", missing_ok=True)
        return None if pod is None else self._instance(pod)

    def list(self) -> list[Instance]:
        return [self._instance(p) for p in self.call("GET", "/pods") or []]

    def stop(self, instance_id: str) -> None:
        self.call("POST", f"/pods/{instance_id}/stop")

    def start(self, instance_id: str) -> None:
        self.call("POST", f"/pods/{instance_id}/start")

    def terminate(self, instance_id: str) -> None:
        self.call("DELETE", f"/pods/{instance_id}", missing_ok=True)

    def _instance(self, pod: dict[str, Any]) -> Instance:
        raw = str(pod.get("desiredStatus") or "")
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
