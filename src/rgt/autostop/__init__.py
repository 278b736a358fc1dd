"""Autostop: the meter stops by itself, and only once the results are safe.

A human arms a policy at a terminal (`rgt approve NAME --autostop …`, ``arm``); the machine's
agent applies it (``rgt.agent._autostop``): the profile's (or ``--self-stop``'s) reversible stop,
only after every job ended and every artifact is verified on storage that survives the stop;
spend caps checkpoint before they stop; preemption notices ask the jobs to checkpoint at once.
``forecast`` says what a run would cost before any meter starts.
"""
