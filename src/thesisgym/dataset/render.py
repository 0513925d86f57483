"""Plain-string rendering of evidence into the prompt, and the approximate token count for budgets.

One evidence item is one line: ``[N3] 2024-03-05 | Reuters | text``; the `text` part is exactly
`EvidenceItem.text`, so a quote copied from the line can be checked against the item. Sections
appear under ``## <section>`` headers after a short header naming the ticker, the as-of date and the
sections. `render_context` turns a list of EvidenceItems back into the same prompt the fast builder
writes (tests check both agree), which also makes it the reference for anyone re-rendering a row.

Tokens: `count_tokens` counts regex words and punctuation marks (``\\w+|[^\\w\\s]``). It needs no
tokenizer, is deterministic, and for English prose with numbers lands near a BPE count (a BPE
tokenizer splits long numbers further, so leave ~30 % headroom below a model's context size). Since
whitespace never forms a token, the count of joined lines is the sum of the lines' counts, which lets
the builder budget item by item.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from thesisgym.schema import SECTIONS, SYSTEM_PROMPT, EvidenceItem, Message

# one number convention for evidence and claims: the reward parser's (dataset.events imports it from here)
from thesisgym.thesis import extract_numbers  # noqa: F401

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
ID_TOKENS = 3  # "[", "N12", "]"


def count_tokens(text: str) -> int:
    """Approximate token count: words and punctuation marks (see module docstring)."""
    return len(_TOKEN_RE.findall(text))


def clean_text(text: str) -> str:
    """One-line evidence text: newlines and runs of whitespace collapse to one space."""
    return " ".join(str(text).split())


def event_text(title: str, text: str) -> str:
    """The evidence text of an event: its title, then its body unless the body repeats the title."""
    ti, tx = clean_text(title), clean_text(text)
    if not tx or tx == ti or tx.startswith(ti):
        return tx or ti
    if not ti:
        return tx
    return f"{ti}: {tx}"


def item_body(date: str, source: str, text: str) -> str:
    """The part of an evidence line after the id."""
    return f"{date} | {source} | {text}"


def render_header(ticker: str, asof: str, sections: Sequence[str], *, cutoff: str, timezone: str) -> str:
    return (
        f"Ticker: {ticker}\n"
        f"As of: {asof} (position taken at the close; evidence published up to {cutoff} {timezone})\n"
        f"Sections: {', '.join(sections)}"
    )


def section_header(section: str) -> str:
    return f"## {section}"


def render_context(
    ticker: str,
    asof: str,
    evidence: Sequence[EvidenceItem],
    *,
    cutoff: str = "16:00",
    timezone: str = "America/New_York",
    system_prompt: str = SYSTEM_PROMPT,
) -> tuple[list[Message], str]:
    """(prompt messages, prompt_text) for evidence items already in prompt order.

    Sections appear in the order of their first item; an item whose section is unknown raises.
    """
    order: list[str] = []
    lines: dict[str, list[str]] = {}
    for k, it in enumerate(evidence):
        sec = it["section"]
        if sec not in SECTIONS:
            raise ValueError(f"render_context: evidence[{k}] field 'section': unknown section {sec!r}")
        if sec not in lines:
            order.append(sec)
            lines[sec] = []
        lines[sec].append(f"[{it['id']}] {item_body(it['date'], it['source'], it['text'])}")
    parts = [render_header(ticker, asof, order, cutoff=cutoff, timezone=timezone)]
    for sec in order:
        parts.append("\n" + section_header(sec) + "\n" + "\n".join(lines[sec]))
    user = "\n".join(parts)
    messages: list[Message] = [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": user},
    ]
    return messages, join_prompt(system_prompt, user)


def join_prompt(system: str, user: str) -> str:
    """`prompt_text`: the system and user messages as one plain string."""
    return f"{system}\n\n{user}"
