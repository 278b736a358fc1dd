"""The tools that call the library (``rgt.verbs``, ``rgt.verify``, ``rgt.deliver``,
``rgt.knowledge``) answer with the very document ``rgt … --json`` prints, fail with the same
error object, and never load the click app."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.client import SRC, McpRgt
from tests.mcp.test_tools import cli


@pytest.fixture
def server(mcp_server: tuple[McpRgt, Path]) -> tuple[McpRgt, Path]:
    return mcp_server


def _same(server: tuple[McpRgt, Path], tool: str, arguments: dict[str, Any], *argv: str) -> Any:
    client, root = server
    answer = client.call(tool, arguments)
    assert answer.data == cli(root, *argv), answer.text
    return answer


def test_no_tool_runs_the_click_app() -> None:
    import inspect

    from rgt.mcp import _invoke, server

    assert not hasattr(_invoke, "invoke")  # the in-process click path is gone
    running = {fn.__name__ for fn in server.TOOLS if "rgt.cli" in inspect.getsource(fn)}
    assert running == set()


def test_explain_is_the_cli_document(server: tuple[McpRgt, Path]) -> None:
    _same(server, "explain", {"topic": "cuda_oom"}, "explain", "cuda_oom")
    _same(server, "explain", {"list_all": True}, "explain", "--list")
    answer = server[0].call("explain", {})
    assert answer.is_error and answer.data["error"] == "UsageError"
    assert answer.data["fix"] == "rgt explain --list" and answer.data["exit_code"] == 2


def test_profiles_is_the_cli_document(server: tuple[McpRgt, Path]) -> None:
    _same(server, "profiles", {}, "profiles")
    _same(server, "profiles", {"name": "autodl"}, "profiles", "autodl")
    _same(server, "profiles", {"stale": True}, "profiles", "--stale")
    answer = server[0].call("profiles", {"name": "no-such-platform"})
    assert answer.is_error and answer.data == {**cli(server[1], "profiles", "no-such-platform"),
                                               "exit_code": 2}  # fmt: skip


def test_push_and_audit_answer_as_the_cli(server: tuple[McpRgt, Path], tmp_path: Path) -> None:
    client, root = server
    up = client.call("up", {"profile": "local", "name": "lib", "root": str(tmp_path / "d")})
    assert not up.is_error, up.text
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("a")
    pushed = client.call("push", {"name": "lib", "paths": [str(tmp_path / "data") + "/"]})
    assert not pushed.is_error and pushed.data["kind"] == "data", pushed.text
    printed = cli(root, "push", "lib", str(tmp_path / "data") + "/")
    assert set(pushed.data) == set(printed) and pushed.data["files"] == printed["files"]
    gone = client.call("push", {"name": "lib", "paths": [str(tmp_path / "nowhere")]})
    assert gone.is_error and gone.data["error"] == "UsageError" and gone.data["exit_code"] == 2
    audited = client.call("audit", {"name": "lib"})
    assert set(audited.data) - {"exit_code"} == set(cli(root, "audit", "lib")), audited.text


def test_verify_tools_are_the_cli_documents(server: tuple[McpRgt, Path], tmp_path: Path) -> None:
    train, test = tmp_path / "train.txt", tmp_path / "test.txt"
    train.write_text("a" * 64 + "\n" + "b" * 64 + "\n")
    test.write_text("b" * 64 + "\n" + "c" * 64 + "\n")  # one shared sample: a finding
    arguments = {"train": str(train), "test": str(test)}
    answer = _same(server, "verify_leakage", arguments, "verify", "leakage", "--train",
                   str(train), "--test", str(test))  # fmt: skip
    assert answer.data["findings"], answer.text
    _same(server, "verify_selection", {"runs": [str(tmp_path)]}, "verify", "selection",
          str(tmp_path))  # fmt: skip
    done = tmp_path / "out"
    done.mkdir()
    (done / "metrics.json").write_text('{"loss": 0.5}')
    _same(server, "verify_artifacts", {"directory": str(done)}, "verify", "artifacts", str(done))


def test_a_failed_verification_is_an_error_with_the_document(
    server: tuple[McpRgt, Path], tmp_path: Path
) -> None:
    (tmp_path / "broken.json").write_text("{not json")
    client, root = server
    answer = client.call("verify_artifacts", {"directory": str(tmp_path)})
    assert answer.is_error and answer.data["exit_code"] == 1
    printed = cli(root, "verify", "artifacts", str(tmp_path))
    assert {k: v for k, v in answer.data.items() if k != "exit_code"} == printed
    missing = client.call("verify_artifacts", {"directory": str(tmp_path / "nowhere")})
    assert missing.is_error and missing.data["error"] == "UsageError"
    assert missing.data["exit_code"] == 2 and missing.data["fix"]


def test_deliver_gate_and_reconcile_are_the_cli_documents(
    server: tuple[McpRgt, Path], tmp_path: Path
) -> None:
    client, _root = server
    ws = tmp_path / "ws"
    assert not client.call("deliver_init", {"directory": str(ws)}).is_error
    (ws / "paper.md").write_text("no numbers here\n")
    _same(server, "deliver_reconcile", {"path": str(ws), "workspace": str(ws)},
          "deliver", "reconcile", str(ws), "--workspace", str(ws))  # fmt: skip
    _same(server, "deliver_gate", {"workspace": str(ws)}, "deliver", "gate", "--workspace",
          str(ws))  # fmt: skip


LOADED = """
import json, sys
from rgt.mcp import server
from rgt.mcp.protocol import run_tool
tools = {fn.__name__: fn for fn in server.TOOLS}
calls = {"status": {}, "watch": {}, "explain": {"topic": "nan_loss"}, "cancel": {"job_id": "x"},
         "pull": {"job_id": "x"}, "logs": {"job_id": "x"}, "deliver_gate": {"workspace": "."},
         "verify_selection": {"runs": ["."]}, "ckpt_list": {"directory": "."},
         "profiles": {}, "triage": {"target": "x"}, "offers": {"platform": "x", "gpu": "A100"},
         "down": {"name": "x"}, "audit": {"name": "x"}, "push": {"name": "x", "paths": ["."]},
         "fetch": {"name": "x", "source": "https://127.0.0.1:9/f"},
         "run": {"machine": "x", "command": ["true"]}, "smoke": {"command": ["true"]}}
