"""Headless Chromium for the `rgt ui` browser tests: Debian's `chromium` + `chromium-driver`,
driven by Selenium with the driver path given (Selenium Manager never downloads anything).

One browser per test module (the fixture in conftest.py); a fresh profile directory per session;
screenshots go to $RGT_UI_SCREENSHOTS (dev.sh and CI: .ci-artifacts/ui/) or the test's tmp dir.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
AXE = Path(__file__).parent / "vendor" / "axe.min.js"
# Read at import: the autouse rgt_home fixture clears RGT_* from the environment of each test.
SHOTS_ENV = os.environ.get("RGT_UI_SCREENSHOTS", "")
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
)
# The accessibility rules a page must pass (axe-core ids); others are reported, not fatal.
AXE_RULES = ("label", "color-contrast", "image-alt", "document-title", "html-has-lang")


def missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        return "needs Debian's chromium + chromium-driver (bash dev.sh test installs them as root)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "needs the selenium package (pip install -e '.[test]')"
    return None


class Browser:
    """A Selenium Chrome session on its own throw-away profile."""

    def __init__(self) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self.profile = tempfile.mkdtemp(prefix="rgt-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in (*FLAGS, f"--user-data-dir={self.profile}"):
            options.add_argument(flag)
        self.driver = webdriver.Chrome(
            options=options, service=Service(executable_path=str(CHROMEDRIVER))
        )
        self.driver.set_page_load_timeout(120)  # generous: CI machines may be loaded

    def quit(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)

    def get(self, url: str) -> None:
        self.driver.get(url)

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def wait(self, what: Callable[[], Any], timeout: float = 30, message: str = "") -> Any:
        """Poll ``what`` until it returns something truthy; fail with ``message`` after timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = what()
            except Exception as exc:  # a stale element mid-swap: try again
                value, last = None, exc
            else:
                last = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s: {message} ({last!r})")
            time.sleep(0.1)

    def attr(self, selector: str, name: str) -> str | None:
        value = self.js(
            "const e = document.querySelector(arguments[0]);"
            "return e ? e.getAttribute(arguments[1]) : null;",
            selector,
            name,
        )
        return None if value is None else str(value)

    def text(self, selector: str) -> str | None:
        value = self.js(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
            selector,
        )
        return None if value is None else str(value)

    def count(self, selector: str) -> int:
        return int(self.js("return document.querySelectorAll(arguments[0]).length;", selector))

    def screenshot(self, directory: Path, name: str) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def axe_violations(self) -> list[dict[str, Any]]:
        """Run axe-core on the page; the violations of AXE_RULES (id, help, nodes' targets)."""
        if not self.js("return typeof window.axe === 'object';"):
            self.js(AXE.read_text(encoding="utf-8"))
        raw = self.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "axe.run(document, {runOnly: {type: 'rule', values: arguments[0]}})"
            ".then(r => done(JSON.stringify(r.violations)), e => done(JSON.stringify("
            "[{id: 'axe-error', help: String(e), nodes: []}])));",
            list(AXE_RULES),
        )
        found: list[dict[str, Any]] = json.loads(raw)
        return [
            {"id": v["id"], "help": v["help"], "nodes": [n.get("target") for n in v["nodes"]]}
            for v in found
        ]


def shots_dir(fallback: Path) -> Path:
    return Path(SHOTS_ENV) if SHOTS_ENV else fallback
