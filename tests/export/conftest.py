"""One tiny translator with random weights and a tiny vocabulary, exported once per test process.

The weights are random, so the translations are nonsense (byte pieces included), but they are
long and varied: every search has real choices to make, and the comparisons with
:func:`zoo.tasks.translate` are not between empty strings.
"""

import keras
import pytest

from zoo.data import SentencePieceTokenizer, load_multi30k, train_sentencepiece
from zoo.models import Translator, build_translator
from zoo.tasks.translation.config import get_config as translator_config  # a run's
from zoo.tasks import get_task

VOCAB_SIZE = 400  # 256 byte pieces + 4 special ids + ~70 characters + a few words
MAX_LENGTH = 16  # source and target positions: short loops, and truncation is easy to reach


# Session, not package, scope: a worker runs this folder's files between other folders' files,
# and pytest would build a package fixture again each time the folder comes back.
@pytest.fixture(scope="session")
def model():
    keras.utils.set_random_seed(3)
    config = translator_config(
        "tiny", vocab_size=VOCAB_SIZE, max_length=MAX_LENGTH, share_embeddings=False
    )
    # Compiled, its optimizer built, as after training: the export leaves that state out.
    model = get_task("translator").compile_model(build_translator(config), config)
    model.optimizer.build(model.trainable_variables)
    return model


@pytest.fixture(scope="session")
def tokenizer(model, tmp_path_factory):
    """A vocabulary of 1,000 Multi30k lines (500 pairs). It depends on ``model`` so that it is
    made after ``keras.utils.set_random_seed``: tf.random.set_seed clears TensorFlow's kernel
    cache, and with it the SentencePiece resource of a tf-text tokenizer made before."""
    texts = [s for pair in load_multi30k("val")[:500] for s in pair]
    prefix = tmp_path_factory.mktemp("export_spm") / "joint"
    return SentencePieceTokenizer(train_sentencepiece(texts, prefix, vocab_size=VOCAB_SIZE))


@pytest.fixture(scope="session")
def export_dir(model, tokenizer, tmp_path_factory):
    # With the XLA warm-up (test_translator_serving.py's fresh process replays it and counts its
    # compiles); loading the SavedModel does not replay it, so the other tests see the same model.
    translator = Translator.from_backbone(model, tokenizer)
    return translator.export_serving(tmp_path_factory.mktemp("export") / "translator",
                                     warmup_xla=True)
