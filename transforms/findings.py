"""What a run reports about a source besides its rows. Shared by every provider."""

from collections import Counter
from dataclasses import dataclass, field

from transforms.jsontext import UNFINISHED

# the warning naming a source's unknown part types (Dagster's check says it too: pipelines.cli_runs)
UNKNOWN_PARTS = "unknown part types kept raw:"


@dataclass
class Findings:
    """What the run should report about a source besides its rows."""

    unknown_columns: dict[str, list[str]] = field(default_factory=dict)
    unknown_part_types: Counter = field(default_factory=Counter)
    non_second_timestamps: dict = field(default_factory=dict)
    null_timestamps: int = 0
    epoch_dated: int = 0  # of those, the rows of no dated session (dated 1970-01-01)
    # canonical rows sent to quarantine instead of their table, by table (for reconciliation)
    diverted: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)  # anything else worth a warning
    unread: int = 0  # files that could not be read this run: the source must be read again
    explained: int = 0  # quarantine rows a note says more of (a last line still being written)
    # quarantine rows of files read in an earlier run and kept from a cache: that run said them
    # (of those, the last lines without their newline yet: `unfinished_lines` leaves them out),
    # and the part types among them, counted in the `sources` column but not said again
    reported: int = 0
    reported_unfinished: int = 0
    reported_part_types: Counter = field(default_factory=Counter)
    # files whose rows come from a cache, the agent having deleted them (Claude Code's old
    # transcripts): said by the ingest that first lands without them (warehouse.land.ingest)
    gone_from_disk: list[str] = field(default_factory=list)
    gone_why: str = "the agent deleted them"

    def warnings(self, quarantined: int) -> list[str]:
        out = []
        for table, cols in sorted(self.unknown_columns.items()):
            out.append(f"{table}: unknown columns kept in extra_columns: {', '.join(cols)}")
        said = self.unknown_part_types - self.reported_part_types
        if said:
            kinds = ", ".join(f"{k}={n}" for k, n in sorted(said.items(), key=str))
            out.append(f"{UNKNOWN_PARTS} {kinds}")
        for unit, n in sorted(self.non_second_timestamps.items()):
            out.append(f"{n} timestamps in {unit} instead of seconds (converted)")
        if self.null_timestamps:
            undated = f"; {self.epoch_dated} of no dated session, dated 1970-01-01" if self.epoch_dated else ""
            out.append(f"{self.null_timestamps} rows without a usable timestamp (dated by their session's day{undated})")
        if quarantined > self.explained + self.reported:
            n = quarantined - self.explained - self.reported
            out.append(f"{n} unparseable row{'s' * (n != 1)} quarantined")
        return out + self.notes

    def unfinished_lines(self, quarantine) -> None:
        """The quarantine rows (dicts, or an Arrow table) of last lines without their newline yet
        (jsontext.UNFINISHED, every agent's JSON-lines reader), said as such: a session being
        written, not broken lines. Those of files an earlier run read were said by it."""
        unfinished = errors_of(quarantine).count(UNFINISHED) - self.reported_unfinished
        if unfinished > 0:
            lines = "1 last line without its" if unfinished == 1 else f"{unfinished} last lines without their"
            self.notes.append(f"{lines} newline yet (a session still being written, "
                              "or cut short): in quarantine for this run, read again once complete")
            self.explained += unfinished

    def add(self, more: "Findings", notes: bool = True) -> None:
        """`more` counted in, as for one source read in parts (transforms.bundle); `notes=False`
        leaves out what only its warnings say (a part read in an earlier run, whose warnings that
        run gave): its notes, unknown columns and timestamp units; its part types are counted,
        not said."""
        if notes:
            for table, cols in more.unknown_columns.items():
                known = self.unknown_columns.setdefault(table, [])
                known += [c for c in cols if c not in known]
            for unit, n in more.non_second_timestamps.items():
                self.non_second_timestamps[unit] = self.non_second_timestamps.get(unit, 0) + n
            self.reported_part_types.update(more.reported_part_types)
        else:  # every kind it counts was said when it was read
            self.reported_part_types.update(more.unknown_part_types)
        self.unknown_part_types.update(more.unknown_part_types)
        self.null_timestamps += more.null_timestamps
        self.epoch_dated += more.epoch_dated
        self.diverted.update(more.diverted)
        self.notes += more.notes if notes else []
        self.gone_from_disk += more.gone_from_disk  # said once per lake by the ingest, whoever read them
        if more.gone_from_disk:
            self.gone_why = more.gone_why
        self.unread += more.unread
        self.explained += more.explained if notes else 0  # else its rows are among `reported`
        self.reported += more.reported
        self.reported_unfinished += more.reported_unfinished


def errors_of(quarantine) -> list:
    """The `error` of each quarantine row: dicts, or a columnar provider's Arrow table."""
    if hasattr(quarantine, "column_names"):
        return quarantine.column("error").to_pylist() if "error" in quarantine.column_names else []
    return [row.get("error") for row in quarantine]


def bad_line(provider: str, owner, table: str, path: str, no: int, error: str, raw: str, run_at) -> dict:
    """The quarantine row of a source file's line `no` (0-based; 0 also for a whole file) that gave
    no rows, keyed `path:line` with the line counted from 1 as editors do. `owner` is the Source,
    or a context with its `source_id` and `project_path`."""
    return {"provider": provider, "source_id": owner.source_id, "project_path": owner.project_path,
            "source_table": table, "source_rowid": no, "key": f"{path}:{no + 1}", "error": error,
            "raw": raw, "created_at": run_at}
