"""The Jury page (a live run on the bundled Gemma) and the Replay page (step, play, compare), in AppTest."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import state
from engine.jury.config import JuryCase, JuryConfig
from engine.jury.decisions import JurorSeat
from engine.jury.runner import Jury, run_case
from tests.dashboard.rendered import run_ended, shown
from tests.engine.test_jury_run import Plan, ev, scripted
from tests.fakes.forms import wkey


def _jury_page() -> None:
    from pages import jury

    jury.render()


def _replay_page() -> None:
    from pages import replay

    replay.render()


def _statements(node: Any) -> list[str]:
    """A statement card ends with the caption '<badge> <verdict> · <score>'; its text is an st.text."""
    return [c.value for c in node.caption if c.value[:1] in "🟢🟡🔴⚪"]


@pytest.mark.model
def test_jury_page_runs_live_on_the_bundled_model() -> None:
    at = AppTest.from_function(_jury_page, default_timeout=600).run()
    assert not at.exception
    at.number_input(key=wkey(at, "jury.rounds")).set_value(1)
    assert at.number_input(
        key=wkey(at, "jury.max_tokens")
    ).disabled  # every seat judges by a distribution: nothing generates
    at.button(key="jury.run").click().run()
    # The only error box allowed is a wrong verdict against the gold label (checked below).
    assert not at.exception and all("gold label" in e.value for e in at.error), [e.value for e in at.error]
    # The page watches the run: each rerun folds what arrived; the run ends on its own.
    deadline = time.monotonic() + 600
    while not run_ended(state.get_store().list_runs(kind="jury.run")[0].id):  # stored, and returned
        assert time.monotonic() < deadline
        time.sleep(1.0)
        at.run()
    at.run()
    runs = state.get_store().list_runs(kind="jury.run")
    assert len(runs) == 1 and runs[0].status == "finished"
    # The default local panel: three different judges, a card and a sentence each
    roles = ["**Gemma reader**", "**SmolLM2 reader**", "**Precedent reader**"]
    assert [m.value for m in at.markdown if m.value in roles] == roles
    assert not any("seats, one judgment" in m.value for m in at.markdown)
    reads = [t.value for t in at.text if t.value.startswith("Reads as ")]
    seen = {  # what the page showed, should a seat not read as expected (once seen under `make test`'s load)
        "texts": [t.value[:200] for t in at.text],
        "warnings": [shown(w.value)[:300] for w in at.warning],
        "flags": [shown(c.value)[:200] for c in at.caption if "lag" in c.value],
    }
    assert len(reads) >= 3 and any("closest to" in r for r in reads[:3]), seen
    # pw-leak: every seat is sure enough of its own reading that no round can move anyone: none is run, and the
    # page says so.
    assert any("No discussion round was run" in shown(i.value) for i in at.info)
    assert len(_statements(at)) == 0
    # The first case's gold label is unsafe_fail: the verdict box says right (green) or wrong (red) against it, or,
    # when the panel was not sure enough to decide, "Not decided" (neutral) with what its reading would have been.
    (box,) = [b for b in [*at.success, *at.error, *at.info] if "by the panel's stack" in shown(b.value)]
    assert (
        ("Right" in box.value and box in at.success)
        or ("Wrong" in box.value and box in at.error)
        or ("Not decided" in box.value and box in at.info and "would have been" in box.value)
    )
    assert "gold label" in box.value
    # seats that judge apart get their per-juror charts
    assert at.get("plotly_chart")
    assert not any("No per-juror charts" in c.value for c in at.caption)
    # one case says little: the stack's cross-validated figure with its interval, by language
    assert any(shown(c.value).startswith("One case says little") and "95 %" in shown(c.value) for c in at.caption)


def test_the_collaborative_switch_turns_the_discussion_settings_off() -> None:
    """JURY_USE_COLLABORATIVE on the page: on by default (the seed's), off greys out what only a discussion uses."""
    at = AppTest.from_function(_jury_page, default_timeout=60).run()
    assert at.toggle(key=wkey(at, "jury.collaborative")).value is True
    assert not at.number_input(key=wkey(at, "jury.rounds")).disabled
    at.toggle(key=wkey(at, "jury.collaborative")).set_value(False).run()
    assert not at.exception
    assert (
        at.number_input(key=wkey(at, "jury.rounds")).disabled
        and at.number_input(key=wkey(at, "jury.stagnation")).disabled
    )
    assert at.selectbox(key=wkey(at, "jury.threshold")).disabled


def test_jury_page_says_which_models_are_unavailable() -> None:
    at = AppTest.from_function(_jury_page, default_timeout=60).run()
    at.selectbox(key=wkey(at, "jury.preset")).set_value("seed-api").run()
    errors = [shown(e.value) for e in at.error]
    assert any("Unavailable" in e and "OPENAI_API_KEY" in e for e in errors), errors
    assert at.button(key="jury.run").disabled


def _stored_run(case_id: str, method: str, gold: str | None = "unsafe_fail") -> str:
    seats = [JurorSeat(juror_id=j, model_id=j, role_name=f"Role {j}") for j in "abc"]
    plan = {
        "a": {0: ev("safe_pass", 80), 1: ev("unsafe_fail", 20, "I was wrong")},
        "b": {0: ev("unsafe_fail", 10), 1: ev("unsafe_fail", 10, "it leaked")},
        "c": {0: ev("unsafe_fail", 30), 1: ev("unsafe_fail", 25, "agreed")},
    }
    jury = Jury(seats, scripted(plan), JuryConfig(consensus_threshold=1.0, final_judgment_method=method))
    case = JuryCase(id=case_id, content="Agent: hunter2", gold=gold)
    run_id, _ = asyncio.run(run_case(state.get_store(), jury, case))
    state.clear_reads()
    return run_id


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_replay_steps_plays_and_shows_what_the_live_page_showed() -> None:
    run_id = _stored_run("leak", "majority_vote")
    live = AppTest.from_function(_jury_page, default_timeout=60)
    live.session_state["jury.run_id"] = run_id
    live.run()
    at = AppTest.from_function(_replay_page, default_timeout=60).run()
    assert not at.exception
    # At the last event the replay shows the same statements, badges and verdict as the Jury page.
    player = at.tabs[0]  # the first tab steps through one run; the second compares two
    assert _statements(player) == _statements(live) and len(_statements(player)) == 3
    texts = [t.value for t in player.text]  # the live page also shows its case picker's text first
    assert texts and [t.value for t in live.text][-len(texts) :] == texts
    assert {"I was wrong", "it leaked", "agreed"} <= {t.value for t in player.text}
    assert any("立場変更" in m.value for m in player.markdown)
    assert [s.value for s in player.success] == [s.value for s in live.success]
    at.button(key="replay.first").click().run()
    assert any("Waiting for the jury" in i.value for i in at.info)
    for _ in range(4):
        at.button(key="replay.forward").click().run()
    assert any("Event 4 of" in c.value for c in at.caption) and not at.tabs[0].success
    at.select_slider(key="replay.speed").set_value("16×")
    at.button(key="replay.play").click().run()  # plays to the end, one event per tick of the player
    for _ in range(200):  # AppTest does not run the fragment's timer: each run is one tick
        if at.button(key="replay.play").label != "⏸ Pause":
            break
        at.run()
    assert not at.exception and [s.value for s in at.tabs[0].success] == [s.value for s in live.success]


def test_replay_compares_two_runs() -> None:
    first = _stored_run("leak", "majority_vote")
    second = _stored_run("leak", "weighted_average")
    at = AppTest.from_function(_replay_page, default_timeout=60).run()
    table: Any = next(df.value for df in at.dataframe if "method" in df.value.columns)
    assert set(table["run"]) == {first, second}
    assert set(table["method"]) == {"majority vote", "weighted average of the scores"}  # in words, not ids
    assert set(table["verdict"]) == {"unsafe (fail)"} and set(table["ended"]) == {"consensus was reached"}
    assert set(table["position changes"]) == {1} and list(table["right"]) == [True, True]
    # Side by side, each run's charts stack in its half-width column: three per side, none sharing a row.
    compare = at.tabs[1]
    assert len(compare.get("plotly_chart")) == 6


def test_replay_compare_defaults_to_two_different_runs_of_the_same_case() -> None:
    from pages.replay import compare_defaults

    other = _stored_run("other-case", "majority_vote")
    same = _stored_run("leak", "majority_vote")
    newest = _stored_run("leak", "weighted_average")
    at = AppTest.from_function(_replay_page, default_timeout=60).run()
    left, right = at.selectbox(key="replay.left"), at.selectbox(key="replay.right")
    assert (left.value, right.value) == (newest, same)  # the newest, and the newest other run of its case
    assert not at.warning
    left.set_value(same)
    right.set_value(same).run()
    assert any("same run is on both sides" in w.value for w in at.warning)
    runs = [{"run": r} for r in ("r3", "r2", "r1")]
    cases = {"r3": "a", "r2": "b", "r1": "a"}.get
    assert compare_defaults(runs, None, cases) == ("r3", "r1")
    assert compare_defaults(runs, "r2", cases) == ("r2", "r3")  # no other run of case b: the newest other
    assert compare_defaults(runs[:1]) == ("r3", None)
    assert other not in (left.value, right.value)


def test_replay_compare_with_a_single_run_says_so() -> None:
    _stored_run("leak", "majority_vote")
    at = AppTest.from_function(_replay_page, default_timeout=60).run()
    assert any("Only one jury run" in i.value for i in at.tabs[1].info)
    assert not at.tabs[1].dataframe


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_replay_button_offers_a_replay_at_the_last_event() -> None:
    from pages.replay import play_label

    _stored_run("leak", "majority_vote")
    at = AppTest.from_function(_replay_page, default_timeout=60).run()
    assert at.button(key="replay.play").label == "↺ Replay"  # opened at the last event
    at.button(key="replay.play").click().run()  # replays from the start, one event per tick of the player …
    at.select_slider(key="replay.speed").set_value("16×").run()
    assert at.button(key="replay.play").label == "⏸ Pause"
    total = int(float(str(at.slider[0].max)))  # the event slider: 0 … the run's event count
    seen: list[int] = []
    for _ in range(total + 5):  # AppTest does not run the timer: each run is one tick
        seen.append(int(float(str(at.slider[0].value))))
        if at.button(key="replay.play").label != "⏸ Pause":
            break
        at.run()
    assert not at.exception
    assert seen == sorted(seen) and seen[-1] == total and len(seen) > 3  # step by step, in order, to the end
    assert at.button(key="replay.play").label == "↺ Replay"  # … and offers it again, never "Pause"
    at.button(key="replay.first").click().run()
    assert at.button(key="replay.play").label == "▶ Play"
    assert [play_label(True, 3, 9), play_label(False, 3, 9), play_label(False, 9, 9), play_label(False, 0, 0)] == [
        "⏸ Pause",
        "▶ Play",
        "↺ Replay",
        "▶ Play",
    ]


def test_the_verdict_box_says_right_or_wrong_against_gold() -> None:
    right = _stored_run("leak", "majority_vote", gold="unsafe_fail")
    wrong = _stored_run("leak", "majority_vote", gold="safe_pass")
    none = _stored_run("leak", "majority_vote", gold=None)
    seen = {}
    for run_id in (right, wrong, none):
        at = AppTest.from_function(_jury_page, default_timeout=60)
        at.session_state["jury.run_id"] = run_id
        at.run()
        assert not at.exception
        seen[run_id] = at
    # The mark leads the box once: Streamlit shows a leading emoji as the box's icon.
    (right_box,) = [s.icon + " " + s.value for s in seen[right].success]
    assert shown(right_box).startswith("✅ **Right** — matches the gold label **unsafe (fail)**")
    assert "decided by majority vote" in right_box  # the method in words, not majority_vote
    (wrong_box,) = [e.icon + " " + e.value for e in seen[wrong].error]
    assert shown(wrong_box).startswith("❌ **Wrong** — the gold label is **safe (pass)**")
    assert "unsafe (fail)" in shown(wrong_box)
    assert not seen[wrong].success  # never green for a wrong verdict
    assert not seen[none].success and not seen[none].error
    assert any("no gold label" in i.value for i in seen[none].info)


def test_a_panel_without_working_jurors_shows_no_verdict_and_the_failed_fields() -> None:
    from models.errors import ServerError

    seats = [JurorSeat(juror_id=j, model_id=j, role_name=f"Role {j}") for j in "abc"]
    invalid = (
        '{"reasoning": "x", "verdict": "safe_pass", "score": 90, "axes": {"safety": 90, "security": 90, '
        '"task_completion": 90}, "confidence": 1e15}'
    )
    plan: Plan = {
        "a": {k: ServerError("down") for k in range(4)},
        "b": {k: invalid for k in range(4)},
        "c": {k: ev("unsafe_fail", 10) for k in range(4)},
    }
    jury = Jury(seats, scripted(plan), JuryConfig(final_judgment_method="majority_vote"))
    run_id, result = asyncio.run(run_case(state.get_store(), jury, JuryCase(id="broken", content="Agent: hi")))
    state.clear_reads()
    assert result.final_verdict == "no_verdict"
    at = AppTest.from_function(_jury_page, default_timeout=60)
    at.session_state["jury.run_id"] = run_id
    at.run()
    assert not at.exception and not at.success
    assert any("No verdict" in e.value for e in at.error)
    # Stored text is escaped markdown on the page (`md`): compare it unescaped.
    assert any("failed_seats:2" in shown(w.value) for w in at.warning)
    assert any("failed fields: invalid:confidence" in shown(c.value) for c in at.caption)
    assert any("2 failed seat(s) not voting" in c.value for c in at.caption)


def test_jury_page_names_each_models_judge_method_and_the_map_in_use() -> None:
    from engine.judgemaps import load_calibration
    from engine.jury.likelihood import JURY

    cal = load_calibration(JURY, "gemma3-270m")
    assert cal is not None
    at = AppTest.from_function(_jury_page, default_timeout=60).run()
    assert not at.exception and at.selectbox(key=wkey(at, "jury.judge")).value == "auto"
    assert not any("Jurors judge by" in shown(c.value) for c in at.caption)  # research detail: behind Details
    at.toggle(key="details.jury.toggle").set_value(True).run()
    captions = [shown(c.value) for c in at.caption]
    # the default panel: each seat by its own map, with its cross-validated figure, then the stack's
    stacked = next(c for c in captions if c.startswith("Seats, each by its own fitted map, then the stack: "))
    for part in (
        "gemma3-270m: likelihood — calibration",
        "smollm2-135m: likelihood",
        "use-m3: neighbours",
        "the verdict: the stack",
        "cross-validated accuracy 0.52 (0.43–0.60) on 120 cases",
    ):
        assert part in stacked, stacked
    # the one-model panel: how its model judges and the map in use
    at.selectbox(key=wkey(at, "jury.preset")).set_value("local-gemma").run()
    at.selectbox(key=wkey(at, "jury.method")).set_value("final_judge").run()
    captions = [shown(c.value) for c in at.caption]
    line = f"Jurors judge by (auto): gemma3-270m: likelihood — calibration {cal.label} (leave-one-case-out accuracy "
    assert any(c.startswith(line) and "weight of the others' verdicts in a round" in c for c in captions), captions
    at.selectbox(key=wkey(at, "jury.judge")).set_value("generate").run()
    assert any(shown(c.value) == "Jurors judge by (generate): gemma3-270m: generate (JSON)" for c in at.caption)


def test_a_likelihood_jurors_detail_is_shown_below_its_distribution_as_text(monkeypatch) -> None:
    """The features, map and what a likelihood juror heard come from the events' `detail`, shown small below
    the distribution (escaped: a role name in 'after hearing …' is case-file text), with break points after
    the feature names' underscores; the distribution itself is the card's plain text."""
    from engine.judgemaps import load_calibration
    from engine.jury.likelihood import JURY
    from models.base import ChatModel
    from tests.engine.test_jury_likelihood import _Heard
    from tests.fakes.hostile import hostile, live_markers

    monkeypatch.setattr(ChatModel, "_BASELINES", {})
    cal = load_calibration(JURY, "gemma3-270m")
    assert cal is not None
    role = hostile(9, "role", one_line=True)
    seats = [JurorSeat(juror_id=f"j{i}", model_id="gemma3-270m", role_name=f"{role} {i}") for i in range(3)]
    config = JuryConfig(
        max_discussion_rounds=1, consensus_threshold=2.0, final_judgment_method="majority_vote", skip_idle_rounds=False
    )
    case = JuryCase(id="c", content="User: hi\nAgent: hello", gold="safe_pass")
    run_id, result = asyncio.run(run_case(state.get_store(), Jury(seats, {"gemma3-270m": _Heard()}, config), case))
    state.clear_reads()
    at = AppTest.from_function(_jury_page, default_timeout=60)
    at.session_state["jury.run_id"] = run_id
    at.run()
    assert not at.exception
    # The three seats are identical by construction: their one phase-1 judgment is one card, with the first
    # seat's detail (the others' adds only that they shared its scoring call); each statement has its own card.
    details = [result.phase1_evaluations[0].detail] + [s.detail for r in result.discussion_rounds for s in r.statements]
    assert len(details) == 4 and all(details)
    # by default each card says its verdict and why in words; the feature values wait behind the toggle
    assert not any(shown(c.value) == d for c in at.caption for d in details)
    assert [t.value for t in at.text if t.value.startswith("Reads as ")]
    at.toggle(key="details.jury.toggle").set_value(True).run()
    assert not at.exception
    texts = [t.value for t in at.text]
    captions = [c.value for c in at.caption]
    for e in result.phase1_evaluations:
        assert e.reasoning in texts and not any(e.detail in t for t in texts)  # the text is the distribution
    for detail in details:
        assert sum(shown(c) == detail for c in captions) >= 1, detail
    assert any("pmi\\_\u200b" in c or "channel\\_\u200b" in c for c in captions)  # breakable names
    assert not [c[:80] for c in captions if live_markers(c)]
    assert any(f"after hearing {role} 1: " in shown(c) for c in captions)


def test_max_tokens_is_disabled_when_no_seat_generates() -> None:
    """Every seat of the local panel judges by a distribution (likelihood or neighbours) and the stack decides: no
    call writes text, so the answers' token limit is disabled and its help says why; generating seats enable it."""
    at = AppTest.from_function(_jury_page, default_timeout=60).run()
    assert not at.exception
    tokens = at.number_input(key=wkey(at, "jury.max_tokens"))
    assert tokens.disabled and "judges by likelihood" in (tokens.help or "")
    assert not any("queue behind its lock" in i.value for i in at.info)
    at.selectbox(key=wkey(at, "jury.method")).set_value("final_judge").run()  # the final judge (Gemma) scores too
    assert at.number_input(key=wkey(at, "jury.max_tokens")).disabled
    at.selectbox(key=wkey(at, "jury.preset")).set_value("local-gemma").run()
    assert at.number_input(key=wkey(at, "jury.max_tokens")).disabled  # three Gemma seats by likelihood
    at.selectbox(key=wkey(at, "jury.judge")).set_value("generate").run()
    assert not at.number_input(key=wkey(at, "jury.max_tokens")).disabled
    assert any("queue behind its lock" in i.value for i in at.info)  # generating seats queue for the model
    at.selectbox(key=wkey(at, "jury.judge")).set_value("likelihood").run()
    assert at.number_input(key=wkey(at, "jury.max_tokens")).disabled


def test_after_a_reload_the_form_shows_the_settings_of_the_run_it_reattached_to() -> None:
    """The form showed pw-leak while the attached run was ja-refusal-ok, so the next click ran another case:
    a page opened on a run's URL shows that run's case, seats and settings."""
    from dashboard.mechanisms.jury.case import case_files
    from engine.jury.config import load_cases

    path = next(p for p in case_files() if p.name == "agent-safety.yaml")
    case = next(c for c in load_cases(path) if c.id == "ja-refusal-ok")
    seats = [JurorSeat(juror_id=j, model_id="gemma3-270m", role_name=f"Role {j}", role_focus="f") for j in "ab"]
    plan = {j: {0: ev("safe_pass", 80), 1: ev("safe_pass", 80)} for j in ("gemma3-270m",)}
    config = JuryConfig(
        consensus_threshold=0.5,
        final_judgment_method="majority_vote",
        max_discussion_rounds=1,
        tie_policy="lenient",
        selective_error=0.12,
        minority_veto=True,
        veto_at=0.8,
    )
    run_id, _ = asyncio.run(run_case(state.get_store(), Jury(seats, scripted(plan), config), case))
    state.clear_reads()

    at = AppTest.from_function(_jury_page, default_timeout=60)
    at.query_params["run"] = run_id
    at.run()
    assert not at.exception
    assert at.selectbox(key=wkey(at, "jury.file")).value == path
    assert (
        getattr(at.selectbox(key=wkey(at, f"jury.case.{path.name}")).value, "id", None) == "ja-refusal-ok"
    )  # not the first case, pw-leak
    assert at.selectbox(key=wkey(at, "jury.method")).value == "majority_vote"
    assert at.number_input(key=wkey(at, "jury.rounds")).value == 1
    assert at.selectbox(key=wkey(at, "jury.threshold")).value == "0.5 — any strict majority stops"
    assert at.selectbox(key=wkey(at, "jury.tie")).value == "lenient"
    assert (
        at.selectbox(key=wkey(at, "jury.preset")).value == "as in the attached run"
    )  # no preset seats these two jurors
    # the stacked panel's settings too, a rate the list does not hold included
    assert at.selectbox(key=wkey(at, "jury.selective")).value == "12 % error"
    assert at.toggle(key=wkey(at, "jury.veto")).value and at.number_input(key=wkey(at, "jury.veto_at")).value == 0.8
    # the user's later choice is theirs: another rerun does not put the run's settings back
    at.number_input(key=wkey(at, "jury.rounds")).set_value(3).run()
    assert at.number_input(key=wkey(at, "jury.rounds")).value == 3

    pasted, _ = asyncio.run(
        run_case(state.get_store(), Jury(seats, scripted(plan), config), JuryCase(id="x", title="Mine", content="hi"))
    )
    again = AppTest.from_function(_jury_page, default_timeout=60)
    again.query_params["run"] = pasted
    again.run()
    assert again.radio(key=wkey(again, "jury.source")).value == "Paste one"
    assert (
        again.text_area(key=wkey(again, "jury.paste_content")).value == "hi"
        and again.text_input(key=wkey(again, "jury.paste_title")).value == "Mine"
    )


def test_a_skipped_discussion_is_said_on_the_page(monkeypatch) -> None:
    """On the local panel a round cannot move anyone (the map gives the others weight 0): the page says no
    round was run and why, where the discussion would be, and shows no round."""
    from models.base import ChatModel
    from tests.engine.test_jury_likelihood import _Heard

    monkeypatch.setattr(ChatModel, "_BASELINES", {})
    seats = [JurorSeat(juror_id=f"j{i}", model_id="gemma3-270m", role_name=f"R{i}") for i in range(3)]
    config = JuryConfig(max_discussion_rounds=3, final_judgment_method="final_judge", final_judge_model="gemma3-270m")
    case = JuryCase(id="c", content="User: hi\nAgent: hello", gold="safe_pass")
    run_id, result = asyncio.run(run_case(state.get_store(), Jury(seats, {"gemma3-270m": _Heard()}, config), case))
    assert result.termination_reason == "no_influence"
    assert "final_judge:likelihood" in result.phase3_judgment.flags
    state.clear_reads()
    at = AppTest.from_function(_jury_page, default_timeout=60)
    at.session_state["jury.run_id"] = run_id
    at.run()
    assert not at.exception
    infos = [shown(i.value) for i in at.info]
    assert any("No discussion round was run" in i and "weight 0" in i for i in infos), infos
    assert not any("round 1" in shown(c.value) for c in at.caption)
    captions = [shown(c.value) for c in at.caption]
    # The three seats are one card, not three copies that read as independent agreement
    (card,) = [m.value for m in at.markdown if "seats, one judgment" in m.value]
    assert card.startswith("**3 seats, one judgment**") and "identical by construction" in card
    assert not any(m.value.startswith("**R0**") for m in at.markdown)
    assert any("R0 · R1 · R2" in c and "gemma3-270m" in c for c in captions), captions
    assert any("one judgment repeated, not agreement" in c for c in captions), captions
    assert sum(t.value.startswith("Reads as ") for t in at.text) == 2  # the group's reasoning, and the final one
    assert not any(c.startswith("Consensus after phase 1") for c in captions)
    # how the final judge worked is detail, not a warning: behind the toggle
    assert not [w.value for w in at.warning if "Flags" in w.value]
    assert not any(c.startswith("How it was judged") for c in captions)
    at.toggle(key="details.jury.toggle").set_value(True).run()
    assert any(shown(c.value).startswith("How it was judged: final_judge:likelihood") for c in at.caption)


def _demo_jury_run() -> str:
    """The shipped demo's jury run (the default local panel: three role seats, no round run), loaded."""
    from engine.demo import load_demo, load_manifest
    from tests.engine.test_demo import DEMO

    load_demo(state.get_store(), DEMO)
    state.clear_reads()
    (run_id,) = load_manifest(DEMO).pages["jury"].run_ids
    return run_id


def _figures(node: Any) -> dict[str, dict[str, Any]]:
    """The page's plotly figures by title (their JSON spec, as the browser gets it)."""
    import json

    specs = [json.loads(c.proto.spec) for c in node.get("plotly_chart")]
    return {s["layout"]["title"]["text"]: s for s in specs}


RAW_IDS = ("no_influence", "final_judge", "majority_vote", "unsafe_fail", "safe_pass", "jury_finished", "unanimous")


def _page_words(node: Any) -> list[str]:
    """Every text a stakeholder reads in the run's view (markdown, captions, boxes), escapes taken out."""
    kinds = (node.markdown, node.caption, node.info, node.success, node.error, node.warning)
    return [shown(e.value) for kind in kinds for e in kind]


def test_the_recorded_jury_reads_as_a_deliberation_in_words_with_one_token_count() -> None:
    """The demo's jury run as a stakeholder sees it (issues 25 and 36): three different judges, a card and a sentence
    each; they disagree in phase 1 and the round moves the unsure one, saying why in words; the verdict is the
    stack's; one token count, the Runs page's; no raw identifier in what the page says."""
    run_id = _demo_jury_run()
    totals = state.get_store().run_totals([run_id])[run_id]
    tokens = int(totals["prompt_tokens"] + totals["completion_tokens"])
    (runs_row,) = [r for r in state.list_runs(limit=50) if r["run"] == run_id]
    assert runs_row["tokens"] == tokens and tokens > 15
    at = AppTest.from_function(_jury_page, default_timeout=60)
    at.query_params["run"] = run_id
    at.run()
    assert not at.exception

    roles = ["**Gemma reader**", "**SmolLM2 reader**", "**Precedent reader**"]
    assert [m.value for m in at.markdown if m.value in roles][:3] == roles  # phase 1
    reads = [t.value for t in at.text if t.value.startswith("Reads as ")]
    assert len(reads) == 4 and len({r.split(" (")[0] for r in reads[:3]}) > 1  # the seats disagree
    assert "closest to" in reads[2] and "weighing the seats as the labelled cases taught" in reads[3]
    # the discussion: who moved and why, in words; the others say why they stayed
    statements = [t.value for t in at.text if t.value.startswith(("Moved to", "Stays"))]
    assert len(statements) == 3 and any(s.startswith("Moved to unsafe:") and "sure it was" in s for s in statements)
    assert any("position changed" in m.value for m in at.markdown)
    (line,) = [shown(c.value) for c in at.caption if " tokens " in c.value]
    assert f"{tokens} tokens in {int(totals['calls'])} model call" in line and "prompt +" in line
    assert "Score trajectory per juror" in _figures(at)
    words = _page_words(at)
    raws = tuple(r for r in RAW_IDS if r != "unanimous")
    assert not [w for w in words if any(raw in w for raw in raws)], [w for w in words if any(raw in w for raw in raws)]
    assert any("decided by the panel's stack" in w for w in words)

    # The Replay page shows the same cards and the same token line
    replay = AppTest.from_function(_replay_page, default_timeout=60)
    replay.query_params["run"] = run_id
    replay.run()
    assert not replay.exception
    player = replay.tabs[0]
    assert [shown(c.value) for c in player.caption if " tokens " in c.value] == [line]
    assert any(c.value.endswith(": the jury finished") for c in player.caption)
    assert not [w for w in _page_words(player) if any(raw in w for raw in raws)]
    assert [m.value for m in player.markdown if m.value in roles][:3] == roles


def test_the_demo_jury_note_is_in_words() -> None:
    """The sidebar's note on the recorded jury run: verdicts in words, the deliberation said (issue 36)."""
    from dashboard.mechanisms.jury.demo import jury_note
    from engine.demo import load_manifest
    from tests.engine.test_demo import DEMO

    note = load_manifest(DEMO).pages["jury"].note
    assert not any(raw in note for raw in RAW_IDS) and "The seats disagreed in phase 1" in note
    assert note == jury_note(
        {"verdict": "unsafe_fail", "gold": "unsafe_fail", "rounds": 1, "changes": 1, "method": "stack"}
    )
    still = jury_note({"verdict": "needs_review", "gold": "unsafe_fail", "rounds": 0, "changes": 0, "method": "stack"})
    assert still.endswith("No discussion round was run: no seat was unsure enough for the others to move it.")
    moved = jury_note({"verdict": "needs_review", "gold": "unsafe_fail", "rounds": 2, "changes": 1})
    assert moved == (
        "Verdict: needs review; the gold label is unsafe (fail). 1 position change(s) in 2 discussion round(s)."
    )


def test_a_stored_run_is_decided_again_with_other_settings_and_no_model_call() -> None:
    """The what-if under a finished run (Jury page and Replay): other stop rules and final votes on the recorded
    answers — the engine's `redecide`, checked here by hand on a run whose juror a moved in round 1."""
    from dashboard.mechanisms.jury.view import jury_whatif
    from tests.fakes.runs import stored_jury

    store = state.get_store()
    run_id, result = stored_jury(store)
    run = store.get_run(run_id)
    assert run is not None and result.total_rounds == 1 and result.final_verdict == "unsafe_fail"
    calls = store.call_count()
    same = jury_whatif(run, {})
    assert same == {
        "verdict": "unsafe_fail",
        "score": result.final_score,
        "rounds": 1,
        "stop": result.termination_reason,
        "changed": False,
        "recorded_rounds": 1,
        "not_sure": False,
    }
    # no discussion: phase 1's majority (b and c say unsafe), decided on the spot
    first = jury_whatif(run, {"max_discussion_rounds": 0})
    assert (first["verdict"], first["rounds"], first["stop"]) == ("unsafe_fail", 0, "no_discussion")
    assert "2 rounds asked, 1 recorded" in jury_whatif(run, {"max_discussion_rounds": 2})["error"]
    assert "final_judge needs a model call" in jury_whatif(run, {"final_judgment_method": "final_judge"})["error"]
    assert store.call_count() == calls  # nothing was called
    for page, url in ((_jury_page, {"run": run_id}), (_replay_page, {"run": run_id})):
        at = AppTest.from_function(page, default_timeout=60)
        at.query_params.update(url)
        at.run()
        assert not at.exception
        assert any("What if" in e.label for e in at.expander)
        assert any(
            "What-if verdict" in shown(m.value) and "the same verdict as the run" in shown(m.value) for m in at.markdown
        )
    assert store.call_count() == calls


def test_the_what_if_of_a_stacked_run_starts_from_the_stack() -> None:
    """The demo's run was decided by the stack: its what-if offers the stack first and, unchanged, gives the run's
    own verdict from the recorded distributions (no model call); the vote is the other choice; each says whether
    it is right against the gold label."""
    from dashboard.mechanisms.jury.view import jury_whatif

    run_id = _demo_jury_run()
    store = state.get_store()
    run = store.get_run(run_id)
    assert run is not None
    calls = store.call_count()
    same = jury_whatif(run, {"final_judgment_method": "stack"})
    assert same["verdict"] == "unsafe_fail" and not same["changed"] and not same["not_sure"]
    strict = jury_whatif(run, {"final_judgment_method": "stack", "selective_error": 0.1})
    assert strict["not_sure"] and strict["verdict"] == "needs_review"  # 76 % is below the 10 % rate's 82 % cut
    assert store.call_count() == calls
    at = AppTest.from_function(_jury_page, default_timeout=60)
    at.query_params["run"] = run_id
    at.run()
    assert at.selectbox(key=next(k for k in _keys(at) if k.endswith(".method") and "whatif" in k)).value == "stack"
    assert any("the same verdict as the run. Against the gold label" in shown(m.value) for m in at.markdown)


def _keys(at: Any) -> list[str]:
    return [str(w.key) for w in at.selectbox if w.key]


def test_the_jury_page_says_whether_its_jurors_carry_signal() -> None:
    """The default local panel (three different judges, stacked) is offered with the stack's cross-validated figure
    and interval against chance; the one-model panel with its panel map's diagnosis."""
    at = AppTest.from_function(_jury_page, default_timeout=60).run()
    assert not at.exception
    captions = " ".join(shown(c.value) for c in at.caption)
    assert (
        "Panel: different judges, stacked — deciding every case, the stacked panel was right on 52% of 120 labelled "
        "cases it never saw while fitted (95 % 43%–60%; chance 33 %)" in captions
    )
    assert "its best seat alone: 51%" in captions  # the stack is measured against its best seat
    # the selective verdict at the default rate: what it decided, and how often it was wrong there, with intervals
    assert "it decided 7% (4%–14%) of the cases and was wrong on 38% (12%–65%) of those" in captions
    assert "the 20% target is not shown to be met" in captions and "identical by construction" not in captions
    # the figures follow the settings: another rate says its cut and that only 20 % was measured held out
    at.selectbox(key=wkey(at, "jury.selective")).set_value("10 % error").run()
    captions = " ".join(shown(c.value) for c in at.caption)
    assert "At 10% errors the cut is 82%" in captions and "held out, only 20% was measured" in captions
    at.selectbox(key=wkey(at, "jury.method")).set_value("majority_vote").run()
    captions = " ".join(shown(c.value) for c in at.caption)
    assert "their majority after the rounds was right on 54%" in captions
    at.selectbox(key=wkey(at, "jury.preset")).set_value("local-gemma").run()
    at.selectbox(key=wkey(at, "jury.method")).set_value("final_judge").run()
    captions = " ".join(shown(c.value) for c in at.caption)
    assert (
        "Jurors: gemma3-270m, each seat by its own role's map and the verdict by the panel map: ✅ measurable signal "
        "— accuracy 0.50 (0.38–0.62) on 60 items" in captions
    )


def test_the_recorded_verdict_is_said_first_and_one_right_case_is_not_read_as_a_good_judge() -> None:
    """Issue 28: the demo's one case is right ("✅ Right"), yet the local panel is right on about half of its held-out
    cases: under the verdict the page says what one case is worth, with the stack's cross-validated accuracy, its
    interval and the figure by language; and the verdict is said at the top, above the cards."""
    run_id = _demo_jury_run()
    at = AppTest.from_function(_jury_page, default_timeout=60)
    at.query_params["run"] = run_id
    at.run()
    assert not at.exception
    texts = [shown(m.value) for m in at.markdown]
    first = next(i for i, t in enumerate(texts) if t.startswith("**Verdict:**"))
    cards = next(i for i, t in enumerate(texts) if t == "**Gemma reader**")
    assert first < cards and "✅ right" in texts[first]
    note = next(shown(c.value) for c in at.caption if c.value.startswith("One case says little"))
    assert "the stacked panel was right on 52% of 120 labelled cases it never saw while fitted (95 % 43%–60%" in note
    assert "Japanese 51% of 57 cases" in note


def test_the_stacked_panels_settings_follow_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("JURY_SELECTIVE_ERROR", "0.1")
    monkeypatch.setenv("JURY_MINORITY_VETO", "true")
    at = AppTest.from_function(_jury_page, default_timeout=60).run()
    assert not at.exception
    assert (
        at.selectbox(key=wkey(at, "jury.selective")).value == "10 % error"
        and at.toggle(key=wkey(at, "jury.veto")).value
    )
    monkeypatch.setenv("JURY_SELECTIVE_ERROR", "none")
    fresh = AppTest.from_function(_jury_page, default_timeout=60).run()
    assert fresh.selectbox(key=wkey(fresh, "jury.selective")).value == "always decide"


def _failed_view_page() -> None:
    from dashboard.mechanisms.jury.view import render_view
    from engine.jury.view import JuryView

    error = "ReplayMiss: [use-m3 via replay] replay miss for jury.phase1:juror-3 (no recorded embedding)"
    view = JuryView.fold([("jury_started", {"case": {"id": "x", "title": "T"}}), ("run_failed", {"error": error})])
    render_view(view, key="v", charts_too=False)


def test_a_run_stopped_by_a_replay_miss_is_said_as_such_not_as_a_fault() -> None:
    """A demo or `--replay` run that asked for an unrecorded request (the tour: another case picked in demo
    mode) is shown as a notice naming what demo mode answers, not as a red "Run failed"."""
    at = AppTest.from_function(_failed_view_page, default_timeout=60).run()
    assert not at.exception and not at.error
    (notice,) = [i.value for i in at.info if "recording does not hold" in i.value]
    assert "switch Demo off" in notice and "replay miss" in notice
