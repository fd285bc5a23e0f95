"""Object stores, the range planner and ranged readers."""
