"""A fake Paperspace v1: /machines (paginated), /machine-types (assumed shape: SOURCES.md)."""

from __future__ import annotations

from typing import Any

from tests.vendors.fakes._server import FakeInstance, FakeVendor, Reply

MACHINE_TYPES = [
    {
        "label": "A100",
        "gpu": "A100",
        "gpuCount": 1,
        "hourlyRate": 3.09,
        "regions": ["ny2"],
        "isAvailable": True,
    },
    {
        "label": "A100-80G",
        "gpu": "A100 80G",
        "gpuCount": 1,
        "hourlyRate": 3.18,
        "regions": ["ny2", "ams1"],
        "isAvailable": True,
    },
    {
        "label": "A4000",
        "gpu": "A4000",
        "gpuCount": 1,
        "hourlyRate": 0.76,
        "regions": ["ny2"],
        "isAvailable": True,
    },
    {
        "label": "H100",
        "gpu": "H100",
        "gpuCount": 1,
        "hourlyRate": 5.95,
        "regions": ["ny2"],
        "isAvailable": False,
    },
    {
        "label": "A100-80Gx8",
        "gpu": "A100 80G",
        "gpuCount": 8,
        "hourlyRate": 25.44,
        "regions": ["ny2"],
        "isAvailable": True,
    },
]
PAGE_CAP = 2  # the fake pages small so every list walks nextPage


class FakePaperspace(FakeVendor):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.route("GET", r"/machine-types", self.types)
        self.route("GET", r"/machines", self.list_machines)
        self.route("POST", r"/machines", self.create)
        self.route("GET", r"/machines/([^/]+)", self.show)
        self.route("PATCH", r"/machines/([^/]+)/(stop|start)", self.power)
        self.route("DELETE", r"/machines/([^/]+)", self.destroy)

    def unauthorized(self) -> Reply:
        return 401, {"message": "Unauthorized", "status": 401}

    def not_found(self) -> Reply:
        return 404, {"message": "Not found", "status": 404}

    def default_offer(self) -> dict[str, Any]:
        return MACHINE_TYPES[0]

    def types(self, *, body: Any, query: Any) -> Reply:
        return 200, _page(MACHINE_TYPES, query)

    def list_machines(self, *, body: Any, query: Any) -> Reply:
        return 200, _page([self.render(i) for i in self.visible()], query)

    def create(self, *, body: Any, query: Any) -> Reply:
        kind = next((t for t in MACHINE_TYPES if t["label"] == body.get("machineType")), None)
        if kind is None or not kind["isAvailable"] or body.get("region") not in kind["regions"]:
            return 400, {
                "message": "There are no machines of that type available in this region",
                "status": 400,
            }
        inst = self.add(body["name"], kind, kind["hourlyRate"], region=body["region"])
        return 200, {
            "data": self.render(inst, read=False),
            "event": {"id": f"ev{inst.id}", "name": "create", "state": "new"},
        }

    def show(self, machine_id: str, *, body: Any, query: Any) -> Reply:
        inst = self.lookup(machine_id)
        return (200, self.render(inst)) if inst else self.not_found()

    def power(self, machine_id: str, verb: str, *, body: Any, query: Any) -> Reply:
        inst = self.lookup(machine_id)
        if inst is None:
            return self.not_found()
        inst.wanted = "stopped" if verb == "stop" else "running"
        return 200, {"data": self.render(inst, read=False), "event": {"name": verb, "state": "new"}}

    def destroy(self, machine_id: str, *, body: Any, query: Any) -> Reply:
        if not self.delete(machine_id):
            return self.not_found()
        return 200, {"data": {"id": machine_id}, "event": {"name": "delete", "state": "new"}}

    def render(self, inst: FakeInstance, *, read: bool = True) -> dict[str, Any]:
        phase = self.phase(inst, read=read)
        state = {"running": "ready", "stopped": "off", "deleting": "stopping"}.get(
            phase, "provisioning"
        )
        return {
            "id": inst.id,
            "name": inst.name,
            "state": state,
            "machineType": inst.offer["label"],
            "region": inst.extra.get("region", "ny2"),
            "publicIp": self.ssh_host if state == "ready" else None,
            "dtCreated": "2026-12-01T00:00:00.000Z",
        }


def _page(items: list[dict[str, Any]], query: dict[str, str]) -> dict[str, Any]:
    start = int(query.get("after") or 0)
    size = min(int(query.get("limit") or PAGE_CAP), PAGE_CAP)
    chunk = items[start : start + size]
    more = start + size < len(items)
    return {"items": chunk, "hasMore": more, "nextPage": str(start + size) if more else None}
