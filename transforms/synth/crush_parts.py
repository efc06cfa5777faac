"""Low-level pieces of a Crush ``crush.db``: the exact DDL and the ``parts`` JSON builders.

Everything here mirrors upstream charmbracelet/crush as documented in docs/FORMATS.md,
"Crush: schema and migrations" and "Crush: the parts JSON". Stdlib only: used by tests, the demo
command and benchmarks.
"""

from __future__ import annotations

import base64
import json
import os
import posixpath

# goose's bookkeeping table, byte-for-byte as pressly/goose (sqlite3 dialect) creates it;
# the tabs matter because sqlite_master stores the text verbatim.
GOOSE_DDL = (
    "CREATE TABLE goose_db_version (\n"
    "\t\tid INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "\t\tversion_id INTEGER NOT NULL,\n"
    "\t\tis_applied INTEGER NOT NULL,\n"
    "\t\ttstamp TIMESTAMP DEFAULT (datetime('now'))\n"
    "\t);"
)

# (goose version_id, name, goose Up section) in apply order. The text is upstream's, verbatim
# (including the wrong "milliseconds" comments): SQLite keeps it in sqlite_master, and
# ALTER TABLE ADD COLUMN splices into it, so only replaying these reproduces the real schema text.
MIGRATIONS: list[tuple[int, str, str]] = [
    (20250424200609, "initial", """\
-- Sessions
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    parent_session_id TEXT,
    title TEXT NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0 CHECK (message_count >= 0),
    prompt_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
    completion_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (completion_tokens>= 0),
    cost REAL NOT NULL DEFAULT 0.0 CHECK (cost >= 0.0),
    updated_at INTEGER NOT NULL,  -- Unix timestamp in milliseconds
    created_at INTEGER NOT NULL   -- Unix timestamp in milliseconds
);

CREATE TRIGGER IF NOT EXISTS update_sessions_updated_at
AFTER UPDATE ON sessions
BEGIN
UPDATE sessions SET updated_at = strftime('%s', 'now')
WHERE id = new.id;
END;

-- Files
CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    version INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,  -- Unix timestamp in milliseconds
    updated_at INTEGER NOT NULL,  -- Unix timestamp in milliseconds
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE,
    UNIQUE(path, session_id, version)
);

CREATE INDEX IF NOT EXISTS idx_files_session_id ON files (session_id);
CREATE INDEX IF NOT EXISTS idx_files_path ON files (path);

CREATE TRIGGER IF NOT EXISTS update_files_updated_at
AFTER UPDATE ON files
BEGIN
UPDATE files SET updated_at = strftime('%s', 'now')
WHERE id = new.id;
END;

-- Messages
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    parts TEXT NOT NULL default '[]',
    model TEXT,
    created_at INTEGER NOT NULL,  -- Unix timestamp in milliseconds
    updated_at INTEGER NOT NULL,  -- Unix timestamp in milliseconds
    finished_at INTEGER,  -- Unix timestamp in milliseconds
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE
);

CREATE INDEX IF NOT EXISTS idx_messages_session_id ON messages (session_id);

CREATE TRIGGER IF NOT EXISTS update_messages_updated_at
AFTER UPDATE ON messages
BEGIN
UPDATE messages SET updated_at = strftime('%s', 'now')
WHERE id = new.id;
END;

CREATE TRIGGER IF NOT EXISTS update_session_message_count_on_insert
AFTER INSERT ON messages
BEGIN
UPDATE sessions SET
    message_count = message_count + 1
WHERE id = new.session_id;
END;

CREATE TRIGGER IF NOT EXISTS update_session_message_count_on_delete
AFTER DELETE ON messages
BEGIN
UPDATE sessions SET
    message_count = message_count - 1
WHERE id = old.session_id;
END;

"""),
    (20250515105448, "add_summary_message_id", """\
ALTER TABLE sessions ADD COLUMN summary_message_id TEXT;
"""),
    (20250624000000, "add_created_at_indexes", """\
-- Add indexes on created_at columns for better ORDER BY performance
CREATE INDEX IF NOT EXISTS idx_sessions_created_at ON sessions (created_at);
CREATE INDEX IF NOT EXISTS idx_messages_created_at ON messages (created_at);
CREATE INDEX IF NOT EXISTS idx_files_created_at ON files (created_at);
"""),
    (20250627000000, "add_provider_to_messages", """\
-- Add provider column to messages table
ALTER TABLE messages ADD COLUMN provider TEXT;
"""),
    (20250810000000, "add_is_summary_message", """\
ALTER TABLE messages ADD COLUMN is_summary_message INTEGER DEFAULT 0 NOT NULL;
"""),
    (20250812000000, "add_todos_to_sessions", """\
ALTER TABLE sessions ADD COLUMN todos TEXT;
"""),
    (20260127000000, "add_read_files_table", """\
CREATE TABLE IF NOT EXISTS read_files (
    session_id TEXT NOT NULL CHECK (session_id != ''),
    path TEXT NOT NULL CHECK (path != ''),
    read_at INTEGER NOT NULL,  -- Unix timestamp in seconds when file was last read
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE CASCADE,
    PRIMARY KEY (path, session_id)
);

CREATE INDEX IF NOT EXISTS idx_read_files_session_id ON read_files (session_id);
CREATE INDEX IF NOT EXISTS idx_read_files_path ON read_files (path);
"""),
]

