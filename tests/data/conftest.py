import pytest

from zoo.data import SentencePieceTokenizer, load_multi30k, train_sentencepiece

VOCAB_SIZE = 500


@pytest.fixture(scope="session")
def train_pairs():
    """The first 2,000 Multi30k training pairs: enough for a tiny joint vocabulary."""
    return load_multi30k("train")[:2000]


@pytest.fixture(scope="session")
def sp_model_path(train_pairs, tmp_path_factory):
    """One tiny joint En+De SentencePiece model, trained once for the whole session."""
    texts = [s for pair in train_pairs for s in pair]
    prefix = tmp_path_factory.mktemp("spm") / "joint"
    return train_sentencepiece(texts, prefix, vocab_size=VOCAB_SIZE)


@pytest.fixture(scope="session")
def tokenizer(sp_model_path):
    return SentencePieceTokenizer(sp_model_path)
