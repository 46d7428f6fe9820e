"""The padded shapes of the XLA searches (zoo.decoding.text.BUCKETS): few programs, any batch."""

import numpy as np
import pytest
import tensorflow as tf

from zoo.decoding.text import BUCKETS, Buckets, bucket_length, bucketed


def test_each_batch_and_length_pads_up_to_the_first_bucket_that_holds_it():
    buckets = Buckets(rows=(1, 4, 16), lengths=(16, 32))
    assert [buckets.padded_rows(n) for n in (1, 2, 4, 5, 16, 17, 40)] == [1, 4, 4, 16, 16, 16, 16]
    assert [buckets.padded_length(n) for n in (1, 16, 17, 32, 33, 65)] == [16, 16, 32, 32, 64, 96]
    assert buckets.padded_length(20, source_limit=24) == 24  # the model reads no more
    assert buckets.padded_length(30, source_limit=24) == 30  # never shorter than the source
    assert buckets.widths(40) == [16, 32, 40]


def test_the_tensor_length_bucket_is_the_python_one():
    lengths = np.arange(1, 300, dtype="int32")
    padded = [int(bucket_length(tf.constant(n))) for n in lengths]
    assert padded == [BUCKETS.padded_length(int(n)) for n in lengths]
    limited = [int(bucket_length(tf.constant(n), source_limit=40)) for n in lengths]
    assert limited == [BUCKETS.padded_length(int(n), source_limit=40) for n in lengths]


@pytest.mark.parametrize("side_by_side", [True, False], ids=["halves", "whole"])
def test_a_batch_goes_through_in_bucket_shapes_and_comes_back_whole(side_by_side):
    """The search sees only bucket shapes, a batch past the largest in parts of it, and a part
    of several rows as its two halves (side by side) if the search says so; each row comes back
    as the search made it, in its place, the padding dropped."""
    seen = []

    def search(source):  # each row's ids, doubled: the rows must come back in their places
        seen.append(tuple(source.shape))
        return source * 2

    search.side_by_side = side_by_side  # as a search of a narrow model says
    buckets = Buckets(rows=(1, 4), lengths=(8, 16))
    run = bucketed(search, source_limit=12, buckets=buckets)
    for batch, length, parts in [(1, 3, [(1, 8)]), (3, 9, [(4, 12)]), (9, 5, [(4, 8)] * 3)]:
        seen.clear()
        source = np.arange(1, batch * length + 1, dtype="int32").reshape(batch, length)
        ids = run(tf.constant(source)).numpy()
        if side_by_side:  # each part of 4 rows as two of 2
            parts = [half for rows, width in parts
                     for half in ([(rows // 2, width)] * 2 if rows > 1 else [(rows, width)])]
        assert seen == parts
        assert ids.shape == (batch, parts[0][1])
        np.testing.assert_array_equal(ids[:, :length], source * 2)
        assert not ids[:, length:].any()  # the length's padding, 0 ids


def test_without_rows_only_the_width_is_padded():
    """Plain graph mode compiles nothing per shape: the batch goes through whole, as it came."""
    seen = []

    def search(source):
        seen.append(tuple(source.shape))
        return source * 2

    run = bucketed(search, source_limit=12, buckets=Buckets(rows=(1, 4), lengths=(8, 16)),
                   rows=False)  # fmt: skip
    source = np.arange(1, 46, dtype="int32").reshape(9, 5)
    ids = run(tf.constant(source)).numpy()
    assert seen == [(9, 8)]
    np.testing.assert_array_equal(ids[:, :5], source * 2)


def test_halves_of_different_widths_come_back_as_one_batch_0_padded():
    """A NAT's outputs are as wide as its longest candidate, so a part's halves may differ."""

    def search(source):  # a half with an id above 10 gives 3 more columns
        wider = tf.cast(tf.reduce_max(source) > 10, tf.int32) * 3
        return tf.pad(source, [[0, 0], [0, wider]])

    search.side_by_side = True
    source = np.array([[1, 2], [3, 4], [11, 5], [6, 7]], "int32")
    ids = bucketed(search, buckets=Buckets(rows=(4,), lengths=(2,)))(tf.constant(source))
    np.testing.assert_array_equal(ids.numpy(), np.pad(source, [[0, 0], [0, 3]]))


def test_parts_of_different_widths_come_back_as_one_batch_0_padded():
    """A batch past the largest bucket goes in parts, and a NAT's parts may differ in width."""

    def search(source):  # a part with an id above 10 gives 3 more columns
        wider = tf.cast(tf.reduce_max(source) > 10, tf.int32) * 3
        return tf.pad(source, [[0, 0], [0, wider]])

    source = np.array([[1, 2], [3, 4], [11, 5], [6, 7], [8, 9]], "int32")
    ids = bucketed(search, buckets=Buckets(rows=(2,), lengths=(2,)))(tf.constant(source))
    np.testing.assert_array_equal(ids.numpy(), np.pad(source, [[0, 0], [0, 3]]))
