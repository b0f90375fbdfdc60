"""Settings: [tool.cachelint] in pyproject.toml (or cachelint.toml / .cachelint.toml) plus CLI flags."""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cachelint.toml import load_toml

if TYPE_CHECKING:  # imported for a pattern that is more than a name
    import pathspec

DEFAULT_REFIT_FUNCTIONS = (
    "update_weights",
    "update_weights_from_ipc",
    "update_weights_from_tensor",
    "update_weights_from_collective",
    "update_weights_from_distributed",
    "update_weights_from_disk",
    "update_weights_via_ipc_zmq",
    "update_weight",
    "sync_weights",
    "sync_weight",
    "_sync_weight",
    "_sync_weights",
    "broadcast_to_vllm",
    "broadcast_to_inference_engines",
    "_broadcast_to_vllm",
    "_move_model_to_vllm",
    "load_vllm_and_sync_weights",
    "refit",
    "refit_policy_generation",
    "load_states",
    "areal_update_weight",
    "update_weights_from_path",
)

OUTPUT_FORMATS = ("full", "concise", "json", "json-lines", "sarif", "github", "gitlab", "junit")

# Looked for in each folder in this order (ruff's: the dedicated files win over pyproject.toml).
CONFIG_FILE_NAMES = (".cachelint.toml", "cachelint.toml", "pyproject.toml")


# The selector of every rule, as ruff users write it (ruff's own `ALL` covers every rule it has).
ALL_SELECTOR = "ALL"
SELECTOR_KEYS = {"select": "select", "extend-select": "extend_select", "ignore": "ignore"}


class ConfigError(Exception):
    """A configuration problem the user must fix; the message names the file and the key."""


def selector_matches(selector: str, code: str) -> bool:
    return selector == ALL_SELECTOR or code.startswith(selector)


def _specificity(selector: str) -> int:
    """How specific a selector is: longer prefixes more; `ALL` as much as `CL`, which it equals here."""
    return len("CL") if selector == ALL_SELECTOR else len(selector)


class SettingError(ValueError):
    """What is wrong with a setting's value, worded without where it came from: `ConfigError`s put the
    origin in front (a config file and its key, a command-line flag, `Settings`), so that a bad value
    gets the same message wherever it is set."""


def validate_selectors(values: Iterable[str], origin: str, key: str | None = None) -> tuple[str, ...]:
    """The rule selectors in upper case; ConfigError naming `origin` (and `key`) for one that selects
    no rule. Valid: `ALL`, `CL`, a rule code and any prefix of one, in any case."""
    try:
        return checked_selectors(values)
    except SettingError as error:
        raise ConfigError(f"{origin}: `{key}` {error}" if key else f"{origin} {error}") from error


def checked_selectors(values: Iterable[str]) -> tuple[str, ...]:
    from cachelint.docs import rule_codes

    codes = rule_codes()
    selectors = []
    for value in values:
        selector = value.strip().upper()
        if selector != ALL_SELECTOR and not (
            selector.startswith("CL") and any(code.startswith(selector) for code in codes)
        ):
            raise SettingError(_unknown_selector_problem(value, codes))
        selectors.append(selector)
    return tuple(selectors)


