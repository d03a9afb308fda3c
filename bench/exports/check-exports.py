#!/usr/bin/env python3
"""Checks mistc's exports with the frameworks' own code.

For every case (a model, a plan: tuned or hand-written, bench/exports/plans)
and every target, runs `mistc --emit=<target>`, then hands the output to the
framework's own parser and validators and compares what the framework
derives with what the plan says:

  deepspeed   deepspeed.runtime.config.DeepSpeedConfig (batch arithmetic, ZeRO
              and offload validators) and the engine's optimizer sanity check
              (DeepSpeedEngine._do_optimizer_sanity_check, which refuses
              precision mixes) on the parsed config;
  megatron    with --megatron-lm DIR (a checkout of NVIDIA/Megatron-LM, not
              committed here): megatron.training.arguments.parse_args and
              validate_args on the script's arguments, then the derived
              parallelism, batch, layers per stage, recomputation, sharding,
              offload, precision and model shape; without it, megatron-core's
              TransformerConfig on the values the script passes;
  torchtitan  the installed TorchTitan's (0.3) ConfigManager imports the
              config module; the model it names is built on the meta device and
              every optimizer parameter group must match one of its parameters.

A knob whose derived value differs from the plan counts as projected when
mistc's notes (stderr) name it, and as a silent difference otherwise.
Writes one JSON object per (case, target) with `accepted`, the framework and
version, the differences and the error, and prints a table.

  check-exports.py --mistc MISTC --out OUT.json [--megatron-lm DIR] [--only NAME]

DIR may hold a file COMMIT ("<sha> <date>") naming the checkout in the results.
"""
import argparse, contextlib, io, json, os, re, shlex, subprocess, sys, tempfile, traceback

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLANS = os.path.join(ROOT, "bench", "exports", "plans")

# (name, .mist file, extra mistc arguments, plan file or None for the tuned plan)
CASES = [
    ("gpt13-tuned", "gpt3-1.3b", ["--cluster", "a100-40g"], None),
    ("llama7-tuned-2nodes", "llama2-7b", ["--cluster", "a100-40g", "--nodes", "2"], None),
    ("gpt22-seed", "gpt3-22b", ["--cluster", "a100-40g", "--nodes", "4", "--global-batch", "512",
                                "--seq-len", "4096"], "examples/plans/gpt3-22b-4x8a100-seed.yaml"),
    ("gpt67-pp4-uneven", "gpt3-6.7b", ["--cluster", "a100-40g", "--nodes", "4"], "gpt67-pp4-uneven.yaml"),
    ("gpt67-pp2-tp4-noz", "gpt3-6.7b", ["--cluster", "a100-40g"], "gpt67-pp2-tp4-noz.yaml"),
    ("gpt22-pp7", "gpt3-22b", ["--cluster", "a100-40g", "--nodes", "4"], "gpt22-pp7.yaml"),
    ("llama7-zero2-offload-half", "llama2-7b", ["--cluster", "a100-40g"], "llama7-zero2-offload-half.yaml"),
    ("llama7-zero3-offload-all", "llama2-7b", ["--cluster", "a100-40g"], "llama7-zero3-offload-all.yaml"),
    ("llama7-tp2-offload-opt", "llama2-7b", ["--cluster", "a100-40g"], "llama7-tp2-offload-opt.yaml"),
    ("llama7-does-not-fit", "llama2-7b", ["--cluster", "a100-40g"], "llama7-does-not-fit.yaml"),
    ("gpt13-pp2-v3", "gpt3-1.3b", ["--cluster", "a100-40g"], "gpt13-pp2-v3.yaml"),
    ("gpt67-tp4-sp-overlap", "gpt3-6.7b", ["--cluster", "a100-40g"], "gpt67-tp4-sp-overlap.yaml"),
    ("gpt67-selective", "gpt3-6.7b", ["--cluster", "dgx-a100-40g"], "gpt67-selective.yaml"),
    ("llama70-sp-8nodes", "llama2-70b", ["--cluster", "dgx-h100-80g", "--nodes", "8"],
     "llama70-sp-8nodes.yaml"),
    ("gpt13-pp2-v2-uneven", "gpt3-1.3b", ["--cluster", "a100-40g"], "gpt13-pp2-v2-uneven.yaml"),
    # Megatron-LM's own default loss (fused_loss = false): no --cross-entropy-loss-fusion.
    ("gpt13-unfused-loss", "bench/exports/models/gpt3-1.3b-unfused-loss", ["--cluster", "a100-40g"],
     "gpt13-pp2-v3.yaml"),
]
TARGETS = ["deepspeed", "megatron", "torchtitan"]