# number of applied migrations -> max goose version_id (docs/FORMATS.md, "Crush: schema and migrations")
STAGES: dict[int, int] = {n: MIGRATIONS[n - 1][0] for n in (4, 5, 6, 7)}


# ---------------------------------------------------------------------------
# JSON the way Go's encoding/json writes it
# ---------------------------------------------------------------------------

# Go escapes these even inside strings (HTML safety); they can only occur inside JSON strings,
# so replacing them in the encoded text is safe.
_GO_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


# one reusable encoder: json.dumps(**kwargs) builds a new one per call, which shows in profiles
_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_spaced = json.JSONEncoder(ensure_ascii=False).encode


def go_json(value) -> str:
    """Compact JSON with non-ASCII kept and <, >, & escaped, like Go's json.Marshal."""
    s = _compact(value)
    for ch, esc in _GO_ESCAPES:
        if ch in s:
            s = s.replace(ch, esc)
    return s


def encode_parts(parts: list) -> str:
    """The text Crush stores in messages.parts (marshalParts)."""
    return go_json(parts)


# ---------------------------------------------------------------------------
# part builders: {"type": kind, "data": {...}} with upstream's key order (docs/FORMATS.md, "Crush: the parts JSON")
# ---------------------------------------------------------------------------

def text_part(text: str) -> dict:
    return {"type": "text", "data": {"text": text}}


def reasoning_part(thinking, *, signature="", started_at=None, finished_at=None, responses_data=None,
                   thought_signature="", tool_id="") -> dict:
    data = {"thinking": thinking, "signature": signature, "thought_signature": thought_signature,
            "tool_id": tool_id, "responses_data": responses_data}
    # omitempty ints: absent when 0/unset
    if started_at:
        data["started_at"] = started_at
    if finished_at:
        data["finished_at"] = finished_at
    return {"type": "reasoning", "data": data}


def tool_call_part(call_id, name, input, *, finished=True, legacy=False) -> dict:
    # input is the provider's argument JSON as *text*, so it ends up JSON-inside-JSON
    if not isinstance(input, str):
        input = _compact(input)
    if legacy:  # before v0.13.0: extra "type", no provider_executed
        data = {"id": call_id, "name": name, "input": input, "type": "function", "finished": finished}
    else:
        data = {"id": call_id, "name": name, "input": input, "provider_executed": False, "finished": finished}
    return {"type": "tool_call", "data": data}


def tool_result_part(call_id, name, content, *, is_error=False, metadata=None, data="", mime_type="",
                     legacy=False) -> dict:
    # metadata is itself Go-marshalled JSON stored as a string (decode twice)
    if metadata is None:
        metadata = ""
    elif not isinstance(metadata, str):
        metadata = go_json(metadata)
    if legacy:  # before v0.13.0 there were no data/mime_type fields
        d = {"tool_call_id": call_id, "name": name, "content": content, "metadata": metadata, "is_error": is_error}
    else:
        d = {"tool_call_id": call_id, "name": name, "content": content, "data": data, "mime_type": mime_type,
             "metadata": metadata, "is_error": is_error}
    return {"type": "tool_result", "data": d}


def finish_part(reason, time=0, message=None, details=None) -> dict:
    data = {"reason": reason, "time": time}
    if message:  # omitempty
        data["message"] = message
    if details:
        data["details"] = details
    return {"type": "finish", "data": data}


def binary_part(path, mime, data: bytes | None) -> dict:
    # untagged Go struct: capitalised keys; []byte marshals as standard base64, nil as null
    b64 = None if data is None else base64.b64encode(data).decode("ascii")
    return {"type": "binary", "data": {"Path": path, "MIMEType": mime, "Data": b64}}


def image_url_part(url, detail=None) -> dict:
    data = {"url": url}
    if detail:
        data["detail"] = detail
    return {"type": "image_url", "data": data}


def shell_command_part(command, output, exit_code) -> dict:
    return {"type": "shell_command", "data": {"command": command, "output": output, "exit_code": exit_code}}


def bash_output(stdout, stderr="", exit_code=0, cwd="/home/u/proj", aborted=False) -> str:
    """Crush's bash tool result text (formatOutput in internal/agent/tools/bash.go)."""
    err = stderr
    if not err and exit_code and not aborted:
        err = f"exit status {exit_code}"  # Go's exec error text stands in for empty stderr
    if aborted:
        err = (err + "\n" if err else "") + "Command was aborted before completion"
    elif exit_code:
        err = (err + "\n" if err else "") + f"Exit code {exit_code}"
    out = stdout
    if stdout and stderr:
        out += "\n"
    if err:
        out += "\n" + err
    if not out:
        return "no output"
    return f"{out}\n\n<cwd>{cwd}</cwd>"


# ---------------------------------------------------------------------------
# vocabulary for realistic-looking content (kept small: the benchmark writes ~1M rows)
# ---------------------------------------------------------------------------

THINGS = ["cart", "order", "invoice", "user", "session", "config", "cache", "router", "parser",
          "scheduler", "webhook", "token", "payment", "report", "search", "upload"]
VERBS = ["load", "parse", "validate", "render", "fetch", "store", "retry", "sync"]

# per language: source dirs, file extension, and the shell commands a model would run
LANGS = {
    "go": {"dirs": ["internal/{t}", "pkg/{t}", "cmd/server"], "ext": ".go", "test": "go test ./...",
           "build": "go build ./...", "lint": "go vet ./..."},
    "py": {"dirs": ["src/app/{t}", "src/app", "tests"], "ext": ".py", "test": "pytest -q",
           "build": "python -m compileall -q src", "lint": "ruff check ."},
    "ts": {"dirs": ["src/{t}", "src/components", "src/api"], "ext": ".ts", "test": "npm test -- --silent",
           "build": "npm run build", "lint": "npx eslint src"},
}

