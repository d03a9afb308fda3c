#!/usr/bin/env python3
"""Tokenize text for mistrt: llm.c token files or Megatron-LM indexed datasets.

    scripts/make-tokens.py --out data/licenses.bin [PATH ...]
    scripts/make-tokens.py --tokenizer tokenizer.json --format megatron \\
        --append-eod --out data/corpus corpus.jsonl

PATHs are files or folders (searched recursively); the default is
/usr/share/common-licenses, present on every Debian system. Files are read
in sorted path order, and symbolic links are skipped (there they only
duplicate other files), so the output is the same on every machine with the
same files. Each file is one document, except JSON lines files (.jsonl),
where each line is an object whose --json-key field (default "text") is one
document.

--tokenizer chooses the tokens:
  byte (default)          every byte is a token (vocabulary 256); standard
                          library only
  tiktoken:NAME           a tiktoken encoding, e.g. tiktoken:gpt2 (GPT-2 BPE,
                          vocabulary 50257); needs the tiktoken package
  FILE.json, FOLDER, NAME a Hugging Face tokenizer: a tokenizer.json file, a
                          folder holding one, or a name transformers'
                          AutoTokenizer finds (needs tokenizers, or
                          transformers for names)

--append-eod ends every document with the tokenizer's end-of-text token
(--eod-token names it where the tokenizer does not say), as Megatron-LM's
preprocess_data.py --append-eod does.

--format chooses the file:
  llmc (default)  one token file (runtime/data/TokenFile.h): 256 int32 of
                  header, then the tokens; uint16 tokens (llm.c's GPT-2
                  header) for vocabularies up to 65536, else uint32 (llm.c's
                  LLaMA-3 header). header[3] holds the vocabulary size, which
                  the trainer checks against its model's (llm.c leaves it 0)
  megatron        OUT.bin and OUT.idx as Megatron-LM's preprocess_data.py
                  writes them, one sequence per document; uint16 tokens for
                  vocabularies below 65500, else int32 (Megatron-LM's choice)

Prints the documents, tokens and vocabulary written.
"""
import argparse
import array
import json
import os
import struct
import sys

LLMC_GPT2 = (20240520, 1, "H")    # uint16 tokens
LLMC_LLAMA3 = (20240801, 7, "I")  # uint32 tokens
HEADER_INTS = 256
MAX_TOKENS = 2**31 - 1  # the llm.c header's count is an int32
MEGATRON_UINT16, MEGATRON_INT32 = 8, 4  # Megatron-LM's DType codes
PROGRESS_BYTES = 64 << 20


def collect_files(paths):
    """Regular files under `paths`, sorted, symbolic links left out."""
    files = []
    for path in paths:
        if os.path.islink(path):
            continue
        if os.path.isfile(path):
            files.append(path)
        elif os.path.isdir(path):
            for root, dirs, names in os.walk(path):
                dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
                for name in names:
                    full = os.path.join(root, name)
                    if os.path.isfile(full) and not os.path.islink(full):
                        files.append(full)
        else:
            raise SystemExit(f"make-tokens: {path}: no such file or folder")
    return sorted(files)


def documents(files, json_key):
    """Each document's bytes: a file, or one field of each JSON line."""
    for path in files:
        if not path.endswith(".jsonl"):
            with open(path, "rb") as f:
                yield f.read()
            continue
        with open(path, "rb") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise SystemExit(f"make-tokens: {path}:{number}: not JSON: {e.msg}")
                if not isinstance(record, dict) or not isinstance(record.get(json_key), str):
                    raise SystemExit(f"make-tokens: {path}:{number}: no string field "
                                     f"'{json_key}' (choose another with --json-key)")
                yield record[json_key].encode("utf-8")


class ByteTokenizer:
    vocab_size = 256
    eod = None
    name = "bytes"

    def encode(self, data):
        return data  # each byte value is its token


