"""`swebench:<file.jsonl>`: SWE-bench-schema instances (as `arcforge synth swe` writes them, or
any SWE-bench record with a local clone in `repo_path`), the model as the agent in each
instance's environment, graded by FAIL_TO_PASS / PASS_TO_PASS.

SWE-bench's own instances need its Docker images; these need only a local clone: the instance
is graded exactly as `arcforge env check` grades it (arcforge.envs.check, swe_repo_env.py: the
repository at `base_commit` with no future, installed in the environment of
`environment_setup_commit`). The scaffold, `arcforge-swe-v1`: the SWE environment's tools
(localize, view_function, replace_function, view_file, search_code, edit_file, run_tests,
bash; observations cut to 8000 characters), a system prompt, up to `turns` replies (`?turns=`,
default 30); the reply length is the responder's own limit. A reply without tool calls ends
the episode.

Grading: the environment runs the F2P and P2P test files under pytest in the sanitised
workspace (the hidden test files put back) and reads the JUnit report; the per-test statuses
then go through the official `swebench` package's grading (`get_eval_tests_report`,
`get_resolution_status`), and an item scores 1 when that is RESOLVED_FULL. The environment
reports at most 20 tests that did not pass; a test it does not list passed. The baseline is the
empty patch: the tests on the untouched base commit (`?baseline=0` skips it). An instance that
cannot be graded here (no clone, a non-pytest test command, a failed environment install) is
left out of the score and named in meta["skipped"].
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from arcforge.errors import UserError
from arcforge.eval.external.base import (
    ItemResult,
    Responder,
    SuiteResult,
    SuiteSpec,
    drive,
    register,
)

SCAFFOLD = "arcforge-swe-v1"
DEFAULT_TURNS = 30
SYSTEM = (
    "You are a software engineer fixing an issue in the repository in your working directory. "
    "Use the tools to find the cause, edit the code and run the tests. Do not edit the tests. "
    "When the fix is done, reply without calling a tool."
)
# the environment's JUnit statuses -> SWE-bench's TestStatus values
_STATUS = {"passed": "PASSED", "failed": "FAILED", "error": "ERROR", "skipped": "SKIPPED"}


def load_instances(path: Path) -> list[dict[str, Any]]:
    """The instance records of a JSONL file (a JSON array or one object also work)."""
    if not path.is_file():
        raise UserError(f"swebench: {path} is not a file of SWE-bench instances")
    text = path.read_text().strip()
    try:
        if text.startswith("["):
            recs = json.loads(text)
        elif path.suffix == ".jsonl" or "\n" in text:
            recs = [json.loads(x) for x in text.splitlines() if x.strip()]
        else:
            recs = [json.loads(text)]
    except json.JSONDecodeError as err:
        raise UserError(f"swebench: {path} is not JSON lines: {err}") from None
    bad = [i for i, r in enumerate(recs) if not isinstance(r, dict) or "instance_id" not in r]
    if bad or not recs:
        raise UserError(
            f"swebench: {path}: records {bad[:5]} have no instance_id"
            if bad
            else f"swebench: {path} holds no instance"
        )
    return recs


def official_verdict(details: dict[str, Any], f2p: list[str], p2p: list[str]) -> dict[str, Any]:
    """The official swebench grading of the environment's per-test statuses."""
    from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS
    from swebench.harness.grading import get_eval_tests_report, get_resolution_status

    not_passed = details.get("not_passed") or {}
    status = {}
    for test in [*f2p, *p2p]:
        s = not_passed.get(test, "passed")
        if s in _STATUS:  # "missing": not in the report, as SWE-bench's log parser leaves it
            status[test] = _STATUS[s]
    report = get_eval_tests_report(status, {FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p})
    return {"resolution": get_resolution_status(report), "report": report}


