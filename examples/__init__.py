"""Worked examples of code written outside privaudit's packages, which privaudit never imports and
does not install: `laplace_gossip.py` is a third-party defense with its whole view (extractor, model
view, canary channel with its law), audited by `laplace_gossip.toml`; `share_gossip.py` is one whose
claim is false, with extractors only, refuted law-free by `share_gossip.toml`."""
