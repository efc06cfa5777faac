-- reads: nothing
-- _listings(): the tools that list a folder (Crush's, Aider's and pi's `ls`, Claude Code's and
-- Droid's `LS`, Codex's `list_dir`, Gemini CLI's `list_directory`, OpenCode's `list`, Goose's
-- `tree`, Kilo's `list_code_definition_names`, ...), by name, lower-cased. They are in the `read`
-- category, and their `file_path` is the folder they name: the marts about files (file_activity,
-- the insights' _file_calls) count no read of a file for them. A call's name is matched without
-- an extension's prefix (Goose's `developer__tree`): lower(regexp_replace(tool_name, '^.*?__', '')).
CREATE OR REPLACE MACRO _listings() AS TABLE
SELECT unnest(['ls', 'list', 'list_dir', 'list_directory', 'list_files', 'read_dir', 'tree',
               'list_code_definition_names']) AS tool_name
