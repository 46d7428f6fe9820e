"""The command line, on the shipped tagger: `zoo tag`, and clear exits on a wrong workdir."""

import os

import pytest

from tests.harness import REPO_ROOT
from zoo.cli import main

SHIPPED_TAGGER = os.path.join(REPO_ROOT, "saved_models", "tagger-en-ewt")


def test_tag_prints_word_slash_tag_per_sentence(capsys):
    main(["tag", "--workdir", SHIPPED_TAGGER, "I want to book a flight .", "She read a good book ."])
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].split() == [
        "I/PRON", "want/VERB", "to/PART", "book/VERB", "a/DET", "flight/NOUN", "./PUNCT"
    ]
    assert lines[-1].split()[-2:] == ["book/NOUN", "./PUNCT"]


def test_a_workdir_without_a_model_exits_with_a_message(tmp_path):
    with pytest.raises(SystemExit, match="no trained model"):
        main(["tag", "--workdir", str(tmp_path), "a b"])
    with pytest.raises(SystemExit, match="no trained model"):
        main(["evaluate", "tagger", "--workdir", str(tmp_path)])
