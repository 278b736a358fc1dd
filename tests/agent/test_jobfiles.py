"""The tolerant reader: every damaged file is a named problem, never another state; and the one
rule for a lost agent."""

from __future__ import annotations

import json

import pytest

from rgt.agent import jobfiles

GOOD = {"job_id": "j", "state": "running", "attempt": 2, "heartbeat": "2026-12-01T10:00:00.000Z"}
NOW = "2026-12-01T10:00:30.000Z"


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (b"", "empty"),
        (json.dumps(GOOD).encode()[:25], "cut or garbled"),
        (b"\xff\xfe garbage", "cut or garbled"),
        (b"[1, 2]", "JSON list, not an object"),
        (b'"running"', "JSON str, not an object"),
        (json.dumps(dict(GOOD, state="exploded")).encode(), "field 'state'"),
        (json.dumps(dict(GOOD, attempt="2")).encode(), "field 'attempt'"),
        (json.dumps(dict(GOOD, heartbeat=5)).encode(), "field 'heartbeat'"),
    ],
)
def test_a_damaged_status_is_a_problem_with_path_and_fix(raw: bytes, detail: str) -> None:
    read = jobfiles.parse_status(raw, "/m/jobs/j/status.json", "j")
    assert read.doc is None and read.problem is not None
    assert read.problem.kind == "corrupt" and detail in read.problem.detail
    assert read.problem.path == "/m/jobs/j/status.json" and "rgt resume j" in read.problem.fix


def test_missing_and_good_status() -> None:
    assert jobfiles.parse_status(None, "p", "j") == jobfiles.DocRead(None, None)
    assert jobfiles.parse_status(json.dumps(GOOD).encode(), "p", "j").doc == GOOD


def test_manifest_entries_are_checked() -> None:
    bad = {"files": [{"path": "a", "bytes": "3", "sha256": "x"}]}
    read = jobfiles.parse_manifest(json.dumps(bad).encode(), "m.json", "j")
    assert read.problem is not None and "field 'files'" in read.problem.detail
    good = {"files": [{"path": "a", "bytes": 3, "sha256": "x"}]}
    assert jobfiles.parse_manifest(json.dumps(good).encode(), "m.json", "j").doc == good


def test_bad_event_lines_are_skipped_and_counted() -> None:
    text = '{"kind": "a"}\n[1]\n"s"\n\n{"kind": 3}\n{"kind": "b", "det\n{"kind": "c"}\n'
    events, skipped = jobfiles.parse_events(text)
    assert [e["kind"] for e in events] == ["a", "c"] and skipped == 4


def test_rebuild_from_events() -> None:
    events = [
        {"kind": "agent_started", "attempt": 0},
        {"kind": "attempt_started", "attempt": 1, "time": "t1"},
        {"kind": "retrying", "attempt": 1, "detail": {"retries_left": 2}},
        {"kind": "attempt_started", "attempt": 2, "time": "t2"},
    ]
    running = jobfiles.rebuild_status(events, done=False)
    assert running is not None
    assert (running["state"], running["attempt"], running["retries_left"]) == ("running", 2, 2)
    assert running["started"] == "t1" and running["rebuilt"] is True
    ended = [*events, {"kind": "failed", "time": "t3", "detail": {"label": "cuda_oom"}}]
    assert jobfiles.rebuild_status(ended, done=False)["label"] == "cuda_oom"  # type: ignore[index]
    assert jobfiles.rebuild_status(events, done=True)["state"] == "succeeded"  # type: ignore[index]
    assert jobfiles.rebuild_status([{"kind": "agent_started"}], done=False) is None


def test_proven_end_is_the_last_terminal_event_or_done() -> None:
    started = {"kind": "attempt_started", "attempt": 1, "time": "t1"}
    failed = {"kind": "failed", "time": "t2", "detail": {"label": "cuda_oom", "reason": 7}}
    end = jobfiles.proven_end([started, failed], done=False)
    assert end == {
        "attempt": 1,
        "state": "failed",
        "state_source": "events.jsonl",
        "ended": "t2",
        "label": "cuda_oom",
        "reason": None,  # a wrong type is dropped, never passed on
    }
    assert jobfiles.proven_end([started], done=False) is None
    assert jobfiles.proven_end([failed, started], done=False) is None  # started again after
    done = jobfiles.proven_end([started], done=True)
    assert done is not None and (done["state"], done["state_source"]) == ("succeeded", "DONE")
    assert jobfiles.proven_end([], done=False) is None


LIVE = dict(GOOD, agent_alive=True, boot_id="b1", boot_id_now="b1", status_file="ok")


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({}, None),
        ({"state": "succeeded", "agent_alive": False}, None),
        ({"state": "queued", "agent_alive": False}, None),
        ({"agent_alive": False}, "the agent is not running"),
        ({"boot_id_now": "b2"}, "the host restarted"),
        ({"heartbeat": "2026-12-01T09:00:00.000Z"}, "no heartbeat for 3630s"),
        ({"status_file": "corrupt", "state": None}, None),
        ({"status_file": "corrupt", "state": None, "agent_alive": False}, "unreadable"),
        ({"status_file": "missing", "state": "queued", "agent_alive": False}, None),
        ({"status_file": "missing", "state": None, "problem": {"kind": "missing"}}, None),
        (
            {"status_file": "missing", "state": None, "problem": {"k": 1}, "agent_alive": False},
            "status.json is missing",
        ),
        ({"status_file": "missing", "state": "succeeded", "problem": {"k": 1}}, None),
        (
            {"status_file": "missing", "state": "queued", "agent_alive": False, "spec_age_s": 200},
            "no agent ever wrote status.json",
        ),
    ],
)
def test_heartbeat_lost_is_one_rule(change: dict[str, object], why: str | None) -> None:
    lost = jobfiles.heartbeat_lost(dict(LIVE, **change), NOW, limit_s=120.0)
    if why is None:
        assert lost is None
    else:
        assert lost is not None and why in lost["why"] and "rgt resume j" in lost["next"]
