"""SearchEnv: answer a question from a local corpus with search / open / answer tools.

The corpus (the world's pages, or any list of (doc_id, title, text)) is indexed once with
bm25s (`SearchIndex`) and shared read-only by every episode. Tools:
- search(query) -> the top-k documents as numbered "N. [doc_id] title: snippet" lines (BM25 over
  title and text, except that documents whose title is the query itself, up to case and
  punctuation, come first, and failing that those whose title the query starts with, as in
  "Ada Lovelace born in"; documents with score 0, i.e. no query term in common, are not
  listed). The snippet is query-biased, as web search engines show it (`snippet`): the line
  or sentence of the document that holds the most query words outside its title, or the
  document's opening when none does. So "Ada Lovelace born in" shows Ada Lovelace's page
  with its "born in: London" line: the fact is one short line above the next call, which the
  demo's 4-layer model can copy, where after opening a whole page it reached the second hop's
  entity in 5 of 100 episodes;
- open(doc_id, page=0) -> one page of the document's text (paginated by lines, `page_chars`
  characters at most per page), with a "page i of n" header. `doc_id` is a document id or the
  number of a result of the latest search (`open(1)` opens the first hit), as in the gpt-oss
  browser tool's `open(id=N)`: after SFT the demo model's first open reached the first evidence
  page in 0 of 18 episodes when it had to copy a page id, and in 68 of 90 when the expert
  opened result 1;
- answer(text) -> records the final answer and ends the episode.
A reply without tool calls also ends the episode; its content is then the answer.
Reward: normalized exact match (lowercase, no punctuation, no articles, squashed spaces) of the
answer (its "Answer: ..." part when it has one) against validation.answer; token F1 in details.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import bm25s

from arcforge.envs.base import Env
from arcforge.rewards.math import extract_answer
from arcforge.types import Message, Reward, Task, Tool

SYSTEM_PROMPT = (
    "Answer the question with the tools: search the corpus, open the documents you need, "
    "then call answer with the final answer only."
)


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str


def as_document(d: Any) -> Document:
    """A Document from a Document, a (doc_id, title, text) tuple, a {"id", "title"?, "text"}
    dict or anything with .id/.title/.text (e.g. arcforge.world.Page)."""
    if isinstance(d, Document):
        return d
    if isinstance(d, dict) and "id" in d and "text" in d:
        return Document(str(d["id"]), str(d.get("title", "")), str(d["text"]))
    if isinstance(d, tuple | list) and len(d) == 3:
        return Document(str(d[0]), str(d[1]), str(d[2]))
    if all(hasattr(d, a) for a in ("id", "title", "text")):  # e.g. arcforge.world.Page
        return Document(str(d.id), str(d.title), str(d.text))
    raise ValueError(
        f"a corpus item must be a Document, (doc_id, title, text), a dict or have "
        f".id/.title/.text; got {type(d).__name__}"
    )


class SearchIndex:
    """A BM25 index (bm25s, English stopwords) over documents' titles and texts."""

    def __init__(self, docs: Iterable[Any]) -> None:
        self.docs = [as_document(d) for d in docs]
        if not self.docs:
            raise ValueError("SearchIndex needs at least one document")
        self.by_id = {d.id: d for d in self.docs}
        if len(self.by_id) != len(self.docs):
            raise ValueError("document ids in a SearchIndex must be unique")
        self.by_title: dict[str, list[Document]] = {}
        for d in self.docs:
            self.by_title.setdefault(normalize_answer(d.title), []).append(d)
        corpus = [f"{d.title}\n{d.text}" for d in self.docs]
        tokens = bm25s.tokenize(corpus, stopwords="en", show_progress=False)
        self._bm25 = bm25s.BM25()
        self._bm25.index(tokens, show_progress=False)

    def search(self, query: str, k: int = 3) -> list[tuple[Document, float]]:
        """The top-k documents with a positive BM25 score, best first."""
        q = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)
        if not q[0]:
            return []
        idx, scores = self._bm25.retrieve(q, k=min(k, len(self.docs)), show_progress=False)
        hits = [(self.docs[int(i)], float(s)) for i, s in zip(idx[0], scores[0]) if s > 0]
        exact = self._title_hits(normalize_answer(query))
        if not exact:
            return hits
        # title pages first, with their BM25 score (0.0 when outside the top k)
        score = {d.id: sc for d, sc in hits}
        first = [(d, score.get(d.id, 0.0)) for d in exact]
        ids = {d.id for d in exact}
        return (first + [h for h in hits if h[0].id not in ids])[:k]

    def _title_hits(self, q: str) -> list[Document]:
        """Documents titled the whole query, else the longest leading words of it."""
        words = q.split()
        for n in range(len(words), 0, -1):
            if hits := self.by_title.get(" ".join(words[:n]), []):
                return hits
        return []


_WORD = re.compile(r"[a-z0-9]+")
_UNIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")  # sentence breaks inside a line


def _stems(text: str) -> list[str]:
    """Lowercase words cut to 6 letters, so that "headquartered" meets "headquarters" and
    "founder" meets "founded" (a Snowball stemmer, e.g. PyStemmer, keeps "founder" and "found"
    apart, and the snippet only compares words within one short document)."""
    return [w[:6] for w in _WORD.findall(text.lower())]


