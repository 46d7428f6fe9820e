"""The special ids and pieces of every vocabulary zoo trains (:mod:`zoo.data.sentencepiece_vocab`).

They live outside :mod:`zoo.data`, whose tokenizers need TensorFlow, so that the searches of
:mod:`zoo.decoding` import on any Keras backend (JAX on a GPU machine without TensorFlow).
``PAD_ID = 0`` makes Keras ``mask_zero=True`` and the padding of the pipelines agree.
"""

__all__ = [
    "BOS_ID", "BOS_PIECE", "EOS_ID", "EOS_PIECE", "PAD_ID", "PAD_PIECE", "UNK_ID", "UNK_PIECE",
]  # fmt: skip

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
PAD_PIECE, UNK_PIECE, BOS_PIECE, EOS_PIECE = "<pad>", "<unk>", "<s>", "</s>"
