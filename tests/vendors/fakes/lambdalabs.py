"""A fake Lambda Cloud: /instance-types, /ssh-keys, /instances, /instance-operations/*."""

from __future__ import annotations

from typing import Any

from tests.vendors.fakes._server import FakeInstance, FakeVendor, Reply

TYPES = {
    "gpu_1x_a100": {
        "description": "1x A100 (40 GB PCIe)",
        "gpu_description": "A100 (40 GB PCIe)",
        "price_cents_per_hour": 129,
        "gpus": 1,
        "regions": ["us-east-1", "us-west-1"],
    },
    "gpu_1x_h100_pcie": {
        "description": "1x H100 (80 GB PCIe)",
        "gpu_description": "H100 (80 GB PCIe)",
        "price_cents_per_hour": 249,
        "gpus": 1,
        "regions": [],
    },
    "gpu_8x_a100_80gb_sxm4": {
        "description": "8x A100 (80 GB SXM4)",
        "gpu_description": "A100 (80 GB SXM4)",
        "price_cents_per_hour": 1432,
        "gpus": 8,
        "regions": ["us-east-1"],
    },
    "gpu_1x_a10": {
        "description": "1x A10 (24 GB PCIe)",
        "gpu_description": "A10 (24 GB PCIe)",
        "price_cents_per_hour": 75,
        "gpus": 1,
        "regions": ["us-west-1"],
    },
}


def _error(code: str, message: str, suggestion: str | None = None) -> dict[str, Any]:
    error = {"code": code, "message": message}
    if suggestion:
        error["suggestion"] = suggestion
    return {"error": error}


class FakeLambda(FakeVendor):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.route("GET", r"/instance-types", self.types)
        self.route("GET", r"/ssh-keys", self.keys)
        self.route("POST", r"/instance-operations/launch", self.launch)
        self.route("POST", r"/instance-operations/terminate", self.terminate)
        self.route("GET", r"/instances", self.list_instances)
        self.route("GET", r"/instances/([^/]+)", self.show)

    def unauthorized(self) -> Reply:
        return 401, _error("global/invalid-api-key", "API key was invalid, expired, or deleted.")

    def not_found(self) -> Reply:
        return 404, _error("global/object-does-not-exist", "Specified instance does not exist.")

    def default_offer(self) -> dict[str, Any]:
        return {"name": "gpu_1x_a100", **TYPES["gpu_1x_a100"]}

    def types(self, *, body: Any, query: Any) -> Reply:
        return 200, {
            "data": {
                name: {
                    "instance_type": {
                        "name": name,
                        "description": t["description"],
                        "gpu_description": t["gpu_description"],
                        "price_cents_per_hour": t["price_cents_per_hour"],
                        "specs": {
                            "vcpus": 30,
                            "memory_gib": 200,
                            "storage_gib": 512,
                            "gpus": t["gpus"],
                        },
                    },
                    "regions_with_capacity_available": [
                        {"name": r, "description": r} for r in t["regions"]
                    ],
                }
                for name, t in TYPES.items()
            }
        }

    def keys(self, *, body: Any, query: Any) -> Reply:
        return 200, {
            "data": [{"id": "k1", "name": "rgt-test", "public_key": "ssh-ed25519 AAAA rgt-test"}]
        }

    def launch(self, *, body: Any, query: Any) -> Reply:
        kind = TYPES.get(body.get("instance_type_name", ""))
        if kind is None:
            return 400, _error("global/invalid-parameters", "Invalid instance type.")
        if body.get("region_name") not in kind["regions"]:
            return 400, _error(
                "instance-operations/launch/insufficient-capacity",
                "Not enough capacity to fulfill launch request.",
                "Try another region or instance type.",
            )
        inst = self.add(
            body.get("name") or "",
            {"name": body["instance_type_name"], **kind},
            kind["price_cents_per_hour"] / 100,
            region=body["region_name"],
        )
        return 200, {"data": {"instance_ids": [inst.id]}}

    def terminate(self, *, body: Any, query: Any) -> Reply:
        done = [
            self.render(self.instances[i], read=False)
            for i in body.get("instance_ids", [])
            if i in self.instances
        ]
        if not all(self.delete(i) for i in body.get("instance_ids", [])):
            return 404, _error("global/object-does-not-exist", "Specified instance does not exist.")
        return 200, {"data": {"terminated_instances": done}}

    def list_instances(self, *, body: Any, query: Any) -> Reply:
        return 200, {"data": [self.render(i) for i in self.visible()]}

    def show(self, instance_id: str, *, body: Any, query: Any) -> Reply:
        inst = self.lookup(instance_id)
        return (200, {"data": self.render(inst)}) if inst else self.not_found()

    def render(self, inst: FakeInstance, *, read: bool = True) -> dict[str, Any]:
        phase = self.phase(inst, read=read)
        status = {"running": "active", "provisioning": "booting", "deleting": "terminating"}.get(
            phase, "active"
        )
        offer = inst.offer
        return {
            "id": inst.id,
            "name": inst.name,
            "status": status,
            "ip": self.ssh_host if status == "active" else None,
            "ssh_key_names": ["rgt-test"],
            "file_system_names": [],
            "region": {"name": inst.extra.get("region", "us-east-1")},
            "instance_type": {
                "name": offer["name"],
                "description": offer["description"],
                "gpu_description": offer["gpu_description"],
                "price_cents_per_hour": offer["price_cents_per_hour"],
            },
            "hostname": f"{inst.id}.cloud.lambdalabs.com",
        }
