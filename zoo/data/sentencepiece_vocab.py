"""A joint SentencePiece vocabulary: training, and an in-graph tokenizer built on tf-text.

:func:`train_sentencepiece` writes ``{model_prefix}.model``; :class:`SentencePieceTokenizer`
loads it into ``tensorflow_text`` so that tokenization runs in ``tf.data``, ``tf.function`` and
SavedModels with the ids of the Python package. The special ids are fixed: :data:`PAD_ID` ``= 0``
(so ``mask_zero=True`` and the pipeline's padding agree), :data:`UNK_ID` ``= 1``,
:data:`BOS_ID` ``= 2``, :data:`EOS_ID` ``= 3``.

References:
    Kudo and Richardson (2018), "SentencePiece: A simple and language independent subword
    tokenizer and detokenizer for Neural Text Processing", EMNLP (demo). arXiv:1808.06226.
    Kudo (2018), "Subword Regularization: Improving Neural Network Translation Models with
    Multiple Subword Candidates", ACL. arXiv:1804.10959 (the unigram model).
"""

import os

import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text

# The special ids and pieces, re-exported here beside the vocabulary that fixes them.
from zoo.special_ids import *  # noqa: F403
from zoo.special_ids import __all__ as _SPECIAL

__all__ = [*_SPECIAL, "SentencePieceTokenizer", "train_sentencepiece"]


_RESERVED_OPTIONS = (
    "pad_id", "unk_id", "bos_id", "eos_id", "pad_piece", "unk_piece", "bos_piece", "eos_piece",
    "input", "sentence_iterator", "model_writer",
)  # fmt: skip


def train_sentencepiece(
    texts,
    model_prefix,
    vocab_size=8000,
    model_type="unigram",
    character_coverage=1.0,
    byte_fallback=True,
    num_threads=1,
    seed=0,
    **trainer_options,
):
    """Learn a SentencePiece vocabulary from raw sentences and write ``{model_prefix}.model``.

    For a joint vocabulary, pass both languages' sentences together. The special ids are fixed
    (module docstring). Deterministic: the same texts in the same order with the same arguments
    give the same model (seeded, the whole input used). With ``byte_fallback`` the 256 byte
    pieces (ids 4 to 259) encode any character outside the vocabulary as its UTF-8 bytes instead
    of ``<unk>``, so detokenization gives it back; ``vocab_size`` must leave room for them.

    Args:
        texts: an iterable of ``str``, one sentence each.
        model_prefix: where to write; the files are ``{model_prefix}.model`` and
            ``{model_prefix}.vocab``. Missing parent folders are created.
        vocab_size: the number of pieces, special and byte pieces included.
        model_type: ``"unigram"`` (default), ``"bpe"``, ``"char"`` or ``"word"``.
        character_coverage: the share of characters the vocabulary must cover; 1.0 keeps every
            character of the training text (right for small alphabets such as English and
            German; about 0.9995 suits Chinese or Japanese).
        byte_fallback: encode out-of-vocabulary characters as UTF-8 byte pieces.
        num_threads: trainer threads.
        seed: seed of the ``sentencepiece`` random generator (a process-wide setting).
        **trainer_options: further ``sentencepiece`` trainer options, e.g.
            ``user_defined_symbols=["<sep>"]`` or ``normalization_rule_name="nfkc"``. The special
            ids and pieces and the input options are fixed here and cannot be overridden.

    Returns:
        The path of the written ``.model`` file, as a ``str``.

    Raises:
        ValueError: no texts, a text that is not a ``str`` (named by its index), a reserved option,
            or a training failure such as a ``vocab_size`` too large or too small for the texts
            (the message carries the ``sentencepiece`` reason).

    Example:
        >>> import tempfile, os
        >>> from zoo.data import load_multi30k
        >>> pairs = load_multi30k("val")
        >>> texts = [s for pair in pairs for s in pair]
        >>> prefix = os.path.join(tempfile.mkdtemp(), "sp")
        >>> path = train_sentencepiece(texts, prefix, vocab_size=500)
        >>> path.endswith("sp.model")
        True
    """
    clashes = sorted(set(trainer_options) & set(_RESERVED_OPTIONS))
    if clashes:
        raise ValueError(f"train_sentencepiece fixes these trainer options itself: {clashes}.")
    sentences = []
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"texts[{index}] is a {type(text).__name__}, not a str: {text!r:.80}")
        sentences.append(text)
    if not sentences:
        raise ValueError("texts is empty; SentencePiece needs sentences to learn a vocabulary.")
    model_prefix = os.fspath(model_prefix)
    parent = os.path.dirname(model_prefix)
    if parent:
        os.makedirs(parent, exist_ok=True)
    # Trained under a temporary prefix and renamed after, the .model last: a reader (another
    # worker waiting for it) never sees a partial file.
    partial = os.path.join(parent, ".partial-" + os.path.basename(model_prefix))
    options = {
        "model_prefix": partial,
        "vocab_size": vocab_size,
        "model_type": model_type,
        "character_coverage": character_coverage,
        "byte_fallback": byte_fallback,
        "num_threads": num_threads,
        "pad_id": PAD_ID,
        "unk_id": UNK_ID,
        "bos_id": BOS_ID,
        "eos_id": EOS_ID,
        "pad_piece": PAD_PIECE,
        "unk_piece": UNK_PIECE,
        "bos_piece": BOS_PIECE,
        "eos_piece": EOS_PIECE,
        "input_sentence_size": 0,  # use every sentence: no sampling, nothing random
        "minloglevel": 2,  # warnings and errors only
    }
    options.update(trainer_options)
    spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), **options)
        for suffix in (".vocab", ".model"):
            os.replace(partial + suffix, model_prefix + suffix)
    except RuntimeError as e:
        raise ValueError(
            f"SentencePiece training failed for vocab_size={vocab_size}, model_type={model_type!r} "
            f"on {len(sentences)} sentences: {e}"
        ) from e
    finally:
        for suffix in (".vocab", ".model"):
            if os.path.exists(partial + suffix):
                os.remove(partial + suffix)
    return model_prefix + ".model"


