"""TensorBoard event files, read with TensorBoard's own ``EventAccumulator``.

A run is a folder holding ``events.out.tfevents.*`` files. TensorBoard records no run status;
the hparams plugin's session end (written by ``SummaryWriter.add_hparams``) is the nearest
thing, and its hyperparameters are the run's config. ``add_hparams`` writes into a timestamped
child folder by default, so a child holding only hparams is folded into its parent run. The
hparams metric values are the run's summary; each is compared with the history of the scalar
tag that has the same last name component (``hparam/acc`` ↔ ``val/acc``) when there is one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rgt.verify.tracker.record import Point, TrackedRun

# The hparams plugin's session Status enum. torch's ``add_hparams`` always writes SUCCESS, even
# mid-training, so "finished" here means only that the script said so.
_STATUS = {1: ("finished", "SUCCESS"), 2: ("failed", "FAILURE"), 3: ("running", "RUNNING")}


def is_run_dir(path: Path, files: list[str]) -> bool:
    return any("tfevents" in name for name in files)


def read_many(dirs: list[Path]) -> list[TrackedRun]:
    loaded = {d: _load(d) for d in sorted(dirs)}
    merged: dict[Path, dict[str, Any]] = {}
    for folder, run in loaded.items():
        parent = loaded.get(folder.parent)
        if parent is not None and not run["scalars"] and not parent["config"]:
            parent["config"], parent["hparam_metrics"] = run["config"], run["hparam_metrics"]
            parent["status"] = run["status"]
            continue
        merged[folder] = run
    return [_record(folder, run) for folder, run in merged.items()]


def _load(folder: Path) -> dict[str, Any]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    config, status, metrics = _hparams(acc)
    scalars = {
        tag: tuple(Point(e.step, float(e.value), e.wall_time) for e in acc.Scalars(tag))
        for tag in acc.Tags()["scalars"]
    }
    hparam_metrics = {tag: scalars.pop(tag)[-1].value for tag in metrics if tag in scalars}
    try:
        start: float | None = acc.FirstEventTimestamp()
    except ValueError:  # a file with no events yet: the writer died before its first flush
        start = None
    return {
        "config": config,
        "status": status,
        "scalars": scalars,
        "hparam_metrics": hparam_metrics,
        "start": start,
    }


def _hparams(acc: Any) -> tuple[dict[str, Any], int | None, list[str]]:
    from tensorboard.plugins.hparams import plugin_data_pb2

    try:
        content = acc.PluginTagToContent("hparams")
    except KeyError:  # the run never called add_hparams
        content = {}
    config: dict[str, Any] = {}
    status: int | None = None
    metrics: list[str] = []
    for blob in content.values():
        data = plugin_data_pb2.HParamsPluginData.FromString(blob)
        kind = data.WhichOneof("data")
        if kind == "session_start_info":
            for key, value in data.session_start_info.hparams.items():
                config[key] = _hparam_value(value)
        elif kind == "session_end_info":
            status = int(data.session_end_info.status)
        elif kind == "experiment":
            metrics += [m.name.tag for m in data.experiment.metric_infos]
    return config, status, metrics


def _hparam_value(value: Any) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        number = float(value.number_value)
        return int(number) if number.is_integer() else number
    return getattr(value, kind) if kind else None


def _summary(hparam_metrics: dict[str, float], scalars: dict[str, Any]) -> dict[str, float]:
    summary: dict[str, float] = {}
    for tag, value in hparam_metrics.items():
        base = tag.rsplit("/", 1)[-1]
        same = [t for t in scalars if t.rsplit("/", 1)[-1] == base]
        summary[same[0] if len(same) == 1 else tag] = value
    return summary


def _record(folder: Path, run: dict[str, Any]) -> TrackedRun:
    status, word = _STATUS.get(run["status"], ("unknown", ""))
    return TrackedRun(
        source="tensorboard",
        run_id=folder.name,
        name=folder.name,
        status=status,
        raw_status=word and f"hparams session {word}",
        path=str(folder),
        config=run["config"],
        summary=_summary(run["hparam_metrics"], run["scalars"]),
        history=run["scalars"],
        start_time=run["start"],
    )
