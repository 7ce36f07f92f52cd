"""The will judge: every participant's relevance, novelty and confidence for one user turn, by one of the methods
(batched judge, self, hybrid, likelihoods, embeddings; the offline two gated), the prompts and the parsing."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, create_model

from engine import judgemaps
from engine.diagnostics import Diagnosis, calibration_diagnosis
from engine.embeddings import EMBEDDER_ID, USE_ID, RecordedEmbedder
from engine.handraise.cast import Participant, Turn
from engine.handraise.decisions import (
    DEFAULT_EMBEDDER,
    Components,
    HandRaiseConfig,
    JudgeMethod,
    check_embedder,
    will_from,
)
from engine.handraise.features import cos_scale, embedding_features, novelty_of, recorded_features
from engine.handraise.gate import gate_components
from engine.handraise.likelihood import HANDRAISE, best_expertise, handraise_features
from engine.handraise.reasons import expertise_reason
from engine.handraise.selfjudge import reads_by_likelihood, self_components
from engine.quoting import DATA_NOTE, quote
from models.errors import ModelError, StructuredOutputError
from models.source import ModelLookup, ModelSource, model_source
from models.structured import FLOAT_LIKE, ExtractionError, extract_json

if TYPE_CHECKING:
    from engine.embeddings import TextEmbedder
    from engine.judgemaps import Calibration
    from models.base import ChatModel
    from models.types import OptionScores


@dataclass
class JudgeCall:
    """Facts of the calls a judgment took, for the telemetry."""

    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    call_ids: list[int] = field(default_factory=list)
    cost: float = 0.0  # dollars, as recorded with each call (0 for local models and replays)

    def add(self, completion: object) -> None:
        usage = getattr(completion, "usage", None)
        self.latency_s += float(getattr(completion, "latency_s", 0.0))
        self.cost += float(getattr(completion, "cost", 0.0) or 0.0)
        self.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
        self.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        self.calls += 1
        call_id = getattr(completion, "call_id", None)
        if call_id is not None:
            self.call_ids.append(call_id)

    def add_scores(self, calls: Sequence[OptionScores]) -> None:
        """Scoring calls (`score_options`): their count, prompt tokens and ids (their latency is timed around them)."""
        for c in calls:
            self.calls += 1
            self.prompt_tokens += c.prompt_tokens
            if c.call_id is not None:
                self.call_ids.append(c.call_id)


FIELDS = ("relevance", "novelty", "confidence")


def _component(raw: object) -> tuple[float, str | None]:
    """(value, why it failed) for one judged component: a number in [0, 1], else the fallback 0.0."""
    if raw is None:
        return 0.0, "missing"
    if isinstance(raw, bool):
        return 0.0, "invalid"
    try:
        if not isinstance(raw, FLOAT_LIKE):  # what float() refuses with a TypeError
            raise TypeError(type(raw).__name__)
        value = float(raw)
    except (TypeError, ValueError):
        return 0.0, "missing"
    except OverflowError:  # an integer too large for a float
        return 0.0, "invalid"
    if not (math.isfinite(value) and 0 <= value <= 1):
        return 0.0, "invalid"
    return value, None


def components_from(model: str, obj: object, flags: Sequence[str] = ()) -> Components:
    """Components from whatever a judge returned for one participant. The documented fallback: a
    component that is missing or not a number counts as 0.0 and is flagged `missing:<field>`; one
    outside [0, 1], NaN or infinite (a 0–10 answer, say) is a failed field: 0.0, flagged
    `invalid:<field>` — never clamped into 1.0; no object at all gives 0/0/0 flagged `fallback`. A will
    of 0 never raises a hand, so a broken judgment keeps the model quiet rather than loud."""
    out_flags = list(flags)
    if not isinstance(obj, Mapping):
        return Components(model=model, relevance=0, novelty=0, confidence=0, reason="", flags=[*out_flags, "fallback"])
    values: dict[str, float] = {}
    for name in FIELDS:
        value, why = _component(obj.get(name))
        if why is not None and f"{why}:{name}" not in out_flags:
            out_flags.append(f"{why}:{name}")
        values[name] = value
    reason = obj.get("reason")
    return Components(
        model=model, reason=str(reason).strip()[:200] if reason is not None else "", flags=out_flags, **values
    )


def _scaled(value: object, scale: int) -> object:
    """A score on a 0..scale skeleton as a 0–1 component; anything but a number there (a string, a
    boolean) is invalid, NaN — the skeleton only ever holds digits."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    try:
        number = float(value)
    except OverflowError:  # an integer too large for a float
        return math.inf
    # Checked before dividing: −1e-323 / 9 underflows to −0.0, which would pass as a valid 0.
    if not (math.isfinite(number) and 0 <= number <= scale):
        return math.nan
    return number / scale


