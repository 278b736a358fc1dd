"""A fake RunPod: REST v1 pods under /v1 and GraphQL at /graphql (shapes: SOURCES.md)."""

from __future__ import annotations

from typing import Any

from tests.vendors.fakes._server import FakeInstance, FakeVendor, Reply

GPU_TYPES = [
    {
        "id": "NVIDIA A100 80GB PCIe",
        "displayName": "A100 PCIe",
        "memoryInGb": 80,
        "od": 1.64,
        "bid": 0.82,
    },
    {
        "id": "NVIDIA A100-SXM4-80GB",
        "displayName": "A100 SXM",
        "memoryInGb": 80,
        "od": 1.89,
        "bid": 1.10,
    },
    {
        "id": "NVIDIA GeForce RTX 4090",
        "displayName": "RTX 4090",
        "memoryInGb": 24,
        "od": 0.69,
        "bid": 0.35,
    },
    {
        "id": "NVIDIA H100 80GB HBM3",
        "displayName": "H100 SXM",
        "memoryInGb": 80,
        "od": None,
        "bid": None,
    },
]


class FakeRunpod(FakeVendor):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.route("POST", r"/graphql", self.graphql)
        self.route("GET", r"/v1/pods", self.list_pods)
        self.route("POST", r"/v1/pods", self.create_pod)
        self.route("GET", r"/v1/pods/([^/]+)", self.get_pod)
        self.route("POST", r"/v1/pods/([^/]+)/(stop|start)", self.power)
        self.route("DELETE", r"/v1/pods/([^/]+)", self.delete_pod)

    def default_offer(self) -> dict[str, Any]:
        return GPU_TYPES[0]

    def graphql(self, *, body: Any, query: Any) -> Reply:
        text = str(body.get("query", ""))
        variables = body.get("variables") or {}
        if "gpuTypes" in text:
            count = int(variables.get("count", 1))
            return 200, {"data": {"gpuTypes": [_gpu_type(g, count) for g in GPU_TYPES]}}
        if "podRentInterruptable" in text:
            return self._rent_spot(variables["input"])
        return 200, {
            "errors": [
                {
                    "message": "Cannot query field",
                    "extensions": {"code": "GRAPHQL_VALIDATION_FAILED"},
                }
            ]
        }

    def _rent_spot(self, spec: dict[str, Any]) -> Reply:
        gpu = _gpu(spec.get("gpuTypeId"))
        if gpu is None or gpu["bid"] is None:
            return 200, {
                "data": {"podRentInterruptable": None},
                "errors": [
                    {
                        "message": "There are no longer any instances available with "
                        "the requested specifications."
                    }
                ],
            }
        if float(spec["bidPerGpu"]) < gpu["bid"]:
            return 200, {
                "data": None,
                "errors": [{"message": f"bid too low: minimum is {gpu['bid']}"}],
            }
        inst = self.add(spec["name"], gpu, float(spec["bidPerGpu"]) * int(spec.get("gpuCount", 1)))
        return 200, {
            "data": {
                "podRentInterruptable": {
                    "id": inst.id,
                    "name": inst.name,
                    "desiredStatus": "RUNNING",
                    "costPerHr": inst.price,
                }
            }
        }

    def create_pod(self, *, body: Any, query: Any) -> Reply:
        gpu = _gpu((body.get("gpuTypeIds") or [None])[0])
        if gpu is None or gpu["od"] is None:
            return 400, {"error": "There are no instances currently available", "status": 400}
        inst = self.add(body["name"], gpu, gpu["od"] * int(body.get("gpuCount", 1)))
        return 201, self.pod(inst, read=False)

    def list_pods(self, *, body: Any, query: Any) -> Reply:
        return 200, [self.pod(i) for i in self.visible()]

    def get_pod(self, pod_id: str, *, body: Any, query: Any) -> Reply:
        inst = self.lookup(pod_id)
        return (200, self.pod(inst)) if inst else (404, {"error": "pod not found", "status": 404})

    def power(self, pod_id: str, verb: str, *, body: Any, query: Any) -> Reply:
        inst = self.lookup(pod_id)
        if inst is None:
            return 404, {"error": "pod not found", "status": 404}
        inst.wanted = "stopped" if verb == "stop" else "running"
        return 200, self.pod(inst, read=False)

    def delete_pod(self, pod_id: str, *, body: Any, query: Any) -> Reply:
        return (
            (200, None) if self.delete(pod_id) else (404, {"error": "pod not found", "status": 404})
        )

    def pod(self, inst: FakeInstance, *, read: bool = True) -> dict[str, Any]:
        phase = self.phase(inst, read=read)
        up = phase in ("running", "deleting")  # a deleted pod lingers as it was: 200 is no proof
        return {
            "id": inst.id,
            "name": inst.name,
            "desiredStatus": "EXITED" if phase == "stopped" else "RUNNING",
            "costPerHr": f"{inst.price:.2f}",
            "image": "runpod/pytorch",
            "gpu": {"id": inst.offer["id"], "displayName": inst.offer["displayName"], "count": 1},
            "publicIp": self.ssh_host if up else None,
            "portMappings": {"22": self.ssh_port} if up else {},
        }


def _gpu(gpu_id: Any) -> dict[str, Any] | None:
    return next((g for g in GPU_TYPES if g["id"] == gpu_id), None)


def _gpu_type(g: dict[str, Any], count: int) -> dict[str, Any]:
    lowest = (
        None if g["od"] is None else {"minimumBidPrice": g["bid"], "uninterruptablePrice": g["od"]}
    )
    return {
        "id": g["id"],
        "displayName": g["displayName"],
        "memoryInGb": g["memoryInGb"],
        "secureCloud": True,
        "communityCloud": True,
        "lowestPrice": lowest,
    }
