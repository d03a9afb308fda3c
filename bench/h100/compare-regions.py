#!/usr/bin/env python3
"""Region by region: the trainer's measured timeline against the prediction.

mistc's --emit=report prints, per stage, each region's predicted kernel time
per micro-batch (forward, backward) and its AdamW step ("regions (ms)"); the
trainer's --trace writes the measured timeline of its last step, one event
per region and micro-batch ("layer 3 F1", "post B0", "optimizer step layer
3", ...; process i is stage i). This prints, per stage and region, the median
measured event against the prediction, so a step-time error can be traced to
the regions (and so the kernels) it comes from. The measured events hold what
the region runs on its compute stream, collectives and waits included, and a
checkpointed layer's backward holds its recomputation: compare one-GPU plans
without checkpointing for kernel time alone.

  compare-regions.py REPORT.txt TRACE.json [OUT.json]
"""
import json, re, statistics, sys

ROW = re.compile(r"^  (pre|each layer|post) +([\d.]+) +([\d.]+) +([\d.]+)$")


def predicted(report_path):
    """{stage: {region: (fwd_ms, bwd_ms, adamw_ms)}} from the report."""
    stages, stage = {}, None
    for line in open(report_path):
        m = re.match(r"^stage (\d+): ", line)
        if m:
            stage = int(m.group(1))
            stages[stage] = {}
            continue
        m = ROW.match(line.rstrip("\n"))
        if m and stage is not None:
            region = "layer" if m.group(1) == "each layer" else m.group(1)
            stages[stage][region] = tuple(float(m.group(i)) for i in (2, 3, 4))
    if not stages or not any(stages.values()):
        sys.exit(f"compare-regions.py: no 'regions (ms)' table in {report_path} (mistc --emit=report)")
    return stages


def measured(trace_path):
    """{stage: {region: {"F": [ms], "B": [ms], "step": [ms]}}} from the trace."""
    events = [e for e in json.load(open(trace_path))["traceEvents"] if e.get("ph") == "X"]
    out = {}
    for e in events:
        name, ms = e["name"], e["dur"] / 1000.0
        m = re.match(r"^(pre|post|layer \d+) ([FB])\d+$", name)
        step = re.match(r"^optimizer step (pre|post|layer \d+)$", name)
        if not m and not step:
            continue
        region = (m or step).group(1).split()[0]
        kind = m.group(2) if m else "step"
        out.setdefault(e["pid"], {}).setdefault(region, {"F": [], "B": [], "step": []})[kind].append(ms)
    if not out:
        sys.exit(f"compare-regions.py: no region events in {trace_path} (the trainer's --trace)")
    return out


def main(report_path, trace_path, out_path=None):
    want, got = predicted(report_path), measured(trace_path)
    rows = []
    print(f"{'stage':>5} {'region':<7} {'what':<9} {'events':>6} {'measured ms':>12} {'predicted ms':>13} {'error':>8}")
    for stage in sorted(want):
        for region, (fwd, bwd, adamw) in want[stage].items():
            seen = got.get(stage, {}).get(region, {"F": [], "B": [], "step": []})
            for what, kind, pred in (("forward", "F", fwd), ("backward", "B", bwd), ("AdamW", "step", adamw)):
                times = seen[kind]
                if not times:
                    continue
                med = statistics.median(times)
                err = (pred - med) / med if med > 0 else None
                rows.append({"stage": stage, "region": region, "what": what, "events": len(times),
                             "measured_ms": med, "predicted_ms": pred, "error": err})
                shown = f"{err:+8.1%}" if err is not None else "       -"
                print(f"{stage:>5} {region:<7} {what:<9} {len(times):>6} {med:>12.3f} {pred:>13.3f} {shown}")
    if out_path:
        json.dump(rows, open(out_path, "w"), indent=1)
    return rows


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(*sys.argv[1:])
