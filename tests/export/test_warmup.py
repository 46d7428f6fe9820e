"""TF Serving's warm-up file: zoo writes PredictionLog records from their field numbers, so these
tests read them back with protobuf's own parser, from message types built here from TF
Serving's .proto definitions (prediction_log.proto, predict.proto, model.proto), and replay them
into the SavedModel as the server does when it loads one."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from tensorflow.core.framework import tensor_pb2  # noqa: F401  (registers TensorProto)

from tests.export.conftest import MAX_LENGTH
from tests.harness import REPO_ROOT
from zoo.artifacts import ASSETS_EXTRA_DIR, serving_path
from zoo.decoding.text import BUCKETS
from zoo.export.warmup import MAX_WARMUP_RECORDS, WARMUP_FILE, prediction_log, write_warmup_file

_PACKAGE = "zoo_test.serving"  # not tensorflow.serving: the real protos may be registered


def _message_classes():
    """PredictionLog and its parts, with TF Serving's field numbers and types."""
    file = descriptor_pb2.FileDescriptorProto(
        name="zoo_test/prediction_log.proto", package=_PACKAGE, syntax="proto3",
        dependency=["tensorflow/core/framework/tensor.proto"],
    )  # fmt: skip
    optional = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
    repeated = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
    string = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
    message = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE

    def add(parent, name, fields):
        proto = parent.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            proto.field.add(name=field_name, number=number, type=kind, label=label,
                            type_name=type_name)  # fmt: skip
        return proto

    add(file.message_type, "ModelSpec", [("name", 1, string, optional, None),
                                         ("signature_name", 3, string, optional, None)])
    request = add(file.message_type, "PredictRequest", [
        ("model_spec", 1, message, optional, f".{_PACKAGE}.ModelSpec"),
        ("inputs", 2, message, repeated, f".{_PACKAGE}.PredictRequest.InputsEntry"),
    ])  # fmt: skip
    entry = add(request.nested_type, "InputsEntry", [
        ("key", 1, string, optional, None), ("value", 2, message, optional, ".tensorflow.TensorProto"),
    ])  # fmt: skip
    entry.options.map_entry = True
    add(file.message_type, "PredictLog",
        [("request", 1, message, optional, f".{_PACKAGE}.PredictRequest")])
    add(file.message_type, "PredictionLog",
        [("predict_log", 6, message, optional, f".{_PACKAGE}.PredictLog")])
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(file.name)
    except KeyError:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.PredictionLog"))


PredictionLog = _message_classes()


def read_warmup_requests(version_folder):
    """``[(signature_name, {input: array})]`` of a SavedModel's warm-up file."""
    path = os.path.join(version_folder, ASSETS_EXTRA_DIR, WARMUP_FILE)
    requests = []
    for record in tf.data.TFRecordDataset(path):
        log = PredictionLog.FromString(record.numpy())
        request = log.predict_log.request
        inputs = {name: tf.make_ndarray(tensor) for name, tensor in request.inputs.items()}
        requests.append((request.model_spec.signature_name, inputs))
    return requests


def replay_warmup(version_folder, loaded=None):
    """Replay the warm-up file into the SavedModel (``loaded``, or loaded here) as TF Serving
    does at load: every request must run (a failing one fails the load). Returns the
    requests."""
    requests = read_warmup_requests(version_folder)
    assert 1 <= len(requests) <= MAX_WARMUP_RECORDS
    loaded = loaded or tf.saved_model.load(version_folder)
    for name, inputs in requests:
        signature = loaded.signatures[name]
        specs = signature.structured_input_signature[1]
        assert set(inputs) == set(specs), (name, sorted(inputs), sorted(specs))
        outputs = signature(**{key: tf.constant(value, specs[key].dtype)
                               for key, value in inputs.items()})  # fmt: skip
        assert outputs, name
    return requests


