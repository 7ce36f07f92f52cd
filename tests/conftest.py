"""Shared fixtures. Every test gets its own SQLite file and no API keys from the environment."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Under pytest-xdist each worker's llama.cpp (in process, in judgelab subprocesses, behind llama_cpp.server) gets its
# share of the cores: llama.cpp's threads wait for each other at every step, so two workers each running a model on
# every core starved each other (a llama_cpp.server test ran past its 600 s timeout on 2 cores).
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ.setdefault("JUDGELAB_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))

# OpenBLAS (numpy's and scipy's, each its own pool) starts a thread per core that spins after every call it
# threads: the tests' matrices are small, and the spinning took ~5 % of make test's CPU from the other workers
# (perf, 2 cores). One thread gave the same fitted coefficients where checked (200 logistic fits). Set before
# numpy loads, and inherited by the dashboards, CLI processes and servers the tests start.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# OpenMP's threads (torch's, for the embedders) sleep when they have no work instead of spinning: same threads,
# same numbers.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


# The garbage collector's full collections walk every object a worker holds: the imported libraries (Streamlit,
# SQLAlchemy, Plotly, scikit-learn…) and the project, ~1 million objects, none of them garbage. That was ~3 s of
# CPU per worker in `make test-fast` (~14 full collections of ~0.2 s each, measured with gc.callbacks). What has
# lived through collection is frozen (gc.freeze: still freed by its reference count, no longer walked for cycles),
# and again, after a full collection of what is left, after each test during which a full collection happened
# (the libraries a test imports for the first time): the full collections then walk only what the tests made since.
# The freezing happens between tests, after a test's teardown; what lives then (module and session fixtures, caches)
# and later becomes garbage in a cycle stays until the worker exits: the workers' peak memory was the same within
# noise in `make test-fast` (510–690 MB each, frozen or not) and is ~2.2 GB each in `make test`.
def pytest_collection_finish(session: pytest.Session) -> None:
    _collect_and_freeze()


def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    if gc.get_stats()[2]["collections"] != _FULL_COLLECTIONS[0]:
        _collect_and_freeze()


def _collect_and_freeze() -> None:
    gc.collect()
    gc.freeze()
    _FULL_COLLECTIONS[0] = gc.get_stats()[2]["collections"]


_FULL_COLLECTIONS = [0]  # full collections counted at the last freeze

KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in KEY_VARS:
        monkeypatch.delenv(var, raising=False)
    for var in [v for v in os.environ if v.startswith("JURY_")]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("JUDGELAB_SECRETS", str(tmp_path / "no-secrets.toml"))
    monkeypatch.setenv("JUDGELAB_DATABASE_URL", f"sqlite:///{tmp_path / 'test.db'}")
    yield


# What makes a test costly, one marker each (registered in pyproject.toml); `slow` is their union (plus a few long
# CPU-only tests marked `slow` by hand), `e2e` the old name of `browser`. Both are added here, so `-m "not slow"`
# (make test-fast) and `-m "not e2e"` keep meaning what they meant.
COSTS = frozenset({"model", "server", "browser", "postgres"})
# Module-scoped fixtures that start a server (llama_cpp.server, a dashboard): the tests that share one run on one
# worker (an xdist group, honoured by make test's `--dist loadgroup`), so it starts once, not once per worker.
SHARED_SERVERS = frozenset({"llama_server", "scoring_server", "world", "demo_world", "served"})


def _mechanism_words() -> dict[str, tuple[str, ...]]:
    """Each registered mechanism's name and the names its tests go by: its page's file and its URL path."""
    from dashboard.ui_registry import uis

    return {
        u.name: tuple(
            dict.fromkeys((u.name, Path(u.page).stem, u.url_path.replace("-", ""), *RUN_WORDS.get(u.name, ())))
        )
        for u in uis()
    }


# What a mechanism's runs are called where its tests name them: a hand-raise run is a conversation
# (`handraise.conversation`; `test_a_conversation_turn_can_be_cancelled`).
RUN_WORDS = {"handraise": ("conversation",)}


# pytest's own markers: a mechanism of one of these names is marked `<name>_mechanism` (`skip` would skip them all)
PYTEST_MARKERS = frozenset({"skip", "skipif", "xfail", "parametrize", "usefixtures", "filterwarnings", "timeout"})


def mechanism_marker(name: str) -> str:
    """The marker of a mechanism's tests: its name (`pytest -m jury`), `skip_mechanism` for the skip cache."""
    return f"{name}_mechanism" if name in PYTEST_MARKERS or name in COSTS | {"slow", "e2e"} else name