# The words of mistc's projection notes that name each knob.
NOTE_WORDS = {
    "dp": ["tp and dp", "same GPUs"], "tp": ["tp and dp"], "micro_batch": ["gradient accumulation", "tp and dp"],
    "grad_accum": ["gradient accumulation", "tp and dp"], "layers_per_stage": ["layers per stage"],
    "ckpt_per_stage": ["checkpointed layers", "recomput"], "zero": ["ZeRO"], "offload_optimizer": ["offload"],
    "offload_weights": ["offload"], "grad_dtype": ["gradient"], "virtual_stages": ["1F1B"],
    "sequence_parallel": ["sequence parallelism"], "tp_comm_overlap": ["overlapped"],
}


def model_path(model):
    """An example's name, or a path from the repository root for a model of this check's own."""
    return os.path.join(ROOT, model + ".mist") if "/" in model else \
        os.path.join(ROOT, "examples", model + ".mist")


def plan_path(plan):
    return os.path.join(ROOT, plan) if plan.startswith("examples/") else os.path.join(PLANS, plan)


def run_mistc(mistc, case, target, workdir):
    name, model, extra, plan = case
    out = os.path.join(workdir, f"{name}.{target}")
    cmd = [mistc, model_path(model), *extra, f"--emit={target}", "-o", out,
           "--projected-plan", out + ".plan.yaml"]
    if plan:
        cmd += ["--plan", plan_path(plan)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    notes = [l.split("-", 1)[1].strip() for l in r.stderr.splitlines() if l.startswith("mistc:   - ")]
    return r.returncode, r.stderr, out, notes


def plan_values(text, model):
    """What a plan file says, knob by knob."""
    import yaml
    p = yaml.safe_load(text)
    st = p["stages"]
    zero = st[0]["zero"]
    return {
        "dp": st[0]["dp"], "tp": st[0]["tp"], "pp": len(st), "micro_batch": st[0]["micro_batch"],
        "grad_accum": p["grad_accum"], "global_batch": p["global_batch"],
        "layers_per_stage": [s["layers"][1] - s["layers"][0] + 1 for s in st],
        "ckpt_per_stage": [s["ckpt_layers"] for s in st],
        "zero": 3 if zero["weights"] else 2 if zero["grads"] else 1 if zero["optimizer"] else 0,
        "offload_optimizer": st[0]["offload"]["optimizer"], "offload_weights": st[0]["offload"]["weights"],
        "virtual_stages": p.get("virtual_stages", 1),
        # Only tp > 1 has a sequence to split (the frameworks turn it off at tp 1).
        "sequence_parallel": bool(p.get("sequence_parallel", False)) and st[0]["tp"] > 1,
        "tp_comm_overlap": bool(p.get("tp_comm_overlap", False)) and st[0]["tp"] > 1,
        "family": "llama" if model.startswith("llama") else "gpt",
    }


def original_plan(mistc, case):
    name, model, extra, plan = case
    cmd = [mistc, model_path(model), *extra, "--emit=plan"]
    if plan:
        cmd += ["--plan", plan_path(plan)]
    text = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True).stdout
    return plan_values(text, model)


def train_values(mistc, case):
    """The model's training settings as mistc's IR dump records them (its
    `train {...}` line): what an export must carry over unchanged."""
    name, model, extra, plan = case
    cmd = [mistc, model_path(model), "--emit=ir"]
    if "--seq-len" in extra:
        cmd += ["--seq-len", extra[extra.index("--seq-len") + 1]]
    ir = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True).stdout
    line = next(l for l in ir.splitlines() if l.strip().startswith("train {"))
    fields = dict(re.findall(r'(\w+) = ("[^"]*"|[-+.\w]+)', line))
    value = lambda k: fields[k].strip('"')
    seq = re.search(r"sym s = (\d+) : seq", ir)
    vocab = re.search(r"sym vocab = (\d+) : model", ir)
    return {"optimizer.lr": float(value("lr")),
            "optimizer.betas": [float(value("beta1")), float(value("beta2"))],
            "optimizer.eps": float(value("eps")), "optimizer.weight_decay": float(value("weight_decay")),
            "max_norm": float(value("grad_clip")), "warmup_steps": int(value("warmup_steps")),
            "dtype": value("dtype"), "seq_len": int(seq.group(1)) if seq else None,
            "vocab": int(vocab.group(1)) if vocab else None,
            # The loss's form (the cross_entropy op's `fused` attribute).
            "fused_loss": re.search(r"= cross_entropy .*\{fused = true", ir) is not None}


