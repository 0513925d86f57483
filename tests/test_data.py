"""Tests of MarketStore validation, the CSV/Parquet importers, the real-data adapters and the data CLI."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from thesisgym.data import (
    DataValidationError,
    MarketStore,
    import_prices,
    import_store,
    load_store,
    read_events,
    read_events_csv,
    read_market_headlines,
    read_price_csv,
    read_ticker_headlines,
    validate_bars,
    validate_events,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
PRICES = SHARED / "prices"
NEWS = SHARED / "news"
needs_real = pytest.mark.skipif(not (PRICES / "AAPL.csv").exists(), reason="../shared/data not present")

HEADER = "Date,Open,High,Low,Close,Volume\n"
GOOD = [
    "2020-01-02,10.0,11.0,9.5,10.5,1000",
    "2020-01-03,10.5,11.5,10.0,11.0,1200",
    "2020-01-06,11.0,11.2,10.1,10.2,900",
]


def write_prices(tmp_path: Path, rows: list[str], name: str = "AAPL.csv", header: str = HEADER) -> Path:
    path = tmp_path / name
    path.write_text(header + "\n".join(rows) + "\n")
    return path


def bad_row(i: int, row: str) -> list[str]:
    rows = list(GOOD)
    rows[i] = row
    return rows


# --- price validation, one rule per case: file, line (header = line 1) and field are named -----------
@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (
            bad_row(1, "2020-01-03,10.5,11.5,10.0,-3.2,1200"),
            "AAPL.csv, line 3 (header = line 1), field 'Close': negative price -3.2",
        ),
        (
            bad_row(2, "2020-01-06,0,11.2,10.1,10.2,900"),
            "AAPL.csv, line 4 (header = line 1), field 'Open': zero price",
        ),
        (
            bad_row(0, "2020-01-02,10.0,,9.5,10.5,1000"),
            "AAPL.csv, line 2 (header = line 1), field 'High': missing value",
        ),
        (
            bad_row(0, "2020-01-02,10.0,NaN,9.5,10.5,1000"),
            "AAPL.csv, line 2 (header = line 1), field 'High': missing value",
        ),
        (
            bad_row(0, "2020-01-02,10.0,abc,9.5,10.5,1000"),
            "AAPL.csv, line 2 (header = line 1), field 'High': not a number 'abc'",
        ),
        (
            bad_row(1, "2020-01-03,10.5,9.0,10.0,9.5,1200"),
            "AAPL.csv, line 3 (header = line 1), field 'High': high 9 below low 10",
        ),
        (
            bad_row(1, "2020-01-03,10.5,11.5,10.0,12.0,1200"),
            "AAPL.csv, line 3 (header = line 1), field 'High': high 11.5 below max(open, close) 12",
        ),
        (
            bad_row(1, "2020-01-03,10.5,11.5,10.7,11.0,1200"),
            "AAPL.csv, line 3 (header = line 1), field 'Low': low 10.7 above min(open, close) 10.5",
        ),
        (
            bad_row(2, "2020-01-06,11.0,11.2,10.1,10.2,-5"),
            "AAPL.csv, line 4 (header = line 1), field 'Volume': negative volume -5",
        ),
        (
            bad_row(2, "2020-01-03,11.0,11.2,10.1,10.2,900"),
            "AAPL.csv, line 4 (header = line 1), field 'Date': duplicate date 2020-01-03 for ticker AAPL (first at line 3)",
        ),
        (
            bad_row(2, "2020-01-01,11.0,11.2,10.1,10.2,900"),
            "AAPL.csv, line 4 (header = line 1), field 'Date': date 2020-01-01 comes after 2020-01-03",
        ),
        (
            bad_row(1, "03/01/2020,10.5,11.5,10.0,11.0,1200"),
            "AAPL.csv, line 3 (header = line 1), field 'Date': not an ISO date '03/01/2020'",
        ),
        (
            bad_row(1, "2020-01-03T10:30:00,10.5,11.5,10.0,11.0,1200"),
            "AAPL.csv, line 3 (header = line 1), field 'Date': bar date 2020-01-03 10:30:00 has a time of day",
        ),
    ],
)
def test_price_csv_rules_name_file_line_and_field(tmp_path, rows, expected):
    path = write_prices(tmp_path, rows)
    with pytest.raises(ValueError, match=re.escape(expected)):
        read_price_csv(path)


def test_missing_column_is_reported_from_the_header(tmp_path):
    path = write_prices(tmp_path, [r.rsplit(",", 1)[0] for r in GOOD], header="Date,Open,High,Low,Close\n")
    with pytest.raises(ValueError, match=re.escape("AAPL.csv, header, field 'volume': missing column")):
        read_price_csv(path)


def test_blank_lines_do_not_shift_reported_line_numbers(tmp_path):
    path = tmp_path / "AAPL.csv"
    path.write_text(HEADER + GOOD[0] + "\n\n" + GOOD[1] + "\n2020-01-06,11.0,11.2,10.1,-1,900\n")
    with pytest.raises(ValueError, match=re.escape("AAPL.csv, line 5 (header = line 1), field 'Close'")):
        read_price_csv(path)


def test_every_problem_is_counted_not_only_the_first(tmp_path):
    rows = [f"2020-01-{d:02d},10,11,9,-1,100" for d in range(1, 29)]
    with pytest.raises(DataValidationError) as info:
        read_price_csv(write_prices(tmp_path, rows))
    assert info.value.total == 28
    assert "and 18 more problems" in str(info.value)


def test_good_csv_reads_with_canonical_columns_and_ticker_from_stem(tmp_path):
    bars = read_price_csv(write_prices(tmp_path, GOOD, name="msft.csv"))
    assert list(bars.columns) == ["ticker", "date", "open", "high", "low", "close", "volume"]
    assert bars["ticker"].unique().tolist() == ["MSFT"]
    assert str(bars["date"].dtype) == "datetime64[ns]"
    assert bars["close"].tolist() == [10.5, 11.0, 10.2]
    assert read_price_csv(write_prices(tmp_path, GOOD, name="x.csv"), ticker="IBM")["ticker"].iat[0] == "IBM"


def test_long_layout_case_insensitive_and_per_ticker_order(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text(
        "Ticker,DATE,open,HIGH,low,Close,volume\n"
        "AAA,2020-01-02,1,2,0.5,1.5,10\nBBB,2020-01-02,5,6,4,5.5,10\n"
        "AAA,2020-01-03,1.5,2,1,1.8,10\nBBB,2020-01-03,5.5,6,5,5.8,10\n"
    )
    bars = read_price_csv(path)
    assert sorted(bars["ticker"].unique()) == ["AAA", "BBB"]
    assert len(read_price_csv(path, ticker="BBB")) == 2
    path.write_text(path.read_text() + "AAA,2020-01-02,1,2,0.5,1.5,10\n")
    with pytest.raises(
        ValueError,
        match=re.escape(
            "long.csv, line 6 (header = line 1), field 'DATE': duplicate date 2020-01-02 for ticker AAA (first at line 2)"
        ),
    ):
        read_price_csv(path)


def test_same_ticker_in_two_files_is_an_error(tmp_path):
    a = write_prices(tmp_path, GOOD, name="AAPL.csv")
    (tmp_path / "b").mkdir()
    b = write_prices(tmp_path / "b", GOOD, name="AAPL.csv")
    with pytest.raises(ValueError, match="ticker AAPL already imported from AAPL.csv"):
        import_prices([a, b])


def test_in_memory_frames_report_one_based_rows():
    df = pd.DataFrame(
        {
            "ticker": ["X", "X"],
            "date": pd.to_datetime(["2020-01-02", "2020-01-03"]),
            "open": [1.0, 1.0],
            "high": [1.0, 1.0],
            "low": [1.0, 1.0],
            "close": [1.0, np.nan],
            "volume": [1.0, 1.0],
        }
    )
    with pytest.raises(
        ValueError, match=re.escape("<frame>, row 2 (1-based data row), field 'close': missing value")
    ):
        validate_bars(df)
    tz = df.assign(date=df["date"].dt.tz_localize("UTC"), close=1.0)
    with pytest.raises(ValueError, match="must not carry a timezone"):
        validate_bars(tz)


# --- events ---------------------------------------------------------------------------------------
EV_HEADER = "ticker,published_at,kind,source,title,text,value,sentiment\n"


def write_events(tmp_path: Path, rows: list[str], name: str = "events.csv") -> Path:
    path = tmp_path / name
    path.write_text(EV_HEADER + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize(
    ("row", "expected", "kwargs"),
    [
        (
            "AAPL,2020-01-02 09:30:00,news,wire,Title,,,",
            "events.csv, line 3 (header = line 1), field 'published_at': 1 naive timestamp (no timezone), "
            "the first '2020-01-02 09:30:00'",
            {},
        ),
        (
            "AAPL,2020-01-02,news,wire,Title,,,",
            "events.csv, line 3 (header = line 1), field 'published_at': 1 naive timestamp (no timezone), "
            "the first '2020-01-02'",
            {},
        ),
        (
            # an offset counts only after a time of day, so this reads as naive, not as malformed
            "AAPL,yesterday+01:00,news,wire,Title,,,",
            "events.csv, line 3 (header = line 1), field 'published_at': 1 naive timestamp (no timezone), the first "
            "'yesterday+01:00'; write ISO-8601 with an offset (2020-04-06T09:30:00-04:00) or pass assume_timezone=",
            {},
        ),
        (
            "AAPL,2020-13-45T09:30:00Z,news,wire,Title,,,",
            "events.csv, line 3 (header = line 1), field 'published_at': not an ISO-8601 timestamp '2020-13-45T09:30:00Z'",
            {},
        ),
        (
            "AAPL,yesterday,news,wire,Title,,,",
            "events.csv, line 3 (header = line 1), field 'published_at': not an ISO-8601 timestamp 'yesterday'",
            {"assume_timezone": "America/New_York"},
        ),
        (
            "AAPL,2020-01-02T09:30:00Z,gossip,wire,Title,,,",
            "events.csv, line 3 (header = line 1), field 'kind': unknown event kind 'gossip'",
            {},
        ),
        (
            "ZZZ,2020-01-02T09:30:00Z,news,wire,Title,,,",
            "events.csv, line 3 (header = line 1), field 'ticker': unknown ticker 'ZZZ'",
            {"tickers": ["AAPL"]},
        ),
        (
            "AAPL,2020-01-02T09:30:00Z,news,wire,Title,,,1.5",
            "events.csv, line 3 (header = line 1), field 'sentiment': sentiment 1.5 outside [-1, 1]",
            {},
        ),
        (
            "AAPL,2020-01-02T09:30:00Z,news,wire,Title,,big,",
            "events.csv, line 3 (header = line 1), field 'value': not a number 'big'",
            {},
        ),
        (
            "AAPL,2020-01-02T09:30:00Z,news,wire,,,,",
            "events.csv, line 3 (header = line 1), field 'title': event has neither title nor text",
            {},
        ),
    ],
)
def test_event_rules_name_file_line_and_field(tmp_path, row, expected, kwargs):
    path = write_events(tmp_path, ["AAPL,2020-01-02T09:30:00-05:00,news,wire,Fine,,,", row])
    with pytest.raises(ValueError, match=re.escape(expected)):
        read_events_csv(path, **kwargs)


def test_events_parse_offsets_to_utc_and_allow_market_wide(tmp_path):
    path = write_events(
        tmp_path,
        [
            "AAPL,2020-01-02T16:30:00-05:00,fundamentals,10-Q,Results,EPS up 5%,5.0,0.4",
            ",2020-01-02T13:30:00Z,macro,BLS,CPI rose 0.2%,,0.2,",
        ],
    )
    ev = read_events_csv(path, tickers=["AAPL"])
    assert str(ev["published_at"].dtype) == "datetime64[ns, UTC]"
    assert ev["published_at"].tolist() == [
        pd.Timestamp("2020-01-02 21:30", tz="UTC"),
        pd.Timestamp("2020-01-02 13:30", tz="UTC"),
    ]
    assert ev["ticker"].tolist() == ["AAPL", ""]
    assert ev["value"].tolist() == [5.0, 0.2] and np.isnan(ev["sentiment"].iat[1])


def test_date_only_events_become_visible_the_next_trading_day(tmp_path):
    path = write_events(tmp_path, ["AAPL,2020-01-03,news,wire,Friday story,,,"])
    ev = read_events_csv(path, assume_timezone="America/New_York")
    assert ev["published_at"].iat[0] == pd.Timestamp("2020-01-03 23:59", tz="America/New_York")
    bars = read_price_csv(write_prices(tmp_path, GOOD))
    store = MarketStore(bars=bars, events=ev)
    assert len(store.as_of("2020-01-03").events("AAPL")) == 0  # not at Friday's close
    assert len(store.as_of("2020-01-06").events("AAPL")) == 1  # Monday's context sees it


def test_multiline_quoted_fields_keep_line_numbers_right(tmp_path):
    path = write_events(
        tmp_path,
        [
            'AAPL,2020-01-02T09:30:00Z,news,wire,"A title","line one\nline two",,',
            "AAPL,2020-01-02T09:30:00,news,wire,Naive,,,",
        ],
    )
    with pytest.raises(
        ValueError, match=re.escape("events.csv, line 4 (header = line 1), field 'published_at': 1 naive")
    ):
        read_events_csv(path)


def test_naive_datetime_column_in_a_frame_raises():
    df = pd.DataFrame(
        {
            "ticker": ["A"],
            "published_at": pd.to_datetime(["2020-01-02 10:00"]),
            "kind": ["news"],
            "title": ["t"],
        }
    )
    with pytest.raises(
        ValueError,
        match=re.escape("<frame>, row 1 (1-based data row), field 'published_at': 1 naive timestamp"),
    ):
        validate_events(df)
    ok = validate_events(df, assume_timezone="America/New_York")
    assert ok["published_at"].iat[0] == pd.Timestamp("2020-01-02 15:00", tz="UTC")


# --- the remaining rules, one per case: the whole message (file, row or line, field) is asserted ------
def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _store_with_truth(tmp_path: Path, truth_rows: list[tuple[str, str]]) -> Path:
    """A saved store of the GOOD AAPL bars whose truth.parquet has the given (ticker, date) rows."""
    store = MarketStore(bars=read_price_csv(write_prices(tmp_path, GOOD)))
    store.save(tmp_path / "s")
    n = len(truth_rows)
    pd.DataFrame(
        {
            "ticker": [t for t, _ in truth_rows],
            "date": pd.to_datetime([d for _, d in truth_rows]),
            "expected_return": [0.01] * n,
            "quality": [0.5] * n,
            "regime": ["bull"] * n,
        }
    ).to_parquet(tmp_path / "s" / "truth.parquet", index=False)
    return tmp_path / "s"


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        pytest.param(
            lambda p: read_price_csv(write_prices(p, bad_row(1, "2020-01-03,10.5,11.5,10.0,inf,1200"))),
            "AAPL.csv, line 3 (header = line 1), field 'Close': not finite inf",
            id="price-inf",
        ),
        pytest.param(
            lambda p: read_price_csv(
                write_prices(
                    p,
                    ["AAA,2020-01-02,1,2,0.5,1.5,10", ",2020-01-03,1.5,2,1,1.8,10"],
                    name="long.csv",
                    header="Ticker,Date,Open,High,Low,Close,Volume\n",
                )
            ),
            "long.csv, line 3 (header = line 1), field 'Ticker': missing ticker",
            id="missing-ticker",
        ),
        pytest.param(
            lambda p: read_price_csv(write_prices(p, bad_row(1, ",10.5,11.5,10.0,11.0,1200"))),
            "AAPL.csv, line 3 (header = line 1), field 'Date': missing date",
            id="missing-date",
        ),
        pytest.param(
            lambda p: read_price_csv(
                write_prices(p, [r + ",10.5" for r in GOOD], header="Date,Open,High,Low,Close,Volume,CLOSE\n")
            ),
            "AAPL.csv, header, field 'CLOSE': duplicate column (also 'Close')",
            id="duplicate-column",
        ),
        pytest.param(
            lambda p: read_events_csv(
                _write(
                    p / "events.csv", "ticker,published_at,kind,source\nAAPL,2020-01-02T09:30:00Z,news,wire\n"
                )
            ),
            "events.csv, header, field 'title': missing column (an event needs a title or a text column)",
            id="events-without-title-or-text",
        ),
        pytest.param(
            lambda p: read_events_csv(
                write_events(
                    p, ["AAPL,2020-01-02T09:30:00-05:00,news,wire,Fine,,,", "AAPL,,news,wire,Title,,,"]
                )
            ),
            "events.csv, line 3 (header = line 1), field 'published_at': missing timestamp",
            id="missing-event-timestamp",
        ),
        pytest.param(
            lambda p: load_store(_store_with_truth(p, [("AAPL", "2020-01-02"), ("ZZZ", "2020-01-02")])),
            "truth.parquet, row 2 (1-based data row), field 'ticker': unknown ticker 'ZZZ'",
            id="truth-unknown-ticker",
        ),
        pytest.param(
            lambda p: load_store(
                _store_with_truth(p, [("AAPL", "2020-01-02"), ("AAPL", "2020-01-03"), ("AAPL", "2020-01-02")])
            ),
            "truth.parquet, row 3 (1-based data row), field 'date': duplicate (ticker, date) (AAPL, 2020-01-02)",
            id="truth-duplicate-ticker-date",
        ),
        pytest.param(
            lambda p: load_store(_store_with_truth(p, [("AAPL", "2020-01-02"), ("AAPL", None)])),
            "truth.parquet, row 2 (1-based data row), field 'date': missing date",
            id="truth-missing-date",
        ),
    ],
)
def test_more_rules_name_file_row_and_field(tmp_path, make, expected):
    with pytest.raises(DataValidationError) as info:
        make(tmp_path)
    message = str(info.value)
    assert message.endswith(expected), message  # the whole (and only) problem, prefixed by the path
    assert info.value.total == 1
    prefix = message[: -len(expected)]
    assert prefix == "" or prefix.endswith(os.sep)  # only load_store's directory precedes the file name


def test_load_store_validates_what_it_reads(tmp_path):
    bars = read_price_csv(write_prices(tmp_path, GOOD))
    store = MarketStore(bars=bars)
    store.save(tmp_path / "s")
    assert load_store(tmp_path / "s").bars.equals(store.bars)
    broken = store.bars.copy()
    broken.loc[1, "low"] = 50.0
    broken.to_parquet(tmp_path / "s" / "bars.parquet", index=False)
    with pytest.raises(
        ValueError,
        match=re.escape("bars.parquet, row 2 (1-based data row), field 'high': high 11.5 below low 50"),
    ):
        load_store(tmp_path / "s")
    assert load_store(tmp_path / "s", validate=False).bars["low"].iat[1] == 50.0


def test_import_store_unknown_tickers_error_or_drop_counted(tmp_path):
    prices = write_prices(tmp_path, GOOD)
    events = write_events(
        tmp_path,
        ["AAPL,2020-01-02T09:30:00Z,news,wire,Kept,,,", "ZZZ,2020-01-02T09:30:00Z,news,wire,Other,,,"],
    )
    with pytest.raises(
        ValueError,
        match=re.escape("events.csv, line 3 (header = line 1), field 'ticker': unknown ticker 'ZZZ'"),
    ):
        import_store(prices=[prices], events=[events])
    store = import_store(prices=[prices], events=[events], unknown_tickers="drop")
    assert store.events["title"].tolist() == ["Kept"]
    assert store.meta["imports"][0]["dropped_other_tickers"] == 1


def test_fetch_yfinance_without_the_extra_says_how_to_install(monkeypatch):
    from thesisgym.data import fetch_yfinance

    monkeypatch.setitem(sys.modules, "yfinance", None)
    with pytest.raises(ImportError, match=re.escape("thesisgym[yfinance]")):
        fetch_yfinance(["AAPL"], "2020-01-01", "2020-02-01")


# --- real data ------------------------------------------------------------------------------------
@needs_real
def test_real_prices_import_and_round_trip(tmp_path):
    files = [PRICES / f"{t}.csv" for t in ("AAPL", "MSFT", "META", "SPY")]
    store = import_store(prices=files, name="mag")
    assert store.tickers == ["AAPL", "META", "MSFT", "SPY"]
    assert store.bars.groupby("ticker").size().tolist() == [2768] * 4
    assert store.bars["date"].min() == pd.Timestamp("2013-01-02") and store.bars[
        "date"
    ].max() == pd.Timestamp("2023-12-29")
    first = store.bars[(store.bars.ticker == "SPY")].iloc[0]
    assert (first.open, first.close, first.volume) == pytest.approx((145.11, 146.06, 192_059_000))
    back = load_store(store.save(tmp_path / "mag"))
    pd.testing.assert_frame_equal(back.bars, store.bars)
    assert back.name == "mag"


@needs_real
def test_real_ticker_headlines_adapter(tmp_path):
    rep = read_ticker_headlines(NEWS / "ticker_news_headlines_2019_2021.csv")
    ev = rep.events
    assert rep.rows_read == 9908 and len(ev) == 9908  # kept: nothing dropped unless asked
    assert "FB" not in set(ev["ticker"]) and (ev["ticker"] == "META").sum() == 997
    assert rep.duplicates == 2324  # the README's count of duplicate (ticker, headline, date) rows
    assert set(ev["kind"]) == {"news"} and ev["sentiment"].between(-1, 1).all()
    local = ev["published_at"].dt.tz_convert("America/New_York")
    assert (local.dt.hour == 23).all() and (local.dt.minute == 59).all()
    dropped = read_ticker_headlines(
        NEWS / "ticker_news_headlines_2019_2021.csv",
        duplicates="drop",
        keep_tickers=["AAPL", "META", "MSFT"],
        ticker_map=None,
    )
    assert dropped.dropped_other_tickers == 9908 - 937 - 836  # FB is not renamed, so it is "other"
    assert len(dropped.events) == 937 + 836 - dropped.dropped_duplicates and dropped.dropped_duplicates > 0


@needs_real
def test_real_market_headlines_and_store_with_news(tmp_path):
    rep = read_market_headlines(NEWS / "market_news_headlines_2019_2021.csv")
    assert len(rep.events) == 2365 and set(rep.events["ticker"]) == {""}
    store = import_store(
        prices=[PRICES / "AAPL.csv", PRICES / "META.csv"],
        events=[NEWS / "ticker_news_headlines_2019_2021.csv", NEWS / "market_news_headlines_2019_2021.csv"],
        unknown_tickers="drop",
    )
    assert set(store.events["ticker"]) == {"AAPL", "META", ""}
    assert [r["kept"] for r in store.meta["imports"]] == [937 + 997, 2365]
    # a headline dated d is not visible at the close of d, and is on d+1
    day = pd.Timestamp("2020-05-28")
    titles = store.events[
        store.events["published_at"].dt.tz_convert("America/New_York").dt.normalize().dt.tz_localize(None)
        == day
    ]["title"]
    assert len(titles) > 0
    assert not set(titles) & set(store.as_of(day).events("AAPL")["title"])
    assert set(titles) <= set(store.as_of(day + pd.Timedelta(days=1)).events("AAPL")["title"]) | set(
        store.events[store.events.ticker == "META"]["title"]
    )
    assert (
        read_events(NEWS / "market_news_headlines_2019_2021.csv").source
        == "market_news_headlines_2019_2021.csv"
    )


# --- CLI ------------------------------------------------------------------------------------------
def test_cli_synth_info_and_import(tmp_path):
    from typer.testing import CliRunner

    from thesisgym.cli import app

    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "data",
            "synth",
            "--out",
            str(tmp_path / "syn"),
            "--market",
            "B",
            "--tickers",
            "4",
            "--days",
            "60",
            "--seed",
            "2",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "SYN003" in res.output and "synth-B-seed2" in res.output
    store = load_store(tmp_path / "syn")
    assert store.meta["market"] == "B" and len(store.tickers) == 4 and store.truth is not None
    res = runner.invoke(app, ["data", "info", str(tmp_path / "syn")])
    assert res.exit_code == 0 and "truth" in res.output

    prices = write_prices(tmp_path, GOOD)
    events = write_events(tmp_path, ["ZZZ,2020-01-02T09:30:00Z,news,wire,Other,,,"])
    res = runner.invoke(
        app,
        ["data", "import", "--prices", str(prices), "--events", str(events), "--out", str(tmp_path / "r")],
    )
    assert res.exit_code == 2 and "unknown ticker 'ZZZ'" in res.output
    res = runner.invoke(
        app,
        [
            "data",
            "import",
            "--prices",
            str(prices),
            "--events",
            str(events),
            "--unknown-tickers",
            "drop",
            "--out",
            str(tmp_path / "r"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert load_store(tmp_path / "r").tickers == ["AAPL"]

    cfg = tmp_path / "c.yaml"
    cfg.write_text("n_tickers: 3\nn_days: 50\nbogus: 1\n")
    res = runner.invoke(app, ["data", "synth", "--out", str(tmp_path / "x"), "--config", str(cfg)])
    assert res.exit_code == 2 and "bogus" in res.output
