"""Exports of an experiment's table: CSV, JSON, and a self-contained HTML report (plotly inlined, every
text from the store escaped: parameter values, names and errors are untrusted)."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from engine.exports import csv_rows
from models.secrets import redact


def columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    for row in rows:
        for key in row:
            if key not in out:
                out.append(key)
    return out


def _cell(value: object) -> str:
    return "" if value is None else json.dumps(value) if isinstance(value, dict | list) else str(value)


def to_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """The cells as CSV, through the runs' CSV writer (`engine.exports.csv_rows`): formula cells neutralised,
    numbers kept as numbers, keys redacted."""
    return redact(csv_rows(columns(rows), rows))


def to_json(shown: Mapping[str, Any]) -> str:
    return redact(json.dumps(shown, indent=2, ensure_ascii=False, default=str))


def _figures(shown: Mapping[str, Any]) -> list[Any]:
    import plotly.graph_objects as go

    rows = shown["rows"]
    metric = shown.get("metric") or "f1"
    params = [p for p in shown.get("parameters", []) if any(isinstance(r.get(p), int | float) for r in rows)]
    figs: list[Any] = []
    for p in params[:4]:
        xs = [r.get(p) for r in rows if isinstance(r.get(metric), int | float)]
        ys = [r.get(metric) for r in rows if isinstance(r.get(metric), int | float)]
        fig = go.Figure(go.Scatter(x=xs, y=ys, mode="markers", name=metric))
        fig.update_layout(title=f"{metric} against {p}", xaxis_title=p, yaxis_title=metric, height=320)
        figs.append(fig)
    if len(params) >= 2:
        a, b = params[:2]
        xs = sorted({r[a] for r in rows if r.get(a) is not None})
        ys = sorted({r[b] for r in rows if r.get(b) is not None})
        z: list[list[float | None]] = []
        for y in ys:
            line: list[float | None] = []
            for x in xs:
                vals = [
                    r[metric]
                    for r in rows
                    if r.get(a) == x and r.get(b) == y and isinstance(r.get(metric), int | float)
                ]
                line.append(max(vals) if vals else None)
            z.append(line)
        fig = go.Figure(go.Heatmap(x=[str(x) for x in xs], y=[str(y) for y in ys], z=z, colorbar={"title": metric}))
        fig.update_layout(title=f"best {metric} by {a} × {b}", xaxis_title=a, yaxis_title=b, height=360)
        figs.append(fig)
    return figs


CSP = "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:"


def to_html(shown: Mapping[str, Any]) -> str:
    """One file that opens anywhere offline: the plotly library inlined, the table as escaped text."""
    from plotly.offline import get_plotlyjs

    rows = shown["rows"]
    cols = columns(rows)
    esc = html.escape
    best = shown.get("best") or {}
    head = "".join(f"<th>{esc(str(c))}</th>" for c in cols)
    body = "\n".join(
        "<tr"
        + (' class="best"' if best and r.get("cell") == best.get("cell") else "")
        + ">"
        + "".join(f"<td>{esc(_cell(r.get(c)))}</td>" for c in cols)
        + "</tr>"
        for r in rows
    )
    charts = "\n".join(
        f'<div class="chart">{fig.to_html(full_html=False, include_plotlyjs=False)}</div>' for fig in _figures(shown)
    )
    meta = {k: shown.get(k) for k in ("experiment_id", "name", "status", "metric", "cells", "finished", "new_calls")}
    facts = "".join(f"<li><b>{esc(k)}</b>: {esc(_cell(v))}</li>" for k, v in meta.items())
    definition = esc(json.dumps(shown.get("definition", {}), indent=2, ensure_ascii=False, default=str))
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{esc(str(shown.get("name") or "experiment"))}</title>
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}tr.best{{background:#e6ffe6}}</style>
<script type="text/javascript">{get_plotlyjs()}</script></head><body>
<h1>{esc(str(shown.get("name") or "experiment"))}</h1><ul>{facts}</ul>
{charts}
<h2>Cells</h2><table><thead><tr>{head}</tr></thead><tbody>
{body}
</tbody></table>
<h2>Definition</h2><pre>{definition}</pre>
</body></html>"""
    return redact(page)
