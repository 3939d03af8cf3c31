"""Mid-training data: schedule validation, repo sequences (incl. a real git repo), long context,
and the weighted mixture."""

from __future__ import annotations

import subprocess

import pytest

from arcforge.data.midtrain import (
    ContextStage,
    Ingredient,
    LongItem,
    build_midtrain_docs,
    git_repo_sequences,
    natural_long_docs,
    repo_sequence,
    synthetic_long_doc,
    validate_schedule,
)


def test_schedule_validation():
    ok = validate_schedule(
        [
            {"seq_len": 128, "tokens": 1000, "rope_theta": 1e4},
            ContextStage(seq_len=512, tokens=10, rope_theta=5e4),
        ]
    )
    assert [s.seq_len for s in ok] == [128, 512]
    with pytest.raises(ValueError, match="stage 1: seq_len 64 < previous 128"):
        validate_schedule(
            [
                {"seq_len": 128, "tokens": 1, "rope_theta": 1e4},
                {"seq_len": 64, "tokens": 1, "rope_theta": 1e4},
            ]
        )
    with pytest.raises(ValueError, match="stage 0"):
        validate_schedule([{"seq_len": 128, "tokens": 0, "rope_theta": 1e4}])
    with pytest.raises(ValueError, match="empty"):
        validate_schedule([])


def test_repo_sequence_exact():
    seq = repo_sequence({"b.py": "x = 2\n", "a.py": "y = 1"}, "x is wrong", "-x = 2\n+x = 3\n")
    assert seq == (
        "<file path=a.py>\ny = 1\n</file>\n"
        "<file path=b.py>\nx = 2\n</file>\n"
        "<issue>\nx is wrong\n</issue>\n"
        "<diff>\n-x = 2\n+x = 3\n</diff>\n"
    )
    assert repo_sequence({"a.py": "1"}, None, None) == "<file path=a.py>\n1\n</file>\n"


def _git(repo, *args):
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
    )


def test_git_repo_sequences(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "README.md").write_text("calc\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "initial calc")
    (repo / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    _git(repo, "commit", "-q", "-am", "add() subtracts instead of adding")
    (repo / "README.md").write_text("calc, a library\n")
    _git(repo, "commit", "-q", "-am", "docs only")  # no code -> no sequence
    (repo / "util.py").write_text("def neg(x):\n    return -x\n")
    (repo / "calc.py").write_text("from util import neg\n\ndef add(a, b):\n    return a + b\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "add neg helper")

    seqs = git_repo_sequences(repo)
    assert len(seqs) == 3
    root, fix, helper = seqs
    # Root commit: no earlier state, so no file section; the diff creates the files.
    assert root.startswith("<issue>\ninitial calc\n</issue>\n<diff>\ndiff --git a/README.md")
    # The fix shows calc.py as it was before (the buggy version), the message, then the patch.
    assert fix.startswith("<file path=calc.py>\ndef add(a, b):\n    return a - b\n</file>\n")
    assert "<issue>\nadd() subtracts instead of adding\n</issue>" in fix
    assert "-    return a - b\n+    return a + b" in fix
    # A file the commit creates is only in the diff.
    assert "<file path=util.py>" not in helper and "+++ b/util.py" in helper
    assert "<file path=calc.py>\ndef add(a, b):\n    return a + b\n</file>" in helper
    assert git_repo_sequences(repo, max_commits=1) == [helper]
    with pytest.raises(ValueError, match="not a git repository"):
        git_repo_sequences(tmp_path)


def test_natural_long_docs():
    texts = ["a" * 40, "b" * 40, "c" * 40, "d" * 40, "e" * 10]
    # Each doc counts len + 2 (separator): 42, 84 >= 80 -> cut; again; "e" 12 < 40 dropped.
    docs = natural_long_docs(texts, target_chars=80)
    assert docs == ["a" * 40 + "\n\n" + "b" * 40, "c" * 40 + "\n\n" + "d" * 40]


def test_synthetic_long_doc_answer_follows_question():
    items = [
        LongItem("Ada lives in Brenwick. ... filler ...", "Where does Ada live?", "Brenwick"),
        ("The code is 7431.", "What is the code?", "7431"),
    ]
    doc = synthetic_long_doc(items)
    assert doc == (
        "Ada lives in Brenwick. ... filler ...\n\nThe code is 7431.\n\n"
        "Question: Where does Ada live?\nAnswer: Brenwick\n"
        "Question: What is the code?\nAnswer: 7431\n"
    )
    assert (
        doc.index("Ada lives") < doc.index("Where does Ada live?") < doc.index("Answer: Brenwick")
    )


def test_build_midtrain_docs_shares_and_determinism():
    repo = Ingredient("repo", [f"r{i}" * 10 for i in range(5)], weight=3)  # docs of 20 chars
    longc = Ingredient("long", [f"L{i}" * 50 for i in range(5)], weight=1)  # docs of 100 chars
    mix = build_midtrain_docs([repo, longc], total_chars=400, seed=0)
    # repo: budget 300 -> 15 docs of 20 chars (5 docs cycled 3 times); long: budget 100 -> 1 doc.
    assert mix.chars == {"repo": 300, "long": 100}
    assert len(mix.docs) == 16
    assert sorted(d for d in mix.docs if d.startswith("r")) == sorted(repo.docs * 3)
    again = build_midtrain_docs([repo, longc], total_chars=400, seed=0)
    assert again.docs == mix.docs
    assert build_midtrain_docs([repo, longc], total_chars=400, seed=1).docs != mix.docs
    with pytest.raises(ValueError, match="without documents"):
        build_midtrain_docs([Ingredient("x", [])], total_chars=10, seed=0)
