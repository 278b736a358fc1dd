"""`rgt ui`: a local, read-only dashboard (cancel excepted) over the state DB and one patrol.

``app`` holds the routes, ``auth`` the token gate, ``patrol`` the one background task that reads
every machine through the same path as `rgt watch`, ``views`` the documents the pages and the
JSON API share, ``metrics`` the training-curve readers and ``findings`` the VERIFY/DELIVER
results. Starlette and uvicorn are imported only inside this package (`rgt --help` never pays
for them).
"""