def compare(plan, projection, derived, notes):
    """(projected, silent, unpriced): knobs where the framework differs from the
    plan, named in mistc's notes or not, and knobs where it differs from the
    projection mistc priced (which must never happen)."""
    projected, silent, unpriced = [], [], []
    for key, value in derived.items():
        if key in projection and projection[key] != value:
            unpriced.append(f"{key}: priced {projection[key]}, framework {value}")
        if key not in plan or plan[key] == value:
            continue
        entry = f"{key}: plan {plan[key]}, framework {value}"
        words = NOTE_WORDS.get(key, [key])
        (projected if any(w in n for n in notes for w in words) else silent).append(entry)
    return projected, silent, unpriced


# --------------------------------------------------------------------------- DeepSpeed

def check_deepspeed(path, plan):
    import torch
    import deepspeed
    import deepspeed.runtime.config as dsconfig
    from deepspeed.runtime.engine import DeepSpeedEngine
    # The parser asks torch.distributed for the rank; no process group here.
    dsconfig.dist.get_rank = lambda *a, **k: 0
    from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology
    raw = json.load(open(path))
    # The ranks as DeepSpeed's own topology class lays them out, from the
    # topology the export names (what PipelineModule or Megatron-DeepSpeed's
    # mpu gives deepspeed.initialize); its data-parallel size is what
    # DeepSpeed's batch check multiplies.
    named = raw.get("mistc", {}).get("topology")
    if named:
        topology = PipeModelDataParallelTopology(num_pp=named["pipe"], num_mp=named["model"],
                                                 num_dp=named["data"])
        dp, tp, world = topology.get_dim("data"), topology.get_dim("model"), topology.world_size()
        if world != plan["dp"] * plan["tp"] * plan["pp"] or topology.get_dim("pipe") != plan["pp"]:
            raise ValueError(f"the export's topology ({world} ranks, {topology.get_dim('pipe')} "
                             "stages) is not the plan's")
    else:  # exports before the topology record: dp from the batch arithmetic
        micro, accum = raw["train_micro_batch_size_per_gpu"], raw["gradient_accumulation_steps"]
        dp = raw["train_batch_size"] // (micro * accum) if raw["train_batch_size"] % (micro * accum) == 0 else 0
        tp, world = plan["tp"], 0

    class DataParallelUnit:  # what Megatron-DeepSpeed and PipelineModule pass as mpu
        def get_data_parallel_world_size(self): return max(dp, 1)
        def get_data_parallel_rank(self): return 0
        def get_model_parallel_world_size(self): return tp
        def get_model_parallel_rank(self): return 0
        def get_tensor_model_parallel_world_size(self): return tp

    with contextlib.redirect_stdout(io.StringIO()):
        config = dsconfig.DeepSpeedConfig(path, mpu=DataParallelUnit())
    engine = DeepSpeedEngine.__new__(DeepSpeedEngine)
    torch.nn.Module.__init__(engine)
    engine._config, engine.global_rank = config, 0
    engine.pipeline_parallelism = plan["pp"] > 1
    engine._do_optimizer_sanity_check(torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))]))
    # What model code builds: the pipeline's stages (PipelineModule with a
    # type: partition balances the transformer layers) and which of their
    # layers recompute (the "mistc" remarks name the count).
    from deepspeed.runtime.utils import partition_balanced
    L, S = sum(plan["layers_per_stage"]), plan["pp"]
    bounds = partition_balanced(weights=[1] * L, num_parts=S)
    split = [int(bounds[i + 1] - bounds[i]) for i in range(S)]
    k = 0
    for remark in raw.get("mistc", {}).get("remarks", []):
        if m := re.search(r"the last (\d+) layers of each stage", remark):
            k = int(m.group(1))
    zc = config.zero_config
    derived = {
        "layers_per_stage": split, "ckpt_per_stage": [min(k, l) for l in split],
        "dp": dp, "tp": tp, "micro_batch": config.train_micro_batch_size_per_gpu,
        "grad_accum": config.gradient_accumulation_steps, "zero": int(zc.stage),
        "offload_optimizer": (zc.offload_optimizer.ratio if zc.offload_optimizer and
                              str(zc.offload_optimizer.device).endswith("cpu") else 0.0),
        "offload_weights": 1.0 if zc.offload_param and str(zc.offload_param.device).endswith("cpu") else 0.0,
        "virtual_stages": 1,  # DeepSpeed's pipeline engine runs plain 1F1B
        # Megatron-LM's tp inside DeepSpeed's engine: plain all-reduces.
        "sequence_parallel": False, "tp_comm_overlap": False,
    }
    # The optimizer and precision as DeepSpeed's config object parsed them.
    params = config.optimizer_params or {}
    derived.update({
        "optimizer.lr": params.get("lr"), "optimizer.betas": list(params.get("betas", [])),
        "optimizer.eps": params.get("eps"), "optimizer.weight_decay": params.get("weight_decay"),
        "max_norm": config.gradient_clipping,
        "dtype": "bf16" if config.bfloat16_config.enabled else "f16" if config.float16_config.enabled else "f32",
    })
    return "deepspeed " + deepspeed.__version__, derived


