"""API keys come from the environment or `.streamlit/secrets.toml`, nowhere else.

Values are returned to the backend that needs them and never stored, logged or shown: records keep
only the request body, and availability messages name the variable, not its value.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def secrets_paths() -> list[Path]:
    explicit = os.environ.get("JUDGELAB_SECRETS")
    if explicit:
        return [Path(explicit)]
    return [Path.cwd() / ".streamlit" / "secrets.toml", PROJECT_ROOT / ".streamlit" / "secrets.toml"]


def _read_secrets() -> dict[str, object]:
    for path in secrets_paths():
        try:
            with path.open("rb") as fh:
                return tomllib.load(fh)
        except FileNotFoundError:
            continue
        except (tomllib.TOMLDecodeError, OSError):
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


def redact(text: str) -> str:
    """Remove any known key value from a text before it is stored or shown (errors can echo them)."""
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        value = find_secret(name)
        if value and len(value) >= 8:
            text = text.replace(value, f"<{name}>")
    return text
