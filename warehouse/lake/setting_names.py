"""How config.toml's settings are named back to the user: an unknown one with the known one it
is close to (`machin` -> `machine`), and the kind of value a setting takes in TOML's words."""

from difflib import get_close_matches

# a Python type, as TOML writes a value of it
KINDS = {str: "a string, in quotes", bool: "true or false", int: "a whole number", float: "a number"}


def unknown_setting(key: str, known, where: str = "") -> str:
    """`unknown setting 'machin' (did you mean machine?); known: ...`, `where` after the name."""
    return f"unknown setting {key!r}{where}{close_to(key, {name: name for name in known})}; known: {', '.join(known)}"


def close_to(key: str, written: dict[str, str]) -> str:
    """` (did you mean W?)` for the name in `written` closest to `key`, W as a user writes it
    (`[claude]`, `[[budgets]]`); "" when none is close."""
    close = get_close_matches(str(key), list(written), 1)
    return f" (did you mean {written[close[0]]}?)" if close else ""
