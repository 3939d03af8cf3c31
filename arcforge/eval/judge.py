"""Agent-as-a-judge for front-end work: a judge agent drives the built app in Chromium.

For each project (GLM-5, CC-Bench front-end): identify, build and start it (eval.webproject,
which also gives the build success rate); a project that does not build fails every check with
the build log as the reason. Otherwise, for every check item, a judge model behind any
OpenAI-compatible endpoint (arcforge.llm.LLMClient) runs a ReAct loop with Playwright tools:

    navigate(path)  click(selector)  type(selector, text)  screenshot()  read(path)
    list_files()    finish(verdict: PASS|FAIL, reason)

Tools are typed functions turned into schemas by `Tool.from_function`; calls are executed by the
environments' `execute_call` (arguments validated against the schema; bad calls come back as
`error: ...` observations). Replies are parsed by `parse_openai_message`, so a judge may call
tools natively (OpenAI `tool_calls`, with `native_tools=True` the schemas go in `tools`) or write
our `<tool_call>{...}</tool_call>` format (the default: schemas in the system prompt, which works
with any chat endpoint). Each check gets a fresh page of the process's shared browser (the
agent loop runs on arcforge.browser's thread) that can reach the app and nothing else; `screenshot` saves a PNG and
returns a text snapshot of the page (title, visible text, controls with selectors, console
errors), so text-only judges can see the result too. A judge that never calls finish within
`max_turns` fails the check as undecided. Simplification: images are not sent to the model.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from arcforge.browser import Browser, run_in_browser
from arcforge.chat import parse_openai_message
from arcforge.chat.template import TOOLS_INSTRUCTION, call_json, tool_line
from arcforge.chat.tokens import CALL_CLOSE, CALL_OPEN
from arcforge.envs.base import execute_call
from arcforge.errors import UserError
from arcforge.eval.webproject import LaunchResult, RunningProject, build_success_rate
from arcforge.llm import LLMClient, LLMError
from arcforge.progress import progress
from arcforge.types import Tool

SYSTEM = """You are a meticulous QA engineer judging a web app against one check item.
Use the tools to open the app, interact with it like a user and read its code; then call
finish with verdict PASS only if the behaviour the check describes really happens, else FAIL,
with a one-sentence reason naming what you observed."""
_SNAPSHOT = """() => {
  const sel = el => el.id ? '#' + el.id : el.name ? `${el.tagName.toLowerCase()}[name="${el.name}"]`
      : el.tagName.toLowerCase() + ':nth-of-type(' + ([...el.parentNode.children]
        .filter(c => c.tagName === el.tagName).indexOf(el) + 1) + ')';
  const controls = [...document.querySelectorAll('button, input, select, textarea, a[href]')]
    .slice(0, 30).map(el => `${sel(el)} ${el.tagName.toLowerCase()}` +
      (el.value !== undefined && el.tagName !== 'BUTTON' ? ` value="${el.value}"` : '') +
      (el.innerText ? ` "${el.innerText.trim().slice(0, 40)}"` : ''));
  return {title: document.title, text: document.body ? document.body.innerText : '', controls};
}"""


@dataclass
class CheckItem:
    id: str
    check: str


def load_checks(path: str | Path) -> tuple[str, list[CheckItem]]:
    """(query, check items) from a checks.json: a list of strings or {"id", "check"} objects,
    or {"query": ..., "checks": [...]}."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"checks file {path} does not exist") from None
    except json.JSONDecodeError as err:
        raise UserError(f"checks file {path} is not valid JSON: {err}") from None
    query, items = ("", raw) if isinstance(raw, list) else (raw.get("query", ""), raw.get("checks"))
    if not isinstance(items, list) or not items:
        raise UserError(f"checks file {path}: expected a non-empty list of check items")
    out = []
    for i, it in enumerate(items):
        if isinstance(it, str):
            it = {"id": f"check-{i + 1}", "check": it}
        if not isinstance(it, dict) or not isinstance(it.get("check"), str):
            raise UserError(f'checks file {path}: item {i} must be a string or {{"id", "check"}}')
        out.append(CheckItem(str(it.get("id", f"check-{i + 1}")), it["check"]))
    return query, out


