"""UTF-8 repair for text that comes from outside (a request, a file): never a failure."""

import tensorflow as tf

__all__ = ["repair_utf8"]


def repair_utf8(strings):
    """``strings`` with every invalid UTF-8 sequence replaced by U+FFFD, in the graph.

    ``tf.strings.unicode_transcode`` with ``errors="replace"`` replaces exactly as Python's
    ``bytes.decode("utf-8", "replace")`` does, so a bad request is repaired, never refused.

    Example:
        >>> repair_utf8(tf.constant([b"caf\\xc3\\xa9", b"bad \\xff"])).numpy().tolist()
        [b'caf\\xc3\\xa9', b'bad \\xef\\xbf\\xbd']
    """
    return tf.strings.unicode_transcode(
        strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )
