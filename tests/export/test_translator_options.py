"""The serving SavedModel of a translator with the issue-13 switches on translates as
:func:`zoo.tasks.translate` does in Python (the whole serving contract is tested on the plain
model in test_translator_serving.py; here only that the switch's forward pass reaches the graph)."""

import keras
import numpy as np
import tensorflow as tf

from tests.export.conftest import MAX_LENGTH, VOCAB_SIZE
from zoo.artifacts import serving_path
from zoo.tasks import translate
from zoo.models import Translator, build_translator, translator_config

SENTENCES = ["A dog runs.", "Two men are talking in the street.", "Red car."]

# Every switch that changes the forward pass, on at once in one model: one export (exports are
# slow), and a check that the switches compose. Location-aware cross attention, a stateful one,
# is among them; monotonic, the other, scores with the scaled dot product only (its own test).
SWITCHES = {
    "cross_attention_score": "additive",
    "cross_attention_layers": "mix",
    "scheduled_sampling": "linear",  # inference is the plain translator: the step function
    "copy_mechanism": True,
    "cross_attention": "location_aware",
}


def test_served_translations_equal_translate(tokenizer, tmp_path):
    """The search's caches carry the location-aware attention's state (the summed weights)
    through the serving graph's loops (plain graph mode) as through translate()'s (XLA)."""
    keras.utils.set_random_seed(13)  # a seed at which the state moves the translations
    config = translator_config(
        "tiny", vocab_size=VOCAB_SIZE, max_length=MAX_LENGTH, decoder_layers=2, **SWITCHES
    )
    model = build_translator(config)
    folder = Translator.from_backbone(model, tokenizer).export_serving(tmp_path / "translator")
    served = tf.saved_model.load(serving_path(folder))
    inputs = tf.constant(SENTENCES)
    greedy = served.signatures["translate_greedy"](inputs=inputs)["translations"]
    beam = served.signatures["translate_beam"](inputs=inputs, beam_size=tf.constant(2))
    expected_greedy = translate(model, tokenizer, SENTENCES, method="greedy")
    assert len(set(expected_greedy)) > 1, expected_greedy  # random weights, varied outputs
    assert [t.decode() for t in greedy.numpy()] == expected_greedy
    expected_beam = translate(model, tokenizer, SENTENCES, beam_size=2, alpha=0.6)
    assert [t.decode() for t in beam["translations"].numpy()] == expected_beam
    # The state matters here: without it (the location features' projection zeroed) each
    # search gives other translations. The weights are read at run time: nothing recompiles.
    for i in range(2):
        dense = model.get_layer(f"decoder_block_{i}").cross_attention_layer.location_dense
        dense.set_weights([np.zeros_like(w) for w in dense.get_weights()])
    assert translate(model, tokenizer, SENTENCES, method="greedy") != expected_greedy
    assert translate(model, tokenizer, SENTENCES, beam_size=2, alpha=0.6) != expected_beam


def test_monotonic_cross_attention_serves_what_translate_gives(tokenizer):
    """The search's caches carry the monotonic heads' positions through the serving graph's
    loops (plain graph mode, as the SavedModel runs them) as through translate()'s (XLA). The
    signatures run in memory, as export_serving traces them: writing and loading them is the
    same for every model (the export above)."""
    keras.utils.set_random_seed(6)
    config = translator_config("tiny", vocab_size=VOCAB_SIZE, max_length=MAX_LENGTH,
                               decoder_layers=2, cross_attention="monotonic")  # fmt: skip
    model = build_translator(config)
    translator = Translator.from_backbone(model, tokenizer)
    preprocessor = translator.preprocessor.with_max_length()
    served = translator.serving_class(translator.backbone, preprocessor)
    inputs = tf.constant(SENTENCES)
    greedy = served.signatures["translate_greedy"](inputs=inputs)["translations"]
    assert [t.decode() for t in greedy.numpy()] == translate(model, tokenizer, SENTENCES,
                                                              method="greedy")  # fmt: skip
    beam = served.signatures["translate_beam"](inputs=inputs, beam_size=tf.constant(2))
    expected = translate(model, tokenizer, SENTENCES, beam_size=2, alpha=0.6)
    assert [t.decode() for t in beam["translations"].numpy()] == expected
