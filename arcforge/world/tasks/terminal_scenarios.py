"""File-system scenarios for terminal tasks: an init script, an instruction, a hidden verify
script (exit 0 = pass), an oracle solution and the command an expert first looks with, all
plain bash.

Seven families (count matching files, sum a CSV column, rename extensions, find the largest or
smallest file, extract matching lines, replace a word, sort files into folders). Expected
values are computed here at generation time and baked into the verify script, so the verifier
never trusts anything the agent can write except the requested output.

Each family's instruction is built from slots. In five families every slot comes from a
small closed set (directory, extension, keyword, column, output file), so a held-out task is
a new combination of parts that training showed, with new file contents. In the other two
(extract_lines, replace_word) the word to act on is a fresh made-up token that has to be
copied from the instruction into the command. Without slots a family's instruction would be
constant, and a split by distinct instruction would leave the family out of one split.

With `fresh` > 0 (world option `terminal_fresh_slots`), each open slot (directory, output file,
keyword, CSV file and columns) takes a made-up value with that chance. A model trained on
closed slots writes the right family's command with the slot values train tasks usually have
(docs/experiments.md, "Terminal"); values that never repeat leave copying as the only way to
fit them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from arcforge.world.knowledge.names import NameBank

FAMILIES = (
    "count_matching",
    "sum_column",
    "rename_ext",
    "largest_file",
    "extract_lines",
    "replace_word",
    "sort_by_prefix",
)
COPY_FAMILIES = ("extract_lines", "replace_word")  # a fresh token is copied into the command
LOG_WORDS = ["INFO", "WARN", "DEBUG"]


def _slot(
    rng: random.Random,
    nb: NameBank,
    values: list[str],
    fresh: float,
    make: Callable[[str], str] = str,
) -> str:
    """One of `values`, or with probability `fresh` a made-up one (`make` of a fresh token).
    With `fresh` 0 no random number is drawn, so a world without fresh slots stays as it was."""
    if fresh and rng.random() < fresh:
        return make(nb.token())
    return rng.choice(values)


def _txt(tok: str) -> str:
    return f"{tok}.txt"


@dataclass
class Scenario:
    family: str
    instruction: str
    init_script: str
    verify_script: str
    solution: str
    look: str = "ls -la"  # what an expert runs first to see the files


def _put(path: str, lines: list[str]) -> str:
    body = " ".join(f"'{ln}'" for ln in lines)
    return f"printf '%s\\n' {body} > {path}"


def _file_is(out: str, value: object) -> str:
    return f'[ -f {out} ] && [ "$(tr -d "[:space:]" < {out})" = "{value}" ]'


def _count_matching(rng: random.Random, nb: NameBank, fresh: float = 0.0) -> Scenario:
    d = _slot(rng, nb, ["data", "logs", "var/log", "runs"], fresh)
    ext = rng.choice(["log", "out"])
    other = "out" if ext == "log" else "log"
    key = _slot(rng, nb, ["ERROR", "FATAL", "TIMEOUT", "PANIC"], fresh, str.upper)
    out = _slot(rng, nb, ["out.txt", "count.txt", "result.txt", "answer.txt"], fresh, _txt)
    init, hits = [f"mkdir -p {d}/old"], 0
    for i in range(rng.randint(4, 9)):
        lines = [f"{rng.choice(LOG_WORDS)} {nb.token()} step {j}" for j in range(rng.randint(2, 5))]
        if rng.random() < 0.5:
            lines.insert(rng.randrange(len(lines)), f"{key} {nb.token()} failed")
            hits += 1
        sub = f"{d}/old" if i % 3 == 2 else d
        init.append(_put(f"{sub}/{nb.token()}.{ext}", lines))
    init.append(_put(f"{d}/notes.txt", [f"{key} in a text file does not count"]))
    init.append(_put(f"{d}/{nb.token()}.{other}", [f"{key} in a .{other} file does not count"]))
    ins = (
        f"Count the .{ext} files under {d}/ (including subdirectories) that contain the word "
        f"{key}, and write the number to {out}."
    )
    sol = f"grep -rl --include='*.{ext}' {key} {d} | wc -l > {out}"
    return Scenario("count_matching", ins, "\n".join(init), _file_is(out, hits), sol, f"ls -R {d}")


def _sum_column(rng: random.Random, nb: NameBank, fresh: float = 0.0) -> Scenario:
    f = _slot(
        rng, nb, ["sales.csv", "orders.csv", "stock.csv", "costs.csv"], fresh, lambda t: f"{t}.csv"
    )
    cols = rng.sample(["qty", "price", "weight", "units"], rng.randint(2, 3))
    if fresh:
        cols = [nb.token() if rng.random() < fresh else c for c in cols]
    col = rng.choice(cols)
    out = _slot(rng, nb, ["total.txt", "sum.txt", "out.txt"], fresh, _txt)
    rows = [
        [nb.token()] + [str(rng.randint(1, 400)) for _ in cols] for _ in range(rng.randint(4, 9))
    ]
    total = sum(int(r[cols.index(col) + 1]) for r in rows)
    init = _put(f, [",".join(["item", *cols])] + [",".join(r) for r in rows])
    ins = f"{f} has a header line. Write the sum of its {col} column to {out}."
    sol = (
        f"awk -F, -v c={col} 'NR==1 {{for (i = 1; i <= NF; i++) if ($i == c) k = i; next}} "
        f"{{s += $k}} END {{print s}}' {f} > {out}"
    )
    return Scenario("sum_column", ins, init, _file_is(out, total), sol, f"head -n 3 {f}")


_EXT_PAIRS = [("txt", "md"), ("log", "bak"), ("md", "txt"), ("csv", "tsv"), ("htm", "html")]


def _rename_ext(rng: random.Random, nb: NameBank, fresh: float = 0.0) -> Scenario:
    d = _slot(rng, nb, ["docs", "notes", "pages", "drafts"], fresh)
    a, b = rng.choice(_EXT_PAIRS)
    names = [nb.token() for _ in range(rng.randint(3, 6))]
    init = [f"mkdir -p {d}"] + [_put(f"{d}/{n}.{a}", [f"note {n}"]) for n in names]
    init.append(_put(f"{d}/keep.dat", ["a,b"]))
    ins = f"Rename every .{a} file in {d}/ to the same name with the extension .{b}."
    sol = f'for f in {d}/*.{a}; do mv "$f" "${{f%.{a}}}.{b}"; done'
    checks = [f'[ -f {d}/{n}.{b} ] && grep -q "note {n}" {d}/{n}.{b}' for n in names]
    ver = " && ".join([f'[ -z "$(ls {d}/*.{a} 2>/dev/null)" ]', f"[ -f {d}/keep.dat ]", *checks])
    return Scenario("rename_ext", ins, "\n".join(init), ver, sol, f"ls {d}")


def _largest_file(rng: random.Random, nb: NameBank, fresh: float = 0.0) -> Scenario:
    d = _slot(rng, nb, ["store", "cache", "blobs", "media"], fresh)
    which = rng.choice(["largest", "smallest"])
    ext = rng.choice(["bin", "dat", "img"])
    other = {"bin": "dat", "dat": "img", "img": "bin"}[ext]
    out = _slot(rng, nb, ["answer.txt", "out.txt", "name.txt"], fresh, _txt)
    sizes = rng.sample(range(20, 400), rng.randint(3, 7))
    names = [f"{nb.token()}.{ext}" for _ in sizes]
    init = [f"mkdir -p {d}/a {d}/b"]
    for i, (n, s) in enumerate(zip(names, sizes)):
        init.append(f"head -c {s} /dev/zero > {d}/{'ab'[i % 2]}/{n}")
    decoy = max(sizes) + 50 if which == "largest" else min(sizes) - 10  # another extension
    init.append(f"head -c {decoy} /dev/zero > {d}/a/{nb.token()}.{other}")
    pick = max if which == "largest" else min
    best = names[sizes.index(pick(sizes))]
    ins = (
        f"Find the {which} .{ext} file under {d}/ and write its file name (no directory) to {out}."
    )
    end = "tail" if which == "largest" else "head"
    sol = (
        f"find {d} -type f -name '*.{ext}' -printf '%s %f\\n' | sort -n | {end} -n 1 | "
        f"cut -d' ' -f2 > {out}"
    )
    return Scenario("largest_file", ins, "\n".join(init), _file_is(out, best), sol, f"ls -lR {d}")


def _extract_lines(rng: random.Random, nb: NameBank, fresh: float = 0.0) -> Scenario:
    f = _slot(rng, nb, ["notes.txt", "log.txt", "items.txt"], fresh, _txt)
    out = _slot(rng, nb, ["result.txt", "lines.txt", "out.txt"], fresh, _txt)
    key = nb.token()
    pool = [nb.token() for _ in range(4)]
    lines = []
    for _ in range(rng.randint(6, 12)):
        w = rng.choice(pool)
        lines.append(f"{key} {w}" if rng.random() < 0.5 else f"other {w}")
    lines.append(f"{key} {pool[0]}")
    want = sorted({ln for ln in lines if key in ln.split()})
    ins = (
        f"Write the distinct lines of {f} that contain the word {key}, sorted "
        f"alphabetically, to {out}."
    )
    sol = f"grep -w {key} {f} | sort -u > {out}"
    expected = "\\n".join(want)
    ver = f'[ -f {out} ] && [ "$(cat {out})" = "$(printf "{expected}")" ]'
    return Scenario("extract_lines", ins, _put(f, lines), ver, sol, f"cat {f}")


def _replace_word(rng: random.Random, nb: NameBank, fresh: float = 0.0) -> Scenario:
    d = _slot(rng, nb, ["conf", "settings", "config"], fresh)
    ext = rng.choice(["cfg", "ini"])
    old, new = nb.token(), nb.token()
    files = [f"{d}/{nb.token()}.{ext}" for _ in range(rng.randint(2, 4))]
    init = [f"mkdir -p {d}"] + [_put(f, [f"host = {old}", f"name = {nb.token()}"]) for f in files]
    ins = f"In every .{ext} file under {d}/, replace the word {old} with {new}."
    sol = f"sed -i 's/{old}/{new}/g' {d}/*.{ext}"
    checks = [f'grep -q "host = {new}" {f}' for f in files]
    ver = " && ".join([f"! grep -rq {old} {d}", *checks])
    return Scenario("replace_word", ins, "\n".join(init), ver, sol, f"cat {d}/*.{ext}")


def _sort_by_prefix(rng: random.Random, nb: NameBank, fresh: float = 0.0) -> Scenario:
    src = _slot(rng, nb, ["inbox", "incoming", "downloads"], fresh)
    dest = _slot(rng, nb, ["sorted", "by_type", "archive"], fresh)
    prefixes = rng.sample(["img", "doc", "aud", "vid", "log", "tmp"], 2)
    files = [(p, f"{p}_{nb.token()}.dat") for p in prefixes for _ in range(rng.randint(1, 3))]
    init = [f"mkdir -p {src}"] + [f"echo {f} > {src}/{f}" for _, f in files]
    ins = (
        f"Move each file in {src}/ whose name starts with {prefixes[0]}_ or {prefixes[1]}_ "
        f"into a directory {dest}/<prefix>/ (for example {dest}/{prefixes[0]}/)."
    )
    sol = "; ".join(f"mkdir -p {dest}/{p} && mv {src}/{p}_* {dest}/{p}/" for p in prefixes)
    checks = [f"[ -f {dest}/{p}/{f} ]" for p, f in files]
    ver = " && ".join([*checks, f'[ -z "$(ls {src})" ]'])
    return Scenario("sort_by_prefix", ins, "\n".join(init), ver, sol, f"ls {src}")


_MAKERS: dict[str, Callable[[random.Random, NameBank, float], Scenario]] = {
    "count_matching": _count_matching,
    "sum_column": _sum_column,
    "rename_ext": _rename_ext,
    "largest_file": _largest_file,
    "extract_lines": _extract_lines,
    "replace_word": _replace_word,
    "sort_by_prefix": _sort_by_prefix,
}


def make_scenario(
    rng: random.Random, names: NameBank, family: str | None = None, fresh: float = 0.0
) -> Scenario:
    """A scenario of `family` (default: a random one); `fresh` is the chance that each
    open slot (directory, output file, keyword, CSV file and columns) takes a made-up value
    instead of one of the family's few usual ones."""
    return _MAKERS[family or rng.choice(FAMILIES)](rng, names, fresh)