class TiktokenTokenizer:
    def __init__(self, name):
        try:
            import tiktoken
        except ImportError:
            raise SystemExit("make-tokens: --tokenizer tiktoken:... needs the tiktoken package "
                             "(pip install tiktoken)")
        try:
            self.encoding = tiktoken.get_encoding(name)
        except Exception as e:
            raise SystemExit(f"make-tokens: tiktoken has no encoding '{name}' here: {e}")
        self.vocab_size = self.encoding.n_vocab
        self.eod = self.encoding.eot_token
        self.name = f"tiktoken {name}"

    def encode(self, data):
        return self.encoding.encode_ordinary(data.decode("utf-8", errors="replace"))


class HuggingFaceTokenizer:
    EOD_NAMES = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "[SEP]")

    def __init__(self, spec, eod_token):
        path = os.path.join(spec, "tokenizer.json") if os.path.isdir(spec) else spec
        if os.path.isfile(path):
            try:
                from tokenizers import Tokenizer
            except ImportError:
                raise SystemExit("make-tokens: a tokenizer.json needs the tokenizers package "
                                 "(pip install tokenizers)")
            try:
                self.tokenizer = Tokenizer.from_file(path)
            except Exception as e:
                raise SystemExit(f"make-tokens: {path}: not a Hugging Face tokenizer: {e}")
            self.vocab_size = self.tokenizer.get_vocab_size(with_added_tokens=True)
            self.encode_text = lambda text: self.tokenizer.encode(
                text, add_special_tokens=False).ids
            vocabulary = self.tokenizer.get_vocab(with_added_tokens=True)
        else:
            try:
                from transformers import AutoTokenizer
            except ImportError:
                raise SystemExit(f"make-tokens: {spec} is no tokenizer file or folder, and "
                                 "finding it by name needs transformers (pip install transformers)")
            try:
                tokenizer = AutoTokenizer.from_pretrained(spec)
            except Exception as e:
                raise SystemExit(f"make-tokens: no tokenizer '{spec}': {e}")
            self.vocab_size = len(tokenizer)
            self.encode_text = lambda text: tokenizer.encode(text, add_special_tokens=False)
            vocabulary = tokenizer.get_vocab()
            if eod_token is None and tokenizer.eos_token is not None:
                eod_token = tokenizer.eos_token
        self.name = f"Hugging Face {spec}"
        self.eod = None
        for name in ([eod_token] if eod_token else self.EOD_NAMES):
            if name in vocabulary:
                self.eod = vocabulary[name]
                break
        if eod_token and self.eod is None:
            raise SystemExit(f"make-tokens: the tokenizer has no token '{eod_token}'")

    def encode(self, data):
        return self.encode_text(data.decode("utf-8", errors="replace"))


def make_tokenizer(spec, eod_token):
    if spec == "byte":
        if eod_token:
            raise SystemExit("make-tokens: the byte tokenizer has no end-of-text token")
        return ByteTokenizer()
    if spec.startswith("tiktoken:"):
        return TiktokenTokenizer(spec[len("tiktoken:"):])
    return HuggingFaceTokenizer(spec, eod_token)


def write_llmc(out, docs, vocab):
    magic, version, code = LLMC_GPT2 if vocab <= 65536 else LLMC_LLAMA3
    tokens = array.array(code)
    for doc in docs:
        tokens.extend(doc)
    if len(tokens) < 2:
        raise SystemExit(f"make-tokens: {len(tokens)} tokens; a token file needs at least 2")
    if len(tokens) > MAX_TOKENS:
        raise SystemExit(f"make-tokens: {len(tokens)} tokens do not fit the header's int32 count "
                         "(write --format megatron instead)")
    if sys.byteorder != "little":
        tokens.byteswap()
    header = [0] * HEADER_INTS
    header[0], header[1], header[2], header[3] = magic, version, len(tokens), vocab
    with open(out, "wb") as f:
        f.write(struct.pack(f"<{HEADER_INTS}i", *header))
        f.write(tokens.tobytes())
    return [out], len(tokens)


