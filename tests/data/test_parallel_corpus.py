"""ParallelCorpus: the scan of each file, the errors it names, and the stream of an epoch
(its order a function of the seed and the epoch, every pair once)."""

import collections
import gzip
import shutil

import pytest
import tensorflow as tf

from zoo.data import file_scan
from zoo.data.parallel_corpus import (
    ParallelCorpus,
    data_error,
    fingerprint_change,
    scan_file,
)


def _write(path, lines, gzipped=False, end="\n"):
    text = "".join(line + end for line in lines).encode("utf-8")
    if gzipped:
        text = gzip.compress(text)
    path.write_bytes(text)
    return path


def _corpus_files(folder, count, name="train", shards=1, gzipped=False, mark="s"):
    """``count`` numbered pairs in ``shards`` twin files: source "s7", target "t7"."""
    suffix = ".gz" if gzipped else ""
    per_shard = -(-count // shards)
    for shard in range(shards):
        numbers = range(shard * per_shard, min(count, (shard + 1) * per_shard))
        _write(folder / f"{name}.{shard}.en{suffix}", [f"{mark}{i}" for i in numbers], gzipped)
        _write(folder / f"{name}.{shard}.de{suffix}", [f"t{i}" for i in numbers], gzipped)
    return str(folder / f"{name}.*.en{suffix}"), str(folder / f"{name}.*.de{suffix}")


def _sources(dataset):
    return [s.numpy().decode() for s, _ in dataset]


# ---------------------------------------------------------------- the scan
@pytest.mark.parametrize(
    "data, lines",
    [(b"", 0), (b"a\n", 1), (b"a\nb", 2), (b"a\r\nb\r\n", 2), (b"\n\n", 2),
     (b"\xef\xbb\xbfa\nb\n", 2)],  # fmt: skip
)
def test_a_scan_counts_lines_as_tf_data_reads_them(tmp_path, data, lines):
    path = tmp_path / "f.txt"
    path.write_bytes(data)
    assert scan_file(path).lines == lines == sum(1 for _ in tf.data.TextLineDataset(str(path)))


def test_a_scan_reads_gzip_members_and_characters_cut_by_its_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(file_scan, "_CHUNK", 5)  # every 3-byte character is cut somewhere
    lines = ["αβγ δ", "€€€", "ok"]
    path = tmp_path / "f.gz"
    path.write_bytes(gzip.compress("αβγ δ\n€€€\n".encode()) + gzip.compress(b"ok\n"))
    record = scan_file(path)
    assert (record.lines, record.gzipped) == (3, True)
    assert ParallelCorpus([(path, path)]).read_pairs() == [(line, line) for line in lines]


@pytest.mark.parametrize("gzipped", [False, True])
def test_invalid_utf8_is_named_by_file_line_and_column(tmp_path, gzipped):
    data = b"fine\nalso fine\nbad \xff here\n"
    path = tmp_path / "f.txt"
    path.write_bytes(gzip.compress(data) if gzipped else data)
    with pytest.raises(ValueError, match=r"f\.txt, line 3: invalid UTF-8 \(byte 0xff at byte "
                       r"column 5"):  # fmt: skip
        scan_file(path)


def test_a_truncated_gzip_file_is_refused_by_the_scan(tmp_path):
    path = tmp_path / "f.gz"
    path.write_bytes(gzip.compress(("x" * 50 + "\n").encode() * 1000)[:-30])
    with pytest.raises(ValueError, match=r"f\.gz: a truncated gzip file"):
        scan_file(path)


# ---------------------------------------------------------------- the corpus
def test_twins_with_other_line_counts_are_named_with_both_counts(tmp_path):
    source = _write(tmp_path / "a.en", ["one", "two", "three"])
    target = _write(tmp_path / "a.de", ["eins", "zwei"])
    with pytest.raises(ValueError, match=rf"--train: the files are not line-aligned: {source} "
                       rf"has 3 lines but {target} has 2"):  # fmt: skip
        ParallelCorpus([(source, target)])


def test_globs_pair_sorted_shards_and_refuse_what_has_no_twin(tmp_path):
    source, target = _corpus_files(tmp_path, 10, shards=3, gzipped=True)
    corpus = ParallelCorpus([(source, target)])
    assert [s.path.rsplit("/", 1)[1] for _, s, _ in corpus.shards] == [
        "train.0.en.gz", "train.1.en.gz", "train.2.en.gz"]  # fmt: skip
    assert corpus.read_pairs() == [(f"s{i}", f"t{i}") for i in range(10)]
    with pytest.raises(FileNotFoundError, match=r"--valid .*nothing\.\*\.en: no file matches"):
        ParallelCorpus([(str(tmp_path / "nothing.*.en"), target)], flag="--valid")
    (tmp_path / "train.0.de.gz").unlink()
    with pytest.raises(ValueError, match="3 files match the source and 2 the target"):
        ParallelCorpus([(source, target)])


def test_weights_are_given_to_every_corpus_or_none(tmp_path):
    first, second = _corpus_files(tmp_path, 4, "a"), _corpus_files(tmp_path, 4, "b")
    with pytest.raises(ValueError, match="give a weight to every corpus or to none"):
        ParallelCorpus([(*first, 2.0), second])
    with pytest.raises(ValueError, match="a weight must be a positive number"):
        ParallelCorpus([(*first, 0.0), (*second, 1.0)])


def test_a_fingerprint_is_the_same_at_another_path_and_names_a_changed_file(tmp_path):
    (tmp_path / "one").mkdir()
    _corpus_files(tmp_path / "one", 6)
    shutil.copytree(tmp_path / "one", tmp_path / "two")
    one = ParallelCorpus([_corpus_files_glob(tmp_path / "one")]).fingerprint()
    two = ParallelCorpus([_corpus_files_glob(tmp_path / "two")]).fingerprint()
    assert fingerprint_change(one, two, "w/data.json") is None
    _write(tmp_path / "two" / "train.0.de", [f"t{i}" for i in range(5)] + ["changed"])
    changed = ParallelCorpus([_corpus_files_glob(tmp_path / "two")]).fingerprint()
    assert fingerprint_change(one, changed, "w/data.json").startswith(
        "w/data.json: train.0.de is not the file this run started on")


def _corpus_files_glob(folder):
    return str(folder / "train.*.en"), str(folder / "train.*.de")


# ---------------------------------------------------------------- the stream
def test_an_epoch_is_every_pair_once_in_an_order_drawn_from_the_seed_and_the_epoch(tmp_path):
    # 3 shards cut into pieces of 4 lines, shuffled in windows of 4: many pieces, many windows.
    corpus = ParallelCorpus([_corpus_files(tmp_path, 30, shards=3)])
    epoch = tf.Variable(0, dtype=tf.int64)
    stream = corpus.lines(seed=5, epoch=epoch, shuffle_buffer=4)
    orders = []
    for value in (0, 1, 0):
        epoch.assign(value)
        orders.append(_sources(stream))
    assert sorted(orders[0]) == sorted(orders[1]) == sorted(f"s{i}" for i in range(30))
    assert orders[0] == orders[2] != orders[1]
    # A fresh process (a new stream) at epoch 1 sees epoch 1's order; another seed, another.
    fresh = ParallelCorpus([_corpus_files_glob(tmp_path)])
    assert _sources(fresh.lines(seed=5, epoch=tf.Variable(1, dtype=tf.int64),
                                shuffle_buffer=4)) == orders[1]  # fmt: skip
    assert _sources(fresh.lines(seed=6, epoch=tf.Variable(1, dtype=tf.int64),
                                shuffle_buffer=4)) != orders[1]  # fmt: skip
    assert _sources(corpus.lines(shuffle=False)) == [f"s{i}" for i in range(30)]


def test_a_corpus_within_one_window_is_permuted_whole(tmp_path):
    corpus = ParallelCorpus([_corpus_files(tmp_path, 40)])
    order = _sources(corpus.lines(seed=0, shuffle_buffer=100))
    assert sorted(order) == sorted(f"s{i}" for i in range(40))
    # Not pieces kept in file order: the first ten come from all over the file.
    assert max(int(s[1:]) for s in order[:10]) >= 20


def test_weighted_corpora_are_mixed_by_their_weights(tmp_path):
    heavy = _corpus_files(tmp_path, 200, "heavy", mark="h")
    light = _corpus_files(tmp_path, 200, "light", mark="l")
    corpus = ParallelCorpus([(*heavy, 3.0), (*light, 1.0)])
    drawn = _sources(corpus.lines(seed=1, shuffle_buffer=50))
    assert len(drawn) == corpus.num_pairs == 400  # an epoch: as many pairs as both hold
    share = collections.Counter(s[0] for s in drawn)["h"] / len(drawn)
    assert 0.68 < share < 0.82  # 3 in 4, drawn: the binomial's sd is 0.02
    # The heavy corpus is read again, each time in another order.
    assert len(set(s for s in drawn if s[0] == "h")) < collections.Counter(
        s[0] for s in drawn)["h"]
    assert drawn == _sources(corpus.lines(seed=1, shuffle_buffer=50))


def _file_of(folder, source):
    """The shard file that holds the line ``source``."""
    return next(p.name for p in folder.glob("train.*.en") if source in p.read_text().split())


@pytest.mark.parametrize("shards, by_file", [(4, True), (2, True), (1, False)])
def test_parts_of_an_epoch_are_disjoint_and_whole_by_file_or_by_line(tmp_path, shards, by_file):
    corpus = ParallelCorpus([_corpus_files(tmp_path, 30, shards=shards)])
    epoch = tf.Variable(3, dtype=tf.int64)
    parts = [_sources(corpus.lines(seed=2, epoch=epoch, shuffle_buffer=4, part=(i, 2)))
             for i in range(2)]  # fmt: skip
    assert sorted(parts[0] + parts[1]) == sorted(f"s{i}" for i in range(30))
    assert not set(parts[0]) & set(parts[1])
    files = [{_file_of(tmp_path, s) for s in part} for part in parts]
    if by_file:  # each shard read by one part alone: the even shards, the odd ones
        assert files == [{f"train.{k}.en" for k in range(i, shards, 2)} for i in range(2)]
    else:  # by line: every other line of one shared order, so both halves of every file
        assert files[0] == files[1] and abs(len(parts[0]) - len(parts[1])) <= 1
    assert [corpus.part_pairs(list(range(shards)), (i, 2)) for i in range(2)] == [
        len(part) for part in parts]
    # Unshuffled (validation), the parts are those of the files in order.
    plain = [_sources(corpus.lines(shuffle=False, part=(i, 2))) for i in range(2)]
    assert sorted(plain[0] + plain[1]) == sorted(parts[0] + parts[1])
    with pytest.raises(ValueError, match="part must be"):
        corpus.lines(part=(2, 2))


def test_a_part_of_weighted_corpora_is_as_long_as_its_shards_hold(tmp_path):
    heavy = _corpus_files(tmp_path, 40, "heavy", shards=2, mark="h")
    light = _corpus_files(tmp_path, 20, "light", mark="l")
    corpus = ParallelCorpus([(*heavy, 3.0), (*light, 1.0)])
    drawn = [_sources(corpus.lines(seed=1, shuffle_buffer=8, part=(i, 2))) for i in range(2)]
    assert [len(part) for part in drawn] == [20 + 10, 20 + 10]  # a heavy shard, half the light
    light_lines = [{s for s in part if s[0] == "l"} for part in drawn]
    assert not light_lines[0] & light_lines[1]  # by line: every other line of the light one
    heavy_lines = [{s for s in part if s[0] == "h"} for part in drawn]
    assert not heavy_lines[0] & heavy_lines[1]  # by file: one shard each


def test_a_file_truncated_after_the_scan_fails_the_stream_naming_both_files(tmp_path):
    source = _write(tmp_path / "a.en.gz", [f"s{i}" for i in range(12)], gzipped=True)
    target = _write(tmp_path / "a.de.gz", [f"t{i}" for i in range(12)], gzipped=True)
    corpus = ParallelCorpus([(source, target)])
    _write(target, [f"t{i}" for i in range(7)], gzipped=True)  # replaced by a shorter file
    with pytest.raises(tf.errors.OpError) as caught:
        _sources(corpus.lines(seed=0, shuffle_buffer=5))
    message = data_error(caught.value)
    assert message.startswith(f"{source} and {target}: lines ")
    assert "fix or restore the files, then rerun the same command to resume" in message


def test_the_vocabulary_sample_is_both_sides_of_pairs_drawn_uniformly(tmp_path):
    corpus = ParallelCorpus([_corpus_files(tmp_path, 30, shards=3)])
    sample = corpus.sample_sentences(10, seed=3)
    pairs = list(zip(sample[::2], sample[1::2]))
    assert len(pairs) == 5 and all(s[1:] == t[1:] for s, t in pairs)  # twins, both sides
    assert sample == corpus.sample_sentences(10, seed=3) != corpus.sample_sentences(10, seed=4)
    assert len(corpus.sample_sentences(1000)) == 60  # the whole corpus when it is smaller