def batched_components(data: object, ids: Sequence[str], flags: Sequence[str] = (), scale: int = 1) -> list[Components]:
    """Components of every participant from a batched answer ({id: {relevance, novelty, confidence,
    reason}}), each number divided by `scale`. An answer with any failed number (outside 0..scale, NaN,
    a boolean) is an invalid answer as a whole: every participant gets the fallback 0/0/0, flagged, since
    a judge that answered one participant on a 0–10 scale did so for the others too, and its "1" must
    not become the maximum."""
    data = data if isinstance(data, Mapping) else {}
    scaled: dict[str, object] = {}
    invalid: dict[str, list[str]] = {}
    for pid in ids:
        raw = data.get(pid)
        if isinstance(raw, Mapping) and scale != 1:
            raw = {**raw, **{f: _scaled(raw[f], scale) for f in FIELDS if f in raw}}
        scaled[pid] = raw
        if isinstance(raw, Mapping):
            # In the filled skeleton (scale 9) a slot always holds a digit: a null there is no skeleton output.
            invalid[pid] = [
                f"invalid:{f}"
                for f in FIELDS
                if f in raw and (_component(raw[f])[1] == "invalid" or (scale != 1 and raw[f] is None))
            ]
    base = [*flags] + ([f"scale:0-{scale}"] if scale != 1 else [])
    if any(invalid.values()):
        return [components_from(pid, None, [*base, "judge:invalid_answer", *invalid.get(pid, [])]) for pid in ids]
    return [components_from(pid, scaled[pid], base) for pid in ids]


def parse_template_fill(text: str, ids: Sequence[str]) -> list[Components]:
    """The filled skeleton of the local batched judgment (see `template_parts`) → components; scores are
    the digits 0–9 read as n/9. Anything else is a fallback, flagged — never raises."""

    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return [components_from(pid, None, ["scale:0-9", "judge:unparseable"]) for pid in ids]
    return batched_components(data, ids, (), scale=9)


@lru_cache(maxsize=32)
def _batch_schema(ids: tuple[str, ...]) -> type[BaseModel]:
    one = create_model(
        "WillScores",
        relevance=(float, Field(ge=0, le=1)),
        novelty=(float, Field(ge=0, le=1)),
        confidence=(float, Field(ge=0, le=1)),
        reason=(str, Field(max_length=60)),
    )
    fields: dict[str, Any] = {i: (one, ...) for i in ids}
    judgment: type[BaseModel] = create_model("HandRaiseJudgment", **fields)
    return judgment


DIGITS = [str(i) for i in range(10)]


def template_parts(ids: Sequence[str], reason_tokens: int = 8) -> list[tuple[str, Any]]:
    """The batched judgment's skeleton: {"id": {"relevance": d, "novelty": d, "confidence": d, "reason": "…"}, …}."""
    parts: list[tuple[str, Any]] = [("text", "{")]
    for k, pid in enumerate(ids):
        parts += [
            ("text", ("," if k else "") + f'"{pid}": {{"relevance": '),
            ("choice", DIGITS),
            ("text", ', "novelty": '),
            ("choice", DIGITS),
            ("text", ', "confidence": '),
            ("choice", DIGITS),
            ("text", ', "reason": "'),
            ("free", (reason_tokens, '"\n')),
            ("text", '"}'),
        ]
    parts.append(("text", "}"))
    return parts


class SelfJudgment(BaseModel):
    decision: Literal["RESPOND", "SKIP"]
    relevance: float = Field(ge=0, le=1)
    novelty: float = Field(ge=0, le=1)
    confidence: float = Field(ge=0, le=1)
    reason: str = Field(max_length=60)


