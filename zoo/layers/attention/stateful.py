"""Cross attention that carries a state from one target step to the next (where it has
attended): the base of location-aware and monotonic attention."""

from zoo.layers.attention.multi_head import MultiHeadAttention

__all__ = ["StatefulAttention"]


class StatefulAttention(MultiHeadAttention):
    """A :class:`MultiHeadAttention` whose call also takes ``state``: what the steps before
    each query did. The decoder stack hands it over (``TransformerDecoderBlock``'s
    ``cross_attention_state``): one step at a time from the search's caches
    (:meth:`initial_state`, then :meth:`next_state` of each step's weights); over a whole
    target, when ``needs_first_pass``, from a first pass's weights (:meth:`sequence_state`),
    otherwise none (the layer computes what it needs over the target itself).

    A subclass reads ``self.state`` in its hooks (``_score_bias``, ``_attend``): the hooks take
    no state argument, so the call sets it for its own duration.
    """

    stateful = True
    needs_first_pass = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.state = None

    def initial_state(self, batch_size, source_length):
        """The state before the first step, ``(B, ...)``."""
        raise NotImplementedError

    def next_state(self, state, weights):
        """The state after one step whose weights are ``(B, N, 1, S)``."""
        raise NotImplementedError

    def sequence_state(self, weights):
        """The state of every query of a whole target, from a first pass's ``(B, N, T, S)``
        weights (only when ``needs_first_pass``)."""
        raise NotImplementedError

    # The arguments spelled out: Keras refuses tensors and non-tensors together in **kwargs.
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
        state=None,
    ):
        self.state = state
        try:
            return super().call(
                query, value, key, padding_mask=padding_mask, attention_mask=attention_mask,
                use_causal_mask=use_causal_mask, cache=cache, cache_index=cache_index,
                query_position=query_position, return_attention_scores=return_attention_scores,
                training=training, query_mask=query_mask, value_mask=value_mask,
                key_mask=key_mask,
            )  # fmt: skip
        finally:
            self.state = None
