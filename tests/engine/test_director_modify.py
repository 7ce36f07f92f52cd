"""§1's MODIFY (概ね合格だが、軽微な修正が必要（内部処理用）): a line that passes every rule except ones the director
can mend itself is shown mended — with what was changed — instead of being sent back; everywhere a status is
counted, MODIFY is counted."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from engine.director.batch import script_verdicts
from engine.director.config import DirectorConfig, load_character
from engine.director.dialogue import duo_dialogue, run_turn
from engine.director.generator import ModelLineGenerator
from engine.director.japanese import normalize
from engine.director.labels import STATUS_VALUES
from engine.director.mend import fold_marks, neutral_praise, within_length
from engine.director.review import Director as DirectorEngine
from engine.director.review import next_turn_instruction
from engine.director.rules import DirectorState, apply_state, evaluate_rules, retune
from engine.director.scripts import ScriptLine
from engine.director.status import Status
from tests.engine.test_director import ScriptedModel, scripted_generator

YANA, AYU = load_character("yana"), load_character("ayu")
CRITERIA = ("frame", "roleplay", "connectivity", "density", "naturalness")
OFF = DirectorConfig(mend=False)

# Over the 80-character advice, every other rule passing: its first sentence alone is within it.
LONG = (
    "えー、ほんとにこの海辺の散歩道って、朝の光がきらきらして波の音もやさしくて、ずっと歩いていたくなるくらい"
    "気持ちいいわ！帰りに駅前のカフェで冷たいレモネードを飲んで、夕焼けの時間まで窓際の席でゆっくりしたいな。"
)
PRAISED = "今日はすごく暑いですね。水分補給が推奨されています。"  # あゆ: an evaluation word said alone (WARN)
DOUBLED = "えー、ほんと？海って気持ちいいわ！！"  # a stray repeated ！


@pytest.mark.parametrize(
    ("text", "profile", "mended", "change"),
    [
        (LONG, YANA, LONG.split("！")[0] + "！", "cut the last sentence to fit the length advice: 104 → 59 characters"),
        (
            PRAISED,
            AYU,
            "今日はとても暑いですね。水分補給が推奨されています。",
            "replaced the praise word 'すごく' → 'とても'",
        ),
        (DOUBLED, YANA, "えー、ほんと？海って気持ちいいわ！", "folded '！！' to '！'"),
    ],
)
def test_a_line_the_director_can_mend_is_modify_with_the_mended_line(text, profile, mended, change) -> None:
    verdict = evaluate_rules(text, profile)
    assert verdict.status == Status.MODIFY
    assert verdict.mend is not None and verdict.mend.text == mended and verdict.mend.changes == [change]
    assert verdict.mended is not None and verdict.mended.status == Status.PASS  # the mended line passes every rule
    assert verdict.shown(text) == mended and verdict.judged() == verdict.mended.normalized
    # without mending (the seed's three-status flow) the same line is shown as written
    plain = evaluate_rules(text, profile, OFF)
    assert plain.status in (Status.PASS, Status.WARN) and plain.mend is None and plain.shown(text) == text


def test_a_line_with_a_warn_the_director_cannot_mend_stays_warn() -> None:
    """'passes every rule except ones the director can mend': a tone WARN beside the praise word keeps it WARN."""
    text = "すごい！あなたの考えは正しいです。"  # あゆ: praise said alone, and the tone is thin (WARN)
    verdict = evaluate_rules(text, AYU)
    assert {r.rule for r in verdict.rules if r.status == Status.WARN} == {"praise", "tone"}
    assert verdict.status == Status.WARN and verdict.shown(text) == text


def test_retry_is_never_mended() -> None:
    for text in ("まだ未成年じゃないわ！！", "すごい、あなたの答えは正しいです。"):
        profile = YANA if "わ" in text else AYU
        assert evaluate_rules(text, profile).status == Status.RETRY


def test_meaningful_evaluation_words_and_quotes_are_never_replaced() -> None:
    assert neutral_praise("すごい人ですね。") == ("すごい人ですね。", [])  # no neutral word keeps the meaning
    assert neutral_praise("正解は東京です。") == ("正解は東京です。", [])
    assert neutral_praise("「すごく速い」と書いてあります。") == ("「すごく速い」と書いてあります。", [])
    assert (
        neutral_praise("すごい！あなたの考えは正しいです。")[0] == "あなたの考えは正しいです。"
    )  # said alone: dropped
    assert fold_marks("えーー……ほんと？！") == ("えーー……ほんと？！", [])  # ー, …, ？！ are written on purpose
    assert fold_marks("ほんと!!??")[0] == "ほんと!?"


@pytest.mark.parametrize(
    "text",
    [
        "今日はものすごく暑いですね。水分補給が推奨されています。",  # ものすごく: one word, not すごく
        "渋滞がすごいですね。要するに混んでいます。",  # すごい as "heavy": no neutral word keeps it
        "すごくないです。普通です。",  # negated
        "完璧主義の人は疲れます。つまり休息が推奨です。",  # a compound
    ],
)
def test_a_swap_that_would_change_the_meaning_is_not_made(text: str) -> None:
    verdict = evaluate_rules(text, AYU)
    assert verdict.status == Status.WARN and verdict.shown(text) == text


def test_quoted_text_is_never_mended() -> None:
    """Quoted text is not the speaker's: 「」, ｢｣, 『』 and （） keep their marks and words."""
    assert fold_marks("「本当！！」って言ったわ！") == ("「本当！！」って言ったわ！", [])
    mended, _ = neutral_praise("｢すごく暑い｣と言いました。今日はすごく暑いですね。")
    assert mended == "｢すごく暑い｣と言いました。今日はとても暑いですね。"
    assert neutral_praise("「はい。すごい！」と姉が言いました。")[0] == "「はい。すごい！」と姉が言いました。"
    # a mend that would leave only a quote or a mark is not made
    assert evaluate_rules("すごい！（笑）", AYU, DirectorConfig(tone_pass=0, tone_warn=0)).status == Status.WARN


