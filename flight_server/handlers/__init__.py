"""The work behind each Flight RPC, one module per kind: scan, take, exchange, put, actions."""
