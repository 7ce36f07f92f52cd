"""Figure builders are pure: data in, figure out."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from dashboard import charts
from dashboard.mechanisms.confidence import charts as confidence_charts
from dashboard.mechanisms.director import charts as director_charts
from dashboard.mechanisms.handraise import charts as handraise_charts
from dashboard.mechanisms.jury import charts as jury_charts
from dashboard.mechanisms.skip import charts as skip_charts
from engine.confidence.factors import ConfidenceFactors
from engine.confidence.score import calculate
from engine.reliability import calibrate, risk_at


def test_confidence_figures() -> None:
    score = calculate(ConfidenceFactors(tool_success_rate=0.5))
    gauge = confidence_charts.confidence_gauge(score.score, {"silent": 0.9, "notify": 0.7, "confirm": 0.4}, "CONFIRM")
    assert gauge.data[0].value == score.score
    assert [s["range"] for s in gauge.data[0].gauge.steps] == [(0, 0.4), (0.4, 0.7), (0.7, 0.9), (0.9, 1)]
    waterfall = confidence_charts.penalty_waterfall(score.base, [p.model_dump() for p in score.penalties], score.score)
    assert list(waterfall.data[0].y) == ["base score", "tool success rate 0.5", "no sources", "score"]
    assert waterfall.data[0].x[0] == score.base and waterfall.data[0].x[-1] == score.score
    bars = confidence_charts.breakdown_bars({k: v.model_dump() for k, v in score.breakdown.items()})
    assert list(bars.data[0].y) == [confidence_charts.factor_words(n) for n in score.breakdown]


def test_calibration_figures() -> None:
    scores, correct = [0.95, 0.8, 0.5, 0.2], [True, True, False, False]
    report = calibrate(scores, correct)
    fig = confidence_charts.reliability_diagram([b.model_dump() for b in report.bins], report.ece)
    assert "ECE" in fig.layout.title.text
    marks = {"silent": risk_at(scores, correct, 0.9).model_dump()}
    curve = confidence_charts.risk_coverage_curve([p.model_dump() for p in report.risk_coverage], marks)
    assert len(curve.data) == 2 and curve.data[1].name == "silent"
    shares = confidence_charts.level_shares({"SILENT": 0.25, "NOTIFY": 0.25, "CONFIRM": 0.25, "ESCALATE": 0.25})
    assert [t.name for t in shares.data] == ["SILENT", "NOTIFY", "CONFIRM", "ESCALATE"]


# -- the figures that moved out of the pages: structure, values from the data, hostile text escaped --------------

HOSTILE = "<a href='http://127.0.0.1:9/x'>click</a><br><b>bold</b>"
ESCAPED = "&lt;a href='http://127.0.0.1:9/x'&gt;click&lt;/a&gt;&lt;br&gt;&lt;b&gt;bold&lt;/b&gt;"


def _no_live_html(fig: Any) -> None:
    """No string anywhere in the figure holds a tag plotly would render."""
    text = json.dumps(fig.to_plotly_json(), ensure_ascii=False, default=str)
    assert "<a href" not in text and "<b>bold" not in text and "<br>" not in text


def test_rubric_radar_closes_the_polygon_on_the_scores() -> None:
    from engine.director.rubric import RUBRIC_CRITERIA, RUBRIC_LABELS

    scores = dict(zip(RUBRIC_CRITERIA, [5, 4, 3, 2, 1], strict=True))
    fig = director_charts.rubric_radar(scores, RUBRIC_LABELS)
    (trace,) = fig.data
    assert list(trace.r) == [5, 4, 3, 2, 1, 5] and list(trace.theta)[0] == list(trace.theta)[-1] == "フレーム整合性"
    assert fig.layout.polar.radialaxis.range == (0, 5) and trace.fill == "toself"
    hostile = director_charts.rubric_radar({"frame": 3}, {"frame": HOSTILE})
    assert hostile.data[0].theta[0] == ESCAPED
    _no_live_html(hostile)


def test_rule_hit_rates_show_warn_and_retry_per_rule_with_their_intervals() -> None:
    from engine.director.batch import hit_rates, script_verdicts
    from engine.director.scripts import ScriptLine

    lines = [
        ScriptLine(id=str(i), text=t)
        for i, t in enumerate(
            ["まだ未成年じゃないかな。", "えー、ほんと？楽しいわ！", "すごい！", "海は海で海だよね！"]
        )
    ]
    rates = hit_rates([v.verdict for v in script_verdicts(lines, "yana")])
    fig = director_charts.rule_hit_rates(rates)
    # side by side (a stacked bar's error bar would sit on the other status's share), each with its interval
    assert [t.name for t in fig.data] == ["WARN", "RETRY"] and fig.layout.barmode == "group"
    assert list(fig.data[0].x) == [r.replace("_", " ") for r in rates] and fig.layout.yaxis.tickformat == ".0%"
    assert not any("_" in x for x in fig.data[0].x)  # rule names in words
    assert list(fig.data[1].y) == [r["retry"] for r in rates.values()]
    assert dict(zip(fig.data[1].x, fig.data[1].y, strict=True))["logic"] == 0.25  # one double negation in four
    logic = list(fig.data[1].x).index("logic")
    low, high = rates["logic"]["retry_ci"]  # Wilson 1 of 4: 0.046–0.70
    assert (low, high) == (pytest.approx(0.0456, abs=1e-4), pytest.approx(0.6994, abs=1e-4))
    assert fig.data[1].error_y.array[logic] == pytest.approx(high - 0.25)
    assert fig.data[1].error_y.arrayminus[logic] == pytest.approx(0.25 - low)
    assert (
        director_charts.rule_hit_rates({"logic": {"warn": 0.5, "retry": 0.0}}).data[0].error_y.array is None
    )  # none stored
    assert director_charts.rule_hit_rates({HOSTILE: {"warn": 0.5, "retry": 0.0}}).data[0].x[0] == ESCAPED


def _simulated() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], Any]:
    from engine.skip.config import ResponseConfig
    from engine.skip.recording import RecordedJudge
    from engine.skip.simulation import simulate
    from engine.skip.workload import WorkloadSpec, generate_workload
    from tests.engine.test_skip_simulation import HashJudge

    messages = generate_workload(WorkloadSpec(channels=2, hours=2, bursts_per_hour=2.0, seed=3))
    judge = RecordedJudge({}, HashJudge())
    result = asyncio.run(simulate(messages, judge, ResponseConfig(), hours=2, keep_timeline=True))
    return [m.__dict__ for m in messages], [j.__dict__ for j in result.judgments], result.timeline, judge


def test_skip_scope_timeline_rows_hold_the_scopes_events() -> None:
    messages, judgments, timeline, _ = _simulated()
    scope = f"{messages[0]['channel_id']}:{messages[0]['thread_ts'] or 'top'}"
    fig = skip_charts.skip_scope_timeline(scope, messages, judgments, timeline)
    by_name = {t.name: t for t in fig.data if t.name}
    mine = [m for m in messages if f"{m['channel_id']}:{m['thread_ts'] or 'top'}" == scope]
    judged = [j for j in judgments if j["scope"] == scope]
    assert list(by_name["message"].x) == [m["at"] for m in mine] and set(by_name["message"].y) == {"messages"}
    replied, silent = by_name["judgment: reply"], by_name["judgment: stay silent"]
    assert sorted([*replied.x, *silent.x]) == sorted(j["at"] for j in judged) and judged
    assert list(replied.x) == [j["at"] for j in judged if j["should_respond"]]
    # S2: each trace one colour, so its legend swatch is the colour of every marker it draws
    assert (replied.marker.color, silent.marker.color) == ("#D95F02", "#1B9E77")
    hits = [e for e in timeline if e["type"] == "cache_hit" and e["scope"] == scope]
    assert len(by_name["cache hit"].x) == len(hits)
    windows = [t for t in fig.data if not t.showlegend and t.mode == "lines"]
    assert len(windows) == sum(1 for j in judged if j["skip_seconds"])
    assert list(fig.layout.yaxis.categoryarray) == skip_charts.SKIP_ROWS
    hostile = [dict(mine[0], text=HOSTILE, author=HOSTILE)]
    fig = skip_charts.skip_scope_timeline(scope, hostile, [], [])
    assert fig.data[0].text[0] == f"{ESCAPED}: {ESCAPED}"
    _no_live_html(fig)


def test_skip_tradeoff_draws_the_pareto_front_from_the_sweep() -> None:
    from engine.skip.config import ResponseConfig
    from engine.skip.messages import Message
    from engine.skip.sweep import sweep

    messages, _, _, judge = _simulated()
    rows = asyncio.run(sweep([Message(**m) for m in messages], judge.records, ResponseConfig(), hours=2))
    assert len(rows) == 9 and any(r["pareto"] for r in rows)
    fig = skip_charts.skip_tradeoff(rows)
    on_front, others, front = fig.data
    outcomes = set(dict.fromkeys((r["judge calls"], r["staleness p95 s"]) for r in rows))  # one marker each
    per = {"s": 1, "min": 60, "h": 3600}[fig.layout.yaxis.title.text.split("(")[1].rstrip(")")]
    drawn = [(x, y * per) for t in (on_front, others) for x, y in zip(t.x, t.y, strict=True)]
    assert len(drawn) == len(outcomes) and {(x, round(y, 6)) for x, y in drawn} == {
        (x, round(float(y), 6)) for x, y in outcomes
    }
    # S2: one colour per trace, so the legend's swatch matches what is drawn
    assert isinstance(on_front.marker.color, str) and isinstance(others.marker.color, str)
    on_front = sorted((r for r in rows if r["pareto"]), key=lambda r: r["judge calls"])
    assert list(front.x) == [r["judge calls"] for r in on_front] and front.line.dash == "dot"
    assert fig.layout.xaxis.title.text == "judge calls (with cache)"


def test_skip_tradeoff_with_few_outcomes_has_whole_call_ticks_and_counts_merged_settings() -> None:
    """Issue 25: two outcomes of nine settings drew ticks at 7.2 / 7.4 calls. Now: whole calls, one marker per
    outcome labelled with how many settings gave it, and the page says why there are few."""
    from dashboard.mechanisms.skip.tabs import few_points_note

    rows = [
        {
            "high skip s": h,
            "default skip s": d,
            "judge calls": 7 if d else 8,
            "staleness p95 s": 30.0 * (d > 0),
            "pareto": True,
        }
        for h in (3600, 21600, 43200)
        for d in (0, 600, 1800)
    ]
    fig = skip_charts.skip_tradeoff(rows)
    points = fig.data[0]
    assert sorted(points.x) == [7, 8] and fig.layout.xaxis.dtick == 1 and fig.layout.xaxis.tickformat == "d"
    assert sorted(points.text) == ["×3", "×6"]
    assert not fig.data[1].showlegend  # no settings off the front: no legend entry for an empty trace
    note = few_points_note(rows, 12)
    assert note is not None and "9 skip settings give only 2" in note and "12 messages" in note
    spread = [dict(r, **{"judge calls": i}) for i, r in enumerate(rows)]
    assert few_points_note(spread, 12) is None


TELEMETRY = [
    {
        "turn": "t1",
        "participant": "coder",
        "will": 0.8,
        "status": "raised",
        "allowed": True,
        "decided_by": "user",
        "flags": "",
    },
    {
        "turn": "t1",
        "participant": "designer",
        "will": 0.2,
        "status": "lowered",
        "allowed": False,
        "decided_by": "mode",
        "flags": "",
    },
    {
        "turn": "t2",
        "participant": "coder",
        "will": 0.95,
        "status": "raised",
        "allowed": False,
        "decided_by": "timeout",
        "flags": "over_raise",
    },
    {
        "turn": "t2",
        "participant": HOSTILE,
        "will": 0.7,
        "status": "mentioned",
        "allowed": True,
        "decided_by": "mention",
        "flags": "",
    },
]


def test_will_per_turn_and_histogram_follow_the_telemetry() -> None:
    fig = handraise_charts.will_per_turn(TELEMETRY, 0.6)
    assert [t.name for t in fig.data] == ["coder", "designer", ESCAPED]
    assert list(fig.data[0].x) == ["t1", "t2"] and list(fig.data[0].y) == [0.8, 0.95]
    assert fig.layout.shapes[0].y0 == 0.6 and fig.layout.yaxis.range == (0, 1)
    hist = handraise_charts.will_histogram(TELEMETRY)
    assert [t.name for t in hist.data] == ["coder ⚠ over-raise", "designer", ESCAPED]
    assert list(hist.data[0].x) == [0.8, 0.95] and hist.data[0].xbins.size == 0.1
    assert hist.layout.barmode == "group"  # side by side: no bar's colour blends into another's
    assert hist.layout.xaxis.range == (0, 1) and hist.layout.yaxis.dtick == 1  # the whole scale, whole counts
    _no_live_html(fig)
    _no_live_html(hist)


def test_approval_sankey_counts_every_hand_once() -> None:
    fig = handraise_charts.approval_sankey(TELEMETRY)
    (sankey,) = fig.data
    labels = list(sankey.node.label)
    flows = {
        (labels[s], labels[t]): v
        for s, t, v in zip(sankey.link.source, sankey.link.target, sankey.link.value, strict=True)
    }
    assert flows == {
        ("raised", "approved"): 2,
        ("not raised", "stayed quiet"): 1,
        ("raised", "timeout"): 1,
        ("approved", "answered"): 2,
    }


def test_approval_flows_never_route_a_hand_that_stayed_down_into_skipped() -> None:
    """Only a raised hand has a card the user can skip: a lowered one stays quiet, or speaks when a rule lets
    it (brainstorm's auto-approve); a skipped card and a timed-out one keep their own flows."""
    hand = {"turn": "t1", "will": 0.5, "flags": ""}
    rows = [
        hand | {"participant": "a", "status": "lowered", "allowed": False, "decided_by": "mode"},
        hand | {"participant": "b", "status": "not_judged", "allowed": False, "decided_by": "mode"},
        hand | {"participant": "c", "status": "lowered", "allowed": True, "decided_by": "auto_rule"},
        hand | {"participant": "d", "status": "raised", "allowed": False, "decided_by": "user"},
        hand | {"participant": "e", "status": "raised", "allowed": True, "decided_by": "timeout"},
        hand | {"participant": "f", "status": "mentioned", "allowed": True, "decided_by": "mention"},
    ]
    flows = handraise_charts.approval_flows(rows)
    assert flows == {
        ("not raised", "stayed quiet"): 2,
        ("not raised", "approved"): 1,
        ("raised", "skipped"): 1,
        ("raised", "timeout"): 1,
        ("raised", "approved"): 1,
        ("approved", "answered"): 2,
        ("timeout", "answered"): 1,
    }
    assert sum(v for (a, _), v in flows.items() if a in ("raised", "not raised")) == len(rows)  # each hand once
    fig = handraise_charts.approval_sankey(rows)
    labels = list(fig.data[0].node.label)
    assert not [
        (s, t)
        for s, t in zip(fig.data[0].link.source, fig.data[0].link.target, strict=True)
        if labels[s] == "not raised" and labels[t] == "skipped"
    ]


def test_context_ablation_groups_the_metrics_per_method_and_context() -> None:
    rows = [
        {
            "method": "judge",
            "context": "3",
            "accuracy": 0.75,
            "precision": 0.5,
            "recall": None,
            "f1": 0.6,
            "consistency": 1.0,
        },
        {"method": HOSTILE, "context": "1", "accuracy": 0.5},
    ]
    fig = handraise_charts.context_ablation(rows)
    assert [t.name for t in fig.data] == ["judge · 3", f"{ESCAPED} · 1"] and fig.layout.barmode == "group"
    assert list(fig.data[0].x) == list(handraise_charts.ABLATION_METRICS)
    assert list(fig.data[0].y) == [0.75, 0.5, 0, 0.6, 1.0]  # a missing figure at 0
    _no_live_html(fig)


def test_jury_charts_put_their_legends_below_the_plot() -> None:
    rows = [{"juror": "a", "role": HOSTILE, "step": 0, "label": "phase 1", "score": 80, "verdict": "safe_pass"}]
    for fig in (
        jury_charts.jury_trajectory(rows),
        jury_charts.jury_verdicts({"phase 1": {"safe_pass": 1}}, ["safe_pass"]),
        jury_charts.jury_timeline([{"juror": "a", "role": "r", "stage": "phase 1", "start": 0.0, "end": 1.5}]),
    ):
        assert fig.layout.legend.orientation == "h" and fig.layout.legend.y < 0
        assert fig.layout.margin.b >= 60  # room for the legend, so it covers neither plot nor neighbour
    assert jury_charts.jury_trajectory(rows).data[0].name == ESCAPED
    # a settled run that ran no round says so; a replay part way through does not yet know
    assert jury_charts.jury_trajectory(rows).layout.title.text == "Phase-1 scores (no discussion round)"
    assert jury_charts.jury_trajectory(rows, settled=False).layout.title.text == "Phase-1 scores"
    assert jury_charts.jury_verdicts({"phase 1": {"safe_pass": 1}}, ["safe_pass"], False).layout.title.text == (
        "Phase-1 verdicts"
    )
    assert fig.layout.modebar.orientation == "v"  # the toolbar down the right edge, off the title


def test_jury_trajectory_keeps_jurors_with_one_score_apart() -> None:
    """Three jurors with the same score at a step were one dot (issue 25, J3): each juror's points sit beside
    the step, in legend order, the steps named on the axis; the verdict in the hover text is in words."""
    rows = [
        {"juror": j, "role": f"R{j}", "step": step, "label": label, "score": 40.0, "verdict": "unsafe_fail"}
        for step, label in ((0, "phase 1"), (1, "round 1"))
        for j in "abc"
    ]
    fig = jury_charts.jury_trajectory(rows)
    xs = [list(trace.x) for trace in fig.data]
    assert len({x[0] for x in xs}) == 3 and len({x[1] for x in xs}) == 3  # three dots at each step, not one
    assert all(abs(x[0]) < 0.5 and abs(x[1] - 1) < 0.5 for x in xs)  # each beside its own step
    assert xs == sorted(xs)  # in legend order, left to right
    assert list(fig.layout.xaxis.ticktext) == ["phase 1", "round 1"] and list(fig.layout.xaxis.tickvals) == [0, 1]
    assert all(t == "unsafe (fail)" for trace in fig.data for t in trace.text)
    assert fig.layout.title.text == "Score trajectory per juror"
    alone = jury_charts.jury_trajectory(rows[:3])
    assert "no discussion round" in alone.layout.title.text


def test_the_verdict_chart_shows_after_discussion_only_when_a_round_ran() -> None:
    """The fold gives an "after discussion" column only once a round ran (issue 25, J4: a skipped discussion drew
    a second bar equal to the first); the chart names the verdicts in words and leaves out those no one held."""
    from engine.jury.view import JuryView

    phase1: list[tuple[str, dict[str, Any]]] = [
        ("jury_started", {"case": {"id": "c"}, "jurors": [{"juror_id": j, "role_name": j} for j in "ab"]}),
        *[("juror_evaluation", {"juror": j, "verdict": "safe_pass", "score": 80.0}) for j in "ab"],
    ]
    skipped = JuryView.fold([*phase1, ("discussion_skipped", {"reason": "no_influence"})])
    assert skipped.verdicts() == {"phase 1": {"safe_pass": 2}}
    statement = {"juror": "a", "newVerdict": "unsafe_fail", "newScore": 20.0, "positionChanged": True, "statement": ""}
    discussed = JuryView.fold(
        [*phase1, ("round_started", {"round": 1}), ("juror_statement", statement), ("round_completed", {})]
    )
    assert discussed.verdicts() == {
        "phase 1": {"safe_pass": 2},
        "after discussion": {"unsafe_fail": 1, "safe_pass": 1},
    }
    labels = ["safe_pass", "needs_review", "unsafe_fail", "failed"]
    fig = jury_charts.jury_verdicts(skipped.verdicts(), labels)
    assert [t.name for t in fig.data] == ["safe (pass)"] and [list(t.x) for t in fig.data] == [["phase 1"]]
    assert "no discussion round" in fig.layout.title.text
    fig = jury_charts.jury_verdicts(discussed.verdicts(), labels)
    assert [t.name for t in fig.data] == ["safe (pass)", "unsafe (fail)"]
    assert list(fig.data[0].x) == ["phase 1", "after discussion"] and list(fig.data[1].y) == [0, 1]


# -- experiments --------------------------------------------------------------------------------------------------


def _sweep() -> list[dict[str, Any]]:
    """A 3 × 2 grid: f1 rises with the threshold and is higher in focus mode; calls grow with the threshold."""
    rows = []
    for i, (threshold, mode) in enumerate((t, m) for t in (0.4, 0.5, 0.6) for m in ("focus", HOSTILE)):
        f1 = round(threshold + (0.1 if mode == "focus" else 0.0), 2)
        rows.append({"cell": i, "repeat": 0, "threshold": threshold, "mode": mode, "f1": f1, "calls": 10 * (i // 2)})
    return rows


def test_experiment_metric_vs_parameter_draws_every_cell_and_the_best_per_value() -> None:
    rows = _sweep()
    fig = charts.experiment_metric_vs(rows, "threshold", "f1", parameters=["threshold", "mode"], best_cell=4)
    cells, line, best = fig.data
    assert list(cells.x) == [r["threshold"] for r in rows] and list(cells.y) == [r["f1"] for r in rows]
    assert list(line.x) == [0.4, 0.5, 0.6] and list(line.y) == [0.5, 0.6, 0.7]  # the focus cells
    assert (best.x[0], best.y[0]) == (0.6, 0.7) and best.name == "best cell 4"
    by_mode = charts.experiment_metric_vs(rows, "mode", "f1", parameters=["threshold", "mode"])
    assert list(by_mode.data[1].x) == [ESCAPED, "focus"] and list(by_mode.data[1].y) == [0.6, 0.7]
    _no_live_html(by_mode)


def test_experiment_heatmap_holds_the_best_value_of_each_pair() -> None:
    from engine.experiments.analysis import heatmap_grid

    rows = _sweep() + [{"cell": 6, "repeat": 1, "threshold": 0.4, "mode": "focus", "f1": 0.9, "calls": 0}]
    grid = heatmap_grid(rows, "threshold", "mode", "f1")
    assert grid["x"] == [0.4, 0.5, 0.6] and grid["y"] == [HOSTILE, "focus"]
    assert grid["z"] == [[0.4, 0.5, 0.6], [0.9, 0.6, 0.7]]  # repeat 1's 0.9 beats repeat 0's 0.5
    assert heatmap_grid(rows, "threshold", "mode", "f1", maximize=False)["z"][1][0] == 0.5
    fig = charts.experiment_heatmap(grid, "threshold", "mode", "f1")
    assert list(fig.data[0].y) == [ESCAPED, "focus"] and fig.data[0].z[1][0] == 0.9
    _no_live_html(fig)


def test_experiment_pareto_front_is_the_cells_nothing_beats_on_both_axes() -> None:
    from engine.experiments.analysis import pareto_front

    rows: list[dict[str, Any]] = [
        {"cell": 0, "f1": 0.5, "calls": 10},
        {"cell": 1, "f1": 0.4, "calls": 20},  # dominated by cell 0
        {"cell": 2, "f1": 0.7, "calls": 20},
        {"cell": 3, "f1": 0.7, "calls": 30},  # as good as cell 2, dearer
        {"cell": 4, "f1": 0.9, "calls": 40},
        {"cell": 5, "f1": None, "calls": 1},  # no value: not a point
    ]
    front = pareto_front(rows, "f1", "calls")
    assert [r["cell"] for r in front] == [0, 2, 4]
    assert [r["cell"] for r in pareto_front(rows, "f1", "calls", maximize=False)] == [0, 1]
    fig = charts.experiment_pareto(rows, front, "f1", "calls", best_cell=4)
    points, line, best = fig.data
    assert len(points.x) == 5 and list(line.x) == [10, 20, 40] and list(line.y) == [0.5, 0.7, 0.9]
    assert [c for c, cell in zip(points.marker.color, rows, strict=False)][1] == charts.MUTED
    assert (best.x[0], best.y[0]) == (40, 0.9)


def test_jury_discussion_effect_pairs_before_and_after() -> None:
    from engine.experiments.analysis import jury_effect

    row = {
        "accuracy": 0.8,
        "phase1_accuracy": 0.6,
        "kappa_phase1": 0.2,
        "kappa_final": 0.5,
        "alpha_phase1": -0.1,
        "alpha_final": None,
        "outcome_changed_rate": 0.25,
        "rounds_mean": 1.5,
    }
    effect = jury_effect(row)
    assert [(p["measure"], p["before discussion"], p["after discussion"]) for p in effect["pairs"]] == [
        ("accuracy", 0.6, 0.8),
        ("Fleiss κ", 0.2, 0.5),
        ("Krippendorff α", -0.1, None),
    ]
    assert effect["pairs"][0]["change"] == 0.2 and effect["pairs"][2]["change"] is None
    assert (effect["outcome_changed_rate"], effect["rounds_mean"]) == (0.25, 1.5)
    fig = jury_charts.jury_discussion_effect(effect)
    before, after = fig.data
    assert list(before.y) == [0.6, 0.2, -0.1] and list(after.y) == [0.8, 0.5, None]
    assert fig.layout.yaxis.range[0] == -0.1


def test_experiment_chart_draws_intervals_and_the_tie_band() -> None:
    """Cells tied with the best in their own colour, each cell's interval as an error bar (few cells), the best
    cell's interval as a band across the chart."""
    from dashboard.charts import BEST, TIED, experiment_metric_vs

    rows = [
        {"cell": 0, "threshold": 0.3, "f1": 0.8, "f1_ci": [0.7, 0.9], "tied_with_best": True},
        {"cell": 1, "threshold": 0.5, "f1": 0.75, "f1_ci": [0.6, 0.85], "tied_with_best": True},
        {"cell": 2, "threshold": 0.7, "f1": 0.4, "f1_ci": [0.3, 0.5], "tied_with_best": False},
    ]
    fig = experiment_metric_vs(rows, "threshold", "f1", parameters=["threshold"], best_cell=0)
    by_name = {t.name: t for t in fig.data}
    tied = by_name["cell tied with the best (not significantly worse)"]
    assert list(tied.y) == [0.75] and tied.marker.color == TIED
    assert list(tied.error_y.array) == pytest.approx([0.1]) and list(tied.error_y.arrayminus) == pytest.approx([0.15])
    assert list(by_name["cell"].y) == [0.8, 0.4]  # the best and the cell significantly worse
    (band,) = [s for s in fig.layout.shapes if s.type == "rect"]
    assert (band.y0, band.y1, band.fillcolor) == (0.7, 0.9, BEST)
    assert "best cell's 95 % interval" in by_name


def test_a_rate_heatmap_is_coloured_on_its_whole_scale_and_says_its_values() -> None:
    """0.82 against 0.87 is one item on 36: coloured on 0–1 it reads as the small difference it is."""
    from dashboard.charts import experiment_heatmap

    grid = {"x": [0.1, 0.3], "y": [0.2, 0.4], "z": [[0.82, 0.87], [0.84, 0.85]]}
    heat = experiment_heatmap(grid, "weight_self_confidence", "thresholds.notify", "wrong_stopped").data[0]
    assert (heat.zmin, heat.zmax, heat.texttemplate) == (0.0, 1.0, "%{z:.2f}")
    fig = experiment_heatmap({"x": [1], "y": [2], "z": [[340.0]]}, "a", "b", "tokens")
    assert fig.data[0].zmin is None  # not a rate: its own range
    assert fig.layout.title.text.startswith("best tokens by a × b")
    assert "wrong stopped" in experiment_heatmap(grid, "a", "b", "wrong_stopped").layout.title.text


def test_jury_charts_list_the_jurors_in_seat_order_as_the_cards_do() -> None:
    """The tour: the legend and the bars listed the jurors in the order they finished; the cards in seat order."""
    from engine.jury.view import JuryView

    jurors = [{"juror_id": j, "role_name": j.upper()} for j in ("a", "b", "c")]
    evaluation = {"score": 50, "verdict": "safe_pass", "startedS": 0.0, "endedS": 1.0}
    events = [("jury_started", {"case": {"id": "x"}, "jurors": jurors})] + [
        ("juror_evaluation", {"juror": j, **evaluation})
        for j in ("c", "a", "b")  # c answered first
    ]
    view = JuryView.fold(events)
    assert [r["juror"] for r in view.trajectory()] == ["a", "b", "c"]
    assert [r["juror"] for r in view.timeline()] == ["a", "b", "c"]
    assert [t.name for t in jury_charts.jury_trajectory(view.trajectory()).data] == ["A", "B", "C"]
    assert jury_charts.jury_timeline(view.timeline()).layout.yaxis.autorange == "reversed"  # the first seat on top
