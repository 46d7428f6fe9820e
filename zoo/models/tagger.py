"""The encoder-only part-of-speech tagger (UD English-EWT UPOS), built with the functional API.

A word is its (lowercased) word embedding plus a character feature (a convolution over its
characters, max-pooled), so that a word never seen in training still gets a good tag from its
spelling. A stack of transformer encoder blocks reads the sentence; a per-token head gives the
UPOS scores, as softmax logits or as the potentials of a linear-chain CRF (``zoo.layers.CRF``).
:func:`tagger_heads` says which heads a built or reloaded tagger has. ``zoo.data.TaggerVocabulary``
turns sentences into its inputs; ``zoo.decoding.tagging`` turns its outputs into tags.
"""

from dataclasses import dataclass, replace

import keras

from zoo.layers import (
    CRF,
    CharacterEmbedding,
    Dropout,
    TokenAndPositionEmbedding,
    TransformerEncoderBlock,
)
from zoo.models.presets import from_presets

__all__ = [
    "HEADS",
    "PRESETS",
    "TaggerConfig",
    "TaggerHead",
    "build_tagger",
    "get_config",
    "tagger_heads",
]

POSITIONS = ("relative", "learned")
# len(zoo.data.UPOS_TAGS). zoo.data is imported only where labels are encoded: it loads TensorFlow,
# and the model must build on the JAX backend without it.
NUM_UPOS_TAGS = 17

HEADS = ("upos", "xpos")  # the outputs a tagger may have, in this order


@dataclass(frozen=True)
class TaggerConfig:
    """Everything that defines a tagger and how it trains.

    Inputs (take the first three from the vocabulary: ``vocabulary.config_overrides()``):
        word_vocab_size: words in the word vocabulary, with the padding (0) and OOV (1) ids.
        char_vocab_size: characters in the character vocabulary, with its 4 special ids.
        max_word_length: C, characters per word, with the begin- and end-of-word markers.
        max_length: the longest sentence, in words, that ``position="learned"`` has positions
            for (EWT's longest training sentence has 159 words).
        num_tags: K, the UPOS tags (17, :data:`zoo.data.UPOS_TAGS`).
        num_xpos_tags: the XPOS tags of a second head (``vocabulary.num_xpos_tags``); 0 means
            no XPOS head.

    Model:
        d_model, num_heads, ff_dim, num_layers: sizes and depth of the encoder (pre-LN blocks
            with a final norm when ``normalize_first``).
        dropout, attention_dropout: residual (and embedding) dropout, attention-weight dropout.
        activation: the feed-forward activation.
        normalize_first: pre-LN blocks when True, post-LN when False.
        position: ``"relative"``: relative position attention (Shaw et al. 2018), clipped at
            ``max_relative_position``, and no absolute positions; ``"learned"``: a learned
            position embedding added to the words, and plain multi-head attention.
        max_relative_position: k of the relative attention.
        char_embedding_dim, char_filters, char_kernel_size: the character feature
            (``zoo.layers.CharacterEmbedding``): an embedding of each character, a convolution
            over the characters of a word (``char_filters`` filters of each width when
            ``char_kernel_size`` is a tuple of widths), a max over them, a projection to
            ``d_model``.
        use_crf: a CRF head (the model outputs potentials ``(B, T, K, K)``; train with
            ``zoo.layers.CRFLoss``, decode with Viterbi) instead of softmax logits ``(B, T, K)``.

    Training (read by the tagger's trainer and vocabulary building):
        lowercase: lowercase words before the word-vocabulary lookup (characters keep case).
        min_word_count: words seen fewer times in training are OOV; the training singletons
            that become OOV teach the model to tag from characters alone.
        word_dropout: the probability with which the training pipeline replaces a word id by
            the OOV id (1), so that every word is also learned from its characters (Kiperwasser
            & Goldberg 2016, Plank et al. 2016). Not applied by the model.
        learning_rate (peak), warmup_steps, weight_decay, clipnorm: AdamW with warm-up.
        gradient_accumulation_steps: above 1, each update applies the mean gradient of this
            many batches; ``warmup_steps`` then counts updates.
        ema_momentum: nonzero keeps an exponential moving average of the weights (Polyak
            averaging), which is what is validated, checkpointed and shipped; 0 turns it off.
        label_smoothing: of the softmax head's cross entropy (the CRF has none).
        batch_tokens: the word budget of one batch.
        epochs: training epochs.
    """

    word_vocab_size: int = 10_000
    char_vocab_size: int = 200
    max_word_length: int = 20
    max_length: int = 256
    num_tags: int = NUM_UPOS_TAGS
    num_xpos_tags: int = 0
    d_model: int = 128
    num_heads: int = 4
    ff_dim: int = 512
    num_layers: int = 3
    dropout: float = 0.3
    attention_dropout: float = 0.1
    activation: str = "gelu"
    normalize_first: bool = True
    position: str = "relative"
    max_relative_position: int = 16
    char_embedding_dim: int = 32
    char_filters: int = 256
    char_kernel_size: int | tuple = 3
    use_crf: bool = True
    lowercase: bool = True
    min_word_count: int = 2
    word_dropout: float = 0.25
    learning_rate: float = 2e-3
    warmup_steps: int = 400
    weight_decay: float = 1e-4
    clipnorm: float = 1.0
    gradient_accumulation_steps: int = 1
    ema_momentum: float = 0.998
    label_smoothing: float = 0.0
    batch_tokens: int = 1024
    epochs: int = 16

    def __post_init__(self):
        if isinstance(self.char_kernel_size, list):  # read back from config.json
            object.__setattr__(self, "char_kernel_size", tuple(self.char_kernel_size))
        if self.position not in POSITIONS:
            raise ValueError(f"Unknown position {self.position!r}; expected one of {POSITIONS}.")
        if self.max_word_length < 3:
            raise ValueError("max_word_length counts both word-boundary markers; it must be >= 3.")


