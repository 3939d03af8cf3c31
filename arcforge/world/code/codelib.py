"""A compositional space of small Python functions: the raw material of repos, code tasks,
SWE bugs, exploration tasks and the corpus's code.

A function is a typed pipeline over one input: a loop over its items (the values of a list,
the integers of a range, the words or characters of a string, the entries of a dict), an
optional filter, an optional map and one reducer (sum, count, max, a list, a joined string,
a dict, ...), each with parameters. Names, docstrings and bodies are composed from the same
parts, and every function's identifiers (parameter, loop variable, accumulator) are drawn, so
the space holds tens of thousands of distinct functions: far more than any train set shows.

`CodeSpace(seed)` draws a train and a held-out part. The split is by *structure* (theme,
filter kind, map kind, reducer kind, parameter mode; parameters excluded), so no held-out
function shares its shape with a train one; a held-out function whose behaviour on a fixed
probe set equals a train function's, or whose normalised body or docstring does, is dropped.
Expected outputs are never written by hand: they come from executing the correct source
(`call_repr`). Bodies have no `while` loops, so an injected bug can never hang a checker.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from types import CodeType

THEMES = ("lists", "numbers", "words", "chars", "records")
LETTERS = "abcdeiloprstu"


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(LETTERS) for _ in range(rng.randint(2, 7)))


@dataclass(frozen=True)
class FuncTemplate:
    """One function of the space: `source` has `{f}` where its name goes."""

    key: str  # the function's identity: structure plus parameters plus identifiers
    structure: str  # theme/filter/map/reducer/mode: the unit of the train/held-out split
    theme: str
    names: tuple[str, ...]
    params: str
    source: str  # with {f}
    gen: Callable[[random.Random], tuple] = field(compare=False, hash=False)
    returns: str = "int"  # int | str | list | dict | opt (int, str or None)

    def render(self, name: str) -> str:
        return self.source.replace("{f}", name).strip() + "\n"

    def docstring(self) -> str:
        return self.source.split('"""')[1].strip()

    def stub(self, name: str) -> str:
        """The signature and docstring lines: what a HumanEval-style prompt shows."""
        return "".join(self.render(name).splitlines(keepends=True)[:2])

    def body(self, name: str) -> str:
        """The rest of the function after `stub`: HumanEval's canonical solution."""
        return self.render(name)[len(self.stub(name)) :]


# --- the parts ------------------------------------------------------------------------------
# A filter or map: (kind, code with {v} the item and {k} the parameter, doc, name part,
# parameter values, output type for maps). Record items use {key} and {val}.


@dataclass(frozen=True)
class Part:
    kind: str
    code: str
    doc: str
    name: str
    ks: tuple = (None,)
    out: str = "int"  # a map's output type
    arg: str = ""  # parameter name when the filter's parameter may become an argument


