"""Vendor lifecycle APIs behind ``rgt offers``, ``rgt up PLATFORM --gpu``, ``rgt down`` and
``rgt machines --orphans``: RunPod, vast.ai, Lambda and Paperspace.

``client_for(platform)`` builds a client with the key from ``_keys`` and the base URL from
``RGT_<VENDOR>_API_URL`` (how the tests reach their local fakes), else the vendor's own.
Adding a vendor: a module with a ``VendorClient`` subclass, one line in ``VENDORS``, one in
``_keys.KEY_VARIABLES``, a fake in tests/vendors/fakes and the conformance class (README).
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING

from rgt.errors import UsageError
from rgt.vendors._keys import api_key

if TYPE_CHECKING:  # httpx is imported only when a vendor is really called
    from rgt.vendors._rest import VendorClient

# platform (profile name) → (module, class, base-URL variable)
VENDORS: dict[str, tuple[str, str, str]] = {
    "runpod": ("rgt.vendors.runpod", "RunpodClient", "RGT_RUNPOD_API_URL"),
    "vastai": ("rgt.vendors.vastai", "VastaiClient", "RGT_VASTAI_API_URL"),
    "lambda": ("rgt.vendors.lambdalabs", "LambdaClient", "RGT_LAMBDA_API_URL"),
    "paperspace": ("rgt.vendors.paperspace", "PaperspaceClient", "RGT_PAPERSPACE_API_URL"),
}


def is_vendor(platform: str) -> bool:
    return platform in VENDORS


def client_for(platform: str, key: str | None = None) -> VendorClient:
    if platform not in VENDORS:
        raise UsageError(
            f"{platform!r} has no vendor API rgt can drive",
            fix=f"platforms with an API: {', '.join(VENDORS)}; others register with --ssh",
        )
    module, cls, variable = VENDORS[platform]
    client: type[VendorClient] = getattr(importlib.import_module(module), cls)
    return client(key or api_key(platform), os.environ.get(variable) or None)
