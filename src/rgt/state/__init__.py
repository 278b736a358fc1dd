"""The local state store: machines, jobs, pulls and approvals in SQLite under ``$RGT_HOME``.

store.py      the Store (one short transaction per write; WAL for concurrent readers)
_dbfile.py    refuse an empty, cut or garbled database file instead of recreating it
_dbwrite.py   sqlite's disk-full, read-only and locked errors as StateWriteError
"""
