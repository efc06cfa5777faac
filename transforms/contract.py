"""The canonical tables: the single source of truth for column names, types and meanings.

Every provider's normaliser emits rows for these tables; the lake writer casts to these
schemas; docs/TABLES.md is generated from this module (a test keeps it current).
`date` and `project` are hive keys: they live in the directory names, not in the files.
"""

from dataclasses import dataclass

import pyarrow as pa

# Naive timestamps that are always UTC: DuckDB reads them without the ICU extension.
TS = pa.timestamp("us")


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    doc: str
    # (lowest, highest) a value can be; one outside them, NaN or infinite is the source's bad
    # record: nulled before it lands, kept in `quarantine`, and said (warehouse.land.landing_files)
    bounds: tuple[int | float, int | float] | None = None


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    date_from: str  # which column gives the row its hive `date`
    columns: tuple[Column, ...]

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type) for c in self.columns])

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def bounded(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.bounds is not None)


def _c(name: str, type_: pa.DataType, doc: str, bounds=None) -> Column:
    return Column(name, type_, doc, bounds)


# What a row's cost in USD and its token counts can be. No session or request comes near the
# highest; beyond them a value is a bad record (a Crush session with `cost = 1e308`), and the marts,
# which sum costs exactly in nano-dollars (DECIMAL(38, 9)), failed every merge on it.
COST = (0, 1_000_000)
TOKENS = (0, 10**12)


# Every agent's provider name (transforms.providers.PROVIDERS; a test keeps the two equal), in
# docs/AGENTS.md's order.
AGENTS = ("crush", "codewhale", "claude", "codex", "opencode", "goose", "aider", "cursor", "copilot", "gemini",
          "amp", "kilo", "droid", "qwen", "codebuff", "kimi", "antigravity", "pi")
_AGENT_LIST = ", ".join(f"`{name}`" for name in AGENTS)
# A source's id, the same in the data tables and in `sources`.
_SOURCE_ID = ("Stable id of the source: a hash of the store's resolved path or, for an agent landed by "
              "project (a file per session: Codex, CodeWhale, Gemini CLI, ...; docs/AGENTS.md), of the "
              "project directory (and its bucket, for a project of more than 64 sessions).")

# Columns every table starts with: where the row came from, down to the source row.
LINEAGE = (
    _c("provider", pa.string(), f"Agent that wrote the source, by its provider name: {_AGENT_LIST} (docs/AGENTS.md says what each records)."),
    _c("machine", pa.string(), "Machine that ingested the row (`machine` in config.toml, `$AGENTLAKE_MACHINE`, else the host name)."),
    _c("user", pa.string(), "User that ingested the row (`user` in config.toml, `$AGENTLAKE_USER`, else the login name)."),
    _c("source_id", pa.string(), _SOURCE_ID),
    _c("project_path", pa.string(), "The project's directory on the machine that ran the agent."),
    _c("source_table", pa.string(), "Where in the source the row comes from: a SQLite table (Crush), or a JSON path such as `metadata` or `messages` (CodeWhale)."),
    _c("source_rowid", pa.int64(), "SQLite `rowid` of the source row (Crush), or the index in the JSON array (CodeWhale)."),
)

