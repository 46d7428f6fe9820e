"""Synthesizer attention (Tay et al. 2021): attention weights made without query-key dot products."""

import keras
from keras import ops

from zoo.layers.attention.multi_head import MultiHeadAttention
from zoo.layers.attention.registry import register_attention
from zoo.layers.attention.scaled_dot_product import scaled_dot_product_attention

SYNTHESIZER_MODES = ("dense", "random")


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("synthesizer")
class SynthesizerAttention(MultiHeadAttention):
    """Self-attention whose weights are synthesized, not computed from queries and keys.

    Each head mixes its projected values with ``softmax(B)``, the ``(T, T)`` logits from one of
    two synthesizers: ``mode="dense"``, a 2-layer MLP of each token alone (hidden layer shared by
    the heads, ``max_length`` outputs per head, the first ``T`` used); ``mode="random"``,
    ``R[:T, :T]`` of a per-head ``(max_length, max_length)`` matrix, learned or fixed. No query or
    key projections. The logits are dense, so every mask is exact (padding, causal, an
    ``attention_mask``), the weights can be returned and dropped out; memory O(T^2).
    Self-attention only (a separate ``value``/``key`` raises ``ValueError``), and no KV cache.

    Args:
        max_length: the longest sequence; a longer one raises ``ValueError``.
        mode: ``"dense"`` or ``"random"``.
        hidden_dim: width of the dense synthesizer's hidden layer; defaults to the input size.
            Only for ``mode="dense"``.
        trainable_random: whether ``R`` is learned. Only for ``mode="random"``.
        *args, **kwargs: as ``MultiHeadAttention``; ``key_dim`` only sets the default
            ``value_dim``, ``fused_qkv`` changes nothing (the values are the only projection),
            and the score must stay ``"scaled_dot"``.

    Call arguments:
        As ``MultiHeadAttention``, without ``value``, ``key`` and the cache.

    Returns:
        ``(B, T, output_dim)``, and the weights ``(B, N, T, T)`` when
        ``return_attention_scores``.

    Example:
        >>> x = keras.random.normal((2, 6, 16))
        >>> attention = SynthesizerAttention(num_heads=2, key_dim=8, max_length=10)
        >>> tuple(attention(x, use_causal_mask=True).shape)
        (2, 6, 16)

    References:
        Tay et al. 2021, "Synthesizer: Rethinking Self-Attention for Transformer Models",
        ICML, sections 3.1 (dense) and 3.2 (random).
    """

    supports_cache = False

    def __init__(
        self,
        *args,
        max_length=512,
        mode="dense",
        hidden_dim=None,
        trainable_random=True,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        if mode not in SYNTHESIZER_MODES:
            raise ValueError(f"Unknown synthesizer mode {mode!r}; expected one of {SYNTHESIZER_MODES}.")
        if max_length < 1:
            raise ValueError(f"max_length must be >= 1; got {max_length}.")
        if self.score != "scaled_dot":
            raise ValueError(
                f"The synthesizer has no query-key score; score={self.score!r} is not supported."
            )
        if hidden_dim is not None and mode != "dense":
            raise ValueError("hidden_dim is the width of the dense synthesizer; use mode='dense'.")
        if not trainable_random and mode != "random":
            raise ValueError("trainable_random=False fixes the random synthesizer; use mode='random'.")
        self.max_length = max_length
        self.mode = mode
        self.hidden_dim = hidden_dim
        self.trainable_random = trainable_random
        if self.fused_qkv:
            # The base layer made a fused QKV projection; only the values are needed here.
            self.value_dense = self._dense(self.num_heads * self._value_dim, "value")

    def build(self, query_shape, value_shape=None, key_shape=None):
        # Not MultiHeadAttention.build: there are no query or key projections to build.
        model_dim = query_shape[-1]
        self.value_dense.build(query_shape)
        if self.mode == "dense":
            self.synthesizer_hidden = self._dense(
                self.hidden_dim or model_dim, "synthesizer_hidden", activation="relu"
            )
            self.synthesizer_hidden.build(query_shape)
            self.synthesizer_logits = self._dense(
                self.num_heads * self.max_length, "synthesizer_logits"
            )
            self.synthesizer_logits.build(tuple(query_shape[:-1]) + (self.hidden_dim or model_dim,))
        else:
            self.random_logits = self.add_weight(
                name="random_logits",
                shape=(self.num_heads, self.max_length, self.max_length),
                initializer=keras.initializers.RandomNormal(stddev=1.0, seed=self.seed),
                trainable=self.trainable_random,
            )
        self._build_output(query_shape)
        self.built = True

    # ------------------------------------------------------------------ the synthesizers
    def _project_self(self, x):
        """The dense synthesizer's logits ``(B, T, N, L)`` (None in random mode), no keys, and
        the values ``(B, T, N, Hv)``: the hooks of the base layer carry them to the attention."""
        self._check_length(ops.shape(x)[1])
        v = self._split_heads(self.value_dense(x), self._value_dim)
        if self.mode == "random":
            return None, None, v
        logits = self.synthesizer_logits(self.synthesizer_hidden(x))  # (B, T, N L)
        return self._split_heads(logits, self.max_length), None, v

    def _project_kv(self, value, key):
        raise ValueError(
            f"{type(self).__name__} ({self.name!r}) is self-attention only: its weights are "
            "synthesized from the query sequence; call it without `value` and `key`."
        )

    def _check_length(self, length):
        if isinstance(length, int) and length > self.max_length:
            raise ValueError(
                f"{type(self).__name__} ({self.name!r}) has max_length={self.max_length}, but "
                f"got a sequence of length {length}; build it with a larger max_length."
            )

    def synthetic_logits(self, x):
        """The logits ``B``, ``(B, N, T, T)`` (dense) or ``(1, N, T, T)`` (random), unmasked."""
        logits, _, v = self._project_self(x)
        return self._logits(logits, ops.shape(v)[1])

    def _logits(self, logits, length):
        if self.mode == "random":
            return ops.expand_dims(self.random_logits[:, :length, :length], 0)  # (1, N, T, T)
        return ops.transpose(logits[..., :length], (0, 2, 1, 3))  # (B, N, T, T)

    def _attend_with_masks(self, q, k, v, masks, return_weights, training):
        length = ops.shape(v)[1]
        # The shared attention core with zero dot-product scores and the synthetic logits as
        # the score bias: softmax(B) v with its masking, float32 softmax and dropout.
        zeros = ops.zeros_like(v[..., :1])  # (B, T, N, 1)
        return scaled_dot_product_attention(
            zeros,
            zeros,
            v,
            mask=masks.combined(length, length),
            dropout=self.dropout,
            return_weights=return_weights,
            bias=self._logits(q, length),
            training=training,
            seed=self.seed_generator,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_length": self.max_length,
                "mode": self.mode,
                "hidden_dim": self.hidden_dim,
                "trainable_random": self.trainable_random,
            }
        )
        return config
