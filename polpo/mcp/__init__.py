"""polpo's MCP client: the servers of ``[mcp.servers]`` as an LLM agent's tools, on the official ``mcp`` SDK.

* :mod:`.stdio` starts a stdio server the way polpo starts every program (its own process group, held by the
  guard and the orphan sweeps, the attempt's marker, the minimal environment) and hands the SDK's ``Client`` the
  message streams;
* :mod:`.connection` is one server's connection: started when first needed, a timeout per call, a server that
  crashes, hangs or breaks the protocol turned into a reason, and restarted by the next call;
* :mod:`.tools` turns a server's tools into a model's tools (``SERVER.TOOL``, schemas, results as text);
* :mod:`.session` is what one attempt (or one agent, for shared servers) holds: its servers and their tools.
"""