def pytest_configure(config: pytest.Config) -> None:
    for name, words in _mechanism_words().items():  # `pytest -m jury` runs the jury's tests
        config.addinivalue_line(
            "markers", f"{mechanism_marker(name)}: a test of the {name} mechanism (its file or name says {words})"
        )


def mechanism_of(item: pytest.Item, words: dict[str, tuple[str, ...]]) -> list[str]:
    """The mechanisms a test is about: the one its file is named after (`test_jury_live.py`, `test_skip_cache.py`,
    `test_handraise_page.py`), else each one its own name names (`test_fuzz_jury_evaluation`)."""
    stem = item.path.stem.removeprefix("test_")
    by_file = [m for m, names in words.items() if any(stem == w or stem.startswith(w + "_") for w in names)]
    if by_file:
        return by_file
    parts = item.name.split("[")[0].split("_")
    return [m for m, names in words.items() if any(w in parts for w in names)]


@pytest.hookimpl(tryfirst=True)  # before pytest's -m selection and xdist's groups read the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    words = _mechanism_words()
    for item in items:
        for mechanism in mechanism_of(item, words):
            item.add_marker(mechanism_marker(mechanism))
        if SHARED_SERVERS & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
        names = {mark.name for mark in item.iter_markers()}
        if "browser" in names and "e2e" not in names:
            item.add_marker("e2e")
        if names & COSTS and "slow" not in names:
            item.add_marker("slow")
    items[:] = costly_modules_first(items)


def costly_modules_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The modules holding a costly test (a model, a server, a browser, PostgreSQL) before the others, each module
    kept whole and in its order (its module-scoped servers start once): the workers take the long work first and
    the many short tests fill the end, so no worker is left alone with a long test at the end of the run (the
    longest first: what keeps `make test` within its minutes)."""
    costly = {item.path for item in items if COSTS & {mark.name for mark in item.iter_markers()}}
    order = {path: i for i, path in enumerate(dict.fromkeys(item.path for item in items))}
    return sorted(items, key=lambda item: (item.path not in costly, order[item.path]))


@pytest.fixture(scope="session", autouse=True)
def _cli_built_once() -> Iterator[None]:
    """typer's CliRunner rebuilds the click command tree of the app (40 commands, their signatures and type
    hints: ~22 ms of CPU) on every `invoke`; the app does not change during the session, so the tree built at
    the first invoke serves the later ones (click commands are made to be invoked again and again)."""
    import typer.testing

    build = typer.testing._get_command
    built: dict[int, tuple[object, object]] = {}  # id(app) → (app, its click command); the app kept alive

    def build_once(app: object) -> object:
        if id(app) not in built or built[id(app)][0] is not app:
            built[id(app)] = (app, build(app))  # type: ignore[arg-type]
        return built[id(app)][1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(typer.testing, "_get_command", build_once)
        yield


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """A real PostgreSQL server for the session (tests/postgres.py); skipped with a message when the
    binaries are missing, a failure instead when JUDGELAB_REQUIRE_POSTGRES=1 (CI)."""
    from tests.postgres import PostgresServer, find_bindir

    bindir = find_bindir()
    if bindir is None:
        message = (
            "PostgreSQL server binaries not found (apt-get install postgresql): the PostgreSQL variants of "
            "the store and CLI tests are skipped"
        )
        if os.environ.get("JUDGELAB_REQUIRE_POSTGRES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    server = PostgresServer(bindir).start()
    yield server
    server.stop()


# The PostgreSQL variant runs on a real server: `postgres`, hence `slow` (make test-fast keeps the SQLite one).
@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database of each kind: a SQLite file, and a new database on the real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("postgres_server").new_database()


@pytest.fixture
def store(tmp_path: Path):
    from engine.store import Store

    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    yield s
    s.dispose()


@pytest.fixture(scope="session")
def bundled_path() -> str:
    from models.backends.llamacpp import bundled_model_path

    return bundled_model_path()


@pytest.fixture
def mock_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every catalog model served by the built-in mock backend (tests/fakes/mock_catalog.py), in this process and in
    the judgelab processes it starts: for the tests where the model is not the point."""
    from models.catalog import cached_catalog
    from tests.fakes.mock_catalog import mock_catalog

    path = mock_catalog(tmp_path)
    monkeypatch.setenv("JUDGELAB_CATALOG", str(path))
    cached_catalog.cache_clear()
    _clear_page_catalog()
    yield path
    cached_catalog.cache_clear()  # before monkeypatch restores the variable: the next test reads the shipped one
    _clear_page_catalog()  # the pages' own cached catalog (st.cache_resource) too: a later page test reads the real one


def _clear_page_catalog() -> None:
    import sys

    state = sys.modules.get("dashboard.state")  # only where a page test has loaded it (it imports streamlit)
    if state is not None:
        state.get_catalog.clear()
