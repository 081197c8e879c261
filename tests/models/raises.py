def helper():
    raise RuntimeError("a bug in the user's model file")


def build():
    return helper()