class JudgeTools:
    """The judge's tools, bound to one page, the app's URL and the project's source files."""

    def __init__(self, page: Any, base_url: str, root: Path, shot_dir: Path) -> None:
        self.page, self.base_url, self.root, self.shot_dir = page, base_url, root, shot_dir
        self.verdict: tuple[str, str] | None = None
        self.errors: list[str] = []
        self.shots = 0
        self.inflight: set[Any] = set()
        page.on("request", lambda r: self.inflight.add(r))
        page.on("requestfinished", lambda r: self.inflight.discard(r))
        page.on("requestfailed", lambda r: self.inflight.discard(r))
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text[:200]))
        page.on("pageerror", lambda e: self.errors.append(str(e)[:200]))

    def _state(self) -> str:
        snap = self.page.evaluate(_SNAPSHOT)
        text = " ".join(snap["text"].split())[:1500]
        lines = [
            f"url: {self.page.url}",
            f"title: {snap['title']}",
            f"visible text: {text}",
            "controls: " + ("; ".join(snap["controls"]) or "none"),
        ]
        if self.errors:
            lines.append("console errors: " + " | ".join(self.errors[-5:]))
        return "\n".join(lines)

    def navigate(self, path: str = "/") -> str:
        """Open a page of the app and describe it.

        Args:
            path: path under the app's root URL, e.g. "/" or "/about.html".
        """
        self.page.goto(self.base_url + "/" + path.lstrip("/"), wait_until="load")
        return self._state()

    def click(self, selector: str) -> str:
        """Click an element and describe the page afterwards.

        Args:
            selector: a CSS selector such as "#submit" or "button:nth-of-type(2)".
        """
        self.page.click(selector, timeout=3000)
        self._settle()
        return self._state()

    def _settle(self, quiet_ms: int = 150, max_ms: int = 3000) -> None:
        """Wait until the requests a click started have finished (a page that keeps polling is
        described as it is after max_ms)."""
        deadline, quiet_since = time.monotonic() + max_ms / 1000, None
        while time.monotonic() < deadline:
            if self.inflight:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= quiet_ms / 1000:
                return
            self.page.wait_for_timeout(25)

    def type_text(self, selector: str, text: str) -> str:
        """Replace the value of an input field with text.

        Args:
            selector: a CSS selector of an input or textarea.
            text: the text to enter.
        """
        self.page.fill(selector, text, timeout=3000)
        return f"typed {text!r} into {selector}"

    def screenshot(self) -> str:
        """Save a screenshot and describe what is on screen (text, controls, console errors)."""
        self.shots += 1
        path = self.shot_dir / f"shot-{self.shots:02d}.png"
        self.page.screenshot(path=str(path))
        return f"screenshot saved to {path}\n{self._state()}"

    def read(self, path: str) -> str:
        """Read a source file of the project.

        Args:
            path: file path relative to the project root.
        """
        target = (self.root / path).resolve()
        if not target.is_relative_to(self.root.resolve()) or not target.is_file():
            return f"error: no file {path!r} in the project; call list_files"
        return target.read_text(errors="replace")[:6000]

    def list_files(self) -> str:
        """List the project's files."""
        files = [
            str(p.relative_to(self.root))
            for p in sorted(self.root.rglob("*"))
            if p.is_file() and "node_modules" not in p.parts and ".git" not in p.parts
        ]
        return "\n".join(files[:200])

    def finish(self, verdict: Literal["PASS", "FAIL"], reason: str) -> str:
        """Give the final verdict for the check item.

        Args:
            verdict: PASS when the checked behaviour works, FAIL otherwise.
            reason: one sentence naming what was observed.
        """
        self.verdict = (verdict, reason)
        return "verdict recorded"

    def tools(self) -> list[Tool]:
        names = {
            "navigate": self.navigate,
            "click": self.click,
            "type": self.type_text,
            "screenshot": self.screenshot,
            "read": self.read,
            "list_files": self.list_files,
            "finish": self.finish,
        }
        return [Tool.from_function(fn, name=name) for name, fn in names.items()]


@dataclass
class Verdict:
    check_id: str
    check: str
    verdict: str  # PASS | FAIL
    reason: str
    decided: bool = True
    turns: int = 0
    transcript: list[dict] = field(default_factory=list)


def _reply(client: LLMClient, messages: list[dict], tools: list[Tool] | None) -> dict:
    """One chat completion's message (content plus any native tool_calls)."""
    body: dict[str, Any] = {
        "model": client.model,
        "messages": messages,
        "temperature": 0.0,
        "max_tokens": 1024,
    }
    if tools:
        body["tools"] = [t.schema() for t in tools]
    # _post gives the whole message: LLMClient.chat returns content only, without tool_calls.
    choices = client._post(body).get("choices") or []
    if not choices or not isinstance(choices[0], dict) or "message" not in choices[0]:
        raise LLMError(f"{client.endpoint} answered without a message")
    return choices[0]["message"]


def _system(tools: list[Tool], native: bool) -> str:
    if native:
        return SYSTEM
    return (
        SYSTEM + "\n\n# Tools\n" + "".join(tool_line(t) + "\n" for t in tools) + TOOLS_INSTRUCTION
    )


def _turn_messages(parsed: Any, errors: list[str], results: list[str], native: bool) -> list[dict]:
    """The assistant message of a turn and what it caused, in the request's shape: OpenAI
    tool_calls + tool messages (native), or our tags + one user message of tool responses."""
    if native:
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for c in parsed.tool_calls
        ]
        out = [
            {
                "role": "assistant",
                "content": parsed.content,
                **({"tool_calls": calls} if calls else {}),
            }
        ]
        out += [
            {"role": "tool", "tool_call_id": c.id, "content": r}
            for c, r in zip(parsed.tool_calls, results)
        ]
        if errors or not calls:
            out.append({"role": "user", "content": "\n".join(errors) or "Call a tool, or finish."})
        return out
    calls = "".join(f"{CALL_OPEN}{call_json(c)}{CALL_CLOSE}" for c in parsed.tool_calls)
    body = "\n".join(f"<tool_response>\n{r}\n</tool_response>" for r in errors + results)
    return [
        {"role": "assistant", "content": parsed.content + calls},
        {"role": "user", "content": body or "Call a tool, or finish."},
    ]


