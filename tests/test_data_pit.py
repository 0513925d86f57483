"""The point-in-time hole for datetime inputs: a date read into a datetime column (Parquet, pandas)
arrives as naive midnight and must mean "some time that day" (23:59), not 00:00."""

from __future__ import annotations

import pandas as pd
import pytest

from thesisgym.build.contexts import build_contexts
from thesisgym.data import MarketStore, read_events_csv, validate_events

NY = "America/New_York"


def _bars() -> pd.DataFrame:
    days = pd.bdate_range("2020-01-01", periods=40)
    return pd.DataFrame(
        {
            "ticker": "AAA",
            "date": days,
            "open": 10.0,
            "high": 11.0,
            "low": 9.0,
            "close": 10.0 + 0.01 * pd.RangeIndex(len(days)),
            "volume": 1000.0,
        }
    )


def _events(published) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ticker": ["AAA", "AAA"],
            "published_at": published,
            "kind": ["news", "news"],
            "source": ["wire", "wire"],
            "title": ["Date-only story", "Timed story"],
        }
    )


DATETIMES = pd.to_datetime(
    ["2020-02-03 00:00", "2020-02-03 09:30"]
)  # naive midnight = a date read as datetime


def test_naive_midnight_in_a_frame_is_date_only_and_not_in_that_days_context():
    ev = validate_events(_events(DATETIMES), assume_timezone=NY)
    local = ev["published_at"].dt.tz_convert(NY)
    assert local.iat[0] == pd.Timestamp("2020-02-03 23:59", tz=NY)  # not 00:00
    assert local.iat[1] == pd.Timestamp("2020-02-03 09:30", tz=NY)  # a real time of day is kept
    store = MarketStore(bars=_bars(), events=ev)
    assert store.as_of("2020-02-03").events("AAA")["title"].tolist() == ["Timed story"]
    assert store.as_of("2020-02-04").events("AAA")["title"].tolist() == ["Timed story", "Date-only story"]
    ds = build_contexts(store, dates=["2020-02-03", "2020-02-04"], show_progress=False)
    assert "Date-only story" not in ds[0]["prompt_text"] and "Timed story" in ds[0]["prompt_text"]
    assert "Date-only story" in ds[1]["prompt_text"]


def test_explicit_flag_overrides_the_midnight_rule():
    exact = validate_events(_events(DATETIMES), assume_timezone=NY, date_only=False)
    assert exact["published_at"].dt.tz_convert(NY).iat[0] == pd.Timestamp("2020-02-03 00:00", tz=NY)
    every = validate_events(_events(DATETIMES), assume_timezone=NY, date_only=True)
    assert (every["published_at"].dt.tz_convert(NY).dt.strftime("%H:%M") == "23:59").all()


def test_parquet_date_column_is_date_only(tmp_path):
    path = tmp_path / "events.parquet"
    _events(DATETIMES).to_parquet(path, index=False)
    assert pd.read_parquet(path)["published_at"].dtype.kind == "M"  # really a datetime column
    ev = read_events_csv(path, assume_timezone=NY)
    assert ev["published_at"].dt.tz_convert(NY).dt.strftime("%H:%M").tolist() == ["23:59", "09:30"]
    store = MarketStore(bars=_bars(), events=ev)
    assert "Date-only story" not in store.as_of("2020-02-03").events("AAA")["title"].tolist()
    # a parquet of pure dates (datetime64 from date objects) behaves the same
    _events(pd.to_datetime(["2020-02-03", "2020-02-04"]).date).astype(
        {"published_at": "datetime64[ns]"}
    ).to_parquet(path, index=False)
    ev = read_events_csv(path, assume_timezone=NY)
    assert ev["published_at"].dt.tz_convert(NY).dt.strftime("%Y-%m-%d %H:%M").tolist() == [
        "2020-02-03 23:59",
        "2020-02-04 23:59",
    ]


def test_naive_midnight_text_is_date_only_too(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("ticker,published_at,kind,source,title\nAAA,2020-02-03 00:00:00,news,w,t\n")
    assert read_events_csv(path, assume_timezone=NY)["published_at"].dt.tz_convert(NY).iat[0] == pd.Timestamp(
        "2020-02-03 23:59", tz=NY
    )
    aware = validate_events(_events(DATETIMES.tz_localize(NY)))
    assert aware["published_at"].dt.tz_convert(NY).iat[0] == pd.Timestamp("2020-02-03 00:00", tz=NY)


@pytest.mark.parametrize("date_only", [None, True, False])
def test_missing_naive_value_is_still_reported(date_only):
    with pytest.raises(
        ValueError, match="row 2 \\(1-based data row\\), field 'published_at': missing timestamp"
    ):
        validate_events(
            _events(pd.to_datetime(["2020-02-03", None])), assume_timezone=NY, date_only=date_only
        )
