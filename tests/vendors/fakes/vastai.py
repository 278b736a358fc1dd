"""A fake vast.ai: /bundles/, /asks/{id}/, /instances/ (shapes: SOURCES.md)."""

from __future__ import annotations

import json
from typing import Any

from tests.vendors.fakes._server import FakeInstance, FakeVendor, Reply

OFFERS = [
    {
        "id": 5001,
        "ask_contract_id": 5001,
        "gpu_name": "RTX 4090",
        "num_gpus": 1,
        "dph_total": 0.42,
        "min_bid": 0.21,
        "reliability2": 0.991,
        "geolocation": "Sweden, SE",
        "disk_space": 200.0,
    },
    {
        "id": 5002,
        "ask_contract_id": 5002,
        "gpu_name": "A100 SXM4",
        "num_gpus": 1,
        "dph_total": 1.21,
        "min_bid": 0.60,
        "reliability2": 0.998,
        "geolocation": "US",
        "disk_space": 500.0,
    },
    {
        "id": 5003,
        "ask_contract_id": 5003,
        "gpu_name": "A100 PCIE",
        "num_gpus": 1,
        "dph_total": 0.95,
        "min_bid": 0.50,
        "reliability2": 0.97,
        "geolocation": "Poland, PL",
        "disk_space": 100.0,
    },
    {
        "id": 5004,
        "ask_contract_id": 5004,
        "gpu_name": "A100 SXM4",
        "num_gpus": 2,
        "dph_total": 2.30,
        "min_bid": 1.10,
        "reliability2": 0.99,
        "geolocation": "US",
        "disk_space": 800.0,
    },
]


class FakeVastai(FakeVendor):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.route("GET", r"/bundles/?", self.bundles)
        self.route("PUT", r"/asks/(\d+)/", self.ask)
        self.route("GET", r"/instances/?", self.list_instances)
        self.route("GET", r"/instances/(\d+)/", self.show)
        self.route("PUT", r"/instances/(\d+)/", self.change)
        self.route("DELETE", r"/instances/(\d+)/", self.destroy)

    def unauthorized(self) -> Reply:
        return 401, {"success": False, "error": "auth_error", "msg": "Invalid user key"}

    def not_found(self) -> Reply:
        return 404, {"success": False, "error": "not_found", "msg": "no such endpoint"}

    def default_offer(self) -> dict[str, Any]:
        return OFFERS[0]

    def bundles(self, *, body: Any, query: Any) -> Reply:
        q = json.loads(query.get("q", "{}"))
        count = (q.get("num_gpus") or {}).get("eq")
        found = [o for o in OFFERS if count is None or o["num_gpus"] == count]
        return 200, {"offers": found}

    def ask(self, offer_id: str, *, body: Any, query: Any) -> Reply:
        offer = next((o for o in OFFERS if str(o["id"]) == offer_id), None)
        if offer is None:
            return 400, {
                "success": False,
                "error": "no_such_ask",
                "msg": f"Instance type by id {offer_id} is not available.",
            }
        price = body.get("price")
        inst = self.add(body.get("label") or "", offer, float(price or offer["dph_total"]))
        if price is not None and float(price) < offer["min_bid"]:
            # The contract exists (outbid, not running) although the answer is an error.
            inst.wanted = "stopped"
            return 400, {
                "success": False,
                "error": "bid_too_low",
                "msg": f"Your bid {price} is below the minimum {offer['min_bid']}",
                "new_contract": int(inst.id),
            }
        return 200, {"success": True, "new_contract": int(inst.id)}

    def list_instances(self, *, body: Any, query: Any) -> Reply:
        return 200, {"instances": [self.render(i) for i in self.visible()]}

    def show(self, instance_id: str, *, body: Any, query: Any) -> Reply:
        inst = self.lookup(instance_id)
        return 200, {"instances": self.render(inst) if inst else None}

    def change(self, instance_id: str, *, body: Any, query: Any) -> Reply:
        inst = self.lookup(instance_id)
        if inst is None:
            return 404, {"success": False, "error": "no_such_instance", "msg": "Instance not found"}
        inst.wanted = "stopped" if body.get("state") == "stopped" else "running"
        return 200, {"success": True}

    def destroy(self, instance_id: str, *, body: Any, query: Any) -> Reply:
        if not self.delete(instance_id):
            return 404, {"success": False, "error": "no_such_instance", "msg": "Instance not found"}
        return 200, {"success": True}

    def render(self, inst: FakeInstance) -> dict[str, Any]:
        phase = self.phase(inst)
        status = {"running": "running", "stopped": "exited", "provisioning": "loading"}.get(
            phase, "running"
        )
        up = status == "running"
        return {
            "id": int(inst.id),
            "label": inst.name,
            "actual_status": status,
            "intended_status": "stopped" if phase == "stopped" else "running",
            "cur_state": status,
            "dph_total": inst.price,
            "gpu_name": inst.offer["gpu_name"],
            "num_gpus": inst.offer["num_gpus"],
            "ssh_host": self.ssh_host if up else None,
            "ssh_port": self.ssh_port if up else None,
            "public_ipaddr": self.ssh_host if up else None,
            "ports": {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": str(self.ssh_port)}]}
            if up
            else {},
        }