def write_megatron(out, docs, vocab):
    code, typecode = (MEGATRON_UINT16, "H") if vocab < 65500 else (MEGATRON_INT32, "i")
    itemsize = array.array(typecode).itemsize
    prefix = out[:-4] if out.endswith((".bin", ".idx")) else out
    lengths = array.array("i")
    with open(prefix + ".bin", "wb") as f:
        for doc in docs:
            tokens = array.array(typecode, doc)
            if sys.byteorder != "little":
                tokens.byteswap()
            f.write(tokens.tobytes())
            lengths.append(len(tokens))
    if not lengths:
        raise SystemExit("make-tokens: no document holds a token")
    pointers, at = array.array("q"), 0
    for n in lengths:
        pointers.append(at)
        at += n * itemsize
    document_starts = array.array("q", range(len(lengths) + 1))
    if sys.byteorder != "little":
        for a in (lengths, pointers, document_starts):
            a.byteswap()
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", code))
        f.write(struct.pack("<Q", len(lengths)))
        f.write(struct.pack("<Q", len(document_starts)))
        f.write(lengths.tobytes())
        f.write(pointers.tobytes())
        f.write(document_starts.tobytes())
    return [prefix + ".bin", prefix + ".idx"], sum(lengths)


def main(argv):
    parser = argparse.ArgumentParser(
        description="Tokenize text into an llm.c token file or a Megatron-LM indexed dataset.")
    parser.add_argument("paths", nargs="*", default=["/usr/share/common-licenses"],
                        help="files or folders (default: /usr/share/common-licenses)")
    parser.add_argument("--out", required=True,
                        help="the token file, or the Megatron-LM dataset's prefix")
    parser.add_argument("--format", choices=("llmc", "megatron"), default="llmc")
    parser.add_argument("--tokenizer", default="byte",
                        help="byte, tiktoken:NAME, or a Hugging Face tokenizer (file, folder, name)")
    parser.add_argument("--json-key", default="text", help="the text field of .jsonl lines")
    parser.add_argument("--append-eod", action="store_true",
                        help="end every document with the end-of-text token")
    parser.add_argument("--eod-token", help="the end-of-text token's text, where not known")
    args = parser.parse_args(argv)

    tokenizer = make_tokenizer(args.tokenizer, args.eod_token)
    if args.append_eod and tokenizer.eod is None:
        if isinstance(tokenizer, ByteTokenizer):
            raise SystemExit("make-tokens: the byte tokenizer has no end-of-text token (each of "
                             "its 256 tokens is a byte); leave out --append-eod")
        raise SystemExit(f"make-tokens: {tokenizer.name} names no end-of-text token; "
                         "give it with --eod-token")
    files = collect_files(args.paths)
    counts = {"documents": 0, "bytes": 0, "next_report": PROGRESS_BYTES}

    def tokenized():
        for data in documents(files, args.json_key):
            tokens = list(tokenizer.encode(data))
            if args.append_eod:
                tokens.append(tokenizer.eod)
            counts["documents"] += 1
            counts["bytes"] += len(data)
            if counts["bytes"] >= counts["next_report"]:
                print(f"make-tokens: {counts['bytes'] >> 20} MiB in {counts['documents']} "
                      "documents", file=sys.stderr, flush=True)
                counts["next_report"] += PROGRESS_BYTES
            if tokens:
                yield tokens

    write = write_megatron if args.format == "megatron" else write_llmc
    written, total = write(args.out, tokenized(), tokenizer.vocab_size)
    print(f"{' and '.join(written)}: {total} tokens from {counts['documents']} documents in "
          f"{len(files)} files ({tokenizer.name}, vocabulary {tokenizer.vocab_size})")


if __name__ == "__main__":
    main(sys.argv[1:])
