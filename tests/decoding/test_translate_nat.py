"""translate() with a non-autoregressive model: the frame around nat_search."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.data import BOS_ID, EOS_ID, SentencePieceTokenizer, load_multi30k, train_sentencepiece
from zoo.decoding import length_candidates, nat_search
from zoo.tasks import translate
from zoo.models.nat import nat_counts, nat_translator_search
from zoo.models import build_translator, translator_config
from zoo.models.nat import build_nat_translator, decode_and_lengths, get_config, nat_modes
from zoo.models.translator import full_logits

VOCAB_SIZE = 400
MAX_LENGTH = 16
SENTENCES = ["A dog runs.", "Two men.", "A girl sings in the rain.", "", "Red car."]
OPTIONS = {"mask": {}, "copy": {"decoder_input": "copy"}, "max": {"length_mode": "max"}}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    texts = [s for pair in load_multi30k("val") for s in pair]
    prefix = tmp_path_factory.mktemp("nat_spm") / "joint"
    return SentencePieceTokenizer(train_sentencepiece(texts, prefix, vocab_size=VOCAB_SIZE))


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(5)  # one whose translations are not empty
    return build_nat_translator(get_config("tiny", vocab_size=VOCAB_SIZE, max_length=MAX_LENGTH))


@pytest.fixture(scope="module", params=sorted(OPTIONS))
def option_model(request, model):
    """The default NAT, and one of each option."""
    if not OPTIONS[request.param]:
        return model
    keras.utils.set_random_seed(5)  # one whose translations are not empty
    config = get_config("tiny", vocab_size=VOCAB_SIZE, max_length=MAX_LENGTH)
    return build_nat_translator(dataclasses.replace(config, **OPTIONS[request.param]))


def _by_hand(model, tokenizer, sentences, **kwargs):
    """Tokenize, nat_search (eager), cut at the first EOS, detokenize; "" for no tokens."""
    real = [s for s in sentences if s.strip()]
    source = tokenizer.tokenize(tf.constant(real)).to_tensor()
    decode, lengths = decode_and_lengths(model, source, MAX_LENGTH, kwargs["length_beam"])
    ids, _ = nat_search(decode, **lengths, max_length=MAX_LENGTH, **kwargs)
    ids = np.asarray(ids)
    ids = np.where(np.cumsum(ids == EOS_ID, axis=1) > 0, 0, ids)
    texts = iter(t.decode("utf-8", errors="replace") for t in tokenizer.detokenize(ids).numpy())
    return [next(texts) if s.strip() else "" for s in sentences]


def _assert_translate_equals_nat_search_by_hand(model, tokenizer, iterations, length_beam):
    kwargs = {"iterations": iterations, "length_beam": length_beam}
    got = translate(model, tokenizer, SENTENCES, method="mask_predict", **kwargs)
    assert got == _by_hand(model, tokenizer, SENTENCES, **kwargs)
    assert got[3] == "" and all(got[i] for i in (0, 1, 2, 4))


def test_translate_equals_nat_search_by_hand(option_model, tokenizer):
    """The defaults of each model: 4 iterations and 3 lengths, but one iteration for a copy
    model and one length for a max-length model (so each count is also 1 in some model)."""
    _assert_translate_equals_nat_search_by_hand(option_model, tokenizer, *nat_counts(option_model))


def test_one_pass_equals_nat_search_by_hand(model, tokenizer):
    # Once, on the default model: the options' one-count paths run in their defaults above.
    _assert_translate_equals_nat_search_by_hand(model, tokenizer, 1, 1)


def test_counts_a_model_cannot_use_are_refused(option_model, tokenizer):
    modes = nat_modes(option_model)
    for name, usable in (("iterations", modes.refines), ("length_beam", modes.predicts_length)):
        if not usable:
            with pytest.raises(ValueError, match=f"{name}=2: a model with"):
                translate(option_model, tokenizer, SENTENCES, method="mask_predict", **{name: 2})


def test_each_kind_of_model_refuses_the_others_methods(model, tokenizer, teacher):
    with pytest.raises(ValueError, match="Method 'beam' does not decode a model named 'nat'"):
        translate(model, tokenizer, SENTENCES, method="beam")
    with pytest.raises(ValueError, match="'mask_predict' does not decode a model named"):
        translate(teacher, tokenizer, SENTENCES, method="mask_predict")  # a translator


@pytest.fixture(scope="module")
def teacher():
    keras.utils.set_random_seed(5)
    return build_translator(translator_config("tiny", vocab_size=VOCAB_SIZE, max_length=MAX_LENGTH))


def test_a_rescorer_keeps_the_candidate_it_reads_as_most_likely(model, tokenizer, teacher):
    """Against a loop: every length candidate decoded alone, scored alone by the translator."""
    got = translate(model, tokenizer, SENTENCES, method="mask_predict", iterations=2,
                    length_beam=3, rescorer=teacher)
    real = [s for s in SENTENCES if s.strip()]
    source = tokenizer.tokenize(tf.constant(real)).to_tensor()
    _, predicted = decode_and_lengths(model, source, MAX_LENGTH, 1)
    lengths = np.asarray(length_candidates(**predicted, length_beam=3, max_offset=8,
                                           max_length=MAX_LENGTH))
    expected = []
    for row in range(len(real)):
        best, best_score = None, -np.inf
        one_decode, _ = decode_and_lengths(model, source[row : row + 1], MAX_LENGTH, 1)
        for length in lengths[row]:  # best first: a later candidate must score strictly higher
            ids, _ = nat_search(one_decode, max_length=MAX_LENGTH, iterations=2,
                                lengths=[int(length)])
            ids = np.asarray(ids)[0]
            count = int((ids != 0).sum())
            target_in = np.concatenate([[BOS_ID], ids[:-1]])[None]
            logits = np.asarray(full_logits(teacher, source[row : row + 1], target_in))[0]
            top = logits.max(-1, keepdims=True)
            log_p = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
            score = sum(log_p[i, ids[i]] for i in range(count)) / count
            if score > best_score + 1e-5:
                best, best_score = ids, score
        expected.append(tokenizer.detokenize(best[None]).numpy()[0].decode())
    texts = iter(expected)
    assert got == [next(texts) if s.strip() else "" for s in SENTENCES]


def test_a_rescorer_must_be_a_translator_of_the_same_vocabulary(model, tokenizer, teacher):
    def run(rescorer, method="mask_predict"):
        translate(model if method == "mask_predict" else teacher, tokenizer, SENTENCES[:1],
                  method=method, rescorer=rescorer)

    with pytest.raises(ValueError, match="must be an autoregressive translator"):
        run(model)
    other = build_translator(translator_config("tiny", vocab_size=500, max_length=MAX_LENGTH))
    with pytest.raises(ValueError, match="500 tokens and the model 400"):
        run(other)
    with pytest.raises(ValueError, match="'mask_predict' only"):
        run(teacher, method="greedy")


def test_the_buffers_span_the_longest_candidate_in_every_mode():
    """The refinement runs on buffers as wide as the longest candidate length rounded up to a
    multiple of 8, not on every position: traced with an unknown source width, in plain graph
    mode (as the SavedModel runs it) and with each stage under XLA (as translate() runs it),
    with the same ids as nat_search on buffers of every position."""
    keras.utils.set_random_seed(4)
    positions = 32  # more than any candidate of a 4-token source (at most 4 + 8) can fill
    model = build_nat_translator(get_config("tiny", vocab_size=VOCAB_SIZE, max_length=positions))
    xla = lambda f: tf.function(f, jit_compile=True)  # noqa: E731
    source = tf.constant([[5, 6, 7, EOS_ID], [8, 9, EOS_ID, 0]], tf.int32)
    decode, lengths = decode_and_lengths(model, source, positions, 2)
    full, _ = nat_search(decode, **lengths, max_length=positions, iterations=2, length_beam=2)
    longest = int(np.max(length_candidates(**lengths, length_beam=2, max_offset=8,
                                           max_length=positions)))
    width = -(-longest // 8) * 8
    unknown_width = [tf.TensorSpec([None, None], tf.int32)]
    for compile_stage in (None, xla):
        search = nat_translator_search(
            model, "mask_predict", positions, iterations=2, length_beam=2,
            compile_stage=compile_stage,
        )
        ids = np.asarray(tf.function(search, input_signature=unknown_width)(source))
        assert ids.shape == (2, width)
        np.testing.assert_array_equal(ids, np.asarray(full)[:, :width])
        assert not np.asarray(full)[:, width:].any()
