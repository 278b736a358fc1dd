"""Fixtures of the browser tests: one headless Chromium and one real `rgt ui` per module."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.ui.browser.chrome import Browser, missing


@dataclass(frozen=True)
class UiServer:
    """A running `rgt ui`: ``url`` carries the token, ``base`` does not."""

    url: str
    base: str
    proc: subprocess.Popen[str]
    log: Path


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RGT_")}
    env["RGT_HOME"] = str(home)
    return env


def start_ui(home: Path, log: Path, *args: str, port: int = 0, timeout: float = 30) -> UiServer:
    """Start `rgt ui --port PORT ARGS…` on ``home``; return once it printed its URL."""
    with log.open("ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rgt.cli", "ui", "--port", str(port), *args],
            env=clean_env(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    url = proc.stdout.readline().strip() if ready else ""
    if not url.startswith("http://127.0.0.1:"):
        stop_ui(proc)
        raise AssertionError(f"rgt ui printed no URL: {url!r}\n{log.read_text()[-3000:]}")
    base = url.split("?", 1)[0].rstrip("/")
    return UiServer(url=url, base=base, proc=proc, log=log)


def stop_ui(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def wait_http(base: str, timeout: float = 20) -> None:
    """Until the server answers at all (uvicorn starts after the URL is printed)."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(base + "/static/style.css", timeout=2)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    why = missing()
    if why:
        pytest.skip(why)
    chrome = Browser()
    try:
        yield chrome
    finally:
        chrome.quit()


@pytest.fixture(scope="module")
def ui_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ui-home")
