"""The translator's config switches of issue 13, each against the plain model's contract:
the cached incremental decode equals the full forward pass, and a ``.keras`` round trip
gives the same outputs. (Each switch's serving export: tests/export/test_translator_options.py.)
"""

import keras
import numpy as np
import pytest

from tests.decoding import common
from tests.decoding.common import gnmt_penalty, lengths, log_probability
from tests.decoding.conftest import _copy_batch as copy_task  # a monotonic task
from tests.harness import CrashAtEpoch, fit_built
from zoo.data import BOS_ID
from zoo.models import build_translator, translator_config
from zoo.models.translator import (
    attention_weights,
    encode,
    full_logits,
    init_caches,
    step_and_caches,
)

VOCAB_SIZE = 24
SOURCES = np.array([[5, 9, 13, 7, 0, 0], [11, 0, 0, 0, 0, 0], [4, 18, 6, 10, 15, 12]], "int32")

# Each switch on a tiny two-block model (so that block-wise options have blocks to differ).
# One score, the one with the most weights: the others differ only inside the attention layer,
# whose every score tests/layers/test_multi_head_attention.py checks (against a loop, through a
# .keras file); test_the_score_reaches_cross_attention_only checks that a score gets there.
OPTIONS = {
    "additive score": {"cross_attention_score": "additive"},
    "mix of encoder layers": {"cross_attention_layers": "mix"},
    "chosen encoder layers": {"cross_attention_layers": (0, 1)},
    "copy mechanism": {"copy_mechanism": True},
}


def tiny_translator(seed=0, **overrides):
    keras.utils.set_random_seed(seed)
    overrides = {"encoder_layers": 2, "decoder_layers": 2, **overrides}
    config = translator_config("tiny", vocab_size=VOCAB_SIZE, max_length=12, **overrides)
    return build_translator(config)


def teacher_forced_input(seed=0):
    target_in = np.random.default_rng(seed).integers(4, VOCAB_SIZE, (len(SOURCES), 6))
    target_in[:, 0] = BOS_ID
    return target_in.astype("int32")


def assert_steps_equal_the_full_model(model):
    common.assert_steps_equal_the_full_model(model, SOURCES, teacher_forced_input())


@pytest.fixture(scope="module")
def plain():
    return tiny_translator()


@pytest.fixture(scope="module")
def plain_outputs(plain):
    return np.asarray(plain({"source": SOURCES, "target_in": teacher_forced_input()}))


def assert_same_model(model, reference):
    """The same logits and the same cross-attention weights in every block."""
    inputs = {"source": SOURCES, "target_in": teacher_forced_input()}
    np.testing.assert_allclose(np.asarray(model(inputs)), np.asarray(reference(inputs)), atol=1e-5)
    weights, expected = (attention_weights(m, *inputs.values())["cross"]
                         for m in (model, reference))  # fmt: skip
    assert len(weights) == len(expected) == 2
    for got, want in zip(weights, expected):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-6)


@pytest.mark.parametrize("overrides", OPTIONS.values(), ids=OPTIONS.keys())
def test_the_switch_changes_the_model_and_survives_a_keras_file(overrides, plain_outputs, tmp_path):
    """Same seed, other outputs; then the loaded model gives the same outputs, and its cached
    decode equals its full forward pass."""
    model = tiny_translator(**overrides)
    inputs = {"source": SOURCES, "target_in": teacher_forced_input()}
    outputs = np.asarray(model(inputs))
    assert not np.allclose(outputs, plain_outputs, atol=1e-3)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(np.asarray(loaded(inputs)), outputs, atol=1e-5)
    assert_steps_equal_the_full_model(loaded)


def test_the_score_reaches_cross_attention_only():
    model = tiny_translator(cross_attention_score="cosine")
    blocks = [model.get_layer(f"decoder_block_{i}") for i in (0, 1)]
    assert [block.cross_attention_layer.score for block in blocks] == ["cosine"] * 2
    assert [block.self_attention_layer.score for block in blocks] == ["scaled_dot"] * 2


def test_the_defaults_leave_the_saved_configs_and_layers_as_they_were(plain):
    assert plain.get_layer("decoder_block_0").get_config()["cross_attention_kwargs"] is None
    assert not [layer.name for layer in plain.layers if layer.name.startswith("encoder_output_")]


def test_an_unknown_score_is_refused():
    with pytest.raises(ValueError, match="cross_attention_score 'bilinear'.*additive"):
        translator_config("tiny", cross_attention_score="bilinear")


