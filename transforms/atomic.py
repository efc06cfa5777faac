"""Files replaced whole: a reader (or a crash) sees the old file or the new one, never half."""

import os
from pathlib import Path


def replace_file(path: Path, data: bytes | str) -> None:
    """Write `data` beside `path` under a name of this process, then rename it over `path` (an
    ingest beside this one may be writing the same file: each stages its own)."""
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        if isinstance(data, str):
            tmp.write_text(data)
        else:
            tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
