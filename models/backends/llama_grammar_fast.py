"""Greedy decoding under a JSON-schema grammar that checks the grammar only where it matters.

llama-cpp-python applies the grammar to every token of the vocabulary at every step; Gemma's vocabulary
has 262 144 tokens, so the grammar costs more than the model (measured: 77 ms/token with it, 30 ms
without). At temperature 0 the answer is the highest-logit token the grammar accepts, so this loop
takes the arg-max, asks the grammar about that one token, and only when it is refused checks the next
candidates in logit order, a block at a time. The result is exactly the full-vocabulary greedy
choice, for a fraction of the work (the same idea as llama.cpp's own common sampler).
"""

from __future__ import annotations

import ctypes
import json
import math
from typing import Any

import numpy as np

from models.recording import checkpoint

BLOCK = 512


class _Grammar:
    def __init__(self, llama: Any, schema: dict[str, Any]) -> None:
        import llama_cpp  # heavy: llama_cpp
        from llama_cpp.llama_grammar import LlamaGrammar  # heavy: llama_cpp

        self.lc = llama_cpp
        grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        self.sampler = llama_cpp.llama_sampler_init_grammar(
            llama._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not self.sampler:
            raise ValueError("llama.cpp could not compile the grammar for this schema")

    def allowed(self, token_ids: np.ndarray) -> np.ndarray:
        """Mask of the given tokens the grammar accepts next."""
        size = len(token_ids)
        data = (self.lc.llama_token_data * size)()
        for i, tid in enumerate(token_ids):
            data[i].id = int(tid)  # type: ignore[assignment]  # ctypes takes an int for its c_int32 field
            data[i].logit = 0.0
            data[i].p = 0.0
        array = self.lc.llama_token_data_array(data=data, size=size, selected=-1, sorted=False)
        self.lc.llama_sampler_apply(self.sampler, ctypes.byref(array))
        return np.array([math.isfinite(data[i].logit) for i in range(size)], dtype=bool)

    def accept(self, token: int) -> None:
        self.lc.llama_sampler_accept(self.sampler, token)

    def close(self) -> None:
        if self.sampler:
            self.lc.llama_sampler_free(self.sampler)
            self.sampler = None


def _best_allowed(grammar: _Grammar, logits: np.ndarray) -> int:
    top = int(np.argmax(logits))
    if grammar.allowed(np.array([top]))[0]:
        return top
    # The best allowed token is nearly always among the top few hundred: partition, sort just those.
    head = np.argpartition(-logits, BLOCK)[:BLOCK]
    head = head[np.argsort(-logits[head], kind="stable")]
    mask = grammar.allowed(head)
    if mask.any():
        return int(head[int(np.argmax(mask))])
    order = np.argsort(-logits, kind="stable")
    for start in range(BLOCK, len(order), BLOCK * 8):
        block = order[start : start + BLOCK * 8]
        mask = grammar.allowed(block)
        if mask.any():
            return int(block[int(np.argmax(mask))])
    raise ValueError("the grammar accepts no token: the output cannot be completed")


def format_prompt(chat_format: str | None, messages: list[dict[str, str]]) -> tuple[str, bool] | None:
    """The prompt text llama-cpp-python's chat handler would build, and whether it holds its BOS;
    None when the format has no plain formatter (the caller then uses the library's own path)."""
    from llama_cpp import llama_chat_format  # heavy: llama_cpp

    formatter = getattr(llama_chat_format, f"format_{(chat_format or 'llama2').replace('-', '_')}", None)
    if formatter is None:
        return None
    result = formatter(messages=messages)
    return result.prompt, bool(getattr(result, "added_special", False))


def hard_reset(llama: Any) -> None:
    """Forget the evaluated tokens AND clear the KV memory (`Llama.reset()` only rewinds the token count and
    leaves the cells of earlier sequences in place), so a generation starts from the same empty state
    whatever ran before it."""
    llama.reset()
    ctx = getattr(llama, "_ctx", None)
    if ctx is not None and hasattr(ctx, "kv_cache_clear"):
        ctx.kv_cache_clear()


def greedy_json(
    llama: Any, prompt: str, schema: dict[str, Any], max_tokens: int, *, has_bos: bool = False
) -> dict[str, Any]:
    """Generate one grammar-constrained answer greedily; returns text, token counts, finish reason."""
    import llama_cpp  # heavy: llama_cpp

    tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=not has_bos, special=True)
    vocab = llama._model.vocab
    n_vocab = llama.n_vocab()
    grammar = _Grammar(llama, schema)
    out: list[int] = []
    finish = "length"
    try:
        hard_reset(llama)
        llama.eval(tokens)
        for _ in range(max_tokens):
            checkpoint()  # a cancelled run stops at its next token
            logits = np.ctypeslib.as_array(llama._ctx.get_logits_ith(-1), shape=(n_vocab,))
            token = _best_allowed(grammar, logits)
            grammar.accept(token)
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                finish = "stop"
                break
            out.append(token)
            llama.eval([token])
    finally:
        grammar.close()
    text = llama.detokenize(out).decode("utf-8", errors="replace")
    return {"text": text, "prompt_tokens": len(tokens), "completion_tokens": len(out), "finish_reason": finish}
