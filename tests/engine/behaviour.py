"""What the experiments store, run on scripted models (no model file, no clock in the figures): a set of jury,
hand-raise, confidence, director and skip experiments (a grid with a resume, a search with repeats, per-model
limits, the shipped definitions), every stored experiment, cell and recording run dumped with its config,
summary, status, name and events, ids, paths and times masked.

`tests/golden/experiments.json.gz` holds that dump as the code made it before the renovation of issue #27
(main at 9dca4cc): tests/engine/test_behaviour_unchanged.py compares today's dump with it. Regenerate it only
for a change that means to alter what is stored: `python -m tests.engine.behaviour --write`."""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "experiments.json.gz"
KINDS = ("experiment", "experiment.cell", "experiment.record")


def _dump(store: Any, tmp: Path, root: Path) -> list[Any]:
    runs = []
    for kind in KINDS:
        for r in sorted(store.list_runs(kind, limit=100000), key=lambda r: (r.name, r.started_at)):
            if r.kind != kind:
                continue
            events = [(e.type, e.payload) for e in store.events(r.id)]
            runs.append(
                {
                    "kind": r.kind,
                    "name": r.name,
                    "status": r.status,
                    "config": r.config,
                    "summary": r.summary,
                    "error": r.error,
                    "events": events,
                }
            )
    text = json.dumps(runs, default=str).replace(str(root), "ROOT").replace(str(tmp), "TMP")
    text = re.sub(r'"digest": "[0-9a-f]+"', '"digest": "D"', text)
    text = re.sub(r"exp-\d{8}-\d{6}-[0-9a-f]{6}", "EXP", text)
    text = re.sub(r'"(run_id|recording_run|id)": "[^"]+"', r'"\1": "RID"', text)
    times = "latency_s|duration_s|ts|started_at|finished_at|started_s|ended_s|elapsed_s|wall_s"
    text = re.sub(rf'"({times})": [0-9.e-]+', r'"\1": 0', text)
    text = re.sub(r'"(started_at|finished_at|ts)": "[^"]+"', r'"\1": "T"', text)
    return sorted(json.loads(text), key=lambda r: json.dumps(r, sort_keys=True))


def stored_experiments() -> dict[str, list[Any]]:
    """The dump of every experiment set, by name."""
    from engine.experiments import Search, load_definition, run_experiment
    from engine.store import Store
    from tests.engine.test_experiments import ROOT, handraise_definition, jury_yaml, scripted_judge, scripted_models

    out: dict[str, list[Any]] = {}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)

        def fresh(name: str) -> Store:
            return Store(f"sqlite:///{tmp}/{name}.db")

        def keep(store: Store, name: str) -> None:
            out[name] = _dump(store, tmp, ROOT)
            store.dispose()

        s = fresh("jury")
        grid = "  consensus_threshold: [0.5, 0.67, 1.0]\n  temperature: [0.0, 0.3]\n  stagnation_rounds: [1, 2]\n"
        d = load_definition(jury_yaml(tmp, grid))
        first = asyncio.run(run_experiment(d, s, scripted_models(s)))
        asyncio.run(run_experiment(d, s, scripted_models(s), resume=first.experiment_id))
        keep(s, "jury_grid_and_resume")

        s = fresh("search")
        grid = (
            "  consensus_threshold: [0.5, 0.67, 1.0, 2.0]\n  final_judgment_method: [majority_vote, weighted_average]\n"
        )
        d = load_definition(jury_yaml(tmp, grid, "repeats: 2\n"))
        asyncio.run(run_experiment(d, s, scripted_models(s)))
        searched = d.model_copy(update={"search": Search(metric="accuracy", n_trials=6)})
        asyncio.run(run_experiment(searched, s, scripted_models(s)))
        keep(s, "jury_search")

        s = fresh("hr")
        d = handraise_definition(tmp, "threshold: {from: 0.3, to: 0.7, step: 0.2}\nmode: [focus, brainstorm]\n")
        d = d.model_copy(update={"per_model_concurrency": {"scripted-judge": 1}, "concurrency": 3})
        asyncio.run(run_experiment(d, s, scripted_judge(s)))
        keep(s, "handraise")

        for name in ("confidence-decisions.yaml", "director-cutoffs.yaml", "skip-windows.yaml"):
            s = fresh(name)
            asyncio.run(run_experiment(load_definition(ROOT / "data" / "experiments" / name), s))
            keep(s, name)
    return out


def golden() -> dict[str, list[Any]]:
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as f:
        return json.load(f)


def write(dump: dict[str, list[Any]]) -> None:
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(GOLDEN, "wb", mtime=0) as f:
        f.write(json.dumps(dump, indent=1, sort_keys=True).encode("utf-8"))


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write(stored_experiments())
    elif len(sys.argv) == 3 and sys.argv[1] == "--from-json":  # a dump made elsewhere (e.g. by older code)
        write(json.loads(Path(sys.argv[2]).read_text(encoding="utf-8")))
    else:
        sys.exit("usage: python -m tests.engine.behaviour --write | --from-json DUMP.json")
