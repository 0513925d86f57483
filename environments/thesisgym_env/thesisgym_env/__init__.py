"""thesisgym-env: the verifiers (v1) taskset package (verifiers resolves `--env.taskset.id thesisgym-env`
to this module and takes the one Taskset subclass in `__all__`). The code lives in
`thesisgym.integrations.verifiers_env`."""

from thesisgym.integrations.verifiers_env import ThesisTaskset

__all__ = ["ThesisTaskset"]
