"""`rgt up colab` / `rgt up kaggle-notebook` options (``rgt.notebooks.up``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
_KEYS = ("drive", "tier", "force_here")


def notebook_up_options(func: F) -> F:
    """The notebook options, handed over as one ``notebook`` dict."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["notebook"] = {key: kwargs.pop(key) for key in _KEYS}
        return func(*args, **kwargs)

    for option in (
        click.option(
            "--force-here",
            is_flag=True,
            help="colab/kaggle-notebook: register this host though it is not a notebook VM.",
        ),
        click.option(
            "--tier",
            type=click.Choice(["free", "pro"]),
            default="free",
            show_default=True,
            help="colab: the plan, for the session clock (free ~12 h, pro ~24 h).",
        ),
        click.option(
            "--drive",
            help="colab: durable folder on the mounted Drive (default "
            "/content/drive/MyDrive/rgt); kaggle-notebook: default /kaggle/working/rgt.",
        ),
    ):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]
