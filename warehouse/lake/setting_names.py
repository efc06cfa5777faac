"""How config.toml's settings are named back to the user: an unknown one with the known one it
is close to (`machin` -> `machine`), and the kind of value a setting takes in TOML's words."""

from difflib import get_close_matches

# a Python type, as TOML writes a value of it
KINDS = {str: "a string, in quotes", bool: "true or false", int: "a whole number", float: "a number"}
# the settings of the whole file, above its first section, and the type of each (warehouse.lake.config)
TOP_LEVEL = {"lake": str, "warehouse": str, "machine": str, "user": str, "team": bool, "use_default": bool, "tz": str}


def unknown_setting(key: str, known, where: str = "", tables: dict[str, str] | None = None) -> str:
    """`unknown setting 'machin' (did you mean machine?); known: ...`, `where` after the name; else
    the table of `tables` it is close to (`budget = 5`: did you mean [[budgets]]?)."""
    close = close_to(key, {name: name for name in known}) or close_to(key, tables or {})
    return f"unknown setting {key!r}{where}{close}; known: {', '.join(known)}{'' if close else _above(key, known)}"


def _above(key: str, known) -> str:
    """A setting of the whole file written after a section's header, which TOML reads as one of
    that section's keys: `tz` at the end of a file whose last table is a budget was said as a
    budget's unknown setting, naming the budget's keys only (a trial)."""
    if known is TOP_LEVEL:
        return ""
    top = key if key in TOP_LEVEL else next(iter(get_close_matches(str(key), list(TOP_LEVEL), 1)), None)
    return f" ({whole_file_setting(top)})" if top else ""


def whole_file_setting(key: str) -> str:
    return (f"{key} is a setting of the whole file: put it above the first [section] or [[...]]; below one, TOML "
            "reads it as that one's")


def close_to(key: str, written: dict[str, str]) -> str:
    """` (did you mean W?)` for the name in `written` closest to `key`, W as a user writes it
    (`[claude]`, `[[budgets]]`); "" when none is close."""
    close = get_close_matches(str(key), list(written), 1)
    return f" (did you mean {written[close[0]]}?)" if close else ""
