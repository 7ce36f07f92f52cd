"""Experiments: sweeps over case sets (grids or an Optuna search), decision parameters re-decided from
recorded raw judgments with no model call, call parameters answered through the call store; run here or
on a Ray cluster. One entry point: `run_experiment(definition, store, models, executor=...)`."""

from engine.experiments.adapters import mechanism
from engine.experiments.definition import (
    Cell,
    Cells,
    DefinitionError,
    Experiment,
    Range,
    Search,
    expand,
    line_map,
)
from engine.experiments.execution import HubModels, LocalExecutor
from engine.experiments.loading import load_definition, parse_definition
from engine.experiments.results import ExperimentResult, comparable_rows, list_experiments, show_experiment
from engine.experiments.run import run_experiment
from engine.jury.redecide import redecide as derive_jury

__all__ = [
    "Cell",
    "Cells",
    "DefinitionError",
    "Experiment",
    "ExperimentResult",
    "HubModels",
    "LocalExecutor",
    "Range",
    "Search",
    "comparable_rows",
    "derive_jury",
    "expand",
    "line_map",
    "list_experiments",
    "load_definition",
    "mechanism",
    "parse_definition",
    "run_experiment",
    "show_experiment",
]
