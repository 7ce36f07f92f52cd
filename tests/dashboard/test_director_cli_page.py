"""`judgelab director check | batch` and the Director lab page (AppTest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from dashboard.cli import app
from engine.config import DATA_DIR
from tests.dashboard.rendered import settle_runs, shown
from tests.fakes.forms import form_key, wkey
from tests.fakes.mock_catalog import mock_hub

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout if "--json" in args else result.output


def test_check_rules_only_prints_the_documented_shape() -> None:
    code, out = invoke("director", "check", "--character", "yana", "--rules-only", "--json", "まだ未成年じゃないかな。")
    assert code == 0
    payload = json.loads(out)
    assert set(payload) == {"status", "rules", "tone", "rubric", "normalized"}
    assert payload["status"] == "RETRY" and payload["rubric"] is None
    logic = next(r for r in payload["rules"] if r["rule"] == "logic")
    assert logic["status"] == "RETRY" and {"rule", "status", "detail"} <= set(logic)
    assert payload["tone"] == {"marker": 1, "vocab": 0, "style": 0, "score": 1}


def test_check_unknown_character() -> None:
    code, out = invoke("director", "check", "--character", "nobody", "--rules-only", "はい")
    assert code == 1 and "no such character" in out


def test_check_unavailable_model() -> None:
    code, out = invoke("director", "check", "--character", "ayu", "--model", "gpt-4o", "はい。")
    assert code == 2 and "OPENAI_API_KEY" in out


def test_a_bad_rubric_judge_names_its_option() -> None:
    code, out = invoke("director", "check", "--character", "yana", "--rubric-judge", "vibes", "はい。")
    assert code == 1 and "--rubric-judge" in out and "generate" in out and "likelihood" in out
    code, out = invoke("director", "duo", "--rubric", "--rubric-judge", "vibes")
    assert code == 1 and "--rubric-judge" in out


@pytest.mark.model
def test_check_by_likelihood_scores_each_criterion_from_the_digits() -> None:
    code, out = invoke(
        "director",
        "check",
        "--character",
        "yana",
        "--rubric-judge",
        "likelihood",
        "--json",
        "えー、ほんと？楽しそうだわ！",
    )
    assert code == 0, out
    rubric = json.loads(out)["rubric"]
    assert rubric is not None and not rubric["failed"], rubric
    assert set(rubric["scores"]) == {"frame", "roleplay", "connectivity", "density", "naturalness"}
    assert all(1 <= v <= 5 for v in rubric["scores"].values())
    code, listed = invoke("runs", "list", "--json")
    run = json.loads(listed)[0]
    assert run["kind"] == "director.check" and run["calls"] >= 1
    code, shown_run = invoke("runs", "show", run["id"], "--json")
    assert json.loads(shown_run)["config"]["director"]["rubric_judge"] == "likelihood"


@pytest.mark.model
def test_check_with_the_bundled_model_records_the_rubric_call() -> None:
    code, out = invoke("director", "check", "--character", "yana", "--json", "えー、ほんと？楽しそうだわ！")
    assert code == 0, out
    payload = json.loads(out)
    rubric = payload["rubric"]
    assert rubric is not None
    if rubric["failed"]:
        assert payload["status"] in ("WARN", "RETRY", "PASS") and rubric["error"]
    else:
        assert set(rubric["scores"]) == {"frame", "roleplay", "connectivity", "density", "naturalness"}
        assert all(1 <= v <= 5 for v in rubric["scores"].values())
    assert "signals" in rubric["flags"]  # the default for the bundled Gemma (issue 37)
    code, listed = invoke("runs", "list", "--json")
    # five scoring calls of Gemma, one embedding call a text (the line, the scene and previous line — both empty,
    # one text —, six example lines of each sister)
    assert json.loads(listed)[0]["kind"] == "director.check" and json.loads(listed)[0]["calls"] == 5 + 14


def test_batch_jsonl_lines_and_hit_rates() -> None:
    code, out = invoke(
        "director", "batch", "--character", "yana", "--file", str(DATA_DIR / "scripts" / "beach.jsonl"), "--json"
    )
    assert code == 0
    rows = [json.loads(line) for line in out.strip().splitlines()]
    items, summary = rows[:-1], rows[-1]["summary"]
    assert len(items) == summary["lines"] == 40
    assert sum(summary["status_counts"].values()) == 40
    retry_share = sum(1 for i in items if i["rules"]["praise"] == "RETRY") / 40
    assert summary["hit_rates"]["praise"]["retry"] == pytest.approx(retry_share)
    assert {i["character"] for i in items} == {"yana", "ayu"}
    # each hit rate carries its 95 % Wilson interval beside it, as every rate a run reports does
    from engine import stats

    retry_ci = stats.wilson(round(retry_share * 40), 40)
    assert retry_ci is not None and summary["hit_rates"]["praise"]["retry_ci"] == retry_ci.as_list()
    for rate in summary["hit_rates"].values():
        for name in ("warn", "retry"):
            low, high = rate[f"{name}_ci"]
            assert 0 <= low <= rate[name] <= high <= 1
    code, text = invoke("director", "batch", "--character", "yana", "--file", str(DATA_DIR / "scripts" / "beach.jsonl"))
    praise = next(line for line in text.splitlines() if line.strip().startswith("praise"))
    assert f"retry {retry_share:.0%} ({retry_ci.low:.0%}–{retry_ci.high:.0%})" in praise


def test_batch_hit_rates_with_intervals_in_the_export_and_the_report() -> None:
    """The stored run's hit rates and their intervals reach the CSV/JSON export (a table of their own) and the
    HTML report (error bars on the chart)."""
    import plotly.io

    from dashboard.report import figures_for
    from engine.exports import load_run, tables
    from engine.store import Store

    code, out = invoke(
        "director", "batch", "--character", "yana", "--file", str(DATA_DIR / "scripts" / "beach.jsonl"), "--json"
    )
    summary = json.loads(out.strip().splitlines()[-1])["summary"]
    record = load_run(Store(), summary["run_id"])
    rows = {r["rule"]: r for r in tables(record)["director_hit_rates"].rows}
    praise = summary["hit_rates"]["praise"]
    assert rows["praise"]["retry"] == praise["retry"]
    assert [rows["praise"]["retry_ci_low"], rows["praise"]["retry_ci_high"]] == praise["retry_ci"]
    spec = next(f.spec for f in figures_for(record) if f.title == "Rule hit rates with 95 % intervals")
    bars = plotly.io.from_json(spec).data
    retry = next(b for b in bars if b.name == "RETRY")
    i = list(retry.x).index("praise")
    assert retry.y[i] + retry.error_y.array[i] == pytest.approx(praise["retry_ci"][1])
    assert retry.y[i] - retry.error_y.arrayminus[i] == pytest.approx(praise["retry_ci"][0])


def test_batch_csv_and_bad_rows(tmp_path: Path) -> None:
    good = tmp_path / "s.csv"
    good.write_text("id,text\na,えー、ほんと？楽しいわ！\nb,まだ未成年じゃないかな。\n", encoding="utf-8")
    code, out = invoke("director", "batch", "--character", "yana", "--file", str(good), "--json")
    assert code == 0 and [json.loads(x)["status"] for x in out.strip().splitlines()[:-1]] == ["PASS", "RETRY"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "えー"}\n{oops\n', encoding="utf-8")
    code, out = invoke("director", "batch", "--character", "yana", "--file", str(bad))
    assert code == 1 and f"{bad}:2: not JSON" in out and "nothing imported" in out
    code, out = invoke("director", "batch", "--character", "yana", "--file", str(tmp_path / "x.txt"))
    assert code == 1


def _page() -> None:
    from pages import director

    director.render()


def test_lab_checks_a_line_with_highlights() -> None:
    at = AppTest.from_function(_page, default_timeout=60).run()
    assert not at.exception
    at.text_area(key=wkey(at, "director.line")).set_value("すごい、あなたの考えは正しいです。")
    at.selectbox(key=wkey(at, "director.character")).set_value("ayu")
    at.button(key="director.check").click().run()
    assert not at.exception
    assert any("RETRY" in md.value for md in at.markdown)
    assert any(":red-background[すごい]" in md.value for md in at.markdown)  # the match, on its status colour
    rules = next(df.value for df in at.dataframe if "rule" in df.value.columns)
    assert rules.set_index("rule").loc["praise", "status"] == "RETRY"


def test_lab_examples_fill_the_form_and_a_modify_line_is_shown_mended() -> None:
    """#39 (1): an example of each status fills the form; a MODIFY line shows the line as the director shows it."""
    at = AppTest.from_function(_page, default_timeout=60).run()
    at.button(key="director.check").click().run()  # a check first: the next example must still fill the form
    at.button(key="director.example.MODIFY · praise word").click().run()
    assert at.selectbox(key=wkey(at, "director.character")).value == "ayu"
    assert at.text_area(key=wkey(at, "director.line")).value == "今日はすごく暑いですね。水分補給が推奨されています。"
    at.button(key="director.check").click().run()
    assert not at.exception
    assert any("MODIFY" in m.value for m in at.markdown)
    assert any("Shown as" in m.value for m in at.markdown)
    rules = next(df.value for df in at.dataframe if "rule" in df.value.columns)
    assert rules.set_index("rule").loc["praise", "status"] == "WARN ✏️"
    assert any("is the mended line fine to say" in m.value for m in at.markdown)
    assert "今日はとても暑いですね。水分補給が推奨されています。" in [t.value for t in at.text]
    assert any("replaced the praise word 'すごく' → 'とても'" in m.value.replace("\\", "") for m in at.markdown)