PROMPTS = [
    "Fix the failing test in {file}",
    "Add pagination to the {thing} endpoint",
    "Why does `{build}` fail? It says \"undefined: {Thing}\"",
    "Refactor {file} so that <Header> & <Footer> share the {thing} layout",
    "Kannst du die Fehlermeldung in {file} verbessern? Danke 🙏",
    "Write tests for {verb}{Thing} and make sure `{test}` passes",
    "The {thing} cache is never invalidated after an update, can you look into it?",
    "Rename {Thing}Service to {Thing}Store everywhere",
    "Explain how the {thing} flow works end to end",
    "add retries with backoff to the {thing} client (max 3 attempts)",
]
TITLES = [
    "Fix failing {thing} tests", "Add pagination to {thing} API", "Investigate flaky CI build",
    "Refactor {thing} module", "Explain {thing} flow", "Rename {Thing}Service", "Add {thing} retries",
    "Improve {thing} error messages", "{Thing} cache invalidation bug", "Write tests for {verb}{Thing}",
]
TEXTS = [
    "I'll start by looking at {file}.", "Let me check the existing tests first.",
    "Found it: `{verb}{Thing}` returns early when the id is empty.", "Now let me run the tests.",
    "The build is green again ✅", "I'll search for other usages of `{Thing}` before changing it.",
]
FINAL_TEXTS = [
    "Done. I changed `{verb}{Thing}` in {file} and `{test}` passes now.",
    "Summary of changes:\n- {file}: validate the {thing} id\n- added a test for the empty case\n\nAll tests pass.",
    "The {thing} flow goes router → handler → store. The cache is only written on reads, "
    "so updates must call `invalidate` & re-fetch.",
    "I couldn't reproduce the failure locally; `{test}` passes. It may be flaky in CI (timing in the {thing} tests).",
]
THOUGHTS = [
    "The user wants changes around {thing}. I should read {file} first, then run `{test}`.",
    "Edge case: an empty id. {verb}{Thing} should return an error instead of nil.",
    "Let me think about whether the cache & the store can diverge here... yes, on concurrent writes.",
]


def fill(rng, template: str, file: str, lang: str) -> str:
    t = rng.choice(THINGS)
    v = rng.choice(VERBS)
    spec = LANGS[lang]
    return template.format(file=file, thing=t, Thing=t.capitalize(), verb=v, Verb=v.capitalize(),
                           build=spec["build"], test=spec["test"])


def file_content(rng, lang: str, thing: str) -> str:
    """A short source file; lines are reused by edit/view so keep it compact."""
    T = thing.capitalize()
    funcs = []
    for v in rng.sample(VERBS, rng.randint(1, 2)):
        V = v.capitalize()
        if lang == "go":
            funcs.append(f"// {V}{T} {v}s a {thing} by id.\nfunc {V}{T}(ctx context.Context, id string) error {{\n"
                         f"\tif id == \"\" {{\n\t\treturn fmt.Errorf(\"{thing}: empty id\")\n\t}}\n\treturn nil\n}}")
        elif lang == "py":
            funcs.append(f"def {v}_{thing}(item_id: str) -> dict:\n    if not item_id:\n"
                         f"        raise ValueError(\"empty id\")\n    return {{\"id\": item_id, \"ok\": True}}")
        else:
            funcs.append(f"export async function {v}{T}(id: string): Promise<{T}> {{\n"
                         f"  const res = await api.get(`/{thing}s/${{id}}`);\n"
                         f"  if (res.status >= 400 && res.status !== 404) throw new Error(\"{v} failed\");\n"
                         f"  return res.data as {T};\n}}")
    head = {"go": f"package {thing}\n\nimport (\n\t\"context\"\n\t\"fmt\"\n)",
            "py": f"\"\"\"{T} helpers.\"\"\"\nfrom __future__ import annotations",
            "ts": "import { api } from \"../api\";"}[lang]
    return head + "\n\n" + "\n\n".join(funcs) + "\n"


def view_output(content: str, offset: int = 0) -> str:
    """Crush's view result: numbered lines (6-wide, then '|') inside <file> tags."""
    lines = content.split("\n")
    body = "\n".join(f"{i + 1 + offset:6d}|{line}" for i, line in enumerate(lines))
    return f"<file>\n{body}\n</file>"