JUDGE_SYSTEM = (
    "You decide who in a group chat should speak next. For each participant rate from 0 to 1: "
    "relevance (the topic against their expertise), novelty (what they would add beyond what was "
    "already said), confidence (how sure their answer would be). Reason: a few words."
)
SELF_SYSTEM = (
    "You are {name}, {role}. Expertise: {expertise}. Before answering, decide whether you should speak. "
    "RESPOND only if you would add something relevant and new; otherwise SKIP. Rate from 0 to 1 your "
    "relevance, novelty and confidence, and give a few words of reason."
)


def _quoted_context(turns: Sequence[Turn], names: Mapping[str, str], limit: int) -> str:
    """The recent turns for a judge: one a line, speaker and text each a quoted string, so a message or an
    answer holding newlines and a fake "Name: …" line cannot pass for a turn of its own."""
    shown = list(turns)[-limit:]
    return "\n".join(f"- {quote(names.get(t.speaker, t.speaker))}: {quote(t.text)}" for t in shown) or "(empty)"


def judge_messages(
    participants: Sequence[Participant], turns: Sequence[Turn], context_turns: int
) -> list[dict[str, str]]:
    names = {p.id: p.name for p in participants} | {"user": "User"}
    roster = "\n".join(f"- {p.id}: {quote(p.profile_text())}" for p in participants)
    return [
        {"role": "system", "content": f"{JUDGE_SYSTEM} {DATA_NOTE}"},
        {
            "role": "user",
            "content": f"Participants:\n{roster}\n\nConversation (latest last, one quoted "
            f"message a line):\n{_quoted_context(turns, names, context_turns)}\n\nRate every participant.",
        },
    ]


def self_messages(
    p: Participant, participants: Sequence[Participant], turns: Sequence[Turn], context_turns: int
) -> list[dict[str, str]]:
    names = {q.id: q.name for q in participants} | {"user": "User"}
    return [
        {
            "role": "system",
            "content": SELF_SYSTEM.format(
                name=p.name, role=p.role or "a participant", expertise=", ".join(p.expertise) or "general"
            )
            + f" {DATA_NOTE}",
        },
        {
            "role": "user",
            "content": "Conversation (latest last, one quoted message a line):\n"
            f"{_quoted_context(turns, names, context_turns)}\n\nShould you speak?",
        },
    ]


