#!/usr/bin/env python3
"""DeepSpeed exports through deepspeed.initialize and one training step.

    deepspeed-initialize.py CONFIG.json [--max-ranks 8] [--hidden 16]

Starts the export's ranks (its `mistc.topology`: pipeline stages x tp x dp)
as local processes on CPU (gloo), builds a stand-in of the model at a size a
CPU holds, hands deepspeed.initialize the export's config as it is, as its
remarks say to, and runs one step (every micro-batch of it):
  - a pipeline: the plan's layer count as `hidden`-wide linear layers, split
    into its stages by DeepSpeed's PipelineModule with the export's
    PipeModelDataParallelTopology (tp reserved in the topology, the layers'
    parameters marked as tp shards, as Megatron-DeepSpeed's are);
  - one stage with tp: a small Hugging Face Llama that DeepSpeed's AutoTP
    shards (the config's tensor_parallel.autotp_size), with the mpu of
    deepspeed.utils.groups after _init_tp_mesh_device(tp);
  - one stage without tp: the linear layers as a plain module.
The batch sizes, accumulation, ZeRO stage, precision and optimizer are the
config's; the model is a stand-in, not the plan's. Prints one line per rank
and exits 0 when every rank finished its step.
"""
import argparse
import json
import os
import socket
import subprocess
import sys


def worker(config_path, layers, hidden):
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import torch
    import deepspeed
    rank = int(os.environ["RANK"])
    deepspeed.init_distributed(dist_backend="gloo")
    from deepspeed.pipe import PipelineModule
    from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology
    config = json.load(open(config_path))
    t = config["mistc"]["topology"]
    micro = config["train_micro_batch_size_per_gpu"]
    torch.manual_seed(0)
    if t["pipe"] == 1 and t["model"] > 1:
        return autotp_step(config, t, micro)
    topology = PipeModelDataParallelTopology(num_pp=t["pipe"], num_mp=t["model"], num_dp=t["data"])
    blocks = [torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.GELU())
              for _ in range(layers)]
    if t["model"] > 1:  # as tp layers mark their shards (Megatron's tensor_model_parallel)
        for block in blocks:
            for p in block.parameters():
                p.tensor_model_parallel = True
    model = PipelineModule(layers=blocks, topology=topology, loss_fn=torch.nn.MSELoss(),
                           partition_method="uniform")
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                           config=config)
    dtype = torch.bfloat16 if config.get("bf16", {}).get("enabled") else torch.float32

    def batches():
        g = torch.Generator().manual_seed(engine.global_rank)
        while True:
            yield (torch.randn(micro, hidden, generator=g, dtype=dtype),
                   torch.randn(micro, hidden, generator=g, dtype=dtype))

    loss = engine.train_batch(data_iter=batches())
    print(f"rank {rank}: stage {engine.stage_id} of {engine.num_stages}, dp "
          f"{engine.dp_world_size}, micro-batch {micro} x {engine.gradient_accumulation_steps()} "
          f"accumulated, loss {float(loss):.4f}", flush=True)


def autotp_step(config, t, micro):
    """One stage with tp: AutoTP on a small Llama, the mpu the remarks name."""
    import torch
    import deepspeed
    from deepspeed.utils import groups
    from transformers import LlamaConfig, LlamaForCausalLM
    groups._init_tp_mesh_device(tensor_model_parallel_size=t["model"])
    model = LlamaForCausalLM(LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                                         num_hidden_layers=2, num_attention_heads=4,
                                         num_key_value_heads=4, max_position_embeddings=64))
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                           config=config, mpu=groups)
    g = torch.Generator().manual_seed(engine.global_rank // t["model"])  # one batch per dp rank
    for _ in range(engine.gradient_accumulation_steps()):
        tokens = torch.randint(0, 256, (micro, 32), generator=g)
        loss = engine(input_ids=tokens, labels=tokens).loss
        engine.backward(loss)
        engine.step()
    print(f"rank {engine.global_rank}: one stage, AutoTP tp {t['model']}, dp "
          f"{engine.dp_world_size}, micro-batch {micro} x {engine.gradient_accumulation_steps()} "
          f"accumulated, loss {loss.item():.4f}", flush=True)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config")
    p.add_argument("--layers", type=int, required=True, help="the plan's transformer layers")
    p.add_argument("--max-ranks", type=int, default=8)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--timeout", type=int, default=900)
    a = p.parse_args()
    t = json.load(open(a.config))["mistc"]["topology"]
    if t["world"] > a.max_ranks:
        print(f"{os.path.basename(a.config)}: {t['world']} ranks, more than --max-ranks {a.max_ranks}: not run")
        return 77
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(t["world"]):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   LOCAL_RANK=str(rank), WORLD_SIZE=str(t["world"]), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", a.config, str(a.layers), str(a.hidden)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    ok = True
    for rank, proc in enumerate(procs):
        try:
            out, err = proc.communicate(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = "", "timed out"
        lines = [l for l in out.splitlines() if l.startswith("rank ")]
        if proc.returncode != 0 or not lines:
            ok = False
            print(f"rank {rank}: failed (exit {proc.returncode}): {err.strip()[-600:]}")
        else:
            print(lines[-1])
    print(f"{os.path.basename(a.config)}: deepspeed.initialize and one step on {t['world']} ranks "
          f"({t['pipe']} stages x tp {t['model']} x dp {t['data']}): {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
