"""Glancing training (GLAT): the second decoder pass sees as many gold tokens as the first pass
got wrong, times a ratio, so that a non-autoregressive decoder learns from easy to hard."""

import keras
from keras import ops

from zoo.layers.ctc import ctc_best_alignment, ctc_positions_needed
from zoo.layers.scheduled_sampling import add_step_counter

__all__ = ["AllMasked", "CTCGlancingSampler", "GlancingSampler", "LossMask"]


@keras.saving.register_keras_serializable(package="zoo")
class AllMasked(keras.layers.Layer):
    """``mask_id`` at every real position of ``(B, T)`` ids, 0 at padding: the decoder input of
    a one-pass NAT, whose first pass glancing training runs.

    Example:
        >>> ops.convert_to_numpy(AllMasked(1)(ops.convert_to_tensor([[7, 8, 0]]))).tolist()
        [[1, 1, 0]]
    """

    def __init__(self, mask_id, **kwargs):
        super().__init__(**kwargs)
        self.mask_id = mask_id

    def call(self, ids):
        ids = ops.cast(ids, "int32")
        return ops.where(ops.not_equal(ids, 0), self.mask_id, 0)

    def compute_mask(self, ids, mask=None):
        return None

    def get_config(self):
        return {**super().get_config(), "mask_id": self.mask_id}


@keras.saving.register_keras_serializable(package="zoo")
class GlancingSampler(keras.layers.Layer):
    """The glancing sampler of GLAT: reveal ``round(ratio * errors)`` gold tokens.

    In training, the first pass's errors against the gold target are counted per sentence
    (no gradient), and that many times the ratio of the real positions, drawn at random, get
    their gold token in the second pass's input; the loss is on the others (:class:`LossMask`).
    The ratio goes linearly from ``ratio`` to ``final_ratio`` over ``anneal_steps``, counted in a
    saved weight as :class:`ScheduledSampling` counts them. Outside training nothing is revealed.

    Args:
        ratio: the glancing ratio at the first step (``> 0``).
        final_ratio: the ratio after ``anneal_steps`` (None: ``ratio`` throughout).
        anneal_steps: the steps of the linear anneal.
        mask_id: the mask token.
        seed: the seed of the positions drawn.

    Call arguments:
        target: ``(B, T)`` gold ids, 0 at padding.
        logits: ``(B, T, V)`` the first pass's logits.
        training: reveal (and count a step) only when True.

    Returns:
        ``(decoder_input, loss_positions)``: ``(B, T)`` int32 ids (gold where revealed,
        ``mask_id`` elsewhere, 0 at padding) and ``(B, T)`` booleans, True at the real positions
        not revealed.

    Example:
        >>> glance = GlancingSampler(ratio=1.0)
        >>> target = ops.convert_to_tensor([[5, 6, 7, 0]])
        >>> logits = ops.one_hot(ops.convert_to_tensor([[5, 9, 9, 9]]), 10)  # two errors
        >>> ids, positions = glance(target, logits, training=True)
        >>> int(ops.sum(ops.cast(ops.equal(ids, target) & (target > 0), "int32")))  # revealed
        2

    References:
        Qian et al. 2021, "Glancing Transformer for Non-Autoregressive Neural Machine
        Translation".
    """

    def __init__(self, ratio=0.5, final_ratio=None, anneal_steps=4000, mask_id=1, seed=None,
                 **kwargs):  # fmt: skip
        super().__init__(**kwargs)
        for name, value in (("ratio", ratio), ("final_ratio", final_ratio)):
            if value is not None and not (isinstance(value, (int, float)) and 0 < value <= 1):
                raise ValueError(f"{name} must be in (0, 1], got {value!r}.")
        if not isinstance(anneal_steps, int) or anneal_steps < 1:
            raise ValueError(f"anneal_steps must be a positive int, got {anneal_steps!r}.")
        self.ratio = ratio
        self.final_ratio = final_ratio
        self.anneal_steps = anneal_steps
        self.mask_id = mask_id
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, target_shape, logits_shape=None):
        self.step = add_step_counter(self)
        self.built = True

    def current_ratio(self):
        """The glancing ratio at the current step (the first, before the layer is built)."""
        if self.final_ratio is None:
            return ops.convert_to_tensor(self.ratio, "float32")
        step = ops.convert_to_tensor(self.step) if self.built else 0.0
        done = ops.minimum(step / self.anneal_steps, 1.0)
        return self.ratio + (self.final_ratio - self.ratio) * done

    def call(self, target, logits, training=None):
        target = ops.cast(target, "int32")
        real = ops.not_equal(target, 0)  # (B, T)
        masked = ops.where(real, self.mask_id, 0)
        if not training:
            return masked, real
        revealed = self.reveal(target, logits, real)
        return ops.where(revealed, target, masked), real & ~revealed

    def reveal(self, gold, logits, real):
        """``(B, T)`` booleans: ``round(ratio * errors)`` of the ``real`` positions, drawn at
        random, where ``errors`` counts the positions whose argmax is not ``gold``. Counts a
        training step."""
        predicted = ops.cast(ops.argmax(ops.stop_gradient(logits), axis=-1), "int32")
        errors = ops.sum(ops.cast(real & ops.not_equal(predicted, gold), "float32"), axis=1)
        count = ops.cast(ops.round(errors * self.current_ratio()), "int32")  # (B,)
        # A random order of the real positions (padding last): the first `count` are revealed.
        draw = keras.random.uniform(ops.shape(gold), seed=self.seed_generator)
        rank = ops.argsort(ops.argsort(ops.where(real, draw, 2.0), axis=1), axis=1)
        self.step.assign_add(1.0)
        return real & (rank < count[:, None])

    def compute_output_spec(self, target, logits, training=None):
        spec = keras.KerasTensor(target.shape, "int32")
        return spec, keras.KerasTensor(target.shape, "bool")

    def get_config(self):
        return {
            **super().get_config(),
            "ratio": self.ratio,
            "final_ratio": self.final_ratio,
            "anneal_steps": self.anneal_steps,
            "mask_id": self.mask_id,
            "seed": self.seed,
        }


