"""mnemo under the agent frameworks: thin adapters, one module each, each
importing its framework only when it is imported itself (so `import mnemo`
and `import mnemo.integrations` never import a framework).

    mnemo.integrations.langchain    MnemoVectorStore (langchain-core VectorStore)
    mnemo.integrations.langgraph    MnemoStore (langgraph BaseStore)
    mnemo.integrations.llama_index  MnemoVectorStore (llama-index BasePydanticVectorStore)
    mnemo.integrations.mem0         MnemoVectorStore (mem0 vector store provider "mnemo")

Install a framework with its extra: pip install "mnemo[langchain]" (or
langgraph, llama-index, mem0). docs/integrations.md maps each framework's
filters onto mnemo's and lists what each adapter supports.
"""
