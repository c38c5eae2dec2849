"""The sessions of one encoder share one copy of its graph's weights (issue 27, ``shared_weights.split``).

A tiny graph made here (a Gather over a table of 256 x 128 float32, 128 KiB, then an Add of a small constant and a
MatMul with a weight matrix): ``split`` takes out the initializers of ``MIN_BYTES`` or more, the stripped graph
with the arrays given through ``add_initializer`` gives the original graph's outputs bit for bit, and two sessions
made that way read the caller's one buffer (changing it changes both sessions' outputs: nothing was copied).
The real graphs (both MiniLM builds, bit-identical vectors, memory) are in
``tests/integration/thematic/test_embeddings.py`` and ``bench/embed_sessions.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from pipelines.thematic import shared_weights as W

RNG = np.random.default_rng(7)
TABLE = RNG.standard_normal((256, 128)).astype(np.float32)  # 128 KiB: shared
WEIGHT = RNG.standard_normal((128, 256)).astype(np.float32)  # 128 KiB: shared
BIAS = RNG.standard_normal(128).astype(np.float32)  # 512 bytes: stays in the graph


def tiny_model(path: Path) -> bytes:
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "ids"], ["rows"]),
            helper.make_node("Add", ["rows", "bias"], ["shifted"]),
            helper.make_node("MatMul", ["shifted", "weight"], ["out"]),
        ],
        "tiny",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 256])],
        [numpy_helper.from_array(TABLE, "table"), numpy_helper.from_array(BIAS, "bias"),
         numpy_helper.from_array(WEIGHT, "weight")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data = model.SerializeToString()
    path.write_bytes(data)
    return data


def sessions(path: Path, n: int) -> tuple[list[Any], dict[str, Any], list[Any]]:
    stripped, arrays = W.split(path.read_bytes(), path.name)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.model_external_initializers_file_folder_path", str(path.parent))
    values = []
    for name, array in arrays.items():
        values.append(ort.OrtValue.ortvalue_from_numpy(array))
        opts.add_initializer(name, values[-1])
    made = [ort.InferenceSession(stripped, sess_options=opts, providers=["CPUExecutionProvider"]) for _ in range(n)]
    return made, arrays, values


IDS = np.array([0, 5, 255, 17, 17], dtype=np.int64)


def test_split_takes_out_the_large_initializers_and_keeps_the_rest(tmp_path: Path) -> None:
    data = tiny_model(tmp_path / "m.onnx")
    stripped, arrays = W.split(data, "m.onnx")
    assert set(arrays) == {"table", "weight"}  # bias (512 bytes) < MIN_BYTES stays
    assert np.array_equal(arrays["table"], TABLE) and np.array_equal(arrays["weight"], WEIGHT)
    assert arrays["table"].flags.writeable and arrays["table"].flags.owndata  # copies, not views of the file
    assert len(stripped) < len(data) - TABLE.nbytes - WEIGHT.nbytes + 1024
    model = onnx.load_from_string(stripped)
    by_name = {t.name: t for t in model.graph.initializer}
    assert list(by_name) == ["table", "bias", "weight"]
    assert np.array_equal(numpy_helper.to_array(by_name["bias"]), BIAS)
    table = by_name["table"]
    assert table.data_location == TensorProto.EXTERNAL and not table.raw_data and list(table.dims) == [256, 128]
    ext = {e.key: e.value for e in table.external_data}
    # The reference points at the table's own bytes in the file.
    offset, length = int(ext["offset"]), int(ext["length"])
    assert ext["location"] == "m.onnx" and length == TABLE.nbytes
    assert data[offset : offset + length] == TABLE.tobytes()


def test_sessions_on_the_shared_weights_give_the_original_graphs_outputs_bit_for_bit(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    tiny_model(path)
    plain = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"ids": IDS})[0]
    made, _, _ = sessions(path, 2)
    for s in made:
        assert np.array_equal(s.run(None, {"ids": IDS})[0], plain)


def test_the_sessions_read_the_one_shared_buffer(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    tiny_model(path)
    made, arrays, _ = sessions(path, 2)
    before = [s.run(None, {"ids": IDS})[0] for s in made]
    arrays["table"][:] = 0.0  # in place: a session with its own copy would not see this
    after = [s.run(None, {"ids": IDS})[0] for s in made]
    expected = np.broadcast_to(BIAS, (len(IDS), 128)) @ WEIGHT
    for b, a in zip(before, after, strict=True):
        assert not np.array_equal(a, b)
        assert np.allclose(a, expected, atol=1e-4)


def test_a_model_it_cannot_read_is_refused_with_a_reason() -> None:
    with pytest.raises(W.ModelFormatError):
        W.split(b"\x3a\xff\xff\xff\x0f", "m.onnx")  # graph field longer than the bytes
    with pytest.raises(W.ModelFormatError):
        W.split(b"\x3b", "m.onnx")  # wire type 3 (groups) is not used by ONNX
