"""Generated protobuf modules (do not edit; run ./dev protos)."""
