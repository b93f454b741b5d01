"""A small evaluator of the part of Cloud Logging's query language the kit's filters use, and of the
extractors of its log-based metrics.

The query language (https://cloud.google.com/logging/docs/view/logging-query-language): comparisons
(= >= <= > <) of a field path with a literal or a parenthesised OR of literals, AND (or juxtaposition),
OR, NOT, parentheses, and sample(FIELD, FRACTION). Anything else (!=, the has operator `:`, regular
expressions, other functions) is refused rather than guessed. A comparison on a missing field is false.

Log-based metrics' label and value extractors
(https://cloud.google.com/logging/docs/logs-based-metrics/labels): EXTRACT(FIELD) only.

infra/logging.tf's filters are checked with it on sample entries (tests/unit/test_log_exclusions.py),
and the rehearsal's Monitoring stand-in evaluates the deployed log-based metrics with it
(visitkit.rehearsal.monitoring).
"""
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

TOKEN = re.compile(r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<number>-?\d+(?:\.\d+)?)(?![\w.])|'
                   r'(?P<op>>=|<=|!=|=|<|>|:)|(?P<punct>[(),])|(?P<word>[A-Za-z_@][\w.@]*))')
EXTRACT = re.compile(r"\s*EXTRACT\(\s*([A-Za-z_@][\w.@]*)\s*\)\s*")

Token = tuple[str | None, Any]  # (kind, value): kind string, number, op, punct or word
# ("and" | "or", [trees]) | ("not", tree) | ("sample", field, fraction) | ("compare", field, op, [values])
Tree = tuple[Any, ...]


def tokens(text: str) -> list[Token]:
    found: list[Token] = []
    at = 0
    while at < len(text):
        match = TOKEN.match(text, at)
        if not match or match.end() == at:
            if text[at:].strip():
                raise ValueError(f"cannot read {text[at:]!r}")
            break
        kind = match.lastgroup or ""
        value = match[kind]
        found.append((kind, json.loads(value) if kind == "string" else float(value) if kind == "number" else value))
        at = match.end()
    return found


class Parser:
    """expression := conjunction (OR conjunction)*; conjunction := unary ([AND] unary)*;
    unary := NOT unary | ( expression ) | sample(field, fraction) | field OP value;
    value := literal | ( literal (OR literal)* ). Returns nested tuples (Tree)."""

    def __init__(self, text: str):
        self.items, self.at = tokens(text), 0

    def peek(self, *expected: Any) -> Token | None:
        item = self.items[self.at] if self.at < len(self.items) else (None, None)
        return item if not expected or item in expected or item[0] in expected else None

    def take(self, *expected: Any) -> Token:
        item = self.peek(*expected)
        if item is None:
            raise ValueError(f"expected {expected} at {self.items[self.at:]!r}")
        self.at += 1
        return item

    def parse(self) -> Tree:
        tree = self.expression()
        if self.at != len(self.items):
            raise ValueError(f"left over: {self.items[self.at:]!r}")
        return tree

    def expression(self) -> Tree:
        terms = [self.conjunction()]
        while self.peek(("word", "OR")):
            self.take()
            terms.append(self.conjunction())
        return terms[0] if len(terms) == 1 else ("or", terms)

    def conjunction(self) -> Tree:
        terms = [self.unary()]
        while self.peek() != (None, None) and not self.peek(("word", "OR"), ("punct", ")")):
            if self.peek(("word", "AND")):
                self.take()
            terms.append(self.unary())
        return terms[0] if len(terms) == 1 else ("and", terms)

    def unary(self) -> Tree:
        if self.peek(("word", "NOT")):
            self.take()
            return ("not", self.unary())
        if self.peek(("punct", "(")):
            self.take()
            inner = self.expression()
            self.take(("punct", ")"))
            return inner
        _, word = self.take("word")
        if self.peek(("punct", "(")):  # a function: only sample(FIELD, FRACTION) is used
            if word != "sample":
                raise ValueError(f"unknown function {word}")
            self.take()
            _, field = self.take("word")
            self.take(("punct", ","))
            _, fraction = self.take("number")
            self.take(("punct", ")"))
            if not 0 < fraction <= 1:
                raise ValueError(f"sample() takes a fraction in (0, 1], not {fraction}")
            return ("sample", field, fraction)
        _, op = self.take("op")
        if self.peek(("punct", "(")):
            self.take()
            values = [self.take("string", "number")[1]]
            while self.peek(("word", "OR")):
                self.take()
                values.append(self.take("string", "number")[1])
            self.take(("punct", ")"))
        else:
            values = [self.take("string", "number")[1]]
        if op not in ("=", ">=", "<=", ">", "<"):
            raise ValueError(f"operator {op} is not in the subset evaluated here")
        return ("compare", word, op, values)


def field_of(entry: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path of a log entry (jsonPayload.outcome), or None where there is none."""
    value: Any = entry
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def compare(found: Any, op: str, wanted: Any) -> bool:
    if found is None:  # a comparison on a missing field is false
        return False
    if isinstance(wanted, float):
        try:
            found = float(found)
        except (TypeError, ValueError):
            return False
    elif not isinstance(found, str):
        return False
    return {"=": found == wanted, ">=": found >= wanted, "<=": found <= wanted, ">": found > wanted,
            "<": found < wanted}[op]


def sampled(value: Any, fraction: float) -> bool:
    """sample(): a fraction of the entries, chosen by a hash of the field (the same entry, the same answer)."""
    if value is None:
        return False
    digest = hashlib.sha256(str(value).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def evaluate(tree: Tree, entry: Mapping[str, Any], sample: str = "hash") -> bool:
    """True if the entry matches. sample="any": sample() is true whenever it could be (the entry may be
    one of the share it picks); "hash": as sampled() picks."""
    kind = tree[0]
    if kind == "and":
        return all(evaluate(t, entry, sample) for t in tree[1])
    if kind == "or":
        return any(evaluate(t, entry, sample) for t in tree[1])
    if kind == "not":
        return not evaluate(tree[1], entry, sample)
    if kind == "sample":
        return bool(tree[2] > 0) if sample == "any" else sampled(field_of(entry, tree[1]), tree[2])
    _, path, op, values = tree
    return any(compare(field_of(entry, path), op, value) for value in values)


def matches(text: str, entry: Mapping[str, Any], sample: str = "hash") -> bool:
    return evaluate(Parser(text).parse(), entry, sample)


def extracted_field(extractor: str) -> str:
    """The field path an EXTRACT(FIELD) extractor reads; ValueError for any other extractor."""
    found = EXTRACT.fullmatch(extractor)
    if not found:
        raise ValueError(f"extractor {extractor!r}: only EXTRACT(FIELD) is evaluated here")
    return found[1]
