"""The campaign machinery: the layer above the defenses and attacks that drives them.

A campaign file (`config`) expands into cells (`cells`); the cells that share a training run
are cut into jobs (`jobs`) that an executor runs (`executors`: this process, local workers,
Ray); each finding family turns what its attack returns into results rows
(`inversion_findings`, `membership_findings`, `audit_findings`); `run` drives it all and alone
appends the rows to the results store. Only the CLI stands above this package; the engine,
the defenses and the attacks never import it (tests/test_layers.py).
"""
