"""`thesisgym serve`: run the reward service (see `thesisgym.integrations.serve` for the routes and limits)."""

from __future__ import annotations

from pathlib import Path

import typer

from thesisgym.cli.common import fail


def register(app: typer.Typer) -> None:
    """Attach this stage's commands to the root app."""
    app.command("serve")(serve)


def serve(
    dataset: Path | None = typer.Option(
        None, "--dataset", help="Built dataset whose rows requests may name by index or ticker/asof."
    ),
    split: str = typer.Option("train", "--split", help="Default split for rows named by index."),
    recipe: str | None = typer.Option(
        None, "--recipe", help="Default reward recipe (dsr, fsr, market_only, trading_r1[:stage] or a YAML path); "
        "default $THESISGYM_RECIPE, else dsr."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind (loopback by default)."),
    port: int = typer.Option(8377, "--port", min=0, max=65535),
    max_body_mb: float = typer.Option(8.0, "--max-body-mb", min=0.001, help="Largest request body."),
    max_batch: int = typer.Option(256, "--max-batch", min=1, help="Most completions per request."),
    timeout_s: float = typer.Option(30.0, "--timeout", min=0.001, help="Seconds a request may take from "
                                    "admission (queue wait included); then 504."),
    workers: int = typer.Option(4, "--concurrency", min=1, help="Batches scored at once (threads)."),
    queue: int = typer.Option(64, "--queue", min=0, help="Batches that may wait for a thread; more get 503 "
                              "with Retry-After."),
    graceful_s: float = typer.Option(30.0, "--graceful", min=0, help="Seconds in-flight requests get on SIGTERM."),
) -> None:
    """Serve the verifier over HTTP: POST /score, POST /openrlhf, GET /healthz /readyz /metrics."""
    try:
        import fastapi  # noqa: F401
        import prometheus_client  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        fail(f"thesisgym serve needs the serve extra: pip install 'thesisgym[serve]' ({exc})")
    from thesisgym.integrations.core import default_recipe
    from thesisgym.integrations.serve import ServeConfig, create_app

    try:
        config = ServeConfig(dataset=dataset, split=split, recipe=recipe or default_recipe(),
                             max_body_bytes=int(max_body_mb * 1024 * 1024), max_batch=max_batch,
                             timeout_s=timeout_s, max_concurrency=workers, max_queue=queue)
        app = create_app(config)  # builds the recipe and opens the dataset: fail before binding
    except ValueError as exc:
        fail(exc)
    import uvicorn

    typer.echo(f"thesisgym serve: recipe {config.recipe}, http://{host}:{port} (POST /score, /openrlhf)")
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False,
                timeout_graceful_shutdown=graceful_s)
