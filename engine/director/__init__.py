"""Director: hard rules, then an LLM rubric, decide PASS / WARN / RETRY (/ MODIFY) for a character's line.

One concept a module:

- `status`: the four statuses, ordered by severity;
- `config`: the settings (`DirectorConfig`, every cut-off of the spec) and the character files
  (`CharacterProfile`: markers, vocabulary, style rule, setting phrases);
- `japanese`: the Japanese text analysis — normalisation (§2), sentences and topics (§6), double negations,
  content words;
- `rules`: the nine hard rules and special cases, `evaluate_rules`, the conversation state (`apply_state`) and
  `retune`, which re-decides stored rule facts under new cut-offs. Pure;
- `rubric`: the LLM rubric (§7), its prompts (generated JSON or the likelihood of the digits) and its failure
  policy;
- `review`: `Director.review` (rules, then the rubric), the reasons and suggestions, and the `director.check`
  run kind (`review_line`);
- `generator`: how a model writes a character's next line (`ModelLineGenerator`, `script_prompt`);
- `dialogue`: the retry loop (`run_turn`), two characters talking (`duo_dialogue`) and the `director.duo` run
  kind (`run_duo`);
- `scripts`: the batch's input files (`parse_script`, `load_script`);
- `batch`: a script through the rules and the rubric, its hit rates and retune, and the `director.batch` run kind
  (`run_script`).

The package's public API is re-exported here, so `from engine.director import X` works.
"""

from engine.director.batch import (
    RETUNED_RULES,
    STATUS_NAMES,
    ScriptConfig,
    ScriptResult,
    ScriptRow,
    ScriptVerdict,
    hit_rate,
    hit_rates,
    iter_script_verdicts,
    retune_rule,
    retune_script,
    run_script,
    script_status,
    script_verdicts,
    share_text,
)
from engine.director.config import (
    CHARACTERS_DIR,
    CharacterProfile,
    DirectorConfig,
    StyleRule,
    list_characters,
    load_character,
)
from engine.director.dialogue import (
    Attempt,
    DuoConfig,
    DuoResult,
    Turn,
    duo_dialogue,
    retry_feedback,
    run_duo,
    run_turn,
    turn_json,
)
from engine.director.generator import (
    FRESH_TRIES,
    SHOTS,
    LineGenerator,
    line_openers,
    script_prompt,
)
from engine.director.japanese import (
    Normalized,
    content_words,
    double_negations,
    normalize,
    sentences,
    topics,
)
from engine.director.review import (
    SUGGESTIONS,
    CheckConfig,
    CheckResult,
    Director,
    Review,
    next_turn_instruction,
    review_json,
    review_line,
)
from engine.director.rubric import (
    RUBRIC_CRITERIA,
    RUBRIC_LABELS,
    RUBRIC_PROMPT,
    DirectorRubric,
    RubricOutput,
    RubricResult,
    rubric_status,
)
from engine.director.rules import (
    AFFIRMATIONS,
    EVALUATION_WORDS,
    OTHER_REFERENCES,
    SCRIPT_FORM_NOTE,
    DirectorState,
    RuleResult,
    RulesVerdict,
    ToneScore,
    apply_state,
    count_lines,
    evaluate_rules,
    format_status,
    retune,
    rule_early_change,
    rule_format,
    rule_line_length,
    rule_logic,
    rule_loop,
    rule_praise,
    rule_scatter,
    rule_script_form,
    rule_setting,
    rule_tone,
    scatter_status,
    tone_score,
    tone_status,
)
from engine.director.scripts import (
    ScriptError,
    ScriptLine,
    load_script,
    parse_script,
)
from engine.director.status import (
    Status,
    worst,
)

__all__ = [
    "AFFIRMATIONS",
    "apply_state",
    "Attempt",
    "CharacterProfile",
    "CHARACTERS_DIR",
    "CheckConfig",
    "CheckResult",
    "content_words",
    "count_lines",
    "Director",
    "DirectorConfig",
    "DirectorRubric",
    "DirectorState",
    "double_negations",
    "duo_dialogue",
    "DuoConfig",
    "DuoResult",
    "evaluate_rules",
    "EVALUATION_WORDS",
    "format_status",
    "FRESH_TRIES",
    "hit_rate",
    "hit_rates",
    "iter_script_verdicts",
    "line_openers",
    "LineGenerator",
    "list_characters",
    "load_character",
    "load_script",
    "next_turn_instruction",
    "normalize",
    "Normalized",
    "OTHER_REFERENCES",
    "parse_script",
    "retry_feedback",
    "retune",
    "retune_rule",
    "retune_script",
    "RETUNED_RULES",
    "Review",
    "review_json",
    "review_line",
    "RUBRIC_CRITERIA",
    "RUBRIC_LABELS",
    "RUBRIC_PROMPT",
    "rubric_status",
    "RubricOutput",
    "RubricResult",
    "rule_early_change",
    "rule_format",
    "rule_line_length",
    "rule_logic",
    "rule_loop",
    "rule_praise",
    "rule_scatter",
    "rule_script_form",
    "rule_setting",
    "rule_tone",
    "RuleResult",
    "RulesVerdict",
    "run_duo",
    "run_script",
    "run_turn",
    "scatter_status",
    "SCRIPT_FORM_NOTE",
    "script_prompt",
    "script_status",
    "script_verdicts",
    "ScriptConfig",
    "ScriptError",
    "ScriptLine",
    "ScriptResult",
    "ScriptRow",
    "ScriptVerdict",
    "sentences",
    "share_text",
    "SHOTS",
    "Status",
    "STATUS_NAMES",
    "StyleRule",
    "SUGGESTIONS",
    "tone_score",
    "tone_status",
    "ToneScore",
    "topics",
    "Turn",
    "turn_json",
    "worst",
]
