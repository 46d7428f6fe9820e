"""The tagger's config and its presets (``small`` is the shipped EWT model, ``tiny`` for tests)."""

from dataclasses import dataclass, replace

from zoo.models.presets import from_presets

__all__ = ["CRF_HEADS", "HEAD_SIZES", "HEADS", "NUM_UPOS_TAGS", "POSITIONS", "PRESETS", "TaggerConfig", "get_config"]

POSITIONS = ("relative", "learned")
# len(zoo.data.UPOS_TAGS). zoo.data is imported only where labels are encoded: it loads TensorFlow,
# and the model must build on the JAX backend without it.
NUM_UPOS_TAGS = 17

HEADS = ("upos", "xpos", "feats", "lemma")  # the outputs a tagger may have, in this order
# The config field of each head's class count (0: no such head); UPOS always has its 17.
HEAD_SIZES = {"upos": "num_tags", "xpos": "num_xpos_tags", "feats": "num_feats_tags",
              "lemma": "num_lemma_scripts"}  # fmt: skip
# The heads that use_crf puts a CRF on. FEATS bundles and lemma scripts run to thousands of
# classes, and a CRF's (B, T, K, K) potentials would not fit: theirs are softmax heads.
CRF_HEADS = ("upos", "xpos")


@dataclass(frozen=True)
class TaggerConfig:
    """The tagger's architecture, the arguments of its backbone (how it trains, and its
    vocabulary's and data's settings, are the tagging task's training config).

    Inputs (take the first three from the vocabulary: ``vocabulary.config_overrides()``):
        word_vocab_size: words in the word vocabulary, with the padding (0) and OOV (1) ids.
        char_vocab_size: characters in the character vocabulary, with its 4 special ids.
        max_word_length: C, characters per word, with the begin- and end-of-word markers.
        max_length: the longest sentence, in words, that ``position="learned"`` has positions
            for (EWT's longest training sentence has 159 words).
        num_tags: K, the UPOS tags (17, :data:`zoo.data.UPOS_TAGS`).
        num_xpos_tags: the XPOS tags of a second head (``vocabulary.num_xpos_tags``); 0 means
            no XPOS head.
        num_feats_tags: the FEATS bundles of a features head, whole bundles as one class (as
            UDPipe 2 and UDify; ``benchmarks/studies/feats_heads.py``); 0 means none.
        num_lemma_scripts: the lemma edit scripts of a lemma head; 0 means none. The head set,
            :attr:`TaggerConfig.heads`, is the heads with a nonzero count (``--xpos``,
            ``--feats``, ``--lemmas`` set them to 1; the vocabulary sets the real counts).

    Model:
        d_model, num_heads, ff_dim, num_layers: sizes and depth of the encoder (pre-LN blocks
            with a final norm when ``normalize_first``).
        activation: the feed-forward activation.
        normalize_first: pre-LN blocks when True, post-LN when False.
        position: ``"relative"``: relative position attention (Shaw et al. 2018), clipped at
            ``max_relative_position``, and no absolute positions; ``"learned"``: a learned
            position embedding added to the words, and plain multi-head attention.
        max_relative_position: k of the relative attention.
        char_embedding_dim, char_filters, char_kernel_size: the character feature
            (``zoo.layers.CharacterEmbedding``): embedded characters, a convolution of
            ``char_filters`` filters (of each width, for a tuple of widths), a max, a projection.
        use_crf: CRF heads for UPOS and XPOS (potentials ``(B, T, K, K)``, ``zoo.layers.CRFLoss``,
            Viterbi) instead of softmax logits ``(B, T, K)``; FEATS and lemma heads are softmax.
        dropout, attention_dropout: residual (and embedding) dropout, attention-weight dropout.
    """

    word_vocab_size: int = 10_000
    char_vocab_size: int = 200
    max_word_length: int = 20
    max_length: int = 256
    num_tags: int = NUM_UPOS_TAGS
    num_xpos_tags: int = 0
    num_feats_tags: int = 0
    num_lemma_scripts: int = 0
    d_model: int = 128
    num_heads: int = 4
    ff_dim: int = 512
    num_layers: int = 3
    activation: str = "gelu"
    normalize_first: bool = True
    position: str = "relative"
    max_relative_position: int = 16
    char_embedding_dim: int = 32
    char_filters: int = 256
    char_kernel_size: int | tuple = 3
    use_crf: bool = True
    dropout: float = 0.1
    attention_dropout: float = 0.1

    def __post_init__(self):
        if isinstance(self.char_kernel_size, list):  # read back from config.json
            object.__setattr__(self, "char_kernel_size", tuple(self.char_kernel_size))
        if self.position not in POSITIONS:
            raise ValueError(f"Unknown position {self.position!r}; expected one of {POSITIONS}.")
        if self.max_word_length < 3:
            raise ValueError("max_word_length counts both word-boundary markers; it must be >= 3.")

    @property
    def heads(self):
        """The tagger's heads, in :data:`HEADS` order: ``"upos"`` and those with classes."""
        return tuple(head for head in HEADS if getattr(self, HEAD_SIZES[head]))

    def head_uses_crf(self, head):
        return self.use_crf and head in CRF_HEADS


# `small` is the EWT model: it must reach >= 95% UPOS on the test split within 20 minutes of
# training on 2 CPU cores. Tagging is local and EWT small: a shallow, narrow encoder, strong
# regularisation, many epochs; relative positions (the cue is a neighbour's distance); characters
# with word-boundary markers and word dropout (suffixes and capitals tag unseen words); a CRF for
# tag bigrams; averaged weights (the raw ones overfit). Evidence: saved_models/tagger-en-ewt/
# MODEL_CARD.md. `tiny` is for tests and demos.
PRESETS = {"small": TaggerConfig(dropout=0.3)}
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
)


def get_config(preset, **overrides):
    """The named preset, with any field overridden: ``get_config("small", use_crf=False)``."""
    return from_presets(PRESETS, preset, "tagger", **overrides)