_R = range
INT_FILTERS = (
    Part("gt", "{v} > {k}", "greater than {k}", "above{k}", tuple(_R(0, 10)), arg="limit"),
    Part("lt", "{v} < {k}", "less than {k}", "below{k}", tuple(_R(1, 13)), arg="limit"),
    Part("ge", "{v} >= {k}", "at least {k}", "from{k}", tuple(_R(1, 10)), arg="low"),
    Part("le", "{v} <= {k}", "at most {k}", "upto{k}", tuple(_R(1, 13)), arg="high"),
    Part("div", "{v} % {k} == 0", "divisible by {k}", "mult{k}", (2, 3, 4, 5), arg="step"),
    Part("ndiv", "{v} % {k} != 0", "not divisible by {k}", "nonmult{k}", (2, 3, 4, 5), arg="step"),
    Part("ne", "{v} != {k}", "different from {k}", "not{k}", tuple(_R(0, 10)), arg="skip"),
    Part("odd", "{v} % 2 == 1", "odd", "odd"),
    Part("even", "{v} % 2 == 0", "even", "even"),
    Part(
        "between",
        "{lo} <= {v} <= {hi}",
        "between {lo} and {hi} inclusive",
        "in{lo}to{hi}",
        tuple((a, a + d) for a in _R(0, 8) for d in (2, 4, 6)),
    ),
)
INT_MAPS = (
    Part("add", "{v} + {k}", "increased by {k}", "plus{k}", tuple(_R(1, 10))),
    Part("sub", "{v} - {k}", "decreased by {k}", "minus{k}", tuple(_R(1, 10))),
    Part("mul", "{v} * {k}", "multiplied by {k}", "times{k}", (2, 3, 4, 5)),
    Part("sq", "{v} * {v}", "squared", "squares"),
    Part("mod", "{v} % {k}", "taken modulo {k}", "mod{k}", tuple(_R(2, 8))),
    Part(
        "absd", "abs({v} - {k})", "replaced by its distance from {k}", "dist{k}", tuple(_R(0, 10))
    ),
    Part("neg", "-{v}", "negated", "negated"),
    Part("fdiv", "{v} // {k}", "floor-divided by {k}", "div{k}", (2, 3, 4)),
)
WORD_FILTERS = (
    Part(
        "len_gt",
        "len({v}) > {k}",
        "longer than {k} characters",
        "longer{k}",
        (2, 3, 4, 5),
        arg="size",
    ),
    Part(
        "len_lt",
        "len({v}) < {k}",
        "shorter than {k} characters",
        "shorter{k}",
        (3, 4, 5, 6),
        arg="size",
    ),
    Part("starts", "{v}.startswith({k!r})", "starting with {k!r}", "from_{k}", tuple(LETTERS)),
    Part("ends", "{v}.endswith({k!r})", "ending with {k!r}", "ending_{k}", tuple(LETTERS)),
    Part("has", "{k!r} in {v}", "containing {k!r}", "with_{k}", tuple(LETTERS)),
    Part("lacks", "{k!r} not in {v}", "not containing {k!r}", "without_{k}", tuple(LETTERS)),
)
WORD_MAPS = (
    Part("upper", "{v}.upper()", "in upper case", "upper", out="str"),
    Part("cap", "{v}.capitalize()", "capitalised", "capitalised", out="str"),
    Part("rev", "{v}[::-1]", "reversed", "reversed", out="str"),
    Part("head", "{v}[:{k}]", "cut to its first {k} characters", "head{k}", (1, 2, 3), out="str"),
    Part("tail", "{v}[-{k}:]", "cut to its last {k} characters", "tail{k}", (1, 2, 3), out="str"),
    Part("dup", "{v} + {v}", "written twice", "doubled", out="str"),
    Part("wlen", "len({v})", "replaced by its length", "lengths", out="int"),
)
CHAR_FILTERS = (
    Part("vowel", '{v} in "aeiou"', "vowels", "vowels"),
    Part("consonant", '{v} not in "aeiou "', "consonants (not spaces)", "consonants"),
    Part(
        "in_set",
        "{v} in {k!r}",
        "one of the letters {k!r}",
        "in_{k}",
        ("abc", "rst", "lop", "dei", "pus", "cat", "bed"),
    ),
    Part("before", "{v} < {k!r}", "alphabetically before {k!r}", "before_{k}", tuple("eilpst")),
    Part("after", "{v} > {k!r}", "alphabetically after {k!r}", "after_{k}", tuple("eilprs")),
)
CHAR_MAPS = (
    Part("cupper", "{v}.upper()", "in upper case", "upper", out="str"),
    Part("cdup", "{v} * {k}", "repeated {k} times", "x{k}", (2, 3), out="str"),
    Part(
        "pos",
        "ord({v}) - 96",
        "replaced by its position in the alphabet (a is 1)",
        "positions",
        out="int",
    ),
)
REC_FILTERS = (
    Part(
        "val_gt",
        "{val} > {k}",
        "whose value is greater than {k}",
        "over{k}",
        tuple(_R(0, 20, 2)),
        arg="limit",
    ),
    Part(
        "val_lt",
        "{val} < {k}",
        "whose value is less than {k}",
        "under{k}",
        tuple(_R(2, 22, 2)),
        arg="limit",
    ),
    Part("val_even", "{val} % 2 == 0", "whose value is even", "even"),
    Part("val_odd", "{val} % 2 == 1", "whose value is odd", "odd"),
    Part(
        "key_starts",
        "{key}.startswith({k!r})",
        "whose key starts with {k!r}",
        "keys_{k}",
        tuple(LETTERS),
    ),
    Part(
        "key_len",
        "len({key}) > {k}",
        "whose key is longer than {k} characters",
        "longkeys{k}",
        (2, 3, 4, 5),
        arg="size",
    ),
)
REC_MAPS = (
    Part("val", "{val}", "the values", "values"),
    Part(
        "val_add", "{val} + {k}", "the values increased by {k}", "values_plus{k}", tuple(_R(1, 10))
    ),
    Part("val_mul", "{val} * {k}", "the values multiplied by {k}", "values_times{k}", (2, 3, 4)),
    Part("key", "{key}", "the keys", "keys", out="str"),
    Part("key_upper", "{key}.upper()", "the keys in upper case", "upper_keys", out="str"),
    Part("key_len", "len({key})", "the key lengths", "key_lengths"),
)


