"""What every adapter is built from: the one settings surface, the kit, the tool texts."""
