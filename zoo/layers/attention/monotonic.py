"""Monotonic attention (Raffel et al. 2017): the expected alignment in training, hard monotonic
attention when decoding one step at a time."""

import keras
from keras import ops

from zoo.layers.attention.registry import register_attention
from zoo.layers.attention.stateful import StatefulAttention
from zoo.layers.loops import scan_carries

__all__ = ["MonotonicAttention", "hard_monotonic_alignment", "monotonic_alignment"]

_TINY = 1e-10  # keeps the cumulative product away from 0 (a division follows)


def monotonic_alignment(p):
    """The expected alignment of monotonic attention, step after step over the target.

    For stopping probabilities ``p[t, j]`` (query ``t`` stops at source ``j``), Raffel et al.
    2017's recurrence ``q[t, j] = (1 - p[t, j-1]) q[t, j-1] + alpha[t-1, j]``, ``alpha[t, j] =
    p[t, j] q[t, j]``, from ``alpha[-1] = (1, 0, ..., 0)``, in their parallel form over ``j``:
    ``alpha[t] = p[t] cumprod'(1 - p[t]) cumsum(alpha[t-1] / cumprod'(1 - p[t]))`` (``'``:
    exclusive); a loop over ``t``. Each row sums to at most 1: what is missing is the chance
    that the query stopped nowhere.

    Args:
        p: ``(B, N, T, S)`` float32 stopping probabilities (0 at padding).

    Returns:
        ``(B, N, T, S)`` float32, the expected alignment ``alpha``.

    Example:
        >>> p = ops.convert_to_tensor([[[[0.5, 1.0, 0.0], [0.0, 0.5, 1.0]]]])  # (1, 1, 2, 3)
        >>> ops.convert_to_numpy(monotonic_alignment(p))[0, 0].round(4).tolist()
        [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]
    """
    p = ops.cast(p, "float32")
    source_length = ops.shape(p)[-1]
    first = ops.one_hot(ops.zeros(ops.shape(p)[:2], "int32"), source_length)  # (B, N, S)

    def step(previous, p_t):  # (B, N, S) each
        log_stay = ops.log(ops.clip(1.0 - p_t, _TINY, 1.0))
        stay = ops.exp(ops.cumsum(log_stay, axis=-1) - log_stay)  # exclusive cumprod(1 - p)
        return p_t * stay * ops.cumsum(previous / ops.clip(stay, _TINY, 1.0), axis=-1)

    alignments = scan_carries(step, first, ops.moveaxis(p, 2, 0))  # (T, B, N, S)
    return ops.moveaxis(alignments, 0, 2)


