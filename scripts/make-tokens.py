#!/usr/bin/env python3
"""Make a byte-level token file for mistrt from text files.

    scripts/make-tokens.py --out data/licenses.bin [PATH ...]

Every byte is a token (vocabulary 256), written as an llm.c GPT-2 token file:
256 little-endian int32 of header (magic 20240520, version 1, token count,
zeros), then the tokens as little-endian uint16 (runtime/data/TokenFile.h,
docs/runtime.md). PATHs are files or folders (searched recursively); the
default is /usr/share/common-licenses, present on every Debian system. Files
are read in sorted path order and concatenated as they are, and symbolic
links are skipped (there they only duplicate other files), so the output is
the same on every machine with the same files. Prints the token count.

Standard library only.
"""
import argparse
import array
import os
import struct
import sys

MAGIC = 20240520
VERSION = 1  # uint16 tokens
HEADER_INTS = 256
MAX_TOKENS = 2**31 - 1  # the header's count is an int32


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


def main(argv):
    parser = argparse.ArgumentParser(
        description="Make a byte-level (vocabulary 256) version 1 token file from text files.")
    parser.add_argument("paths", nargs="*", default=["/usr/share/common-licenses"],
                        help="files or folders (default: /usr/share/common-licenses)")
    parser.add_argument("--out", required=True, help="the token file to write")
    args = parser.parse_args(argv)

    files = collect_files(args.paths)
    tokens = array.array("H")
    for path in files:
        with open(path, "rb") as f:
            tokens.extend(f.read())  # each byte value becomes one token
    count = len(tokens)
    if count < 2:
        raise SystemExit(f"make-tokens: {count} tokens in {len(files)} files; "
                         "a token file needs at least 2")
    if count > MAX_TOKENS:
        raise SystemExit(f"make-tokens: {count} tokens do not fit the header's int32 count")
    if sys.byteorder != "little":
        tokens.byteswap()

    header = [0] * HEADER_INTS
    header[0], header[1], header[2] = MAGIC, VERSION, count
    with open(args.out, "wb") as out:
        out.write(struct.pack(f"<{HEADER_INTS}i", *header))
        out.write(tokens.tobytes())
    print(f"{args.out}: {count} tokens from {len(files)} files")


if __name__ == "__main__":
    main(sys.argv[1:])
