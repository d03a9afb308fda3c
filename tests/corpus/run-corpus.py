#!/usr/bin/env python3
"""Runs the adversarial corpus (tests/corpus/<format>/) through mistc's readers.

  run-corpus.py --bin DIR --tests-bin DIR [--corpus DIR] [--timeout S] [--json OUT]

Each input goes to every program that reads its format:
  mist/         mistc FILE --emit=ir
  mir/          mistc -x ir FILE
  plan/         mistc MODEL --plan FILE --emit=report      (MODEL: the plans' model `m`)
  cluster/      mist-yaml-check --cluster FILE; mistc MODEL --cluster FILE --time-limit 5
  safetensors/  mist-safetensors-tool dump FILE; mistc MODEL --emit=hf --checkpoint FILE
  tokens/       mist-token-tool check FILE 256
  hf/           mistc MODEL --emit=checkpoint --from-hf FOLDER   (each input a folder)
  megatron/     mist-data samples --data-path PREFIX ... --vocab 256  (PREFIX.idx + PREFIX.bin)

and must end as a user error ends: exit status 1 with an `error:` on stderr
that names the input (text formats: `FILE:LINE:COL: error:`), within the
timeout, with no sanitizer report. Inputs whose name starts with `ok-` must be
accepted (exit 0). Prints one line per failure and a summary; exit 1 if any.
`--bin` holds mistc and mist-yaml-check; `--tests-bin` is the build's tests/
folder (runtime/checkpoint/mist-safetensors-tool, runtime/data/mist-token-tool).
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time

MODEL = """import "gpt"
model m = gpt(vocab = 256, hidden = 64, layers = 2, heads = 4)
train {
  global_batch = 16
  seq_len = 64
}
"""
SANITIZER = re.compile(r"Sanitizer|runtime error:|LeakSanitizer")
TEXT_FORMATS = {"mist", "mir", "plan", "cluster"}


def commands(fmt, path, tools, model, out):
    """The runs of one input: (program name, argv); `out` is the input's own
    folder for what a run writes."""
    if fmt == "mist":
        return [("mistc", [tools["mistc"], path, "--emit=ir", "-o", os.devnull])]
    if fmt == "mir":
        return [("mistc", [tools["mistc"], "-x", "ir", path, "-o", os.devnull])]
    if fmt == "plan":
        return [("mistc", [tools["mistc"], model, "--plan", path, "--emit=report"])]
    if fmt == "cluster":
        return [("mist-yaml-check", [tools["yaml"], "--cluster", path]),
                ("mistc", [tools["mistc"], model, "--cluster", path, "--time-limit", "5",
                           "-o", os.path.join(out, "plan.yaml")])]
    if fmt == "safetensors":
        return [("mist-safetensors-tool", [tools["safetensors"], "dump", path]),
                ("mistc", [tools["mistc"], model, "--emit=hf", "--checkpoint", path, "-o",
                           os.path.join(out, "hf")])]
    if fmt == "tokens":
        return [("mist-token-tool", [tools["tokens"], "check", path, "256"])]
    if fmt == "hf":
        return [("mistc", [tools["mistc"], model, "--emit=checkpoint", "--from-hf", path, "-o",
                           os.path.join(out, "ckpt")])]
    if fmt == "megatron":
        return [("mist-data", [tools["data"], "samples", "--data-path", path, "--seq-len", "8",
                               "--samples", "20", "--split", "100", "--vocab", "256"])]
    raise ValueError(fmt)


def verdict(fmt, name, path, rc, err):
    """None when the run ended as it must, else what is wrong."""
    if SANITIZER.search(err):
        return "sanitizer report: " + next(l for l in err.splitlines() if SANITIZER.search(l))
    if name.startswith("ok-"):
        return None if rc == 0 else f"a valid input was refused (exit {rc}): {err.strip()[:300]}"
    if rc != 1:
        what = f"killed by signal {-rc}" if rc < 0 else f"exit {rc}"
        return f"{what}, expected 1 (a user error): {err.strip()[-300:]}"
    base = re.escape(os.path.basename(path))
    located = re.compile(base + r":\d+:\d+: error: ") if fmt in TEXT_FORMATS else \
        re.compile(r"error: .*" + base)
    if not located.search(err):
        return f"no located error naming the input: {err.strip()[:300]}"
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--tests-bin", required=True)
    p.add_argument("--corpus", default=os.path.dirname(os.path.abspath(__file__)))
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--json", help="write every run's outcome and time here")
    a = p.parse_args()
    tools = {"mistc": os.path.join(a.bin, "mistc"),
             "yaml": os.path.join(a.bin, "mist-yaml-check"),
             "data": os.path.join(a.bin, "mist-data"),
             "safetensors": os.path.join(a.tests_bin, "runtime/checkpoint/mist-safetensors-tool"),
             "tokens": os.path.join(a.tests_bin, "runtime/data/mist-token-tool")}
    for name, tool in tools.items():
        if not os.access(tool, os.X_OK):
            sys.exit(f"run-corpus: {tool} is not built")
    jobs = []  # (format, file, path, name, program, argv, folder)
    with tempfile.TemporaryDirectory(prefix="mist-corpus-") as work:
        model = os.path.join(work, "m.mist")
        with open(model, "w") as f:
            f.write(MODEL)
        for fmt in sorted(os.listdir(a.corpus)):
            folder = os.path.join(a.corpus, fmt)
            if not os.path.isdir(folder):
                continue
            for file in sorted(os.listdir(folder)):
                path = os.path.join(folder, file)
                name = os.path.splitext(file)[0]
                if fmt == "megatron":  # a dataset is PREFIX.idx and PREFIX.bin: run it once
                    if not file.endswith(".idx"):
                        continue
                    path = os.path.join(folder, name)
                # Each input gets a folder of its own for what its runs write.
                out = os.path.join(work, f"{fmt}-{file}")
                os.makedirs(out)
                for program, argv in commands(fmt, path, tools, model, out):
                    jobs.append((fmt, file, path, name, program, argv, out))

        def run(job):
            fmt, file, path, name, program, argv, cwd = job
            start = time.monotonic()
            try:
                r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                   timeout=a.timeout, cwd=cwd)
                rc, err = r.returncode, r.stderr.decode("utf-8", "replace")
                problem = verdict(fmt, name, path, rc, err)
            except subprocess.TimeoutExpired:
                rc, problem = None, f"no answer within {a.timeout:g} s (hang)"
            return {"input": f"{fmt}/{file}", "program": program, "exit": rc,
                    "seconds": round(time.monotonic() - start, 3), "problem": problem}

        # The runs are independent processes: as many at once as there are cores.
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            runs = list(pool.map(run, jobs))
    failures = [f"{r['input']} ({r['program']}): {r['problem']}" for r in runs if r["problem"]]
    worst = max(runs, key=lambda r: r["seconds"])
    slowest = (worst["seconds"], f"{worst['input']} ({worst['program']})")
    for f in failures:
        print("FAIL " + f)
    inputs = len({r["input"] for r in runs})
    print(f"run-corpus: {inputs} inputs, {len(runs)} runs, {len(failures)} failures; "
          f"slowest {slowest[0]:.2f} s: {slowest[1]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"inputs": inputs, "runs": runs, "failures": len(failures)}, f, indent=1)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
