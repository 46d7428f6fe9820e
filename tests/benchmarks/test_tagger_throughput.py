"""benchmarks/tagger_throughput.py on a tiny exported tagger and a few EWT sentences.

The tagger has random weights and 8 positions, so that some test sentences are tagged in
several windows by both paths; the tags of the two paths must agree word for word.
"""

import importlib.util
import os

import keras
import pytest

from zoo.data import TaggerVocabulary
from tests.models.tagger_reference import tag_sentences
from tests.models.test_tagger_task import ewt  # EWT read once per process
from zoo.models import Tagger, build_tagger, tagger_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load_benchmark():
    path = os.path.join(ROOT, "benchmarks", "tagger_throughput.py")
    spec = importlib.util.spec_from_file_location("tagger_throughput", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load_benchmark()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    vocabulary = TaggerVocabulary.build(ewt("train")[:300], max_word_length=10)
    keras.utils.set_random_seed(0)
    model = build_tagger(tagger_config("tiny", max_length=8, **vocabulary.config_overrides()))
    tagger = Tagger.from_backbone(model, vocabulary)
    return tagger.export_serving(tmp_path_factory.mktemp("bench") / "tagger")


@pytest.fixture(scope="module")
def loaded(model_dir):
    """``bench.load_tagger(model_dir)``, loaded once: each load reads the SavedModel and traces
    the Python path's tagging again."""
    return bench.load_tagger(model_dir)


@pytest.fixture(scope="module")
def texts():
    # 70 sentences: two batches of 64 and 6; some longer than the 8-word window.
    texts = [" ".join(s.words) for s in ewt("test")[:70]]
    assert any(len(t.split()) > 8 for t in texts)
    return texts


def test_both_paths_tag_every_word_alike_and_the_figures_add_up(loaded, texts):
    model, vocabulary, serving = loaded
    result = bench.measure_throughput(model, vocabulary, serving, texts, rounds=2, warmup=0)
    words = sum(len(t.split()) for t in texts)
    assert result["words"] == words
    assert result["agreement"] == 1.0
    for name in (bench.SERVING, bench.PYTHON):
        assert result["seconds"][name] > 0
        assert result["tokens_per_second"][name] == pytest.approx(words / result["seconds"][name])
    assert result["ratio"] == pytest.approx(
        result["tokens_per_second"][bench.SERVING] / result["tokens_per_second"][bench.PYTHON]
    )


def test_the_two_paths_are_the_serving_model_and_tag_sentences(loaded, texts):
    model, vocabulary, serving = loaded
    batch = texts[:5]
    expected = tag_sentences(model.backbone, vocabulary, [t.split() for t in batch])
    assert bench.serving_tags(serving, batch) == expected
    assert bench.python_tags(model, vocabulary, batch) == expected
    assert [len(t) for t in expected] == [len(t.split()) for t in batch]


def test_batches_are_consecutive_sentences_of_at_most_the_batch_size():
    texts = [f"s{i}" for i in range(130)]
    batches = bench.batches_of(texts, 64)
    assert [len(b) for b in batches] == [64, 64, 2]
    assert [t for b in batches for t in b] == texts


def test_a_folder_without_the_export_is_named(tmp_path):
    (tmp_path / "vocabulary.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="model.keras, serving"):
        bench.load_tagger(str(tmp_path))


def test_replace_section_removes_only_its_own_section(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text("## Other\n\nkeep 1\n\n## Mine\n\nold row\n\n## Last\n\nkeep 2\n\n")
    bench.replace_section("Mine", str(path))
    assert path.read_text() == "## Other\n\nkeep 1\n\n## Last\n\nkeep 2\n\n"
    bench.replace_section("Absent", str(path))
    assert path.read_text() == "## Other\n\nkeep 1\n\n## Last\n\nkeep 2\n\n"
    bench.replace_section("Last", str(path))  # the last section: a blank line stays before
    assert path.read_text() == "## Other\n\nkeep 1\n\n"  # whatever is appended next
    bench.replace_section("Other", str(path))
    assert path.read_text() == ""


def test_main_replaces_its_results_section(model_dir, loaded, texts, tmp_path, monkeypatch,
                                           capsys):  # fmt: skip
    sentences = list(ewt("test")[: len(texts)])
    monkeypatch.setattr(bench, "load_ud_english_ewt", lambda split: sentences)
    # The folder that --model-dir names, loaded once for both runs (load_tagger: above).
    monkeypatch.setattr(bench, "load_tagger", {str(model_dir): loaded}.__getitem__)
    results = tmp_path / "RESULTS.md"
    results.write_text(f"## Other\n\nkeep\n\n## {bench.TITLE}\n\nan old table\n")
    monkeypatch.setattr(bench.common, "RESULTS", str(results))
    for _ in range(2):
        bench.main(["--model-dir", str(model_dir), "--rounds", "1"])
    text = results.read_text()
    assert text.startswith("## Other\n\nkeep\n\n")
    assert text.count(f"## {bench.TITLE}") == 1
    assert "an old table" not in text
    assert f"{len(texts)} sentences" in text and "tags equal on 100.00% of the words" in text
    assert text.count(f"| {bench.SERVING} |") == 1 and text.count(f"| {bench.PYTHON} |") == 1
    assert "serving / Python" in capsys.readouterr().out
