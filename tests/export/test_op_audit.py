"""Every op of every shipped SavedModel is one that TF Serving's standard build has.

``tensorflow_model_server`` links core TensorFlow and TensorFlow Text's ops and nothing else, so
a SavedModel that needs any other op (a custom kernel, a contrib op) would load in Python and
fail in the server. The audit reads each ``saved_model.pb`` (the graph and its function
library), finds each op first among the ops that ``import tensorflow`` registers, then among
those that ``import tensorflow_text`` adds, in a Python that cannot import zoo.
"""

import json
import os
import textwrap

from tests.harness import REPO_ROOT, serve_without_zoo

SHIPPED = [os.path.join(REPO_ROOT, "saved_models", name, "serving", "1")
           for name in ("translator-en-de", "nat-en-de", "tagger-en-ewt")]  # fmt: skip

_SCRIPT = textwrap.dedent(
    """
    import json
    import sys
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.framework import op_def_registry

    def ops_of(folder):
        saved_model = saved_model_pb2.SavedModel()
        with open(folder + "/saved_model.pb", "rb") as f:
            saved_model.ParseFromString(f.read())
        ops, functions = set(), set()
        for graph in saved_model.meta_graphs:
            library = graph.graph_def.library
            functions |= {f.signature.name for f in library.function}
            ops |= {node.op for node in graph.graph_def.node}
            for function in library.function:
                ops |= {node.op for node in function.node_def}
        return ops - functions  # a node may call a library function by its name

    folders = json.loads(sys.argv[1])
    found = {folder: ops_of(folder) for folder in folders}
    core = {op for ops in found.values() for op in ops if op_def_registry.get(op) is not None}
    import tensorflow_text  # noqa: F401  (registers its ops)
    for folder, ops in found.items():
        text = {op for op in ops - core if op_def_registry.get(op) is not None}
        other = ops - core - text
        print(folder, "|", json.dumps({"core": sorted(ops & core), "text": sorted(text),
                                       "other": sorted(other)}))
    assert "zoo" not in sys.modules
    """
)


def test_every_op_of_the_shipped_saved_models_is_core_tensorflow_or_tensorflow_text():
    lines = serve_without_zoo(_SCRIPT, json.dumps(SHIPPED))
    assert set(lines) == set(SHIPPED)
    for folder, line in lines.items():
        audit = json.loads(line)
        name = os.path.relpath(folder, REPO_ROOT)
        assert audit["other"] == [], (name, audit["other"])
        # The audit reads real graphs: decoding loops, and the translators' SentencePiece.
        assert "While" in audit["core"] or "StatelessWhile" in audit["core"], (name, audit)
        if "tagger" in name:
            assert audit["text"] == [], (name, audit["text"])  # it needs no TensorFlow Text
        else:
            assert any("Sentencepiece" in op for op in audit["text"]), (name, audit["text"])
