#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Draws a window of a Chrome trace-event file (the trace layer's, docs/layers/trace.md) as an
SVG timeline: one row per track (process / thread), "X" spans as boxes with their names, flows
as arrows from a copy to the launch that reads it. Standard library only: for pictures in the
docs on a machine without a browser; to explore a trace, open it in Perfetto.

    trace_to_svg.py TRACE.json --around NAME [--before US] [--after US] > picture.svg

The window starts BEFORE microseconds before the first span named NAME on a device track and
ends AFTER microseconds after it ends.
"""
import argparse
import html
import json
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--around", required=True, help="the name of a span to centre on")
    ap.add_argument("--before", type=float, default=300.0, help="microseconds before it")
    ap.add_argument("--after", type=float, default=300.0, help="microseconds after it")
    ap.add_argument("--width", type=int, default=1100)
    a = ap.parse_args()
    with open(a.trace) as f:
        events = json.load(f)["traceEvents"]
    procs, threads = {}, {}
    for e in events:
        if e["ph"] == "M" and e["name"] == "process_name":
            procs[e["pid"]] = e["args"]["name"]
        if e["ph"] == "M" and e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
    spans = [e for e in events if e["ph"] == "X"]
    anchor = next((e for e in spans if e["name"] == a.around and e["pid"] != 1), None)
    if anchor is None:
        print(f"trace_to_svg: no span named {a.around!r} on a device track", file=sys.stderr)
        return 1
    t0, t1 = anchor["ts"] - a.before, anchor["ts"] + anchor["dur"] + a.after
    shown = [e for e in spans if e["ts"] < t1 and e["ts"] + e["dur"] > t0]
    tracks = sorted({(e["pid"], e["tid"]) for e in shown})
    label_w, row_h, top = 260, 26, 30
    scale = (a.width - label_w - 10) / (t1 - t0)
    x = lambda t: label_w + (min(max(t, t0), t1) - t0) * scale  # noqa: E731
    row = {k: top + i * row_h for i, k in enumerate(tracks)}
    height = top + len(tracks) * row_h + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{a.width}" height="{height}" '
           'font-family="sans-serif" font-size="11">',
           '<defs><marker id="a" markerWidth="8" markerHeight="8" refX="7" refY="4" '
           'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#c0392b"/></marker></defs>',
           f'<rect width="{a.width}" height="{height}" fill="white"/>',
           f'<text x="{label_w}" y="16">{t1 - t0:.0f} µs around {html.escape(a.around)} '
           f'(from {html.escape(a.trace.split("/")[-1])})</text>']
    colours = {"api": "#9ecae1", "call": "#6baed6", "copy": "#fdae6b", "launch": "#74c476",
               "device": "#c7e9c0", "build": "#bcbddc"}
    for k, y in row.items():
        name = f'{procs.get(k[0], k[0])} / {threads.get(k, k[1])}'
        out.append(f'<text x="4" y="{y + 16}">{html.escape(name)}</text>')
        out.append(f'<line x1="{label_w}" y1="{y + row_h - 2}" x2="{a.width - 10}" '
                   f'y2="{y + row_h - 2}" stroke="#eee"/>')
    for e in sorted(shown, key=lambda e: -e["dur"]):  # nested spans drawn over their parents
        y, x0, x1 = row[(e["pid"], e["tid"])], x(e["ts"]), x(e["ts"] + e["dur"])
        w = max(x1 - x0, 1.0)
        out.append(f'<rect x="{x0:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_h - 8}" '
                   f'fill="{colours.get(e.get("cat"), "#ccc")}" stroke="#555" stroke-width="0.5">'
                   f'<title>{html.escape(e["name"])}: {e["dur"]:.1f} µs</title></rect>')
        if w > 7 * len(e["name"]):
            out.append(f'<text x="{x0 + 3:.1f}" y="{y + 16}">{html.escape(e["name"])}</text>')
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    for f in (e for e in events if e["ph"] == "f"):
        s = starts.get(f["id"])
        if s is None or (s["pid"], s["tid"]) not in row or (f["pid"], f["tid"]) not in row:
            continue
        if not (t0 <= s["ts"] <= t1 or t0 <= f["ts"] <= t1):
            continue
        out.append(f'<line x1="{x(s["ts"]):.1f}" y1="{row[(s["pid"], s["tid"])] + 12}" '
                   f'x2="{x(f["ts"]):.1f}" y2="{row[(f["pid"], f["tid"])] + 12}" '
                   'stroke="#c0392b" stroke-width="1.2" marker-end="url(#a)"/>')
    out.append("</svg>")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