# `small` is the EWT model: it must reach >= 95% UPOS on the test split within 20 minutes of
# training on 2 CPU cores. Tagging is local (a word, its affixes and a few neighbours decide most
# tags) and EWT is small, so the encoder is shallow and narrow, the regularisation strong, and the
# budget goes into epochs. Relative positions, because the cue is the distance to a neighbour, not
# the index; characters with word-boundary markers, and word dropout to train them on every word,
# because suffixes and capitals tag the words missing from the vocabulary; a CRF for the tag
# bigrams; averaged weights, because the raw ones overfit. The measurements behind these choices
# and the shipped model's scores are in saved_models/tagger-en-ewt/MODEL_CARD.md.
# `tiny` is for tests and demos.
PRESETS = {"small": TaggerConfig()}
PRESETS["tiny"] = replace(
    PRESETS["small"],
    word_vocab_size=200,
    char_vocab_size=64,
    max_word_length=10,
    max_length=64,
    d_model=32,
    num_heads=2,
    ff_dim=64,
    num_layers=1,
    dropout=0.0,
    attention_dropout=0.0,
    max_relative_position=4,
    char_embedding_dim=8,
    char_filters=16,
    ema_momentum=0.0,  # a few hundred steps: the average would lag far behind
    warmup_steps=20,
    batch_tokens=256,
    epochs=2,
)


def get_config(preset, **overrides):
    """The named preset, with any field overridden: ``get_config("small", use_crf=False)``."""
    return from_presets(PRESETS, preset, "tagger", **overrides)


# ---------------------------------------------------------------- the model
@dataclass(frozen=True)
class TaggerHead:
    """One output of a tagger: K, its number of tags, and whether it is a CRF.

    A CRF head outputs potentials ``(B, T, K, K)``, decoded with Viterbi; a softmax head outputs
    logits ``(B, T, K)``, decoded with the argmax.
    """

    num_tags: int
    use_crf: bool


def tagger_heads(model):
    """The heads of a tagger of :func:`build_tagger`, built or reloaded from a ``.keras`` file.

    The one place that tells a CRF head from a softmax head: by the layers that
    :func:`build_tagger` names, ``{head}_logits`` (its ``units`` are K) and ``{head}_crf``.

    Args:
        model: a tagger of :func:`build_tagger`.

    Returns:
        ``{head: TaggerHead}``, the heads in :data:`HEADS` order: ``"upos"`` and, with an XPOS
        head, ``"xpos"``.

    Raises:
        ValueError: a model that is not a tagger (no ``upos_logits`` layer, other outputs).

    Example:
        >>> heads = tagger_heads(build_tagger(get_config("tiny", num_xpos_tags=5)))
        >>> heads["upos"], heads["xpos"].num_tags
        (TaggerHead(num_tags=17, use_crf=True), 5)
    """
    layers = {layer.name: layer for layer in model.layers}
    if "upos_logits" not in layers:
        raise ValueError(
            f"Model {model.name!r} has no layer 'upos_logits': it is not a tagger of "
            "zoo.models.build_tagger."
        )
    outputs = model.output if isinstance(model.output, dict) else {"upos": model.output}
    if set(outputs) - set(HEADS) or "upos" not in outputs:
        raise ValueError(
            f"Model {model.name!r} has outputs {sorted(outputs)}; a tagger has 'upos' and "
            "optionally 'xpos'."
        )
    return {
        head: TaggerHead(layers[f"{head}_logits"].units, f"{head}_crf" in layers)
        for head in HEADS
        if head in outputs
    }


