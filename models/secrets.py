"""API keys come from the environment or `.streamlit/secrets.toml`, nowhere else — and never leave.

Values are returned to the backend that needs them and never stored, logged or shown. Redaction works
by *value*: every configured key (each catalog `api_key_env`, the providers' variables, any variable
named like a key, every string in the secrets file) is replaced by `<ITS_NAME>` wherever text leaves
the process or reaches the store — model errors and replies, the call log, events, runs, log records,
the CLI's stdout and stderr. The credentials of a URL (`scheme://user:password@host` in a variable, the secrets
file or the catalog) are secrets too, in every form they could come back in (`url_credentials`: as written,
decoded, and the base64 of `user:password` that `Authorization: Basic` carries); `plain_url` takes them out of a
URL before anything is sent to it.
"""

from __future__ import annotations

import base64
import functools
import io
import json
import logging
import os
import re
import sys
import threading
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote, unquote, urlsplit

from models import files, safe_yaml
from models.files import InputError, read_text

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CATALOG = Path(__file__).with_name("catalog.yaml")
# Variables whose name says they hold a credential, whatever the catalog says.
KEY_LIKE_NAME = re.compile(r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD)$", re.IGNORECASE)
NOT_SECRETS = frozenset({"JUDGELAB_SECRETS"})  # a path, not a key
MIN_SECRET_LENGTH = 8  # shorter values would redact ordinary words and numbers
MIN_TOKEN_USER = 16  # a URL's user name alone this long is taken for a token; shorter, for a name
# The user name and password of a URL (`scheme://user:password@host`), anywhere in a text: a catalog file (read as
# text, so a broken one counts too), a variable's value. Up to the last '@' of the host part, as URLs are read: a
# password with an '@' written as is (`http://u:p@ss@host`) is taken whole.
URL_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^/?#\s'\"]+)@")


def plain_url(url: str | None) -> str | None:
    """The URL without its user name and password (`http://user:pw@host/v1` → `http://host/v1`): httpx sends
    those preemptively as `Authorization: Basic`, to whatever answers, before any server asked."""
    if not url or "@" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return URL_USERINFO.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)], url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()


def url_credentials(text: str) -> list[str]:
    """Every form in which the credentials of the URLs in a text could come back: the password as written, decoded
    and encoded; `user:password`; and the base64 of it (`Authorization: Basic …`, as a server may echo it). A user
    name alone is a credential when it is long enough to be a token (`https://TOKEN@host`), not `postgres@`."""
    forms: list[str] = []
    for match in URL_USERINFO.finditer(text or ""):
        userinfo = match.group(1)
        user, _, password = userinfo.partition(":")
        secret = password or (user if len(unquote(user)) >= MIN_TOKEN_USER else "")
        if not secret:
            continue
        for raw in {userinfo, unquote(userinfo)}:
            basic = base64.b64encode((raw if password else raw + ":").encode()).decode()
            forms += [raw, basic, basic.rstrip("=")]
        forms += [secret, unquote(secret), quote(unquote(secret), safe="")]
    return forms


def secrets_paths() -> list[Path]:
    return [Path(p) for p in _secrets_files()]


_SHIPPED_SECRETS = os.path.join(PROJECT_ROOT, ".streamlit", "secrets.toml")


def _secrets_files() -> list[str]:
    """`secrets_paths` as strings (what the fingerprint of every redaction stats: no Path objects made)."""
    explicit = os.environ.get("JUDGELAB_SECRETS")
    if explicit:
        return [_as_read(explicit)]
    here = os.path.join(os.getcwd(), ".streamlit", "secrets.toml")
    return [here] if here == _SHIPPED_SECRETS else [here, _SHIPPED_SECRETS]


def _read_secrets() -> dict[str, object]:

    for path in secrets_paths():
        if not path.exists():
            continue
        try:  # the checked reader: a FIFO or a device in its place cannot hang the app
            return tomllib.loads(read_text(path))
        except (tomllib.TOMLDecodeError, InputError):
            # A broken secrets file must not take the app down; the key is then simply missing.
            return {}
    return {}


