"""The transformer decoder block: causal self-attention, cross attention, feed-forward network."""

import keras

from zoo.layers.attention.registry import get_attention
from zoo.layers.blocks.encoder_block import _check_attention_kwargs, _TransformerBlock
from zoo.layers.masking import implicit_mask


@keras.saving.register_keras_serializable(package="zoo")
class TransformerDecoderBlock(_TransformerBlock):
    """One transformer decoder block: causal self-attention, cross attention, feed-forward net.

    Residual connections as in ``TransformerEncoderBlock`` (post-LN, or pre-LN with
    ``normalize_first``; in pre-LN only the cross attention's queries are normalized, the encoder
    output is used as it is). With ``cross_attention=False`` it is a decoder-only (GPT-style)
    block. Incremental decoding keeps a self-attention cache (:meth:`init_self_cache`, written
    at ``cache_index`` on every call) and a cross-attention cache (:meth:`compute_cross_cache`,
    once); both are fixed-size and ``cache_index`` may be a tensor, so a loop compiles with XLA.

    Args:
        the encoder block's arguments (``num_heads`` and ``attention_dropout`` serve the self
        and the cross attention), and:
        cross_attention: whether the block attends over an encoder output (default True).
        cross_attention_variant: the registered name of the cross-attention variant
            (default ``"mha"``). It is made with ``fused_qkv=False``.
        cross_attention_kwargs: extra constructor arguments of the cross-attention variant.

    Call arguments:
        x: ``(B, T, D)``, the decoder inputs. A Keras implicit mask on it is used as
            ``padding_mask`` (except when decoding with a cache).
        encoder_output: ``(B, S, De)``. Needed when the block has cross attention, unless
            ``cross_cache`` is given. A Keras implicit mask on it is used as
            ``encoder_padding_mask``.
        padding_mask: the decoder's own padding mask, ``(B, T)`` boolean, True for real
            tokens. With ``self_cache`` it covers the cache slots: ``(B, max_length)``.
        encoder_padding_mask: ``(B, S)`` boolean, True for real encoder tokens.
        attention_mask: ``(B, T, T)`` boolean mask of the self-attention (``(B, T,
            max_length)`` with ``self_cache``).
        use_causal_mask: causal self-attention (default True; always on with a cache).
        self_cache: the self-attention cache, keys and values ``(B, max_length, N, H)``, of
            :meth:`init_self_cache`, or of the previous step. Needs ``cache_index``.
        cross_cache: the cross-attention cache, keys and values ``(B, S, N, H)``, of
            :meth:`compute_cross_cache`, used instead of ``encoder_output``.
        cache_index: int or scalar int tensor, the position of ``x[:, 0]`` in the
            sequence; the new keys and values are written there in ``self_cache``.
        return_attention_scores: also return the attention weights.
        cross_attention_state: the state of a stateful cross-attention variant
            (:class:`~zoo.layers.attention.StatefulAttention`: ``location_aware``,
            ``monotonic``), what the steps before did; None for the others.
        training: whether dropout is active.

    Returns:
        The output ``(B, T, D)``, followed, when ``return_attention_scores``, by the
        self-attention weights ``(B, N, T, T)`` (``(B, N, T, max_length)`` with a cache)
        and the cross-attention weights ``(B, N, T, S)``, then, when ``self_cache`` is given,
        by the updated self cache and the cross cache (computed from ``encoder_output``
        when it was not given). Items of cross attention are left out when
        ``cross_attention=False``. A single output is returned as a tensor, several as a
        tuple, in this order, as ``MultiHeadAttention`` does.

    Example:
        >>> block = TransformerDecoderBlock(num_heads=2, ff_dim=32)
        >>> x, memory = keras.random.normal((2, 5, 16)), keras.random.normal((2, 7, 16))
        >>> tuple(block(x, memory).shape)
        (2, 5, 16)
        >>> self_cache = block.init_self_cache(batch_size=2, max_length=5)
        >>> cross_cache = block.compute_cross_cache(memory)
        >>> y, self_cache, cross_cache = block(
        ...     x[:, :1], self_cache=self_cache, cross_cache=cross_cache, cache_index=0)
        >>> tuple(y.shape)
        (2, 1, 16)

    References:
        Vaswani et al. 2017, "Attention Is All You Need", section 3.1 (post-LN).
        Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture" (pre-LN).
        Radford et al. 2018, "Improving Language Understanding by Generative
        Pre-Training" (the decoder-only block).
    """

    def __init__(
        self,
        *args,
        cross_attention=True,
        cross_attention_variant="mha",
        cross_attention_kwargs=None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.cross_attention = cross_attention
        self.cross_attention_variant = cross_attention_variant
        self.cross_attention_kwargs = (
            None if cross_attention_kwargs is None else dict(cross_attention_kwargs)
        )
        self._cross_attention_cls = get_attention(cross_attention_variant)
        self._cross_attention_kwargs = _check_attention_kwargs(
            cross_attention_kwargs, "cross_attention_kwargs"
        )
        self.cross_attention_layer = None  # made in build()
        self.cross_attention_norm = self._layer_norm("cross_attention_norm")
        self.cross_attention_residual_dropout = self._dropout("cross_attention_residual_dropout")

    def build(self, x_shape, encoder_output_shape=None):
        self._build_common(x_shape)
        if self.cross_attention:
            # Without an encoder output at build time (a first call with only a cross
            # cache), the encoder output is taken to be as wide as the decoder's.
            memory_shape = encoder_output_shape or x_shape
            self.cross_attention_layer = self._make_attention(
                self._cross_attention_cls,
                self._cross_attention_kwargs,
                x_shape[-1],
                False,
                "cross_attention",
            )
            self.cross_attention_layer.build(x_shape, memory_shape)
            self.cross_attention_norm.build(x_shape)
            self.cross_attention_residual_dropout.build(x_shape)
        self.built = True

    # ------------------------------------------------------------------ caches
    def init_self_cache(self, batch_size, max_length, dtype=None):
        """An empty self-attention cache, keys and values ``(B, max_length, N, H)``; the block
        must be built."""
        self._check_built("init_self_cache")
        return self.self_attention_layer.init_cache(batch_size, max_length, dtype=dtype)

    def compute_cross_cache(self, encoder_output):
        """The encoder keys and values, each ``(B, S, N, H)``, computed once per source."""
        self._check_built("compute_cross_cache")
        if not self.cross_attention:
            raise ValueError("This decoder block has cross_attention=False: no cross cache.")
        return self.cross_attention_layer.compute_cache(encoder_output)

    def _check_built(self, method):
        if not self.built:
            raise ValueError(
                f"Build {self.name!r} before calling {method}(): call it once, or "
                "block.build(x_shape, encoder_output_shape)."
            )

    # ------------------------------------------------------------------ call
    def call(
        self,
        x,
        encoder_output=None,
        padding_mask=None,
        encoder_padding_mask=None,
        attention_mask=None,
        use_causal_mask=True,
        self_cache=None,
        cross_cache=None,
        cache_index=None,
        return_attention_scores=False,
        cross_attention_state=None,
        training=None,
    ):
        caching = self_cache is not None
        if caching != (cache_index is not None):
            raise ValueError("`self_cache` and `cache_index` must be given together.")
        has_memory = encoder_output is not None or cross_cache is not None
        if self.cross_attention and not has_memory:
            raise ValueError(
                f"{self.name!r} has cross attention: pass `encoder_output` or `cross_cache` "
                "(or make the block with cross_attention=False)."
            )
        if not self.cross_attention and (has_memory or encoder_padding_mask is not None):
            raise ValueError(
                f"{self.name!r} has cross_attention=False, but was given an encoder output, "
                "a cross cache or an encoder padding mask."
            )
        if padding_mask is None and not caching:
            padding_mask = implicit_mask(x)  # (B, T) or None
        if encoder_padding_mask is None and encoder_output is not None:
            encoder_padding_mask = implicit_mask(encoder_output)  # (B, S) or None
        if caching and self.cross_attention and cross_cache is None:
            cross_cache = self.compute_cross_cache(encoder_output)  # 2 x (B, S, N, H)

        # Causal self-attention sublayer.
        x, self_extra = self._self_attention_sublayer(
            x,
            training,
            padding_mask=padding_mask,
            attention_mask=attention_mask,
            use_causal_mask=use_causal_mask,
            cache=self_cache,
            cache_index=cache_index,
            return_attention_scores=return_attention_scores,
        )
        weights = self_extra[:1] if return_attention_scores else ()  # (B, N, T, T|max_length)
        caches = self_extra[-1:] if caching else ()  # 2 x (B, max_length, N, H)

        # Cross-attention sublayer.
        if self.cross_attention:
            # Keys and values from the cross cache when there is one, else from the encoder.
            if cross_cache is None:
                memory = {"value": encoder_output}
            else:
                # Position-aware cross attention needs to know where the queries are.
                memory = {"cache": cross_cache, "query_position": cache_index}
            if cross_attention_state is not None:  # a stateful variant (location, monotonic)
                memory["state"] = cross_attention_state
            x, cross_extra = self._residual(
                x,
                lambda h: self.cross_attention_layer(
                    h,
                    padding_mask=encoder_padding_mask,
                    return_attention_scores=return_attention_scores,
                    training=training,
                    **memory,
                ),
                self.cross_attention_norm,
                self.cross_attention_residual_dropout,
                training,
            )
            weights += cross_extra[:1] if return_attention_scores else ()  # (B, N, T, S)
            caches += (cross_cache,) if caching else ()  # 2 x (B, S, N, H)

        # Feed-forward sublayer.
        x = self._feed_forward_sublayer(x, training)  # (B, T, D)

        outputs = (x,) + weights + caches
        return outputs[0] if len(outputs) == 1 else outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "cross_attention": self.cross_attention,
                "cross_attention_variant": self.cross_attention_variant,
                "cross_attention_kwargs": (
                    None
                    if self.cross_attention_kwargs is None
                    else dict(self.cross_attention_kwargs)
                ),
            }
        )
        return config
