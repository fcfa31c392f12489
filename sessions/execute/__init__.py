"""Execute: a prepared experiment's trials run (in order, in worker processes or on Ray), under shared
limits, a watchdog and the operator's control socket; the MCP tool server agents play through.
"""