SESSIONS = Table(
    "sessions",
    "One row per agent session, sub-agent sessions included.",
    "created_at",
    LINEAGE
    + (
        _c("session_id", pa.string(), "Session id as the agent stores it."),
        _c("parent_session_id", pa.string(), "Calling session for a sub-agent session (Crush); null for a root."),
        _c("root_session_id", pa.string(), "Top of the parent chain (itself for a root)."),
        _c("is_root", pa.bool_(), "True when the session has no parent."),
        _c("title", pa.string(), "Session title."),
        _c("created_at", TS, "When the session was created (UTC)."),
        _c("updated_at", TS, "Last update of the session row (UTC); roughly the last activity."),
        _c(
            "cost_usd",
            pa.float64(),
            "Session cost in USD. A root's cost ALREADY INCLUDES its sub-agents' cost: sum "
            "`cost_usd` over `is_root` rows only. A fork's cost is its own (see `inherited_cost_usd`). "
            "Null when unknown, never 0 for unknown. A DOUBLE as the agents record it: a plain `SUM` may "
            "end in float noise that changes with the order rows are read in (`3.3835550000000008`); "
            "`SUM(cost_usd::DECIMAL(38, 9))` is exact to the nano-dollar, as `daily_costs` and "
            "`agentlake report` sum it.",
            COST,
        ),
        _c(
            "cost_source",
            pa.string(),
            "`native` (the agent recorded it; a recorded 0 is a real 0), `estimated` (priced by us from "
            "tokens with the bundled price table), `configured` (some of its requests in `usage` were "
            "priced by config.toml's `[[prices]]` at the merge, none is unpriced; docs/CONFIG.md, "
            "\"Prices\"), `partial` (the sum of the priced requests in `usage`; "
            "some requests are unpriced) or `unknown` (no cost recorded and the model is unpriced, or the "
            "stored cost is not a number: text where a number belongs is reported as a warning, never a "
            "null `native`). A session that made no billed request (a probe, a `<synthetic>` error reply, "
            "an aborted turn) costs a known 0: `native` where the agent records costs (Crush, OpenCode, a "
            "CodeWhale cost snapshot), else `estimated` (Claude Code, Codex, a CodeWhale file without a "
            "snapshot and with no tokens).",
        ),
        _c("cost_includes_subagents", pa.bool_(), "True when `cost_usd` already holds the sub-agents' cost."),
        _c("forked_from_session_id", pa.string(), "The session this one was forked from (Amp, Qwen Code, Kimi CLI, pi: [AGENTS.md](AGENTS.md)); null otherwise."),
        _c(
            "inherited_cost_usd",
            pa.float64(),
            "For a fork: the parent's cost taken off the fork's snapshot, which copies the parent's "
            "totals. Null when not a fork, or when the parent's snapshot was not found.",
            COST,
        ),
        _c("model", pa.string(), "The session's model: as the agent records it per session (CodeWhale), or the model of its last request (Claude Code, Codex, OpenCode and most others); null where the agent records none for it (Crush, Codebuff; a Kimi CLI main agent, whose model is in a config file never opened)."),
        _c("llm_provider", pa.string(), "The session's LLM provider, where recorded per session; null otherwise."),
        _c(
            "total_tokens",
            pa.int64(),
            "One undivided token total, as the agent records it (CodeWhale; a fork's own part), or the "
            "sum of the session's own rows in `usage` (Claude Code, Codex, OpenCode; sub-agents not "
            "included). Null where not recorded (Crush).",
            TOKENS,
        ),
        _c("message_count", pa.int64(), "Messages in the session, as the agent counts them."),
        _c(
            "last_step_prompt_tokens",
            pa.int64(),
            "Crush `prompt_tokens`: the LAST step's input size (context occupancy), not a total. Null for other agents.",
            TOKENS,
        ),
        _c(
            "last_step_completion_tokens",
            pa.int64(),
            "Crush `completion_tokens`: the LAST step's output size, not a total. Null for other agents.",
            TOKENS,
        ),
        _c("summary_message_id", pa.string(), "Id of the compaction summary message, if any."),
        _c("todos", pa.string(), "The session's todo list as raw JSON (Crush >= v0.24), else null."),
        _c("extra_columns", pa.string(), "Unknown source columns of this row, as a JSON object; null if none."),
    ),
)

