"""How a mechanism gets its models: `ModelSource`, a lookup from a catalog id to a ChatModel.

A mechanism that uses several models (a jury, the hand-raise judges) takes a `ModelLookup`: a ModelHub's
`get`, any function of the id, or a mapping of id → model (what tests hand in). `model_source` turns any
of them into the one callable the mechanism keeps; an unknown id raises KeyError either way.

Cheap to import (the engine imports it at module level): ChatModel is named for the type checker only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from models.base import ChatModel

ModelSource: TypeAlias = "Callable[[str], ChatModel]"
ModelLookup: TypeAlias = "ModelSource | Mapping[str, ChatModel]"


def model_source(models: ModelLookup) -> ModelSource:
    """The lookup as one callable: a mapping's item access, or the function itself."""
    if isinstance(models, Mapping):
        return models.__getitem__
    return models
