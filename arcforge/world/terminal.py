"""File-system scenarios for terminal tasks: an init script, an instruction, a hidden verify
script (exit 0 = pass) and an oracle solution, all plain bash.

Seven families (count matching files, sum a CSV column, rename extensions, find the largest
file, extract matching lines, replace a word, sort files into folders). Expected values are
computed here at generation time and baked into the verify script, so the verifier never trusts
anything the agent can write except the requested output.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from arcforge.world.names import NameBank

FAMILIES = ("count_matching", "sum_column", "rename_ext", "largest_file", "extract_lines",
            "replace_word", "sort_by_prefix")  # fmt: skip
LOG_WORDS = ["INFO", "WARN", "DEBUG"]


@dataclass
class Scenario:
    family: str
    instruction: str
    init_script: str
    verify_script: str
    solution: str


def _put(path: str, lines: list[str]) -> str:
    body = " ".join(f"'{ln}'" for ln in lines)
    return f"printf '%s\\n' {body} > {path}"


def _count_matching(rng: random.Random, nb: NameBank) -> Scenario:
    n, key = rng.randint(4, 9), rng.choice(["ERROR", "FATAL", "TIMEOUT"])
    init, hits = ["mkdir -p data/old"], 0
    for i in range(n):
        lines = [f"{rng.choice(LOG_WORDS)} {nb.token()} step {j}" for j in range(rng.randint(2, 5))]
        if rng.random() < 0.5:
            lines.insert(rng.randrange(len(lines)), f"{key} {nb.token()} failed")
            hits += 1
        sub = "data/old" if i % 3 == 2 else "data"
        init.append(_put(f"{sub}/{nb.token()}.log", lines))
    init.append(_put("data/notes.txt", [f"{key} in a text file does not count"]))
    ins = (f"Count the .log files under data/ (including subdirectories) that contain the word "
           f"{key}, and write the number to out.txt.")  # fmt: skip
    sol = f"grep -rl --include='*.log' {key} data | wc -l > out.txt"
    ver = f'[ -f out.txt ] && [ "$(tr -d "[:space:]" < out.txt)" = "{hits}" ]'
    return Scenario("count_matching", ins, "\n".join(init), ver, sol)


def _sum_column(rng: random.Random, nb: NameBank) -> Scenario:
    rows = [(nb.token(), rng.randint(1, 99), rng.randint(1, 500)) for _ in range(rng.randint(4, 9))]
    col = rng.choice([2, 3])
    total = sum(r[col - 1] for r in rows)
    init = _put("sales.csv", ["item,qty,price"] + [f"{a},{b},{c}" for a, b, c in rows])
    name = "qty" if col == 2 else "price"
    ins = f"sales.csv has a header line. Write the sum of its {name} column to total.txt."
    sol = f"awk -F, 'NR>1 {{s+=${col}}} END {{print s}}' sales.csv > total.txt"
    ver = f'[ -f total.txt ] && [ "$(tr -d "[:space:]" < total.txt)" = "{total}" ]'
    return Scenario("sum_column", ins, init, ver, sol)


def _rename_ext(rng: random.Random, nb: NameBank) -> Scenario:
    names = [nb.token() for _ in range(rng.randint(3, 6))]
    init = ["mkdir -p docs"] + [_put(f"docs/{n}.txt", [f"note {n}"]) for n in names]
    init.append(_put("docs/keep.csv", ["a,b"]))
    ins = "Rename every .txt file in docs/ to the same name with the extension .md."
    sol = 'for f in docs/*.txt; do mv "$f" "${f%.txt}.md"; done'
    checks = [f'[ -f docs/{n}.md ] && grep -q "note {n}" docs/{n}.md' for n in names]
    ver = " && ".join(['[ -z "$(ls docs/*.txt 2>/dev/null)" ]', "[ -f docs/keep.csv ]", *checks])
    return Scenario("rename_ext", ins, "\n".join(init), ver, sol)


def _largest_file(rng: random.Random, nb: NameBank) -> Scenario:
    sizes = rng.sample(range(10, 400), rng.randint(3, 7))
    names = [f"{nb.token()}.bin" for _ in sizes]
    init = ["mkdir -p store/a store/b"]
    for i, (n, s) in enumerate(zip(names, sizes)):
        init.append(f"head -c {s} /dev/zero > store/{'ab'[i % 2]}/{n}")
    best = names[sizes.index(max(sizes))]
    ins = (
        "Find the largest file under store/ and write its file name (no directory) to largest.txt."
    )
    sol = (
        "find store -type f -printf '%s %f\\n' | sort -n | tail -n 1 | cut -d' ' -f2 > largest.txt"
    )
    ver = f'[ -f largest.txt ] && [ "$(tr -d "[:space:]" < largest.txt)" = "{best}" ]'
    return Scenario("largest_file", ins, "\n".join(init), ver, sol)


def _extract_lines(rng: random.Random, nb: NameBank) -> Scenario:
    key = nb.token()
    pool = [nb.token() for _ in range(4)]
    lines = []
    for _ in range(rng.randint(6, 12)):
        w = rng.choice(pool)
        lines.append(f"{key} {w}" if rng.random() < 0.5 else f"other {w}")
    lines.append(f"{key} {pool[0]}")
    want = sorted({ln for ln in lines if key in ln.split()})
    ins = (f"Write the distinct lines of notes.txt that contain the word {key}, sorted "
           f"alphabetically, to result.txt.")  # fmt: skip
    sol = f"grep -w {key} notes.txt | sort -u > result.txt"
    expected = "\\n".join(want)
    ver = f'[ -f result.txt ] && [ "$(cat result.txt)" = "$(printf "{expected}")" ]'
    return Scenario("extract_lines", ins, _put("notes.txt", lines), ver, sol)


def _replace_word(rng: random.Random, nb: NameBank) -> Scenario:
    old, new = nb.token(), nb.token()
    files = [f"conf/{nb.token()}.cfg" for _ in range(rng.randint(2, 4))]
    init = ["mkdir -p conf"] + [_put(f, [f"host = {old}", f"name = {nb.token()}"]) for f in files]
    ins = f"In every .cfg file under conf/, replace the word {old} with {new}."
    sol = f"sed -i 's/{old}/{new}/g' conf/*.cfg"
    checks = [f'grep -q "host = {new}" {f}' for f in files]
    ver = " && ".join([f"! grep -rq {old} conf", *checks])
    return Scenario("replace_word", ins, "\n".join(init), ver, sol)


def _sort_by_prefix(rng: random.Random, nb: NameBank) -> Scenario:
    prefixes = rng.sample(["img", "doc", "aud", "vid"], 2)
    files = [(p, f"{p}_{nb.token()}.dat") for p in prefixes for _ in range(rng.randint(1, 3))]
    init = ["mkdir -p inbox"] + [f"echo {f} > inbox/{f}" for _, f in files]
    ins = (f"Move each file in inbox/ whose name starts with {prefixes[0]}_ or {prefixes[1]}_ "
           f"into a directory sorted/<prefix>/ (for example sorted/{prefixes[0]}/).")  # fmt: skip
    sol = "; ".join(f"mkdir -p sorted/{p} && mv inbox/{p}_* sorted/{p}/" for p in prefixes)
    checks = [f"[ -f sorted/{p}/{f} ]" for p, f in files]
    ver = " && ".join([*checks, '[ -z "$(ls inbox)" ]'])
    return Scenario("sort_by_prefix", ins, "\n".join(init), ver, sol)


_MAKERS = {"count_matching": _count_matching, "sum_column": _sum_column,
           "rename_ext": _rename_ext, "largest_file": _largest_file,
           "extract_lines": _extract_lines, "replace_word": _replace_word,
           "sort_by_prefix": _sort_by_prefix}  # fmt: skip


def make_scenario(rng: random.Random, names: NameBank, family: str | None = None) -> Scenario:
    return _MAKERS[family or rng.choice(FAMILIES)](rng, names)
