"""TF Serving's warm-up file: zoo writes PredictionLog records from their field numbers, so these
tests read them back with protobuf's own parser, from message types built here from TF
Serving's .proto definitions (prediction_log.proto, predict.proto, model.proto). The files are
replayed into the SavedModels as the server does when it loads one in the fresh processes of
test_translator_serving.py (the tiny translator's XLA warm-up, and a count of what it compiles)
and test_shipped_serving.py (the shipped models')."""

import os

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from tensorflow.core.framework import tensor_pb2  # noqa: F401  (registers TensorProto)

from zoo.artifacts import ASSETS_EXTRA_DIR
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
