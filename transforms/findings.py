"""What a run reports about a source besides its rows. Shared by every provider."""

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Findings:
    """What the run should report about a source besides its rows."""

    unknown_columns: dict[str, list[str]] = field(default_factory=dict)
    unknown_part_types: Counter = field(default_factory=Counter)
    non_second_timestamps: dict = field(default_factory=dict)
    null_timestamps: int = 0
    # canonical rows sent to quarantine instead of their table, by table (for reconciliation)
    diverted: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)  # anything else worth a warning
    unread: int = 0  # files that could not be read this run: the source must be read again

    def warnings(self, quarantined: int) -> list[str]:
        out = []
        for table, cols in sorted(self.unknown_columns.items()):
            out.append(f"{table}: unknown columns kept in extra_columns: {', '.join(cols)}")
        if self.unknown_part_types:
            kinds = ", ".join(f"{k}={n}" for k, n in sorted(self.unknown_part_types.items(), key=str))
            out.append(f"unknown part types kept raw: {kinds}")
        for unit, n in sorted(self.non_second_timestamps.items()):
            out.append(f"{n} timestamps in {unit} instead of seconds (converted)")
        if self.null_timestamps:
            out.append(f"{self.null_timestamps} rows without a usable timestamp (dated 1970-01-01)")
        if quarantined:
            out.append(f"{quarantined} unparseable rows quarantined")
        return out + self.notes
