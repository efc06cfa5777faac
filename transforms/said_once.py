"""Notes said by the run that first meets their cause, not by every later run that meets it again."""

import json
from collections.abc import Callable
from pathlib import Path

from transforms.atomic import replace_file


def not_said_before(record: Path | None, now: list[str]) -> tuple[list[str], Callable[[], None]]:
    """Of the things `now` holds (a deleted transcript, a source not found), those the file
    `record` does not list as said by an earlier run, and a function that records `now` as said
    (to call once the note is out: a thing gone from `now` leaves the list, and is said again if
    it comes back). Without a record, all of them, and nothing to record."""
    if record is None:
        return now, lambda: None
    try:
        said = set(json.loads(record.read_text()))
    except (OSError, ValueError):  # none yet, or cut short: said again, which loses nothing
        said = set()

    def remember() -> None:
        if said != set(now):
            try:
                replace_file(record, json.dumps(sorted(now)))
            except OSError:
                pass  # said again next run

    return [item for item in now if item not in said], remember