@keras.saving.register_keras_serializable(package="zoo")
class CTCGlancingSampler(GlancingSampler):
    """Glancing for a CTC decoder (Gu & Kong 2021): the gold target has no fixed place among
    the decoder's positions, so the first pass's best alignment of it
    (:func:`~zoo.layers.ctc_best_alignment`, no gradient) puts each gold token (or the blank)
    at a position; the errors are the positions whose argmax differs from it, and the
    revealed positions read the aligned token (the blank is ``mask_id``) in place of their
    upsampled source token. The CTC loss then covers every position. A sentence that has no
    alignment (more labels than positions) gets nothing revealed. Outside training the input
    is returned unchanged: the second pass is the one pass.

    Args: those of :class:`GlancingSampler`; ``mask_id`` is the blank's id.

    Call arguments:
        ids: ``(B, L)`` the decoder's input ids (the upsampled source), 0 at padding.
        target: ``(B, T)`` gold ids, 0 at padding.
        logits: ``(B, L, V)`` the first pass's logits, the blank certain at padding.
        training: reveal (and count a step) only when True.

    Returns:
        ``(B, L)`` int32 ids: aligned gold tokens where revealed, ``ids`` elsewhere.

    Example:
        >>> glance = CTCGlancingSampler(ratio=1.0, mask_id=1)
        >>> ids, target = ops.convert_to_tensor([[5, 5, 6, 6]]), ops.convert_to_tensor([[7, 8]])
        >>> def one_hot(ids):
        ...     return ops.one_hot(ops.convert_to_tensor(ids), 10)
        >>> # 9 wins everywhere (4 errors); the best alignment of 7 8 is 7 _ 8 _ (_ = blank 1).
        >>> logits = 5 * one_hot([[9, 9, 9, 9]]) + 2 * one_hot([[7, 1, 8, 1]])
        >>> ops.convert_to_numpy(glance(ids, target, logits, training=True)).tolist()
        [[7, 1, 8, 1]]
    """

    def call(self, ids, target, logits, training=None):
        ids = ops.cast(ids, "int32")
        if not training:
            return ids
        target = ops.cast(target, "int32")
        real = ops.not_equal(ids, 0)  # (B, L)
        log_probs = ops.log_softmax(ops.cast(ops.stop_gradient(logits), "float32"), axis=-1)
        aligned = ctc_best_alignment(log_probs, target, blank_id=self.mask_id)  # (B, L)
        width = ops.sum(ops.cast(real, "int32"), axis=1, keepdims=True)  # (B, 1)
        feasible = ctc_positions_needed(target)[:, None] <= width
        revealed = self.reveal(aligned, logits, real & feasible)
        return ops.where(revealed, aligned, ids)

    def build(self, ids_shape, target_shape=None, logits_shape=None):
        super().build(ids_shape)

    def compute_output_spec(self, ids, target, logits, training=None):
        return keras.KerasTensor(ids.shape, "int32")


@keras.saving.register_keras_serializable(package="zoo")
class LossMask(keras.layers.Layer):
    """The logits as they are, with ``positions`` as their Keras mask: a masked loss (Keras
    weighs each position by the mask and averages over the True ones) then counts only those.

    Call arguments:
        inputs: ``[logits, positions]``: ``(B, T, V)`` and ``(B, T)`` booleans, True where the
            loss counts (one list, since Keras hands a mask computation the first argument
            alone).
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs):
        logits, _ = inputs
        return ops.multiply(logits, 1)  # a new tensor: the input's own mask stays the input's

    def compute_mask(self, inputs, previous_mask=None):
        return ops.cast(inputs[1], "bool")

    def compute_output_shape(self, input_shape):
        return input_shape[0]
