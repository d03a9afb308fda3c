#!/usr/bin/env bash
# Metrics out (issue 48): `--log-dir DIR` writes every step's figures to
# DIR/metrics.jsonl and a TensorBoard event file on the rank that holds the
# loss; the JSON lines agree with the printed step lines, TensorBoard's own
# event reader (where the tensorboard package is installed; else that part
# says it is skipped) reads the same values from the event file, a resumed
# run appends, and scripts/plot-run.py draws the run as an SVG.
#   metrics.sh MISTC MODEL.mist WORKDIR
set -euo pipefail
mistc=$(realpath "$1") model=$(realpath "$2") work=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$root/scripts/build-trainer.sh" "$mistc" "$model" "$root/tests/trainer/tiny-gpt-2ranks.yaml" "$work/train"
rm -rf logs ck
timeout 300 mpirun --oversubscribe -np 2 ./train --steps 4 --log-every 1 --log-dir logs \
  --ckpt-dir ck </dev/null >first.log
timeout 300 mpirun --oversubscribe -np 2 ./train --steps 6 --log-every 1 --tensorboard-dir logs \
  --ckpt-dir ck --resume </dev/null >second.log
python3 - <<'PY'
import glob, json, re
rows = [json.loads(l) for l in open("logs/metrics.jsonl")]
assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6], [r["step"] for r in rows]
printed = {}
for f in ("first.log", "second.log"):
    for m in re.finditer(r"^step +(\d+) +loss ([0-9.]+) +grad norm ([0-9.]+)", open(f).read(), re.M):
        printed[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
for r in rows:
    loss, norm = printed[r["step"]]
    assert abs(r["loss"] - loss) <= 1e-6 * loss and abs(r["grad_norm"] - norm) <= 1e-4 * norm, (r, loss, norm)
    for key in ("lr", "step_s", "tokens_per_s", "tflops_per_rank", "peak_mib", "predicted_step_s"):
        assert r[key] is not None and r[key] > 0, (key, r)
events = glob.glob("logs/events.out.tfevents.*")
assert len(events) == 2, events  # one per run, as TensorBoard writers do
try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError:
    print("metrics.sh: jsonl checked; tensorboard is not installed here: its reader skipped")
else:
    acc = EventAccumulator("logs"); acc.Reload()
    tb = {e.step: e.value for e in acc.Scalars("loss")}
    assert sorted(tb) == [1, 2, 3, 4, 5, 6], sorted(tb)
    for r in rows:
        assert abs(tb[r["step"]] - r["loss"]) <= 1e-6 * r["loss"], (tb[r["step"]], r["loss"])
    print(f"metrics.sh: TensorBoard's reader finds the {len(tb)} losses of metrics.jsonl")
PY
python3 "$root/scripts/plot-run.py" logs run.svg
python3 -c "import xml.dom.minidom as m; d = m.parse('run.svg'); assert d.getElementsByTagName('polyline')"
echo "metrics.sh: 6 steps over a resume in metrics.jsonl and two event files; plotted"
