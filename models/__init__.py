"""The model layer: one async interface (`ChatModel`) over local and API backends.

Importing this package is cheap: provider SDKs load only when a model of that backend is built.
"""

from models.base import ChatModel
from models.catalog import BUNDLED_MODEL_ID, Catalog, CatalogError, ModelSpec, Profile, load_catalog
from models.errors import (
    BadRequest,
    MalformedResponse,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
    RateLimited,
    ReplayMiss,
    SafetyBlocked,
    ServerError,
    StructuredOutputError,
)
from models.recording import CallLog, CallRecord, MemoryCallLog, call_context
from models.registry import Availability, ModelHub, build_model, check_availability
from models.source import ModelLookup, ModelSource, model_source
from models.types import Chunk, Completion, Message, Request, Usage

__all__ = [
    "BUNDLED_MODEL_ID",
    "Availability",
    "BadRequest",
    "CallLog",
    "CallRecord",
    "Catalog",
    "CatalogError",
    "ChatModel",
    "Chunk",
    "Completion",
    "MalformedResponse",
    "MemoryCallLog",
    "Message",
    "ModelError",
    "ModelHub",
    "ModelLookup",
    "ModelSource",
    "ModelSpec",
    "ModelTimeout",
    "ModelUnavailable",
    "Profile",
    "RateLimited",
    "ReplayMiss",
    "Request",
    "SafetyBlocked",
    "ServerError",
    "StructuredOutputError",
    "Usage",
    "build_model",
    "call_context",
    "check_availability",
    "load_catalog",
    "model_source",
]