def test_long_runs_of_line_breaks_are_read_once() -> None:
    """Blank lines count no characters: the cut still finds its sentence (and reads each one once)."""
    text = "\n" * 20_000 + "えー、ほんと？" + "あ" * 90 + "わ！ほんとかも！"
    cut, changes = within_length(text, 80)
    assert cut.strip() == "えー、ほんと？" and changes
    assert neutral_praise("\n" * 40_000 + "x") == ("\n" * 40_000 + "x", [])


def test_a_cut_keeps_whole_sentences_and_quotes_closed() -> None:
    one = "あ" * 90 + "。"
    assert within_length(one, 80) == (one, [])  # its first sentence is over: no cut inside a sentence
    quoted = "「" + "い" * 30 + "。" + "う" * 30 + "。」" + "え" * 10 + "。"
    cut, changes = within_length(quoted, 70)
    assert cut == quoted or cut.count("「") == cut.count("」"), cut


def test_retune_re_decides_modify_from_the_recorded_facts() -> None:
    verdict = evaluate_rules(LONG, YANA)
    assert retune(verdict, DirectorConfig()) == Status.MODIFY
    assert retune(verdict, OFF) == Status.WARN  # mending turned off in a retune: shown as written
    # a cut-off under which the mended line no longer passes (one sentence is already scattered) leaves the
    # original's own status
    assert retune(verdict, DirectorConfig(scatter_warn_sentences=1)) == Status.WARN


