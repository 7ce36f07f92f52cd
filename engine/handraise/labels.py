"""The hand raise's labels (`LabelSpec` in its spec): an item is one judged hand of one turn (`t3/coder`), or one
hand of a benchmark item; its label says whether that participant should speak now. A conversation's items carry
the judge's raw features, which is what a refit from labels reads (`engine.handraise.label_refit`)."""

from __future__ import annotations

from collections.abc import Mapping

from engine.handraise.decisions import HandRaiseConfig, stored_config
from engine.labels.items import TEXT_CHARS, LabelItem, from_outcomes, number, short_text
from engine.mechanism import LabelHooks
from engine.store import Run, Store


def item_key(**parts: object) -> str:
    """`t3/coder`: the turn (a benchmark item: the item) and the participant."""
    first = parts["turn"] if "turn" in parts else parts["item"]
    return f"{first}/{parts['participant']}"


def conversation_items(store: Store, run: Run) -> list[LabelItem]:
    """Every judged hand of every turn, with the judge's raw features (what a refit reads)."""
    try:
        config = stored_config(run.config.get("config", {}))
    except ValueError:
        config = HandRaiseConfig()
    texts: dict[str, str] = {}
    out: list[LabelItem] = []
    for event in store.events(run.id):
        p = event.payload
        if event.type == "user_message":
            texts[str(p.get("turn"))] = str(p.get("text") or "")
        elif event.type == "hands":
            turn = str(p.get("turn"))
            for h in p.get("hands") or []:
                if not isinstance(h, Mapping) or h.get("status") == "not_judged":
                    continue
                will = number(h.get("will"))
                flags = [str(f) for f in h.get("flags") or []]
                version = next((f.split(":", 1)[1] for f in flags if f.startswith("calibration:")), None)
                ensemble = next((f.split(":", 1)[1] for f in flags if f.startswith(("ensemble:", "self_map:"))), None)
                predicted = None if will is None else ("speak" if will >= config.threshold else "skip")
                text = texts.get(turn, "")
                method = p.get("method") or config.judge_method
                map_id = ensemble or (config.judge_model if version else None)
                out.append(
                    LabelItem(
                        key=item_key(turn=turn, participant=h.get("model")),
                        mechanism="handraise",
                        run_id=run.id,
                        text=short_text(f"{h.get('model')} — {text}"),
                        predicted=predicted,
                        probability=will,
                        cut=config.threshold,
                        context={
                            "features": dict(h.get("features") or {}),
                            "relevance": h.get("relevance"),
                            "novelty": h.get("novelty"),
                            "confidence": h.get("confidence"),
                            "raw_will": h.get("raw_will"),
                            "will": will,
                            "threshold": config.threshold,
                            "predicted": predicted,
                            # the same judge/map name as a label from use (`agreement.judge_of`)
                            "judge": f"{method}:{map_id or config.judge_model}@{version or 'uncalibrated'}",
                            "judge_method": method,
                            "judge_model": config.judge_model,
                            "map_id": map_id,
                            "map_version": version,
                            "participant": h.get("model"),
                            "text": text[:TEXT_CHARS],
                        },
                    )
                )
    return out


def _eval_will(text: str) -> float | None:
    """The will `_handraise_eval` writes into its text ("will 0.71 — …")."""
    if text.startswith("will "):
        try:
            return float(text.split()[1])
        except (IndexError, ValueError):
            return None
    return None


def _eval_key(key: str) -> str:
    item, _, participant = key.rpartition("/")
    return item_key(item=item, participant=participant)


# A benchmark run's items: engine/outcomes.py's, "speaks" / "stays quiet" as the label values.
eval_items = from_outcomes("handraise", {"speaks": "speak", "stays quiet": "skip"}, _eval_key, _eval_will)


HOOKS = LabelHooks(item_key, {"handraise.conversation": conversation_items, "handraise.eval": eval_items})
