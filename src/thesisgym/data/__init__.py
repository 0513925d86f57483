"""Market data: the point-in-time MarketStore, importers (CSV, yfinance) and the synthetic market."""

from thesisgym.data.store import MarketStore

__all__ = ["MarketStore"]
