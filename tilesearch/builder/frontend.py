"""TileLang's Python frontend with each tile-program function rewritten once a process, not once a
configuration.

Why: TileLang 0.1.15 turns a ``@T.prim_func`` or ``@T.macro`` function into its IR generator by
reading the function's source, parsing it, rewriting the tree (``DSLMutator``) and compiling the
result (``tilelang.language.eager.ast.mutate``), every time the decorator runs. A template
defines its functions inside the function that makes the program, so that happens for every
configuration. Loading a compiled GEMM kernel from TileLang's cache took a median 38-77 ms on the
CPU machine, 6-8 ms with this (``scripts/load_probe.py``, 2026-12-04). The measuring worker
loads each kernel it times, one after another on the GPU's critical path (``worker: load``,
2.3-2.9 s of README's main command on the H200), and each process of the final re-time loads
them again.

What is kept: per code object, the rewritten module compiled into its ``make_closure`` (the
function TileLang builds, taking the closure's variables) and its source text. Nothing that
depends on the closure's values is kept. The rewrite reads those values only through
``_try_eval`` (an argument's annotation, whether a ``with`` opens a kernel), and every such
reading made while the tree was rewritten is recorded with its result. A later function of the
same code reuses the tree only if each reading gives the same result (the same object) for its
own closure; otherwise it is rewritten afresh, as TileLang would. So the generator is the one
TileLang makes, called on the new closure's values (``tests/test_frontend.py`` compares the
programs of many configurations of every operator with and without this).
"""

from __future__ import annotations

import ast
import functools
import threading
from dataclasses import dataclass
from typing import Any

_local = threading.local()
_counts = {"rewritten": 0, "reused": 0}


@dataclass(frozen=True)
class _Rewrite:
    make_closure: Any
    source: str
    extra_type_hints: dict[str, Any]
    # (expression, result) of each _try_eval of the rewrite: the expression parsed afresh from its
    # text once, since the rewrite goes on to change the tree that held it
    readings: tuple[tuple[ast.expr, Any], ...]


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b) or not isinstance(a, (str, int, float, bool, tuple)):
        return False
    return a == b


def counts() -> dict[str, int]:
    """Functions rewritten and functions that reused a rewrite, in this process so far."""
    return dict(_counts)


@functools.cache
def install() -> None:
    """Makes ``T.prim_func`` and ``T.macro`` rewrite each function's code once in this process."""
    from tilelang.language.eager import ast as eager_ast
    from tilelang.language.eager import builder

    utils = getattr(eager_ast, "utils", None)
    if not all(hasattr(m, n) for m, n in ((eager_ast, "mutate"), (eager_ast, "_try_eval"), (eager_ast, "IRGenerator"),
                                          (builder, "mutate"), (utils, "get_compiled_object"),
                                          (utils, "get_func_nonlocals"))):
        return  # another TileLang: its frontend as it is
    own_mutate, own_eval, own_compiled = eager_ast.mutate, eager_ast._try_eval, utils.get_compiled_object
    made: dict[tuple[Any, ...], _Rewrite] = {}

    def try_eval(node: ast.expr, nonlocals: dict[str, Any], globals: dict[str, Any]) -> Any:
        result = own_eval(node, nonlocals, globals)
        if (seen := getattr(_local, "seen", None)) is not None:
            seen["readings"].append((ast.parse(ast.unparse(node), mode="eval").body, result))
        return result

    def compiled_object(source: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        made_now = own_compiled(source, name, *args, **kwargs)
        if (seen := getattr(_local, "seen", None)) is not None and name == "make_closure":
            seen["make_closure"] = made_now
        return made_now

    def mutate(func: Any) -> Any:
        nonlocals = utils.get_func_nonlocals(func)
        key = (func.__code__, id(func.__globals__), tuple(nonlocals))
        kept = made.get(key)
        if kept is not None and all(_same(own_eval(e, nonlocals, func.__globals__), r) for e, r in kept.readings):
            _counts["reused"] += 1
            return eager_ast.IRGenerator(gen=kept.make_closure(**nonlocals), source=kept.source,
                                         extra_type_hints=dict(kept.extra_type_hints))
        _counts["rewritten"] += 1
        outer, _local.seen = getattr(_local, "seen", None), {"readings": []}
        try:
            generator = own_mutate(func)
            seen = _local.seen
        finally:
            _local.seen = outer
        if "make_closure" in seen:  # else TileLang made it another way: nothing to keep
            made[key] = _Rewrite(seen["make_closure"], generator.source, dict(generator.extra_type_hints),
                                 tuple(seen["readings"]))
        return generator

    eager_ast._try_eval = try_eval
    utils.get_compiled_object = compiled_object
    eager_ast.mutate = builder.mutate = mutate
