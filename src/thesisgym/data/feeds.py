"""RSS/Atom feeds (feedparser) and RSS dumps saved as CSV -> news events with their publication times.

- `read_feed`: an RSS 2.0 or Atom file, parsed by feedparser (it honours the XML's declared encoding,
  e.g. the ISO-8859-1 SEC EDGAR feed, and reads RFC-822 and ISO-8601 dates). An entry is published at
  its `published` time, else its `updated` time; an entry with neither raises (naming the entry and
  the field), since a guessed time could leak it. feedparser reads a time without a zone as UTC; here
  such a time raises (an `ArgumentError` naming `assume_timezone`) unless the zone is given, since an
  Eastern time read as UTC is published four or five hours too early. Feed-level parse problems (feedparser's `bozo`)
  that left no entries raise; ones that still yielded entries are kept in the report's notes.
- `read_rss_csv`: an RSS dump as CSV with `title,pubDate[,guid,link,description]` (the BBC business
  file in ../shared/data/news): `pubDate` in RFC-822 ("Mon, 07 Mar 2022 00:14:42 GMT") or ISO-8601
  with an offset. Entries repeating a guid (or, without guid, a title and time) are counted and dropped.

Feed items are market-wide (ticker "") unless `ticker=` is given; kind "news". In a prompt,
market-wide events appear in the macro section (see thesisgym.dataset.events).
"""

from __future__ import annotations

import calendar
from email.utils import parsedate_to_datetime
from pathlib import Path

import numpy as np
import pandas as pd

from thesisgym.data.files import EventsImport, read_table
from thesisgym.data.validate import raise_rows, require_columns, validate_events
from thesisgym.schema import ArgumentError

__all__ = ["parse_feed_time", "read_feed", "read_rss_csv"]


def parse_feed_time(text: str) -> pd.Timestamp | None:
    """An RFC-822 or ISO-8601-with-offset time as UTC; None when it is neither (or has no zone)."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        dt = parsedate_to_datetime(text)
        if dt.tzinfo is not None:
            return pd.Timestamp(dt).tz_convert("UTC")
    except (TypeError, ValueError, IndexError):
        pass
    try:
        ts = pd.Timestamp(text)
    except ValueError:
        return None
    return ts.tz_convert("UTC") if ts.tzinfo is not None else None


def read_feed(
    path: str | Path, *, ticker: str = "", source: str | None = None, assume_timezone: str | None = None
) -> EventsImport:
    """An RSS/Atom file -> news events (module docstring)."""
    import feedparser

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise ValueError(f"{path.name}: binary file (NUL byte), expected RSS/Atom XML")
    feed = feedparser.parse(data)
    if not feed.entries:
        why = f" ({feed.get('bozo_exception')})" if feed.get("bozo") else ""
        raise ValueError(f"{path.name}: no RSS/Atom entries found{why}")
    name = source or feed.feed.get("title", "") or path.stem
    times = [_entry_time(path, k, e, assume_timezone) for k, e in enumerate(feed.entries)]
    naive = [k for k, t in enumerate(times) if t is None]
    if naive:
        e = feed.entries[naive[0]]
        raise ArgumentError(
            "{file}: {n} entr{ies} with a time but no timezone (first: entry {k}, {raw!r}); feeds give UTC or "
            "an offset, so this one is ambiguous: pass {arg} with the zone the feed's times are in",
            argument="assume_timezone", file=path.name, n=len(naive), ies="y" if len(naive) == 1 else "ies",
            k=naive[0] + 1, raw=e.get("published") or e.get("updated"),
        )
    rows = [
        {"ticker": ticker, "published_at": when, "kind": "news", "source": str(name)[:60],
         "title": e.get("title", ""), "text": ""}
        for e, when in zip(feed.entries, times, strict=True)
    ]
    events = validate_events(pd.DataFrame(rows), source=path.name)
    rep = EventsImport(events=events, source=path.name, rows_read=len(feed.entries))
    if feed.get("bozo"):
        rep.notes.append(f"feed parse warning: {feed.get('bozo_exception')}")
    return rep


def _entry_time(path: Path, k: int, e, assume_timezone: str | None) -> pd.Timestamp | None:
    """The entry's UTC time; None when its text has no zone and `assume_timezone` is not given."""
    raw = e.get("published") or e.get("updated") or ""
    parsed = e.get("published_parsed") or e.get("updated_parsed")
    if parsed is None:
        field = "published/updated"
        raise ValueError(
            f"{path.name}, entry {k + 1} ({e.get('title', '')[:60]!r}), field '{field}': "
            + (f"unreadable date {raw!r}" if raw else "missing timestamp")
        )
    if parse_feed_time(raw) is not None:
        return pd.Timestamp(calendar.timegm(parsed), unit="s", tz="UTC")
    if assume_timezone is None:
        return None
    local = pd.Timestamp(calendar.timegm(parsed), unit="s")  # feedparser's reading of the naive clock
    return local.tz_localize(assume_timezone, ambiguous=False, nonexistent="shift_forward").tz_convert("UTC")


def read_rss_csv(path: str | Path, *, ticker: str = "", source: str | None = None) -> EventsImport:
    """`title,pubDate[,guid,link,description]` CSV -> news events; repeated guids counted and dropped."""
    path = Path(path)
    raw, lines = read_table(path)
    cols = {str(c).strip().lower(): str(c) for c in raw.columns}
    require_columns(path.name, cols, ("title", "pubdate"), "RSS CSV (title,pubDate[,guid,link,description])")
    texts = raw[cols["pubdate"]].astype(str)
    when = [parse_feed_time(t) for t in texts]
    raise_rows(
        path.name,
        lines,
        np.array([w is None for w in when], dtype=bool),
        cols["pubdate"],
        lambda i: (
            "missing timestamp"
            if not texts.iat[i].strip()
            else f"not an RFC-822 or ISO-8601 time with a zone {texts.iat[i]!r}"
        ),
    )
    key = raw[cols["guid"]].astype(str) if "guid" in cols else raw[cols["title"]].astype(str) + "|" + texts
    dup = key.duplicated().to_numpy()
    frame = pd.DataFrame(
        {
            "ticker": ticker,
            "published_at": pd.Series(when, dtype="datetime64[ns, UTC]"),
            "kind": "news",
            "source": source or path.stem.split("_")[0].upper(),
            "title": raw[cols["title"]],
            "text": raw[cols["description"]] if "description" in cols else "",
        }
    )[~dup].reset_index(drop=True)
    events = validate_events(
        frame, source=path.name, lines=None if lines is None else np.asarray(lines)[~dup]
    )
    return EventsImport(
        events=events,
        source=path.name,
        rows_read=len(raw),
        duplicates=int(dup.sum()),
        dropped_duplicates=int(dup.sum()),
    )
