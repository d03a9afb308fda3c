#!/usr/bin/env python3
"""Draws a run's curves from the metrics a trainer wrote with --log-dir DIR
(DIR/metrics.jsonl): the loss and the step time, with the plan's predicted
step time beside the measured one, as one SVG picture (standard library
only; `tensorboard --logdir DIR` shows the same figures interactively).

  plot-run.py DIR [OUT.svg]        (default: DIR/run.svg)
"""
import json, math, os, sys


def polyline(points, box, lo, hi, steps, color, dashed=False):
    x0, y0, w, h = box
    first, last = steps
    def at(step, v):
        x = x0 + (step - first) / max(last - first, 1) * w
        y = y0 + h - (v - lo) / max(hi - lo, 1e-12) * h
        return f"{x:.1f},{y:.1f}"
    path = " ".join(at(s, v) for s, v in points if v is not None and math.isfinite(v))
    dash = ' stroke-dasharray="6,4"' if dashed else ""
    return f'<polyline fill="none" stroke="{color}" stroke-width="1.5"{dash} points="{path}"/>'


def panel(title, series, box, steps):
    values = [v for _, pts, _, _ in series for _, v in pts if v is not None and math.isfinite(v)]
    if not values:
        return ""
    lo, hi = min(values), max(values)
    if hi == lo:
        lo, hi = lo - 1, hi + 1
    x0, y0, w, h = box
    out = [f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#999"/>',
           f'<text x="{x0}" y="{y0 - 8}" font-size="13">{title}</text>',
           f'<text x="{x0 - 6}" y="{y0 + 10}" font-size="10" text-anchor="end">{hi:.4g}</text>',
           f'<text x="{x0 - 6}" y="{y0 + h}" font-size="10" text-anchor="end">{lo:.4g}</text>',
           f'<text x="{x0}" y="{y0 + h + 14}" font-size="10">step {steps[0]}</text>',
           f'<text x="{x0 + w}" y="{y0 + h + 14}" font-size="10" text-anchor="end">step {steps[1]}</text>']
    for k, (label, pts, color, dashed) in enumerate(series):
        out.append(polyline(pts, box, lo, hi, steps, color, dashed))
        out.append(f'<text x="{x0 + w - 4}" y="{y0 + 14 + 14 * k}" font-size="11" '
                   f'text-anchor="end" fill="{color}">{label}</text>')
    return "\n".join(out)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    folder = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(folder, "run.svg")
    rows = [json.loads(l) for l in open(os.path.join(folder, "metrics.jsonl")) if l.strip()]
    if not rows:
        sys.exit(f"plot-run.py: {folder}/metrics.jsonl has no steps")
    steps = (rows[0]["step"], rows[-1]["step"])
    series = lambda key: [(r["step"], r.get(key)) for r in rows]
    parts = [panel("loss", [("loss", series("loss"), "#1f5fbf", False)], (70, 40, 560, 220), steps)]
    time = [("measured step (s)", series("step_s"), "#c0392b", False)]
    if any(r.get("predicted_step_s") for r in rows):
        time.append(("predicted (s)", series("predicted_step_s"), "#555", True))
    parts.append(panel("step time", time, (70, 320, 560, 180), steps))
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="660" height="540" '
           'font-family="sans-serif">\n' + "\n".join(parts) + "\n</svg>\n")
    open(out, "w").write(svg)
    print(f"plot-run.py: {len(rows)} steps drawn to {out}")


if __name__ == "__main__":
    main()
