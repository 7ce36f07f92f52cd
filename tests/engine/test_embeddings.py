"""The packaged MiniLM embedder: unit vectors, and its per-text cache returns what a fresh encoding gives; its calls
recorded in the call log and replayed bit for bit (`RecordedEmbedder`)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np
import pytest

from engine.embeddings import (
    DIMENSION,
    RecordedEmbedder,
    cosine_matrix,
    dot,
    embedding_hash,
    embedding_request,
    encode_vector,
    get_embedder,
    recorded_embedding,
)
from engine.events import run_context
from engine.store import Store
from models.recording import CallRecord


@pytest.mark.model
def test_cached_vectors_equal_fresh_ones_and_only_new_texts_are_encoded(monkeypatch) -> None:
    embedder = get_embedder()
    texts = ["Python debugging", "My script raises a KeyError.", "Python debugging", "colour theory"]
    first = embedder.embed(texts)
    assert first.shape == (4, embedder.dimension)
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(first[0], first[2])  # a repeated text: one row each, the same vector
    fresh = embedder._model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    assert np.allclose(first, fresh, atol=1e-5)

    encoded: list[list[str]] = []
    encode = embedder._model.encode

    def counting(batch, **kwargs):
        encoded.append(list(batch))
        return encode(batch, **kwargs)

    monkeypatch.setattr(embedder._model, "encode", counting)
    again = embedder.embed(["colour theory", "a new message", "Python debugging"])
    assert encoded == [["a new message"]]  # the others come from the cache
    assert np.array_equal(again[0], first[3]) and np.array_equal(again[2], first[0])
    again[0] += 1  # callers get copies: the cache is not changed through them
    assert np.array_equal(embedder.embed(["colour theory"])[0], first[3])
    # bounded: the least recently used texts leave first
    monkeypatch.setattr(embedder, "cache_size", 2)
    embedder.embed(["x one", "x two", "x three"])
    assert list(embedder._cache) == ["x two", "x three"]


@pytest.mark.model
def test_unknown_share_measures_what_the_english_embedder_cannot_read() -> None:
    embedder = get_embedder()
    assert embedder.unknown_share("My Python script crashes with a KeyError.") == 0.0
    assert embedder.unknown_share("") == 0.0
    # Many everyday kanji are not in MiniLM's vocabulary: "転職" (changing jobs) reaches it as two unknowns.
    assert embedder.unknown_share("転職") == 1.0
    assert 0.2 <= embedder.unknown_share("30代半ばで未経験の業界に転職するのって、やっぱり厳しいですか？") < 1.0


# -- embeddings as model calls: recorded once per run, replayed bit for bit ---------------------------------------


class HashEmbedder:
    """Stands in for MiniLM where the model is not the point: a fixed float32 unit vector per text, and how many
    texts it was asked to encode."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.encoded += texts
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
            row = np.random.default_rng(seed).standard_normal(DIMENSION).astype(np.float32)
            rows.append(row / np.linalg.norm(row))
        return np.stack(rows).astype(np.float32)

    def unknown_share(self, text: str) -> float:
        return len(text) % 7 / 7


def refuse() -> HashEmbedder:
    raise AssertionError("the embedder ran live in a replay")


def test_embeddings_are_calls_of_the_run_once_per_text_with_no_tokens_and_no_cost(store: Store) -> None:
    live = HashEmbedder()
    embedder = RecordedEmbedder(store, live=lambda: live)
    with run_context(store, "confidence.evaluate") as run:
        first = embedder.embed(["a source", "another source", "a source"])
        embedder.embed(["another source"])  # again in the same run: from memory, no second call
        share = embedder.unknown_share("a source")
    assert live.encoded == ["a source", "another source"]
    assert np.array_equal(first[0], first[2]) and first.dtype == np.float32
    calls = store.calls(run.run_id, limit=None)
    assert [(c.model_id, c.backend, c.purpose) for c in calls] == [
        ("minilm", "sentence-transformers", "confidence.evaluate")
    ] * 2
    assert [c.to_record().request for c in calls] == [
        embedding_request("a source"),
        embedding_request("another source"),
    ]
    assert calls[0].request_hash == embedding_hash("a source") and share == HashEmbedder().unknown_share("a source")
    totals = store.run_totals([run.run_id])[run.run_id]
    assert (totals["calls"], totals["prompt_tokens"], totals["completion_tokens"], totals["cost"]) == (2, 0, 0, 0.0)
    with run_context(store, "confidence.evaluate") as second:
        embedder.embed(["a source"])  # another run: its own call (its export carries the vector), no new encoding
    assert live.encoded == ["a source", "another source"]
    assert len(store.calls(second.run_id, limit=None)) == 1


