"""Clustered (routing) attention (Roy et al. 2021): attention within online k-means clusters."""

import math

import keras
from keras import ops

from zoo.layers.attention.local import pad_to_multiple
from zoo.layers.attention.multi_head import MultiHeadAttention
from zoo.layers.attention.recomputed import grouped_attention
from zoo.layers.attention.registry import register_attention
from zoo.layers.dropout import dropout
from zoo.layers.masking import mask_value


def unit_vectors(x, axis=-1):
    """``x / |x|`` along ``axis`` (0 stays 0)."""
    return x * ops.rsqrt(ops.maximum(ops.sum(ops.square(x), axis=axis, keepdims=True), 1e-12))


class SelfAttentionOnly:
    """Mixin of the variants that group the tokens of one sequence as queries and keys together.

    Self-attention projects queries, keys and values from ``x`` as ``MultiHeadAttention``
    does; a separate ``value`` or ``key`` (cross attention) raises ``ValueError``.
    """

    def _project_self(self, x):
        if self.fused_qkv:
            return super()._project_self(x)
        k = self._split_heads(self.key_dense(x), self.key_dim)
        v = self._split_heads(self.value_dense(x), self._value_dim)
        return self._project_query(x), k, v

    def _project_kv(self, value, key):
        raise ValueError(
            f"{type(self).__name__} ({self.name!r}) is self-attention only: it groups the "
            "tokens of one sequence as queries and keys together; call it without `value` "
            "and `key`."
        )


def gather_positions(x, order):
    """``x[b, n, order[b, n, t]]``: ``(B, N, T, ...)`` reordered along T by int ``(B, N, T)``.

    One gather of rows from the flattened ``(B N T, ...)`` tensor, with one index per row:
    ``take_along_axis`` would broadcast the index over the trailing axes, and its gradient
    keeps an int64 coordinate for every element (five such tensors were 40 of the 113 MiB
    of a training step at T=4096).
    """
    shape = ops.shape(x)
    batch, heads, length = shape[0], x.shape[1], shape[2]
    offsets = ops.reshape(ops.arange(batch * heads, dtype="int32") * length, (batch, heads, 1))
    index = ops.reshape(ops.cast(order, "int32") + offsets, (-1,))
    rows = ops.take(ops.reshape(x, (-1,) + tuple(x.shape[3:])), index, axis=0)
    return ops.reshape(rows, (batch, heads, length) + tuple(x.shape[3:]))


def permute_positions(x, order):
    """:func:`gather_positions` by a permutation ``order``, whose gradient is the inverse
    permutation: a gather again, where a gather's own gradient scatters into a zeroed copy,
    which costs much of a training step's memory."""
    inverse = ops.argsort(order, axis=-1)

    @ops.custom_gradient
    def permute(x):
        def backward(*args, upstream=None):
            return gather_positions(args[0] if upstream is None else upstream, inverse)

        return gather_positions(x, order), backward

    return permute(x)


def dot_product_scale(layer):
    """The score scale of a variant with dot-product scores; other scores raise ``ValueError``."""
    if layer.score not in ("scaled_dot", "dot"):
        raise ValueError(
            f"{type(layer).__name__} uses dot-product scores; score={layer.score!r} is not "
            "supported (use 'scaled_dot' or 'dot')."
        )
    return 1.0 / math.sqrt(layer.key_dim) if layer.score == "scaled_dot" else 1.0


