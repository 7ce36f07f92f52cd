"""The demo recording's flows (`judgelab demo record`, `dashboard.demo_record`): one module per mechanism, each
recording its page's demo run through the entry points the page calls, with the page's default settings, and
returning the page's `PageDemo`. A mechanism names its flow in its `MechanismUI.demo`.

This module holds what every flow shares: the model the demo is recorded with, fresh models per attempt and the
recorder's log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from engine.store import Store
from models.base import ChatModel
from models.registry import ModelHub

MODEL = "gemma3-270m"


def recording_hub(store: Store) -> Callable[[str], Any]:
    """Fresh models for each attempt; content-free baselines (scored once per process) are scored again, so every
    kept run holds all the calls a fresh process replays."""

    ChatModel._BASELINES.clear()
    return ModelHub(call_log=store).get


def log(message: str) -> None:

    typer.echo(message, err=True)
