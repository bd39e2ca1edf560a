"""What Claude Code does with arbormem's hooks, played by hand.

Install them for real with:  arbormem integrations claude-code install
This script sends the hook command the JSON Claude Code sends, for two sessions.
Run: python examples/claude_code_hooks.py [memory.db]
"""

import json
import subprocess
import sys

db = sys.argv[1] if len(sys.argv) > 1 else "memory.db"
hook = [sys.executable, "-m", "arbormem", "--db", db, "integrations", "claude-code", "hook"]


def send(event: dict) -> str:
    done = subprocess.run(hook, input=json.dumps(event), capture_output=True, text=True, check=True)
    return done.stdout


# Session one: a prompt and Claude's reply are stored.
send({"hook_event_name": "UserPromptSubmit", "session_id": "one", "prompt": "Our API uses Flask."})
send({"hook_event_name": "Stop", "session_id": "one", "last_assistant_message": "Noted: Flask."})
# Session two: the prompt comes back with what session one said about it.
out = send(
    {
        "hook_event_name": "UserPromptSubmit",
        "session_id": "two",
        "prompt": "Which framework does our API use?",
    }
)
print(json.loads(out)["hookSpecificOutput"]["additionalContext"])
