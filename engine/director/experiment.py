"""The director's hard rules as experiments see it: each line's rules evaluated once, each cell's cut-offs
re-decided from the recorded facts, with no call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.director.config import DirectorConfig, load_character
from engine.director.rules import evaluate_rules, retune
from engine.director.scripts import load_script
from engine.director.status import Status
from engine.experiments.adapters.base import ExperimentAdapter
from engine.experiments.definition import Experiment
from engine.experiments.evidence import OUTCOMES, label_outcomes


class DirectorAdapter(ExperimentAdapter):
    """The director's hard-rule cut-offs over a script: each line's rules are evaluated once (on its own, with
    no conversation state, as `director.rules` benchmarks them), and a cell re-decides the recorded facts
    with `engine.director.retune` — no text processing again, no model. Metrics: the share of lines that pass,
    warn, are mended (MODIFY) and are sent back (retry)."""

    name: str = "director"
    decision: frozenset[str] = frozenset(
        {
            "format_retry_lines",
            "format_warn_lines",
            "scatter_retry_sentences",
            "scatter_retry_topics",
            "scatter_warn_sentences",
            "scatter_warn_topics",
            "tone_pass",
            "tone_warn",
            "mend",
        }
    )
    base_keys: frozenset[str] = frozenset({"character"})
    metrics: tuple[str, ...] = ("pass_rate", "warn_rate", "modify_rate", "retry_rate", "calls")
    default_metric: str = "pass_rate"

    def config(self, base: Mapping[str, Any], params: Mapping[str, Any]) -> Any:

        return DirectorConfig.model_validate({k: v for k, v in {**base, **params}.items() if k != "character"})

    def load_cases(self, definition: Experiment) -> list[Any]:

        lines = load_script(definition.case_path())
        lines = lines[: definition.limit] if definition.limit else lines
        default = str(definition.base.get("character", "yana"))
        profiles = {c: load_character(c) for c in {line.character or default for line in lines}}
        return [(line.id, line.text, profiles[line.character or default]) for line in lines]

    async def record_cases(self, definition: Experiment, cases: Sequence[Any]) -> list[Any]:

        # recorded with the mends proposed whatever the base says, so a cell can turn MODIFY on or off
        config = self.config(definition.base, {}).model_copy(update={"mend": True})
        return [evaluate_rules(text, profile, config) for _, text, profile in cases]

    def decide(
        self, definition: Experiment, recording: list[Any], decision_params: Mapping[str, Any]
    ) -> dict[str, Any]:

        config = self.config(definition.base, decision_params)
        statuses = [retune(v, config) for v in recording]
        n = len(statuses) or 1
        return {
            "pass_rate": round(sum(s == Status.PASS for s in statuses) / n, 4),
            "warn_rate": round(sum(s == Status.WARN for s in statuses) / n, 4),
            "modify_rate": round(sum(s == Status.MODIFY for s in statuses) / n, 4),
            "retry_rate": round(sum(s == Status.RETRY for s in statuses) / n, 4),
            "calls": 0,
            OUTCOMES: label_outcomes([s.name for s in statuses], [f"line {i + 1}" for i in range(len(statuses))]),
        }

    def recording_json(self, recording: list[Any]) -> dict[str, Any]:
        return {
            "lines": [
                {
                    "status": v.status.name,
                    "rules": [{"rule": r.rule, "status": r.status.name, "facts": r.facts} for r in v.rules],
                }
                | ({"mend": v.mend.changes} if v.mend else {})
                for v in recording
            ]
        }
