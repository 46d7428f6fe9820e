import unicodedata

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf
from sentencepiece import sentencepiece_model_pb2

from tests.data.conftest import VOCAB_SIZE
from zoo.data import (
    BOS_ID,
    BOS_PIECE,
    EOS_ID,
    EOS_PIECE,
    PAD_ID,
    PAD_PIECE,
    UNK_ID,
    UNK_PIECE,
    SentencePieceTokenizer,
    train_sentencepiece,
)

# Latin with diacritics, emoji (absent from the training text: byte fallback), non-Latin scripts,
# combining marks, digits and punctuation.
SENTENCES = [
    "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    "A little girl climbing into a wooden playhouse.",
    "Ein Hund 🐕 springt über den Zaun 🎉!",
    "👩‍👩‍👧 family emoji with zero-width joiners",
    "Собака бежит по снегу.",
    "一只狗在雪地里奔跑。",
    "كلب يركض في الثلج",
    "कुत्ता बर्फ में दौड़ता है",
    "Ο σκύλος τρέχει στο χιόνι.",
    "e\u0301 combining accent, Ç, ß, œ, 1234 + 5 = 1239",
    "",
]


@pytest.fixture(scope="module")
def processor(sp_model_path):
    return spm.SentencePieceProcessor(model_file=sp_model_path)


def _rows(ragged):
    return [row.tolist() for row in ragged.numpy()]


def test_special_ids_are_reserved(processor, tokenizer):
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    ids = (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id())
    assert ids == (0, 1, 2, 3)
    pieces = [PAD_PIECE, UNK_PIECE, BOS_PIECE, EOS_PIECE]
    assert [processor.id_to_piece(i) for i in range(4)] == pieces
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id) == (0, 1, 2, 3)
    assert processor.get_piece_size() == tokenizer.vocab_size == VOCAB_SIZE
    in_graph = tokenizer.id_to_piece(tf.constant([PAD_ID, UNK_ID, BOS_ID, EOS_ID]))
    assert in_graph.numpy().tolist() == [p.encode() for p in pieces]


def test_tf_text_ids_equal_python_sentencepiece_ids(processor, tokenizer):
    ragged = tokenizer.tokenize(tf.constant(SENTENCES))
    assert isinstance(ragged, tf.RaggedTensor) and ragged.dtype == tf.int32
    assert _rows(ragged) == processor.encode(SENTENCES)
    # No real token is ever the pad id, and nothing here is unknown (byte fallback).
    flat = ragged.flat_values.numpy()
    assert PAD_ID not in flat and UNK_ID not in flat
    # The emoji are not in a vocabulary learned from captions: they become UTF-8 byte pieces.
    dog = processor.encode("🐕", out_type=str)
    assert [p for p in dog if p.startswith("<0x")] == ["<0xF0>", "<0x9F>", "<0x90>", "<0x95>"]


def test_detokenize_round_trips(processor, tokenizer):
    strings = tokenizer.detokenize(tokenizer.tokenize(tf.constant(SENTENCES))).numpy()
    decoded = [s.decode("utf-8") for s in strings]
    assert decoded == [processor.decode(ids) for ids in processor.encode(SENTENCES)]
    # The default normalisation is NFKC (and whitespace collapsing); these inputs are already
    # normal except for the combining accent, which NFKC composes.
    assert decoded == [unicodedata.normalize("NFKC", s) for s in SENTENCES]
    assert decoded[-2].startswith("\u00e9 combining")


def test_detokenize_ignores_padding_and_accepts_int64(tokenizer):
    ragged = tokenizer.tokenize(tf.constant(SENTENCES))
    padded = ragged.to_tensor(default_value=PAD_ID)
    with_specials = tf.concat(
        [tf.fill([len(SENTENCES), 1], BOS_ID), padded, tf.fill([len(SENTENCES), 1], EOS_ID)], 1
    )
    expected = tokenizer.detokenize(ragged).numpy().tolist()
    assert tokenizer.detokenize(padded).numpy().tolist() == expected
    assert tokenizer.detokenize(tf.cast(with_specials, tf.int64)).numpy().tolist() == expected


