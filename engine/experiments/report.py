"""Exports of an experiment's table: CSV, JSON, and a self-contained HTML report (plotly inlined, every
text from the store escaped: parameter values, names and errors are untrusted)."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.experiments.definition import ROOT
from engine.exports import CSP, RENDER, STYLE, Figure, csv_rows, figures_html
from models.secrets import redact


def columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    for row in rows:
        for key in row:
            if key not in out:
                out.append(key)
    return out


def _cell(value: object) -> str:
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int | float) for v in value):
        return f"{value[0]:.4g}–{value[1]:.4g}"  # an interval
    return "" if value is None else json.dumps(value) if isinstance(value, dict | list) else str(value)


def to_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """The cells as CSV, through the runs' CSV writer (`engine.exports.csv_rows`): formula cells neutralised,
    numbers kept as numbers, keys redacted."""
    return redact(csv_rows(columns(rows), rows))


def to_json(shown: Mapping[str, Any]) -> str:
    return redact(json.dumps(shown, indent=2, ensure_ascii=False, default=str))


def _shown_path(value: object) -> object:
    """A case-set path as the report shows it: inside the project, relative to it; elsewhere, the file's name
    only (a report is shared: the folders of the machine that ran it are nobody's business)."""
    if not isinstance(value, str) or not value:
        return value
    path = Path(value)
    if not path.is_absolute():
        return value
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return path.name


def public_definition(definition: Mapping[str, Any]) -> dict[str, Any]:
    """The definition as an export shows it: no machine paths."""
    return {k: (_shown_path(v) if k == "cases" else v) for k, v in definition.items()}


def to_html(shown: Mapping[str, Any], figures: Sequence[Figure] = (), plotly_js: str = "") -> str:
    """One file that opens anywhere offline: the page's charts (built by the dashboard, every colour explicit)
    with plotly.js inlined once, the cells with the best one starred, and the definition — every text from the
    store escaped."""
    rows = shown["rows"]
    cols = columns(rows)
    esc = html.escape
    best = shown.get("best") or {}
    head = "<th>best</th>" + "".join(f"<th>{esc(str(c))}</th>" for c in cols)
    body = "\n".join(
        (
            '<tr class="best"><td>★</td>'
            if best and r.get("cell") == best.get("cell")
            else '<tr class="tied"><td title="not significantly worse than the best">≈</td>'
            if r.get("tied_with_best")
            else "<tr><td></td>"
        )
        + "".join(f"<td>{esc(_cell(r.get(c)))}</td>" for c in cols)
        + "</tr>"
        for r in rows
    )
    meta = {k: shown.get(k) for k in ("experiment_id", "name", "status", "metric", "cells", "finished", "new_calls")}
    facts = "".join(f"<li><b>{esc(k)}</b>: {esc(_cell(v))}</li>" for k, v in meta.items())
    if best:
        facts += f"<li><b>best cell</b>: ★ {esc(_cell(best.get('cell')))}</li>"
    ties = shown.get("ties") or {}
    if ties.get("text"):
        facts += f"<li><b>ties</b>: {esc(str(ties['text']))} (≈ in the table)</li>"
    public = public_definition(shown.get("definition", {}))
    definition = esc(json.dumps(public, indent=2, ensure_ascii=False, default=str))
    script = f'<script type="text/javascript">{plotly_js}</script>' if plotly_js and figures else ""
    charts = figures_html(figures) if figures else '<p class="note">No chart: no parameter was swept.</p>'
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(str(shown.get("name") or "experiment"))}</title>
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="referrer" content="no-referrer">
<style>{STYLE}
td,th{{text-align:right}}tr.best{{background:#e6f4ea;font-weight:600}}tr.tied{{background:#f3f9f4}}
div.figure{{display:inline-block;width:48%;min-width:420px;vertical-align:top}}</style>
{script}</head><body>
<h1>{esc(str(shown.get("name") or "experiment"))}</h1><ul>{facts}</ul>
<h2>Charts</h2>{charts}
<h2>Cells</h2><table><thead><tr>{head}</tr></thead><tbody>
{body}
</tbody></table>
<h2>Definition</h2><pre>{definition}</pre>
<script>{RENDER if script else ""}</script>
</body></html>"""
    return redact(page)
