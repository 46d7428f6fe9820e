"""Performer attention (Choromanski et al. 2021): FAVOR+ positive orthogonal random features."""

import math

import keras
from keras import ops

from zoo.layers.attention.linear import KernelizedAttention, kernel_attention
from zoo.layers.attention.registry import register_attention


def orthogonal_random_features(num_features, dim, seed=None):
    """The ``(m, d)`` random matrix of FAVOR+: orthogonal Gaussian directions.

    The rows come in blocks of ``d`` exactly orthogonal rows (the Q of the QR decomposition
    of a Gaussian matrix, sign-corrected so that it is Haar-distributed); each row is then
    scaled to the norm of an independent ``d``-dimensional Gaussian vector, so that every
    row is marginally ``N(0, I_d)``, as the unbiased estimator needs.

    Args:
        num_features: m, the number of rows (features).
        dim: d, the size of each row (the head size).
        seed: an int or a ``keras.random.SeedGenerator``.

    Returns:
        ``(m, d)`` float32.

    Example:
        >>> w = orthogonal_random_features(8, 4, seed=0)
        >>> tuple(w.shape)
        (8, 4)

    References:
        Choromanski et al. 2021, "Rethinking Attention with Performers", section 2.4.
    """
    if not isinstance(seed, keras.random.SeedGenerator):
        seed = keras.random.SeedGenerator(seed)  # an int seed would repeat the same draw
    blocks = []
    for _ in range(-(-num_features // dim)):
        gaussian = keras.random.normal((dim, dim), seed=seed)
        q, r = ops.qr(gaussian)
        q = q * ops.expand_dims(ops.sign(ops.diagonal(r)), 0)  # Haar: columns signed by diag(R)
        blocks.append(ops.transpose(q))  # (d, d), orthonormal rows
    directions = ops.concatenate(blocks, axis=0)[:num_features]  # (m, d)
    norms = ops.norm(keras.random.normal((num_features, dim), seed=seed), axis=-1)  # chi(d)
    return directions * ops.expand_dims(norms, -1)


def favor_features(x, random_features):
    """Positive random features of the softmax kernel, in log space.

    ``phi(x)_j = exp(w_j . x' - |x'|^2 / 2) / sqrt(m)`` with ``x' = x / d^(1/4)``, so that
    ``E[phi(q) . phi(k)] = exp(q . k / sqrt(d))``. The features are returned as
    ``exp(log_phi - top)`` with ``top`` the maximum over the features of each row, and ``top``
    apart (the max-subtraction that keeps them in (0, 1]). ``1/sqrt(m)`` is left out: it
    cancels in the attention's normalization.

    Args:
        x: ``(B, L, N, d)`` queries or keys.
        random_features: ``(m, d)``, from :func:`orthogonal_random_features`.

    Returns:
        ``phi`` ``(B, L, N, m)`` float32 in (0, 1], and ``top`` ``(B, L, N)``, the log-scale
        of each row (``phi * exp(top)`` is the feature up to ``1/sqrt(m)``).
    """
    x = ops.cast(x, "float32") * (x.shape[-1] ** -0.25)
    w = ops.cast(random_features, "float32")
    logits = ops.einsum("blnd,md->blnm", x, w)  # (B, L, N, m)
    logits = logits - 0.5 * ops.sum(ops.square(x), axis=-1, keepdims=True)
    top = ops.stop_gradient(ops.max(logits, axis=-1))  # (B, L, N)
    return ops.exp(logits - ops.expand_dims(top, -1)), top


def favor_attention(q, k, v, random_features, key_mask=None, causal=False, chunk_size=64):
    """FAVOR+ attention: an unbiased, O(T + S) estimate of ``softmax(q k^T / sqrt(d)) v``.

    Args:
        q: ``(B, T, N, d)``.
        k: ``(B, S, N, d)``.
        v: ``(B, S, N, H)``.
        random_features: ``(m, d)``, from :func:`orthogonal_random_features`.
        key_mask: ``(B, S)`` boolean, True for real keys.
        causal: query ``t`` sees keys ``s <= t`` only (``T == S``).
        chunk_size: the chunk length of the causal computation.

    Returns:
        ``(B, T, N, H)`` in the dtype of ``v``.

    Example:
        >>> x = keras.random.normal((2, 10, 4, 8))
        >>> w = orthogonal_random_features(32, 8, seed=0)
        >>> tuple(favor_attention(x, x, x, w, causal=True).shape)
        (2, 10, 4, 8)

    References:
        Choromanski et al. 2021, "Rethinking Attention with Performers", section 2 and B.1.
    """
    phi_q, phi_k, key_scale = _favor_feature_maps(q, k, random_features)
    return kernel_attention(phi_q, phi_k, v, key_mask, causal, key_scale, chunk_size)


def _favor_feature_maps(q, k, random_features):
    phi_q, _ = favor_features(q, random_features)  # (B, T, N, m); a per-query scale cancels
    phi_k, key_scale = favor_features(k, random_features)  # (B, S, N, m), (B, S, N)
    return phi_q, phi_k, key_scale


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("performer")
class PerformerAttention(KernelizedAttention):
    """Performer attention: softmax attention estimated with FAVOR+ random features.

    ``exp(q . k / sqrt(H))`` becomes ``phi(q) . phi(k)`` with positive orthogonal random
    features (:func:`favor_features`), computed in O(T + S) by
    :func:`zoo.layers.attention.linear.kernel_attention`; the estimate is unbiased, its error
    falling as ``num_features`` grows. Features are float32 with max-subtraction (keys relative
    to their running maximum when causal), so nothing overflows and the future plays no part
    even in rounding. The random matrix, shared by the heads, is a non-trainable weight (a
    ``.keras`` reload gives the same outputs); ``redraw`` draws it anew in training only.
    Masks: as ``LinearAttention`` (padding and causal; no ``attention_mask``, no KV cache).

    Args:
        num_features: m, the number of random features; defaults to ``round(H ln H)``
            (at least H), the paper's ``m = Theta(d log d)``.
        redraw: False (never), True (at every training call), or an int n (at every n-th
            training call).
        chunk_size: the chunk length of the causal computation (default 64).
        *args, **kwargs: as ``MultiHeadAttention``; ``seed`` seeds the random features,
            ``score`` must stay ``"scaled_dot"`` and ``dropout`` is not applied.

    Call arguments:
        As ``MultiHeadAttention``; the weights of ``return_attention_scores`` are
        the implicit ``phi(q) . phi(k)`` ones, normalized, computed densely when asked.

    Returns:
        The same as ``MultiHeadAttention``.

    Example:
        >>> x = keras.random.normal((2, 6, 16))
        >>> attention = PerformerAttention(num_heads=4, key_dim=4, num_features=16, redraw=10)
        >>> tuple(attention(x, use_causal_mask=True).shape)
        (2, 6, 16)

    References:
        Choromanski et al. 2021, "Rethinking Attention with Performers" (FAVOR+, section 2;
        the causal prefix sums, section 2.6 and appendix B.1; redrawing, section 4.2).
    """

    def __init__(self, *args, num_features=None, redraw=False, **kwargs):
        super().__init__(*args, **kwargs)
        if num_features is None:
            num_features = max(self.key_dim, round(self.key_dim * math.log(self.key_dim)))
        if int(num_features) < 1:
            raise ValueError(f"num_features must be >= 1; got {num_features}.")
        if not isinstance(redraw, bool) and (not isinstance(redraw, int) or redraw < 1):
            raise ValueError(
                f"redraw must be False, True or a positive int (redraw every n training calls); "
                f"got {redraw!r}."
            )
        self.num_features = int(num_features)
        self.redraw = redraw
        self._redraw_every = int(redraw)  # True -> 1, False -> 0

    def build(self, query_shape, value_shape=None, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        self.random_features = self.add_weight(
            name="random_features",
            shape=(self.num_features, self.key_dim),
            initializer=self._draw_features,
            trainable=False,
        )
        if self._redraw_every > 1:
            self.training_calls = self.add_weight(
                name="training_calls", shape=(), dtype="int32", initializer="zeros", trainable=False
            )

    def _draw_features(self, shape, dtype=None):
        return orthogonal_random_features(shape[0], shape[1], seed=self.seed_generator)

    def _redraw(self):
        """Draw new random features if this training call is due (every ``redraw`` calls)."""
        fresh = self._draw_features(self.random_features.shape)
        if self._redraw_every == 1:
            self.random_features.assign(fresh)
            return
        calls = self.training_calls + 1
        self.training_calls.assign(calls)
        due = ops.equal(calls % self._redraw_every, 0)
        self.random_features.assign(ops.where(due, fresh, self.random_features))

    def _feature_maps(self, q, k, training):
        if training and self._redraw_every:
            self._redraw()
        return _favor_feature_maps(q, k, self.random_features)

    def get_config(self):
        config = super().get_config()
        config.update({"num_features": self.num_features, "redraw": self.redraw})
        return config