def check_mask_parts(layer, masks, return_weights, causal_reason=None):
    """Raise a clear ``ValueError`` for the mask parts a blocked variant cannot honour."""
    name = f"{type(layer).__name__} ({layer.name!r})"
    if masks.attention is not None:
        raise ValueError(
            f"{name} supports padding masks only, not an arbitrary (B, T, S) attention_mask: "
            "its attention pattern is made by the layer itself."
        )
    if masks.causal and causal_reason is not None:
        raise ValueError(f"{name} does not support use_causal_mask: {causal_reason}")
    if return_weights:
        raise ValueError(
            f"{name} never forms the (B, N, T, S) attention weights; "
            "return_attention_scores is not supported."
        )


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("clustered")
class ClusteredAttention(SelfAttentionOnly, MultiHeadAttention):
    """Routing attention: queries and keys are routed to k-means clusters, attention stays inside.

    Each head keeps ``C = num_clusters`` unit-length centroids (non-trainable); a query or key
    goes to its nearest centroid's cluster. Balanced as in the Routing Transformer and the
    Reformer: per head, queries and keys are sorted by (cluster, position) and cut into chunks
    of ``w = chunk_size``; query ``i`` attends key ``j`` when ``j == i`` (no row is empty) or
    both share cluster and chunk. Scores take O(T w), never T x T; ``w = T / C`` is the
    paper's setting. In training the centroids follow an EMA (``centroid_decay``) of the unit
    queries and keys routed to them, after that call's routing; the routing has no gradient.

    Masks: padding only; padded keys sort after every real token. ``use_causal_mask`` raises
    (a token's chunk depends on later tokens), as do an ``attention_mask`` and
    ``return_attention_scores``. Attention dropout applies to the weights. Self-attention only;
    no KV cache.

    Args:
        num_clusters: C, the number of centroids per head.
        chunk_size: w, the number of queries (and keys) in one chunk of the sorted order.
        centroid_decay: the EMA decay of the centroids, in ``[0, 1)``.
        *args, **kwargs: as ``MultiHeadAttention``; the score must be ``"scaled_dot"`` or ``"dot"``.

    Call arguments:
        As ``MultiHeadAttention``, without ``value``, ``key``, ``attention_mask``,
        ``use_causal_mask`` and the cache.

    Returns:
        ``(B, T, output_dim)``. Outputs at padded positions are meaningless.

    Example:
        >>> x = keras.random.normal((2, 10, 16))
        >>> attention = ClusteredAttention(num_heads=2, key_dim=8, num_clusters=2, chunk_size=4)
        >>> tuple(attention(x).shape)
        (2, 10, 16)

    References:
        Roy et al. 2021, "Efficient Content-Based Sparse Attention with Routing Transformers",
        TACL, sections 4.1 (online k-means) and 4.2 (routing attention).
        Kitaev et al. 2020, "Reformer: The Efficient Transformer", section 2 (sorted chunks).
    """

    supports_cache = False

    def __init__(self, *args, num_clusters=4, chunk_size=32, centroid_decay=0.999, **kwargs):
        super().__init__(*args, **kwargs)
        dot_product_scale(self)
        if num_clusters < 1 or chunk_size < 1:
            raise ValueError(
                f"num_clusters and chunk_size must be >= 1; got {num_clusters} and {chunk_size}."
            )
        if not 0.0 <= centroid_decay < 1.0:
            raise ValueError(f"centroid_decay must be in [0, 1); got {centroid_decay}.")
        self.num_clusters = num_clusters
        self.chunk_size = chunk_size
        self.centroid_decay = centroid_decay

    def build(self, query_shape, value_shape=None, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        self.centroids = self.add_weight(
            name="centroids",
            shape=(self.num_heads, self.num_clusters, self.key_dim),
            initializer=keras.initializers.RandomNormal(stddev=1.0, seed=self.seed),
            trainable=False,
            autocast=False,  # the routing runs in float32 under mixed precision too
        )

    # ------------------------------------------------------------------ routing
    def route(self, x):
        """The cluster of each unit vector ``x / |x|``: ``(B, N, T, H)`` -> int32 ``(B, N, T)``."""
        x = unit_vectors(ops.stop_gradient(ops.cast(x, "float32")))
        centroids = unit_vectors(ops.convert_to_tensor(self.centroids))  # (N, C, H)
        similarity = ops.einsum("bnth,nch->bntc", x, centroids)
        return ops.cast(ops.argmax(similarity, axis=-1), "int32")

    def _sorted_order(self, cluster, real):
        """Positions sorted by (cluster, position), padded tokens last: ``(B, N, T)`` int32."""
        length = ops.shape(cluster)[-1]
        cluster = ops.where(real, cluster, self.num_clusters)  # padding: one cluster after all
        code = cluster * length + ops.arange(length, dtype="int32")  # unique, so a strict order
        return ops.cast(ops.argsort(code, axis=-1), "int32")

    def _update_centroids(self, q, k, q_cluster, k_cluster, real):
        """Move each centroid towards the mean of the unit queries and keys routed to it."""
        real = ops.cast(ops.expand_dims(real, -1), "float32")  # (B, 1, T, 1)
        sums, counts = 0.0, 0.0
        for x, cluster in ((q, q_cluster), (k, k_cluster)):
            members = ops.one_hot(cluster, self.num_clusters, dtype="float32") * real  # (B,N,T,C)
            x = unit_vectors(ops.stop_gradient(ops.cast(x, "float32")))
            sums = sums + ops.einsum("bntc,bnth->nch", members, x)  # (N, C, H)
            counts = counts + ops.sum(members, axis=(0, 2))  # (N, C)
        counts = ops.expand_dims(counts, -1)  # (N, C, 1)
        means = sums / ops.maximum(counts, 1.0)
        centroids = ops.convert_to_tensor(self.centroids)  # (N, C, H)
        decayed = self.centroid_decay * unit_vectors(centroids)
        new = unit_vectors(decayed + (1.0 - self.centroid_decay) * means)
        self.centroids.assign(ops.where(counts > 0, new, centroids))

    # ------------------------------------------------------------------ attention
    def _attend_with_masks(self, q, k, v, masks, return_weights, training):
        check_mask_parts(
            self,
            masks,
            return_weights,
            causal_reason="the sorted order of the whole sequence decides each token's chunk, "
            "so later tokens would change which earlier keys a query sees.",
        )
        w = self.chunk_size
        batch, length = ops.shape(q)[0], ops.shape(q)[1]
        real = masks.padding
        if real is None:
            real = ops.ones((batch, length), "bool")
        real = ops.expand_dims(pad_to_multiple(ops.cast(real, "bool"), w, False), 1)  # (B,1,T')
        q, k, v = (ops.transpose(pad_to_multiple(x, w), (0, 2, 1, 3)) for x in (q, k, v))
        # q, k: (B, N, T', H); v: (B, N, T', Hv), with T' a multiple of w.

        q_cluster, k_cluster = self.route(q), self.route(k)  # (B, N, T')
        q_order = self._sorted_order(q_cluster, real)  # (B, N, T')
        k_order = self._sorted_order(k_cluster, real)
        if training:
            self._update_centroids(q, k, q_cluster, k_cluster, real)

        def chunks(x, order):
            """``x`` in the sorted ``order``, cut into chunks: ``(B, N, T'/w, w, ...)``."""
            floats = "float" in keras.backend.standardize_dtype(x.dtype)  # differentiable
            x = permute_positions(x, order) if floats else gather_positions(x, order)
            return ops.reshape(x, (batch, self.num_heads, -1, w) + tuple(x.shape[3:]))

        positions = ops.broadcast_to(ops.arange(ops.shape(q)[2], dtype="int32"), ops.shape(q_order))
        q_sorted = chunks(q, q_order)  # (B, N, C', w, H)
        q_position, k_position = chunks(positions, q_order), chunks(positions, k_order)
        allowed = ops.logical_and(
            ops.equal(chunks(q_cluster, q_order)[..., None], chunks(k_cluster, k_order)[..., None, :]),
            ops.not_equal(q_position[..., None], k_position[..., None, :]),  # own key: below
        )
        key_real = chunks(ops.broadcast_to(real, ops.shape(k_order)), k_order)  # (B, N, C', w)
        allowed = ops.logical_and(allowed, key_real[..., None, :])  # (B, N, C', w, w)

        scale = dot_product_scale(self)
        unsort = ops.argsort(q_order, axis=-1)  # (B, N, T')

        def unsorted(x):  # (B, N, C', w, ...) in q_order -> (B, N, T', ...)
            return permute_positions(ops.reshape(
                x, (batch, self.num_heads, -1) + tuple(x.shape[4:])), unsort)  # fmt: skip

        if not (self.dropout and training):  # O(T) memory in training: recomputed steps
            # The chunk's keys, then each query's own key: two parts of one softmax, joined
            # by their log-normalisers where the own key needs no gather (unsorted).
            out, lse = grouped_attention(*(ops.cast(x, "float32") for x in (
                q_sorted * scale, chunks(k, k_order), chunks(v, k_order))), allowed)
            out, lse = unsorted(out), ops.expand_dims(unsorted(lse), -1)  # (B, N, T', .)
            own = ops.cast(ops.sum(q * k, axis=-1, keepdims=True), "float32") * scale
            total = ops.logaddexp(lse, own)
            out = out * ops.exp(lse - total) + ops.cast(v, "float32") * ops.exp(own - total)
            return ops.transpose(ops.cast(out, v.dtype), (0, 2, 1, 3))[:, :length]
        # Dropout needs the weights whole.
        own_scores = ops.sum(q_sorted * chunks(k, q_order), axis=-1, keepdims=True)
        scores = ops.einsum("bncqh,bnckh->bncqk", q_sorted, chunks(k, k_order))
        scores = ops.where(allowed, ops.cast(scores, "float32") * scale, mask_value("float32"))
        scores = ops.concatenate([scores, ops.cast(own_scores, "float32") * scale], axis=-1)
        weights = ops.softmax(scores, axis=-1)  # (B, N, C', w, w + 1)
        weights = dropout(weights, self.dropout, seed=self.seed_generator)
        weights = ops.cast(weights, v.dtype)
        out = ops.einsum("bncqk,bnckh->bncqh", weights[..., :w], chunks(v, k_order))
        out = out + weights[..., w:] * chunks(v, q_order)  # (B, N, C', w, Hv)
        return ops.transpose(unsorted(out), (0, 2, 1, 3))[:, :length]  # (B, T, N, Hv)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_clusters": self.num_clusters,
                "chunk_size": self.chunk_size,
                "centroid_decay": self.centroid_decay,
            }
        )
        return config
