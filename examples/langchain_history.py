"""A LangChain chat history kept in arbormem, recalled across conversations.

Run: python examples/langchain_history.py [memory.db]
"""

import sys

from langchain_core.messages import AIMessage, HumanMessage

from arbormem import Memory
from arbormem.integrations.langchain import ArbormemChatMessageHistory

with Memory(sys.argv[1] if len(sys.argv) > 1 else "memory.db", user="alice") as mem:
    history = ArbormemChatMessageHistory(mem, "chat-1")
    history.add_messages([HumanMessage("My cat is called Miso."), AIMessage("Hello Miso!")])
    print([m.content for m in history.messages])
    # Another conversation later: the first one is recalled by search.
    print(mem.search("what is my cat's name?", k=1)[0].message.content)