# --------------------------------------------------------------------------- Megatron-LM

# What Megatron-LM must build for each family of the plan set (its defaults
# are GPT's with dropout 0.1; mistc's models have no dropout).
MODEL_SHAPE = {
    "gpt": dict(add_bias_linear=True, untie_embeddings_and_output_weights=False,
                normalization="LayerNorm", swiglu=False, position_embedding_type="learned_absolute",
                hidden_dropout=0.0, attention_dropout=0.0),
    "llama": dict(add_bias_linear=False, untie_embeddings_and_output_weights=True,
                  normalization="RMSNorm", swiglu=True, position_embedding_type="rope",
                  hidden_dropout=0.0, attention_dropout=0.0, rotary_base=10000),
}

def megatron_argv(path):
    script = open(path).read()
    body = script.split("pretrain_gpt.py \\\n", 1)[1].split('"$@"')[0]
    env = dict(re.findall(r"^export (\w+)=(\S+)$", script, re.M))
    return shlex.split(body.replace("\\\n", " ")), env


def check_megatron(path, plan, megatron_lm):
    argv, env = megatron_argv(path)
    gpus = plan["dp"] * plan["tp"] * plan["pp"]
    if megatron_lm:
        return check_megatron_parser(argv, env, gpus, plan, megatron_lm)
    return check_megatron_core(argv, plan)