MESSAGES = Table(
    "messages",
    "One row per message (user, assistant, tool).",
    "created_at",
    LINEAGE
    + (
        _c("message_id", pa.string(), "Message id."),
        _c("session_id", pa.string(), "Owning session."),
        _c("message_index", pa.int64(), "0-based order within the session by (created_at, rowid): breaks same-second ties."),
        _c("role", pa.string(), "`user`, `assistant` or `tool`; also `system` (injected or meta lines: Claude Code, CodeWhale) and `developer` (Codex)."),
        _c("model", pa.string(), "Model id; null where the agent stored none (user and tool rows)."),
        _c("llm_provider", pa.string(), "LLM provider key (`anthropic`, `openai`, ...); null if none."),
        _c("created_at", TS, "When the message was created (UTC)."),
        _c("updated_at", TS, "Last update of the message (UTC)."),
        _c("finished_at", TS, "When the step finished (UTC); null for user/tool rows and unfinished steps."),
        _c("is_summary", pa.bool_(), "True for a compaction summary message."),
        _c("part_count", pa.int64(), "Parts in the message; null when its parts JSON could not be parsed."),
        _c("parts_ok", pa.bool_(), "False when the parts JSON was unparseable (the raw text is in `quarantine`)."),
        _c("extra_columns", pa.string(), "Unknown source columns of this row, as a JSON object; null if none."),
    ),
)

PARTS = Table(
    "parts",
    "One row per message part, exploded from the message's parts JSON. `raw` keeps the part's JSON.",
    "created_at",
    LINEAGE
    + (
        _c("message_id", pa.string(), "Owning message."),
        _c("session_id", pa.string(), "Owning session."),
        _c("part_index", pa.int64(), "0-based position in the message's parts array."),
        _c(
            "part_type",
            pa.string(),
            "The canonical part type, the same for every agent (Crush's names): `text`, `reasoning`, "
            "`tool_call`, `tool_result`, `finish`, `binary`, `image_url`, `shell_command`, "
            "`injected_context` (Codex: instructions and environment context injected as a user or "
            "developer message, not a prompt) or `other` (a type with no canonical equivalent, or one "
            "this version does not know: see `native_part_type` and `is_known_type`). Claude Code "
            "`thinking`/`redacted_thinking` are `reasoning`, `tool_use`/`server_tool_use` are `tool_call`, "
            "`image`/`document` are `binary`; CodeWhale the same; Codex `input_text`/`output_text` are "
            "`text`, `function_call`/`custom_tool_call`/`local_shell_call`/... are `tool_call` and their "
            "outputs `tool_result`, `input_image` is `image_url`; OpenCode `tool` is `tool_call` (one part "
            "holds the call and its result: the result columns are filled on it), `step-finish` is "
            "`finish`, `file` is `binary`, `step-start`, `snapshot`, `patch`, `agent`, `subtask`, "
            "`compaction` and `retry` are `other`.",
        ),
        _c("native_part_type", pa.string(), "The agent's own type name for the part, as stored (`thinking`, `tool_use`, `function_call`, `step-finish`, ...); null when the part has no type."),
        _c("is_known_type", pa.bool_(), "False for a part type this version does not know (kept raw, `part_type` `other`) or a known type in a shape it cannot read."),
        _c("role", pa.string(), "Role of the owning message."),
        _c("created_at", TS, "The owning message's `created_at` (UTC)."),
        _c("text", pa.string(), "text: the text."),
        _c("reasoning", pa.string(), "reasoning: the thinking text."),
        _c("reasoning_started_at", TS, "reasoning: start time, if recorded."),
        _c("reasoning_finished_at", TS, "reasoning: end time, if recorded."),
        _c("tool_call_id", pa.string(), "tool_call / tool_result: the call id."),
        _c("tool_name", pa.string(), "tool_call / tool_result: the tool name."),
        _c("tool_input", pa.string(), "tool_call: the arguments string exactly as stored (JSON text inside the JSON)."),
        _c("tool_result", pa.string(), "tool_result: the content text as stored."),
        _c("tool_result_metadata", pa.string(), "tool_result: the metadata string (JSON text) as stored."),
        _c("is_error", pa.bool_(), "tool_result: the tool-level error flag; null where the agent records none for the result (see `tool_calls.is_error`)."),
        _c("finish_reason", pa.string(), "finish: the reason (`end_turn`, `tool_use`, `stop`, ...)."),
        _c("finish_time", TS, "finish: the time; null when 0 (user and tool rows)."),
        _c("finish_message", pa.string(), "finish: error title, if any."),
        _c("finish_details", pa.string(), "finish: error details, if any."),
        _c("mime_type", pa.string(), "binary / tool_result: MIME type."),
        _c("binary_path", pa.string(), "binary: the attachment's path."),
        _c("binary_size", pa.int64(), "binary: decoded size in bytes of the base64 `Data`."),
        _c("url", pa.string(), "image_url: the URL."),
        _c("shell_command", pa.string(), "shell_command: the user's bang-mode command."),
        _c("shell_output", pa.string(), "shell_command: its output."),
        _c("shell_exit_code", pa.int64(), "shell_command: its exit code."),
        _c("raw", pa.string(), "The part's JSON, re-serialised compactly. Nothing is lost."),
    ),
)