errors = {name: run_tool(tools[name], args)["isError"] for name, args in calls.items()}
cli = [m for m in sys.modules if m == "rgt.cli" or m.startswith("rgt.cli.")]
print(json.dumps({"cli": sorted(cli), "errors": errors}))
"""


def test_the_library_tools_never_load_the_click_app(tmp_path: Path) -> None:
    env = {**os.environ, "RGT_HOME": str(tmp_path / "home"), "PYTHONPATH": SRC}
    proc = subprocess.run(
        [sys.executable, "-c", LOADED], capture_output=True, text=True, env=env, cwd=tmp_path,
        stdin=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.splitlines()[-1])
    # The click app is rgt.cli: none of it loaded. (click itself may come in with httpx, whose
    # own command line imports it: the vendor clients that `down` and `offers` use.)
    assert seen["cli"] == [], seen
    # Each ran to its answer (an unknown job, no workspace: an error, never a crash).
    assert seen["errors"]["status"] is False and seen["errors"]["explain"] is False
    assert seen["errors"]["cancel"] is True and seen["errors"]["pull"] is True
    assert seen["errors"]["profiles"] is False and seen["errors"]["down"] is True


def test_fetch_refuses_an_unknown_machine_as_the_cli(server: tuple[McpRgt, Path]) -> None:
    client, root = server
    answer = client.call("fetch", {"name": "ghost", "source": "https://127.0.0.1:9/w.bin"})
    printed = cli(root, "fetch", "ghost", "https://127.0.0.1:9/w.bin")
    assert answer.is_error and answer.data["error"] == printed["error"] == "UnknownMachineError"
    assert answer.data == printed


def test_triage_is_the_cli_document(server: tuple[McpRgt, Path], tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("step 3\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n")
    answer = _same(server, "triage", {"target": str(log)}, "triage", str(log))
    assert answer.data["label"] == "cuda_oom", answer.text
    _same(server, "triage", {"target": str(log), "exit_code": 1}, "triage", str(log),
          "--exit-code", "1")  # fmt: skip
    ghost = server[0].call("triage", {"target": "no-such-job"})
    assert ghost.is_error and ghost.data == cli(server[1], "triage", "no-such-job")


def test_offers_of_an_unknown_platform_is_the_cli_error(server: tuple[McpRgt, Path]) -> None:
    answer = server[0].call("offers", {"platform": "nowhere", "gpu": "A100:1"})
    assert answer.is_error
    assert answer.data == cli(server[1], "offers", "nowhere", "--gpu", "A100:1")


def test_up_is_the_cli_document_and_refuses_as_the_cli(
    server: tuple[McpRgt, Path], tmp_path: Path
) -> None:
    client, root = server
    durable = str(tmp_path / "same")
    answer = client.call("up", {"profile": "local", "name": "same", "root": durable})
    assert not answer.is_error, answer.text
    assert answer.data == cli(root, "up", "local", "--name", "same", "--root", durable)
    refused = client.call("up", {"profile": "kubernetes", "name": "k", "ssh": "ssh root@h"})
    assert refused.is_error and refused.data["error"] == "UsageError", refused.text
    assert "takes no --ssh" in refused.data["message"] and refused.data["exit_code"] == 2
