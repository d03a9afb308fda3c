#!/usr/bin/env python3
"""Tables of the H100 trainer benchmark (run-trainers.sh).

Reads mistc's predictions (make-trainers.sh's predicted.json) and the
trainers' logs, writes the per-plan JSON (measured median iteration time and
peak device memory, and their errors against the prediction), prints the
table, and writes the summary with the speedup over torch.compile when the
PyTorch reference's JSON exists.

  summarize-trainers.py PREDICTED.json LOGDIR OUT.json REFERENCE.json SUMMARY.json
"""
import json, os, re, statistics, subprocess, sys, datetime

STEP = re.compile(r"^step +(\d+) +loss (\S+) .*? ([\d.]+) tokens/s +([\d.eE+-]+) TFLOP/s/rank +([\d.]+) MiB peak",
                  re.M)
REPORTED = re.compile(r"^mistrt: the device reports ([\d.]+) MiB in use now", re.M)
TRAINING = re.compile(r"for \d+ steps on \d+ ranks? \(([^)]*)\): (\d+) micro-batches of (\d+) sequences of (\d+) tokens")


def measure(log_path):
    text = open(log_path).read() if os.path.exists(log_path) else ""
    head = TRAINING.search(text)
    steps = STEP.findall(text)
    if not head or len(steps) < 2:
        # Say how far it got: a job killed by its time limit before its second
        # step ends with an ordinary log line, which alone would read as the cause.
        last = text.strip().splitlines()[-1] if text.strip() else "no log"
        return {"error": f"{len(steps)} step(s) logged, 2 needed (failed or timed out); last line: {last}"}
    tokens = int(head.group(2)) * int(head.group(3)) * int(head.group(4))
    timed = steps[1:]  # the first step includes allocation and cuBLASLt's algorithm search
    times = [tokens / float(s[2]) for s in timed]
    reported = REPORTED.search(text)  # the device's own count: libraries' workspaces too
    extra = {"device_reported_gib": float(reported.group(1)) / 1024.0} if reported else {}
    return {**extra, "device": head.group(1), "iteration_s_median": statistics.median(times),
            "iteration_s_all": times, "tflops": statistics.median(float(s[3]) for s in timed),
            "peak_memory_gib": max(float(s[4]) for s in steps) / 1024.0,
            "losses": [float(s[1]) for s in steps]}


def main(predicted_path, logs, out_path, reference_path, summary_path):
    rows = []
    for plan in json.load(open(predicted_path)):
        m = measure(os.path.join(logs, plan["plan"] + ".log"))
        # Priced for the card it ran on where the plan was priced for it too
        # (make-trainers.sh: the H100 preset, and the H200 one in "on_h200").
        plan = dict(plan)
        on_h200 = plan.pop("on_h200", None)
        plan["predicted_on"] = "H100 preset"
        if on_h200 and "H200" in m.get("device", ""):
            plan.update(on_h200, predicted_on="H200 preset")
        row = dict(plan, **m)
        if "error" not in m:
            row["time_error"] = abs(plan["predicted_iteration_s"] - m["iteration_s_median"]) / m["iteration_s_median"]
            row["memory_error"] = abs(plan["predicted_peak_gib"] - m["peak_memory_gib"]) / m["peak_memory_gib"]
        rows.append(row)
    json.dump(rows, open(out_path, "w"), indent=1)
    print(f"{'plan':22} {'pred s':>8} {'meas s':>8} {'err':>6} {'pred GiB':>9} {'meas GiB':>9} {'err':>6} {'TFLOP/s':>8}")
    for r in rows:
        if "error" in r:
            print(f"{r['plan']:22} {r['predicted_iteration_s']:8.4f} {'-':>8} {'-':>6} {r['predicted_peak_gib']:9.2f} {'-':>9} {'-':>6}  {r['error']}")
        else:
            print(f"{r['plan']:22} {r['predicted_iteration_s']:8.4f} {r['iteration_s_median']:8.4f} {r['time_error']:6.1%} "
                  f"{r['predicted_peak_gib']:9.2f} {r['peak_memory_gib']:9.2f} {r['memory_error']:6.1%} {r['tflops']:8.1f}")
    ok = [r for r in rows if "error" not in r]
    by = {r["plan"]: r for r in ok}
    summary = {"date": datetime.date.today().isoformat(),
               "gpu": ok[0]["device"] if ok else None,
               "max_time_error": max((r["time_error"] for r in ok), default=None),
               "max_memory_error": max((r["memory_error"] for r in ok), default=None),
               "plans_measured": len(ok), "plans_failed": [r["plan"] for r in rows if "error" in r]}
    if "gpt67-tuned" in by and "gpt67-offload-all" in by:
        summary["gpt3_6_7b_tuned_over_offload_all"] = (
            by["gpt67-offload-all"]["iteration_s_median"] / by["gpt67-tuned"]["iteration_s_median"])
    if os.path.exists(reference_path):
        ref = json.load(open(reference_path))
        speedups = []
        for ours, model in (("gpt13-b4", "gpt3-1.3b"), ("gpt27-b4", "gpt3-2.7b")):
            compiled = [x for x in ref if x.get("model") == model and x.get("mode") == "compile"
                        and x.get("micro_batch") == 4 and x.get("tflops")]
            if ours in by and compiled:
                speedups.append(by[ours]["tflops"] / compiled[0]["tflops"])
        summary["speedup_vs_torch_compile"] = min(speedups) if speedups else None
    json.dump(summary, open(summary_path, "w"), indent=1)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