TOOL_CALLS = Table(
    "tool_calls",
    "One row per tool call, joined to its result by (session, call id). Orphan results are kept with `has_call` false.",
    "called_at",
    LINEAGE
    + (
        _c("session_id", pa.string(), "Session of the call."),
        _c("message_id", pa.string(), "Assistant message holding the call (null for an orphan result)."),
        _c("result_message_id", pa.string(), "Message holding the result; null when there is none."),
        _c("tool_call_id", pa.string(), "Call id."),
        _c("tool_name", pa.string(), "Native tool name (`bash`, `edit`, `mcp_<server>_<tool>`, ...)."),
        _c("tool_category", pa.string(), "One of shell, read, edit, write, search, fetch, agent, todo, mcp, other."),
        _c("input", pa.string(), "Decoded arguments as compact JSON; null when absent or not valid JSON."),
        _c("input_raw", pa.string(), "Arguments string exactly as stored."),
        _c("is_input_valid", pa.bool_(), "False when the arguments string is empty or not a JSON object."),
        _c("command", pa.string(), "Shell command (bash), when present."),
        _c("file_path", pa.string(), "Target file path (edit, write, view, ...), when present; for a folder's listing (ls, list_dir, ...), the folder."),
        _c("has_call", pa.bool_(), "False for a result whose call was not found."),
        _c("has_result", pa.bool_(), "False when the call never got a result."),
        _c("is_error", pa.bool_(), "The result's tool-level error flag. Null without a result, and null with one when the agent records no error flag for it: Codex (true only when the tool could not run, told from its output), Aider (its `/run` output), Codebuff (`tool` blocks; a failed `agent` block is true) and Cursor (its text transcripts, and JSONL results without `is_error`). A non-zero exit is NOT an error here."),
        _c("exit_code", pa.int64(), "bash: exit code read from the result (`Exit code N`; 0 otherwise); null when aborted or not bash."),
        _c("result_text", pa.string(), "Result content with the trailing `<cwd>...</cwd>` tag stripped."),
        _c("result_cwd", pa.string(), "bash: the working directory from the stripped `<cwd>` tag."),
        _c("result_size", pa.int64(), "Size in UTF-8 bytes of `result_text`."),
        _c("called_at", TS, "Creation time of the calling message (UTC); of the result for an orphan."),
        _c("result_at", TS, "Creation time of the result message (UTC); an agent that keeps the result in the "
           "call's own record (Gemini CLI) records it once the call completed."),
    ),
)

FILE_VERSIONS = Table(
    "file_versions",
    "File history snapshots (Crush `files` table): full contents, not diffs.",
    "created_at",
    LINEAGE
    + (
        _c("file_id", pa.string(), "Row id."),
        _c("session_id", pa.string(), "Session that changed the file."),
        _c("path", pa.string(), "File path, resolved against the project directory."),
        _c("version", pa.int64(), "Version number (global per path: not contiguous within a session)."),
        _c("content", pa.string(), "Full file content at this version."),
        _c("size_bytes", pa.int64(), "UTF-8 size of `content`."),
        _c("content_sha256", pa.string(), "SHA-256 of `content`."),
        _c("created_at", TS, "When the snapshot was stored (UTC)."),
        _c("updated_at", TS, "Row update time (UTC); equal to created_at in practice."),
        _c("extra_columns", pa.string(), "Unknown source columns of this row, as a JSON object; null if none."),
    ),
)

