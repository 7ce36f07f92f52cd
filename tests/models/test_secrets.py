"""Redaction by value: every configured key, whatever its variable is called, wherever text leaves."""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path

import pytest

from models.secrets import (
    RedactingStream,
    StreamRedactor,
    install_log_redaction,
    redact,
    redact_obj,
    refresh_secrets,
    secret_names,
)

CUSTOM = "cst-9f8e7d6c5b4a3928"
TOML_KEY = "tml-0a1b2c3d4e5f6a7b"
NESTED = "nst-aabbccddeeff0011"


@pytest.fixture
def custom_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        "models:\n"
        "  - {id: custom, backend: openai, model: m, base_url: 'http://127.0.0.1:9', api_key_env: MY_CUSTOM_KEY,"
        " profile: {name: Custom}}\n"
    )
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(f'SOMETHING_ELSE = "{TOML_KEY}"\n[provider]\ntoken = "{NESTED}"\nshort = "abc"\n')
    monkeypatch.setenv("JUDGELAB_CATALOG", str(catalog))
    monkeypatch.setenv("JUDGELAB_SECRETS", str(secrets))
    monkeypatch.setenv("MY_CUSTOM_KEY", CUSTOM)
    refresh_secrets()


def test_keys_under_any_name_are_redacted_by_value(custom_keys: None, monkeypatch: pytest.MonkeyPatch) -> None:
    text = f"bad key {CUSTOM}; toml {TOML_KEY}; nested {NESTED}; short abc stays"
    assert redact(text) == "bad key <MY_CUSTOM_KEY>; toml <SOMETHING_ELSE>; nested <TOKEN>; short abc stays"
    assert {"MY_CUSTOM_KEY", "SOMETHING_ELSE", "TOKEN"} <= set(secret_names())
    # A variable named like a key counts even when no catalog names it; values under 8 characters never do.
    monkeypatch.setenv("ACME_API_KEY", "acme-1234567890")
    monkeypatch.setenv("TINY_TOKEN", "1234")
    assert redact("acme-1234567890 1234") == "<ACME_API_KEY> 1234"


def test_a_new_or_changed_key_is_picked_up_without_restart(custom_keys: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert redact(CUSTOM) == "<MY_CUSTOM_KEY>"
    monkeypatch.setenv("MY_CUSTOM_KEY", "rotated-key-77777777")
    assert redact(f"{CUSTOM} rotated-key-77777777") == f"{CUSTOM} <MY_CUSTOM_KEY>"


@pytest.mark.parametrize("tail", ["", "/", "/."])
def test_a_key_written_into_the_files_later_is_redacted_however_their_path_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tail: str
) -> None:
    """The secret values are collected again when the secrets file or the catalog changes: what is looked at is
    the file the readers open, also when its variable ends in `/` or `/.` (which Path reads as the file)."""
    secrets, catalog = tmp_path / "secrets.toml", tmp_path / "catalog.yaml"
    secrets.write_text("")
    catalog.write_text("models: []\n")
    monkeypatch.setenv("JUDGELAB_SECRETS", str(secrets) + tail)
    monkeypatch.setenv("JUDGELAB_CATALOG", str(catalog) + tail)
    monkeypatch.setenv("LATER_CREDENTIAL", "lat-5566778899aabb")
    assert redact(f"{TOML_KEY} lat-5566778899aabb") == f"{TOML_KEY} lat-5566778899aabb"
    secrets.write_text(f'SOMETHING_ELSE = "{TOML_KEY}"\n')
    catalog.write_text(
        "models:\n  - {id: c, backend: openai, model: m, base_url: 'http://u:pw-0123456789ab@127.0.0.1:9',"
        " api_key_env: LATER_CREDENTIAL, profile: {name: C}}\n"
    )
    assert redact(f"{TOML_KEY} lat-5566778899aabb pw-0123456789ab") == (
        "<SOMETHING_ELSE> <LATER_CREDENTIAL> <BASE_URL_PASSWORD>"
    )


def test_longest_key_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-aaaaaaaaaaaa")
    monkeypatch.setenv("LONG_API_KEY", "sk-aaaaaaaaaaaa-and-more")
    refresh_secrets()
    assert redact("x sk-aaaaaaaaaaaa-and-more y sk-aaaaaaaaaaaa") == "x <LONG_API_KEY> y <OPENAI_API_KEY>"


def test_structures_and_streams(custom_keys: None) -> None:
    assert redact_obj({"error": CUSTOM, CUSTOM: [1, (CUSTOM,)], "n": 3}) == {
        "error": "<MY_CUSTOM_KEY>",
        "<MY_CUSTOM_KEY>": [1, ("<MY_CUSTOM_KEY>",)],
        "n": 3,
    }
    stream = StreamRedactor()
    pieces = ["The key is cst-9f8", "e7d6c5", "b4a3928 and ", "more"]
    out = [stream.feed(p) for p in pieces] + [stream.flush()]
    assert "".join(out) == "The key is <MY_CUSTOM_KEY> and more"
    assert not any("9f8" in p for p in out)  # no piece ever shows a part of the key
    tail = StreamRedactor()
    assert tail.feed("ends with cst-9f") == "ends with " and tail.flush() == "cst-9f"


def test_log_records_and_std_streams_are_redacted(custom_keys: None) -> None:
    install_log_redaction()
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    logger = logging.getLogger("judgelab.test.redaction")
    logger.addHandler(handler)
    try:
        logger.warning("calling with %s", CUSTOM)
        try:
            raise RuntimeError(f"server said: invalid key {TOML_KEY}")
        except RuntimeError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    logged = buffer.getvalue()
    assert CUSTOM not in logged and TOML_KEY not in logged
    assert "<MY_CUSTOM_KEY>" in logged and "<SOMETHING_ELSE>" in logged and "Traceback" in logged
    sink = io.StringIO()
    stream = RedactingStream(sink)
    print(f"echo {NESTED}", file=stream)
    assert sink.getvalue() == "echo <TOKEN>\n"
    stdout = sys.__stdout__
    assert stdout is not None and RedactingStream(stdout).encoding == stdout.encoding
