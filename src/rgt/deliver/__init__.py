"""DELIVER: from verified results to what a paper or a model card says. The evidence store
(``runs``, ``evidence``), reconciled numbers (``reconcile``: every copy of a claimed number and
the ones that drifted), documents and figures generated from the evidence (``render``,
``figures``), the disclosure gate (``gate``), a repro pack (``repro``), and the upload of a
job's verified artifacts to a Hugging Face Hub repo (``hub``, ``hub_push``)."""
