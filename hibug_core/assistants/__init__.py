"""hibug for assistants: the debugging loop served over the Model Context Protocol (`hibug mcp`), its tools declared
over the operations and the read views the CLI and the pages use."""
