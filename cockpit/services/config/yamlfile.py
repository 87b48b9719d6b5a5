"""Load YAML files with a line number for every key, and turn validation errors into
`file:line: field: message` diagnostics.

PyYAML alone loses positions once a document is constructed, and silently keeps the last
of two duplicate keys. Users edit these files by hand, so every error must point at the
line to fix; we therefore walk the composed node tree ourselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import yaml
from pydantic import ValidationError

Loc = tuple[str | int, ...]
T = TypeVar("T")

MAX_YAML_DEPTH = 64
"""Deepest nesting of lists and mappings read from a hand-edited file. Sweeps, profiles and
rule files nest about five levels; PyYAML composes nodes recursively, and 50k levels of `[`
ended in a RecursionError traceback instead of a file:line message."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a file: where, which field, and what."""

    path: Path
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else f"{self.path}"
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.message}"


class ConfigError(Exception):
    """A file could not be loaded or validated. Carries every problem found."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass(frozen=True)
class LoadedYaml:
    """Plain Python data plus the line (1-based) of every mapping key and sequence item."""

    path: Path
    data: Any
    lines: dict[Loc, int]

    def line_for(self, loc: Loc) -> int | None:
        """The line of the deepest known prefix of `loc` (a missing key points at its parent)."""
        for end in range(len(loc), -1, -1):
            line = self.lines.get(loc[:end])
            if line is not None:
                return line
        return None


def format_loc(loc: Iterable[str | int]) -> str:
    """`("storage", "tiers", 0, "path")` -> `storage.tiers[0].path`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses nesting deeper than MAX_YAML_DEPTH, at the line where it is."""

    def __init__(self, text: str, path: Path) -> None:
        super().__init__(text)
        self.path = path
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        """Compose one node, counting how deep it sits."""
        if self.depth >= MAX_YAML_DEPTH:
            line = cast(Any, self).peek_event().start_mark.line + 1  # untyped in the stubs
            raise ConfigError([Problem(self.path, line, "", f"nested more than {MAX_YAML_DEPTH} "
                                       "levels deep (lists and mappings inside each other)")])
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _scalar(loader: yaml.SafeLoader, node: yaml.Node, loc: Loc, path: Path) -> Any:
    """Construct one scalar; a value its type cannot hold is a Problem at its line.

    PyYAML's constructors raise plain ValueError for what they cannot build: an integer of
    100k digits (Python refuses int() past 4300 digits), a date with month 13.
    """
    try:
        return loader.construct_object(node, deep=True)
    except (ValueError, OverflowError) as exc:
        text = str(node.value) if isinstance(node, yaml.ScalarNode) else ""
        if node.tag == "tag:yaml.org,2002:int":
            message = f"an integer of {len(text)} characters is not a usable number"
        else:
            kind = node.tag.rsplit(":", 1)[-1]
            message = f"cannot read this {kind} value: {str(exc)[:200]}"
        raise ConfigError([Problem(path, node.start_mark.line + 1, format_loc(loc), message)]) from None


def _walk(
    node: yaml.Node,
    loc: Loc,
    lines: dict[Loc, int],
    loader: yaml.SafeLoader,
    path: Path,
    memo: dict[int, Any],
    active: set[int] | None = None,
) -> Any:
    # An alias is the same node object again: build it once (no exponential blow-up on
    # nested aliases, the "billion laughs" shape) and reuse the value.
    if id(node) in memo:
        return memo[id(node)]
    # `&a [*a]` is a node that contains itself: refuse it rather than recurse without end.
    active = set() if active is None else active
    if id(node) in active:
        raise ConfigError([Problem(path, node.start_mark.line + 1, format_loc(loc),
                                   "an alias refers to a list or mapping that contains it")])
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        active.add(id(node))
        try:
            return _walk_collection(node, loc, lines, loader, path, memo, active)
        finally:
            active.discard(id(node))
    return _scalar(loader, node, loc, path)


def _walk_collection(
    node: yaml.MappingNode | yaml.SequenceNode,
    loc: Loc,
    lines: dict[Loc, int],
    loader: yaml.SafeLoader,
    path: Path,
    memo: dict[int, Any],
    active: set[int],
) -> Any:
    if isinstance(node, yaml.MappingNode):
        explicit = {id(k) for k, _ in node.value if k.tag != _MERGE_TAG}
        loader.flatten_mapping(node)  # resolve `<<` merge keys the way SafeLoader would
        out: dict[Any, Any] = {}
        seen_explicit: set[Any] = set()
        for key_node, value_node in node.value:
            key = _scalar(loader, key_node, loc, path)
            if not isinstance(key, str | int | float | bool) and key is not None:
                raise ConfigError(
                    [Problem(path, key_node.start_mark.line + 1, format_loc(loc),
                             "mapping keys must be plain scalars")]
                )
            key_loc = (*loc, key if isinstance(key, int) and not isinstance(key, bool) else str(key))
            if id(key_node) in explicit:
                if key in seen_explicit:
                    raise ConfigError(
                        [Problem(path, key_node.start_mark.line + 1, format_loc(key_loc),
                                 "duplicate key (the earlier value would be silently lost)")]
                    )
                seen_explicit.add(key)
            elif key in out:
                continue  # an earlier merge source wins over a later one, as in PyYAML
            # Merged keys come first, so an explicit key overrides a merged one.
            lines[key_loc] = key_node.start_mark.line + 1
            out[key] = _walk(value_node, key_loc, lines, loader, path, memo, active)
        memo[id(node)] = out
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            lines[(*loc, index)] = item.start_mark.line + 1
            items.append(_walk(item, (*loc, index), lines, loader, path, memo, active))
        # Tuples: the models are frozen, and strict validation accepts only tuples there.
        memo[id(node)] = tuple(items)
        return memo[id(node)]


def load_yaml_text(text: str, path: Path) -> LoadedYaml:
    """Parse one YAML document, keeping the line of every key. Raises ConfigError."""
    loader = _Loader(text, path)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ConfigError([Problem(path, 1, "", "the file is empty")])
        lines: dict[Loc, int] = {(): node.start_mark.line + 1}
        data = _walk(node, (), lines, loader, path, {})
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        if (exc.context_mark is not None and exc.problem_mark is not None
                and exc.problem_mark.index >= len(text.rstrip())):
            # Hit the end of the file (an unclosed quote or bracket): point where it opened.
            mark = exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = " ".join(str(part) for part in (exc.context, exc.problem) if part)
        raise ConfigError([Problem(path, line, "", f"YAML syntax error: {what}")]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([Problem(path, None, "", f"YAML error: {exc}")]) from None
    except RecursionError:  # a safety net: MAX_YAML_DEPTH is meant to stop this first
        mark = loader.get_mark()
        raise ConfigError([Problem(path, mark.line + 1, "", "nested too deeply to read")]) from None
    finally:
        loader.dispose()
    return LoadedYaml(path=path, data=data, lines=lines)


def load_yaml_file(path: Path) -> LoadedYaml:
    """Read and parse `path`; an unreadable or non-UTF-8 file is a ConfigError too."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([Problem(path, None, "", "file not found")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem(path, None, "", f"cannot read: {exc}")]) from None
    return load_yaml_text(text, path)


