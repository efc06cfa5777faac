"""`<AGENTLAKE_HOME>/config.toml`: this machine's place in the team, and where to look for stores.

    lake = "s3://team-agentlake/lake"      # a shared lake (default: <home>/lake)
    warehouse = "postgres:dbname=agentlake host=db.internal user=reader"   # the team's catalog
                                           # (default: <home>/warehouse.ducklake; docs/TEAM.md)
    machine = "ana-laptop"                 # default: the host's short name
    user = "ana"                           # default: the login name
    team = true                            # redact before writing (default: on for an s3:// lake)
    use_default = true                     # also read each agent's default location
    tz = "Europe/Berlin"                   # the days `agentlake report` counts (default: UTC)

    [privacy]                              # per column: keep, redact, hash or drop (team mode)
    "parts.text" = "hash"

Flags win over the environment ($AGENTLAKE_LAKE, $AGENTLAKE_MACHINE, $AGENTLAKE_USER), which
wins over this file. Every agent has a section like the two below ([crush], [codewhale],
[claude], [codex], [opencode]), with the same two keys:

    [crush]
    extra_stores = ["/srv/old-laptop/proj/.crush/crush.db"]   # crush.db files, data dirs or project dirs
    extra_roots = ["/mnt/backup/crush"]                       # Crush global data dirs (with projects.json)

    [codewhale]
    extra_stores = ["/mnt/backup/sessions/0f8b9c1e.json"]     # session files or sessions dirs
    extra_roots = ["/mnt/backup/.codewhale"]                  # CodeWhale homes (with sessions/)

    [projects]                                                # project names, by path, remote or name
    "/home/me/src/api" = "billing-api"
    "acme/webshop" = "shop"

    [[budgets]]                                               # per calendar month (UTC), in USD
    monthly_usd = 500                                         # the team's: no scope
    [[budgets]]
    monthly_usd = 120
    user = "ana"                                              # or project = "...", or agent = "..."
"""

import os
import tomllib
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path

from transforms.providers import PROVIDERS
from warehouse.lake.layout import AS_STORED, LANDING, RUNS, Layout, check_lake_folder
from warehouse.lake.setting_names import KINDS, TOP_LEVEL, close_to, unknown_setting, whole_file_setting
from warehouse.lake.prices import PriceError, Prices, parse_prices
from warehouse.lake.pg_catalog import PostgresCatalogError, holds_connection_words, is_postgres
from warehouse.lake.storage import CredentialsInURI, is_remote

AGENT_KEYS = ("extra_stores", "extra_roots")  # an agent's section: [crush], [claude], ...


class ConfigError(ValueError):
    pass


BUDGET_SCOPES = ("project", "user", "agent")  # a budget's scope: at most one, none for the team


@dataclass(frozen=True)
class Budget:
    """An amount per calendar month (UTC) for the team, or one project, user or agent."""

    monthly_usd: Decimal
    scope: str = "team"  # "team" or one of BUDGET_SCOPES
    value: str | None = None  # the project, user or agent it is for

    @property
    def name(self) -> str:
        return "team" if self.scope == "team" else f"{self.scope} {self.value}"


@dataclass(frozen=True)
class Config:
    extra_stores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    extra_roots: dict[str, tuple[str, ...]] = field(default_factory=dict)
    use_default: bool = True
    project_names: dict[str, str] = field(default_factory=dict)
    lake: str | None = None
    machine: str | None = None
    user: str | None = None
    team: bool | None = None  # None: on exactly when the lake is on object storage
    privacy: dict[str, str] = field(default_factory=dict)
    budgets: tuple[Budget, ...] = ()
    tz: str | None = None  # the report's days (an IANA zone); None: UTC
    prices: Prices = Prices()  # [[prices]] and [model_aliases] (warehouse.lake.prices)
    warehouse: str | None = None  # the catalog: a DuckDB file, or `postgres:...` (warehouse.lake.pg_catalog)


# the settings whose value is text, top-level, a budget's scope or a price's model: a word without
# quotes there is the likeliest slip in the file (_unquoted_hint)
TEXT_KEYS = frozenset([k for k, kind in TOP_LEVEL.items() if kind is str] + list(BUDGET_SCOPES) + ["model"])