def find_secret(name: str) -> str | None:
    value = os.environ.get(name)
    if value:
        return value
    secrets = _read_secrets()
    found = secrets.get(name) or secrets.get(name.lower())
    return found if isinstance(found, str) and found else None


# -- the set of secret values --------------------------------------------------------------------------

_REGISTERED_NAMES: set[str] = set()
_LOCK = threading.Lock()
_LOCAL = threading.local()  # guards against re-entry: collecting may log, and log records are redacted


@dataclass(frozen=True)
class _Known:
    fingerprint: tuple[Any, ...]
    names: dict[str, str]  # value → variable name
    pattern: re.Pattern[str] | None


_KNOWN: _Known | None = None


def register_key_names(names: Iterable[str | None]) -> None:
    """Variable names that hold keys (a loaded catalog's `api_key_env`s): their values are redacted too."""
    _REGISTERED_NAMES.update(n for n in names if n)  # part of the fingerprint: the next redaction sees them


def refresh_secrets() -> None:
    """Collect the secret values again at the next redaction (they are also re-collected by themselves
    whenever the environment, the secrets file or the catalog file changes)."""
    global _KNOWN
    _KNOWN = None


def _stat(path: Path | str) -> tuple[str, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return str(path), st.st_mtime_ns, st.st_size


def _catalog_path() -> Path:
    return Path(_catalog_file())


def _catalog_file() -> str:
    named = os.environ.get("JUDGELAB_CATALOG")
    return _as_read(named) if named else _DEFAULT_CATALOG_FILE


@functools.lru_cache(maxsize=64)
def _as_read(named: str) -> str:
    """A path from the environment as `Path` reads it (`secrets.toml/` and `secrets.toml/.` name the file): the
    fingerprint stats exactly the file the readers open, or a change to it would go unseen."""
    return str(Path(named))


_DEFAULT_CATALOG_FILE = str(DEFAULT_CATALOG)


_CATALOG_NAMES: dict[tuple[str, int, int], frozenset[str]] = {}  # the last catalog read, by path, mtime and size


def _catalog_key_names(path: Path) -> set[str]:
    """The `api_key_env` names of a catalog file, read leniently: a broken catalog is reported elsewhere.
    Parsed again only when the file changes (the secrets are re-collected whenever the environment does)."""
    stat = _stat(path)
    if stat is not None and stat in _CATALOG_NAMES:
        return set(_CATALOG_NAMES[stat])
    names = _read_catalog_key_names(path)
    if stat is not None:
        _CATALOG_NAMES.clear()
        _CATALOG_NAMES[stat] = frozenset(names)
    return names


def _read_catalog_key_names(path: Path) -> set[str]:
    try:
        data = safe_yaml.load(files.read_text(path))
        models = data.get("models", []) if isinstance(data, dict) else []
        return {m["api_key_env"] for m in models if isinstance(m, dict) and isinstance(m.get("api_key_env"), str)}
    except Exception:  # any unreadable catalog: no names from it
        return set()


_CATALOG_CREDENTIALS: dict[tuple[str, int, int], tuple[str, ...]] = {}  # the same, for base_url credentials


def _catalog_credentials(path: Path) -> list[str]:
    """The credentials written into the URLs of a catalog file (refused when it is loaded, redacted all the same:
    a broken file's error may quote the line)."""
    stat = _stat(path)
    if stat is not None and stat in _CATALOG_CREDENTIALS:
        return list(_CATALOG_CREDENTIALS[stat])
    try:
        forms = tuple(url_credentials(files.read_text(path)))
    except Exception:  # any unreadable catalog: nothing from it
        forms = ()
    if stat is not None:
        _CATALOG_CREDENTIALS.clear()
        _CATALOG_CREDENTIALS[stat] = forms
    return list(forms)


def _strings(value: object, name: str) -> Iterable[tuple[str, str]]:
    if isinstance(value, str):
        yield value, name
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, str(k).upper() if isinstance(v, str) else name)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, name)


