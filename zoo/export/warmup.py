"""TF Serving's warm-up file: requests that the server replays when it loads a SavedModel, so that
the first real request does not pay for the signature's first call.

``assets.extra/tf_serving_warmup_requests`` is a TFRecord of ``PredictionLog`` messages (at most
1,000; one that fails fails the load). They are written here from their field numbers, so that
exporting needs neither ``tensorflow-serving-api`` nor the TensorFlow it pins.
"""

import numpy as np
import tensorflow as tf

__all__ = ["MAX_WARMUP_RECORDS", "WARMUP_FILE", "prediction_log", "write_warmup_file"]

WARMUP_FILE = "tf_serving_warmup_requests"  # in assets.extra/, the name TF Serving looks for
MAX_WARMUP_RECORDS = 1000  # TF Serving reads no more


def _varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number, data):
    """A length-delimited field (wire type 2): a string, bytes or a message."""
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def prediction_log(signature_name, inputs):
    """One serialized ``PredictionLog`` whose ``predict_log.request`` calls ``signature_name``
    with ``inputs`` (name -> array; strings as bytes or str).

    Fields: ``PredictionLog.predict_log`` = 6, ``PredictLog.request`` = 1,
    ``PredictRequest.model_spec`` = 1 and ``inputs`` = 2 (a map: entries of key = 1 and
    value = 2, a ``TensorProto``), ``ModelSpec.signature_name`` = 3. The model's name is left
    empty: the server warms the model it is loading, whatever the name.
    """
    request = _field(1, _field(3, signature_name.encode("utf-8")))
    for name, value in sorted(inputs.items()):
        array = np.asarray(value)
        if array.dtype.kind in "US":  # strings: TensorFlow's bytes
            array = np.vectorize(lambda s: s.encode("utf-8") if isinstance(s, str) else s,
                                 otypes=[object])(array)  # fmt: skip
        tensor = tf.make_tensor_proto(array).SerializeToString()
        request += _field(2, _field(1, name.encode("utf-8")) + _field(2, tensor))
    return _field(6, _field(1, request))


def write_warmup_file(path, requests):
    """Write ``requests`` (``[(signature_name, inputs)]``) as TF Serving's warm-up file."""
    requests = list(requests)
    if not requests or len(requests) > MAX_WARMUP_RECORDS:
        raise ValueError(f"A warm-up file holds 1 to {MAX_WARMUP_RECORDS} requests, not "
                         f"{len(requests)}.")  # fmt: skip
    with tf.io.TFRecordWriter(path) as writer:
        for signature_name, inputs in requests:
            writer.write(prediction_log(signature_name, inputs))