@dataclass(frozen=True)
class Reducer:
    kind: str
    init: str  # "" for `first` (returns from inside the loop)
    update: tuple[str, ...]  # lines with {acc}, {y} (the mapped item) and {sep}
    ret: str
    doc: str  # with {what}
    name: str
    accepts: tuple[str, ...]  # item types it takes
    accs: tuple[str, ...]  # accumulator names to draw from
    returns: str = "int"
    needs_map: bool = False  # records: the map says what is reduced
    no_map: bool = False  # count-like: a map would not change the result


REDUCERS = (
    Reducer(
        "sum",
        "0",
        ("{acc} = {acc} + {y}",),
        "{acc}",
        "the sum of {what}",
        "sum",
        ("int",),
        ("total", "acc", "result", "s"),
    ),
    Reducer(
        "product",
        "1",
        ("{acc} = {acc} * {y}",),
        "{acc}",
        "the product of {what}",
        "product",
        ("int",),
        ("prod", "acc", "result"),
    ),
    Reducer(
        "count",
        "0",
        ("{acc} = {acc} + 1",),
        "{acc}",
        "how many there are of {what}",
        "count",
        ("int", "str"),
        ("count", "n_found", "hits"),
        no_map=True,
    ),
    Reducer(
        "max",
        "None",
        ("if {acc} is None or {y} > {acc}:", "    {acc} = {y}"),
        "{acc}",
        "the largest of {what}, or None if there is none",
        "max",
        ("int", "str"),
        ("best", "top", "hi"),
        "opt",
    ),
    Reducer(
        "min",
        "None",
        ("if {acc} is None or {y} < {acc}:", "    {acc} = {y}"),
        "{acc}",
        "the smallest of {what}, or None if there is none",
        "min",
        ("int", "str"),
        ("low", "smallest", "lo"),
        "opt",
    ),
    Reducer(
        "collect",
        "[]",
        ("{acc}.append({y})",),
        "{acc}",
        "the list of {what}, in order",
        "list",
        ("int", "str"),
        ("out", "kept", "result"),
        "list",
    ),
    Reducer(
        "first",
        "",
        ("return {y}",),
        "None",
        "the first of {what}, or None if there is none",
        "first",
        ("int", "str"),
        ("",),
        "opt",
    ),
    Reducer(
        "last",
        "None",
        ("{acc} = {y}",),
        "{acc}",
        "the last of {what}, or None if there is none",
        "last",
        ("int", "str"),
        ("last", "latest", "seen"),
        "opt",
    ),
    Reducer(
        "distinct",
        "set()",
        ("{acc}.add({y})",),
        "len({acc})",
        "how many distinct values there are among {what}",
        "distinct",
        ("int", "str"),
        ("seen", "uniq", "found"),
        "int",
    ),
    Reducer(
        "join",
        "[]",
        ("{acc}.append({y})",),
        "{sep!r}.join({acc})",
        "{what}, joined by {sep!r}",
        "joined",
        ("str",),
        ("parts", "pieces", "chunks"),
        "str",
    ),
    Reducer(
        "longest",
        "None",
        ("if {acc} is None or len({y}) > len({acc}):", "    {acc} = {y}"),
        "{acc}",
        "the longest of {what} (the first one on ties), or None if there is none",
        "longest",
        ("str",),
        ("best", "longest", "top"),
        "opt",
    ),
    Reducer(
        "total_len",
        "0",
        ("{acc} = {acc} + len({y})",),
        "{acc}",
        "the total length of {what}",
        "total_len",
        ("str",),
        ("total", "size", "n_chars"),
    ),
    Reducer(
        "todict",
        "{}",
        ("{acc}[{key}] = {y}",),
        "{acc}",
        "a dict from each key to {what}",
        "by_key",
        ("int", "str"),
        ("table", "out", "mapping"),
        "dict",
        needs_map=True,
    ),
)
SEPS = (" ", "-", ",", "", "+", "/")