def test_a_block_reads_the_encoder_layer_it_chose():
    """Blocks that read the embeddings and the first encoder block: the second encoder block's
    weights move nothing, and the embeddings' reach the blocks past the whole encoder."""
    model = tiny_translator(cross_attention_layers=(0, 1))
    inputs = {"source": SOURCES, "target_in": teacher_forced_input()}
    before = np.asarray(model(inputs))
    unread = model.get_layer("encoder_block_1")
    unread.set_weights([w * 3 + 1 for w in unread.get_weights()])
    np.testing.assert_allclose(np.asarray(model(inputs)), before, atol=1e-6)
    read = model.get_layer("encoder_block_0")
    read.set_weights([w * 3 + 1 for w in read.get_weights()])
    assert not np.allclose(np.asarray(model(inputs)), before, atol=1e-3)


def test_every_block_reading_the_last_layer_by_index_is_the_plain_model(plain):
    """Chosen layers add no weights and draw no seeds; the final norm comes after the choice,
    so index 2 (the last of 2 encoder blocks) is exactly what the plain model reads."""
    assert_same_model(tiny_translator(cross_attention_layers=(2, 2)), plain)


def test_a_mix_weighing_one_layer_reads_that_layer_in_each_block():
    """Each block's own mix, its weight all on the layer that block's index names, is the
    model of those indices: the mix is per block, and it is normalized as an index is."""
    mixed = tiny_translator(cross_attention_layers="mix")
    for i, index in enumerate((0, 1)):
        mixed.get_layer(f"encoder_output_{i}").mix_logits.assign(100.0 * np.eye(3)[index])
    assert_same_model(mixed, tiny_translator(cross_attention_layers=(0, 1)))


def test_beam_search_scores_are_the_full_models_log_probabilities():
    """With an additive score over per-block mixes, beam search (which repeats every block's
    cross cache per beam) scores each hypothesis as the full forward pass does."""
    from zoo.decoding import beam_search

    model = tiny_translator(cross_attention_score="additive", cross_attention_layers="mix")
    for i, logits in enumerate(([1.0, -1.0, 0.5], [-0.5, 0.0, 2.0])):  # two different mixes
        model.get_layer(f"encoder_output_{i}").mix_logits.assign(logits)
    ids, scores = beam_search(*step_and_caches(model, SOURCES, 6), 6, beam_size=3, alpha=0.6)
    expected = log_probability(model, SOURCES, ids) / gnmt_penalty(lengths(ids), 0.6)
    np.testing.assert_allclose(np.asarray(scores), expected, rtol=1e-4, atol=1e-4)


def test_the_mix_is_one_learned_set_of_weights_per_decoder_block():
    model = tiny_translator(cross_attention_layers="mix")
    mixes = [model.get_layer(f"encoder_output_{i}") for i in (0, 1)]
    assert [tuple(mix.mix_logits.shape) for mix in mixes] == [(3,), (3,)]  # embeddings + 2


@pytest.mark.parametrize(
    "layers, match",
    [
        ("first", "Unknown cross_attention_layers 'first'"),
        ((0,), "a tuple of 2 indices"),
        ((0, 3), r"from 0 \(the embeddings\) to 2"),
        ((0, True), "a tuple of 2 indices"),
    ],
)
def test_bad_cross_attention_layers_are_refused(layers, match):
    with pytest.raises(ValueError, match=match):
        translator_config("tiny", encoder_layers=2, decoder_layers=2, cross_attention_layers=layers)


def test_a_list_read_back_from_json_is_a_tuple():
    config = translator_config("tiny", decoder_layers=2, cross_attention_layers=[0, 1])
    assert config.cross_attention_layers == (0, 1)


def test_the_nat_has_no_left_to_right_decoder_options():
    # The NAT's architecture shares the encoder-decoder, not the translator's decoder options:
    # it has nothing to refuse.
    from zoo.models import NATConfig, TranslatorConfig, nat_config

    translator_only = {"cross_attention", "cross_attention_layers", "copy_mechanism",
                       "scheduled_sampling", "guided_attention_weight"}  # fmt: skip
    assert translator_only <= set(TranslatorConfig.__dataclass_fields__)
    assert not translator_only & set(NATConfig.__dataclass_fields__)
    with pytest.raises(TypeError, match="cross_attention_layers"):
        nat_config("tiny", cross_attention_layers="mix")