def test_every_rubric_model_picker_has_its_judge_method() -> None:
    at = AppTest.from_function(_page, default_timeout=60).run()
    keys = {form_key(s.key) for s in at.selectbox if s.key}
    assert "director.batch_rubric_judge" in keys and "director.rubric_judge" not in keys  # batch: with its model
    at.toggle(key=wkey(at, "director.use_rubric")).set_value(True).run()
    # the bundled Gemma: the judge with measured signal on it is the default (issue 37)
    assert at.selectbox(key=wkey(at, "director.rubric_judge")).value == "signals"
    assert at.selectbox(key=wkey(at, "director.rubric_judge")).options == ["signals", "generate", "likelihood"]
    at.toggle(key=wkey(at, "director.duo_rubric")).set_value(True).run()
    assert at.selectbox(key=wkey(at, "director.duo_rubric_judge")).value == "signals"


def test_the_rubric_judge_picker_says_what_the_scorecard_measured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Where the rubric judge is offered, its stored diagnosis from the scorecard (here a shipped file with one
    director row: no measurable signal and a flat scale for likelihood; nothing measured for generate)."""
    import engine.experiments.scorecard as scorecard
    from engine.diagnostics import auc_vs_chance, flat_scale
    from engine.stats import Interval

    signal = auc_vs_chance("director rubric · mock · likelihood", 0.45, Interval(0.25, 0.66, "bootstrap", 29), 29)
    scale = flat_scale("director rubric · mock · likelihood", [2.0, 2.1, 2.2, 2.1], cutoffs=(3.0, 4.0))
    row = {
        "role": "director",
        "model": "mock",
        "method": "likelihood",
        "error": None,
        "metrics": {"signal": signal.to_dict(), "scale": scale.to_dict()},
    }
    shipped = tmp_path / "bundled.json"
    shipped.write_text(json.dumps({"rows": [row]}), encoding="utf-8")
    monkeypatch.setattr(scorecard, "SHIPPED", shipped)
    at = AppTest.from_function(_page, default_timeout=60).run()  # the built-in mock is always available
    at.toggle(key=wkey(at, "director.use_rubric")).set_value(True).run()
    at.selectbox(key=wkey(at, "director.rubric_model")).set_value("mock").run()
    assert not any("Rubric on mock" in c.value for c in at.caption)  # generate: not measured, nothing said
    at.selectbox(key=wkey(at, "director.rubric_judge")).set_value("likelihood").run()
    assert not at.exception
    said = [c.value.replace("\\", "") for c in at.caption if "Rubric on mock by likelihood" in c.value]
    assert len(said) == 2 and "no measurable signal" in said[0] and "contains 0.5" in said[0]
    assert "flat scale" in said[1]


def test_batch_retunes_instantly() -> None:
    at = AppTest.from_function(_page, default_timeout=60).run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Lines"] == "40" and metrics["Changed by retuning"] == "0"
    at.number_input(key=wkey(at, "director.tone_pass")).set_value(1)
    at.number_input(key=wkey(at, "director.tone_warn")).set_value(0).run()
    after = {m.label: m.value for m in at.metric}
    assert int(after["Changed by retuning"]) > 0
    assert int(after["RETRY"]) < int(metrics["RETRY"])
    # D1 in the batch: each line's status says why, next to its text (the rules at WARN or RETRY, in words)
    table = next(df.value for df in at.dataframe if "why" in df.value.columns)
    flagged = table[table["status"] != "PASS"]
    assert len(flagged) and (flagged["why"] != "").all() and (table[table["status"] == "PASS"]["why"] == "").all()
    assert not any("_" in c for c in table.columns)
    hits = next(c.value for c in at.caption if c.value.startswith("Hit rates (95 % interval")).replace("\\", "")
    assert "praise: warn" in hits and "%–" in hits  # each rule that fired, with its interval


@pytest.mark.model
def test_duo_simulator_with_the_bundled_model() -> None:
    from dashboard import state

    at = AppTest.from_function(_page, default_timeout=600).run()
    at.number_input(key=wkey(at, "director.duo_turns")).set_value(2)
    at.number_input(key=wkey(at, "director.duo_retries")).set_value(1)
    at.button(key="director.duo_run").click().run()
    assert not at.exception
    settle_runs(at, "director.duo", timeout_s=600)  # the page watches the run in the registry
    runs = state.get_store().list_runs(kind="director.duo")
    assert len(runs) == 1 and runs[0].status == "finished"
    stored = state.get_store().events(runs[0].id)
    events = [e.type for e in stored]
    assert events.count("director_turn") == 2 and "director_verdict" in events
    assert len(at.chat_message) == 2
    # The generator writes in each sister's voice (her own lines open the script): a line the director takes.
    statuses = [e.payload["status"] for e in stored if e.type == "director_turn"]
    assert sum(s in ("PASS", "WARN") for s in statuses) >= 1, statuses


@pytest.mark.slow  # over half a second of CPU or 2.5 s: make test, not test-fast
def test_batch_rubric_scored_once_then_retuned_without_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboard import state

    mock_hub(monkeypatch, tmp_path)  # the mock backend scores the rubric: retuning, not the model, is the point

    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "beach.jsonl").write_text(
        '{"id": "a", "character": "yana", "text": "えー、ほんと？海って気持ちいいわ！"}\n'
        '{"id": "b", "character": "ayu", "text": "そうですね。一般的に、朝の海は人が少ないです。"}\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("JUDGELAB_DATA_DIR", str(tmp_path))
    at = AppTest.from_function(_page, default_timeout=300).run()
    at.button(key="director.batch_score").click().run()
    assert not at.exception
    settle_runs(at, "director.batch", timeout_s=300)
    runs = state.get_store().list_runs(kind="director.batch")
    assert len(runs) == 1 and len(state.get_store().calls(runs[0].id)) == 2
    table = next(df.value for df in at.dataframe if "rubric avg" in df.value.columns)
    scored = table.dropna(subset=["rubric avg"])
    assert not scored.empty, "the model scored no line"
    calls_before = len(state.get_store().calls())
    at.number_input(key=wkey(at, "director.r_warn")).set_value(1.0)
    at.number_input(key=wkey(at, "director.r_pass")).set_value(1.0).run()
    relaxed = next(df.value for df in at.dataframe if "rubric avg" in df.value.columns)
    at.number_input(key=wkey(at, "director.r_pass")).set_value(5.0)
    at.number_input(key=wkey(at, "director.r_warn")).set_value(5.0).run()
    strict = next(df.value for df in at.dataframe if "rubric avg" in df.value.columns)
    assert len(state.get_store().calls()) == calls_before  # retuning made no model call
    for line_id in scored["id"]:
        relaxed_status = relaxed.set_index("id").loc[line_id, "status"]
        strict_status = strict.set_index("id").loc[line_id, "status"]
        average = scored.set_index("id").loc[line_id, "rubric avg"]
        if average < 5.0:
            assert strict_status == "RETRY"
        assert relaxed_status != "RETRY" or strict_status == "RETRY"


def _stored_duo() -> str:
    """A duo stored as `run_duo` stores one, its lines written by a script (no model): やな's first line in 「」
    (WARN, script form), あゆ's without her endings or style (WARN, tone), then plain lines."""
    import asyncio

    from dashboard import state
    from engine.director.config import load_character
    from engine.director.dialogue import DuoConfig, duo_dialogue, turn_json
    from engine.director.review import Director
    from engine.events import async_run_context

    lines = {
        "yana": ["「えー、海って気持ちいいわ！」", "えー、ほんと？海って気持ちいいわ！"],
        "ayu": ["要するに、海は広いです。"] * 2,
    }

    def writer(pid: str):  # noqa: ANN202 - a LineGenerator
        async def write(profile, history, feedback, attempt):  # noqa: ANN001, ANN202
            return lines[pid][min(len([h for h in history if h[0] == profile.name]), 1)]

        return write

    config = DuoConfig(first="yana", second="ayu", model_id="gemma3-270m", topic="海", scene="浜辺", turns=2)

    async def record() -> str:
        store = state.get_store()
        async with async_run_context(store, "director.duo", config.model_dump(mode="json")) as run:
            turns = await duo_dialogue(
                Director(load_character("yana")),
                Director(load_character("ayu")),
                {"yana": writer("yana"), "ayu": writer("ayu")},
                turns=2,
                emit=run.emit,
            )
            run.summary = {"turns": len(turns), "retries": 0, "result": [turn_json(t) for t in turns]}
        return run.run_id

    run_id = asyncio.run(record())
    state.clear_reads()
    return run_id


