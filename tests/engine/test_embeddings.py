"""The packaged MiniLM embedder: unit vectors, and its per-text cache returns what a fresh encoding gives."""

from __future__ import annotations

import numpy as np
import pytest

from engine.embeddings import get_embedder


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