def test_the_nat_takes_a_cross_attention_score():
    """The NAT's decoder blocks are the translator's: the score reaches them, and its
    encode/decode path is its forward pass."""
    from zoo.models import nat_config
    from zoo.models.nat import MASK_ID, build_nat_translator, nat_decode, nat_encode

    keras.utils.set_random_seed(0)
    config = nat_config("tiny", vocab_size=VOCAB_SIZE, max_length=12,
                        cross_attention_score="additive")  # fmt: skip
    model = build_nat_translator(config)
    assert model.get_layer("decoder_block_0").cross_attention_layer.score == "additive"
    target_in = np.array([[MASK_ID, 12, MASK_ID, 3]] * 2 + [[MASK_ID, 3, 0, 0]], "int32")
    out = model({"source": SOURCES, "target_in": target_in})
    logits = np.asarray(nat_decode(model, *nat_encode(model, SOURCES)[:2], target_in))
    real = target_in != 0
    np.testing.assert_allclose(logits[real], np.asarray(out["tokens"])[real], atol=1e-5)


def test_scheduled_sampling_second_pass_reads_gold_tokens_or_the_first_pass_predictions(plain):
    """The same seed builds the same weights as the plain model. At gold probability 1 the
    second pass is the plain model's teacher-forced pass (in training as at inference); at 0,
    in training, it is the plain model's pass over the first pass's argmax predictions,
    shifted right, with BOS and the padding kept; at inference it is teacher forcing again."""
    target_in = teacher_forced_input()
    target_in[0, 4:] = 0  # padding
    inputs = {"source": SOURCES, "target_in": target_in}
    teacher_forced = np.asarray(plain(inputs))
    gold = tiny_translator(scheduled_sampling="linear", scheduled_sampling_c=0.0)  # k = 1
    for training in (True, False):
        np.testing.assert_array_equal(np.asarray(gold(inputs, training=training)), teacher_forced)

    predicted = teacher_forced[..., 1:].argmax(-1) + 1  # never the padding id
    mixed = np.where(target_in == 0, 0, np.concatenate([target_in[:, :1], predicted[:, :-1]], 1))
    assert (mixed != target_in)[:, 1:].any() and (mixed[0, 4:] == 0).all()
    predictions = tiny_translator(scheduled_sampling="linear", scheduled_sampling_k=0.0)
    np.testing.assert_allclose(
        np.asarray(predictions(inputs, training=True)),
        np.asarray(plain({"source": SOURCES, "target_in": mixed})),
        atol=1e-5,
    )
    np.testing.assert_array_equal(np.asarray(predictions(inputs)), teacher_forced)


def test_scheduled_sampling_counts_fit_steps_resumes_and_survives_a_keras_file(tmp_path):
    """One count per training step, none at inference; train()'s BackupAndRestore puts the
    count back after a crash; the .keras file keeps it, and the loaded model's greedy decoding
    is the full forward pass's."""
    from zoo.decoding import greedy_search
    from zoo.training.train import standard_callbacks

    inputs = {"source": SOURCES, "target_in": teacher_forced_input()}
    labels = np.roll(inputs["target_in"], -1, axis=1)
    workdir = str(tmp_path / "run")

    def fit(model, *callbacks):
        backup, = (c for c in standard_callbacks(workdir)
                   if isinstance(c, keras.callbacks.BackupAndRestore))
        return fit_built(
            model, inputs, labels, batch_size=2, epochs=2, verbose=0,
            callbacks=[backup, *callbacks],
        )

    def build(seed, run_eagerly):
        model = tiny_translator(
            seed, encoder_layers=1, decoder_layers=1, scheduled_sampling="inverse_sigmoid",
            scheduled_sampling_k=2.0,
        )  # fmt: skip
        model.compile(
            optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            run_eagerly=run_eagerly,
        )
        return model, model.get_layer("scheduled_sampling").step

    crashed, step = build(0, run_eagerly=False)
    with pytest.raises(RuntimeError, match="simulated crash"):
        fit(crashed, CrashAtEpoch(1))
    assert float(step) == 2.0  # the first epoch's two steps, counted in a tf.function
    # The same run again (eagerly: a second trace costs seconds) runs the second epoch only.
    model, step = build(1, run_eagerly=True)
    assert fit(model).epoch == [1]
    assert float(step) == 4.0 == float(model.optimizer.iterations)  # 2 restored, 2 counted
    model(inputs)
    assert float(step) == 4.0  # inference does not count

    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert float(loaded.get_layer("scheduled_sampling").step) == 4.0
    np.testing.assert_allclose(np.asarray(loaded(inputs)), np.asarray(model(inputs)), atol=1e-5)
    assert_steps_equal_the_full_model(loaded)  # inference is the plain translator's
    step_fn, caches = step_and_caches(loaded, SOURCES, max_length=5)
    tokens = np.asarray(greedy_search(step_fn, caches, max_length=5, eos_id=-1))  # (B, 5)
    target_in = np.full((len(SOURCES), 1), BOS_ID, "int32")
    for _ in range(5):  # the slow reference: the whole model over the prefix, every time
        logits = np.asarray(full_logits(loaded, SOURCES, target_in))[:, -1, 1:]
        target_in = np.concatenate([target_in, logits.argmax(-1)[:, None] + 1], axis=1)
    np.testing.assert_array_equal(tokens, target_in[:, 1:])


