"""Check a LightGBM text model before LightGBM parses it.

LightGBM trusts its model file: a file cut short inside a tree aborts the process
(an exception escapes its parallel tree parser: SIGABRT), a child index out of range
reads outside the tree (SIGSEGV), and a split on a feature index past the feature list
is scored as if nothing were wrong. :func:`check_model_text` parses the text format
as ``train`` writes it (``Booster.model_to_string``: numerical splits, no linear trees,
one tree per iteration) and checks every count, index and array length, so a damaged
or hostile file is one :class:`ModelError` naming the file, the tree and the field.
"""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.core.errors import PipelineError

END_OF_TREES = "end of trees"
PARAMETERS, END_OF_PARAMETERS = "parameters:", "end of parameters"
PANDAS_CATEGORICAL = "pandas_categorical"
# arrays with one value per internal node (num_leaves - 1) and per leaf (num_leaves)
INTERNAL_ARRAYS = (
    "split_feature",
    "split_gain",
    "threshold",
    "decision_type",
    "left_child",
    "right_child",
    "internal_value",
    "internal_weight",
    "internal_count",
)
LEAF_ARRAYS = ("leaf_value", "leaf_weight", "leaf_count")
REQUIRED_SPLIT_ARRAYS = ("split_feature", "threshold", "decision_type", "left_child", "right_child")
INT_ARRAYS = ("split_feature", "decision_type", "left_child", "right_child")
# LightGBM's decision_type bits: 1 = categorical split, 2 = default left, (>> 2) & 3 = missing type
CATEGORICAL_BIT = 1
MISSING_TYPES = (0, 1, 2)  # none, zero, NaN


class ModelTextError(PipelineError, ValueError):
    """The text is not a LightGBM model this code can score safely (the message says where)."""