def _fingerprint() -> tuple[Any, ...]:
    """What the secret values depend on, looked at by every redaction (every text stored, logged or shown: tens of
    thousands when a recording is imported), so kept to a few microseconds: the environment as `os.environ` holds
    it, undecoded, and one `stat` per file."""
    return (
        _environment(),
        tuple(_stat(p) for p in _secrets_files()),
        _stat(_catalog_file()),
        frozenset(_REGISTERED_NAMES),
    )


def _environment() -> dict[Any, Any]:
    """A copy of the environment's variables as `os.environ` keeps them (`_data`, encoded: copying and comparing it
    takes a microsecond, where `os.environ.items()` decodes every name and value, ~15 µs); decoded where an
    interpreter keeps no such dict. Every change made through `os.environ` shows in either."""
    data = getattr(os.environ, "_data", None)
    return dict(data) if isinstance(data, dict) else dict(os.environ)


def _collect(fingerprint: tuple[Any, ...]) -> _Known:
    # The backends register their key variables (models.base.Requires.key_env), a catalog its api_key_envs.
    names = _REGISTERED_NAMES | _catalog_key_names(_catalog_path())
    names |= {n for n in os.environ if KEY_LIKE_NAME.search(n)}
    found: dict[str, str] = {}
    for name in sorted(names - NOT_SECRETS):
        value = os.environ.get(name)
        if value:
            found.setdefault(value, name)
    in_file = list(_strings(_read_secrets(), "SECRET"))
    for value, name in in_file:
        found.setdefault(value, name)
    # The credentials of every URL in the environment (JUDGELAB_DATABASE_URL, OPENAI_BASE_URL, OLLAMA_HOST…), in
    # the secrets file and in the catalog, in each form they could come back in.
    urls = [("DATABASE" if n == "JUDGELAB_DATABASE_URL" else n, v) for n, v in sorted(os.environ.items())] + [
        (n, v) for v, n in in_file
    ]
    for name, value in urls:
        for form in url_credentials(value) if "@" in value else ():
            found.setdefault(form, f"{name}_PASSWORD")
    for form in _catalog_credentials(_catalog_path()):
        found.setdefault(form, "BASE_URL_PASSWORD")
    values = {v.strip(): n for v, n in found.items() if len(v.strip()) >= MIN_SECRET_LENGTH}
    # Longest first: a key that contains another is replaced whole, never left half-visible.
    ordered = sorted(values, key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(v) for v in ordered)) if ordered else None
    return _Known(fingerprint, values, pattern)


def _known() -> _Known:
    global _KNOWN
    fingerprint = _fingerprint()
    known = _KNOWN
    if known is not None and known.fingerprint == fingerprint:
        return known
    if getattr(_LOCAL, "collecting", False):
        return known or _Known((), {}, None)
    _LOCAL.collecting = True
    try:
        known = _collect(fingerprint)
    finally:
        _LOCAL.collecting = False
    _KNOWN = known
    return known


def nothing_to_redact() -> bool:
    """No secret value is known now (no key in the environment, the secrets file or the catalog's variables): a
    caller about to serialise a structure at once may skip `redact_obj`'s walk, which would return an equal copy."""
    return _known().pattern is None


def secret_names() -> list[str]:
    """The variable names whose values are redacted now (never the values)."""
    return sorted(set(_known().names.values()))


def redact(text: str) -> str:
    """Replace every known key value in a text by `<ITS_NAME>`."""
    if not text or not isinstance(text, str):
        return text
    return _redact_with(_known(), text)


def _redact_with(known: _Known, text: str) -> str:
    if not text or known.pattern is None:
        return text
    return known.pattern.sub(lambda m: f"<{known.names[m.group(0)]}>", text)