READ_FILES = Table(
    "read_files",
    "When an agent last read or wrote each file (Crush >= v0.37).",
    "read_at",
    LINEAGE
    + (
        _c("session_id", pa.string(), "Session."),
        _c("path", pa.string(), "Path resolved against the project directory."),
        _c("path_raw", pa.string(), "Path as stored (relative to the agent's working directory)."),
        _c("read_at", TS, "Last read (UTC)."),
    ),
)

USAGE = Table(
    "usage",
    "One row per billed model request, with tokens in disjoint buckets: "
    "`total_tokens = input_uncached_tokens + cache_read_tokens + cache_write_5m_tokens + "
    "cache_write_1h_tokens + output_tokens`. A bucket the agent does not record is null, never 0. "
    "Crush, CodeWhale and the Cursor CLI agent record no per-request usage: they have no rows here (see `sessions`); "
    "Codebuff's rows are its requests without token counts (every bucket null).",
    "requested_at",
    LINEAGE
    + (
        _c("session_id", pa.string(), "Session that made the request (a sub-agent's own session for its requests)."),
        _c("message_id", pa.string(), "Message that holds the response, where the agent has one; else null."),
        _c("request_id", pa.string(), "The agent's request or response id (Claude `requestId`, ...); null if none."),
        _c("requested_at", TS, "When the response was recorded (UTC)."),
        _c("model", pa.string(), "Model id as the agent records it."),
        _c("llm_provider", pa.string(), "LLM provider (`anthropic`, `openai`, ...); null if not recorded."),
        _c("is_sidechain", pa.bool_(), "True for a sub-agent's request (Claude sidechains, Codex spawned threads, OpenCode child sessions)."),
        _c("input_uncached_tokens", pa.int64(), "Input tokens neither read from nor written to the cache.", TOKENS),
        _c("cache_read_tokens", pa.int64(), "Input tokens read from the prompt cache.", TOKENS),
        _c("cache_write_5m_tokens", pa.int64(), "Input tokens written to the cache with a 5-minute TTL (or an unknown TTL).", TOKENS),
        _c("cache_write_1h_tokens", pa.int64(), "Input tokens written to the cache with a 1-hour TTL.", TOKENS),
        _c("output_tokens", pa.int64(), "Output tokens, reasoning included.", TOKENS),
        _c("reasoning_tokens", pa.int64(), "The reasoning part of `output_tokens` (informational, never added); null where not recorded.", TOKENS),
        _c("total_tokens", pa.int64(), "Sum of the five disjoint buckets (null buckets count as 0; null when all are null).", TOKENS),
        _c("cost_usd", pa.float64(), "Cost of the request in USD; null when unknown, never 0 for unknown.", COST),
        _c("cost_source", pa.string(), "`native` (the agent recorded it), `estimated` (priced offline from the bundled table with the provider's cache multipliers), `configured` (priced at the merge by config.toml's `[[prices]]`, which replace `estimated` and `unknown` costs, never `native` ones; docs/CONFIG.md, \"Prices\") or `unknown` (unpriced model)."),
        _c("pricing_note", pa.string(), "How the cost was found: the matched price-table model, the configured price (`configured price for MODEL since DATE`), or why there is none."),
    ),
)

QUARANTINE = Table(
    "quarantine",
    "Rows that could not be parsed, kept whole with the reason.",
    "created_at",
    LINEAGE
    + (
        _c("key", pa.string(), "Key of the bad row (message id, ...)."),
        _c("error", pa.string(), "Why it could not be parsed."),
        _c("raw", pa.string(), "The unparsed text."),
        _c("created_at", TS, "The row's own time when known, else the run time (UTC)."),
    ),
)

