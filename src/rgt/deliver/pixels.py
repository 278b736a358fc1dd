"""Reopen a saved figure and look at its pixels: a figure is checked as the file a reader gets.

Checks: the file decodes; its size is the one declared; it is not blank (one colour, or almost
every pixel the background colour); and, when the figure declares how many series it plots,
that many distinct line colours are present. Colours are told apart by hue (5° bins, adjacent
bins merged), which survives anti-aliasing against white or black and separates the ten
matplotlib default colours except gray; a figure with more than about eight series, or one that
encodes series in gray levels or line styles only, should not declare a series count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIN_INK = 0.002  # fraction of pixels that differ from the background in any real plot
_SATURATED = 60  # max-min channel spread (0..255) for a pixel to carry a hue
_PEAK_SHARE = 0.02  # a hue bin counts when it holds this share of the saturated pixels


@dataclass
class PixelReport:
    path: str
    width: int = 0
    height: int = 0
    ink: float = 0.0  # fraction of non-background pixels
    series_seen: int | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "width": self.width,
            "height": self.height,
            "ink": round(self.ink, 6),
            "series_seen": self.series_seen,
            "problems": list(self.problems),
            "ok": self.ok,
        }


def check_image(
    path: Path, *, size: tuple[int, int] | None = None, series: int | None = None
) -> PixelReport:
    from PIL import Image

    report = PixelReport(str(path))
    try:
        with Image.open(path) as probe:
            probe.verify()  # structure and checksums; the image must then be reopened
        with Image.open(path) as image:
            rgb = image.convert("RGB")
    except (OSError, SyntaxError, ValueError) as exc:
        report.problems.append(f"unreadable image: {exc}")
        return report
    report.width, report.height = rgb.size
    if size is not None and tuple(rgb.size) != tuple(size):
        report.problems.append(f"size {rgb.size[0]}x{rgb.size[1]}, expected {size[0]}x{size[1]}")
    _check_ink(rgb, report)
    if series is not None and report.ok:
        report.series_seen = count_series(rgb)
        if report.series_seen != series:
            report.problems.append(
                f"{report.series_seen} coloured series visible, the data has {series}"
            )
    return report


def _check_ink(rgb: Any, report: PixelReport) -> None:
    colours = rgb.getcolors(maxcolors=1 << 24)
    total = rgb.size[0] * rgb.size[1]
    if total == 0 or not colours:
        report.problems.append("empty image")
        return
    background = max(colours)[0]
    report.ink = 1.0 - background / total
    if len(colours) == 1:
        report.problems.append("blank: a single colour")
    elif report.ink < MIN_INK:
        report.problems.append(f"blank: only {report.ink:.3%} of pixels differ from the background")


def count_series(rgb: Any) -> int:
    """Distinct hue peaks among saturated pixels."""
    import numpy as np

    pixels = np.asarray(rgb, dtype=np.int32).reshape(-1, 3)
    high, low = pixels.max(axis=1), pixels.min(axis=1)
    keep = (high - low) >= _SATURATED
    if not keep.any():
        return 0
    r, g, b = (pixels[keep, i].astype(float) for i in range(3))
    spread = (high - low)[keep].astype(float)
    hue = np.where(
        high[keep] == pixels[keep, 0],
        ((g - b) / spread) % 6,
        np.where(high[keep] == pixels[keep, 1], (b - r) / spread + 2, (r - g) / spread + 4),
    )
    counts = np.bincount((hue * 60 // 5).astype(int) % 72, minlength=72)
    peaks = counts >= _PEAK_SHARE * keep.sum()
    return _groups(peaks.tolist())


def _groups(flags: list[bool]) -> int:
    """Runs of adjacent True bins on a circle."""
    if all(flags):
        return 1
    return sum(1 for i, flag in enumerate(flags) if flag and not flags[i - 1])
