"""Adapters that put arbormem under the agent frameworks people already use.

Each adapter is one module, importing its framework only when it is imported
itself (install the matching extra):

* :mod:`arbormem.integrations.openai_agents`: a ``Session`` for the OpenAI Agents
  SDK and memory tools (``search_memory``, ``remember``), ``arbormem[openai-agents]``;
* :mod:`arbormem.integrations.langgraph`: a LangGraph ``BaseStore`` whose
  namespaces are arbormem scopes, and a prebuilt memory tool node, ``arbormem[langgraph]``;
* :mod:`arbormem.integrations.langchain`: a LangChain chat message history,
  ``arbormem[langchain]``;
* :mod:`arbormem.integrations.claude_code`: Claude Code hooks that store every
  prompt and reply and add recalled memory before each prompt (no extra needed).

Every adapter takes a memory: an :class:`arbormem.Memory`, an
:class:`arbormem.AsyncMemory`, or any object with their method names (the HTTP
client), and calls only that public API.
"""
