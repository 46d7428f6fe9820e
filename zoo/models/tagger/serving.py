"""The tagger's SavedModel: :class:`TaggerServing`, its two signatures over the preprocessor and
the backbone, which :meth:`Tagger.export_serving` writes. The signatures and how to serve them:
``saved_models/README.md``.
"""

import numpy as np
import tensorflow as tf

from zoo.export.folder import save_serving
from zoo.models.tagger.preprocessor import TaggerPreprocessor, tag_graph

__all__ = ["TaggerServing"]

_SENTENCES = tf.TensorSpec([None], tf.string, name="sentences")
_TOKENS = tf.TensorSpec([None, None], tf.string, name="tokens")
_LENGTHS = tf.TensorSpec([None], tf.int32, name="lengths")


class TaggerServing(tf.Module):
    """A tagger's signatures: sentences in, tags out, in-graph.

    ``tag`` is the ``serving_default`` signature, and ``tag_tokens`` the ``tag_tokens``
    signature, for tokens given one by one (a UD FORM may hold a space). They trace in plain
    TensorFlow graph mode, over :func:`~zoo.models.tagger.preprocessor.tag_graph`, which
    ``Tagger.tag`` runs too. The module tracks the backbone's variables and the vocabulary's
    lookup tables, not the Keras objects, so the SavedModel holds none.

    Args:
        backbone: a :class:`~zoo.models.tagger.TaggerBackbone`, in float32.
        preprocessor: its :class:`~zoo.models.tagger.TaggerPreprocessor`, checked against it
            (``with_window``).
        name: the module name.

    Example:
        >>> from zoo.data import TaggerVocabulary
        >>> from zoo.models.tagger import Tagger, build_tagger, get_config
        >>> vocabulary = TaggerVocabulary.build([["A", "cat", "."]], 1, max_word_length=10)
        >>> tagger = Tagger.from_backbone(
        ...     build_tagger(get_config("tiny", **vocabulary.config_overrides())), vocabulary)
        >>> serving = TaggerServing(tagger.backbone, tagger.preprocessor)
        >>> outputs = serving.tag(tf.constant(["A cat .", ""]))
        >>> sorted(outputs), outputs["lengths"].numpy().tolist(), outputs["tags"].shape
        (['lengths', 'tags', 'tokens'], [3, 0], TensorShape([2, 3]))
    """

    def __init__(self, backbone, preprocessor, name="tagger_serving"):
        super().__init__(name=name)
        self.model_variables = list(backbone.variables)
        self.word_table = preprocessor.word_table
        self.char_table = preprocessor.char_table
        # A plain function, not tracked: the SavedModel holds the variables and the tables,
        # not the Keras objects.
        self._tag = lambda tokens: tag_graph(backbone, preprocessor, tokens)

    @tf.function(input_signature=[_SENTENCES], autograph=False)
    def tag(self, sentences):
        """``serving_default``: one tag per whitespace-separated token.

        Args:
            sentences: ``tf.string`` ``[None]``, the sentences (any bytes).

        Returns:
            ``{"tags": tf.string [B, T], "lengths": tf.int32 [B], "tokens": tf.string [B, T]}``
            and one output per other head (``"xpos_tags"``, ``"feats"``, ``"lemmas"``): the
            UPOS tags and the tokens of each sentence, padded with ``""`` after its
            ``lengths[i]`` tokens.
        """
        return self._tag(TaggerPreprocessor.split(sentences))

    @tf.function(input_signature=[_TOKENS, _LENGTHS], autograph=False)
    def tag_tokens(self, tokens, lengths):
        """``tag_tokens``: one tag per given token, for text tokenized already (a CoNLL-U
        file's FORMs, which may hold spaces).

        Args:
            tokens: ``tf.string`` ``[B, T]``, the tokens of each sentence (any bytes; an
                invalid UTF-8 sequence becomes U+FFFD), padded after its length.
            lengths: ``tf.int32`` ``[B]``, the tokens of each sentence (0 to T).

        Returns:
            The outputs of ``serving_default``, for these tokens.
        """
        return self._tag(TaggerPreprocessor.given_tokens(tokens, lengths))

    @property
    def signatures(self):
        """The SavedModel's signatures: ``serving_default`` (:meth:`tag`) and
        ``tag_tokens`` (:meth:`tag_tokens`)."""
        return {"serving_default": self.tag, "tag_tokens": self.tag_tokens}

    def save(self, path):
        """Write the SavedModel with its signatures to ``path``; return it."""
        return save_serving(self, path, self.signatures)

    def warmup_requests(self):
        """The requests of the export's warm-up file (:mod:`zoo.export.warmup`): each
        signature once."""
        tokens = ["A", "dog", "runs", "through", "the", "snow", "."]
        lengths = np.array([len(tokens)], "int32")
        return [("serving_default", {"sentences": [" ".join(tokens)]}),
                ("tag_tokens", {"tokens": [tokens], "lengths": lengths})]
