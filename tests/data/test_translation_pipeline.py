import collections
import types

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from zoo.data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    DataCounts,
    DataPosition,
    ParallelCorpus,
    bucket_spec,
    load_multi30k,
    make_translation_dataset,
    skip_done,
)

N_PAIRS = 600


@pytest.fixture(scope="module")
def pairs():
    return load_multi30k("val")[:N_PAIRS]


@pytest.fixture(scope="module")
def reference_ids(pairs, sp_model_path):
    """The ids of each pair from the Python sentencepiece package, independent of tf-text."""
    processor = spm.SentencePieceProcessor(model_file=sp_model_path)
    return [(processor.encode(src), processor.encode(tgt)) for src, tgt in pairs]


def _batches(ds):
    return [
        (features["source"].numpy(), features["target_in"].numpy(), labels.numpy())
        for features, labels in ds
    ]


def _unpad(row):
    """A padded row without its trailing pads (no real token is PAD_ID)."""
    nonzero = np.flatnonzero(row != PAD_ID)
    return row[: nonzero[-1] + 1].tolist() if nonzero.size else []


def test_structure_and_dtypes(pairs, tokenizer):
    ds = make_translation_dataset(pairs, tokenizer, batch_tokens=512, max_length=64)
    features_spec, labels_spec = ds.element_spec
    assert sorted(features_spec) == ["source", "target_in"]
    for spec in (features_spec["source"], features_spec["target_in"], labels_spec):
        assert spec.dtype == tf.int32 and spec.shape.as_list() == [None, None]
    for source, target_in, labels in _batches(ds):
        assert source.ndim == 2 and target_in.shape == labels.shape
        assert source.shape[0] == target_in.shape[0]


def test_teacher_forcing_shift_and_padding(pairs, tokenizer):
    ds = make_translation_dataset(pairs, tokenizer, batch_tokens=512, max_length=64, shuffle=False)
    for source, target_in, labels in _batches(ds):
        for src_row, in_row, out_row in zip(source, target_in, labels):
            n = len(_unpad(out_row))  # target length + 1 (the EOS)
            assert in_row[0] == BOS_ID
            np.testing.assert_array_equal(in_row[1:n], out_row[: n - 1])  # shifted right by one
            assert out_row[n - 1] == EOS_ID
            assert EOS_ID not in in_row[:n] and BOS_ID not in out_row[:n]
            assert (in_row[n:] == PAD_ID).all() and (out_row[n:] == PAD_ID).all()
            k = len(_unpad(src_row))
            assert (src_row[k:] == PAD_ID).all() and PAD_ID not in src_row[:k]
        # Each batch is padded to its own longest example, not beyond.
        assert (source[:, -1] != PAD_ID).any() and (labels[:, -1] != PAD_ID).any()


@pytest.mark.parametrize("max_length", [12, 64])
def test_every_example_appears_exactly_once(pairs, reference_ids, tokenizer, max_length):
    ds = make_translation_dataset(
        pairs, tokenizer, batch_tokens=256, max_length=max_length, shuffle=True, seed=1
    )
    seen = collections.Counter()
    for source, _, labels in _batches(ds):
        for src_row, out_row in zip(source, labels):
            seen[tuple(_unpad(src_row)), tuple(_unpad(out_row)[:-1])] += 1
    expected = collections.Counter(
        (tuple(src[:max_length]), tuple(tgt[: max_length - 1])) for src, tgt in reference_ids
    )
    assert sum(seen.values()) == N_PAIRS
    assert seen == expected
    if max_length == 12:  # truncation did happen, on both sides
        assert any(len(src) > 12 for src, _ in reference_ids)
        assert any(len(tgt) > 11 for _, tgt in reference_ids)


@pytest.mark.parametrize(
    "batch_tokens, max_length, bucket_width, pad_to_bucket",
    [(256, 48, 8, False), (300, 40, 5, True), (64, 64, 16, False)],
)
def test_no_batch_exceeds_the_token_budget(
    pairs, tokenizer, batch_tokens, max_length, bucket_width, pad_to_bucket
):
    ds = make_translation_dataset(
        pairs,
        tokenizer,
        batch_tokens=batch_tokens,
        max_length=max_length,
        bucket_width=bucket_width,
        pad_to_bucket=pad_to_bucket,
        seed=0,
    )
    batches = _batches(ds)
    upper, _ = bucket_spec(batch_tokens, max_length, bucket_width)
    fills = []
    for source, target_in, labels in batches:
        assert source.shape[0] * source.shape[1] <= batch_tokens
        assert labels.shape[0] * labels.shape[1] <= batch_tokens
        assert source.shape[1] <= max_length and labels.shape[1] <= max_length
        if pad_to_bucket:
            assert source.shape[1] == labels.shape[1] and labels.shape[1] in upper
        fills.append(max(source.size, labels.size) / batch_tokens)
    assert sum(source.shape[0] for source, _, _ in batches) == N_PAIRS
    # The budget is used: batches are not needlessly small (only each bucket's last is partial).
    assert np.median(fills) > 0.5


