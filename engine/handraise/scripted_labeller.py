"""A scripted labeller whose preference differs from the shipped hand-raise map: front-end performance questions
(bundles, rendering, main-thread work, web vitals) are the Designer's — the Designer should take them, and the
Coder should leave them to it — where the shipped map mostly gives them to the Coder, and to the Designer about
half the time. Its cast's messages were judged once by the real likelihood judge on the bundled models (Gemma 3
270M with SmolLM2-135M), recorded as a stored conversation run with every call: data/recordings/
labels-designer-perf.jsonl. The loop test and the bench's learning target read that run (no model call);
`python -m engine.handraise.scripted_labeller --record` records it again (load the models: run it under the model
lock)."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from engine.config import DATA_DIR
from engine.demo import export_runs, import_runs, parse_runs, write_runs
from engine.handraise.cast import DEFAULT_CAST
from engine.handraise.conversation import ConversationConfig, close_conversation, conversation_turn, open_conversation
from engine.handraise.decisions import HandRaiseConfig
from engine.handraise.label_refit import fit_candidate, label_rows, will_under
from engine.judgemaps import Calibration, load_calibration
from engine.labels.items import LabelItem, label_queue, labelable_items
from engine.labels.refit import map_name
from engine.labelstore import Label, add_label
from engine.store import Store
from models.registry import ModelHub
from models.source import ModelLookup

Topic = Literal["frontend_perf", "design", "backend", "research"]
USER = "scripted-labeller"
RECORDING = DATA_DIR / "recordings" / "labels-designer-perf.jsonl"

MESSAGES: list[tuple[Topic, str]] = [
    ("frontend_perf", "Our JavaScript bundle is 2 MB. How do we shrink it with tree shaking and code splitting?"),
    ("frontend_perf", "The React list re-renders on every keystroke. Should we memoise the rows?"),
    ("frontend_perf", "Hydration of the Next.js storefront takes 3 seconds on phones. How do we speed it up?"),
    ("frontend_perf", "Long tasks block the main thread for 400 ms after the page loads. How do we break them up?"),
    ("frontend_perf", "Should we move the search filtering into a web worker so typing stays responsive?"),
    (
        "frontend_perf",
        "Our single-page app leaks memory after ten minutes of navigating between routes. How do we find it?",
    ),
    ("frontend_perf", "Interaction to Next Paint is 600 ms on the checkout page. What usually causes that?"),
    ("frontend_perf", "The service worker caches stale JavaScript after a deploy. How should we version the cache?"),
    (
        "frontend_perf",
        "Third-party analytics scripts delay time to interactive by two seconds. Can we load them later?",
    ),
    ("frontend_perf", "Our Redux store re-renders every connected component on each update. How do we cut the waste?"),
    ("frontend_perf", "Lighthouse flags unused JavaScript from a charting library. Should we lazy-load it?"),
    ("frontend_perf", "The product page makes forty API calls before it shows anything. How do we render it sooner?"),
    ("frontend_perf", "First contentful paint waits for a large script in the head. Should we defer it?"),
    ("frontend_perf", "Which library keeps a virtualised table of ten thousand rows responsive in the browser?"),
    ("frontend_perf", "The mobile web app drains the battery because of a polling timer. What should replace it?"),
    ("frontend_perf", "Our Vue app downloads every locale file up front. How do we load them on demand?"),
    ("frontend_perf", "How do we measure real-user web vitals in production, not just in Lighthouse?"),
    ("frontend_perf", "The page janks because a resize listener runs on every frame. How do we throttle it?"),
    ("frontend_perf", "Is server-side rendering or static generation faster for our marketing pages?"),
    ("frontend_perf", "Our webpack build ships two copies of lodash. How do we deduplicate the bundle?"),
    ("design", "Which colour palette works for a calm meditation app?"),
    ("design", "Is a hamburger menu or a bottom tab bar better for our mobile navigation?"),
    ("design", "What font pairing would suit a serious finance newsletter?"),
    ("design", "Our sign-up form confuses people. How should we lay out the fields?"),
    ("design", "How much contrast do the grey buttons need to be readable?"),
    ("design", "What icon style fits a playful children's reading app?"),
    ("design", "Which illustration style suits an onboarding flow for older users?"),
    ("backend", "My Python script crashes with a KeyError when it reads the config. How do I fix it?"),
    ("backend", "How do I add an index to speed up this slow PostgreSQL join?"),
    ("backend", "The REST API returns 500 when the JSON body is missing a field. How should I validate it?"),
    ("backend", "How do I mock the database connection in my pytest unit tests?"),
    ("backend", "My async Python worker deadlocks when two tasks share a lock. Where do I start debugging?"),
    ("backend", "What is the cleanest way to paginate results in a Flask API?"),
    ("backend", "How do I stream a large CSV export from Django without running out of memory?"),
    ("research", "Is a t-test valid for our A/B test with 40 users per group?"),
    ("research", "Which papers compare retrieval-augmented generation with fine-tuning?"),
    ("research", "How many annotators do we need for a reliable inter-rater agreement?"),
    ("research", "Our experiment shows a p-value of 0.04 after peeking at the data daily. Can we trust it?"),
    ("research", "How should we evaluate a summariser without reference summaries?"),
    ("research", "What sample size do we need to detect a 2 % lift in conversion?"),
]

# Who the labeller wants to hear on each topic: the shipped split's owners, and on front-end performance the
# Designer alone.
WANTED: dict[Topic, frozenset[str]] = {
    "frontend_perf": frozenset({"designer"}),
    "design": frozenset({"designer"}),
    "backend": frozenset({"coder"}),
    "research": frozenset({"researcher"}),
}


def topic_of(text: str) -> Topic:
    for topic, message in MESSAGES:
        if message == text:
            return topic
    raise KeyError(f"not a scripted message: {text[:60]!r}")


def preference(text: str, participant: str) -> str:
    """The scripted labeller's label for a hand: "speak" or "skip"."""
    return "speak" if participant in WANTED[topic_of(text)] else "skip"


