"""Entry point for `accelerate launch -m thesisgym.cli.launch <sft|grpo|curriculum> ...`.

accelerate needs a module or script to start in every process; this one runs the same
`thesisgym train` commands, so a multi-process run takes exactly the CLI's arguments.
"""

from __future__ import annotations


def main() -> None:
    from thesisgym.cli.train import train_app

    train_app(prog_name="thesisgym train")


if __name__ == "__main__":
    main()