def bash_run(rng, lang: str, thing: str):
    """-> (command, description, stdout, stderr, exit_code, seconds) for a plausible command."""
    spec = LANGS[lang]
    r = rng.random()
    if r < 0.30:  # tests: sometimes failing with a non-zero exit (still not a tool error)
        if rng.random() < 0.35:
            out = (f"--- FAIL: Test{thing.capitalize()} (0.00s)\n    {thing}_test: expected 3, got 2\nFAIL"
                   if lang == "go" else f"FAILED tests/test_{thing}.py::test_empty_id\n1 failed, 12 passed")
            return spec["test"], "Run the test suite", out, "", 1, rng.randint(2, 40)
        out = f"ok  {thing}  0.{rng.randint(10, 99)}s\n14 passed"
        return spec["test"], "Run the test suite", out, "", 0, rng.randint(2, 40)
    if r < 0.45:
        return "git status --short", "Show working tree status", f" M {thing}{spec['ext']}\n?? notes.md", "", 0, 0
    if r < 0.55:
        return "git diff --stat", "Show diff summary", f" {thing}{spec['ext']} | 4 ++--\n 1 file changed", "", 0, 0
    if r < 0.65:  # stderr only, non-zero exit
        err = f"{thing}{spec['ext']}:12:2: unused variable 'tmp'"
        return spec["lint"], "Run the linter", "", err, 1, rng.randint(1, 9)
    if r < 0.72:  # silent success -> "no output"
        return "mkdir -p build/tmp", "Create build dir", "", "", 0, 0
    if r < 0.80:
        return f"rg -n \"{thing}\" --type-add 'src:*{spec['ext']}' -tsrc | head -5", "Search usages", \
            f"src/{thing}{spec['ext']}:3:{thing} := load()\nsrc/api{spec['ext']}:41:// {thing} & co", "", 0, 0
    if r < 0.90:
        return spec["build"], "Build the project", "", "", 0, rng.randint(3, 30)
    return "ls -la", "List files", "total 24\ndrwxr-xr-x  5 u u 4096 .\n-rw-r--r--  1 u u  812 README.md", "", 0, 0


# ---------------------------------------------------------------------------
# the session simulator behind generate_store
# ---------------------------------------------------------------------------

# (provider, model, tool-call id style, $/prompt token (mostly cache reads), $/completion token)
MODELS = [
    ("anthropic", "claude-sonnet-4-5", "toolu", 0.3e-6, 15e-6),
    ("anthropic", "claude-haiku-4-5", "toolu", 0.1e-6, 5e-6),
    ("openai", "gpt-5.1", "call", 0.125e-6, 10e-6),
    ("openai", "gpt-5.1-codex", "call", 0.125e-6, 10e-6),
    ("openrouter", "gemini-2.5-pro", "call", 0.31e-6, 10e-6),
]
FLAT_RATE = ("hyper", "claude-sonnet-4-5", "toolu", 0.0, 0.0)  # subscription: Crush records cost 0

# tool -> weight, per kind of session; the stage decides which names exist
# (docs/FORMATS.md, "Crush: cost and token semantics")
ROOT_TOOLS = {"view": 24, "bash": 20, "edit": 13, "grep": 8, "glob": 6, "write": 5, "ls": 4, "todos": 4,
              "multiedit": 3, "agent": 3, "diagnostics": 3, "fetch": 2, "agentic_fetch": 1,
              "mcp_github_create_issue": 1}
CHILD_TOOLS = {"agent": {"view": 5, "grep": 4, "glob": 3, "ls": 1}, "fetch": {"web_fetch": 5, "grep": 1, "view": 1}}
_CHILD_TITLES = {"agent": "New Agent Session", "fetch": "Fetch Analysis"}
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_CANCELLED = "Error: user cancelled assistant tool calling"
_FAILED = "There was an error while executing the tool"


class SimSession:
    __slots__ = ("id", "parent", "title", "count", "prompt", "completion", "cost", "updated", "created",
                 "summary", "todos", "model", "kind", "ctx")

    def __init__(self, id, parent, title, created, model, kind):
        self.id, self.parent, self.title, self.created, self.updated = id, parent, title, created, created
        self.model, self.kind = model, kind
        self.count = self.prompt = self.completion = self.ctx = 0
        self.cost = 0.0
        self.summary = self.todos = None

    def row(self) -> tuple:  # sessions columns in migration order (later stages slice the tail off)
        todos = go_json(self.todos) if self.todos else None  # NULL when empty
        return (self.id, self.parent, self.title, self.count, self.prompt, self.completion, self.cost,
                self.updated, self.created, self.summary, todos)