def test_a_random_line_is_modify_only_when_its_mended_line_passes() -> None:
    """Property: over random mixes of the seed's phrases, MODIFY always comes with a mended line that passes every
    rule, is no longer than the line, and clears only what a mend may clear."""
    rng = random.Random(7)
    pieces = [
        "えー、",
        "ほんと",
        "すごく",
        "すごい",
        "完璧",
        "！！",
        "？",
        "わ！",
        "です。",
        "ですね。",
        "つまり、",
        "海は広い",
        "。",
        "\n",
    ]
    for _ in range(400):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        for profile in (YANA, AYU):
            verdict = evaluate_rules(text, profile)
            if verdict.status == Status.MODIFY:
                assert verdict.mend is not None and verdict.mended is not None
                assert verdict.mended.status == Status.PASS and len(verdict.mend.text) <= len(text)
                assert {r.rule for r in verdict.rules if r.status == Status.WARN} <= {"line_length", "praise"}
                assert all(r.status < Status.RETRY for r in verdict.rules)


def test_the_review_shows_the_mended_line_and_the_rubric_reads_it() -> None:
    model = ScriptedModel([json.dumps(dict.fromkeys(CRITERIA, 5) | {"comment": "ok"})])
    from engine.director.rubric import DirectorRubric

    review = asyncio.run(DirectorEngine(AYU, rubric=DirectorRubric(model)).review(PRAISED))
    assert review.status == Status.MODIFY and review.rules_status == Status.MODIFY
    assert review.mended == "今日はとても暑いですね。水分補給が推奨されています。"
    assert "とても" in model.prompts[0] and "すごく" not in model.prompts[0]  # the rubric judged what is shown
    payload = review.payload()
    assert payload["mended"] == review.mended and payload["changes"] == review.changes
    assert "praise" in " ".join(review.reasons)
    note = next_turn_instruction(review)
    assert note is not None and "直して表示しました" in note and "すごく" in note


def test_a_rubric_retry_on_the_mended_line_still_sends_it_back() -> None:
    low = dict(zip(CRITERIA, (1, 2, 1, 2, 1), strict=True))  # not one flat value: that reads as a flat scale
    model = ScriptedModel([json.dumps(low | {"comment": "no"})])
    from engine.director.rubric import DirectorRubric

    review = asyncio.run(DirectorEngine(AYU, rubric=DirectorRubric(model)).review(PRAISED))
    assert review.status == Status.RETRY and review.mended is None and "mended" not in review.payload()


def test_the_duo_says_the_mended_line_and_its_state_advances_on_it() -> None:
    generate, _ = scripted_generator([DOUBLED])
    turn, state = asyncio.run(run_turn(DirectorEngine(YANA), generate, [], DirectorState()))
    assert turn.status == Status.MODIFY and turn.outcome == "accepted"
    assert turn.text == "えー、ほんと？海って気持ちいいわ！" and turn.attempts[-1].text == DOUBLED
    assert state == apply_state(DirectorState(), normalize(turn.text), Status.MODIFY) and state.accepted == 1

    yana = ScriptedModel([LONG, "そっか、いいかもね。"])
    ayu = ScriptedModel(["そうですね。一般的に、朝の海は人が少ないです。"])
    generators = {
        "yana": ModelLineGenerator(yana, "海辺", "海水浴", AYU),
        "ayu": ModelLineGenerator(ayu, "海辺", "海水浴", YANA),
    }
    transcript = asyncio.run(duo_dialogue(DirectorEngine(YANA), DirectorEngine(AYU), generators, turns=3))
    said = transcript[0].text
    assert transcript[0].status == Status.MODIFY and said is not None and len(said) < len(LONG)
    # あゆ hears the mended line, not the draft; やな is told what was changed
    assert said in ayu.prompts[0] and LONG not in ayu.prompts[0]
    assert "直して表示しました" in yana.prompts[1]


def test_a_batch_counts_modify_and_labels_read_it_as_shown() -> None:
    lines = [
        ScriptLine(id=f"l{i}", text=t, character=c)
        for i, (t, c) in enumerate([(LONG, "yana"), (PRAISED, "ayu"), ("えー、ほんと？海って気持ちいいわ！", "yana")])
    ]
    verdicts = script_verdicts(lines, "yana")
    assert [v.verdict.status for v in verdicts] == [Status.MODIFY, Status.MODIFY, Status.PASS]
    assert STATUS_VALUES["MODIFY"] == "ok"
