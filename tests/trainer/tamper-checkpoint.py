"""Rewrites the header of a safetensors checkpoint in place, leaving its data:
    tamper-checkpoint.py FILE step TEXT   sets the metadata's step to TEXT
    tamper-checkpoint.py FILE transpose   gives the first non-square 2-D tensor
                                          its transposed shape (same bytes)
    tamper-checkpoint.py FILE flip        flips one bit of the first 2-D tensor's data
Prints the tensor it changed, if any. Standard library only."""
import json
import struct
import sys

path, what = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
(size,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + size])
body = data[8 + size:]
if what == "step":
    header["__metadata__"]["step"] = sys.argv[3]
elif what == "transpose":
    name = next(k for k, v in header.items()
                if k != "__metadata__" and len(v["shape"]) == 2 and v["shape"][0] != v["shape"][1])
    header[name]["shape"] = header[name]["shape"][::-1]
    print(name)
elif what == "flip":
    name = next(k for k, v in header.items() if k != "__metadata__" and len(v["shape"]) == 2)
    at = header[name]["data_offsets"][0]
    body = body[:at] + bytes([body[at] ^ 1]) + body[at + 1:]
    print(name)
else:
    sys.exit(f"unknown change {what!r}")
raw = json.dumps(header).encode()
raw += b" " * (-len(raw) % 8)  # the format pads the header to 8 bytes
open(path, "wb").write(struct.pack("<Q", len(raw)) + raw + body)
