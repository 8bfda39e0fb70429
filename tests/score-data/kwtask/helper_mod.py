def same(a, b):
    return 1.0 if a.strip().lower() == b.strip().lower() else 0.0