def check_megatron_parser(argv, env, gpus, plan, megatron_lm):
    import typing, typing_extensions
    if not hasattr(typing, "override"):  # Megatron-LM main is written for Python 3.12
        typing.override = typing_extensions.override
    if megatron_lm not in sys.path:
        sys.path.insert(0, megatron_lm)
    import megatron.training.arguments as megatron_arguments
    from megatron.training.arguments import parse_args, validate_args
    # No GPU here: the parser asks for the device's architecture (it asserts
    # CUDA_DEVICE_MAX_CONNECTIONS=1 for tp > 1 before Blackwell). The presets
    # of the plan set are A100s: Ampere, 8.
    megatron_arguments.get_device_arch_version = lambda: 8
    os.environ.update({"WORLD_SIZE": str(gpus), "RANK": "0", "LOCAL_RANK": "0"})
    for k in ("CUDA_DEVICE_MAX_CONNECTIONS",):
        os.environ.pop(k, None)
    os.environ.update(env)
    saved = sys.argv
    vocab = plan.get("vocab") or 50304  # the model's: Megatron-LM pads it as the script asks
    sys.argv = ["pretrain_gpt.py", *argv, "--mock-data", "--tokenizer-type", "NullTokenizer",
                "--vocab-size", str(vocab)]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            args = parse_args()
            validate_args(args, {})
    finally:
        sys.argv = saved
    pp, L = args.pipeline_model_parallel_size, args.num_layers
    first, last = args.decoder_first_pipeline_num_layers, args.decoder_last_pipeline_num_layers
    if pp == 1:
        split = [L]
    else:
        rest, middle_stages = L - (first or 0) - (last or 0), pp - (first is not None) - (last is not None)
        mid = rest // middle_stages if middle_stages else 0
        split = ([first] if first is not None else []) + [mid] * middle_stages + ([last] if last is not None else [])
    recompute = args.recompute_num_layers if args.recompute_granularity == "full" else 0
    if args.recompute_method == "uniform" and recompute:
        recompute = None  # chunks of layers, not a count
    strategy = getattr(args, "data_parallel_sharding_strategy", "no_shard")
    zero = (3 if strategy == "optim_grads_params" else 2 if strategy == "optim_grads" else 1) \
        if getattr(args, "use_megatron_fsdp", False) else (1 if args.use_distributed_optimizer else 0)
    derived = {
        "dp": args.data_parallel_size, "tp": args.tensor_model_parallel_size, "pp": pp,
        "micro_batch": args.micro_batch_size,
        "grad_accum": args.global_batch_size // (args.micro_batch_size * args.data_parallel_size),
        "layers_per_stage": split, "ckpt_per_stage": [min(recompute, l) if recompute is not None else l
                                                     for l in split],
        "zero": zero,
        "offload_optimizer": args.optimizer_offload_fraction if args.optimizer_cpu_offload else 0.0,
        # Interleaved 1F1B: validate_args derives the chunks per stage.
        "virtual_stages": getattr(args, "virtual_pipeline_model_parallel_size", None) or 1,
        "sequence_parallel": bool(args.sequence_parallel), "tp_comm_overlap": bool(args.tp_comm_overlap),
        # The optimizer, schedule and precision as parse_args/validate_args leave them.
        "optimizer.lr": args.lr, "optimizer.betas": [args.adam_beta1, args.adam_beta2],
        "optimizer.eps": args.adam_eps, "optimizer.weight_decay": args.weight_decay,
        "max_norm": args.clip_grad, "warmup_steps": args.lr_warmup_iters,
        "dtype": "bf16" if args.bf16 else "f16" if args.fp16 else "f32", "seq_len": args.seq_length,
        "fused_loss": bool(args.cross_entropy_loss_fusion),
    }
    for key in MODEL_SHAPE[plan["family"]]:
        derived["model." + key] = getattr(args, key)
    # The vocabulary Megatron-LM builds: the tokenizer's, padded to a multiple
    # of --make-vocab-size-divisible-by x tp.
    from megatron.core.tokenizers.utils.build_tokenizer import vocab_size_with_padding
    derived["vocab"] = vocab_size_with_padding(vocab, args, logging_enabled=False)
    import megatron.core
    commit_file = os.path.join(megatron_lm, "COMMIT")  # "<sha> <date>", where a checkout records it
    where = open(commit_file).read().strip() if os.path.exists(commit_file) else megatron_lm
    return f"Megatron-LM main at {where} (parse_args + validate_args)", derived