def load_recording(store: Store, path: Path = RECORDING) -> str:
    """Load the recorded conversation run into `store` (idempotent); returns its run id."""
    documents = parse_runs(path)
    import_runs(store, documents)
    return documents[0].run.id


def label_items(store: Store, items: Sequence[LabelItem], user: str = USER) -> list[Label]:
    """The scripted labeller labels `items` (source `approval`, the item's context stored with each label)."""
    return [
        add_label(
            store,
            mechanism="handraise",
            run_id=item.run_id,
            item_key=item.key,
            label=preference(str(item.context.get("text") or ""), str(item.context.get("participant"))),
            source="approval",
            user=user,
            context=item.context,
        )
        for item in items
    ]


@dataclass(frozen=True)
class Learning:
    """Agreement with the scripted labeller on the items it did not label: the map in use against a candidate
    fitted on its `n` labels."""

    n: int
    held_out: int
    shipped: float
    candidate: float

    @property
    def gain_points(self) -> float:
        return 100 * (self.candidate - self.shipped)


def learning(store: Store, run_id: str, n: int, seed: int = 0) -> Learning:
    """Label `n` random items of the recorded cast (as the labeller would, one by one from the queue), fit a
    candidate on them alone, and measure both maps on every other item of the cast against the labeller."""
    user = f"{USER}-{seed}-{n}"
    run = store.get_run(run_id)
    assert run is not None
    everything = labelable_items(store, run)
    chosen = label_queue(store, mechanism="handraise", rule="random", n=n, seed=seed, user=user, run_ids=[run_id])
    labels = label_items(store, chosen, user)
    config = HandRaiseConfig()
    rows = label_rows(labels)
    fitted = fit_candidate(rows, config)
    picked = {i.key for i in chosen}
    rest = [i for i in everything if i.key not in picked]
    truth = [preference(str(i.context["text"]), str(i.context["participant"])) == "speak" for i in rest]
    test_rows = [{**i.context["features"], "participant": i.context["participant"]} for i in rest]
    candidate = Calibration(name="candidate", model_id="-", version="-", maps=fitted["maps"])
    shipped = load_calibration(map_name("handraise"), str(rest[0].context.get("map_id")))
    assert shipped is not None
    said_c = [will_under(candidate, r, config) >= config.threshold for r in test_rows]
    said_s = [will_under(shipped, r, config) >= config.threshold for r in test_rows]
    right_c = sum(p == t for p, t in zip(said_c, truth, strict=True)) / len(rest)
    right_s = sum(p == t for p, t in zip(said_s, truth, strict=True)) / len(rest)
    return Learning(n=n, held_out=len(rest), shipped=right_s, candidate=right_c)


def record(store: Store, models: ModelLookup, path: Path = RECORDING) -> str:
    """Judge every message once (likelihood judge with its default ensemble, the last message alone), store it
    as a `handraise.conversation` run with every call, and write that run to `path`."""
    config = ConversationConfig(participants=DEFAULT_CAST, config=HandRaiseConfig(context_turns=1))
    session = open_conversation(config, models, store, name="scripted labeller: designer on front-end performance")
    session.conversation.labeller = None  # the recording is the judge's; the labeller labels later
    for _, text in MESSAGES:
        asyncio.run(conversation_turn(session, text, answer=False))
    close_conversation(session)
    write_runs(export_runs(store, [session.run_id]), path)
    return session.run_id


if __name__ == "__main__":  # pragma: no cover - a recording, run by hand under the model lock
    if "--record" not in sys.argv:
        raise SystemExit("usage: python -m engine.handraise.scripted_labeller --record")
    with tempfile.TemporaryDirectory() as folder:
        recording_store = Store(f"sqlite:///{folder}/record.db")
        hub = ModelHub(call_log=recording_store)
        run_id = record(recording_store, hub.get)
        print(f"recorded run {run_id} to {RECORDING}")
