"""Claude Code (``~/.claude/projects/<project>/<session>.jsonl``): the first source adapter.

Everything specific to Claude Code's transcripts lives here: record kinds and their fields,
attachments as the model saw them, the record tree and its branches, resumed files, the
compaction fork. ``adapter.ClaudeCodeAdapter`` is what the registry sees.
"""
