"""Terminal scenarios: init + oracle passes the verifier, init alone fails it (real bash)."""

import subprocess

from arcforge.world.tasks.terminal_scenarios import FAMILIES


def _run(script: str, cwd) -> int:
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, capture_output=True, timeout=30
    ).returncode


def test_oracle_passes_and_empty_fails(world, tmp_path):
    tasks = world.tasks("terminal", "train") + world.tasks("terminal", "test")
    by_family = {}
    for t in tasks:
        by_family.setdefault(t.metadata["family"], t)
    assert set(by_family) == set(FAMILIES) and len(FAMILIES) >= 5
    for fam, t in by_family.items():
        for with_solution in (True, False):
            d = tmp_path / f"{fam}-{with_solution}"
            d.mkdir()
            assert _run("set -e\n" + t.context["init_script"], d) == 0
            if with_solution:
                assert _run(t.metadata["solution"], d) == 0
            assert (_run(t.validation.verify_script, d) == 0) is with_solution, fam


def test_every_family_is_held_out_by_instruction(world):
    from arcforge.world.tasks.terminal_scenarios import COPY_FAMILIES

    train, test = world.tasks("terminal", "train"), world.tasks("terminal", "test")
    # scale 0.1: 42 train and 10 test tasks; every family is in both splits
    assert {t.metadata["family"] for t in test} == set(FAMILIES)
    assert {t.metadata["family"] for t in train} == set(FAMILIES)
    assert not {t.instruction for t in train} & {t.instruction for t in test}
    # the first len(FAMILIES) test tasks are one of each family (interleaved)
    assert len({t.metadata["family"] for t in test[: len(FAMILIES)]}) == len(FAMILIES)
    for t in test:
        # the solution depends on the instruction only: the expert's look command and
        # solution name the slots the instruction names
        assert t.metadata["look"].split()[-1].rstrip("/").split("/")[0] in t.instruction
        assert t.difficulty == (0.75 if t.metadata["family"] in COPY_FAMILIES else 0.5)


def test_fresh_slots_take_made_up_values_that_the_oracle_and_verifier_use(tmp_path):
    import random

    from arcforge.world.knowledge.names import NameBank
    from arcforge.world.tasks.terminal_scenarios import make_scenario

    usual = {
        "data",
        "logs",
        "runs",
        "ERROR",
        "FATAL",
        "out.txt",
        "answer.txt",
        "sales.csv",
        "price",
        "docs",
        "notes",
        "store",
        "cache",
        "conf",
        "inbox",
        "archive",
    }
    rng, nb = random.Random(3), NameBank(random.Random(4))
    for fam in FAMILIES:
        made_up = 0
        for i in range(6):
            s = make_scenario(rng, nb, fam, 1.0)
            words = set(s.instruction.replace("/", " ").rstrip(".").split())
            assert not words & usual, (fam, s.instruction)
            fresh = {u.lower() for u in nb.used_words}
            made_up += any(
                w.removesuffix(".txt").removesuffix(".csv").lower() in fresh for w in words
            )
            if i == 0:  # the oracle and the verifier name the made-up slots too
                for with_solution in (True, False):
                    d = tmp_path / f"{fam}-{with_solution}"
                    d.mkdir()
                    assert _run("set -e\n" + s.init_script, d) == 0
                    if with_solution:
                        assert _run(s.solution, d) == 0
                    assert (_run(s.verify_script, d) == 0) is with_solution, fam
        assert made_up == 6, fam