class WillJudge:
    """Judges every participant's will for one user turn with the configured method. Returns components
    (with flags) and the call facts; never raises for a bad or failed judgment (see `components_from`)."""

    def __init__(
        self,
        participants: Sequence[Participant],
        models: ModelLookup,
        config: HandRaiseConfig,
        embedder: TextEmbedder | None = None,
    ) -> None:
        self.participants = list(participants)
        self.model: ModelSource = model_source(models)
        self.config = config
        self._embedder = embedder  # given: every embedding of this judge (else one per embedder id, below)
        self._embedders: dict[str, TextEmbedder] = {}

    @property
    def embedder(self) -> TextEmbedder:
        """MiniLM (the likelihood judge's novelty, whose maps were fitted on its cosines): see `embedder_for`."""
        return self.embedder_for(EMBEDDER_ID)

    def embedder_for(self, embedder_id: str) -> TextEmbedder:
        """The embedder given, else the embedder of that id that goes with the judge model
        (`RecordedEmbedder.for_model`): its embeddings are calls of the run (model id = the embedder's id),
        replayed where the judge model replays."""
        if self._embedder is not None:
            return self._embedder
        if embedder_id not in self._embedders:
            try:
                model = self.model(self.config.judge_model)
            except (KeyError, ModelError):  # no judge model to go with (an embedding judge needs none): unrecorded
                self._embedders[embedder_id] = RecordedEmbedder(None, embedder_id=embedder_id)
            else:
                self._embedders[embedder_id] = RecordedEmbedder.for_model(model, embedder_id)
        return self._embedders[embedder_id]

    async def judge(
        self, turns: Sequence[Turn], method: JudgeMethod | None = None, candidates: Sequence[str] | None = None
    ) -> tuple[list[Components], JudgeCall]:
        method = method or self.config.judge_method
        comps, facts = await self._judge(turns, method, candidates)
        if self.config.gate and method in ("likelihood", "embedding") and comps:
            comps = gate_components(comps, turns, lambda: self.embedder_for(USE_ID))
        return comps, facts

    async def _judge(
        self, turns: Sequence[Turn], method: JudgeMethod, candidates: Sequence[str] | None
    ) -> tuple[list[Components], JudgeCall]:
        who = [p for p in self.participants if candidates is None or p.id in candidates]
        facts = JudgeCall()
        if not who:
            return [], facts
        if method == "judge":
            return await self._batched(who, turns, facts), facts
        if method == "self":
            return await self._self(who, turns, facts), facts
        if method == "embedding":
            started = time.perf_counter()
            out = self._embedding(who, turns)
            facts.latency_s = time.perf_counter() - started
            return out, facts
        if method == "likelihood":
            return await self._likelihood(who, turns, facts), facts
        judged = await self._batched(who, turns, facts)
        # hybrid: the judge filters; survivors judge themselves; each component is the mean of the two.
        survivors = [
            c.model
            for c in judged
            if will_from(c.relevance, c.novelty, c.confidence, self.config.weights) >= self.config.threshold
        ]
        own = {c.model: c for c in await self._self([p for p in who if p.id in survivors], turns, facts)}
        out = []
        for c in judged:
            s = own.get(c.model)
            if s is None:
                out.append(c.model_copy(update={"flags": [*c.flags, "hybrid:filtered_by_judge"]}))
                continue
            out.append(
                Components(
                    model=c.model,
                    relevance=(c.relevance + s.relevance) / 2,
                    novelty=(c.novelty + s.novelty) / 2,
                    confidence=(c.confidence + s.confidence) / 2,
                    reason=s.reason or c.reason,
                    flags=[*c.flags, *s.flags, "hybrid:judge+self"],
                )
            )
        return out, facts

    async def _batched(self, who: Sequence[Participant], turns: Sequence[Turn], facts: JudgeCall) -> list[Components]:

        model = self.model(self.config.judge_model)
        if getattr(model, "template_capable", False):
            return await self._batched_template(model, who, turns, facts)
        schema = _batch_schema(tuple(p.id for p in who))
        try:
            completion = await model.complete(
                judge_messages(who, turns, self.config.context_turns),
                schema=schema,
                temperature=0.0,
                max_tokens=40 + 45 * len(who),
            )
        except StructuredOutputError as exc:
            if "truncated" in exc.flags:  # cut off at max_tokens: no value of it is trusted
                return [components_from(p.id, None, ["judge:truncated", "truncated"]) for p in who]
            try:
                obj, repairs = extract_json(exc.raw_text or "")
            except ExtractionError:
                obj, repairs = None, []
            return batched_components(obj, [p.id for p in who], ["judge:unparseable", *repairs])
        except ModelError as exc:
            return [components_from(p.id, None, [f"judge_error:{type(exc).__name__}"]) for p in who]
        facts.add(completion)
        parsed = completion.parsed or {}
        return [
            components_from(
                p.id, parsed.get(p.id), [f for f in completion.flags if f.split(":", 1)[-1].startswith(p.id)]
            )
            for p in who
        ]

    async def _batched_template(
        self, model: ChatModel, who: Sequence[Participant], turns: Sequence[Turn], facts: JudgeCall
    ) -> list[Components]:
        """The batched judgment on a local model: the JSON skeleton is fixed text, so only the nine score
        digits (0-9, read as n/9) and three short reasons cost decoding steps — one request, a fraction of
        the grammar-constrained output's steps."""

        messages = judge_messages(who, turns, self.config.context_turns)
        messages[0]["content"] = messages[0]["content"].replace("rate from 0 to 1", "rate from 0 to 9")
        try:
            completion = await model.fill_template(messages, template_parts([p.id for p in who]))
        except ModelError as exc:
            return [components_from(p.id, None, [f"judge_error:{type(exc).__name__}"]) for p in who]
        facts.add(completion)
        return parse_template_fill(completion.text, [p.id for p in who])

    async def _self(self, who: Sequence[Participant], turns: Sequence[Turn], facts: JudgeCall) -> list[Components]:
        """Method B: each participant judges itself — by likelihood where its model is a base model, through its
        fitted self map (engine/handraise/selfjudge.py: the RESPOND bias corrected), else by writing a SelfJudgment."""
        read = [p for p in who if reads_by_likelihood(self.model(p.model_id))]
        if read:
            started = time.perf_counter()
            comps, calls = await self_components(self.model, read, turns, self.config.context_turns, self.embedder)
            facts.latency_s += time.perf_counter() - started
            facts.add_scores(calls)
            judged = {c.model: c for c in comps}
            judged |= {c.model: c for c in await self._self_written([p for p in who if p not in read], turns, facts)}
            return [judged[p.id] for p in who]
        return await self._self_written(who, turns, facts)

    async def _self_written(
        self, who: Sequence[Participant], turns: Sequence[Turn], facts: JudgeCall
    ) -> list[Components]:

        async def one(p: Participant) -> Components:
            try:
                completion = await self.model(p.model_id).complete(
                    self_messages(p, self.participants, turns, self.config.context_turns),
                    schema=SelfJudgment,
                    temperature=0.0,
                    max_tokens=80,
                )
            except ModelError as exc:
                return components_from(p.id, None, [f"self_error:{type(exc).__name__}", *getattr(exc, "flags", [])])
            facts.add(completion)
            parsed = completion.parsed or {}
            c = components_from(p.id, parsed, completion.flags)
            if parsed.get("decision") == "SKIP":
                # A model that says SKIP keeps its hand down whatever its scores (decide_hands reads the
                # flag); an @mention or @all still brings it in.
                return c.model_copy(update={"flags": [*c.flags, "self:SKIP"]})
            return c

        return list(await asyncio.gather(*(one(p) for p in who)))

    async def _likelihood(
        self, who: Sequence[Participant], turns: Sequence[Turn], facts: JudgeCall
    ) -> list[Components]:
        """The judge model ranks options instead of writing numbers (engine/likelihood.py): relevance and
        confidence are fitted maps of the PMI of each participant's expertise with the conversation;
        novelty is the embedding novelty, through this calibration's own fitted novelty map (a likelihood
        novelty, "can X add something new?", scored lower in cross-validation on the calibration split). A
        model that cannot score, or a failed call, gives the 0/0/0 fallback with a flag."""

        model = self.model(self.config.judge_model)
        started = time.perf_counter()
        partners, choice = self._ensemble(model.model_id)
        try:
            try:
                features, calls = await handraise_features(model, who, turns, self.config.context_turns, partners)
            except ModelError as exc:  # a partner that cannot score now (missing, down, no log-probabilities)
                if exc.model_id not in {p.model_id for p in partners} - {model.model_id}:
                    raise
                partners, choice = [], map_choice("likelihood", model.model_id, unavailable=exc.model_id)
                features, calls = await handraise_features(model, who, turns, self.config.context_turns)
        except ModelError as exc:
            return [components_from(p.id, None, [f"judge_error:{type(exc).__name__}"]) for p in who]
        facts.add_scores(calls)
        best = best_expertise(who, calls)
        cal, notes = choice.calibration, list(choice.flags)
        emb = embedding_features(who, turns, self.config.context_turns, self.embedder)
        novelty = {p.id: round(novelty_of(cal, e), 4) for p, e in zip(who, emb, strict=True)}
        emb_of = {p.id: e for p, e in zip(who, emb, strict=True)}
        facts.latency_s += time.perf_counter() - started
        out = []
        for p in who:
            f = features[p.id]
            if not all(math.isfinite(v) for v in f.values()):
                out.append(components_from(p.id, None, ["likelihood", "invalid:likelihood_features"]))
                continue
            if cal is None:  # no fitted map for this model: a plain squash of the PMI, flagged
                rel = conf = 1 / (1 + math.exp(-f["pmi_mean"]))
                flags = ["likelihood", "uncalibrated", *notes]
            else:
                who_is = f | {f"is:{p.id}": 1.0}  # a map refitted from labels may weigh who speaks
                rel, conf = cal.apply("relevance", who_is), cal.apply("confidence", who_is)
                flags = ["likelihood", f"calibration:{cal.version}", *notes]
                if partners:
                    flags.append("ensemble:" + cal.model_id)
            out.append(
                Components(
                    model=p.id,
                    relevance=round(rel, 4),
                    novelty=novelty[p.id],
                    confidence=round(conf, 4),
                    flags=flags,
                    reason=expertise_reason(best[p.id], f["pmi_mean"], f["pmi_max"]),
                    features=recorded_features(f, emb_of[p.id]),
                )
            )
        return out

    def _ensemble(self, judge_id: str) -> tuple[list[ChatModel], MapChoice]:
        """The other models whose likelihoods are averaged with the judge model's, and the map read
        (`map_choice`); a partner the lookup does not know leaves the judge model alone, flagged
        `ensemble_unavailable:<id>`."""
        choice = map_choice("likelihood", judge_id, self.config.likelihood_ensemble)
        partners = []
        for mid in choice.scorers[1:]:
            try:
                partners.append(self.model(mid))
            except KeyError:
                return [], map_choice("likelihood", judge_id, unavailable=mid)
        return partners, choice

    def _embedding(self, who: Sequence[Participant], turns: Sequence[Turn]) -> list[Components]:
        """No LLM: cosine similarities of the configured embedder's vectors (`HandRaiseConfig.embedder`, see
        `embedding_features`) mapped to [0, 1] by that embedder's fitted calibration
        `handraise.embedding.<embedder>` (logistic maps learnt on data/calibration/, never on the benchmark);
        without one, by the fixed (cos − 0.1) / 0.5, flagged `uncalibrated`. Novelty is the calibration's
        fitted map of the answers already given (`novelty_of`)."""
        embedder_id = self.config.embedder
        cal = map_choice("embedding", self.config.judge_model, embedder=embedder_id).calibration
        embedder = self.embedder_for(embedder_id)
        out = []
        for p, f in zip(who, embedding_features(who, turns, self.config.context_turns, embedder), strict=True):
            if cal is None:
                relevance, confidence, flags = cos_scale(f["rel_cos"]), cos_scale(f["conf_cos"]), ["uncalibrated"]
            else:
                relevance, confidence = cal.apply("relevance", f), cal.apply("confidence", f)
                flags = [f"calibration:{cal.version}"]
            if f["unread"] >= UNREAD_FLAG_AT:
                flags.append(f"embedder_unread:{f['unread']:.2f}")
            out.append(
                Components(
                    model=p.id,
                    relevance=round(relevance, 4),
                    novelty=round(novelty_of(cal, f), 4),
                    confidence=round(confidence, 4),
                    reason=expertise_reason(f["expertise"]),
                    flags=["embedding", *flags],
                    features=recorded_features({}, f),
                )
            )
        return out


