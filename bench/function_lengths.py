"""The shape of the code: the largest files, and the functions over 80 and over 150 lines.

A function's length is its ``def`` line to its last line (``ast``'s ``lineno`` to
``end_lineno``: docstring and comments included, decorators not); a nested function counts
on its own and inside the one that holds it; methods count like functions.

Usage: ``python bench/function_lengths.py pipeline/engine pipeline/stages/works``
(files or folders; default ``pipeline``).
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

LONG = 80
VERY_LONG = 150


def python_files(paths: list[Path]) -> list[Path]:
    """Every ``.py`` file named or under a named folder, sorted."""
    found: set[Path] = set()
    for path in paths:
        found.update(path.rglob("*.py") if path.is_dir() else [path])
    return sorted(found)


def function_lengths(path: Path) -> list[tuple[int, str]]:
    """``(lines, qualified name)`` of every function and method of ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                found.append((child.end_lineno - child.lineno + 1, name))  # type: ignore[operator]
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path, default=[Path("pipeline")])
    ap.add_argument("--files", type=int, default=5, help="largest files listed")
    args = ap.parse_args(argv)
    files = python_files(args.paths)
    sizes = sorted(((len(f.read_text().splitlines()), f) for f in files), reverse=True)
    print(f"{len(files)} files, {sum(n for n, _ in sizes):,} lines; largest:")
    for n, f in sizes[: args.files]:
        print(f"  {n:6,}  {f}")
    functions = sorted(
        ((n, f"{f}:{name}") for f in files for n, name in function_lengths(f)), reverse=True
    )
    long = [(n, name) for n, name in functions if n > LONG]
    print(f"functions over {LONG} lines: {len(long)}; over {VERY_LONG}: ", end="")
    print(sum(1 for n, _ in long if n > VERY_LONG))
    for n, name in long:
        print(f"  {n:6,}  {name}")
    if functions:
        print(f"longest: {functions[0][1]} ({functions[0][0]} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