def test_bucket_spec():
    assert bucket_spec(64, 20, 8) == ([8, 16, 20], [8, 4, 3])
    assert bucket_spec(4096, 128) == (list(range(8, 129, 8)), [4096 // u for u in range(8, 129, 8)])
    with pytest.raises(ValueError, match=r"batch_tokens \(16\) must be at least max_length \(32\)"):
        bucket_spec(16, 32)
    with pytest.raises(ValueError, match="bucket_width must be a positive int"):
        bucket_spec(64, 32, 0)


def test_batch_sizes_are_multiples_of_the_replicas():
    assert bucket_spec(64, 20, 8, batch_multiple=2) == ([8, 16, 20], [8, 4, 2])
    assert bucket_spec(64, 20, 8, batch_multiple=3) == ([8, 16, 20], [6, 3, 3])
    # A bucket whose budget holds fewer examples than replicas still gives each one example.
    assert bucket_spec(64, 20, 8, batch_multiple=4) == ([8, 16, 20], [8, 4, 4])
    with pytest.raises(ValueError, match="batch_multiple must be a positive int"):
        bucket_spec(64, 20, 8, batch_multiple=0)


def test_every_batch_is_cut_to_equal_shares_of_the_replicas(pairs, tokenizer):
    ds = make_translation_dataset(pairs, tokenizer, batch_tokens=256, max_length=48,
                                  batch_multiple=3, seed=0)  # fmt: skip
    sizes = [features["source"].shape[0] for features, _ in ds]
    assert all(size > 0 and size % 3 == 0 for size in sizes)
    # Each bucket's last batch loses fewer than 3 pairs; nothing else is lost.
    assert N_PAIRS - 2 * len(bucket_spec(256, 48)[0]) <= sum(sizes) <= N_PAIRS


def test_long_pairs_are_skipped_and_counted_or_truncated(pairs, reference_ids, tokenizer):
    from zoo.data import DataCounts

    counts = DataCounts()
    ds = make_translation_dataset(pairs, tokenizer, batch_tokens=256, max_length=12, seed=0,
                                  long_pairs="skip", counts=counts)  # fmt: skip
    kept = sum(features["source"].shape[0] for features, _ in ds)
    fitting = sum(len(src) <= 12 and len(tgt) <= 11 for src, tgt in reference_ids)
    assert 0 < kept == fitting < N_PAIRS
    assert int(counts.skipped["too_long"].numpy()) == N_PAIRS - fitting
    assert "over max_length" in counts.summary()
    truncated = make_translation_dataset(pairs, tokenizer, batch_tokens=256, max_length=12,
                                         seed=0, long_pairs="truncate")  # fmt: skip
    assert sum(features["source"].shape[0] for features, _ in truncated) == N_PAIRS
    with pytest.raises(ValueError, match="no pair is left to train on"):
        make_translation_dataset(pairs[:20], tokenizer, batch_tokens=256, max_length=2,
                                 long_pairs="skip")  # fmt: skip


def test_shuffle_is_seeded_and_reshuffles_each_epoch(pairs, tokenizer):
    def first_sources(ds):
        return [tuple(_unpad(row)) for source, _, _ in _batches(ds) for row in source]

    a = make_translation_dataset(pairs, tokenizer, batch_tokens=256, max_length=32, seed=7)
    b = make_translation_dataset(pairs, tokenizer, batch_tokens=256, max_length=32, seed=7)
    epoch_1, epoch_2 = first_sources(a), first_sources(a)
    assert epoch_1 == first_sources(b)
    assert epoch_1 != epoch_2 and sorted(epoch_1) == sorted(epoch_2)
    fixed = make_translation_dataset(
        pairs, tokenizer, batch_tokens=256, max_length=32, shuffle=False
    )
    assert first_sources(fixed) == first_sources(fixed)
    assert first_sources(fixed) != epoch_1


def test_the_parts_of_an_epoch_are_disjoint_and_together_the_epoch(pairs, tokenizer):
    """A worker's part under multi_worker (in-memory pairs; a streamed corpus's are
    tests/data/test_parallel_corpus.py's): every part draws the epoch's order."""
    def sources(part):
        ds = make_translation_dataset(pairs, tokenizer, batch_tokens=256, max_length=32,
                                      seed=0, epoch=tf.Variable(2, dtype=tf.int64), part=part)
        return sorted(tuple(_unpad(row)) for source, _, _ in _batches(ds) for row in source)

    parts = [sources((index, 2)) for index in (0, 1)]
    assert abs(len(parts[0]) - len(parts[1])) <= 1
    assert sorted(parts[0] + parts[1]) == sources(None)
    with pytest.raises(ValueError, match="A part of an epoch needs a seed"):
        make_translation_dataset(pairs, tokenizer, batch_tokens=256, max_length=32, part=(0, 2))


def test_bad_inputs_name_the_problem(pairs, tokenizer):
    with pytest.raises(ValueError, match="pairs is empty"):
        make_translation_dataset([], tokenizer)
    with pytest.raises(ValueError, match=r"pairs\[1\] is not a \(source, target\) pair"):
        make_translation_dataset([("a", "b"), ("only one",)], tokenizer)
    with pytest.raises(ValueError, match=r"batch_tokens \(32\) must be at least max_length \(64\)"):
        make_translation_dataset(pairs, tokenizer, batch_tokens=32, max_length=64)
    tokenize = tokenizer.tokenize
    no_pad = types.SimpleNamespace(tokenize=tokenize, pad_id=-1, bos_id=BOS_ID, eos_id=EOS_ID)
    with pytest.raises(ValueError, match="pad id is -1"):
        make_translation_dataset(pairs, no_pad)
    no_bos = types.SimpleNamespace(tokenize=tokenize, pad_id=PAD_ID, bos_id=-1, eos_id=EOS_ID)
    with pytest.raises(ValueError, match="needs BOS and EOS ids"):
        make_translation_dataset(pairs, no_bos)


class _Reversal:
    """A made-up objective: the source alone in; the target reversed, and its length, out."""

    def __init__(self, max_length, target_limit):
        self.max_length, self.target_limit = max_length, target_limit

    def example(self, source, target, seed=None):  # it draws nothing
        target = target[: self.target_limit]
        return {"source": source[: self.max_length]}, {
            "tokens": tf.reverse(target, [0]), "count": tf.shape(target)[0]}


def test_an_objective_makes_the_examples_and_their_padding(pairs, reference_ids, tokenizer):
    """The pipeline batches whatever examples the objective makes: each sequence padded with
    PAD_ID to its batch's longest, scalars stacked, the budget kept by the longest sequence."""
    max_length, batch_tokens = 24, 256
    ds = make_translation_dataset(pairs, tokenizer, batch_tokens=batch_tokens,
                                  max_length=max_length, objective=_Reversal(max_length, 20),
                                  long_pairs="skip", seed=0)  # fmt: skip
    features_spec, labels_spec = ds.element_spec
    assert sorted(features_spec) == ["source"] and sorted(labels_spec) == ["count", "tokens"]
    assert labels_spec["count"].shape.as_list() == [None]
    expected = collections.Counter(
        (tuple(src), tuple(reversed(tgt))) for src, tgt in reference_ids
        if len(src) <= max_length and len(tgt) <= 20  # "skip": the objective's target_limit
    )
    seen = collections.Counter()
    for features, labels in ds:
        source, tokens = features["source"].numpy(), labels["tokens"].numpy()
        assert max(source.size, tokens.size) <= batch_tokens
        for src_row, row, count in zip(source, tokens, labels["count"].numpy()):
            assert (row[count:] == PAD_ID).all()
            seen[tuple(_unpad(src_row)), tuple(row[:count])] += 1
    assert 0 < sum(seen.values()) < N_PAIRS and seen == expected
    with pytest.raises(ValueError, match="made for max_length=24, the pipeline's is 32"):
        make_translation_dataset(pairs, tokenizer, max_length=32, objective=_Reversal(24, 20))


def test_autotuning_is_off(pairs, tokenizer):
    """Its thread made freeing each iterator wait, up to 49 s here (``prefetched``)."""
    ds = make_translation_dataset(pairs, tokenizer, batch_tokens=512, max_length=64)
    assert ds.options().autotune.enabled is False


def test_an_objectives_draws_are_a_function_of_the_epoch_and_the_pairs_place_alone(
        pairs, tokenizer):
    """The NAT's masks (CMLM): a resumed run builds its pipeline afresh and skips the batches
    done; it must mask what the interrupted run masked, and another epoch other positions."""
    from zoo.models.nat.objectives import CMLMObjective

    def batches(epoch, skip=0, shuffle=True):
        position = DataPosition()
        position.set(epoch, skip=skip)
        ds = make_translation_dataset(pairs[:200], tokenizer, batch_tokens=256, max_length=32,
                                      seed=3, epoch=position.epoch, shuffle=shuffle,
                                      objective=CMLMObjective(32, EOS_ID, max_offset=8))
        return [features["target_in"].numpy() for features, _ in skip_done(ds, position)]

    first = batches(1)
    assert len(first) > 3
    for a, b in zip(batches(1, skip=2), first[2:], strict=True):  # resumed at batch 2
        np.testing.assert_array_equal(a, b)
    one, two = batches(1, shuffle=False), batches(2, shuffle=False)  # in one order
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a == 0, b == 0)
    assert sum(int(((a == 1) != (b == 1)).sum()) for a, b in zip(one, two)) > 20


def test_skipping_done_batches_keeps_the_options_and_skips(pairs, tokenizer):
    """train() feeds fit ``skip_done(pipeline)``: it must keep autotuning off (its new outer
    dataset once had the defaults, and every freed epoch iterator waited seconds), and skip
    the batches that ``DataPosition`` says were done, read as each pass begins."""
    ds = make_translation_dataset(pairs, tokenizer, batch_tokens=512, max_length=64,
                                  shuffle=False)
    position = DataPosition()
    skipping = skip_done(ds, position)
    assert skipping.options().autotune.enabled is False
    everything = [labels.numpy().tolist() for _, labels in ds]
    assert [labels.numpy().tolist() for _, labels in skipping] == everything
    position.set(0, skip=2)
    assert [labels.numpy().tolist() for _, labels in skipping] == everything[2:]


@pytest.mark.parametrize("streamed, part", [(False, None), (True, None), (True, (1, 2))],
                         ids=["in_memory", "streamed", "a_workers_part_streamed"])
def test_a_pass_resumes_at_any_batch_without_making_the_windows_before(
        pairs, tokenizer, tmp_path, streamed, part):
    """A resumed run starts its pass where its backup's position says: in the window of the
    last batch done, after that window's batches done (``DataPosition.window_of``, from the
    pass's log). It gives the rest of the epoch batch for batch, the CMLM's masks included,
    and reads no pair of the windows before (``DataCounts``). A backup without the window (from
    before) rebuilds the batches done and drops them, to the same. So does a worker's part
    under multi_worker (its shard of the files), which each worker resumes from its own backup
    (tests/training/test_distributed.py kills and resumes a cluster whole)."""
    from zoo.models.nat.objectives import CMLMObjective

    data = pairs[:240]
    if streamed:  # two shards of 120 lines: pieces of 12, windows of 4 pieces
        for side, language in enumerate(("en", "de")):
            for shard in range(2):
                lines = [pair[side] + "\n" for pair in data[shard * 120 : (shard + 1) * 120]]
                (tmp_path / f"train.{shard}.{language}").write_text("".join(lines))
        data = ParallelCorpus([(str(tmp_path / "train.*.en"), str(tmp_path / "train.*.de"))])
    counts = DataCounts()

    def run(done=0, window=None):
        position = DataPosition()
        ds = make_translation_dataset(data, tokenizer, batch_tokens=256, max_length=32, seed=3,
                                      epoch=position, shuffle_buffer=48, counts=counts,
                                      objective=CMLMObjective(32, EOS_ID, max_offset=8),
                                      part=part)
        ds = skip_done(ds, position)  # train()'s: the pass skips by itself
        position.set(1, done, window)
        before = int(counts.read.numpy())
        made = [[t.numpy() for t in tf.nest.flatten(batch)] for batch in ds]
        return made, position, int(counts.read.numpy()) - before

    def assert_same(made, expected):
        assert len(made) == len(expected)
        for a, b in zip(made, expected):
            for x, y in zip(a, b):
                np.testing.assert_array_equal(x, y)

    total = 240 if part is None else 120  # a part: one shard of the two
    full, position, read = run()
    assert read == total
    logged = position.log.numpy()[: len(full)].tolist()
    assert [row[:2] for row in logged] == [[1, n] for n in range(len(full))]
    windows = [row[2] for row in logged]
    assert windows == sorted(windows) and windows[-1] == (total - 1) // 48  # windows of 48
    for done in sorted(np.random.default_rng(0).choice(range(1, len(full)), 3, replace=False)):
        where = position.window_of(1, int(done))
        assert where == (windows[done - 1], windows[: done].count(windows[done - 1]))
        made, _, read = run(int(done), where)
        assert_same(made, full[done:])
        assert read == total - 48 * where[0], (done, where)  # from its window on
    made, _, read = run(int(done))  # the window not known: rebuilt
    assert_same(made, full[done:])
    assert read == total
