"""Every shell command README.md and docs/ show is checked against the real command line, so none goes stale.

Each `judgelab …` line (in a bash block, or inline in backticks) must name real sub-commands and real options;
each `make X` a real Makefile target. The example lines that are complete commands (no placeholder such as
`RUN_ID`, `[--json]` or `a|b`) are also run for real, against a throw-away database (`server`: subprocesses).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import typer

from dashboard.cli import app
from tests import forkcli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PLACEHOLDER = re.compile(r"[\[\]|…<>]|\b[A-Z][A-Z_]{1,}\b(?!=)")


def _block_commands(text: str) -> list[str]:
    out: list[str] = []
    for lang, body in re.findall(r"```(\w*)\n(.*?)```", text, re.S):
        if lang not in ("bash", "sh", "console", ""):
            continue
        joined = re.sub(r"\\\n\s*", " ", body)
        for line in joined.splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith(("judgelab ", "make ")):
                out.append(line)
    return out


def _inline_commands(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return [m for m in re.findall(r"`([^`\n]+)`", text) if m.startswith(("judgelab ", "make "))]


def _without_comment(command: str) -> str:
    # "   # what it does" after a command; a '#' inside quotes is part of the command
    out, quote = [], ""
    for i, ch in enumerate(command):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or command[i - 1].isspace()):
            break
        out.append(ch)
    return "".join(out).strip()


def documented_commands(*, inline: bool = True) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for command in _block_commands(text) + (_inline_commands(text) if inline else []):
            found.append((path.relative_to(ROOT).as_posix(), _without_comment(command)))
    return found


COMMANDS = documented_commands()
ROOT_COMMAND = typer.main.get_command(app)


def _is_group(command: Any) -> bool:
    return hasattr(command, "list_commands")  # typer carries its own click: no isinstance on click's classes


def _resolve(words: list[str]) -> tuple[Any, list[str], list[str]]:
    """The command a line names, the sub-command path, and the words after it."""
    command: Any = ROOT_COMMAND
    path: list[str] = []
    rest = list(words)
    while _is_group(command) and rest and not rest[0].startswith("-"):
        sub = command.get_command(typer.Context(command), rest[0])
        if sub is None:
            break
        path.append(rest.pop(0))
        command = sub
    return command, path, rest


def _options(command: Any) -> set[str]:
    names = {"--help"}
    for param in command.params:
        names.update(param.opts)
        names.update(param.secondary_opts)
    return names


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([\w.-]+):", text, re.M))


def test_the_docs_show_commands() -> None:
    files = {f for f, _ in COMMANDS}
    assert "README.md" in files and len(files) >= 8, files
    assert len([c for _, c in COMMANDS if c.startswith("judgelab")]) >= 40


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[f"{f}:{c[:60]}" for f, c in COMMANDS])
def test_a_documented_command_names_real_commands_and_options(where: str, command: str) -> None:
    if command.startswith("make "):
        targets = [w for w in command.split()[1:] if not w.startswith("-") and "=" not in w]
        missing = [t for t in targets if t not in _make_targets()]
        assert not missing, f"{where}: `{command}` names Makefile targets that do not exist: {missing}"
        return
    words = re.sub(r"[\[\]]", " ", command).split()[1:]
    cmd, path, rest = _resolve(words)
    assert path, f"{where}: `{command}` names no judgelab command"
    assert not _is_group(cmd), f"{where}: `{command}` stops at the group `{' '.join(path)}`"
    known = _options(cmd)
    for word in rest:
        for option in re.findall(r"(?:^|[|])(--?[a-zA-Z][\w-]*)", word.split("=")[0]):
            assert option in known, f"{where}: `{command}`: `judgelab {' '.join(path)}` has no option {option}"


RUNNABLE = [
    (f, c)
    for f, c in documented_commands(inline=False)
    if c.startswith("judgelab ")
    and not PLACEHOLDER.search(re.sub(r"'[^']*'|\"[^\"]*\"", "", c))
    and not c.startswith(("judgelab dashboard", "judgelab demo record", "judgelab bench"))
]


# The example files a documented line reads as "your own file".
EXAMPLE_FILES = {
    "messages.jsonl": "".join(
        f'{{"t": {t}, "channel": "C{t % 2}", "thread": null, "id": "m{t}", "author": "aki", "text": "message {t}?"}}\n'
        for t in range(0, 3600, 300)
    ),
    "conversation.yaml": "context:\n  - {speaker: user, text: 'My Python test fails with KeyError'}\n",
}
# A documented line that names a bundled model runs on the built-in mock here: the command line is the point.
WRITES = {"--output", "-o", "--record"}
BUNDLED = {"gemma3-270m": "mock", "smollm2-135m": "mock"}


@pytest.mark.server
@pytest.mark.parametrize(("where", "command"), RUNNABLE, ids=[f"{f}:{c[:60]}" for f, c in RUNNABLE])
def test_a_documented_example_runs(where: str, command: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "JUDGELAB_DATABASE_URL": f"sqlite:///{tmp_path / 'docs.db'}",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    (tmp_path / "data").symlink_to(ROOT / "data")
    for name, content in EXAMPLE_FILES.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    if "judgments.jsonl" in command:  # "your recorded judgments": recorded first, by the mock judge
        record = ["skip", "simulate", "--workload", "messages.jsonl", "--model", "mock", "--record", "judgments.jsonl"]
        prepared = forkcli.run(record, {**env, "PYTHONPATH": str(ROOT)}, cwd=tmp_path, timeout=300)
        assert prepared.returncode == 0, prepared.stderr[-2000:]
    words = [BUNDLED.get(w, w) for w in shlex.split(command)[1:]]
    for i, word in enumerate(words[:-1]):  # what a line writes under data/ goes to a copy, never the shipped file
        if word in WRITES and words[i + 1].startswith("data/"):
            copy = tmp_path / "written" / Path(words[i + 1]).name
            copy.parent.mkdir(exist_ok=True)
            if (ROOT / words[i + 1]).is_file():
                shutil.copyfile(ROOT / words[i + 1], copy)
            words[i + 1] = str(copy)
    # A new `judgelab` process each (forked from a warm one that has done the imports: tests/forkcli.py)
    done = forkcli.run(words, {**env, "PYTHONPATH": str(ROOT)}, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, f"{where}: `{command}` exited {done.returncode}:\n{done.stderr[-2000:]}"


def test_the_check_catches_a_stale_command_or_option() -> None:
    cmd, path, rest = _resolve(["runs", "list", "--nope"])
    assert path == ["runs", "list"] and "--nope" not in _options(cmd) and "--json" in _options(cmd)
    assert _resolve(["no-such-command"])[1] == []
    assert "no-such-target" not in _make_targets() and "test" in _make_targets()


def _anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def test_every_link_between_the_docs_resolves() -> None:
    broken = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        prose = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked.read_text(encoding="utf-8")):
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
