"""The translator's searches: greedy, beam and sampling (:mod:`zoo.decoding`) over its step.

:func:`translator_search` is what the translation task hands the strings frame
(:func:`zoo.decoding.translate_sentences`) and its SavedModel; keras.ops only, so that it also
runs on Keras's JAX backend where TensorFlow is not installed.
"""

from zoo.decoding.beam import beam_search
from zoo.decoding.greedy import greedy_search
from zoo.decoding.sampling import sample
from zoo.decoding.text import output_length
from zoo.models.translator.inference import step_and_caches
from zoo.models.translator.stacks import translator_layers

__all__ = ["METHODS", "halves_side_by_side", "translator_search"]

METHODS = ("beam", "greedy", "sample")
# The widest model whose XLA searches take a batch as two halves side by side. On this 2-core
# CPU, XLA's runtime ran the shipped translator's operations (d_model 128) one after another on
# one core, and its halves side by side went 1.3-1.5x as fast at batch 8 and 64; the base
# Transformer's matmuls (d_model 512) take both cores already, and halves made it 0.84x as fast
# (benchmarks/RESULTS.md). Between the two, untried.
SIDE_BY_SIDE_MAX_WIDTH = 256


def halves_side_by_side(search, model, method):
    """``search``, marked for :func:`zoo.decoding.bucketed` to take a batch as two halves side
    by side if ``model`` is narrow enough and the method draws nothing (a sampler's draws
    depend on its batch: its halves would draw the same numbers)."""
    search.side_by_side = (method != "sample"
                           and model.get_config()["d_model"] <= SIDE_BY_SIDE_MAX_WIDTH)
    return search


def translator_search(model, method, max_length, beam_size=4, compile_stage=None, **kwargs):
    """A translator's ids -> ids search, for :func:`zoo.decoding.translate_strings`.

    Args:
        model: a translator of :func:`zoo.models.build_translator`.
        method: ``"beam"``, ``"greedy"`` or ``"sample"``.
        max_length: Python int, the most target tokens per sentence; None sizes each batch's
            search from its source (:func:`zoo.decoding.output_length`).
        beam_size: the beam size of ``"beam"`` (an int, or a scalar int tensor in graph mode).
        compile_stage: None (the search is traced in the caller's graph), or a function that
            compiles a function (``translate()`` passes XLA's).
        **kwargs: further arguments of the search (``bos_id``, ``eos_id``, ``alpha``, ...),
            and ``monotonic_window`` of the step (:func:`zoo.models.translator.step`:
            monotonic attention decoding).

    Returns:
        A function ``(B, S)`` source ids -> ``(B, L)`` int32 target ids, ``L = max_length``
        or :func:`~zoo.decoding.output_length`.
    """
    compile_stage = compile_stage or (lambda function: function)
    # A translator (whatever its task names it) has one output; the NAT has a dict of them.
    if method not in METHODS or isinstance(model.output, dict):
        raise ValueError(
            f"Method {method!r} does not decode a model named {model.name!r}; the "
            f"translator's methods are {METHODS}."
        )
    if kwargs.get("rescorer") is not None:
        raise ValueError("rescorer reranks the candidates of method 'mask_predict' only.")
    kwargs.pop("rescorer", None)
    monotonic_window = kwargs.pop("monotonic_window", None)
    positions = translator_layers(model).max_length

    def search(source_ids):
        length = max_length if max_length is not None else output_length(source_ids, positions)
        step, caches = step_and_caches(model, source_ids, length, monotonic_window)
        if method == "beam":
            ids, _ = beam_search(step, caches, length, beam_size=beam_size, **kwargs)
            return ids
        if method == "greedy":
            return greedy_search(step, caches, length, **kwargs)
        return sample(step, caches, length, **kwargs)

    return halves_side_by_side(compile_stage(search), model, method)
