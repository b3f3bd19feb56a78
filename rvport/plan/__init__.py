"""The pure planner: catalogue + request + host facts -> Plan."""