def test_a_prediction_log_is_what_protobuf_parses():
    record = prediction_log("tag_tokens", {
        "tokens": [["New York", "é"], ["b", ""]], "lengths": np.array([2, 1], "int32"),
    })  # fmt: skip
    log = PredictionLog.FromString(record)
    request = log.predict_log.request
    assert request.model_spec.signature_name == "tag_tokens" and request.model_spec.name == ""
    tokens = tf.make_ndarray(request.inputs["tokens"])
    assert tokens.tolist() == [["New York".encode(), "é".encode()], [b"b", b""]]
    assert tf.make_ndarray(request.inputs["lengths"]).tolist() == [2, 1]
    scalar = PredictionLog.FromString(prediction_log("translate_beam", {
        "inputs": ["x" * 300], "beam_size": np.int32(4)}))  # a length past one varint byte
    inputs = scalar.predict_log.request.inputs
    assert tf.make_ndarray(inputs["beam_size"]) == 4 and inputs["beam_size"].dtype == tf.int32
    assert tf.make_ndarray(inputs["inputs"]).tolist() == [b"x" * 300]


def test_the_file_holds_1_to_1000_requests(tmp_path):
    path = str(tmp_path / WARMUP_FILE)
    write_warmup_file(path, [("serving_default", {"inputs": ["a"]})] * 3)
    assert sum(1 for _ in tf.data.TFRecordDataset(path)) == 3
    for count in (0, MAX_WARMUP_RECORDS + 1):
        with pytest.raises(ValueError, match="1 to 1000 requests"):
            write_warmup_file(path, [("serving_default", {"inputs": ["a"]})] * count)


_COUNT_COMPILES = textwrap.dedent(
    """
    import glob, json, os, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SentencePiece ops)
    from tests.export.test_warmup import read_warmup_requests

    folder, dump = sys.argv[1], sys.argv[2]

    def compiled():  # XLA dumps each program it compiles as module_NNNN.*
        return len({os.path.basename(p).split(".")[0]
                    for p in glob.glob(os.path.join(dump, "module_*"))})

    loaded = tf.saved_model.load(folder)
    requests = read_warmup_requests(folder)
    for name, inputs in requests:  # as TF Serving replays the file at load
        specs = loaded.signatures[name].structured_input_signature[1]
        loaded.signatures[name](**{k: tf.constant(v, specs[k].dtype) for k, v in inputs.items()})
    warm = compiled()
    xla = sorted({name for name, _ in requests if name.endswith("_xla")})
    texts = sorted({inputs["inputs"][0] for name, inputs in requests if name in xla})
    calls = 0
    for name in xla:
        # Each side of every row bucket's edge (1, 8, 64; the arithmetic of every batch size is
        # tests/decoding/test_buckets.py's), and past 64: split into parts of 64.
        for rows in (1, 2, 7, 8, 9, 63, 64, 65, 100, 130):
            for text in texts:
                loaded.signatures[name](inputs=tf.constant([text] * rows))
                calls += 1
    print(json.dumps({"requests": len(requests), "warm": warm, "after": compiled(),
                      "calls": calls, "xla": xla, "lengths": len(texts)}))
    """
)


def test_after_the_xla_warm_up_no_request_compiles(export_dir, tmp_path):
    """A tiny translator exported with the XLA warm-up (16 source positions): the file
    compiles every program of its _xla signatures; then requests of batch sizes on each side of
    every row bucket's edge at every padded length, and of 100 and 130 (split into parts of
    64), through both, compile nothing. Counted from XLA's dumps (a loaded signature has one concrete function;
    XLA compiles per shape beneath it)."""
    dump = tmp_path / "xla_dump"
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="3",
               XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump}")  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-c", _COUNT_COMPILES, serving_path(str(export_dir)), str(dump)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    lengths = len(BUCKETS.widths(MAX_LENGTH))
    programs = len(BUCKETS.rows) * lengths * 2  # batch buckets x lengths x signatures
    assert report["xla"] == ["translate_greedy_xla", "translate_xla"]
    assert report["lengths"] == lengths and report["requests"] == 3 + programs  # + 3 plain
    assert report["warm"] >= programs, report  # each program compiled (a stage may be 2)
    assert report["after"] == report["warm"], report  # 10 batch sizes a length: 0 compiles
