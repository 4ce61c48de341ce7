"""Launch descriptions' integer expressions (grid, block, sizes, scalar arguments).

Expressions are small Python integer expressions over the problem's names (convolutions:
N, H, W, C, K, R, S, stride, pad, OH, OW; GEMM: M, N, K), the cell's tunables and
cdiv/min/max, as in Kernel Tuner's grid divisors. Anything else is refused.
"""

from __future__ import annotations

import ast
from typing import Any

ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Call,
                 ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.USub, ast.UAdd, ast.Pow)
COMPARISONS = (ast.Compare, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
FUNCTIONS = {"cdiv": lambda a, b: -(-a // b), "min": min, "max": max}


class ExpressionError(ValueError):
    """An expression in a launch description that cannot be evaluated."""


def problem_names(problem: Any, tunables: dict[str, Any]) -> dict[str, int]:
    """The problem's launch names (ConvProblem or GemmProblem) and the integer tunables."""
    names = dict(problem.launch_names())
    names.update({k: v for k, v in tunables.items() if isinstance(v, int)})
    return names


def evaluate(expression: Any, names: dict[str, int], allowed: tuple = ALLOWED_NODES) -> int:
    if isinstance(expression, bool):
        raise ExpressionError(f"{expression!r} is not an integer expression")
    if isinstance(expression, int):
        return expression
    text = str(expression)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as error:
        raise ExpressionError(f"cannot parse {text!r}: {error.msg}") from error
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            raise ExpressionError(f"{text!r}: {type(node).__name__} is not allowed")
        if isinstance(node, ast.Name) and node.id not in names and node.id not in FUNCTIONS:
            raise ExpressionError(f"{text!r}: unknown name {node.id!r} (known: {', '.join(sorted(names))})")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS):
            raise ExpressionError(f"{text!r}: only cdiv, min and max may be called")
    value = eval(compile(tree, "<launch description>", "eval"), {"__builtins__": {}}, {**FUNCTIONS, **names})
    if not isinstance(value, int):
        raise ExpressionError(f"{text!r} gives {value!r}, not an integer")
    return value


def holds(condition: str, names: dict[str, int]) -> bool:
    """A launch description's requirement, e.g. 'block >= S': integer expressions compared."""
    return bool(evaluate(condition, names, ALLOWED_NODES + COMPARISONS))


def dims(expressions: list, names: dict[str, int]) -> tuple[int, int, int]:
    """A block or grid: 1 to 3 expressions, padded with 1s."""
    if not 1 <= len(expressions) <= 3:
        raise ExpressionError(f"a block or grid takes 1 to 3 expressions, got {expressions!r}")
    values = [evaluate(e, names) for e in expressions]
    return tuple(values + [1] * (3 - len(values)))


def stage_shared_bytes(stage: dict, names: dict[str, int]) -> int:
    """A kernel stage's dynamic shared memory per block, in bytes (0 where it declares none)."""
    return evaluate(stage.get("shared_bytes", 0), names)