@dataclass(frozen=True)
class Theme:
    name: str
    items: str  # "int" | "str" | "rec"
    filters: tuple[Part, ...]
    maps: tuple[Part, ...]
    containers: tuple[str, ...]
    loop_vars: tuple[str, ...]
    what: str  # with {p}: "the values of {p}"
    what_filtered: str  # with {p} and {filter}: "the values of {p} that are {filter}"
    loop: str  # with {v} and {p}
    gen: Callable[[random.Random], object]


def _ints(rng: random.Random) -> list[int]:
    return [rng.randint(-4, 20) for _ in range(rng.choice((0, 2, 3, 4, 5, 6, 7, 8)))]


def _sentence(rng: random.Random) -> str:
    return " ".join(_word(rng) for _ in range(rng.randint(0, 6)))


def _chars(rng: random.Random) -> str:
    return " ".join(_word(rng) for _ in range(rng.randint(1, 3)))


def _record(rng: random.Random) -> dict[str, int]:
    return {_word(rng): rng.randint(0, 25) for _ in range(rng.randint(0, 6))}


THEME_DEFS = {
    "lists": Theme(
        "lists",
        "int",
        INT_FILTERS,
        INT_MAPS,
        ("xs", "values", "nums", "data", "numbers", "seq", "arr", "ys"),
        ("x", "v", "item", "value", "elem", "y", "num", "e"),
        "the values of {p}",
        "the values of {p} that are {filter}",
        "for {v} in {p}:",
        _ints,
    ),
    "numbers": Theme(
        "numbers",
        "int",
        INT_FILTERS,
        INT_MAPS,
        ("n", "upto", "stop", "end", "limit_n", "top", "bound"),
        ("i", "j", "num", "m", "q", "t", "z"),
        "the integers from {lo} to {p}",
        "the integers from {lo} to {p} that are {filter}",
        "for {v} in range({lo}, {p} + 1):",
        lambda r: r.randint(0, 30),
    ),
    "words": Theme(
        "words",
        "str",
        WORD_FILTERS,
        WORD_MAPS,
        ("text", "s", "sentence", "line", "phrase", "msg", "title", "caption"),
        ("w", "word", "tok", "part", "token", "piece", "chunk"),
        "the words of {p}",
        "the words of {p} {filter}",
        "for {v} in {p}.split():",
        _sentence,
    ),
    "chars": Theme(
        "chars",
        "str",
        CHAR_FILTERS,
        CHAR_MAPS,
        ("s", "word", "text", "label", "name", "code", "key", "tag"),
        ("ch", "c", "letter", "char", "sym", "glyph", "ltr"),
        "the characters of {p}",
        "the characters of {p} that are {filter}",
        "for {v} in {p}:",
        _chars,
    ),
    "records": Theme(
        "records",
        "rec",
        REC_FILTERS,
        REC_MAPS,
        ("d", "counts", "table", "stock", "scores", "tally", "prices", "sizes"),
        ("key", "name", "k", "item", "label", "tag", "entry"),
        "the entries of {p}",
        "the entries of {p} {filter}",
        "for {key} in sorted({p}):",
        _record,
    ),
}


def _fmt(text: str, **kw) -> str:
    """str.format that leaves unknown fields alone and renders `{k!r}`."""
    for name, value in kw.items():
        text = text.replace("{" + name + "!r}", repr(value)).replace("{" + name + "}", str(value))
    return text


def _part_kw(part: Part, k) -> dict:
    if part.kind == "between":
        return {"lo": k[0], "hi": k[1]}
    return {} if k is None else {"k": k}


