"""CodeWhale's native tool names -> the shared categories (docs/FORMATS.md, "CodeWhale: tools")."""

from transforms.tools import categorise

_CATEGORY = {
    "exec_shell": "shell", "task_shell_start": "shell", "task_shell_wait": "shell", "bash": "shell",
    "run_tests": "shell",
    "read_file": "read", "read": "read", "list_dir": "read", "project_map": "read", "lsp": "read",
    "diagnostics": "read", "git_status": "read", "git_diff": "read", "git_log": "read", "git_show": "read",
    "git_blame": "read",
    "write_file": "write", "write": "write",
    "edit_file": "edit", "edit": "edit", "fim_edit": "edit", "apply_patch": "edit",
    "grep_files": "search", "file_search": "search", "web_search": "search", "web.run": "search",
    "memory_search": "search",
    "fetch_url": "fetch",
    "agent": "agent",
    "update_plan": "todo",
}
COMMAND_KEYS = ("command", "cmd")
FILE_KEYS = ("file_path", "path", "target_file", "file")


def tool_category(name: str | None) -> str:
    if name and name.startswith("agents/"):
        return "agent"
    if name and name.startswith(("todo_", "checklist_", "terminal_")):
        return "todo" if not name.startswith("terminal_") else "shell"
    return categorise(name, _CATEGORY)