def judge_check(
    client: LLMClient,
    jt: JudgeTools,
    check: CheckItem,
    query: str = "",
    max_turns: int = 12,
    native_tools: bool = False,
) -> Verdict:
    """Run the judge agent on one check item; the page behind `jt` is the app under test."""
    tools = jt.tools()
    by_name = {t.name: t for t in tools}
    task = (f"User query: {query}\n" if query else "") + (
        f"Check item: {check.check}\nThe app runs at {jt.base_url}/ (use navigate with a path)."
    )
    messages = [
        {"role": "system", "content": _system(tools, native_tools)},
        {"role": "user", "content": task},
    ]
    for turn in range(1, max_turns + 1):
        parsed = parse_openai_message(_reply(client, messages, tools if native_tools else None))
        errors = [f"error: malformed tool call: {e}" for e in parsed.errors]
        results = []
        for k, call in enumerate(parsed.tool_calls):
            call.id = call.id or f"call_{turn}_{k}"
            results.append(execute_call(call, by_name).content)
        messages += _turn_messages(parsed, errors, results, native_tools)
        if jt.verdict is not None:
            verdict, reason = jt.verdict
            return Verdict(check.id, check.check, verdict, reason, True, turn, messages)
    return Verdict(
        check.id,
        check.check,
        "FAIL",
        f"undecided: no verdict within {max_turns} turns",
        False,
        max_turns,
        messages,
    )


@dataclass
class JudgeReport:
    project: str
    launch: LaunchResult
    verdicts: list[Verdict]

    @property
    def pass_rate(self) -> float:
        return sum(v.verdict == "PASS" for v in self.verdicts) / max(1, len(self.verdicts))

    def to_dict(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "launch": asdict(self.launch),
            "pass_rate": self.pass_rate,
            "verdicts": [asdict(v) for v in self.verdicts],
        }


def _judge_item(
    browser: Browser,
    client: LLMClient,
    base_url: str,
    root: Path,
    shots: Path,
    item: CheckItem,
    query: str,
    max_turns: int,
    native_tools: bool,
) -> Verdict:
    """One check item in a fresh page that may reach the app (loopback) and nothing else."""
    with browser.fresh_page(1280, 800) as page:
        page.route(
            "**/*", lambda r: r.continue_() if r.request.url.startswith(base_url) else r.abort()
        )
        jt = JudgeTools(page, base_url, root, shots)
        return judge_check(client, jt, item, query, max_turns, native_tools)


def judge_project(
    root: str | Path,
    client: LLMClient,
    checks: str | Path | None = None,
    out_dir: str | Path | None = None,
    max_turns: int = 12,
    native_tools: bool = False,
) -> JudgeReport:
    """Build, start and judge one project on every check item.

    Args:
        checks: the checks file (default: the project's checks.json).
        out_dir: where screenshots go (default: a new temporary directory).
    """
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"project directory {root} does not exist")
    query, items = load_checks(checks or root / "checks.json")
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="arcforge-judge-"))
    out.mkdir(parents=True, exist_ok=True)
    with RunningProject(root) as app:
        launch = app.result
        if not launch.ok:
            why = "build failed" if not launch.built else "start failed"
            reason = f"{why}: " + " ".join(" | ".join(launch.log).split())[-300:]
            return JudgeReport(
                str(root), launch, [Verdict(c.id, c.check, "FAIL", reason, True) for c in items]
            )
        verdicts = []
        for item in items:
            shots = out / item.id
            shots.mkdir(parents=True, exist_ok=True)
            verdicts.append(
                run_in_browser(
                    lambda b, it=item, d=shots: _judge_item(
                        b, client, launch.base_url, root, d, it, query, max_turns, native_tools
                    )
                )
            )
    return JudgeReport(str(root), launch, verdicts)


def judge_projects(
    roots: list[str | Path],
    client: LLMClient,
    checks: str | Path | None = None,
    out_dir: str | Path | None = None,
    **kw: Any,
) -> tuple[list[JudgeReport], float]:
    """Judge several projects; returns the reports and the build success rate (BSR)."""
    reports: list[JudgeReport] = []
    with progress(len(roots), "judge") as bar:
        for i, root in enumerate(roots):
            sub = Path(out_dir) / f"{i:02d}-{Path(root).name}" if out_dir else None
            reports.append(judge_project(root, client, checks, sub, **kw))
            bar.update(i + 1, bsr=build_success_rate([r.launch for r in reports]))
    return reports, build_success_rate([r.launch for r in reports])
