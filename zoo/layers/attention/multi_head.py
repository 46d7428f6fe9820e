"""Multi-head attention: self and cross attention, masks, a fused QKV projection, a KV cache."""

import math

import keras
from keras import ops

from zoo.layers.attention.registry import register_attention
from zoo.layers.attention.scaled_dot_product import SCORE_FUNCTIONS, scaled_dot_product_attention
from zoo.layers.masking import AttentionMasks, implicit_mask
from zoo.layers.shapes import leading_axes


def write_cache(cache, offset, new):
    """A self-attention cache with positions ``offset .. offset + T - 1`` of each example set
    to the new keys and values.

    Args:
        cache: ``(keys, values)``, each ``(B, S_max, N, H)``.
        offset: int or scalar int tensor, the position of the first new one.
        new: ``(keys, values)``, each ``(B, T, N, H)``.

    Returns:
        The ``(keys, values)`` pair written.

    Why a scatter and not ``ops.slice_update``: in TensorFlow's graph mode (the plain serving
    signatures) a slice update is an XLA op compiled on demand, a large share of a greedy step's
    time, where a scatter is a core kernel (``benchmarks/studies/serving_profile.py``); under XLA
    both write in place. The caches are scattered into as ``(B * S_max, N, H)`` rows, so that the
    indices are one column, computed once for keys and values.
    """
    batch, steps, length = ops.shape(new[0])[0], ops.shape(new[0])[1], ops.shape(cache[0])[1]
    rows = ops.repeat(ops.arange(batch, dtype="int32") * length + offset, steps)  # (B*T,)
    rows = ops.expand_dims(rows + ops.tile(ops.arange(steps, dtype="int32"), [batch]), 1)
    written = []
    for old, update in zip(cache, new):
        heads = tuple(old.shape[2:])
        update = ops.reshape(ops.cast(update, old.dtype), (-1,) + heads)  # (B*T, N, H)
        flat = ops.scatter_update(ops.reshape(old, (-1,) + heads), rows, update)
        written.append(ops.reshape(flat, (-1, length) + heads))
    return tuple(written)


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("mha")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention with masks and a fixed-size, XLA-safe KV cache.

    Every attention variant in zoo subclasses this layer and keeps its call signature, so
    the blocks can swap variants by name. A variant overrides one of four hooks:
    ``_transform_qk`` (rotary), ``_score_bias`` (ALiBi), ``_attend`` (relative positions: a
    combined ``(B, T, S)`` mask) or ``_attend_with_masks`` (the efficient variants: the masks
    as parts, so that nothing of size T x S is made). A variant without incremental decoding
    sets ``supports_cache = False``.

    Args:
        num_heads: N, the number of heads.
        key_dim: H, the size of each query/key head.
        value_dim: the size of each value head; defaults to ``key_dim``.
        dropout: dropout rate on the attention weights.
        use_bias: whether the projections have biases.
        output_dim: size of the output; defaults to the query's last dimension.
        score: ``"scaled_dot"`` (default), ``"dot"``, ``"cosine"`` or ``"additive"``.
            ``cosine`` learns one temperature per head, started at ``sqrt(key_dim)``;
            ``additive`` learns the vector ``w`` of ``w . tanh(q + k)``.
        fused_qkv: project queries, keys and values with one matrix. Only for
            self-attention: ``value`` must then be None or the query itself.
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the projection biases.
        seed: seed of the attention dropout.

    Call arguments:
        query: ``(B, T, Dq)``.
        value: ``(B, S, Dv)``; None (or ``query``) for self-attention.
        key: ``(B, S, Dk)``; defaults to ``value``.
        padding_mask: ``(B, S)`` boolean, True for real keys.
        attention_mask: ``(B, T, S)`` boolean, True where query t may attend key s.
        use_causal_mask: mask out keys after each query (decoder self-attention).
        cache: a KV cache, the pair ``(keys, values)`` of ``(B, S_max, N, H)`` tensors
            (apart, so that reading them copies nothing). With ``cache_index`` it is a
            self-attention cache: the new keys and values of ``query`` are written at
            ``cache_index`` and the queries attend causally over the filled part. Without
            ``cache_index`` it holds precomputed cross-attention keys and values
            (:meth:`compute_cache`), used as they are.
        cache_index: int or scalar int tensor, the position of the first query in a
            self-attention cache.
        query_position: int or scalar int tensor, the position of the first query when
            attending over a precomputed cross-attention cache (decoding step by step).
            Only position-aware variants (rotary, ALiBi, relative) use it; 0 when None.
        return_attention_scores: also return the weights ``(B, N, T, S)``.
        training: whether dropout is active.

    Returns:
        ``output`` ``(B, T, output_dim)``, followed by the attention weights when
        ``return_attention_scores`` and by the updated cache when ``cache`` is given.

    Example:
        >>> x = keras.random.normal((2, 6, 16))
        >>> mha = MultiHeadAttention(num_heads=4, key_dim=4)
        >>> tuple(mha(x, use_causal_mask=True).shape)
        (2, 6, 16)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3.2.2.
    """

    # A variant that cannot attend incrementally sets this to False: passing a cache then raises.
    supports_cache = True

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        output_dim=None,
        score="scaled_dot",
        fused_qkv=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if score not in SCORE_FUNCTIONS:
            raise ValueError(f"Unknown score {score!r}; expected one of {SCORE_FUNCTIONS}.")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.dropout = dropout
        self.use_bias = use_bias
        self.output_dim = output_dim
        self.score = score
        self.fused_qkv = fused_qkv
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        self.supports_masking = True
        self._value_dim = value_dim or key_dim
        self.seed_generator = keras.random.SeedGenerator(seed)

        n, hk, hv = num_heads, key_dim, self._value_dim
        if fused_qkv:
            self.qkv_dense = self._dense(n * (2 * hk + hv), "qkv")
        else:
            self.query_dense = self._dense(n * hk, "query")
            self.key_dense = self._dense(n * hk, "key")
            self.value_dense = self._dense(n * hv, "value")
        self.output_dense = None  # made in build(), once the query size is known

    def _dense(self, units, name, activation=None):
        """A projection with the layer's bias, initializers and dtype policy."""
        return keras.layers.Dense(
            units,
            activation=activation,
            use_bias=self.use_bias,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name=name,
        )

    def _build_output(self, query_shape):
        """Make and build the output projection, from the N heads' values to the output size."""
        self.output_dense = self._dense(self.output_dim or query_shape[-1], "output")
        self.output_dense.build(tuple(query_shape[:-1]) + (self.num_heads * self._value_dim,))

    def build(self, query_shape, value_shape=None, key_shape=None):
        value_shape = value_shape or query_shape
        key_shape = key_shape or value_shape
        if self.fused_qkv:
            self.qkv_dense.build(query_shape)
        else:
            self.query_dense.build(query_shape)
            self.key_dense.build(key_shape)
            self.value_dense.build(value_shape)
        self._build_output(query_shape)
        if self.score == "cosine":
            self.cosine_temperature = self.add_weight(
                name="cosine_temperature",
                shape=(self.num_heads, 1, 1),
                initializer=keras.initializers.Constant(math.sqrt(self.key_dim)),
            )
        if self.score == "additive":
            self.additive_weight = self.add_weight(
                name="additive_weight",
                shape=(self.num_heads, self.key_dim),
                initializer="glorot_uniform",
            )
        self.built = True

    # ------------------------------------------------------------------ projections
    def _split_heads(self, x, head_dim):
        # (B, T, N*H) -> (B, T, N, H)
        return ops.reshape(x, leading_axes(x) + (self.num_heads, head_dim))

    def _dense_heads(self, dense, x, head_dims):
        """``dense`` on ``x`` (B, T, D), split into one ``(B, T, N, H)`` per size in
        ``head_dims``. The dense runs on ``(B*T, D)``: Keras's Dense on rank 3 is a tensordot,
        a dozen shape ops in TensorFlow's graph mode."""
        rows = leading_axes(x)
        y = dense(ops.reshape(x, (-1, x.shape[-1])))  # (B*T, N * sum(head_dims))
        heads, start = [], 0
        for head_dim in head_dims:
            part = y if len(head_dims) == 1 else y[:, start : start + self.num_heads * head_dim]
            heads.append(ops.reshape(part, rows + (self.num_heads, head_dim)))
            start += self.num_heads * head_dim
        return heads

    def _project_query(self, query):
        return self._dense_heads(self.query_dense, query, (self.key_dim,))[0]

    def _project_kv(self, value, key):
        (k,) = self._dense_heads(self.key_dense, key, (self.key_dim,))
        (v,) = self._dense_heads(self.value_dense, value, (self._value_dim,))
        return k, v

    def _project_self(self, x):
        """Queries, keys and values of self-attention, with one matmul when fused."""
        if not self.fused_qkv:
            return (self._project_query(x),) + self._project_kv(x, x)
        hk = self.key_dim
        return tuple(self._dense_heads(self.qkv_dense, x, (hk, hk, self._value_dim)))

    # ------------------------------------------------------------------ hooks for variants
    def _transform_qk(self, q, k, offset):
        """Position-dependent transform of new queries/keys (rotary); identity here.

        ``offset`` is the position of the first query (the cache index when decoding);
        ``k`` is None when the keys come from a precomputed cross-attention cache.
        """
        return q, k

    def _score_bias(self, query_length, key_length, offset):
        """A bias added to the scores, broadcastable to (B, N, T, S) (ALiBi); None here."""
        return None

    def _attend_with_masks(self, q, k, v, masks, return_weights, training):
        """Attention given the masks as parts (a ``zoo.layers.masking.AttentionMasks``).

        Here they are combined into one ``(B, T, S)`` mask for :meth:`_attend`. Efficient
        variants override this hook instead, to avoid any T x S tensor.
        """
        mask = masks.combined(ops.shape(q)[1], ops.shape(k)[1])
        return self._attend(q, k, v, mask, masks.query_offset, return_weights, training)

    def _attend(self, q, k, v, mask, offset, return_weights, training):
        """Attention of ``q`` (B, T, N, H) over ``k``, ``v`` (B, S, N, H) with a (B, T, S) mask."""
        return scaled_dot_product_attention(
            q,
            k,
            v,
            mask=mask,
            dropout=self.dropout,
            return_weights=return_weights,
            score=self.score,
            scale=self._score_scale(),
            bias=self._score_bias(ops.shape(q)[1], ops.shape(k)[1], offset),
            additive_weight=getattr(self, "additive_weight", None),
            training=training,
            seed=self.seed_generator,
        )

    def _score_scale(self):
        return self.cosine_temperature if self.score == "cosine" else None

    # ------------------------------------------------------------------ caches
    def init_cache(self, batch_size, max_length, dtype=None):
        """An empty self-attention cache: keys and values, each ``(B, max_length, N, H)``."""
        self._check_cacheable()
        shape = (batch_size, max_length, self.num_heads, self.key_dim)
        dtype = dtype or self.compute_dtype
        return ops.zeros(shape, dtype=dtype), ops.zeros(shape, dtype=dtype)

    def compute_cache(self, value, key=None):
        """Precompute cross-attention keys and values once, each ``(B, S, N, H)``."""
        self._check_cacheable()
        if self.fused_qkv:
            raise ValueError("A fused-QKV (self-attention) layer has no cross-attention cache.")
        return self._project_kv(value, value if key is None else key)

    def _check_cacheable(self):
        if not self.supports_cache:
            raise ValueError(
                f"{type(self).__name__} ({self.name!r}) has no KV cache; use it in encoders, "
                "or decode with full-sequence passes."
            )
        if self._value_dim != self.key_dim:
            raise ValueError(
                f"The KV cache keeps keys and values of one size, so it needs "
                f"value_dim == key_dim; got {self._value_dim} and {self.key_dim}."
            )

    # ------------------------------------------------------------------ call
    def call(
        self,
        query,
        value=None,
        key=None,
        padding_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        cache=None,
        cache_index=None,
        query_position=None,
        return_attention_scores=False,
        training=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
    ):
        self_attention = value is None or value is query
        if self.fused_qkv and not self_attention:
            raise ValueError(
                f"Layer {self.name!r} has fused_qkv=True, which is for self-attention only, "
                "but was called with a separate `value`. Use fused_qkv=False for cross attention."
            )
        if query_mask is None:
            query_mask = implicit_mask(query)
        if padding_mask is None and not self_attention and cache is None:
            padding_mask = key_mask if key_mask is not None else value_mask
            if padding_mask is None:
                padding_mask = implicit_mask(key if key is not None else value)
        elif padding_mask is None and self_attention and cache is None:
            padding_mask = query_mask  # self-attention: the keys are the queries

        if query_position is not None and (cache is None or cache_index is not None):
            raise ValueError(
                "`query_position` is for attention over a precomputed cross-attention cache "
                "(`cache` without `cache_index`); with a self-attention cache use `cache_index`."
            )
        if cache is not None:
            self._check_cacheable()
        offset = 0
        if cache is not None and cache_index is not None:
            # Incremental self-attention: write the new keys/values into the cache.
            q, k_new, v_new = self._project_self(query)
            offset = ops.cast(cache_index, "int32")
            q, k_new = self._transform_qk(q, k_new, offset)
            k, v = write_cache(cache, offset, (k_new, v_new))
            cache = (k, v)
            use_causal_mask = True  # slots after the current step are empty
        elif cache is not None:
            # Cross attention with keys/values precomputed by compute_cache().
            if query_position is not None:
                offset = ops.cast(query_position, "int32")
            q, _ = self._transform_qk(self._project_query(query), None, offset)
            k, v = cache
        elif self_attention:
            q, k, v = self._project_self(query)
            q, k = self._transform_qk(q, k, 0)
        else:
            q = self._project_query(query)
            k, v = self._project_kv(value, value if key is None else key)
            q, k = self._transform_qk(q, k, 0)

        masks = AttentionMasks(
            padding=padding_mask,
            attention=attention_mask,
            query=query_mask,
            causal=use_causal_mask,
            query_offset=offset,
        )
        result = self._attend_with_masks(q, k, v, masks, return_attention_scores, training)
        attended, weights = result if return_attention_scores else (result, None)
        output = self.output_dense(
            ops.reshape(attended, (-1, self.num_heads * self._value_dim))
        )  # (B*T, output_dim), a plain matmul (see _dense_heads)
        output = ops.reshape(output, leading_axes(attended)[:-1] + (output.shape[-1],))
        outputs = (output,)
        if return_attention_scores:
            outputs += (weights,)
        if cache is not None:
            outputs += (cache,)
        return outputs[0] if len(outputs) == 1 else outputs

    def compute_mask(self, query, previous_mask=None):
        return previous_mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "output_dim": self.output_dim,
                "score": self.score,
                "fused_qkv": self.fused_qkv,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "seed": self.seed,
            }
        )
        return config