def test_tokenizer_runs_in_a_graph(tokenizer):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def round_trip(strings):
        ids = tokenizer.tokenize(strings)
        return ids.to_tensor(), tokenizer.detokenize(ids)

    ids, text = round_trip(tf.constant(SENTENCES[:3]))
    eager = tokenizer.tokenize(tf.constant(SENTENCES[:3])).to_tensor()
    np.testing.assert_array_equal(ids.numpy(), eager.numpy())
    assert [t.decode() for t in text.numpy()] == SENTENCES[:3]


def test_tokenizer_from_bytes_equals_from_path(sp_model_path, tokenizer):
    with open(sp_model_path, "rb") as f:
        from_bytes = SentencePieceTokenizer(f.read())
    strings = tf.constant(SENTENCES)
    assert _rows(from_bytes.tokenize(strings)) == _rows(tokenizer.tokenize(strings))


def _proto_without_paths(path):
    proto = sentencepiece_model_pb2.ModelProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    proto.trainer_spec.ClearField("model_prefix")
    return proto.SerializeToString(deterministic=True)


def test_training_is_deterministic_and_vocab_size_is_configurable(train_pairs, tmp_path):
    texts = [s for pair in train_pairs[:1000] for s in pair]
    first = train_sentencepiece(texts, tmp_path / "a" / "sp", vocab_size=400, seed=3)
    second = train_sentencepiece(texts, tmp_path / "b" / "sp", vocab_size=400, seed=3)
    assert first == str(tmp_path / "a" / "sp.model")
    assert _proto_without_paths(first) == _proto_without_paths(second)
    assert SentencePieceTokenizer(first).vocab_size == 400
    # Without byte fallback the same budget buys more subwords, and an emoji is unknown.
    plain = train_sentencepiece(texts, tmp_path / "c" / "sp", vocab_size=400, byte_fallback=False)
    processor = spm.SentencePieceProcessor(model_file=plain)
    assert processor.get_piece_size() == 400
    assert UNK_ID in processor.encode("🐕")
    assert (processor.pad_id(), processor.bos_id(), processor.eos_id()) == (PAD_ID, BOS_ID, EOS_ID)


def test_training_errors_name_the_problem(tmp_path):
    texts = ["a dog runs", "ein Hund rennt"] * 20
    with pytest.raises(ValueError, match=r"vocab_size=5000.*Vocabulary size too high"):
        train_sentencepiece(texts, tmp_path / "big", vocab_size=5000, byte_fallback=False)
    with pytest.raises(ValueError, match=r"texts\[1\] is a bytes"):
        train_sentencepiece(["ok", b"bytes"], tmp_path / "x", vocab_size=50)
    with pytest.raises(ValueError, match="texts is empty"):
        train_sentencepiece([], tmp_path / "x", vocab_size=50)
    with pytest.raises(ValueError, match=r"\['pad_id'\]"):
        train_sentencepiece(texts, tmp_path / "x", vocab_size=50, pad_id=-1)


def test_not_a_model_file(tmp_path):
    path = tmp_path / "junk.model"
    path.write_bytes(b"this is not a protobuf")
    with pytest.raises(ValueError, match=f"{path} is not a SentencePiece model"):
        SentencePieceTokenizer(path)


def test_tokenizer_survives_a_later_random_seed(sp_model_path):
    # tf.random.set_seed clears the kernel cache and with it tf-text's resource (tf-text #570).
    import keras

    tokenizer = SentencePieceTokenizer(sp_model_path)
    before = tokenizer.tokenize(["A dog runs."]).to_list()
    keras.utils.set_random_seed(0)
    assert tokenizer.tokenize(["A dog runs."]).to_list() == before
    assert tokenizer.detokenize(tokenizer.tokenize(["A dog runs."])).numpy().tolist() == [b"A dog runs."]