def duplicate_problems(loaded: LoadedYaml, list_loc: Loc, key: str) -> list[Problem]:
    """Items of the list at `list_loc` whose `key` repeats an earlier item's, at their line.

    Checked before schema validation so the error points at the second occurrence rather
    than at the list as a whole.
    """
    node: Any = loaded.data
    for part in list_loc:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, tuple):
        return []
    seen: set[Any] = set()
    problems = []
    for index, item in enumerate(node):
        value = item.get(key) if isinstance(item, dict) else None
        if value is None or not isinstance(value, str | int):
            continue
        if value in seen:
            loc = (*list_loc, index, key)
            problems.append(Problem(loaded.path, loaded.line_for(loc), format_loc(loc),
                                    f"duplicate {key} {value!r} (already used above)"))
        seen.add(value)
    return problems


def validation_problems(loaded: LoadedYaml, errors: Iterable[Any]) -> list[Problem]:
    """Map pydantic `ValidationError.errors()` entries onto file lines."""
    problems = []
    for err in errors:
        loc: Loc = tuple(part for part in err["loc"] if isinstance(part, str | int))
        # pydantic reports union/tagged members as extra loc parts that are not YAML keys;
        # keep only the prefix that exists in the document for the line lookup.
        message = str(err["msg"]).removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden":
            message = "unknown key (not part of the schema; check the spelling)"
        elif err.get("type") == "missing":
            message = "required field is missing"
        elif err.get("type") == "tuple_type":
            message = "should be a list"
        problems.append(Problem(loaded.path, loaded.line_for(loc), format_loc(loc), message))
    return problems


def load_validated(path: Path, parse: Callable[[Any], T], *, not_mapping: str,
                   unique: tuple[Loc, str]) -> tuple[T, LoadedYaml]:
    """Read `path`, require a mapping, refuse repeated `unique` keys, then `parse` it.

    The one way every hand-edited file (sweep, profile, rule file) is loaded, so each
    failure is a ConfigError naming file, line and field. Returns the parsed value and the
    document, whose lines callers use for their own checks after parsing.
    """
    loaded = load_yaml_file(path)
    if not isinstance(loaded.data, dict):
        raise ConfigError([Problem(path, 1, "", not_mapping)])
    duplicates = duplicate_problems(loaded, *unique)
    if duplicates:
        raise ConfigError(duplicates)
    try:
        return parse(loaded.data), loaded
    except ValidationError as exc:
        raise ConfigError(validation_problems(loaded, exc.errors())) from None
    except Exception as exc:  # a hand-edited file never ends in a traceback
        # Validators may raise what pydantic does not wrap (re.error from a bad pattern,
        # RecursionError): still one line naming the file, never a traceback.
        raise ConfigError([Problem(path, loaded.line_for(()), "",
                                   f"cannot be loaded: {type(exc).__name__}: {str(exc)[:300]}")]) from None
