"""The real `judgelab` process, started by forking a warm one: each call is a new process that runs
`dashboard.cli.main()` with its own arguments, environment, working directory, stdin, stdout and stderr, and
exits with its own code; only the imports (about a second of CPU per process) are done once, by a zygote
process per test worker that has imported `dashboard.cli` and the command modules and nothing else.

What the zygote has done before forking is import modules: no command ran, no setting was read, no
database was opened; so a variable set for one call (JUDGELAB_MAX_INPUT_MB=0, a bad JUDGELAB_DATABASE_URL)
is read by that call as in a cold start. Tests that are about start-up itself (a broken install, import
time, signals to a fresh interpreter) keep `subprocess.run([sys.executable, "-m", "dashboard.cli", ...])`.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ZYGOTE = r"""
import json, os, resource, signal, sys, time
import dashboard.cli
from dashboard.commands import calibrate, demo, experiment  # noqa: F401
import dashboard.ui_registry  # noqa: F401 — every mechanism's CLI
import engine.store, engine.config  # noqa: F401

def child(req):
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    if req.get("memory_bytes"):
        resource.setrlimit(resource.RLIMIT_AS, (req["memory_bytes"], req["memory_bytes"]))
    fin = os.open(req["stdin"], os.O_RDONLY)
    fout = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    ferr = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fin, 0); os.dup2(fout, 1); os.dup2(ferr, 2)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.argv = ["judgelab", *req["args"]]
    code = 1
    try:
        dashboard.cli.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush(); sys.stderr.flush()
        finally:
            os._exit(code)

for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        child(req)
    deadline = time.monotonic() + req["timeout"]
    timed_out = False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            timed_out = True
            status = 9
            break
        time.sleep(0.005)
    code = os.waitstatus_to_exitcode(status) if not timed_out else -9
    sys.stdout.write(json.dumps({"code": code, "timed_out": timed_out}) + "\n")
    sys.stdout.flush()
"""

_lock = threading.Lock()
_zygote: subprocess.Popen[str] | None = None


def _start() -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", ZYGOTE],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    atexit.register(_stop, proc)
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()


def run(
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: Path = ROOT,
    timeout: float = 120,
    stdin: str = "",
    memory_bytes: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """`judgelab ARGS` in a new process with exactly `env` (the caller merges os.environ if it wants it);
    raises subprocess.TimeoutExpired after `timeout` seconds, as subprocess.run does."""
    global _zygote
    with _lock, tempfile.TemporaryDirectory(prefix="forkcli-") as tmp:
        if _zygote is None or _zygote.poll() is not None:
            _zygote = _start()
        paths = {name: str(Path(tmp) / name) for name in ("stdin", "stdout", "stderr")}
        Path(paths["stdin"]).write_text(stdin, encoding="utf-8")
        request = {
            "args": list(args),
            "env": dict(env),
            "cwd": str(cwd),
            "timeout": timeout,
            "memory_bytes": memory_bytes,
            **paths,
        }
        assert _zygote.stdin is not None and _zygote.stdout is not None
        _zygote.stdin.write(json.dumps(request) + "\n")
        _zygote.stdin.flush()
        answer = _zygote.stdout.readline()
        if not answer:
            _zygote = None
            raise RuntimeError("the judgelab zygote process died")
        result = json.loads(answer)
        out = Path(paths["stdout"]).read_text(encoding="utf-8", errors="replace")
        err = Path(paths["stderr"]).read_text(encoding="utf-8", errors="replace")
        if result["timed_out"]:
            raise subprocess.TimeoutExpired(["judgelab", *args], timeout, out, err)
        return subprocess.CompletedProcess(["judgelab", *args], result["code"], out, err)
