"""A LangGraph graph whose long-term memory (its store) lives in arbormem.

Run: python examples/langgraph_store.py [memory.db]
The "model" node here is a stand-in that calls the memory tools; put a chat model there.
"""

import sys

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from arbormem import Memory
from arbormem.integrations.langgraph import ArbormemStore, memory_tool_node


def model(state: MessagesState) -> dict:
    last = state["messages"][-1]
    if last.type == "human":  # remember what the user said...
        call = {"name": "remember", "args": {"fact": last.content}, "id": "1"}
    elif last.content.startswith("remembered"):  # ...then look it up again
        call = {"name": "search_memory", "args": {"query": "what does Alice drink?"}, "id": "2"}
    else:
        return {"messages": [AIMessage(f"I know: {last.content}")]}
    return {"messages": [AIMessage("", tool_calls=[call])]}


with Memory(sys.argv[1] if len(sys.argv) > 1 else "memory.db") as mem:
    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", memory_tool_node(("{user_id}", "memories")))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", lambda s: "tools" if s["messages"][-1].tool_calls else END)
    graph.add_edge("tools", "model")
    app = graph.compile(store=ArbormemStore(mem))
    config = {"configurable": {"user_id": "alice"}}
    result = app.invoke({"messages": [("user", "Alice drinks green tea.")]}, config)
    print(result["messages"][-1].content)