SOURCES = Table(
    "sources",
    "One row per discovered source and run: what was read and how it went.",
    "run_at",
    (
        _c("provider", pa.string(), f"Agent, by its provider name: {_AGENT_LIST} (docs/AGENTS.md)."),
        _c("machine", pa.string(), "Machine that ran the ingestion."),
        _c("user", pa.string(), "User that ran the ingestion."),
        _c("source_id", pa.string(), _SOURCE_ID),
        _c("partition_key", pa.string(), "The source's slug (`<provider>-<project>-<id>`, never a path): "
           "its name in progress lines and `agentlake sources`. Its Dagster partition is "
           "`<provider>-<project>`."),
        _c("project_path", pa.string(), "Project directory."),
        _c("db_path", pa.string(), "The store's path (a crush.db, a project folder; for a source per project of an agent with a file per session, the folder that holds its sessions' files)."),
        _c("run_id", pa.string(), "Id of the ingestion run."),
        _c("run_at", TS, "When the run looked at the source (UTC)."),
        _c("status", pa.string(), "`ok` (ingested), `unchanged` (fingerprint and project names unchanged, skipped cheaply), `skipped` (project directory gone, or store refused: the reason is in `error`) or `failed`."),
        _c("error", pa.string(), "Why it failed or was skipped; null when ok."),
        _c("warnings", pa.string(), "Non-fatal findings (unknown columns or part types, millisecond timestamps, quarantined rows); null if none."),
        _c("schema_version", pa.int64(), "The store's format version: Crush's goose version (MAX(version_id) of goose_db_version), a session file's own version for the others; for an agent landed by project (a file per session), the oldest among the project's sessions."),
        _c("migrations", pa.int64(), "Number of Crush migrations applied (4, 5, 6 or 7); null for other agents."),
        _c("fingerprint", pa.string(), "Size and mtime of the store's files (a db and its -wal); for a source per project, `N sessions:` and a hash of its sessions' own."),
        _c("sessions", pa.int64(), "Rows written to `sessions` (null unless ok)."),
        _c("messages", pa.int64(), "Rows written to `messages`."),
        _c("parts", pa.int64(), "Rows written to `parts`."),
        _c("tool_calls", pa.int64(), "Rows written to `tool_calls`."),
        _c("file_versions", pa.int64(), "Rows written to `file_versions`."),
        _c("read_files", pa.int64(), "Rows written to `read_files`."),
        _c("quarantined", pa.int64(), "Rows written to `quarantine`."),
        _c("unknown_part_types", pa.int64(), "Parts of an unknown type (kept raw)."),
        _c("retained_sessions", pa.int64(), "Sessions the lake holds that the source no longer does (pruned by the agent): kept, never deleted. "
          "Claude Code's deleted transcripts are landed again from its read cache: its warnings count them instead."),
        _c("duration_s", pa.float64(), "Seconds spent on the source in this run."),
    ),
)

DATA_TABLES = (SESSIONS, MESSAGES, PARTS, TOOL_CALLS, FILE_VERSIONS, READ_FILES, USAGE, QUARANTINE)
ALL_TABLES = DATA_TABLES + (SOURCES,)
BY_NAME = {t.name: t for t in ALL_TABLES}
# The data tables an agent fills when it keeps no file history of its own (file_versions and
# read_files are Crush's): one it leaves out lands empty, and one the contract has not fails the
# source (warehouse.land.landing_files.check_rows).
TRANSCRIPT_TABLES = tuple(t.name for t in (SESSIONS, MESSAGES, PARTS, TOOL_CALLS, USAGE, QUARANTINE))

# The canonical `parts.part_type` vocabulary (Crush's names, plus two): every agent maps to it.
PART_TYPES = ("text", "reasoning", "tool_call", "tool_result", "finish", "binary", "image_url", "shell_command",
              "injected_context", "other")

TOOL_CATEGORIES = ("shell", "read", "edit", "write", "search", "fetch", "agent", "todo", "mcp", "other")


def _fingerprint() -> str:
    import hashlib

    text = repr([(t.name, [(c.name, str(c.type)) for c in t.columns]) for t in ALL_TABLES])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# Changes whenever a column is added, removed or retyped: sources written under another
# version are rewritten on the next run, so every file of a table has the same schema.
SCHEMA_VERSION = _fingerprint()
