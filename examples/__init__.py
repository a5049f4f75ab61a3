"""Worked examples of code written outside privaudit's packages, which privaudit never imports and
does not install: `laplace_gossip.py` is a third-party defense with its extractor, audited by
`laplace_gossip.toml`."""