def _head(x, config, name, num_tags):
    scores = keras.layers.Dense(num_tags, name=f"{name}_logits")(x)  # (B, T, K)
    if config.use_crf:
        return CRF(name=f"{name}_crf")(scores)  # (B, T, K, K)
    return scores


def build_tagger(config):
    """A functional tagger: ``{"words", "chars"}`` ids -> per-token UPOS scores.

    Layer names are stable: ``word_embedding`` (a ``TokenAndPositionEmbedding``, with the
    learned positions when ``position="learned"``), ``char_embedding`` (a
    ``CharacterEmbedding``), ``word_and_char`` (their sum), ``embedding_dropout``,
    ``encoder_block_{i}``, ``encoder_norm``, ``upos_logits`` and, with ``use_crf``,
    ``upos_crf`` (likewise ``xpos_logits``/``xpos_crf``).

    Args:
        config: a :class:`TaggerConfig`.

    Returns:
        A ``keras.Model`` mapping ``{"words": (B, T) int32, "chars": (B, T, C) int32}`` (0 is
        padding, word id 1 is OOV; see ``zoo.data.TaggerVocabulary``) to the UPOS logits
        ``(B, T, K)``, or with ``use_crf`` the CRF potentials ``(B, T, K, K)``. With an XPOS
        head the output is a dict ``{"upos": ..., "xpos": ...}``. The outputs carry the padding
        mask as their Keras implicit mask (losses and metrics read it): ``words != 0`` (or a
        word with characters; ``zoo.data.TaggerVocabulary`` gives every word both, padding
        neither). Outputs at padding are meaningless (zero for the CRF).

    Example:
        >>> model = build_tagger(get_config("tiny"))
        >>> model.output_shape
        (None, None, 17, 17)
    """
    words = keras.Input((None,), dtype="int32", name="words")
    chars = keras.Input((None, config.max_word_length), dtype="int32", name="chars")

    x = TokenAndPositionEmbedding(
        config.word_vocab_size,
        config.d_model,
        max_length=config.max_length,
        position="learned" if config.position == "learned" else None,
        mask_zero=True,
        name="word_embedding",
    )(words)  # (B, T, D), masked where words == 0
    c = CharacterEmbedding(
        config.char_vocab_size,
        config.d_model,
        char_dim=config.char_embedding_dim,
        filters=config.char_filters,
        kernel_size=config.char_kernel_size,
        name="char_embedding",
    )(chars)  # (B, T, D), masked where a word has no characters
    # Merging keeps a mask only when every input has one; the two agree on padding words.
    x = keras.layers.Add(name="word_and_char")([x, c])  # (B, T, D)
    x = Dropout(config.dropout, name="embedding_dropout")(x)
    if config.position == "relative":
        attention = "relative"
        attention_kwargs = {"max_relative_position": config.max_relative_position}
    else:
        attention, attention_kwargs = "mha", None
    for i in range(config.num_layers):
        x = TransformerEncoderBlock(
            num_heads=config.num_heads,
            ff_dim=config.ff_dim,
            dropout=config.dropout,
            attention_dropout=config.attention_dropout,
            activation=config.activation,
            normalize_first=config.normalize_first,
            attention=attention,
            attention_kwargs=attention_kwargs,
            name=f"encoder_block_{i}",
        )(x)
    if config.normalize_first:
        x = keras.layers.LayerNormalization(epsilon=1e-5, name="encoder_norm")(x)

    outputs = _head(x, config, "upos", config.num_tags)
    if config.num_xpos_tags:
        outputs = {"upos": outputs, "xpos": _head(x, config, "xpos", config.num_xpos_tags)}
    return keras.Model({"words": words, "chars": chars}, outputs, name="tagger")