def _unquoted_hint(text: str, error: str) -> str:
    """A text setting TOML refused, its value quoted, when the value is plain words TOML takes for
    no value (`tz = Europe/Berlin`: "Invalid value (at line 1, column 6)", the likeliest slip).
    A URI (`lake = s3://...`) is shown by its scheme alone: it may hold a key."""
    import re

    at = re.search(r"at line (\d+)", error)
    lines = text.split("\n")  # TOML's lines: a U+2028 in a comment ends none
    if not at or not 0 < int(at[1]) <= len(lines):
        return ""
    line = lines[int(at[1]) - 1].rstrip("\r")
    key = re.match(r"\s*([A-Za-z0-9_.\"'-]+)\s*=", line)
    if error.startswith("Cannot overwrite a value") and key:  # TOML's words name no key (a team lead's trial)
        return f" ({key[1]} is set twice in the same table: keep one)"
    uri = re.fullmatch(r"\s*([A-Za-z0-9_-]+)\s*=\s*([A-Za-z][A-Za-z0-9+.-]*)://\S*\s*(?:#.*)?", line)
    if uri and uri[1] in TEXT_KEYS:
        return f" (a text value goes in quotes: {uri[1]} = \"{uri[2]}://...\")"
    setting = re.fullmatch(r"\s*([A-Za-z0-9_-]+)\s*=\s*([\w./+-]+(?: [\w./+-]+)*)\s*(?:#.*)?", line)
    if not setting or setting[1] not in TEXT_KEYS:
        return ""
    return f" (a text value goes in quotes: {setting[1]} = \"{setting[2]}\")"