def check_megatron_core(argv, plan):
    """megatron-core's TransformerConfig on the values the script passes."""
    import megatron.core
    from megatron.core.transformer.transformer_config import TransformerConfig
    values = {}
    i = 0
    while i < len(argv):
        if argv[i].startswith("--"):
            key = argv[i][2:].replace("-", "_")
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                values[key] = argv[i + 1]; i += 2
            else:
                values[key] = True; i += 1
        else:
            i += 1
    kw = dict(num_layers=int(values["num_layers"]), hidden_size=int(values["hidden_size"]),
              num_attention_heads=int(values["num_attention_heads"]),
              tensor_model_parallel_size=int(values["tensor_model_parallel_size"]),
              pipeline_model_parallel_size=int(values["pipeline_model_parallel_size"]),
              bf16="bf16" in values, fp16="fp16" in values,
              add_bias_linear="disable_bias_linear" not in values,
              hidden_dropout=float(values.get("hidden_dropout", 0.1)),
              attention_dropout=float(values.get("attention_dropout", 0.1)))
    import torch  # as megatron.training's core_transformer_config_from_args sets them
    dtype = torch.bfloat16 if kw["bf16"] else torch.float16 if kw["fp16"] else torch.float32
    kw.update(params_dtype=dtype, pipeline_dtype=dtype)
    if "ffn_hidden_size" in values:
        kw["ffn_hidden_size"] = int(values["ffn_hidden_size"])
    if "recompute_granularity" in values:
        kw.update(recompute_granularity=values["recompute_granularity"],
                  recompute_method=values.get("recompute_method"),
                  recompute_num_layers=int(values["recompute_num_layers"]))
    if "decoder_first_pipeline_num_layers" in values:
        kw["num_layers_in_first_pipeline_stage"] = int(values["decoder_first_pipeline_num_layers"])
    if "decoder_last_pipeline_num_layers" in values:
        kw["num_layers_in_last_pipeline_stage"] = int(values["decoder_last_pipeline_num_layers"])
    TransformerConfig(**kw)
    derived = {"tp": kw["tensor_model_parallel_size"], "pp": kw["pipeline_model_parallel_size"],
               "micro_batch": int(values["micro_batch_size"])}
    return "megatron-core " + megatron.core.__version__ + " TransformerConfig", derived


# --------------------------------------------------------------------------- TorchTitan

def check_torchtitan(path, plan):
    """TorchTitan 0.3: the export is a config module; its ConfigManager imports
    it (--module/--config); the model's own checks against the parallelism
    run (update_from_config: e.g. no weight tying with pipeline parallelism),
    the model it names is built on the meta device and every optimizer
    parameter group must match a parameter of it (what TorchTitan's
    optimizer container requires); the loss must be TorchTitan's
    cross-entropy over the model's vocabulary and the data one of its
    loaders (both defaults are abstract). The trainer itself, even in its
    fake_backend dry run, needs a GPU device (Trainer sets one first)."""
    import shutil
    import torch
    from importlib.metadata import version as dist_version
    from torchtitan.config.manager import ConfigManager
    from torchtitan.distributed.activation_checkpoint import FullAC
    folder = os.path.dirname(path)
    module = "mistc_check_" + re.sub(r"\W", "_", os.path.basename(path))
    shutil.copy(path, os.path.join(folder, module + ".py"))
    sys.path.insert(0, folder)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            c = ConfigManager().parse_args(["--module", module, "--config", "mistc_plan"])
    finally:
        sys.path.remove(folder)
    par, tr = c.parallelism, c.training
    dp = par.data_parallel_replicate_degree * par.data_parallel_shard_degree
    pp = par.pipeline_parallel_degree
    micro = par.pipeline_parallel_microbatch_size if pp > 1 else tr.local_batch_size
    virtual = 1
    if pp > 1:
        parts = par.module_fqns_per_model_part or []
        counts = [sum(1 for m in part if m.startswith("layers.")) for part in parts]
        # Interleaved schedules place part j on rank j % pp (TorchTitan's loop style).
        virtual = len(parts) // pp if "Interleaved" in par.pipeline_parallel_schedule else 1
        split = [sum(counts[r::pp]) for r in range(pp)] if virtual > 1 else counts
    else:
        split = [plan["layers_per_stage"][0]]
    ac = c.activation_checkpoint
    if ac is None:
        ckpt = [0] * len(split)
    elif isinstance(ac, FullAC.Config):
        ckpt = split
    else:
        raise ValueError(f"activation checkpointing {type(ac).__qualname__}: not what mistc prices")
    from torchtitan.components.loss import CrossEntropyLoss
    from torchtitan.hf_datasets.text_datasets import HuggingFaceTextDataLoader
    if not isinstance(c.loss, CrossEntropyLoss.Config):
        raise ValueError(f"loss {type(c.loss).__qualname__}: not TorchTitan's cross-entropy")
    if not isinstance(c.dataloader, HuggingFaceTextDataLoader.Config):
        raise ValueError(f"dataloader {type(c.dataloader).__qualname__}: not a loader TorchTitan builds")
    c.model_spec.model.update_from_config(config=c)  # the model's checks of the parallelism
    with torch.device("meta"):
        model = c.model_spec.model.build()
    names = [n for n, _ in model.named_parameters()]
    for group in c.optimizer.param_groups:
        if not any(re.search(group.pattern, n) for n in names):
            raise ValueError(f"optimizer group pattern {group.pattern!r} matches no parameter")
    adamw = c.optimizer.param_groups[-1].optimizer_kwargs  # the catch-all group
    derived = {
        "dp": dp, "tp": par.tensor_parallel_degree, "pp": pp, "micro_batch": micro,
        "grad_accum": tr.global_batch_size // (micro * dp), "layers_per_stage": split,
        "ckpt_per_stage": ckpt, "zero": 3 if par.data_parallel_shard_degree > 1 else 0,
        "offload_optimizer": 1.0 if tr.enable_cpu_offload else 0.0,
        "offload_weights": 1.0 if tr.enable_cpu_offload else 0.0,
        "virtual_stages": virtual,
        "sequence_parallel": bool(par.enable_sequence_parallel) and par.tensor_parallel_degree > 1,
        "tp_comm_overlap": False,  # 0.3's async tp needs torch.compile; mistc's export leaves it off
        "optimizer.lr": adamw["lr"], "optimizer.betas": list(adamw["betas"]),
        "optimizer.eps": adamw["eps"], "optimizer.weight_decay": adamw["weight_decay"],
        "max_norm": tr.max_norm, "warmup_steps": c.lr_scheduler.warmup_steps,
        "dtype": {"bfloat16": "bf16", "float32": "f32", "float16": "f16"}[tr.mixed_precision_param],
        "seq_len": tr.seq_len,
        "vocab": c.loss.global_vocab_size,
    }
    return "torchtitan " + dist_version("torchtitan"), derived