def test_a_warn_badge_says_why_in_words() -> None:
    """D1: the duo's WARN badges did not say why. Each one now carries its reasons in words (not 'tone 1 =
    marker 0 + vocab 1 + style 0'); so does a checked line's verdict."""
    run_id = _stored_duo()
    at = AppTest.from_function(_page, default_timeout=60)
    at.query_params["duo"] = run_id
    at.run()
    assert not at.exception and len(at.chat_message) == 2
    heads = [shown(m.value) for m in at.markdown if "WARN" in m.value]
    assert len(heads) == 2, heads
    assert "written as a script line in 「」 quotes" in heads[0]
    assert "does not quite sound like the character: missing its sentence endings and speaking style" in heads[1]
    assert not any("marker 0" in h or "tone 1" in h for h in heads)

    at = AppTest.from_function(_page, default_timeout=60).run()
    at.text_area(key=wkey(at, "director.line")).set_value("要するに、海は広いです。")
    at.selectbox(key=wkey(at, "director.character")).set_value("ayu")
    at.button(key="director.check").click().run()
    assert any(shown(m.value).startswith("**Why WARN:** does not quite sound like the") for m in at.markdown)
    rules = next(df.value for df in at.dataframe if "rule" in df.value.columns).set_index("rule")
    assert rules.loc["tone", "detail"] == "1/3: ✗ endings ✓ words ✗ style"  # not 'tone 1 = marker 0 + …'
    assert "script form" in rules.index and not any("_" in r for r in rules.index)  # rule names in words


