"""A machine's life from this computer's side: the registry of machines (``machines``), the
teardown gate that decides whether a release may happen (``gate``), the release itself through
that gate (``teardown``), and the one place a human is asked (``approvals``: a terminal prompt
or a recorded approval; library code takes a ``Consent`` and never prompts)."""
