"""The run plan's lookups as the rules hand them to Snakemake: input, params and priority functions.

Snakemake asks such a function's signature each time it calls it (which of its arguments the function
takes: `inspect.signature`), several times a job: as the DAG is built, as the job starts and as it
ends. For a bound method that takes tens of microseconds a time, thousands of times a run. A method
marked `rule_function`, read on a plan, is a plain function of the rule's arguments instead, made
once per plan, whose signature is computed once and kept on it (PEP 362's `__signature__`), which
`inspect.signature` returns at once.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any


class rule_function:  # noqa: N801 (used as a decorator, like property)
    """A plan method that a rule names as a function of its job (see the module's docstring)."""

    def __init__(self, method: Callable[..., Any]) -> None:
        self.method = method
        self.name = method.__name__
        functools.update_wrapper(self, method)

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, plan: Any, owner: type | None = None) -> Any:
        if plan is None:
            return self
        bound = self.method.__get__(plan, owner)

        @functools.wraps(self.method)
        def lookup(*args: Any, **kwargs: Any) -> Any:
            return bound(*args, **kwargs)

        lookup.__signature__ = inspect.signature(bound)  # type: ignore[attr-defined]
        # kept on the plan: the next read finds it there before this descriptor
        plan.__dict__[self.name] = lookup
        return lookup