def hard_monotonic_alignment(p, position):
    """Hard monotonic attention of one query: from the previous ``position``, the first
    source position whose stopping probability is at least 0.5, or nothing.

    Args:
        p: ``(B, N, 1, S)`` stopping probabilities of the query.
        position: ``(B, N)`` int, where each head attended at the step before (0 at first).

    Returns:
        ``(B, N, 1, S)`` float32 weights: one-hot at the chosen position, zeros where no
        position from ``position`` on stops (the context is then zero).

    Example:
        >>> p = ops.convert_to_tensor([[[[0.9, 0.2, 0.7, 0.9]]]])
        >>> ops.convert_to_numpy(hard_monotonic_alignment(p, [[1]]))[0, 0, 0].tolist()
        [0.0, 0.0, 1.0, 0.0]
    """
    positions = ops.arange(ops.shape(p)[-1], dtype="int32")  # (S,)
    start = ops.cast(position, "int32")[:, :, None, None]  # (B, N, 1, 1)
    stops = (positions >= start) & (ops.cast(p, "float32") >= 0.5)  # (B, N, 1, S)
    first = ops.argmax(ops.cast(stops, "int32"), axis=-1)  # the first True (0 if none)
    chosen = ops.one_hot(first, ops.shape(p)[-1])  # (B, N, 1, S)
    return chosen * ops.cast(ops.any(stops, axis=-1, keepdims=True), "float32")


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("monotonic")
class MonotonicAttention(StatefulAttention):
    """Cross attention that reads the source left to right and never goes back.

    Each head's stopping probability at a source position is ``p = sigmoid(scaled dot product
    + r)``, ``r`` a learned bias (0 at padding). Over a whole target the weights are the
    expected alignment (:func:`monotonic_alignment`, differentiable; training adds Gaussian
    ``energy_noise`` to push ``p`` towards 0 or 1); step by step they are hard: the first
    position from the last stop with ``p >= 0.5`` (:func:`hard_monotonic_alignment`). The state
    is each head's position, ``(B, N)``.

    Args:
        num_heads, key_dim, ...: those of :class:`MultiHeadAttention` (its ``score`` and
            attention dropout are not used).
        initial_bias: the bias ``r``'s first value (Raffel et al. used -4 on long speech
            inputs; a negative value makes the early heads read on).
        energy_noise: the standard deviation of the noise on the scores in training.

    Call arguments:
        those of :class:`MultiHeadAttention`, and
        state: ``(B, N)`` int positions of the step before (one query, hard attention);
            None: the expected alignment over every query.

    Example:
        >>> layer = MonotonicAttention(num_heads=2, key_dim=4)
        >>> query, memory = keras.random.normal((2, 3, 8)), keras.random.normal((2, 5, 8))
        >>> _, weights = layer(query, memory, return_attention_scores=True)
        >>> bool(ops.all(ops.sum(weights, axis=-1) <= 1.0 + 1e-5))
        True

    References:
        Raffel et al. 2017, "Online and Linear-Time Attention by Enforcing Monotonic
        Alignments".
    """

    def __init__(self, num_heads, key_dim, initial_bias=-1.0, energy_noise=1.0, **kwargs):
        super().__init__(num_heads, key_dim, **kwargs)
        self.initial_bias = initial_bias
        self.energy_noise = energy_noise

    def build(self, query_shape, value_shape=None, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        self.energy_bias = self.add_weight(
            name="energy_bias", shape=(self.num_heads,),
            initializer=keras.initializers.Constant(self.initial_bias),
        )  # fmt: skip

    def initial_state(self, batch_size, source_length):
        return ops.zeros((batch_size, self.num_heads), "int32")

    def next_state(self, state, weights):
        """Where each head attended at this step, or where it was if it attended nowhere."""
        weights = weights[:, :, 0, :]  # (B, N, S)
        attended = ops.any(weights > 0, axis=-1)
        return ops.where(attended, ops.cast(ops.argmax(weights, axis=-1), "int32"), state)

    def stopping_probabilities(self, q, k, mask, training=None):
        """``(B, N, T, S)`` float32 ``sigmoid(q . k / sqrt(H) + r)``, 0 where ``mask`` is False."""
        scores = ops.einsum("btnh,bsnh->bnts", ops.cast(q, "float32"), ops.cast(k, "float32"))
        scores = scores / ops.sqrt(float(self.key_dim))
        scores = scores + ops.cast(self.energy_bias, "float32")[:, None, None]
        if training and self.energy_noise:
            noise = keras.random.normal(ops.shape(scores), seed=self.seed_generator)
            scores = scores + self.energy_noise * noise
        p = ops.sigmoid(scores)
        return p if mask is None else ops.where(ops.expand_dims(mask, 1), p, 0.0)

    def _attend(self, q, k, v, mask, offset, return_weights, training):
        p = self.stopping_probabilities(q, k, mask, training)
        if self.state is None:
            weights = monotonic_alignment(p)
        else:
            weights = hard_monotonic_alignment(p, self.state)
        weights = ops.cast(weights, v.dtype)
        attended = ops.einsum("bnts,bsnh->btnh", weights, v)
        return (attended, weights) if return_weights else attended

    def get_config(self):
        return {
            **super().get_config(),
            "initial_bias": self.initial_bias,
            "energy_noise": self.energy_noise,
        }