EMBEDDING = "handraise.embedding"
# The share of unknown word pieces in the message from which the embedding judge flags its wills
# (`embedder_unread:<share>`): on MiniLM, the calibration split's F1 is 0.80 on English items and 0.45 on
# Japanese ones, whose kanji often reach it as unknown tokens. The multilingual use-m3 (the default) reads them
# all: its unknown share is 0, so it never flags.
UNREAD_FLAG_AT = 0.2


def ensemble_id(judge_id: str, partners: Sequence[str]) -> str:
    """The id a likelihood ensemble's map is fitted and looked up under: the judge model's id, then its
    partners', joined by "+" (`handraise.likelihood.gemma3-270m+smollm2-135m.json`)."""
    return "+".join([judge_id, *(m for m in dict.fromkeys(partners) if m != judge_id)])


@dataclass(frozen=True)
class MapChoice:
    """Which models' raw scores a hand-raise judge reads and the fitted map that turns them into will
    components: the one rule the judge applies and the pages and CLI describe. `scorers` are the models whose
    scores are read (the judge model first, then its likelihood partners; the embedder for the embedding
    judge), `map_id` the id the map is looked up under, `calibration` None when there is no map (the judge
    then flags `uncalibrated`), `flags` why an ensemble was left out (`ensemble_unmapped`,
    `ensemble_unavailable:<id>`) or that the adopted map could not be used (`map_fallback`), `partners_asked` the
    partners the configuration named."""

    method: str
    scorers: tuple[str, ...]
    map_id: str
    calibration: Calibration | None
    flags: tuple[str, ...] = ()
    partners_asked: tuple[str, ...] = ()

    @property
    def diagnosis(self) -> Diagnosis | None:
        """Whether the map carries measurable signal (stored with it, else computed from its figures)."""
        if self.calibration is None:
            return None
        stored = self.calibration.metrics.get("diagnosis")
        if isinstance(stored, Mapping):
            return Diagnosis.from_dict(stored)
        return calibration_diagnosis(self.calibration)

    def describe(self) -> str:
        """One line for a page or a CLI: who scores, through which map (trusted text: catalog ids and file
        metadata)."""
        if not self.scorers:
            return "Calibration: none (the judge writes its numbers)"
        alone = (
            f"no map for {ensemble_id(self.scorers[0], self.partners_asked)}: {self.scorers[0]} scores alone. "
            if "ensemble_unmapped" in self.flags
            else "".join(
                f"{f.split(':', 1)[1]} cannot score: {self.scorers[0]} scores alone. "
                for f in self.flags
                if f.startswith("ensemble_unavailable:")
            )
        )
        cal = self.calibration
        if cal is None:
            return f"{alone}Calibration: none for {self.map_id} — uncalibrated scores, flagged"
        cv = (
            f"; 5-fold CV by cast F1 {cal.metrics['cv_f1']:.2f}, top-1 {cal.metrics['cv_top1']:.2f}"
            if "cv_f1" in cal.metrics and "cv_top1" in cal.metrics
            else ""
        )
        scored = f"Scored by {' + '.join(self.scorers)}. " if self.method == "likelihood" else ""
        fallback = (
            f" — the adopted map cannot be used ({cal.fallback}): the shipped map is read" if cal.fallback else ""
        )
        return f"{alone}{scored}Calibration: {cal.label} (fitted on {cal.fitted_on}, {cal.n_items} rows{cv}){fallback}"


