"""The benchmark harness: `BenchResult` (median / min / max over repeated runs, the figures, the target) and the
`@benchmark(name)` decorator that registers a benchmark in `BENCHMARKS`. A module of benchmarks imports this;
`dashboard.bench` imports every such module, then selects and runs them (`judgelab bench`)."""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from engine.store import Store

Progress = Callable[[str], None] | None


class BenchResult(BaseModel):
    name: str
    description: str
    unit: str = "s"
    samples: list[float] = Field(default_factory=list)
    median: float | None = None
    min: float | None = None
    max: float | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)
    target: str | None = None
    met: bool | None = None
    skipped: str | None = None

    @classmethod
    def from_samples(cls, name: str, description: str, samples: list[float], **kw: Any) -> BenchResult:
        return cls(
            name=name,
            description=description,
            samples=[round(s, 6) for s in samples],
            median=round(statistics.median(samples), 6),
            min=round(min(samples), 6),
            max=round(max(samples), 6),
            **kw,
        )

    def describe(self) -> str:
        lines = [f"## {self.name} — {self.description}"]
        if self.skipped:
            lines.append(f"   skipped: {self.skipped}")
            return "\n".join(lines)
        if self.median is not None:
            lines.append(
                f"   median {self.median:.4g} {self.unit} · min {self.min:.4g} · max {self.max:.4g} "
                f"(n={len(self.samples)})"
            )
        for key, value in self.metrics.items():
            shown = f"{value:.4g}" if isinstance(value, float) else value
            lines.append(f"   {key}: {shown}")
        if self.target:
            verdict = {True: "MET", False: "NOT MET", None: "n/a"}[self.met]
            lines.append(f"   target: {self.target} → {verdict}")
        return "\n".join(lines)


BenchFn = Callable[[int, Progress], BenchResult]
BENCHMARKS: dict[str, BenchFn] = {}


def benchmark(name: str) -> Callable[[BenchFn], BenchFn]:
    def register(fn: BenchFn) -> BenchFn:
        BENCHMARKS[name] = fn
        return fn

    return register


def _temp_store() -> Any:
    folder = tempfile.mkdtemp(prefix="judgelab-bench-")
    return Store(f"sqlite:///{folder}/bench.db"), folder