def load_config(path: Path, providers=tuple(PROVIDERS)) -> Config:
    if not path.exists():
        return Config()
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot read {path}: {exc}{_unquoted_hint(text, str(exc))}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    budgets = _budgets(path, data.pop("budgets", []))  # first: `[budgets]` is a section by mistake
    try:
        prices = parse_prices(path, data.pop("prices", []), data.pop("model_aliases", {}))
    except PriceError as exc:
        raise ConfigError(str(exc)) from None
    sections = (*providers, "projects", "privacy")
    # every table a config.toml may hold, as it is written: a misspelt one is named with the closest
    written = {**{name: f"[{name}]" for name in (*sections, "model_aliases")},
               **{name: f"[[{name}]]" for name in ("budgets", "prices")}}
    known = f"known: {', '.join(sections)}, [[budgets]], [[prices]], [model_aliases]"
    unknown = sorted(k for k, v in data.items() if isinstance(v, dict) and k not in sections)
    if unknown:
        raise ConfigError(f"{path}: unknown section [{unknown[0]}]{close_to(unknown[0], written)}; {known}")
    arrays = sorted(k for k, v in data.items() if isinstance(v, list) and v and all(isinstance(t, dict) for t in v))
    if arrays:  # `[[budget]]`: a list of tables, which no setting is
        raise ConfigError(f"{path}: unknown section [[{arrays[0]}]]{close_to(arrays[0], written)}; {known}")
    for key, value in data.items():
        if isinstance(value, dict):
            continue
        if key not in TOP_LEVEL:
            raise ConfigError(f"{path}: {unknown_setting(key, TOP_LEVEL, tables=written)}")
        if not isinstance(value, TOP_LEVEL[key]):
            raise ConfigError(f"{path}: {key} must be {KINDS[TOP_LEVEL[key]]} (it is {value!r})")
    privacy = data.get("privacy", {})
    try:
        if privacy:  # detect-secrets' rules and polars load only when a policy is read: not on every command
            from transforms.redact import Policy

            Policy.from_mapping(privacy)
    except (ValueError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path}: [privacy]: {exc}") from None
    names = data.get("projects", {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
        raise ConfigError(f"{path}: [projects] maps a path, remote or name to a project name (strings)")
    # `tz = "..."` appended below a last [projects] was read as a project named tz, silently (a trial):
    # a folder of that name is named by its path or remote there instead
    misplaced = sorted(names.keys() & TOP_LEVEL.keys())
    if misplaced:
        key = misplaced[0]
        raise ConfigError(f"{path}: {key!r} in [projects]: {whole_file_setting(key)} (a project folder named "
                          f"{key} is named by its path or remote)")
    stores, roots = {}, {}
    for provider in providers:
        section = data.get(provider, {})
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: [{provider}] must be a table")
        for key in section:  # a misspelt key (`extra_store`) would find nothing, silently
            if key not in AGENT_KEYS:
                raise ConfigError(f"{path}: {unknown_setting(key, AGENT_KEYS, f' in [{provider}]')}")
        stores[provider] = _paths(path, provider, section, "extra_stores")
        roots[provider] = _paths(path, provider, section, "extra_roots")
    return Config(stores, roots, bool(data.get("use_default", True)), dict(names), data.get("lake"),
                  data.get("machine"), data.get("user"), data.get("team"), dict(privacy), budgets,
                  prices=prices, tz=_zone(path, data.get("tz")), warehouse=data.get("warehouse"))


def _zone(path: Path, name: str | None) -> str | None:
    """`tz`: an IANA time zone, or an error naming it and the close ones."""
    from warehouse.lake.zones import BadZone, check_zone

    try:
        return None if name is None else check_zone(name, f"{path}: tz =")
    except BadZone as exc:
        raise ConfigError(str(exc)) from None


def _budgets(path: Path, entries) -> tuple[Budget, ...]:
    """`[[budgets]]`: each a `monthly_usd` above 0 and at most one of project, user, agent; one
    budget per scope (two for one user would leave the reader guessing which holds)."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{path}: budgets are [[budgets]] tables (double brackets: one per budget), each with "
                          "monthly_usd")
    out, seen = [], set()
    for n, entry in enumerate(entries, 1):
        where = f"{path}: budget {n}"
        unknown = sorted(set(entry) - {"monthly_usd", *BUDGET_SCOPES})
        if unknown:
            raise ConfigError(f"{where}: {unknown_setting(unknown[0], ('monthly_usd', *BUDGET_SCOPES))}")
        amount = entry.get("monthly_usd")
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not 0 < amount < 1e12:
            quoted = f", a number without quotes: it is the string {amount!r}" if isinstance(amount, str) else ""
            raise ConfigError(f"{where}: monthly_usd must be an amount in USD above 0 (e.g. 500 or 99.5){quoted}")
        scopes = [k for k in BUDGET_SCOPES if k in entry]
        if len(scopes) > 1:
            raise ConfigError(f"{where}: one scope at most, not {' and '.join(scopes)}: a budget is for one "
                              f"{', '.join(BUDGET_SCOPES[:-1])} or {BUDGET_SCOPES[-1]}, or for the team with none")
        scope = scopes[0] if scopes else "team"
        value = entry.get(scope) if scopes else None
        if scopes and (not isinstance(value, str) or not value):
            raise ConfigError(f"{where}: {scope} must be a name (a string)")
        budget = Budget(Decimal(str(amount)), scope, value)
        stored = (scope, AS_STORED[scope](value)) if scopes else ("team", None)  # `DEV` is dev's
        if stored in seen:
            raise ConfigError(f"{where}: a second budget for the {budget.name}"
                              + (f" ({scope} {stored[1]}, as an ingest stores it)" if stored[1] != value else ""))
        seen.add(stored)
        out.append(budget)
    return tuple(out)


def load_layout(home=None, lake=None, warehouse=None, *, machine=None, user=None, team=None,
                env=os.environ) -> Layout:
    """The layout the CLI and the Dagster resource both use: flags, then the environment, then
    config.toml, then defaults."""
    try:
        layout = Layout.resolve(home, lake, warehouse, env)
        config = load_config(layout.config_file)
        warehouse = (warehouse or (None if home else env.get("AGENTLAKE_WAREHOUSE"))
                     or _from_home(layout.home, config.warehouse))
        layout = Layout.resolve(home, lake or env.get("AGENTLAKE_LAKE") or _from_home(layout.home, config.lake),
                                warehouse, env,
                                machine=machine or env.get("AGENTLAKE_MACHINE") or config.machine,
                                user=user or env.get("AGENTLAKE_USER") or config.user)
        if not layout.remote:
            check_lake_folder(Path(layout.lake), "--lake" if lake else "$AGENTLAKE_LAKE" if env.get("AGENTLAKE_LAKE")
                              else f"lake in {layout.config_file}" if config.lake else "the home's lake")
    except (CredentialsInURI, PostgresCatalogError) as exc:
        raise ConfigError(str(exc)) from None
    team = team if team is not None else config.team
    team = layout.remote if team is None else team
    return replace(layout, team=team, privacy=tuple(sorted(config.privacy.items())))


def _from_home(home: Path, setting: str | None) -> str | None:
    """config.toml's lake or warehouse, a relative folder or file taken from the home the file is in
    (from the working directory, a trial's `warehouse = "team.ducklake"` was a new file wherever a
    command ran)."""
    if (not isinstance(setting, str) or is_remote(setting) or is_postgres(setting) or holds_connection_words(setting)
            or ":" in setting.split("/")[0]):  # refused as they are (Layout.resolve)
        return setting
    path = Path(setting).expanduser()
    return setting if path.is_absolute() else str(home / path)


def _paths(path: Path, provider: str, section: dict, key: str) -> tuple[str, ...]:
    value = section.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: {provider}.{key} must be a list of paths")
    return tuple(value)


DEMO = "demo"  # where quickstart puts its demo, inside the home
DEMO_DATA = "demo-data"  # where `agentlake demo` writes its stores, under the demo's home


def has_data(layout: Layout) -> bool:
    """Whether the lake holds some source's rows: a landing file (not a run log). An ingest that
    found nothing leaves run logs and empty tables, which must not hide the demo. A lake on
    object storage is taken to once the warehouse exists (listing a bucket is not worth a guess);
    before its first merge it is listed: a new reader's wrong bucket, prefix or endpoint merged
    "0 sources" and exited 0. One that cannot be listed is said by whatever reads it next."""
    if layout.remote:
        if layout.warehouse.exists():
            return True
        try:
            return any(f"/{RUNS}/" not in f for f in layout.store().list(LANDING))
        except OSError:
            return True
    for _, dirs, files in os.walk(layout.lake / LANDING):
        dirs[:] = [d for d in dirs if d != RUNS]
        if any(f.endswith(".parquet") for f in files):
            return True
    return False


def demo_layout(layout: Layout) -> Layout | None:
    """After a quickstart that found no agent data: the demo in <home>/demo (a home holding the
    stores `agentlake demo` generated), as long as nothing (a variable, `lake` in config.toml)
    points the home elsewhere and its lake holds nothing."""
    own = load_layout(str(layout.home), env={})
    if layout.remote or str(layout.lake) != str(own.lake) or layout.warehouse != own.warehouse or has_data(layout):
        return None
    # a file of that name is the user's, and so is a home of that name holding no generated
    # stores: its own config.toml prices it, not this one's (a team lead's trial)
    if not (layout.home / DEMO / DEMO_DATA).is_dir():
        return None
    demo = load_layout(str(layout.home / DEMO), env={})
    return demo if demo.warehouse.exists() else None


def settings_file(layout: Layout) -> Path:
    """The config.toml whose settings (prices; a demo's project names) apply to this home's merges:
    its own, but for the quickstart's demo while it stands in for its home (demo_layout): that
    home's, the file the user edits; its budgets were read from there and its prices were not (a
    new user's trial)."""
    owner = None if layout.remote else stood_in_for(Path(layout.home))
    return owner.config_file if owner is not None else layout.config_file


def stood_in_for(home: Path) -> Layout | None:
    """The home whose quickstart demo `home` is while it stands in for it (demo_layout), else None."""
    if home.name != DEMO:
        return None
    try:
        owner = load_layout(str(home.parent), env={})
    except ConfigError:  # `demo --home proj/demo` beside another tool's config.toml (a review)
        return None
    stand_in = demo_layout(owner)
    return owner if stand_in is not None and stand_in.home == home else None


def reader_layout(env=os.environ) -> Layout:
    """What a reader without flags opens (the notebooks): the home's warehouse, else the
    quickstart demo's, as `agentlake sql` and `report` do."""
    layout = load_layout(env=env)
    return demo_layout(layout) or layout

