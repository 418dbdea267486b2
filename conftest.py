"""Repository-wide pytest configuration."""

# ``__main__`` modules run their program on import; doctest collection must not import them.
collect_ignore_glob = ["*/__main__.py"]