class SWEBenchSuite:
    """The `swebench:<file.jsonl>` suite (see the module docstring)."""

    def __init__(self, spec: SuiteSpec) -> None:
        self.spec = spec
        self.path = Path(spec.arg).expanduser()
        self.records = load_instances(self.path)
        self.turns = spec.int_option("turns", DEFAULT_TURNS)
        self.baseline = spec.int_option("baseline", 1, lo=0) > 0
        self.backend = spec.options.get("backend", "bwrap")

    def attempt(self, task: Any, responder: Responder | None) -> dict[str, Any]:
        """One episode (responder None: the empty patch) and its official verdict."""
        from arcforge.envs.swe_repo_env import task_env
        from arcforge.envs.swe_venv import EnvBuildError

        t0 = time.monotonic()
        out: dict[str, Any] = {}
        try:
            env = task_env(task, self.backend)
        except EnvBuildError as err:
            return {"score": 0.0, "unsupported": f"environment install failed: {err}"}
        except Exception as err:  # e.g. the clone lacks the environment commit
            return {"score": 0.0, "unsupported": f"environment: {type(err).__name__}: {err}"}
        try:
            opening = env.reset(task)
            if responder is not None:
                ep = drive(env, opening, responder, self.turns, None, SYSTEM)
                out.update(turns=ep.turns, stop=ep.stop)
                if ep.error:
                    out["error"] = ep.error
            reward = env.verify()
            v = task.validation
            verdict = official_verdict(reward.details, v.fail_to_pass, v.pass_to_pass)
            full = verdict["resolution"] == "RESOLVED_FULL"
            out.update(
                score=1.0 if full else 0.0,
                resolution=verdict["resolution"],
                env_reward=reward.score,
                f2p=reward.details.get("f2p"),
                p2p=reward.details.get("p2p"),
                not_passed=reward.details.get("not_passed"),
            )
            if not full and reward.details.get("output"):
                out["output"] = reward.details["output"][-600:]
        except Exception as err:  # a sandbox fault fails this instance, not the run
            out.update(score=0.0, error=f"{type(err).__name__}: {err}")
        finally:
            env.close()
        out["seconds"] = round(time.monotonic() - t0, 1)
        return out

    def run(self, responder: Responder) -> SuiteResult:
        from arcforge.envs.check import _swebench_instance

        t0 = time.monotonic()
        items, skipped, empty = [], {}, []
        for rec in self.spec.draw(self.records):
            iid = str(rec["instance_id"])
            try:
                task = _swebench_instance(rec)
            except (ValueError, KeyError, TypeError) as err:
                skipped[iid] = [f"not a SWE-bench instance: {err}"]
                continue
            if task.metadata.get("unsupported"):
                skipped[iid] = list(task.metadata["unsupported"])
                continue
            res = self.attempt(task, responder)
            if "unsupported" in res:
                skipped[iid] = [res["unsupported"]]
                continue
            detail: dict[str, Any] = {"attempt": res}
            if self.baseline:
                base = self.attempt(task, None)
                empty.append(base.get("score", 0.0))
                detail["empty_patch"] = base
            items.append(ItemResult(iid, res["score"], detail))
        meta = {
            "scaffold": SCAFFOLD,
            "turns": self.turns,
            "grading": _swebench_version(),
            "draw": {"n": self.spec.n, "seed": self.spec.seed, "of": len(self.records)},
            "skipped": skipped,
            "wall_s": round(time.monotonic() - t0, 1),
        }
        limit = getattr(responder, "max_new_tokens", None) or getattr(responder, "max_tokens", None)
        if limit:
            meta["max_new_tokens"] = limit
        baselines = {"empty_patch": sum(empty) / len(empty)} if empty else {}
        return SuiteResult(self.spec.name, items, meta, baselines)


def _swebench_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"swebench {version('swebench')} get_resolution_status"
    except PackageNotFoundError:
        return "swebench (not installed)"


@register("swebench")
def _open(spec: SuiteSpec) -> SWEBenchSuite:
    return SWEBenchSuite(spec)