class DbSim:
    """Simulates Crush sessions for one project and buffers the rows; counts truth as it goes.

    ``self.t`` is the simulated clock (Unix seconds), shared by a session and its sub-agents.
    """

    def __init__(self, rng, stage: int, root: str, truth):
        self.rng, self.stage, self.root, self.truth = rng, stage, root, truth
        # in every path written (the project's and its neighbours'), as the JSON text holds it
        self.base = go_json(os.path.dirname(root))[1:-1]
        self.lang = rng.choice(sorted(LANGS))
        self.sessions: list[SimSession] = []
        self.messages: list[tuple] = []  # messages columns in migration order
        self.files: list[tuple] = []
        self.reads: list[list] = []  # [session_id, rel_path, read_at]
        self.marks: dict[int, tuple] = {}  # root session index -> (len messages, files, reads) before it
        self._read_idx: dict = {}
        self._latest: dict = {}  # (session, path) -> content of that session's newest version
        self._max_version: dict = {}  # path -> MAX(version) over all sessions
        self.contents: dict = {}  # path -> current on-disk content
        spec = LANGS[self.lang]
        self.paths = {}  # project files: absolute path -> thing
        for thing in rng.sample(THINGS, 8):
            d = rng.choice(spec["dirs"]).format(t=thing)
            self.paths[posixpath.join(root, d, thing + spec["ext"])] = thing
        self.path_list = list(self.paths)  # for rng.choice; kept in step with self.paths
        self._rel: dict = {}
        self.t = 0

    # -- ids -------------------------------------------------------------------------------
    def uuid(self) -> str:
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"

    def call_id(self, style) -> str:
        if style == "toolu":
            return "toolu_01" + "".join(self.rng.choices(_ALNUM, k=22))
        return "call_" + "".join(self.rng.choices(_ALNUM, k=24))

    # -- row buffers + truth ---------------------------------------------------------------
    def new_session(self, parent, title, kind, model, id=None) -> SimSession:
        s = SimSession(id or self.uuid(), parent.id if parent else None, title, self.t, model, kind)
        self.sessions.append(s)
        self.truth.sessions += 1
        return s

    def msg(self, s, role, parts, created, updated, finished=None, model="", provider=None, summary=0, id=None):
        enc = encode_parts(parts)
        mid = id or self.uuid()
        self.messages.append((mid, s.id, role, enc, model, created, updated, finished, provider, summary))
        s.count += 1
        # ~4 chars per token: context grows with the conversation, not with the length of the
        # folder the projects are in (a seed gives the same costs wherever the store is written)
        s.ctx += (len(enc) - enc.count(self.base) * len(self.base)) >> 2
        if updated > s.updated:
            s.updated = updated
        tr = self.truth
        tr.messages += 1
        for p in parts:
            kind = p["type"]
            tr.parts_by_type[kind] += 1
            if kind == "tool_call":
                tr.tool_calls_by_name[p["data"]["name"]] += 1
            elif kind == "tool_result" and p["data"]["is_error"]:
                tr.tool_errors += 1
        return mid

    def file_row(self, s, path, content, version):
        self.files.append((self.uuid(), s.id, path, content, version, self.t, self.t))
        self._latest[(s.id, path)] = content
        if version > self._max_version.get(path, -1):
            self._max_version[path] = version
        self.truth.file_versions += 1

    def change_file(self, s, path, old, new):
        """internal/history: version 0 = pre-change content per session, then global MAX+1."""
        key = (s.id, path)
        if key not in self._latest:
            self.file_row(s, path, old, 0)
        elif self._latest[key] != old:  # changed by hand since our last snapshot
            self.file_row(s, path, old, self._max_version[path] + 1)
        self.file_row(s, path, new, self._max_version[path] + 1)
        self.contents[path] = new

    def record_read(self, s, path):
        if self.stage < 7:  # read_files only exists from migration 007
            return
        key = (s.id, self.rel(path))  # relative to Crush's cwd (= the project dir)
        i = self._read_idx.get(key)
        if i is None:
            self._read_idx[key] = len(self.reads)
            self.reads.append([key[0], key[1], self.t])
            self.truth.read_files += 1
        else:
            self.reads[i][2] = self.t  # upsert

    def content(self, path) -> str:
        c = self.contents.get(path)
        if c is None:
            thing = self.paths.get(path)
            c = file_content(self.rng, self.lang, thing) if thing else "# shared-lib\n\nCommon helpers & <templates>.\n"
            self.contents[path] = c
        return c

    # -- sessions --------------------------------------------------------------------------
    def run(self, n_sessions: int, start, days: int) -> int:
        rng, base = self.rng, int(start.timestamp())
        plan = []
        for i in range(n_sessions):
            midnight = i % 6 == 3  # starts late evening and continues after UTC midnight
            tod = rng.randint(84600, 85800) if midnight else rng.randint(7 * 3600, 22 * 3600)
            plan.append((base + rng.randrange(days) * 86400 + tod, i, midnight))
        plan.sort()
        for t0, i, midnight in plan:
            self.marks[len(self.sessions)] = (len(self.messages), len(self.files), len(self.reads))
            self.t = t0
            self.root_session(flat=(i == 1), midnight=midnight)
        self.truth.root_sessions = len(self.marks)
        self.truth.root_cost = sum(s.cost for s in self.sessions if s.parent is None)
        return max((s.updated for s in self.sessions), default=base)

    def split_point(self) -> int:
        """A root-session index: sessions from here on go to the WAL when checkpoint=False."""
        roots = sorted(self.marks)
        return roots[(2 * len(roots)) // 3] if roots else 0

    def root_session(self, flat: bool, midnight: bool):
        rng = self.rng
        model = FLAT_RATE if flat else rng.choice(MODELS)
        s = self.new_session(None, fill(rng, rng.choice(TITLES), "", self.lang), "root", model)
        if not flat:
            s.cost += round(rng.uniform(0.0002, 0.002), 6)  # title generation is billed to the session
        turns = rng.choices((1, 2, 3, 4, 5, 6), (15, 25, 25, 15, 12, 8))[0]
        if midnight:
            turns = max(turns, 2)
        summary_after = rng.randrange(turns) if turns >= 2 and rng.random() < 0.25 else -1
        for k in range(turns):
            if k:
                self.t += rng.randint(20, 900)  # the user reads, thinks, types
                if midnight and k == 1:
                    self.t = (self.t // 86400 + 1) * 86400 + rng.randint(30, 1200)
            if self.stage >= 7 and rng.random() < 0.06:
                self.bang(s)
            self.turn(s, fill(rng, rng.choice(PROMPTS), self.rel(rng.choice(self.path_list)), self.lang))
            if k == summary_after:
                self.summarize(s)

    def rel(self, path):
        r = self._rel.get(path)
        if r is None:  # relpath is slow and called for most steps: cache it
            r = self._rel[path] = posixpath.relpath(path, self.root)
        return r

    def bang(self, s):
        """A user-typed `!cmd` (bang mode, v0.78+): stored as a user message, no LLM involved."""
        cmd, _d, out, err, code, secs = bash_run(self.rng, self.lang, self.rng.choice(THINGS))
        parts = [shell_command_part(cmd, out + ("\n" + err if err else ""), code), finish_part("stop", 0)]
        self.msg(s, "user", parts, self.t, self.t)
        self.t += secs + self.rng.randint(2, 30)

    def turn(self, s, prompt, steps=None):
        rng = self.rng
        parts = [text_part(prompt)]
        if s.kind == "root" and rng.random() < 0.08:  # an attachment: small image or pasted text
            if rng.random() < 0.5:
                data = b"\x89PNG\r\n\x1a\n" + rng.randbytes(24)
                parts.append(binary_part(posixpath.join(self.root, "screenshot.png"), "image/png", data))
            else:
                parts.append(binary_part("paste_1.txt", "text/plain",
                                         None if rng.random() < 0.2 else b"panic: nil map\n  at main.go:12"))
        parts.append(finish_part("stop", 0))
        self.msg(s, "user", parts, self.t, self.t)
        self.t += rng.randint(0, 2)
        if steps is None:
            steps = rng.choices((1, 2, 3, 4, 5, 6, 8, 10), (12, 18, 18, 15, 12, 10, 9, 6))[0]
        for i in range(steps):
            if not self.step(s, final=(i == steps - 1)):
                return

    def usage(self, s):
        """Per-step usage: cost accumulates, tokens are overwritten (context occupancy)."""
        _p, _m, _st, p_in, p_out = s.model
        s.prompt, s.completion = 9000 + s.ctx, self.rng.randint(30, 1500)
        s.cost += round(s.prompt * p_in + s.completion * p_out, 6)

    def summarize(self, s):
        provider, model, _st, _pi, p_out = s.model
        t0, self.t = self.t, self.t + self.rng.randint(5, 40)
        thing = self.rng.choice(THINGS)
        text = f"## Summary\n\nWorked on the {thing} module across {len(self.paths)} files; tests pass."
        parts = [text_part(text), finish_part("end_turn", self.t)]
        # is_summary_message exists from v0.13 (stage 5); before that only summary_message_id marks it
        s.summary = self.msg(s, "assistant", parts, t0, self.t, self.t, model, provider, int(self.stage >= 5))
        s.prompt, s.completion = 0, self.rng.randint(300, 1500)
        s.ctx = s.completion
        s.cost += round(s.completion * p_out, 6)

    def reasoning(self, provider, thought, t0, t1):
        rng = self.rng
        if provider == "openai":
            if self.stage < 5:  # Responses API support arrived in v0.13
                return None
            meta = {"item_id": f"rs_{rng.getrandbits(96):024x}", "encrypted_content": None, "summary": [thought]}
            if self.stage >= 6 or rng.random() < 0.5:  # v0.18.1+ wraps it with a type tag
                meta = {"type": "openai.responses.reasoning_metadata", "data": meta}
            return reasoning_part(thought, responses_data=meta, started_at=t0, finished_at=t1)
        sig = base64.b64encode(rng.randbytes(36)).decode()
        if provider == "openrouter":
            return reasoning_part(thought, thought_signature=sig, started_at=t0, finished_at=t1)
        return reasoning_part(thought, signature=sig, started_at=t0, finished_at=t1)

    def step(self, s, final: bool) -> bool:
        """One assistant message (+ its tool results). False ends the turn early."""
        rng, stage = self.rng, self.stage
        provider, model, style = s.model[:3]
        t0 = self.t
        if rng.random() < 0.015:  # process killed mid-step: row created as [] and never finished
            self.msg(s, "assistant", [], t0, t0 + rng.randint(0, 20), None, model, provider)
            self.t += rng.randint(20, 120)
            return False
        mid = self.uuid()
        calls, outcome = [], None
        if not final:
            calls = [self.plan_call(s, mid, style) for _ in range(rng.choices((1, 2, 3), (60, 28, 12))[0])]
            r = rng.random()
            if r < 0.03:
                outcome = "canceled"
            elif r < 0.06 and calls[0][1] in ("bash", "edit", "write", "multiedit", "mcp_github_create_issue"):
                outcome, calls = "denied", calls[:1]
            elif r < 0.07:
                outcome = "error"
        parts = []
        file = self.rel(rng.choice(self.path_list))
        think = t0 + rng.randint(1, 8)
        if rng.random() < 0.55:
            p = self.reasoning(provider, fill(rng, rng.choice(THOUGHTS), file, self.lang), t0, think)
            if p:
                parts.append(p)
        if final:
            parts.append(text_part(fill(rng, rng.choice(FINAL_TEXTS), file, self.lang)))
        elif rng.random() < 0.5:
            parts.append(text_part(fill(rng, rng.choice(TEXTS), file, self.lang)))
        for j, (cid, name, inp, _run) in enumerate(calls):
            unfinished = outcome == "canceled" and j == len(calls) - 1 and rng.random() < 0.5
            parts.append(tool_call_part(cid, name, "{}" if unfinished else inp, finished=not unfinished,
                                        legacy=stage < 5))
        fin = think + rng.randint(1, 20) + 3 * len(calls)
        reason, message, details = ("tool_use" if calls else "end_turn"), None, None
        if outcome == "canceled":
            reason = "canceled"
        elif outcome == "denied":
            reason = "permission_denied" if stage <= 6 else "end_turn"  # removed in v0.63
        elif outcome == "error":
            reason, message, details = "error", "Provider error", "429 Too Many Requests: rate limit exceeded"
        elif final and rng.random() < 0.03:
            reason = "max_tokens"
        parts.append(finish_part(reason, fin, message, details))
        self.usage(s)
        self.msg(s, "assistant", parts, t0, fin, fin, model, provider, id=mid)
        self.t = fin
        if calls:
            self.results(s, calls, outcome, provider)
        return outcome is None

    def results(self, s, calls, outcome, provider):
        legacy, batch = self.stage < 5, []
        for cid, name, _inp, run in calls:
            meta = None
            if outcome == "canceled":
                content, err, secs = _CANCELLED, True, 0
            elif outcome == "error":
                content, err, secs = _FAILED, True, 0
            elif outcome == "denied":
                content, err, secs = "User denied permission", True, self.rng.randint(2, 30)
            else:
                content, meta, err, secs = run()
            self.t += secs
            part = tool_result_part(cid, name, content, is_error=err, metadata=meta, legacy=legacy)
            if legacy:
                batch.append(part)
            else:  # v0.13+: one tool row per result
                self.msg(s, "tool", [part, finish_part("stop", 0)], self.t, self.t)
        if legacy:  # v0.1-v0.12: one tool row for the whole step, provider set on it
            self.msg(s, "tool", batch + [finish_part("stop", 0)], self.t, self.t, provider=provider)

    # -- tools: plan_call returns (call id, name, input JSON text, run) ----------------------
    def plan_call(self, s, mid, style):
        rng, stage = self.rng, self.stage
        table = ROOT_TOOLS if s.kind == "root" else CHILD_TOOLS[s.kind]
        while True:
            name = rng.choices(list(table), list(table.values()))[0]
            if name in ("todos", "agentic_fetch", "web_fetch") and stage < 6:
                continue
            break
        cid = self.call_id(style)
        inp, run = getattr(self, "tool_" + name)(s, mid, cid)
        if name == "diagnostics" and stage >= 5:
            name = "lsp_diagnostics"  # renamed in v0.13
        # the provider's argument text; openrouter's models tend to space it out
        enc = _spaced if s.model[0] == "openrouter" else _compact
        return cid, name, enc(inp), run

    def pick(self):
        return self.rng.choice(self.path_list)

    def tool_view(self, s, mid, cid):
        rng = self.rng
        path = self.pick() if rng.random() > 0.05 else posixpath.normpath(
            posixpath.join(self.root, "../shared-lib/README.md"))  # outside the project: read_files gets ../
        inp = {"file_path": path}
        if rng.random() < 0.15:
            inp.update(offset=0, limit=200)

        def run():
            if rng.random() < 0.04:
                return f"File not found: {path}", None, True, 0
            c = self.content(path)
            self.record_read(s, path)
            return view_output(c), {"file_path": path, "content": c}, False, 0
        return inp, run

    def tool_edit(self, s, mid, cid, multi=False):
        rng = self.rng
        path = self.pick()
        lines = [ln for ln in self.content(path).split("\n") if ln.strip()]
        olds = rng.sample(lines, min(len(lines), rng.randint(2, 3) if multi else 1))
        note = "  # checked" if self.lang == "py" else "  // checked"
        edits = [{"old_string": o, "new_string": o.replace("empty id", "missing id") if "empty id" in o else o + note}
                 for o in olds]
        inp = {"file_path": path, "edits": edits} if multi else {"file_path": path, **edits[0]}

        def run():
            old = self.content(path)
            if rng.random() < 0.03:  # the user touched the file in their editor meanwhile
                old = self.contents[path] = old + "\n"
            new = old
            for e in edits:
                if e["old_string"] not in new:
                    return ("old_string not found in file. Make sure it matches exactly, including whitespace "
                            "and line breaks", None, True, 0)
                new = new.replace(e["old_string"], e["new_string"], 1)
            self.change_file(s, path, old, new)
            self.record_read(s, path)
            meta = {"additions": len(edits), "removals": len(edits), "old_content": old, "new_content": new}
            text = f"Applied {len(edits)} edits to file: {path}" if multi else f"Content replaced in file: {path}"
            return f"<result>\n{text}\n</result>", meta, False, 0
        return inp, run

    def tool_multiedit(self, s, mid, cid):
        return self.tool_edit(s, mid, cid, multi=True)

    def tool_write(self, s, mid, cid):
        rng = self.rng
        thing = rng.choice(THINGS)
        spec = LANGS[self.lang]
        path = posixpath.join(self.root, spec["dirs"][0].format(t=thing), f"{thing}_extra{spec['ext']}")
        text = file_content(rng, self.lang, thing)
        inp = {"file_path": path, "content": text}

        def run():
            old = self.contents.get(path, "")  # "" = new file
            if path not in self.paths:
                self.paths[path] = thing
                self.path_list.append(path)
            self.change_file(s, path, old, text)
            self.record_read(s, path)
            added = text.count("\n")
            diff = f"--- a/{self.rel(path)}\n+++ b/{self.rel(path)}\n@@ -0,0 +1,{added} @@\n" + "".join(
                "+" + ln + "\n" for ln in text.split("\n")[:-1])
            return (f"<result>\nFile successfully written: {path}\n</result>",
                    {"diff": diff, "additions": added, "removals": old.count("\n")}, False, 0)
        return inp, run

    def tool_bash(self, s, mid, cid):
        rng = self.rng
        cmd, desc, out, err, code, secs = bash_run(rng, self.lang, rng.choice(THINGS))
        bg = secs > 20 and rng.random() < 0.2
        inp = {"command": cmd, "description": desc}
        if bg:
            inp["run_in_background"] = True

        def run():
            start = self.t * 1000 + rng.randint(0, 999)  # bash metadata times are milliseconds
            meta = {"start_time": start, "end_time": start + secs * 1000 + rng.randint(5, 900), "output": out,
                    "description": desc, "working_directory": self.root}
            if bg:
                meta.update(end_time=start + 40, output="", background=True, shell_id="001")
                return "Background shell started with ID: 001", meta, False, 0
            return bash_output(out, err, code, cwd=self.root), meta, False, secs
        return inp, run

    def tool_glob(self, s, mid, cid):
        ext = LANGS[self.lang]["ext"]
        inp = {"pattern": f"**/*{ext}", "path": self.root}
        return inp, lambda: ("\n".join(sorted(self.paths)) or "No files found", None, False, 0)

    def tool_grep(self, s, mid, cid):
        rng = self.rng
        thing = rng.choice(THINGS)
        hits = [p for p, t in self.paths.items() if t == thing]
        inp = {"pattern": f"func .*{thing.capitalize()}", "include": f"*{LANGS[self.lang]['ext']}"}
        body = "".join(f"{p}:\n  Line {rng.randint(3, 40)}: {thing} := {rng.choice(VERBS)}(ctx)\n" for p in hits)
        return inp, lambda: (f"Found {len(hits)} matches\n{body}" if hits else "No files found", None, False, 0)

    def tool_ls(self, s, mid, cid):
        tree = "".join(f"  - {self.rel(p)}\n" for p in sorted(self.paths))
        return {"path": self.root}, lambda: (f"- {self.root}/\n{tree}", None, False, 0)

    def tool_fetch(self, s, mid, cid):
        rng = self.rng
        thing = rng.choice(THINGS)
        inp = {"url": f"https://docs.example.dev/{thing}?lang=en&v=2", "format": "markdown"}
        if rng.random() < 0.1:
            return inp, lambda: ("Request failed with status code: 404", None, True, 1)
        return inp, lambda: (f"# {thing.capitalize()} API\n\nRate limit: 100 req/min & burst 20.", None, False,
                             rng.randint(1, 4))

    def tool_web_fetch(self, s, mid, cid):
        inp, run = self.tool_fetch(s, mid, cid)
        return {"url": inp["url"]}, run

    def tool_todos(self, s, mid, cid):
        rng = self.rng
        todos = [{"content": fill(rng, "Update {verb}{Thing}", "", self.lang),
                  "status": rng.choice(("pending", "in_progress", "completed")),
                  "active_form": fill(rng, "Updating {verb}{Thing}", "", self.lang)} for _ in range(rng.randint(2, 5))]

        def run():
            s.todos = todos
            done = sum(t["status"] == "completed" for t in todos)
            return f"Todo list updated successfully.\n\nStatus: {done}/{len(todos)} completed", None, False, 0
        return {"todos": todos}, run

    def tool_mcp_github_create_issue(self, s, mid, cid):
        rng = self.rng
        n = rng.randint(10, 900)
        proj = posixpath.basename(self.root)
        inp = {"owner": "acme", "repo": proj, "title": fill(rng, "{Thing} cache is stale", "", self.lang),
               "body": "Steps to reproduce:\n1. update\n2. read"}
        if rng.random() < 0.08:
            return inp, lambda: ("MCP error -32603: 401 Bad credentials", None, True, 1)
        return inp, lambda: (go_json({"number": n, "html_url": f"https://github.com/acme/{proj}/issues/{n}",
                                      "state": "open"}), None, False, 1)

    def tool_diagnostics(self, s, mid, cid):
        path = self.pick()
        thing = self.paths[path].capitalize()
        if self.rng.random() < 0.6:
            return {"file_path": path}, lambda: ("No diagnostics found", None, False, 0)
        out = (f"<file_diagnostics>\nError: {path}:12:5 [lsp] undefined: {thing}\n</file_diagnostics>\n\n"
               "<diagnostic_summary>\nCurrent file: 1 errors, 0 warnings\n</diagnostic_summary>")
        return {"file_path": path}, lambda: (out, None, False, 0)

    def tool_agent(self, s, mid, cid, kind="agent"):
        rng = self.rng
        if kind == "fetch":
            inp = {"url": f"https://docs.example.dev/{rng.choice(THINGS)}",
                   "prompt": fill(rng, "Summarize the {thing} API limits", "", self.lang)}
        else:
            inp = {"prompt": fill(rng, "Find every place that constructs a {Thing} and list the files", "",
                                  self.lang)}

        def run():
            # sub-agent session: id ties it to the calling message + call (v0.13+), else the call id
            child = self.new_session(s, _CHILD_TITLES[kind], kind, s.model,
                                     id=f"{mid}$${cid}" if self.stage >= 5 else cid)
            self.turn(child, inp["prompt"], steps=rng.randint(2, 4))
            s.cost += child.cost  # updateParentSessionCost: the parent's cost includes the child's
            final = json.loads(self.messages[-1][3])
            texts = [p["data"]["text"] for p in final if p["type"] == "text"]
            return (texts[0] if texts else "The agent stopped without an answer."), None, False, 0
        return inp, run

    def tool_agentic_fetch(self, s, mid, cid):
        return self.tool_agent(s, mid, cid, kind="fetch")
