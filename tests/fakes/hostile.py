"""Hostile text for the rendering tests: HTML and markdown that would fetch from a loopback listener, link
or shout if a page rendered it, and stored runs of every kind whose every text field holds it (made with
the engine's own code, so the events and calls are the real shapes)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from tests.fakes.scripted import FnModel
from tests.fakes.servers import fill_schema

MARKERS = ("<img", "<a href", "<script", "<svg", "<iframe", "](http", "### Heading", "**bold-", ":red[red-", "<b>")


def live_markers(markdown: str) -> list[str]:
    """The hostile constructs still active in a markdown source: those whose first character is not
    backslash-escaped."""
    return [m for m in MARKERS if re.search(r"(?<!\\)" + re.escape(m), markdown)]


def hostile(port: int, tag: str, *, one_line: bool = False) -> str:
    leak = f"http://127.0.0.1:{port}"
    text = (
        f"<img src={leak}/img/{tag}> <a href={leak}/a/{tag}>Click to approve</a> "
        f"<script>fetch('{leak}/script/{tag}')</script> <svg onload=\"fetch('{leak}/svg/{tag}')\"></svg>\n"
        f"### Heading {tag}\n"
        f"[link]({leak}/md/{tag}) ![x]({leak}/mdimg/{tag}) <iframe src={leak}/iframe/{tag}></iframe> "
        f"**bold-{tag}** :red[red-{tag}] $x^2$ <b>bold-{tag}</b>"
    )
    return text.replace("\n", " ") if one_line else text


def _scripted(port: int, tag: str, store: Any) -> FnModel:
    def answer(request: Any) -> Any:
        if request.json_schema:
            return fill_schema(request.json_schema, lambda path: hostile(port, f"{tag}{path.replace('.', '-')}"))
        return hostile(port, f"{tag}-text")

    return FnModel(answer, model_id="scripted", call_log=store)


def store_hostile_runs(store: Any, port: int) -> dict[str, str]:
    """One run of every kind a page shows, every text field hostile. Returns kind → run id."""
    from engine.confidence.evaluation import evaluate_answer
    from engine.director.config import load_character
    from engine.director.review import Director
    from engine.director.rubric import DirectorRubric
    from engine.events import EventBus, StoreSink, async_run_context, run_context
    from engine.handraise.cast import Participant
    from engine.handraise.conversation import Conversation
    from engine.handraise.decisions import HandRaiseConfig
    from engine.jury.config import JuryCase, JuryConfig, Rubric
    from engine.jury.decisions import JurorSeat
    from engine.jury.runner import Jury, run_case
    from models.errors import ServerError
    from models.recording import CallRecord, call_context

    h = lambda tag: hostile(port, tag)  # noqa: E731
    runs: dict[str, str] = {}
    # Jury: a hostile case, roles, model ids and answers; one seat fails with a hostile error.
    models = {
        h("model-a"): _scripted(port, "juror-a", store),
        h("model-b"): _scripted(port, "juror-b", store),
        h("model-judge"): _scripted(port, "judge", store),
        h("model-err"): FnModel(lambda r: ServerError(h("error"), model_id="x"), call_log=store),
    }
    seats = [
        JurorSeat(juror_id=f"j{i}", model_id=m, role_name=h(f"role-{i}"), role_focus=h(f"focus-{i}"))
        for i, m in enumerate(models)
        if "judge" not in m
    ]
    rubric = Rubric(verdict_descriptions={"safe_pass": h("description")}, instructions=h("instructions"))
    case = JuryCase(id=h("case-id"), title=h("case-title"), content=h("case-content"), gold=h("gold"), rubric=rubric)
    jury = Jury(
        seats, models, JuryConfig(max_discussion_rounds=1, final_judge_model=h("model-judge"), consensus_threshold=2.0)
    )
    runs["jury.run"], _ = asyncio.run(run_case(store, jury, case, name=h("run-name")))
    # A conversation: hostile participants, message, judge reasons and answers.
    cast = [
        Participant(
            id=f"p{i}",
            model_id="scripted",
            name=h(f"name-{i}"),
            icon=f"http://127.0.0.1:{port}/icon",
            role=h(f"role-{i}"),
            expertise=[h(f"expertise-{i}")],
        )
        for i in range(2)
    ]
    run = store.create_run(
        "handraise.conversation", {"participants": [p.model_dump() for p in cast]}, name=h("conversation")
    )
    conv = Conversation(
        cast,
        lambda _m: _scripted(port, "conv", store),
        HandRaiseConfig(judge_model="scripted", judge_method="judge"),
        emit=EventBus(run.id, [StoreSink(store)]).emit,
    )

    async def talk() -> None:
        with call_context(run_id=run.id, purpose="handraise"):
            turn = await conv.user_message(h("user") + " @all")
            conv.batch(turn, "approve_all")
            await conv.answer(turn)

    asyncio.run(talk())
    store.finish_run(run.id, summary={"note": h("summary")})
    runs["handraise.conversation"] = run.id
    # Director: a hostile line and scene, scored by a hostile rubric model.
    profile = load_character("yana")
    director_rubric = DirectorRubric(_scripted(port, "rubric", store))

    async def review() -> str:
        async with async_run_context(store, "director.check", {"text": h("line"), "scene": h("scene")}) as r:
            result = await Director(profile, rubric=director_rubric).review(h("line"), scene=h("scene"))
            r.emit("director_verdict", **result.payload())
            scored = await director_rubric.score(h("line"), profile, scene=h("scene"), previous=h("previous"))
            r.emit("director_rubric", **scored.model_dump(mode="json"))
        return r.run_id

    runs["director.check"] = asyncio.run(review())
    # Confidence: hostile query, answer and self-evaluation.
    live = asyncio.run(evaluate_answer(store, _scripted(port, "confidence", store), h("query"), h("answer")))
    runs["confidence.evaluate"] = live.run_id
    # Runs the pages list from their config and summary: a skip simulation, a hand-raise benchmark, a failure.
    with run_context(store, "skip.simulate", {"workload": {"uploaded": h("workload")}, "judge": h("judge")}) as r:
        r.emit("note", text=h("event"))
        r.summary = {"calls_saved_pct": 50.0, "note": h("summary")}
        runs["skip.simulate"] = r.run_id
    with run_context(store, "handraise.eval", {"method": h("method"), "context": h("context"), "items": 1}) as r:
        r.summary = {"accuracy": 0.5, "precision": 0.5, "recall": 0.5, "f1": 0.5, "consistency": 1.0}
        runs["handraise.eval"] = r.run_id
    try:
        with run_context(store, "director.duo", {"topic": h("topic")}, name=h("failed-name")) as r:
            store.record_call(
                CallRecord(
                    run_id=r.run_id,
                    purpose=h("purpose"),
                    model_id=h("call-model"),
                    backend="scripted",
                    request_hash="hostile",
                    request={"messages": [{"role": h("role"), "content": h("content")}]},
                    raw_text=h("raw"),
                    parsed={h("key"): h("value")},
                    error=h("call-error"),
                    error_type=h("error-type"),
                    flags=[h("flag")],
                )
            )
            runs["director.duo"] = r.run_id
            raise RuntimeError(h("run-error"))
    except RuntimeError:
        pass
    return runs
