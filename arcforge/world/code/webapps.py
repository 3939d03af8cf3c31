"""Small generated front-end projects with check items and optional planted logic bugs.

The agent-as-a-judge needs projects whose correctness only shows when a user interacts: these
are such projects, each in a fixed or a buggy variant, written to a directory with a
`checks.json` (the user query and the check items a judge verifies).

    adder    static HTML + JS: two inputs and an Add button. Bug: the values are concatenated
             as strings ("2" + "3" = "23"), a classic JavaScript logic error.
    counter  a Python http.server app (app.py reads $PORT) whose page calls a JSON API. Bug:
             the server adds 2 per click.

Names are drawn from a seeded rng so that generated projects differ in labels and numbers, not
in structure. Standard library only, like the rest of the world.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

APPS = ("adder", "counter")

_ADDER_HTML = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>{title}</title>
<style>body {{ font-family: sans-serif; margin: 40px; }} input {{ width: 80px; }}</style></head>
<body>
<h1>{title}</h1>
<input id="a" type="text" aria-label="first number"> +
<input id="b" type="text" aria-label="second number">
<button id="add">Add</button>
<p>Result: <span id="result">-</span></p>
<script src="app.js"></script>
</body>
</html>
"""
_ADDER_JS = """document.getElementById("add").addEventListener("click", () => {{
  const a = document.getElementById("a").value;
  const b = document.getElementById("b").value;
  document.getElementById("result").textContent = {expr};
}});
"""
_COUNTER_APP = '''"""{title}: a tiny counter app served by the standard library (port from $PORT)."""
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COUNT = {{"value": 0}}
PAGE = (Path(__file__).parent / "index.html").read_bytes()


class Handler(BaseHTTPRequestHandler):
    def _send(self, body, kind):
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/api/count":
            return self._send(json.dumps(COUNT).encode(), "application/json")
        return self._send(PAGE, "text/html; charset=utf-8")

    def do_POST(self):
        if self.path == "/api/increment":
            COUNT["value"] += {step}
            return self._send(json.dumps(COUNT).encode(), "application/json")
        self.send_error(404)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    port = int(os.environ.get("PORT", "8000"))
    ThreadingHTTPServer((os.environ.get("HOST", "127.0.0.1"), port), Handler).serve_forever()
'''
_COUNTER_HTML = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>{title}</title></head>
<body>
<h1>{title}</h1>
<p>Clicks: <span id="count">0</span></p>
<button id="inc">{label}</button>
<script>
async function show(r) {{ document.getElementById("count").textContent = (await r.json()).value; }}
fetch("/api/count").then(show);
document.getElementById("inc").addEventListener("click",
  () => fetch("/api/increment", {{method: "POST"}}).then(show));
</script>
</body>
</html>
"""


def _adder(rng: random.Random, buggy: bool) -> tuple[dict[str, str], dict]:
    title = rng.choice(["Quick Adder", "Sum Machine", "Add Two Numbers"])
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    expr = "a + b" if buggy else "Number(a) + Number(b)"
    files = {"index.html": _ADDER_HTML.format(title=title), "app.js": _ADDER_JS.format(expr=expr)}
    checks = {
        "query": f"Create a web page '{title}' that adds two numbers.",
        "checks": [
            {
                "id": "sum",
                "check": f"Type {a} into the first field and {b} into "
                f"the second, click Add: the result shows {a + b}.",
            }
        ],
    }
    return files, checks


def _counter(rng: random.Random, buggy: bool) -> tuple[dict[str, str], dict]:
    title = rng.choice(["Click Counter", "Tally", "Press Count"])
    label, clicks = rng.choice(["Count", "Add one", "Press"]), rng.randint(2, 4)
    files = {
        "app.py": _COUNTER_APP.format(title=title, step=2 if buggy else 1),
        "index.html": _COUNTER_HTML.format(title=title, label=label),
    }
    checks = {
        "query": f"Create a counter app '{title}' with a button that adds one per click.",
        "checks": [
            {
                "id": "count",
                "check": f"Click the '{label}' button {clicks} times: the count shows {clicks}.",
            }
        ],
    }
    return files, checks


def write_webapp(
    out_dir: str | Path, app: str = "adder", buggy: bool = False, seed: int = 0
) -> Path:
    """Write one project (its files and checks.json) to `out_dir`; returns the directory.

    Args:
        app: one of APPS.
        buggy: plant the app's logic bug.
        seed: picks labels and the numbers the check item uses (same seed, same project).
    """
    makers = {"adder": _adder, "counter": _counter}
    if app not in makers:
        raise ValueError(f"unknown web app {app!r}; expected one of {', '.join(APPS)}")
    files, checks = makers[app](random.Random(f"{seed}:webapp:{app}"), buggy)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out / name).write_text(text)
    (out / "checks.json").write_text(json.dumps(checks, indent=1) + "\n")
    return out