def _fields(lines: list[str], where: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in lines:
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ModelTextError(f"{where}: line {line[:40]!r} is not key=value")
        fields[key.strip()] = value.strip()
    return fields


def _int(value: str, what: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ModelTextError(f"{what} = {value[:40]!r} is not an integer") from None


def _array(fields: dict[str, str], key: str, length: int, where: str) -> list[float] | list[int]:
    text = fields.get(key)
    if text is None:
        return []
    parts = text.split()
    if len(parts) != length:
        raise ModelTextError(f"{where}: {key} has {len(parts)} values, num_leaves needs {length}")
    try:
        if key in INT_ARRAYS:
            return [int(x) for x in parts]
        return [float(x) for x in parts]
    except ValueError:
        raise ModelTextError(f"{where}: {key} holds a value that is not a number") from None


def _check_structure(left: list[int], right: list[int], num_leaves: int, where: str) -> None:
    """Every child index in range, and the nodes form one tree from the root: each internal
    node but the root and each leaf is reached exactly once (no cycle, nothing shared)."""
    internal = num_leaves - 1
    seen_internal = [False] * internal
    seen_leaf = [False] * num_leaves
    seen_internal[0] = True
    stack = [0]
    while stack:
        node = stack.pop()
        for side, child in (("left_child", left[node]), ("right_child", right[node])):
            if child >= 0:
                if child >= internal:
                    raise ModelTextError(
                        f"{where}: {side}[{node}] = {child} is past the {internal} internal nodes"
                    )
                if seen_internal[child]:
                    raise ModelTextError(f"{where}: node {child} is reached twice")
                seen_internal[child] = True
                stack.append(child)
            else:
                leaf = ~child
                if leaf >= num_leaves:
                    raise ModelTextError(
                        f"{where}: {side}[{node}] = {child} names leaf {leaf} of {num_leaves}"
                    )
                if seen_leaf[leaf]:
                    raise ModelTextError(f"{where}: leaf {leaf} is reached twice")
                seen_leaf[leaf] = True
    if not all(seen_internal) or not all(seen_leaf):
        raise ModelTextError(f"{where}: some nodes are not reachable from the root")


def _check_tree(lines: list[str], index: int, n_features: int) -> None:
    where = f"Tree={index}"
    fields = _fields(lines, where)
    if "num_leaves" not in fields or "leaf_value" not in fields:
        raise ModelTextError(f"{where}: no num_leaves or leaf_value (the file is cut short?)")
    num_leaves = _int(fields["num_leaves"], f"{where}: num_leaves")
    if num_leaves < 1:
        raise ModelTextError(f"{where}: num_leaves = {num_leaves}, need at least 1")
    if _int(fields.get("num_cat", "0"), f"{where}: num_cat") != 0:
        raise ModelTextError(f"{where}: categorical splits (num_cat) are not supported")
    if _int(fields.get("is_linear", "0"), f"{where}: is_linear") != 0:
        raise ModelTextError(f"{where}: linear trees (is_linear) are not supported")
    if "shrinkage" in fields:
        try:
            float(fields["shrinkage"])
        except ValueError:
            raise ModelTextError(f"{where}: shrinkage is not a number") from None
    for key in LEAF_ARRAYS:
        _array(fields, key, num_leaves, where)
    if num_leaves == 1:
        return
    missing = [k for k in REQUIRED_SPLIT_ARRAYS if k not in fields]
    if missing:
        raise ModelTextError(f"{where}: no {', '.join(missing)} (the file is cut short?)")
    arrays = {k: _array(fields, k, num_leaves - 1, where) for k in INTERNAL_ARRAYS}
    for node, feature in enumerate(arrays["split_feature"]):
        if not 0 <= feature < n_features:
            raise ModelTextError(
                f"{where}: split_feature[{node}] = {feature}, the model has {n_features} features"
            )
    for node, kind in enumerate(arrays["decision_type"]):
        if not 0 <= kind < 16 or kind & CATEGORICAL_BIT or (kind >> 2) & 3 not in MISSING_TYPES:
            raise ModelTextError(
                f"{where}: decision_type[{node}] = {kind} is not a numerical split"
            )
    _check_structure(arrays["left_child"], arrays["right_child"], num_leaves, where)  # type: ignore[arg-type]


def check_model_text(data: bytes, path: Path) -> str:
    """The model text of ``data``, after checking it is safe to give to LightGBM.

    Raises:
        ModelTextError: not UTF-8, no header, cut short (no ``end of trees`` or
            ``end of parameters``, a parameter line cut), tree sizes
            that do not match the trees, an array of the wrong length, a split feature
            past the feature list, a child index out of range or a tree that is not one.
            The message names ``path`` and the tree.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelTextError(
            f"{path}: not a LightGBM text model (not UTF-8 text at byte {e.start})"
        ) from None
    try:
        _check(text)
    except ModelTextError as e:
        raise ModelTextError(
            f"{path}: not a LightGBM text model this code can score: {e}"
        ) from None
    return text


def _check(text: str) -> None:
    lines = text.split("\n")
    if not lines or lines[0].strip() != "tree":
        raise ModelTextError("it does not start with the line 'tree'")
    try:
        end = next(i for i, line in enumerate(lines) if line.strip() == END_OF_TREES)
    except StopIteration:
        raise ModelTextError(f"no '{END_OF_TREES}' line: the file is cut short") from None
    starts = [i for i in range(end) if lines[i].startswith("Tree=")]
    header = _fields(lines[1 : starts[0] if starts else end], "header")
    for key, want in (("num_class", "1"), ("num_tree_per_iteration", "1")):
        if header.get(key, "1") != want:
            raise ModelTextError(f"header: {key} = {header[key]!r}, this code scores {want}")
    if "max_feature_idx" not in header or "feature_names" not in header:
        raise ModelTextError("header: no max_feature_idx or feature_names")
    n_features = _int(header["max_feature_idx"], "header: max_feature_idx") + 1
    names = header["feature_names"].split()
    if n_features < 1 or len(names) != n_features:
        raise ModelTextError(
            f"header: max_feature_idx says {n_features} features, feature_names has {len(names)}"
        )
    if not starts:
        raise ModelTextError("no trees")
    bounds = [*starts, end]
    sizes = header.get("tree_sizes")
    if sizes is not None:
        # LightGBM cuts the text at these byte sizes to parse the trees in parallel
        line_start = [0]
        for line in lines[:end]:
            line_start.append(line_start[-1] + len(line.encode()) + 1)
        actual = [line_start[b] - line_start[a] for a, b in zip(bounds, bounds[1:], strict=False)]
        given = [_int(x, "header: tree_sizes") for x in sizes.split()]
        if given != actual:
            raise ModelTextError(
                f"header: tree_sizes {given[:5]} do not match the {len(actual)} trees "
                f"({actual[:5]} bytes)"
            )
    _check_parameters(lines[end + 1 :])
    for index, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        if lines[a].strip() != f"Tree={index}":
            raise ModelTextError(f"line {a + 1}: {lines[a].strip()!r}, expected 'Tree={index}'")
        _check_tree(lines[a + 1 : b], index, n_features)


def _check_parameters(lines: list[str]) -> None:
    """The trailer's ``parameters:`` section: complete, one ``[name: value]`` per line
    (LightGBM crashes on a parameter line cut short)."""
    stripped = [line.strip() for line in lines]
    if PARAMETERS not in stripped or END_OF_PARAMETERS not in stripped:
        raise ModelTextError(f"no complete '{PARAMETERS}' section: the file is cut short")
    first, last = stripped.index(PARAMETERS), stripped.index(END_OF_PARAMETERS)
    for line in stripped[first + 1 : last]:
        if line and not (line.startswith("[") and line.endswith("]") and ": " in line):
            raise ModelTextError(f"parameter line {line[:40]!r} is not '[name: value]'")
    # the Python package reads the last line as JSON (model_to_string writes "...:null")
    tail = [line for line in stripped[last + 1 :] if line]
    if tail:
        key, _, value = tail[-1].partition(":")
        try:
            json.loads(value)
            ok = key == PANDAS_CATEGORICAL
        except ValueError:
            ok = False
        if not ok:
            raise ModelTextError(
                f"last line {tail[-1][:40]!r} is not '{PANDAS_CATEGORICAL}:<JSON>'"
            )