def redact_obj(value: Any) -> Any:
    """`redact` through a JSON-like structure (dict keys included); other values are returned as they are.
    The secret values are collected once per structure, not once per string in it."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict | list | tuple):
        return _redact_obj_with(_known(), value)
    return value


def _redact_obj_with(known: _Known, value: Any) -> Any:
    if isinstance(value, str):
        return _redact_with(known, value)
    if isinstance(value, dict):
        return {_redact_obj_with(known, k): _redact_obj_with(known, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_obj_with(known, v) for v in value]
    if isinstance(value, tuple):
        return tuple(_redact_obj_with(known, v) for v in value)
    return value


def bulk_redactor() -> Callable[[str], str] | None:
    """`redact` for many texts in a row (an import of 100,000 labels: their notes and context JSON), with the
    secret values collected once instead of once a text; None when there is nothing to redact. A value is also
    found as JSON writes it inside a string (its quotes and backslashes escaped), so JSON text is redacted
    whole."""
    known = _known()
    if known.pattern is None:
        return None
    names = dict(known.names)
    for value, name in known.names.items():
        names.setdefault(json.dumps(value, ensure_ascii=False)[1:-1], name)
    pattern = re.compile("|".join(re.escape(v) for v in sorted(names, key=len, reverse=True)))
    return lambda text: pattern.sub(lambda m: f"<{names[m.group(0)]}>", text) if text else text


class StreamRedactor:
    """Redacts a text that arrives in pieces: a key split across two pieces is still caught, because the
    tail that could be the start of a key is held back until the next piece (or `flush`)."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, piece: str) -> str:
        text = redact(self._pending + piece)
        hold = _partial_tail(text, _known().names)
        self._pending = text[len(text) - hold :] if hold else ""
        return text[: len(text) - hold]

    def flush(self) -> str:
        text, self._pending = redact(self._pending), ""
        return text


def _partial_tail(text: str, values: Iterable[str]) -> int:
    """Length of the longest end of `text` that is a proper prefix of a secret value."""
    best = 0
    for value in values:
        for k in range(min(len(value) - 1, len(text)), best, -1):
            if text.endswith(value[:k]):
                best = k
                break
    return best


# -- where text leaves the process: log records and the standard streams ---------------------------------


class RedactingFilter(logging.Filter):
    """Redacts a log record in place (message, arguments, exception and stack text); never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        _redact_record(record)
        return True


def _redact_record(record: logging.LogRecord) -> logging.LogRecord:
    if getattr(record, "_judgelab_redacted", False):
        return record
    try:
        message = record.getMessage()
    except Exception:  # a record whose arguments do not fit its format: keep its raw text
        message = f"{record.msg} {record.args!r}"
    record.msg, record.args = redact(message), ()
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redact(record.stack_info)
    record._judgelab_redacted = True
    return record


_INSTALLED = {"logging": False}


def install_log_redaction() -> None:
    """Every log record of the process is redacted: when it is made (so handlers added later, such as
    Streamlit's, get redacted records too), and by a filter on the root handlers and the last-resort one."""
    with _LOCK:
        if not _INSTALLED["logging"]:
            previous = logging.getLogRecordFactory()

            def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
                return _redact_record(previous(*args, **kwargs))

            logging.setLogRecordFactory(factory)
            _INSTALLED["logging"] = True
    handlers = [*logging.getLogger().handlers, logging.lastResort]
    for handler in handlers:
        if handler is not None and not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


class RedactingStream(io.TextIOBase):
    """A text stream that redacts what is written to it before passing it on."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]  # read-only: the wrapped stream's
        return self._stream.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]  # read-only: the wrapped stream's
        return self._stream.errors

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def redact_std_streams() -> None:
    """Wrap `sys.stdout` and `sys.stderr` (CLI output, tracebacks, prints) so keys never reach them."""
    if not isinstance(sys.stdout, RedactingStream) and sys.stdout is not None:
        sys.stdout = RedactingStream(sys.stdout)
    if not isinstance(sys.stderr, RedactingStream) and sys.stderr is not None:
        sys.stderr = RedactingStream(sys.stderr)