def compose(
    theme: Theme,
    flt: Part | None,
    fk,
    mp: Part | None,
    mk,
    red: Reducer,
    arg: bool,
    rng: random.Random,
) -> FuncTemplate | None:
    """One function from its parts, identifiers drawn from `rng`; None when the parts do not fit
    (a map's type the reducer does not take, a count with a map, ...)."""
    item_t = "int" if theme.items == "int" else "str" if theme.items == "str" else None
    if theme.items == "rec":
        if mp is None:
            return None
        item_t = mp.out
    elif mp is not None:
        item_t = mp.out
    if item_t not in red.accepts or (red.no_map and mp is not None and theme.items != "rec"):
        return None
    if red.needs_map and theme.items != "rec":
        return None
    if red.no_map and theme.items == "rec" and mp is not None and mp.kind != "val":
        return None
    if arg and (flt is None or not flt.arg):
        return None
    p = rng.choice(theme.containers)
    v = rng.choice(theme.loop_vars)
    key, val = (v, f"{p}[{v}]") if theme.items == "rec" else ("", "")
    acc = rng.choice(red.accs)
    taken = {p, v, flt.arg if arg and flt else ""} - {""}
    if acc in taken or (arg and flt and flt.arg in (p, v)):
        return None
    lo = rng.choice((0, 1, 2)) if theme.name == "numbers" else 0
    sep = rng.choice(SEPS)
    names = {"v": v, "key": key, "val": val}
    pred = ""
    if flt is not None:
        kw = _part_kw(flt, flt.arg if arg else fk)
        pred = _fmt(flt.code, **kw, **names)
        if arg:  # the parameter is the argument's name, not its repr
            pred = pred.replace(repr(flt.arg), flt.arg)
    y = _fmt(mp.code, **_part_kw(mp, mk), **names) if mp is not None else v
    # the description
    base = _fmt(theme.what, p=p, lo=lo)
    if flt is not None:
        fdoc = _fmt(flt.doc, **_part_kw(flt, fk))
        if arg:
            fdoc = _fmt(flt.doc, k=flt.arg) + f" ({flt.arg} defaults to {fk!r})"
        base = _fmt(theme.what_filtered, p=p, lo=lo, filter=fdoc)
    if theme.items == "rec":
        what = f"{_fmt(mp.doc, **_part_kw(mp, mk))} of {base}, in key order"
        if red.kind == "todict":
            what = _fmt(mp.doc, **_part_kw(mp, mk))
            what = what.replace("the values", "its value").replace("the keys", "its key")
            what = f"{what.replace('the key lengths', 'the length of its key')} for {base}"
    else:
        what = base + (f", each {_fmt(mp.doc, **_part_kw(mp, mk))}" if mp is not None else "")
    doc = "Return " + _fmt(red.doc, what=what, sep=sep) + "."
    # the body
    loop = _fmt(theme.loop, v=v, p=p, lo=lo, key=key, val=val)
    update = _styled([_fmt(line, acc=acc, y=y, key=key, sep=sep) for line in red.update], rng)
    if pred and rng.random() < 0.4:  # a guard clause instead of a nested block
        inner = [f"if not ({pred}):", "    continue"] + update
    else:
        inner = ([f"if {pred}:"] + ["    " + u for u in update]) if pred else update
    sig = p + (f", {flt.arg}={fk!r}" if arg and flt else "")
    lines = [f"def {{f}}({sig}):", f'    """{doc}"""']
    if red.init:
        lines.append(f"    {acc} = {red.init}")
    lines += [f"    {loop}"] + ["        " + s for s in inner]
    lines.append("    return " + _fmt(red.ret, acc=acc, sep=sep))
    mode = "arg" if arg else "fixed"
    structure = "/".join(
        [theme.name, flt.kind if flt else "-", mp.kind if mp else "-", red.kind, mode]
    )
    parts = [red.name if red.kind != "join" else f"joined{_SEP_NAMES[sep]}"]
    if mp is not None:
        parts.append(_fmt(mp.name, **_part_kw(mp, mk)))
    if flt is not None:
        parts.append(_fmt(flt.name, **_part_kw(flt, fk)) if not arg else flt.name.split("{")[0])
    if theme.name == "numbers":
        parts.append(f"from{lo}")
    name = "_".join(parts)
    alt = "_".join(parts[1:] + parts[:1])
    gen = _make_gen(theme, flt, fk, arg)
    source = "\n".join(lines) + "\n"
    ident = hashlib.sha256(source.encode()).hexdigest()[:12]
    return FuncTemplate(
        f"{structure}:{ident}", structure, theme.name, (name, alt), sig, source, gen, red.returns
    )


_ACCUMULATE = re.compile(r"^(\w+) = \1 ([+*]) (.+)$")
_CHAMPION = re.compile(r"^if (\w+) is None or (.+) ([<>]) (\1|len\(\1\)):$")