def _unknown_selector_problem(value: str, codes: list[str]) -> str:
    problem = f"holds an unknown rule selector `{value}`"
    wanted = value.strip().upper()
    candidates = [ALL_SELECTOR, "CL", *codes]
    close = difflib.get_close_matches(wanted, candidates, n=len(candidates))
    if close:  # the closest; among equally close ones, the first (`CL01` -> `CL001`, not `CL201`)
        best = max(difflib.SequenceMatcher(None, wanted, found).ratio() for found in close)
        first = next(found for found in candidates if difflib.SequenceMatcher(None, wanted, found).ratio() == best)
        return f"{problem}; did you mean `{first}`?"
    expected = "expected `ALL`, `CL`, a rule code such as `CL001` or a prefix of one; `cachelint rules` lists them"
    return f"{problem} ({expected})"


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] = ("CL",)
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    vllm: str | None = None
    sglang: str | None = None
    refit_functions: tuple[str, ...] = DEFAULT_REFIT_FUNCTIONS
    extend_refit_functions: tuple[str, ...] = ()
    multimodal: bool | Literal["auto"] = "auto"
    output_format: str = "full"
    cache_dir: str = ".cachelint_cache"
    version_helpers: tuple[str, ...] = ()
    worker_extension_classes: tuple[str, ...] = ()
    config_path: str | None = field(default=None, compare=False)
    vllm_origin: str | None = field(default=None, compare=False)  # the file that set `vllm`, or "--vllm"
    sglang_origin: str | None = field(default=None, compare=False)  # the file that set `sglang`, or "--sglang"

    def __post_init__(self) -> None:
        """Each setting checked as a config file's is (ConfigError, the same problem text), and stored
        as the file's would be (selectors in upper case, lists as tuples). Defaults need no check."""
        for key, (name, _, _) in _KEYS.items():
            value = getattr(self, name)
            if value == _DEFAULTS[name]:
                continue
            try:
                checked = checked_setting(key, value)
            except SettingError as error:
                raise ConfigError(f"Settings: `{name}` {error}") from error
            object.__setattr__(self, name, checked)

    @property
    def all_refit_functions(self) -> frozenset[str]:
        return frozenset(self.refit_functions) | frozenset(self.extend_refit_functions)

    def is_enabled(self, code: str) -> bool:
        """ruff-style selection: the longest matching prefix wins, ignore beats select on a tie."""
        selected = max(
            (_specificity(p) for p in (*self.select, *self.extend_select) if selector_matches(p, code)), default=-1
        )
        ignored = max((_specificity(p) for p in self.ignore if selector_matches(p, code)), default=-1)
        return selected >= 0 and selected > ignored

    def analysis_hash(self) -> str:
        """A digest of every setting that may change what the analysis finds (for the result cache):
        all but those naming how findings are shown and where the cache is, so that a new setting
        counts unless it is known not to."""
        unrelated = {"output_format", "cache_dir", "config_path", "vllm_origin", "sglang_origin"}
        keys = [item.name for item in dataclasses.fields(self) if item.name not in unrelated]
        payload = json.dumps({key: getattr(self, key) for key in keys}, sort_keys=True, default=list)
        import hashlib  # here: a run without the cache never needs it

        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def to_display(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["per_file_ignores"] = {pattern: list(codes) for pattern, codes in self.per_file_ignores}
        del data["vllm_origin"], data["sglang_origin"]
        return {key.replace("_", "-"): value for key, value in data.items()}


def _string_list(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return None


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _multimodal(value: Any) -> bool | str | None:
    return value if isinstance(value, bool) or value == "auto" else None


def _per_file_ignores(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    """A table of glob = [codes] (a file's), or the pairs `Settings` holds."""
    if isinstance(value, dict):
        value = tuple(value.items())
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(pair, (list, tuple)) and len(pair) == 2 for pair in value
    ):
        return None
    result = []
    for pattern, codes in value:
        if not isinstance(pattern, str):
            return None
        code_list = _string_list(codes)
        if code_list is None:
            return None
        result.append((pattern, code_list))
    return tuple(result)


def _output_format(value: Any) -> str | None:
    return value if value in OUTPUT_FORMATS else None


def cache_dir_below_root(value: str) -> str | None:
    """`value` as a normal relative path to a folder below the project root; None when it names the
    root, a folder above or outside it (`..`, an absolute path, `~`), or holds a NUL character."""
    if "\0" in value or value.startswith("~") or Path(value).is_absolute():
        return None
    normal = os.path.normpath(value)
    return None if normal == os.curdir or os.pardir in Path(normal).parts else normal


def _cache_dir(value: Any) -> str | None:
    return value if isinstance(value, str) and cache_dir_below_root(value) is not None else None


_Converter = Callable[[Any], Any]

# key in the file -> (Settings field, converter returning None on a wrong type, what was expected)
_KEYS: dict[str, tuple[str, _Converter, str]] = {
    "select": ("select", _string_list, "a list of rule codes or prefixes"),
    "extend-select": ("extend_select", _string_list, "a list of rule codes or prefixes"),
    "ignore": ("ignore", _string_list, "a list of rule codes or prefixes"),
    "per-file-ignores": ("per_file_ignores", _per_file_ignores, "a table of glob = [codes]"),
    "exclude": ("exclude", _string_list, "a list of glob patterns"),
    "extend-exclude": ("extend_exclude", _string_list, "a list of glob patterns"),
    "vllm": ("vllm", _string, 'a version specifier string such as ">=0.18"'),
    "sglang": ("sglang", _string, 'a version specifier string such as ">=0.5"'),
    "refit-functions": ("refit_functions", _string_list, "a list of function names"),
    "extend-refit-functions": ("extend_refit_functions", _string_list, "a list of function names"),
    "multimodal": ("multimodal", _multimodal, '"auto", true or false'),
    "output-format": ("output_format", _output_format, "one of " + ", ".join(OUTPUT_FORMATS)),
    "cache-dir": ("cache_dir", _cache_dir, "a folder path below the project root, relative to it"),
    "version-helpers": ("version_helpers", _string_list, "a list of function names"),
    "worker-extension-classes": ("worker_extension_classes", _string_list, "a list of class names"),
}


def settings_from_table(table: Mapping[str, Any], origin: str, base: Settings | None = None) -> Settings:
    """Validate a [tool.cachelint] table; raise ConfigError naming origin, key and expectation."""
    values: dict[str, Any] = {}
    dedicated = not origin.endswith("pyproject.toml")
    for key, value in table.items():
        if key not in _KEYS:
            raise ConfigError(_unknown_key_message(origin, key, dedicated))
        values[_KEYS[key][0]] = checked_option(key, value, f"{origin}: `{key}`", origin)
        if key in ("vllm", "sglang"):
            values[f"{key}_origin"] = origin
    return dataclasses.replace(base or Settings(), **values, config_path=origin)


def checked_option(key: str, value: Any, where: str, range_source: str | None = None) -> Any:
    """`checked_setting`, with a problem raised as the ConfigError `{where} {problem}` (`where`: a file
    and its key, or a flag). `range_source` names where a `vllm` / `sglang` range was read."""
    try:
        return checked_setting(key, value, range_source or where)
    except SettingError as error:
        raise ConfigError(f"{where} {error}") from error


def checked_setting(key: str, value: Any, range_source: str = "Settings") -> Any:
    """The value of the setting `key` (as config files name it) as `Settings` holds it; SettingError
    saying what is wrong with it. The one check of every setting: config files, flags, the API and the
    language server's settings all go through it."""
    _, convert, expected = _KEYS[key]
    converted = convert(value)
    if converted is None:
        raise SettingError(f"must be {expected}, got {value!r}")
    if key in ("exclude", "extend-exclude", "per-file-ignores"):
        patterns = [pair[0] for pair in converted] if key == "per-file-ignores" else converted
        for pattern in patterns:
            if not is_pattern(pattern):
                raise SettingError(f"must hold gitignore-style patterns, got {pattern!r}")
    if key in SELECTOR_KEYS:
        converted = checked_selectors(converted)
    if key == "per-file-ignores":
        pairs = []
        for pattern, codes in converted:
            try:
                pairs.append((pattern, checked_selectors(codes)))
            except SettingError as error:
                raise SettingError(f"{error} (for {pattern!r})") from error
        converted = tuple(pairs)
    if key in ("vllm", "sglang"):
        _check_range(key, converted, range_source)
    return converted


def _check_range(key: str, value: str, source: str) -> None:
    """A `vllm` / `sglang` range must be a specifier that holds a known release or a newer one."""
    from cachelint.vllm_range import SGLANG, VLLM, EmptyRangeError, from_specifier, shortened

    try:
        from_specifier(value, source, VLLM if key == "vllm" else SGLANG)
    except EmptyRangeError as error:
        raise SettingError(f"= {error}") from error
    except ValueError as error:
        raise SettingError(f"must be {_KEYS[key][2]}, got {shortened(value)!r}") from error


def is_pattern(pattern: str) -> bool:
    """Whether pathspec reads `pattern` as the gitignore-style pattern it is (pathspec is imported only
    for a pattern that is more than a name)."""
    if pattern.replace("-", "").replace(".", "").replace("_", "").isalnum():
        return True
    return not gitignore_spec([pattern])[1]


def gitignore_spec(lines: Iterable[str]) -> tuple[pathspec.GitIgnoreSpec, list[str]]:
    """The spec of the gitignore-style `lines` pathspec can read, and the lines it cannot: patterns git
    ignores as invalid (`!`, `\\`), a range that holds nothing (`[z-a]`, which matches nothing), or
    what pathspec reads otherwise than git (`[[:alpha:]]`, which Python's regular expressions warn
    about)."""
    lines = list(lines)
    try:
        return _strict_spec(lines), []
    except _UNREADABLE:
        pass
    readable: list[str] = []
    unreadable: list[str] = []
    for line in lines:
        try:
            _strict_spec([line])
        except _UNREADABLE:
            unreadable.append(line)
        else:
            readable.append(line)
    return _strict_spec(readable), unreadable


_UNREADABLE = (ValueError, re.error, Warning)


def _strict_spec(lines: list[str]) -> pathspec.GitIgnoreSpec:
    import pathspec

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a FutureWarning ("possible nested set") means a misread pattern
        return pathspec.GitIgnoreSpec.from_lines(lines)


def _unknown_key_message(origin: str, key: str, dedicated: bool) -> str:
    where = "at the top level" if dedicated else "in [tool.cachelint]"
    message = f"{origin}: unknown key `{key}` {where}"
    if dedicated and key == "tool":
        return f"{message} ({Path(origin).name} takes the settings at the top level, without [tool.cachelint])"
    close = difflib.get_close_matches(key, _KEYS, n=1)
    if close:
        return f"{message}; did you mean `{close[0]}`?"
    return f"{message} (known keys: {', '.join(sorted(_KEYS))})"


def read_config_table(path: Path) -> dict[str, Any] | None:
    """The cachelint table of a config file, or None when a pyproject.toml has none."""
    try:
        data = load_toml(path)
    except ValueError as error:
        raise ConfigError(str(error)) from error
    if path.name == "pyproject.toml":
        tool = data.get("tool", {})
        table = tool.get("cachelint") if isinstance(tool, dict) else None
        if table is None:
            return None
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [tool.cachelint] must be a table")
        return table
    return data


def find_config_file(start: Path) -> Path | None:
    """The nearest config file at or above `start` (a pyproject.toml counts only with [tool.cachelint])."""
    here = Path(os.path.abspath(start))  # as named: a symbolic link's target is in another project
    if not here.is_dir():
        here = here.parent
    for folder in (here, *here.parents):
        for name in CONFIG_FILE_NAMES:
            candidate = folder / name
            if candidate.is_file() and read_config_table(candidate) is not None:
                return candidate
    return None


_DEFAULTS: dict[str, Any] = {item.name: item.default for item in dataclasses.fields(Settings)}


def load_settings(start: Path, config: Path | None = None, isolated: bool = False) -> Settings:
    if isolated:
        return Settings()
    path = config if config is not None else find_config_file(start)
    if path is None:
        return Settings()
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    table = read_config_table(path)
    return settings_from_table(table or {}, str(path))


class SettingsFinder:
    """The settings of each checked file, as ruff resolves them: the nearest config file at or above it
    (or the one `config` file for every file, or none when `isolated`), then `changes` (the flags).
    Each folder and config file is looked at once."""

    def __init__(self, config: Path | None = None, isolated: bool = False, changes: Mapping[str, Any] | None = None):
        self.config = config
        self.isolated = isolated
        self.changes = dict(changes or {})
        self._file_of_folder: dict[Path, Path | None] = {}
        self._file_of_path: dict[Path, Path | None] = {}
        self._settings_of_file: dict[Path | None, Settings] = {}

    def __call__(self, path: Path) -> Settings:
        file = None if self.isolated else self.config if self.config is not None else self._nearest_to(path)
        if file not in self._settings_of_file:
            settings = load_settings(path, file) if file is not None else Settings()
            self._settings_of_file[file] = dataclasses.replace(settings, **self.changes)
        return self._settings_of_file[file]

    def _nearest_to(self, path: Path) -> Path | None:
        """The config file nearest to `path`, looked up once per folder as named."""
        folder = Path(os.path.abspath(path))
        if not folder.is_dir():
            folder = folder.parent
        if folder not in self._file_of_path:
            start = folder
            while not start.exists() and start != start.parent:  # e.g. a --stdin-filename not on disk
                start = start.parent
            self._file_of_path[folder] = self._nearest(start)
        return self._file_of_path[folder]

    def _nearest(self, start: Path) -> Path | None:
        here = start.resolve()
        if not here.is_dir():
            here = here.parent
        passed: list[Path] = []
        found: Path | None = None
        for folder in (here, *here.parents):
            if folder in self._file_of_folder:
                found = self._file_of_folder[folder]
                break
            passed.append(folder)
            candidates = (folder / name for name in CONFIG_FILE_NAMES)
            found = next((c for c in candidates if c.is_file() and read_config_table(c) is not None), None)
            if found is not None:
                break
        for folder in passed:
            self._file_of_folder[folder] = found
        return found