def test_an_unknown_schedule_is_refused():
    with pytest.raises(ValueError, match="Unknown scheduled_sampling 'cosine'"):
        translator_config("tiny", scheduled_sampling="cosine")


def test_guided_attention_moves_attention_to_the_diagonal_faster():
    """On the copy task, after the same steps from the same weights, the cross attention's mass
    off the diagonal is far smaller with the loss on (about 0.15 against 0.45 here)."""
    from zoo.layers.guided_attention import guided_attention_loss
    from zoo.models.translator import attention_weights

    held_out, _ = copy_task(np.random.default_rng(99), 64)
    off_diagonal = {}
    for weight in (0.0, 1.0):
        model = tiny_translator(
            encoder_layers=1, decoder_layers=1, guided_attention_weight=weight
        )
        model.compile(
            optimizer=keras.optimizers.Adam(3e-3),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0),
        )
        features, labels = copy_task(np.random.default_rng(0), 32 * 30)
        fit_built(model, features, labels, batch_size=32, epochs=1, shuffle=False, verbose=0)
        weights = attention_weights(model, held_out["source"], held_out["target_in"])["cross"]
        off_diagonal[weight] = float(
            guided_attention_loss(weights, held_out["target_in"] != 0, held_out["source"] != 0)
        )
    assert off_diagonal[1.0] < 0.7 * off_diagonal[0.0], off_diagonal


def test_guided_attention_changes_training_only(plain, tmp_path):
    """Inference is the plain model's; the loss weight's step survives a .keras file."""
    model = tiny_translator(guided_attention_weight=1.0, guided_attention_decay=0.9)
    inputs = {"source": SOURCES, "target_in": teacher_forced_input()}
    np.testing.assert_allclose(np.asarray(model(inputs)), np.asarray(plain(inputs)), atol=1e-6)
    model(inputs, training=True)
    assert float(model.get_layer("guided_attention").step) == 1.0
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert float(loaded.get_layer("guided_attention").step) == 1.0
    assert_steps_equal_the_full_model(loaded)


@pytest.mark.parametrize(
    "field, value",
    [
        ("guided_attention_weight", -1.0),
        ("guided_attention_decay", 0.0),
        ("guided_attention_sigma", 0.0),
    ],
)
def test_bad_guided_attention_settings_are_refused(field, value):
    with pytest.raises(ValueError, match="guided_attention_weight must be >= 0"):
        translator_config("tiny", **{field: value})


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"scheduled_sampling_k": 1.5}, r"scheduled_sampling_k must be in \(0, 1\]"),
        ({"scheduled_sampling_c": -1.0}, "scheduled_sampling_c .the linear slope. must be >= 0"),
        ({"scheduled_sampling_min": 2.0}, "scheduled_sampling_min must be a probability"),
    ],
)
def test_bad_schedule_parameters_are_refused_by_field(overrides, match):
    with pytest.raises(ValueError, match=match):
        translator_config("tiny", scheduled_sampling="exponential", **overrides)


def test_the_copy_mechanism_outputs_log_probabilities_and_is_off_by_default(plain):
    assert "pointer_generator" not in [layer.name for layer in plain.layers]
    model = tiny_translator(copy_mechanism=True)
    outputs = np.asarray(model({"source": SOURCES, "target_in": teacher_forced_input()}))
    np.testing.assert_allclose(np.exp(outputs).sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.asarray(keras.ops.log_softmax(outputs)), outputs, atol=1e-5)


def test_the_copy_mechanism_needs_the_source_in_the_caches():
    model = tiny_translator(copy_mechanism=True)
    memory, padding = encode(model, SOURCES)
    with pytest.raises(ValueError, match="init_caches needs the source_ids"):
        init_caches(model, memory, padding, max_length=8)


def test_bad_copy_mechanism_values_are_refused():
    with pytest.raises(ValueError, match="copy_mechanism must be True or False"):
        translator_config("tiny", copy_mechanism="yes")