def test_after_a_reload_the_form_shows_the_settings_of_the_run_it_reattached_to() -> None:
    """F1: a page opened on a run's URL shows that run's settings in its tab's form — a duo's speakers, topic,
    scene, turns and policy; a checked line's character, line and scene — and a later change stays the user's."""
    run_id = _stored_duo()
    at = AppTest.from_function(_page, default_timeout=60)
    at.query_params["duo"] = run_id
    at.run()
    assert not at.exception and not at.warning
    assert (
        at.text_input(key=wkey(at, "director.duo_topic")).value,
        at.text_input(key=wkey(at, "director.duo_scene")).value,
    ) == (
        "海",
        "浜辺",
    )
    assert at.number_input(key=wkey(at, "director.duo_turns")).value == 2
    assert at.selectbox(key=wkey(at, "director.duo_policy")).value == "mark"
    assert at.selectbox(key=wkey(at, "director.duo_policy")).format_func("mark") == "show it, marked RETRY"  # words
    at.text_input(key=wkey(at, "director.duo_topic")).set_value("山").run()
    assert at.text_input(key=wkey(at, "director.duo_topic")).value == "山"

    first = AppTest.from_function(_page, default_timeout=60).run()
    first.text_area(key=wkey(first, "director.line")).set_value("すごい、あなたの考えは正しいです。")
    first.selectbox(key=wkey(first, "director.character")).set_value("ayu")
    first.text_input(key=wkey(first, "director.scene")).set_value("カフェ")
    first.button(key="director.check").click().run()
    from dashboard import state

    (check,) = state.get_store().list_runs(kind="director.check")
    state.clear_reads()
    again = AppTest.from_function(_page, default_timeout=60)
    again.query_params["check"] = check.id
    again.run()
    assert not again.exception
    assert again.selectbox(key=wkey(again, "director.character")).value == "ayu"
    assert again.text_area(key=wkey(again, "director.line")).value == "すごい、あなたの考えは正しいです。"
    assert again.text_input(key=wkey(again, "director.scene")).value == "カフェ"


