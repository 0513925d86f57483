"""Import every thesisgym module: a smoke check that each one loads against the installed libraries.

Modules that need an optional extra (serve, verl, verifiers, vllm, yfinance, embeddings, deepspeed)
are listed as skipped when that extra is absent; any other import error fails, naming the module.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import thesisgym

OPTIONAL = {"fastapi", "uvicorn", "prometheus_client", "verifiers", "verl", "vllm", "yfinance",
            "sentence_transformers", "deepspeed"}


def main() -> int:
    loaded, skipped, failed = [], [], []
    for info in pkgutil.walk_packages(thesisgym.__path__, "thesisgym."):
        try:
            importlib.import_module(info.name)
            loaded.append(info.name)
        except ModuleNotFoundError as exc:
            optional = (exc.name or "").split(".")[0] in OPTIONAL
            (skipped if optional else failed).append(f"{info.name}: {exc}")
        except Exception as exc:  # any import-time failure is the finding
            failed.append(f"{info.name}: {type(exc).__name__}: {exc}")
    print(f"imported {len(loaded)} thesisgym modules; skipped {len(skipped)} (optional extras absent)")
    for line in skipped:
        print(f"  skipped {line}")
    for line in failed:
        print(f"  FAILED {line}", file=sys.stderr)
    return 1 if failed or not loaded else 0


if __name__ == "__main__":
    sys.exit(main())
