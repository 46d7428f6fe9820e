"""The tagging task's training data under multi_worker: a worker's part of the sentences."""

import tensorflow as tf

from zoo.data import DataPart, TaggerVocabulary, load_ud_english_ewt
from zoo.tasks.tagging.config import get_config
from zoo.tasks import get_task

TAGGER = get_task("tagger")
SENTENCES = load_ud_english_ewt("dev")[:120]
VOCABULARY = TaggerVocabulary.build(SENTENCES, max_word_length=10)
CONFIG = get_config("tiny", word_dropout=0.0)  # the word ids as they are


def _sentences(ds, budget):
    rows = []
    for features, _ in ds:
        words = features["words"].numpy()
        assert words.size <= budget, words.shape
        rows += [tuple(w[w != 0]) for w in words]
    return sorted(rows)


def test_a_worker_reads_its_part_of_the_sentences_in_batches_of_a_replica_share():
    epoch = tf.Variable(3, dtype=tf.int64)
    whole = _sentences(TAGGER.dataset(CONFIG, VOCABULARY, SENTENCES, True, epoch=epoch),
                       CONFIG.batch_tokens)  # fmt: skip
    # Two workers of two replicas each (4 in the cluster): a replica's batch is a quarter of
    # the word budget, and the parts are disjoint and together the epoch.
    parts = [_sentences(TAGGER.dataset(CONFIG, VOCABULARY, SENTENCES, True, epoch=epoch,
                                       part=DataPart(index, 2, 4)), CONFIG.batch_tokens // 4)
             for index in (0, 1)]  # fmt: skip
    assert abs(len(parts[0]) - len(parts[1])) <= 1
    assert sorted(parts[0] + parts[1]) == whole