CHECKERS = {"deepspeed": check_deepspeed, "torchtitan": check_torchtitan}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mistc", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--megatron-lm", default=os.environ.get("MEGATRON_LM"))
    ap.add_argument("--only", action="append", default=[])
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for case in CASES:
            if a.only and case[0] not in a.only:
                continue
            plan = original_plan(a.mistc, case)
            plan.update(train_values(a.mistc, case))
            for target in TARGETS:
                rc, stderr, path, notes = run_mistc(a.mistc, case, target, work)
                row = {"case": case[0], "target": target, "mistc_exit": rc, "notes": notes}
                if rc != 0:
                    row.update(accepted=None, error="mistc refused: " + stderr.strip().splitlines()[-1])
                    rows.append(row)
                    continue
                projection = plan_values(open(path + ".plan.yaml").read(), case[1])
                try:
                    if target == "megatron":
                        version, derived = check_megatron(path, dict(plan), a.megatron_lm)
                        for key, value in MODEL_SHAPE[plan["family"]].items():
                            plan["model." + key] = projection["model." + key] = value
                    else:
                        version, derived = CHECKERS[target](path, plan)
                    projected, silent, unpriced = compare(plan, projection, derived, notes)
                    row.update(accepted=True, framework=version, derived=derived, projected=projected,
                               silent_differences=silent, differs_from_priced=unpriced)
                except BaseException as e:  # SystemExit from argparse too
                    if isinstance(e, KeyboardInterrupt):
                        raise
                    last = traceback.format_exception_only(type(e), e)[-1].strip()
                    row.update(accepted=False, error=last[:400])
                rows.append(row)
    json.dump(rows, open(a.out, "w"), indent=1)
    print(f"{'case':28} {'target':11} {'result':10} detail")
    for r in rows:
        if r["accepted"] is None:
            result, detail = "refused", r["error"]
        elif not r["accepted"]:
            result, detail = "REJECTED", r["error"]
        elif r["differs_from_priced"]:
            result, detail = "UNPRICED", "; ".join(r["differs_from_priced"])
        elif r["silent_differences"]:
            result, detail = "SILENT", "; ".join(r["silent_differences"])
        else:
            result, detail = "ok", "; ".join(r["projected"]) or "exact"
        print(f"{r['case']:28} {r['target']:11} {result:10} {detail[:160]}")
    bad = sum(1 for r in rows if r["accepted"] is False or
              (r["accepted"] and (r["silent_differences"] or r["differs_from_priced"])))
    print(f"{len(rows)} exports, {bad} rejected, silently different or not what mistc priced")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