class SentencePieceTokenizer(tf.Module):
    """In-graph SentencePiece tokenizer on ``tensorflow_text.SentencepieceTokenizer``.

    It reads the ``.model`` file written by :func:`train_sentencepiece` (or any SentencePiece
    model) and gives the same ids as the Python ``sentencepiece`` package. It is a ``tf.Module``,
    so it can be used inside ``tf.data``, ``tf.function`` and tracked by a SavedModel.

    Args:
        model: the path of a ``.model`` file, or its serialized bytes.
        name: the module name.

    Attributes:
        model_proto: the serialized model, ``bytes``.
        vocab_size: the number of pieces.
        pad_id, unk_id, bos_id, eos_id: the special ids of the model (-1 when it has none); for
            models from :func:`train_sentencepiece` they are :data:`PAD_ID`, :data:`UNK_ID`,
            :data:`BOS_ID` and :data:`EOS_ID`.

    Example:
        >>> import tempfile, os
        >>> from zoo.data import load_multi30k, train_sentencepiece
        >>> texts = [s for pair in load_multi30k("val") for s in pair]
        >>> prefix = os.path.join(tempfile.mkdtemp(), "sp")
        >>> path = train_sentencepiece(texts, prefix, vocab_size=500)
        >>> tokenizer = SentencePieceTokenizer(path)
        >>> ids = tokenizer.tokenize(tf.constant(["Ein Hund rennt.", "A dog runs."]))
        >>> ids.shape.as_list()
        [2, None]
        >>> tokenizer.detokenize(ids).numpy().tolist()
        [b'Ein Hund rennt.', b'A dog runs.']
    """

    def __init__(self, model, name="sentence_piece_tokenizer"):
        super().__init__(name=name)
        if isinstance(model, bytes):
            proto = model
        else:
            with open(os.fspath(model), "rb") as f:
                proto = f.read()
        processor = spm.SentencePieceProcessor()
        try:
            processor.LoadFromSerializedProto(proto)
        except RuntimeError as e:
            where = "the given bytes" if isinstance(model, bytes) else os.fspath(model)
            raise ValueError(f"{where} is not a SentencePiece model: {e}") from e
        self.model_proto = proto
        self.vocab_size = processor.get_piece_size()
        self.pad_id = processor.pad_id()
        self.unk_id = processor.unk_id()
        self.bos_id = processor.bos_id()
        self.eos_id = processor.eos_id()
        self._build()

    def _build(self):
        with self.name_scope:
            self._tokenizer = tf_text.SentencepieceTokenizer(model=self.model_proto, out_type=tf.int32)
        # Counts the rebuilds: a tf.function traced with an older op must be traced again.
        self.generation = getattr(self, "generation", -1) + 1

    def ensure_alive(self):
        """Rebuild the tf-text op if its resource has vanished (see :meth:`_run`).

        Returns:
            :attr:`generation`, which changes when the op was rebuilt: a cache of traced
            functions keyed on it never runs a dead op.
        """
        with tf.init_scope():
            try:
                self._tokenizer.tokenize("")
            except tf.errors.NotFoundError:
                self._build()
        return self.generation

    def _run(self, method, *args):
        """Run a tf-text method, first rebuilding the op if its resource has vanished.

        ``tf.random.set_seed`` (and so ``keras.utils.set_random_seed``) clears TensorFlow's
        kernel cache, which deletes the SentencePiece resource of every tf-text tokenizer made
        before it (tensorflow/text#570). A tiny eager probe (lifted out of any graph being
        traced, so tf.data and tf.function see a live tokenizer) finds that out. A function
        traced before the reset keeps the dead resource: key its cache on :meth:`ensure_alive`.
        """
        self.ensure_alive()
        return getattr(self._tokenizer, method)(*args)

    def tokenize(self, strings):
        """Tokenize UTF-8 strings into ids.

        Args:
            strings: a ``tf.string`` tensor (or anything convertible to one), usually ``(B,)``.

        Returns:
            ``int32`` ids: a ``tf.RaggedTensor`` of shape ``(B, None)`` for a ``(B,)`` input, a
            dense ``(T,)`` tensor for a scalar. No BOS or EOS is added.
        """
        return self._run("tokenize", strings)

    def detokenize(self, ids):
        """Turn ids back into UTF-8 strings.

        The control pieces (pad, BOS, EOS) decode to nothing, so a dense batch padded with
        :data:`PAD_ID` decodes like the ragged one. Ids after an EOS are not cut here.

        Args:
            ids: integer ids, a ``tf.RaggedTensor`` or dense tensor of shape ``(B, T)``.

        Returns:
            A ``(B,)`` ``tf.string`` tensor.
        """
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.convert_to_tensor(ids)
        return self._run("detokenize", tf.cast(ids, tf.int32))

    def id_to_piece(self, ids):
        """The pieces (``tf.string``) of integer ids, with the shape of ``ids``."""
        return self._run("id_to_string", tf.cast(ids, tf.int32))
