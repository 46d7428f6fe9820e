"""translate() with a non-autoregressive model: the frame around nat_search."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from zoo.data import EOS_ID, SentencePieceTokenizer, load_multi30k, train_sentencepiece
from zoo.decoding import nat_search, translate
from zoo.decoding.translation import nat_counts
from zoo.models import build_translator, translator_config
from zoo.models.nat import build_nat_translator, decode_and_lengths, get_config, nat_modes

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
    keras.utils.set_random_seed(4)
    return build_nat_translator(get_config("tiny", vocab_size=VOCAB_SIZE, max_length=MAX_LENGTH))


@pytest.fixture(scope="module", params=sorted(OPTIONS))
def option_model(request, model):
    """The default NAT, and one of each option."""
    if not OPTIONS[request.param]:
        return model
    keras.utils.set_random_seed(4)
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


@pytest.mark.parametrize("counts", ["one pass", "the defaults"])
def test_translate_equals_nat_search_by_hand(option_model, tokenizer, counts):
    """One pass, and the defaults of each model: 4 iterations and 3 lengths, but one
    iteration for a copy model and one length for a max-length model."""
    iterations, length_beam = (1, 1) if counts == "one pass" else nat_counts(option_model)
    kwargs = {"iterations": iterations, "length_beam": length_beam}
    got = translate(option_model, tokenizer, SENTENCES, method="mask_predict", **kwargs)
    assert got == _by_hand(option_model, tokenizer, SENTENCES, **kwargs)
    assert got[3] == "" and all(got[i] for i in (0, 1, 2, 4))


def test_counts_a_model_cannot_use_are_refused(option_model, tokenizer):
    modes = nat_modes(option_model)
    for name, usable in (("iterations", modes.refines), ("length_beam", modes.predicts_length)):
        if not usable:
            with pytest.raises(ValueError, match=f"{name}=2: a model with"):
                translate(option_model, tokenizer, SENTENCES, method="mask_predict", **{name: 2})


def test_each_kind_of_model_refuses_the_others_methods(model, tokenizer):
    with pytest.raises(ValueError, match="Method 'beam' does not decode a model named 'nat'"):
        translate(model, tokenizer, SENTENCES, method="beam")
    translator = build_translator(translator_config("tiny", vocab_size=VOCAB_SIZE))
    with pytest.raises(ValueError, match="'mask_predict' does not decode a model named"):
        translate(translator, tokenizer, SENTENCES, method="mask_predict")