def _styled(lines: list[str], rng: random.Random) -> list[str]:
    """The same statements in one of the styles people write them in: `acc += y` or
    `acc = acc + (y)`, `y > best` or `best < y`."""
    out = []
    for line in lines:
        m = _ACCUMULATE.match(line)
        if m:
            acc, op, y = m.groups()
            grouped = f"({y})" if " " in y and op == "*" else y
            line = f"{acc} {op}= {y}" if rng.random() < 0.5 else f"{acc} = {acc} {op} {grouped}"
        m = _CHAMPION.match(line)
        if m and rng.random() < 0.5:
            acc, y, op, rhs = m.groups()
            line = f"if {acc} is None or {rhs} {'<' if op == '>' else '>'} {y}:"
        out.append(line)
    return out


_SEP_NAMES = {" ": "", "-": "_dash", ",": "_comma", "": "_tight", "+": "_plus", "/": "_slash"}


def _make_gen(theme: Theme, flt: Part | None, fk, arg: bool) -> Callable[[random.Random], tuple]:
    def gen(rng: random.Random) -> tuple:
        x = theme.gen(rng)
        if arg and flt is not None and rng.random() < 0.5:
            other = rng.choice([k for k in flt.ks if k != fk] or [fk])
            return (x, other)
        return (x,)

    return gen


# --- the space -------------------------------------------------------------------------------


def _draw(rng: random.Random) -> FuncTemplate | None:
    theme = THEME_DEFS[rng.choice(THEMES)]
    flt = rng.choice((None,) + theme.filters)
    mp = rng.choice((None, None) + theme.maps) if theme.items != "rec" else rng.choice(theme.maps)
    red = rng.choice(REDUCERS)
    fk = rng.choice(flt.ks) if flt else None
    mk = rng.choice(mp.ks) if mp else None
    arg = bool(flt and flt.arg and rng.random() < 0.25)
    return compose(theme, flt, fk, mp, mk, red, arg, rng)


def held_out_structure(seed: int, structure: str, share: float = 0.2) -> bool:
    """Whether `structure` belongs to the held-out part (a stable hash of seed and structure)."""
    h = int(hashlib.sha256(f"{seed}:code:{structure}".encode()).hexdigest()[:8], 16)
    return h / 0xFFFFFFFF < share


_IDENT = re.compile(r"[A-Za-z_]\w*")
_KEYWORDS = {
    "def",
    "return",
    "for",
    "in",
    "if",
    "not",
    "is",
    "None",
    "and",
    "or",
    "len",
    "range",
    "sorted",
    "abs",
    "ord",
    "set",
    "True",
    "False",
}


def normalised_body(tpl: FuncTemplate) -> str:
    """The body with every identifier that is not a keyword or builtin replaced by `_`."""
    return _IDENT.sub(lambda m: m.group() if m.group() in _KEYWORDS else "_", tpl.body("f"))


def fingerprints(tpls: list[FuncTemplate]) -> list[tuple[str, ...]]:
    """Each function's behaviour: its outputs on a fixed set of inputs of its theme (the
    functions only read their input, so one probe object serves them all)."""
    probes = {}
    for theme in THEMES:
        rng = random.Random(f"probe:{theme}")
        probes[theme] = [THEME_DEFS[theme].gen(rng) for _ in range(12)]
    ns = load_source("".join(t.render(f"f{i}") for i, t in enumerate(tpls)))
    out = []
    for i, t in enumerate(tpls):
        fn, row = ns[f"f{i}"], []
        for x in probes[t.theme]:
            try:
                row.append(repr(fn(x)))
            except Exception as exc:  # noqa: BLE001 - a raise is behaviour too
                row.append(type(exc).__name__)
        out.append(tuple(row))
    return out


_TOKEN = re.compile(r"\w+|[^\w\s]")
WINDOW = 13
# a held-out body may share at most this share of its 13-token windows with train bodies
# (contamination counts a reference with half of them in training text; the margin covers the
# repo files and examples around the same train functions)
MAX_SHARED = 0.25


def windows(text: str, n: int = WINDOW) -> set[tuple[str, ...]]:
    """The `n`-token windows of `text` (tokens: words and single punctuation marks)."""
    toks = _TOKEN.findall(text)
    return {tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)}


def shared_share(text: str, grams: set[tuple[str, ...]], n: int = WINDOW) -> float:
    """The share of `text`'s `n`-token windows (counted with repeats) found in `grams`."""
    toks = _TOKEN.findall(text)
    ws = [tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)]
    return sum(w in grams for w in ws) / len(ws) if ws else 0.0


