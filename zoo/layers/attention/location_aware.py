"""Location-aware cross attention: the scores also see where the attention has been."""

import keras
from keras import ops

from zoo.layers.attention.registry import register_attention
from zoo.layers.attention.stateful import StatefulAttention

__all__ = ["LocationAwareAttention"]


@keras.saving.register_keras_serializable(package="zoo")
@register_attention("location_aware")
class LocationAwareAttention(StatefulAttention):
    """Cross attention whose scores add features of the attention's cumulative weights.

    Chorowski et al. 2015's location-aware score on a scaled dot product: for query ``t`` the
    summed weights of the steps before it (``state``, ``(B, T, S)``) go through a convolution
    over the source (``location_filters`` of width ``location_kernel``), a tanh and a projection
    to one bias per head, added to the scores, so the attention can learn to move on past what
    it has read. A :class:`StatefulAttention`: over a whole target the state comes from a first
    pass (:meth:`sequence_state`); step by step it is the sum so far, in the search's caches
    (:meth:`initial_state`, :meth:`next_state`). Without a state it attends as at the first step.

    Args:
        num_heads, key_dim, ...: those of :class:`MultiHeadAttention`.
        location_filters: F, the convolution's filters.
        location_kernel: its width over the source positions (odd: centred).

    Call arguments:
        those of :class:`MultiHeadAttention`, and
        state: ``(B, T, S)`` float, the attention weights of the steps before each query
            (the mean over heads), summed, or ``(B, S)`` for one query; None: zeros.

    Example:
        >>> layer = LocationAwareAttention(num_heads=2, key_dim=4)
        >>> query, memory = keras.random.normal((2, 3, 8)), keras.random.normal((2, 5, 8))
        >>> _, weights = layer(query, memory, return_attention_scores=True)
        >>> state = layer.sequence_state(weights)  # (B, T, S): 0 at the first step
        >>> tuple(layer(query, memory, state=state).shape)
        (2, 3, 8)

    References:
        Chorowski et al. 2015, "Attention-Based Models for Speech Recognition", section 2.2.
    """

    needs_first_pass = True

    def __init__(self, num_heads, key_dim, location_filters=8, location_kernel=15, **kwargs):
        super().__init__(num_heads, key_dim, **kwargs)
        if not isinstance(location_kernel, int) or location_kernel < 1 or location_kernel % 2 == 0:
            raise ValueError(f"location_kernel must be a positive odd int, got {location_kernel!r}.")
        self.location_filters = location_filters
        self.location_kernel = location_kernel
        self.location_conv = keras.layers.Conv1D(
            location_filters, location_kernel, padding="same", use_bias=False,
            dtype=self.dtype_policy, name="location_conv",
        )  # fmt: skip
        self.location_dense = self._dense(num_heads, "location_dense", activation=None)

    def build(self, query_shape, value_shape=None, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        self.location_conv.build((None, None, 1))
        self.location_dense.build((None, self.location_filters))

    # ------------------------------------------------------------------ the state
    def initial_state(self, batch_size, source_length):
        """The state before the first step: ``(B, S)`` zeros."""
        return ops.zeros((batch_size, source_length), "float32")

    def next_state(self, state, weights):
        """The state after one step: ``state`` ``(B, S)`` plus its weights ``(B, N, 1, S)``
        (the mean over heads)."""
        return state + ops.mean(ops.cast(weights[:, :, 0, :], "float32"), axis=1)

    def sequence_state(self, weights):
        """The state of each query of a whole target, from a pass's weights ``(B, N, T, S)``:
        the sum of the steps before it, ``(B, T, S)``, with no gradient."""
        weights = ops.mean(ops.cast(ops.stop_gradient(weights), "float32"), axis=1)  # (B, T, S)
        return ops.cumsum(weights, axis=1) - weights  # the steps before t

    def location_bias(self, state):
        """The ``(B, N, T, S)`` bias on the scores, from the state ``(B, T, S)``."""
        shape = tuple(ops.shape(state))  # (B, T, S)
        features = self.location_conv(ops.reshape(ops.cast(state, self.compute_dtype),
                                                  (-1, shape[2], 1)))  # (B T, S, F)  # fmt: skip
        bias = self.location_dense(ops.reshape(ops.tanh(features), (-1, self.location_filters)))
        bias = ops.reshape(bias, shape + (self.num_heads,))  # (B, T, S, N)
        return ops.transpose(bias, (0, 3, 1, 2))

    def _score_bias(self, query_length, key_length, offset):
        if self.state is None:
            return None
        state = self.state if len(self.state.shape) == 3 else self.state[:, None, :]
        return self.location_bias(state)

    def get_config(self):
        return {
            **super().get_config(),
            "location_filters": self.location_filters,
            "location_kernel": self.location_kernel,
        }
