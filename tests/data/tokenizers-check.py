#!/usr/bin/env python3
"""scripts/make-tokens.py's tokenizers and formats against their own libraries.

Trains a small byte-level BPE tokenizer with Hugging Face `tokenizers` (the
library behind every Hugging Face fast tokenizer) on local text, tokenizes
text files and a JSON lines file with make-tokens.py into both formats, and
checks that
  - the llm.c file holds exactly tokenizer.encode(document) + [end-of-text]
    for every document, with the header's count and vocabulary;
  - the Megatron-LM dataset holds one sequence per document with the same
    tokens, read back by Megatron-Core's own IndexedDataset when it is
    installed, and by mist-data (the trainer's reader) in any case;
  - tiktoken's GPT-2 encoding (`gpt2`, or `r50k_base`, the same ranks) gives
    the same with --tokenizer tiktoken:NAME, and is GPT-2's BPE ("Hello world"
    is 15496, 995), where tiktoken and its encoding file are at hand (skipped
    otherwise; TIKTOKEN_CACHE_DIR may hold the file where the network cannot).

    tokenizers-check.py MAKE_TOKENS MIST_DATA WORKDIR

Exits 0 when all agree, 1 otherwise, 77 without `tokenizers`.
"""
import json
import os
import struct
import subprocess
import sys

try:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
except ImportError:
    print("tokenizers-check: no tokenizers package: skipped")
    sys.exit(77)

EOD = "<|endoftext|>"
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(*command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout + result.stderr


def read_llmc(path):
    with open(path, "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        code = "H" if (header[0], header[1]) == (20240520, 1) else "I"
        body = f.read()
    return header, list(struct.unpack(f"<{len(body) // struct.calcsize(code)}{code}", body))


def read_megatron_idx(prefix):
    """Sequence lengths and the dtype code, with the standard library."""
    with open(prefix + ".idx", "rb") as f:
        data = f.read()
    code = data[17]
    sequences, = struct.unpack_from("<Q", data, 18)
    lengths = struct.unpack_from(f"<{sequences}i", data, 34)
    return code, list(lengths)


def main():
    make_tokens, mist_data, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    texts = os.path.join(work, "texts")
    os.makedirs(texts, exist_ok=True)
    docs = {
        "a.txt": "The quick brown fox jumps over the lazy dog.\n" * 20,
        "b.txt": "Data parallelism, tensor parallelism and pipelines: ünïcödé too. " * 15,
    }
    for name, text in docs.items():
        with open(os.path.join(texts, name), "w", encoding="utf-8") as f:
            f.write(text)
    lines = [f"Line {i}: sequence parallelism splits tokens over ranks." for i in range(12)]
    with open(os.path.join(texts, "c.jsonl"), "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps({"text": line, "id": 1}) + "\n")
    documents = [docs["a.txt"], docs["b.txt"]] + lines  # sorted paths: a, b, c.jsonl

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(documents * 3, trainers.BpeTrainer(
        vocab_size=400, special_tokens=[EOD], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer_path = os.path.join(work, "tokenizer.json")
    tokenizer.save(tokenizer_path)
    eod = tokenizer.token_to_id(EOD)
    expected = [tokenizer.encode(d, add_special_tokens=False).ids + [eod] for d in documents]
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)

    out = os.path.join(work, "hf.bin")
    run(sys.executable, make_tokens, "--tokenizer", tokenizer_path, "--append-eod",
        "--out", out, texts)
    header, tokens = read_llmc(out)
    check(header[:4] == (20240520, 1, len(tokens), vocab),
          f"llm.c header: GPT-2 magic, version 1, count {len(tokens)}, vocabulary {vocab}")
    check(tokens == [t for doc in expected for t in doc],
          f"llm.c tokens are tokenizers' encoding of the {len(documents)} documents, each "
          "ended by <|endoftext|>")

    prefix = os.path.join(work, "hf")
    run(sys.executable, make_tokens, "--tokenizer", tokenizer_path, "--append-eod",
        "--format", "megatron", "--out", prefix, texts)
    code, lengths = read_megatron_idx(prefix)
    check(code == 8 and lengths == [len(d) for d in expected],
          "Megatron-LM index: uint16, one sequence per document, the documents' lengths")
    info = run(mist_data, "info", prefix)
    check(f"{len(documents)} sequences in {len(documents)} documents" in info,
          f"mist-data reads the dataset: {info.strip()}")
    try:
        from megatron.core.datasets.indexed_dataset import IndexedDataset
    except ImportError:
        print("skip Megatron-Core's IndexedDataset (megatron-core not installed)")
    else:
        dataset = IndexedDataset(prefix)
        read = [dataset[i].tolist() for i in range(len(dataset))]
        check(read == expected and list(dataset.document_indices) == list(range(len(expected) + 1)),
              "Megatron-Core's IndexedDataset reads every document's tokens back")

    # GPT-2's BPE: tiktoken's "gpt2", or "r50k_base" (the same ranks in
    # tiktoken's own format), where tiktoken and its encoding file are at hand.
    encoding = name = None
    try:
        import tiktoken
    except ImportError as e:
        print(f"skip tiktoken (not installed)")
    else:
        for candidate in ("gpt2", "r50k_base"):
            try:
                encoding, name = tiktoken.get_encoding(candidate), candidate
                break
            except Exception as e:  # its file cannot be fetched
                print(f"skip tiktoken:{candidate} ({type(e).__name__}: {str(e)[:80]})")
    if encoding is not None:
        check(encoding.encode_ordinary("Hello world") == [15496, 995],
              f"tiktoken:{name} is GPT-2's BPE ('Hello world' is 15496, 995)")
        out = os.path.join(work, "gpt2.bin")
        run(sys.executable, make_tokens, "--tokenizer", f"tiktoken:{name}", "--append-eod",
            "--out", out, texts)
        header, tokens = read_llmc(out)
        gpt2 = [encoding.encode_ordinary(d) + [encoding.eot_token] for d in documents]
        check(header[3] == 50257 and tokens == [t for doc in gpt2 for t in doc],
              f"tiktoken:{name}: GPT-2 BPE tokens, each document ended by <|endoftext|> "
              "(50256), vocabulary 50257")

    print(f"{'all agree' if not failures else str(len(failures)) + ' disagree'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