@dataclass
class CodeSpace:
    """The world's functions: `train` feeds every training text, `test` only held-out items.

    Both parts are distinct functions (by key and by name); the held-out part has no structure,
    behaviour, normalised body or docstring of the train part."""

    seed: int
    train: list[FuncTemplate]
    test: list[FuncTemplate]

    @classmethod
    def build(cls, seed: int, n_train: int = 2500, n_test: int = 800) -> CodeSpace:
        rng = random.Random(f"{seed}:codespace")
        train: list[FuncTemplate] = []
        test: list[FuncTemplate] = []
        names: set[str] = set()
        for _ in range(40 * (n_train + n_test)):
            if len(train) >= n_train and len(test) >= n_test:
                break
            t = _draw(rng)
            if t is None or t.names[0] in names:
                continue
            side = test if held_out_structure(seed, t.structure) else train
            if len(side) < (n_test if side is test else n_train):
                names.add(t.names[0])
                side.append(t)
        seen = set(fingerprints(train))
        bodies = {normalised_body(t) for t in train}
        docs = {t.docstring() for t in train}
        grams = {w for t in train for w in windows(t.body("f"))}
        test = [
            t
            for t, fp in zip(test, fingerprints(test))
            if fp not in seen
            and normalised_body(t) not in bodies
            and t.docstring() not in docs
            and shared_share(t.body("f"), grams) < MAX_SHARED
        ]
        return cls(seed, train, test)

    def part(self, split: str) -> list[FuncTemplate]:
        if split not in ("train", "test"):
            raise ValueError(f"code space split must be 'train' or 'test', got {split!r}")
        return self.train if split == "train" else self.test


@functools.lru_cache(maxsize=8)
def code_space(seed: int) -> CodeSpace:
    """The code space of a world seed (built once per process)."""
    return CodeSpace.build(seed)


def call_src(name: str, args: tuple) -> str:
    return f"{name}({', '.join(repr(a) for a in args)})"


def call_repr(namespace: dict, expr: str) -> str:
    """Evaluate `expr` in a copy of `namespace`; return repr(result) or 'raises <Error>: msg'."""
    try:
        return repr(eval(expr, copy.copy(namespace)))  # noqa: S307 - our own generated source
    except Exception as exc:  # noqa: BLE001 - any failure of generated code is a result
        return f"raises {type(exc).__name__}: {exc}"


@functools.lru_cache(maxsize=8192)
def _compiled(source: str) -> CodeType:
    return compile(source, "<world>", "exec")


def load_source(source: str) -> dict:
    """Execute module source and return its namespace (our own generated code only)."""
    ns: dict = {"__name__": "arcforge_world_exec"}
    exec(_compiled(source), ns)  # noqa: S102 - our own generated source
    return ns


_TRIVIAL = ("None", "0", "[]", "''", "{}", "1")


def informative_calls(
    ns: dict,
    name: str,
    gen: Callable[[random.Random], tuple],
    rng: random.Random,
    k: int,
    tries: int = 24,
) -> list[tuple[str, str]]:
    """`k` distinct calls of `name` (defined in `ns`) with their outputs, chosen from `tries`
    draws so that outputs differ and few are trivial (None, 0, empty): tests that tell a
    function from its neighbours in the space, not only from garbage."""
    drawn: dict[str, str] = {}
    for _ in range(tries):
        call = call_src(name, gen(rng))
        drawn.setdefault(call, call_repr(ns, call))
    by_output: dict[str, list[str]] = {}
    for call, out in drawn.items():
        by_output.setdefault(out, []).append(call)
    # one call per distinct output first (non-trivial outputs before trivial ones), then repeats
    firsts = sorted(by_output, key=lambda o: o in _TRIVIAL)
    order = [by_output[o][0] for o in firsts] + [c for o in firsts for c in by_output[o][1:]]
    return [(c, drawn[c]) for c in order[:k]]


def snippet_doc(rng: random.Random, tpl: FuncTemplate, name: str, n_examples: int) -> str:
    """A standalone code document: the function plus REPL-style examples with real outputs."""
    src = tpl.render(name)
    ns = load_source(src)
    lines = [f"# {tpl.theme} helper: {name}", src]
    for _ in range(n_examples):
        expr = call_src(name, tpl.gen(rng))
        lines.append(f">>> {expr}\n{call_repr(ns, expr)}")
    return "\n".join(lines) + "\n"
