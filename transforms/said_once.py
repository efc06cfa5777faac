"""Notes said by the run that first meets their cause, not by every later run that meets it again."""

import json
from pathlib import Path

from transforms.atomic import replace_file


def not_said_before(record: Path | None, now: list[str]) -> list[str]:
    """Of the things `now` holds (a deleted transcript, a source not found), those the file
    `record` does not list as said by an earlier run; `record` then lists `now` (a thing gone from
    it leaves the list, and is said again if it comes back). Without a record, all of them."""
    if record is None:
        return now
    try:
        said = set(json.loads(record.read_text()))
    except (OSError, ValueError):  # none yet, or cut short: said again, which loses nothing
        said = set()
    if said != set(now):
        try:
            replace_file(record, json.dumps(sorted(now)))
        except OSError:
            pass  # said again next run
    return [item for item in now if item not in said]