def test_a_replay_reads_the_recorded_vectors_bit_for_bit_and_never_runs_the_embedder(store: Store) -> None:
    texts = ["My Python API returns a KeyError.", "Which statistics should we report?", "転職"]
    with run_context(store, "handraise.conversation") as recorded:
        recording = RecordedEmbedder(store, live=HashEmbedder)
        want = recording.embed(texts)
        shares = [recording.unknown_share(t) for t in texts]
    replaying = RecordedEmbedder(store, replay_from=store, live=refuse)
    with run_context(store, "handraise.conversation") as again:
        got = replaying.embed(list(reversed(texts)))[::-1]
        assert [replaying.unknown_share(t) for t in texts] == shares
    assert got.tobytes() == want.tobytes()  # the same bits: the figures derived from them are the same on any CPU
    calls = store.calls(again.run_id, limit=None)
    assert len(calls) == 3 and {(c.backend, c.cost, c.would_cost) for c in calls} == {("replay", 0.0, 0.0)}
    # a replay of the replay reads the same vectors (each record carries its own)
    with run_context(store, "handraise.conversation"):
        third = RecordedEmbedder(store, replay_from=store, live=refuse).embed(texts)
    assert third.tobytes() == want.tobytes()
    assert len(store.calls(recorded.run_id, limit=None)) == 3


def test_a_text_the_recording_lacks_is_embedded_live_and_recorded_for_the_next_replay(store: Store) -> None:
    live = HashEmbedder()
    embedder = RecordedEmbedder(store, replay_from=store, live=lambda: live)
    with run_context(store, "confidence.evaluate") as run:
        vector = embedder.embed(["never recorded"])
    assert live.encoded == ["never recorded"]
    (call,) = store.calls(run.run_id, limit=None)
    assert call.backend == "sentence-transformers" and call.would_cost is None
    again = RecordedEmbedder(store, replay_from=store, live=refuse).embed(["never recorded"])
    assert again.tobytes() == vector.tobytes()


def test_a_damaged_recorded_vector_is_not_used() -> None:
    ok = CallRecord(
        model_id="minilm",
        backend="sentence-transformers",
        request_hash=embedding_hash("x"),
        request=embedding_request("x"),
        parsed={"vector": encode_vector(np.ones(4, dtype=np.float32)), "unknown_share": 0.5},
    )
    found = recorded_embedding(ok)
    assert found is not None and found.vector.tolist() == [1.0] * 4 and found.unknown_share == 0.5
    for parsed in ({"vector": "not base64!"}, {"vector": ""}, {}, {"vector": encode_vector(np.array([np.nan]))}):
        assert recorded_embedding(ok.model_copy(update={"parsed": parsed})) is None
    assert recorded_embedding(ok.model_copy(update={"error": "boom"})) is None
    assert recorded_embedding(ok.model_copy(update={"model_id": "gemma3-270m"})) is None


def test_cosines_are_float64_and_do_not_depend_on_the_summation_kernel() -> None:
    """The cosines are taken in float64 with numpy's fixed-order sums, not BLAS: float32 products are exact in
    float64, so each cosine is within a few float64 ulps of the exactly rounded sum (math.fsum), on any CPU."""
    rows = np.stack([HashEmbedder().embed([t])[0] for t in ("one", "two", "three")])
    sims = cosine_matrix(rows)
    assert sims.dtype == np.float64
    for i in range(3):
        for j in range(3):
            exact = math.fsum(float(a) * float(b) for a, b in zip(rows[i], rows[j], strict=True))
            assert sims[i, j] == pytest.approx(min(1.0, exact), rel=1e-14, abs=1e-15)
            assert dot(rows[i], rows[j]) == sims[i, j] or i == j


@pytest.mark.model
def test_minilm_vectors_recorded_live_replay_exactly(store: Store) -> None:
    texts = ["Python debugging", "転職", "colour theory"]
    with run_context(store, "confidence.evaluate"):
        want = RecordedEmbedder(store).embed(texts)
    assert np.allclose(want, get_embedder().embed(texts), atol=0)  # what MiniLM gave, unchanged by the record
    got = RecordedEmbedder(None, replay_from=store, live=refuse).embed(texts)
    assert got.tobytes() == want.tobytes()