def test_modify_in_the_cli_the_batch_counts_and_the_export(tmp_path: Path) -> None:
    """#39 (1): the CLI prints the mended line, a batch counts MODIFY, and the export holds the mended line and
    what was changed; --no-mend shows the same lines as written."""
    from engine.exports import load_run, tables
    from engine.store import Store

    code, out = invoke(
        "director", "check", "--character", "yana", "--rules-only", "--json", "海って気持ちいいわ！！えー、ほんと？"
    )
    payload = json.loads(out)
    assert code == 0 and payload["status"] == "MODIFY"
    assert payload["mended"] == "海って気持ちいいわ！えー、ほんと？" and payload["changes"] == ["folded '！！' to '！'"]
    code, text = invoke(
        "director", "check", "--character", "yana", "--rules-only", "海って気持ちいいわ！！えー、ほんと？"
    )
    assert "mended → 海って気持ちいいわ！えー、ほんと？" in text
    code, out = invoke(
        "director",
        "check",
        "--character",
        "yana",
        "--rules-only",
        "--no-mend",
        "--json",
        "海って気持ちいいわ！！えー、ほんと？",
    )
    assert json.loads(out)["status"] == "PASS" and "mended" not in json.loads(out)

    script = tmp_path / "mends.jsonl"
    script.write_text(
        "\n".join(
            json.dumps(row, ensure_ascii=False)
            for row in (
                {"id": "a", "text": "今日はすごく暑いですね。水分補給が推奨されています。", "character": "ayu"},
                {"id": "b", "text": "えー、ほんと？海って気持ちいいわ！", "character": "yana"},
                {"id": "c", "text": "まだ未成年じゃないわ！", "character": "yana"},
            )
        ),
        encoding="utf-8",
    )
    code, out = invoke("director", "batch", "--character", "yana", "--file", str(script), "--json")
    rows = [json.loads(line) for line in out.strip().splitlines()]
    summary = rows[-1]["summary"]
    assert summary["status_counts"] == {"PASS": 1, "WARN": 0, "MODIFY": 1, "RETRY": 1}
    assert rows[0]["mended"] == "今日はとても暑いですね。水分補給が推奨されています。" and "mended" not in rows[1]
    lines = {r["id"]: r for r in tables(load_run(Store(), summary["run_id"]))["director_lines"].rows}
    assert lines["a"]["status"] == "MODIFY" and lines["a"]["mended"] == rows[0]["mended"]
    assert lines["a"]["changes"] == "replaced the praise word 'すごく' → 'とても'"
