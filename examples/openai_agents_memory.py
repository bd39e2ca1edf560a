"""An OpenAI Agents SDK agent whose history and long-term memory live in arbormem.

Run: OPENAI_API_KEY=... python examples/openai_agents_memory.py [memory.db] ["question"]
(OPENAI_BASE_URL points it at any OpenAI-compatible server; MODEL names the model.)
"""

import os
import sys

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI

from arbormem import Memory
from arbormem.integrations.openai_agents import ArbormemSession, memory_tools

set_tracing_disabled(True)  # no traces sent anywhere
model = OpenAIChatCompletionsModel(
    model=os.environ.get("MODEL", "gpt-4o-mini"), openai_client=AsyncOpenAI()
)
db = sys.argv[1] if len(sys.argv) > 1 else "memory.db"
question = sys.argv[2] if len(sys.argv) > 2 else "What do I like to drink?"

with Memory(db, user="alice") as mem:
    agent = Agent(
        name="helper",
        instructions="Search your memory before answering questions about the user.",
        tools=memory_tools(mem),
        model=model,
    )
    session = ArbormemSession(mem, "chat-1")  # this conversation's history
    result = Runner.run_sync(agent, question, session=session)
    print(result.final_output)