def map_choice(
    method: str,
    judge_id: str,
    ensemble: Sequence[str] = (),
    *,
    unavailable: str | None = None,
    embedder: str = DEFAULT_EMBEDDER,
) -> MapChoice:
    """The map a hand-raise judge reads (raises ValueError for an unreadable map file).
    - `likelihood`: with partners (`ensemble`, the judge model itself left out) whose combination has a
      fitted map (`ensemble_id`), all of them score and that map reads the averaged PMIs; a combination
      without a map leaves the judge model alone (averaged PMIs read through one model's map would be off
      its scale), flagged `ensemble_unmapped`; `unavailable` names a partner that cannot score now
      (`ensemble_unavailable:<id>`). Alone, the judge model's own map, else a `default` one, else none.
    - `embedding`: the map of the `embedder` (`handraise.embedding.<embedder>.json`), whatever the judge model;
      an unknown embedder id is a ValueError that lists the known ones.
    - any other method writes its own numbers: no scorers, no map."""
    if method == "embedding":
        cal = judgemaps.load_calibration(EMBEDDING, check_embedder(embedder))
        return MapChoice(method, (embedder,), embedder, cal, tuple(judgemaps.map_flags(cal)))
    if method != "likelihood":
        return MapChoice(method, (), "", None)
    partners = tuple(m for m in dict.fromkeys(ensemble) if m != judge_id)
    flags: tuple[str, ...] = ()
    if unavailable is not None:
        flags = (f"ensemble_unavailable:{unavailable}",)
    elif partners:
        combined = ensemble_id(judge_id, partners)
        cal = judgemaps.load_calibration(HANDRAISE, combined)
        if cal is not None:
            return MapChoice(method, (judge_id, *partners), combined, cal, tuple(judgemaps.map_flags(cal)), partners)
        flags = ("ensemble_unmapped",)
    for map_id in (judge_id, "default"):
        cal = judgemaps.load_calibration(HANDRAISE, map_id)
        if cal is not None:
            return MapChoice(method, (judge_id,), map_id, cal, (*flags, *judgemaps.map_flags(cal)), partners)
    return MapChoice(method, (judge_id,), judge_id, None, flags, partners)
