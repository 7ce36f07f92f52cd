"""A form's values live in the page's own state; its widgets are drawn from that state, never the other way round.

Streamlit keeps a keyed widget's value under its key, and a value put there by the script (a default, a run's
settings, an example) reaches the browser with the one script run that draws the widget. When that run is cut
short (a slider moved while a slow machine was still drawing the page), the browser keeps its old value and sends
it back with the next rerun: a box empties, or shows a value the page never chose; a widget left out of one run
loses its key altogether. So here:

- the value is kept under the page's own key (`key`), which no widget owns; code reads
  `st.session_state[key]` as before;
- the widget is drawn with that value (`value=` / `index=`) under a widget key of its own
  (`key` + ".w" + a generation number), and copies what the person sets back into the page's key when it changes;
- a programmatic move (`put`: a run's settings restored, an example, a reset) stores the value and draws the
  widget under a fresh key, so it shows the new value whatever the browser remembered of the old one.

`restore(values)` puts a whole form at once (a run's settings, before any widget is drawn).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import streamlit as st


def _generation(key: str) -> int:
    return int(st.session_state.get(key + ".gen", 0))


def widget_key(key: str) -> str:
    """The key the widget for the page's `key` is drawn under now."""
    return f"{key}.w{_generation(key)}"


def default(key: str, value: Any) -> None:
    """Start the page's `key` at `value` unless it already holds one."""
    if key not in st.session_state:
        st.session_state[key] = value


def put(key: str, value: Any) -> None:
    """A programmatic move: the page's `key` holds `value`, and its widget is drawn anew to show it."""
    st.session_state[key] = value
    st.session_state[key + ".gen"] = _generation(key) + 1


def restore(values: Mapping[str, Any]) -> None:
    """Put every (key, value) of a form at once (a stored run's settings)."""
    for key, value in values.items():
        put(key, value)


def _follow(key: str, on_change: Callable[..., Any] | None, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    wkey = widget_key(key)

    def changed() -> None:  # the person moved the widget: the page's value follows it
        st.session_state[key] = st.session_state[wkey]
        if on_change is not None:
            on_change(*args, **kwargs)

    return wkey, changed


_UNSET: Any = object()


def field(
    draw: Callable[..., Any],
    label: str,
    key: str,
    *args: Any,
    initial: Any = _UNSET,
    on_change: Callable[..., Any] | None = None,
    change_args: Sequence[Any] = (),
    change_kwargs: Mapping[str, Any] | None = None,
    value_arg: str = "value",
    **params: Any,
) -> Any:
    """Draw a value widget (`st.text_input`, `st.slider`, `st.number_input`, `st.toggle`, … or a container's) from
    the page's `key`; `args` and `params` go to `draw` (a slider's bounds); `value_arg` names the widget's value
    parameter (`default` for a multiselect); `initial` is the value before the person or the page set one. Returns
    what the widget shows."""
    if initial is not _UNSET:
        default(key, initial)
    wkey, changed = _follow(key, on_change, change_args, change_kwargs or {})
    return draw(label, *args, **{value_arg: st.session_state[key]}, key=wkey, on_change=changed, **params)


def choice(
    draw: Callable[..., Any],
    label: str,
    options: Sequence[Any],
    key: str,
    *,
    initial: Any = _UNSET,
    on_change: Callable[..., Any] | None = None,
    change_args: Sequence[Any] = (),
    change_kwargs: Mapping[str, Any] | None = None,
    **params: Any,
) -> Any:
    """Draw a pick-one widget (`st.selectbox`, `st.radio`) from the page's `key` (`initial` before anything set it,
    else the first option): a value that is no longer among `options` (a model gone from the catalog) falls back
    to the first one, and the page's key says so."""
    options = list(options)
    if initial is not _UNSET:
        default(key, initial)
    current = st.session_state.get(key)
    if options and current not in options:
        current = options[0]
        put(key, current)
    wkey, changed = _follow(key, on_change, change_args, change_kwargs or {})
    index = options.index(current) if options else None
    return draw(label, options, index=index, key=wkey, on_change=changed, **params)


def shown(marker: str, run_id: str) -> None:
    """The form already shows `run_id`'s settings (it was started from the form as it is): `restore_from` will not
    put them back over what the person changes next."""
    st.session_state[marker + ".form_for"] = run_id


def restore_from(marker: str, run_id: str | None, read: Callable[[str], Mapping[str, Any] | None]) -> None:
    """The one way a page restores a form from a run: on first sight of `run_id` under `marker` (a reload, a
    shared link, a run opened from another page) the form takes `read(run_id)` — the page's keys and the run's
    values, None for a run the form cannot show (another kind, stored by an older version) — before any of its
    widgets is drawn; later reruns leave the form to the person."""
    if not run_id or st.session_state.get(marker + ".form_for") == run_id:
        return
    shown(marker, run_id)
    values = read(run_id)
    if values:
        restore(values)