def snippet(doc: Document, query: str, chars: int) -> str:
    """The query-biased snippet of `doc`: the line (or sentence of a longer line) with the most
    distinct query words that are not words of the document's title (each counts 1; the rest
    of the query as one phrase adds 1), the earliest on ties; the document's opening when no
    unit has any. Cut to `chars` characters with "..."."""
    title = set(_stems(doc.title))
    terms = [w for w in _stems(query) if w not in title]
    wanted, phrase = set(terms), " ".join(terms)
    best, best_score = "", 0.0
    for line in doc.text.splitlines():
        for unit in _UNIT.split(line.strip()):
            words = _stems(unit)
            bonus = float(bool(phrase) and phrase in " ".join(words))
            score = len(wanted.intersection(words)) + bonus
            if score > best_score:
                best, best_score = unit, score
    text = " ".join((best or doc.text).split())
    return text if len(text) <= chars else text[: chars - 3] + "..."


def paginate(text: str, page_chars: int) -> list[str]:
    """Split text into pages of at most `page_chars` characters, breaking between lines
    (a longer line is cut)."""
    pages, cur = [], ""
    for line in text.splitlines(keepends=True):
        while len(line) > page_chars:
            if cur:
                pages.append(cur)
                cur = ""
            pages.append(line[:page_chars])
            line = line[page_chars:]
        if len(cur) + len(line) > page_chars:
            pages.append(cur)
            cur = ""
        cur += line
    if cur or not pages:
        pages.append(cur)
    return pages


def normalize_answer(s: str) -> str:
    """SQuAD normalization: lowercase, drop punctuation and articles, squash whitespace."""
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def token_f1(pred: str, ref: str) -> float:
    """Token-overlap F1 of the normalized strings."""
    p, r = normalize_answer(pred).split(), normalize_answer(ref).split()
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)


class SearchEnv(Env):
    """Multi-turn search environment over a shared `SearchIndex`.

    Args:
        index: the corpus index (build once, share between episodes).
        top_k: results per search.
        page_chars: characters per page of `open`.
        snippet_chars: characters of text shown per search result.
        system_prompt: the system message (None for none).
    """

    def __init__(
        self,
        index: SearchIndex,
        top_k: int = 3,
        page_chars: int = 1000,
        snippet_chars: int = 120,
        system_prompt: str | None = SYSTEM_PROMPT,
    ) -> None:
        super().__init__(system_prompt)
        self.index, self.top_k = index, top_k
        self.page_chars, self.snippet_chars = page_chars, snippet_chars
        self.tools = [Tool.from_function(f) for f in (self.search, self.open, self.answer)]
        self._counts: Counter[str] = Counter()
        self._hits: list[str] = []  # doc ids of the latest search's results, in order

    # ------------------------------------------------------------ tools

    def search(self, query: str) -> str:
        """Search the corpus and return the best matching documents with their ids.

        Args:
            query: a few keywords, e.g. an entity name.
        """
        self._counts["search"] += 1
        hits = self.index.search(str(query), self.top_k)
        self._hits = [d.id for d, _ in hits]
        if not hits:
            return f"no results for {query!r}"
        lines = []
        for i, (d, _) in enumerate(hits):
            lines.append(
                f"{i + 1}. [{d.id}] {d.title}: {snippet(d, str(query), self.snippet_chars)}"
            )
        return "\n".join(lines)

    def open(self, doc_id: str | int, page: int = 0) -> str:
        """Open a document found by search and return one page of its text.

        Args:
            doc_id: the id shown in search results, e.g. "page-00042", or the result's number
                in the latest search, e.g. 1.
            page: the page number, starting at 0.
        """
        self._counts["open"] += 1
        key = str(doc_id).strip().strip("[]").rstrip(".")
        if key.isdigit() and key not in self.index.by_id:
            n = int(key)
            if not 1 <= n <= len(self._hits):
                listed = f"1 to {len(self._hits)}" if self._hits else "none yet: search first"
                return f"error: no result number {n} in the latest search (results: {listed})"
            key = self._hits[n - 1]
        doc = self.index.by_id.get(key)
        if doc is None:
            return (
                f"error: no document with id {doc_id!r}; use an id or a result number "
                "from the search results"
            )
        pages = paginate(doc.text, self.page_chars)
        p = int(page)
        if not 0 <= p < len(pages):
            return f"error: page {p} out of range; {doc.id} has pages 0 to {len(pages) - 1}"
        return f"[{doc.id}] {doc.title} (page {p}; pages 0-{len(pages) - 1})\n{pages[p]}"

    def answer(self, text: str) -> str:
        """Give the final answer; this ends the episode.

        Args:
            text: the answer only, e.g. "Paris".
        """
        self.reply = str(text)  # ends the episode after this step
        return "answer recorded"

    # ------------------------------------------------------------ hooks

    def check(self, task: Task) -> None:
        if task.validation.answer is None:
            raise ValueError(f"task {task.id}: SearchEnv needs validation.answer")

    def start(self, task: Task) -> list[Message]:
        self._counts, self._hits = Counter(), []
        return self.opening(task)

    def verify(self) -> Reward:
        if self.task is None:
            raise RuntimeError("SearchEnv.verify called before reset")
        ref = str(self.task.validation.answer)
        pred = extract_answer(self.reply) if self.reply is not None else ""
        em = float(bool(pred) and normalize_answer(pred) == normalize_answer(ref))
        details = {
            "answer": pred if self.reply is not None else None,
            "em": em,
            "f1": token_f1(pred, ref),
            "searches": self._counts["search"],
            "opens": self._counts["open"],
        }
        return Reward(em, details)
