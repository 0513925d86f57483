"""Market data: the point-in-time MarketStore and its one door (`asof`: `store.timeline()`,
`store.as_of(day)`), validation, importers (CSV, Parquet, yfinance; SEC filings in `sec`, insider
trades in `insider`, earnings/analyst in `corporate`, split histories in `actions`, macro vintages in
`macro`, RSS/Atom in `feeds`, all families at once in `sources`), data quality, the content-date
check and coverage (`quality`, `contentdates`) and the synthetic market with known ground truth."""

from thesisgym.data.actions import MAG7_SPLITS, read_actions
from thesisgym.data.asof import AsOfView, Timeline
from thesisgym.data.importers import (
    DEFAULT_TICKER_MAP,
    EventsImport,
    fetch_yfinance,
    import_prices,
    import_store,
    read_events,
    read_events_csv,
    read_market_headlines,
    read_price_csv,
    read_price_file,
    read_ticker_headlines,
)
from thesisgym.data.sources import ImportConfig, import_shared, import_sources
from thesisgym.data.store import MarketStore
from thesisgym.data.synth import REGIMES, SynthConfig, generate_market
from thesisgym.data.validate import (
    DataValidationError,
    load_store,
    validate_bars,
    validate_events,
    validate_store,
    validate_truth,
)

__all__ = [
    "DEFAULT_TICKER_MAP",
    "MAG7_SPLITS",
    "AsOfView",
    "Timeline",
    "read_actions",
    "REGIMES",
    "DataValidationError",
    "EventsImport",
    "MarketStore",
    "SynthConfig",
    "fetch_yfinance",
    "generate_market",
    "import_prices",
    "import_shared",
    "ImportConfig",
    "import_sources",
    "import_store",
    "load_store",
    "read_events",
    "read_events_csv",
    "read_market_headlines",
    "read_price_csv",
    "read_price_file",
    "read_ticker_headlines",
    "validate_bars",
    "validate_events",
    "validate_store",
    "validate_truth",
]
